"""Recorded references: GGUF identity, atomic save, load by file + prompt + n_gen."""

import shutil

import pytest

from zincbench import records, reference_store
from zincbench.errors import InputError
from zincbench.reference_store import Reference, gguf_identity
from zincbench.testing.tiny_gguf import write_suppressed_copy, write_tiny_llama


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("models")
    base = write_tiny_llama(d / "tiny.gguf", n_layers=1)
    return {
        "base": base,
        "copy": shutil.copyfile(base, d / "copy.gguf"),
        "reseeded": write_tiny_llama(d / "reseeded.gguf", n_layers=1, seed=1),  # same layout, other weights
        "deeper": write_tiny_llama(d / "deeper.gguf", n_layers=2),
        "suppressed": write_suppressed_copy(base, d / "suppressed.gguf", [300]),
    }


def test_header_identity_follows_layout_not_weights(models):
    base = gguf_identity(models["base"])
    assert base.startswith("header:")
    assert gguf_identity(models["copy"]) == base
    assert gguf_identity(models["reseeded"]) == base
    assert gguf_identity(models["deeper"]) != base


def test_full_identity_sees_every_byte(models):
    base = gguf_identity(models["base"], full=True)
    assert base.startswith("full:") and gguf_identity(models["copy"], full=True) == base
    assert gguf_identity(models["suppressed"], full=True) != base
    assert gguf_identity(models["reseeded"], full=True) != base


def test_identity_of_a_non_gguf(tmp_path):
    (tmp_path / "x.gguf").write_text("not a model")
    with pytest.raises(InputError, match="not a readable GGUF"):
        gguf_identity(tmp_path / "x.gguf")
    with pytest.raises(InputError, match="GGUF not found"):
        gguf_identity(tmp_path / "missing.gguf")


def _reference(gguf, prompt="The capital of France is", n_gen=3) -> Reference:
    return Reference(gguf=str(gguf), identity=gguf_identity(gguf), prompt=prompt, n_gen=n_gen, prompt_ids=[1, 2],
                     generated_ids=[5, 6, 7][:n_gen], top2=[(5, 2.5, 9, 1.0), (6, 1.0, 8, 0.9), (7, 3.0, 4, -1.0)][:n_gen],
                     producer={"llama_cpp_python": "test"})


def test_save_and_load_round_trip(models, tmp_path):
    ref = _reference(models["base"])
    path, _ = reference_store.save(ref, tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no temp files left behind
    assert records.read(path)["kind"] == "reference"
    loaded = reference_store.load(tmp_path, models["base"], ref.prompt, ref.n_gen)
    assert loaded == ref
    assert loaded.margin(0) == pytest.approx(1.5) and loaded.margin(1) == pytest.approx(0.1)


def test_reference_applies_to_the_same_file_name_with_the_same_layout(models, tmp_path):
    reference_store.save(_reference(models["base"]), tmp_path)
    other = tmp_path / "elsewhere"
    other.mkdir()
    moved = shutil.copyfile(models["suppressed"], other / "tiny.gguf")
    assert reference_store.load(tmp_path, moved, "The capital of France is", 3).generated_ids == [5, 6, 7]


@pytest.mark.parametrize("change", [{"prompt": "Hello"}, {"n_gen": 2}, {"gguf": "deeper"}, {"full": True}])
def test_load_misses_for_another_prompt_length_layout_or_hash(models, tmp_path, change):
    reference_store.save(_reference(models["base"]), tmp_path)
    gguf = models[change.get("gguf", "base")]
    with pytest.raises(InputError, match="zincbench validate record"):
        reference_store.load(tmp_path, gguf, change.get("prompt", "The capital of France is"), change.get("n_gen", 3),
                             full=change.get("full", False))


def test_a_corrupt_reference_is_input_error(models, tmp_path):
    path, _ = reference_store.save(_reference(models["base"]), tmp_path)
    doc = records.read(path)
    del doc["results"][0]["top2_logit"]
    path.write_text(__import__("json").dumps(doc))
    with pytest.raises(InputError, match="not a valid reference document"):
        reference_store.load(tmp_path, models["base"], "The capital of France is", 3)


def test_suppressed_copy_zeroes_only_the_chosen_rows(models):
    from gguf import GGUFReader

    def head(path):
        return next(t for t in GGUFReader(path).tensors if t.name == "output.weight").data

    base, suppressed = head(models["base"]), head(models["suppressed"])
    assert not suppressed[300].any() and base[300].any()
    rest = [i for i in range(len(base)) if i != 300]
    assert (suppressed[rest] == base[rest]).all()


@pytest.mark.parametrize("rows", [2, 4])
def test_a_reference_with_other_than_n_gen_rows_is_input_error(models, tmp_path, rows):
    path, _ = reference_store.save(_reference(models["base"]), tmp_path)
    doc = records.read(path)
    doc["results"] = (doc["results"] * 2)[:rows]
    path.write_text(__import__("json").dumps(doc))
    with pytest.raises(InputError, match=f"holds {rows} token rows for n_gen 3"):
        reference_store.load(tmp_path, models["base"], "The capital of France is", 3)


def test_a_different_reference_is_never_overwritten_without_force(models, tmp_path):
    path, _ = reference_store.save(_reference(models["base"]), tmp_path)
    before = path.read_bytes()
    assert reference_store.save(_reference(models["base"]), tmp_path) == (path, None)  # identical: left alone
    assert path.read_bytes() == before
    other = _reference(models["base"])
    other.generated_ids = [5, 6, 8]  # e.g. recorded from other weights with the same header
    other.top2 = [(5, 2.5, 9, 1.0), (6, 1.0, 8, 0.9), (8, 3.0, 4, -1.0)]
    assert reference_store.conflict(other, tmp_path) == path
    with pytest.raises(InputError, match="already holds a different reference .* --force"):
        reference_store.save(other, tmp_path)
    assert path.read_bytes() == before and len(list(tmp_path.iterdir())) == 1

    replaced, aside = reference_store.save(other, tmp_path, force=True)
    assert replaced == path and aside.name.startswith(path.stem + ".replaced-") and aside.read_bytes() == before
    assert reference_store.load(tmp_path, models["base"], other.prompt, 3).generated_ids == [5, 6, 8]


def test_a_gguf_with_a_duplicated_key_is_one_input_error(tmp_path):
    import struct

    from zincbench.errors import InputError
    from zincbench.reference_store import gguf_identity

    key = b"general.name"
    kv = struct.pack("<Q", len(key)) + key + struct.pack("<II", 4, 1)  # a UINT32 value, twice under one key
    header = b"GGUF" + struct.pack("<IQQ", 3, 0, 2) + kv + kv
    path = tmp_path / "dup.gguf"
    path.write_bytes(header + b"\0" * (-len(header) % 32))
    with pytest.raises(InputError, match="not a readable GGUF file.*Duplicate general.name"):
        gguf_identity(path)
