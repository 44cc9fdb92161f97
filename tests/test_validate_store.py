"""Recorded references: GGUF identity, atomic save, load by file + prompt + n_gen."""

import copy
import json
import math
import shutil

import pytest

from zincbench import records, reference_store
from zincbench.errors import InputError
from zincbench.reference_store import Reference, TokenRow, gguf_identity
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


TOKENS = [TokenRow(5, 2.5, 9, 1.0), TokenRow(6, 1.0, 8, 0.9), TokenRow(7, 3.0, 4, -1.0)]


def _reference(gguf, prompt="The capital of France is", n_gen=3) -> Reference:
    return Reference(
        gguf=str(gguf),
        identity=gguf_identity(gguf),
        prompt=prompt,
        n_gen=n_gen,
        prompt_ids=[1, 2],
        generated_ids=[5, 6, 7][:n_gen],
        tokens=TOKENS[:n_gen],
        producer={"llama_cpp_python": "test"},
    )


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
        reference_store.load(
            tmp_path,
            gguf,
            change.get("prompt", "The capital of France is"),
            change.get("n_gen", 3),
            full=change.get("full", False),
        )


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
    other.tokens = [*TOKENS[:2], TokenRow(8, 3.0, 4, -1.0)]
    assert reference_store.conflict(other, tmp_path) == path
    with pytest.raises(InputError, match="already holds a different reference .* --force"):
        reference_store.save(other, tmp_path)
    assert path.read_bytes() == before and len(list(tmp_path.iterdir())) == 1

    replaced, aside = reference_store.save(other, tmp_path, force=True)
    assert replaced == path and aside.name.startswith(path.stem + ".replaced-") and aside.read_bytes() == before
    assert reference_store.load(tmp_path, models["base"], other.prompt, 3).generated_ids == [5, 6, 8]


def _other(gguf, last: int) -> Reference:
    ref = _reference(gguf)
    ref.generated_ids = [5, 6, last]
    ref.tokens = [*TOKENS[:2], TokenRow(last, 3.0, 4, -1.0)]
    return ref


def test_force_when_another_recording_replaced_the_old_file_meanwhile_ends_cleanly(models, tmp_path, monkeypatch):
    """The race of two `validate record --force`: the old reference is gone by the time this one sets it aside."""
    path, _ = reference_store.save(_reference(models["base"]), tmp_path)
    real_conflict = reference_store.conflict

    def conflict_then_vanish(reference, directory):
        found = real_conflict(reference, directory)
        if found is not None:
            found.unlink()  # the other process got there first
        return found

    monkeypatch.setattr(reference_store, "conflict", conflict_then_vanish)
    saved, aside = reference_store.save(_other(models["base"], 8), tmp_path, force=True)
    assert saved == path and aside is None
    assert reference_store.load(tmp_path, models["base"], "The capital of France is", 3).generated_ids == [5, 6, 8]


def _force_many(args):
    gguf, directory, last, times = args
    for _ in range(times):
        reference_store.save(_other(gguf, last), directory, force=True)
    return last


def test_concurrent_forced_recordings_end_cleanly(models, tmp_path):
    """Two processes replacing the same reference over and over: no error, one whole reference at the end,
    and every replaced one kept whole beside it."""
    import concurrent.futures
    import multiprocessing

    reference_store.save(_reference(models["base"]), tmp_path)
    context = multiprocessing.get_context("fork")
    with concurrent.futures.ProcessPoolExecutor(2, mp_context=context) as pool:
        done = list(pool.map(_force_many, [(models["base"], tmp_path, 8, 15), (models["base"], tmp_path, 3, 15)]))
    assert done == [8, 3]
    final = reference_store.load(tmp_path, models["base"], "The capital of France is", 3)
    assert final.generated_ids[-1] in (3, 8)
    for kept in tmp_path.glob("*.replaced-*.json"):
        Reference.from_document(records.read(kept), str(kept))
    assert not list(tmp_path.glob(".*.tmp"))


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


# --- every field of a reference file, damaged: a valid reference or one clear InputError -----------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

GOOD_DOCUMENT = records.to_jsonable(
    Reference(
        gguf="/m/tiny.gguf",
        identity="header:abc",
        prompt="Hi",
        n_gen=3,
        prompt_ids=[1, 2],
        generated_ids=[5, 6, 7],
        tokens=TOKENS,
        producer={},
    ).to_document()
)
JSON_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True),
    st.sampled_from(["2_16", "+197", "7", " 7", "1e3", "nan", ""]),
    st.text(max_size=5),
    st.lists(st.integers(0, 9), max_size=3),
    st.just({}),
)
ROW_KEYS = ("position", "token", "top1_logit", "top2_token", "top2_logit", "margin")


def test_token_rows_round_trip_through_json():
    for position, row in enumerate(TOKENS):
        assert TokenRow.from_json(json.loads(json.dumps(row.to_json(position))), position) == row
    ref = Reference.from_document(GOOD_DOCUMENT, "ref.json")
    assert ref.tokens == TOKENS and records.to_jsonable(ref.to_document())["results"] == GOOD_DOCUMENT["results"]


def _holds_together(ref: Reference) -> bool:
    ints = [*ref.prompt_ids, *ref.generated_ids, *(t for row in ref.tokens for t in (row.token, row.top2_token))]
    logits = [v for row in ref.tokens for v in (row.top1_logit, row.top2_logit)]
    return (
        all(type(i) is int and i >= 0 for i in ints)
        and all(type(v) is float and math.isfinite(v) for v in logits)
        and all(ref.margin(i) >= 0 for i in range(ref.n_gen))
        and len(ref.tokens) == ref.n_gen == len(ref.generated_ids)
        and all(row.token != row.top2_token for row in ref.tokens)
    )


@given(
    edits=st.lists(
        st.one_of(
            st.tuples(st.just("row"), st.integers(0, 2), st.sampled_from(ROW_KEYS), JSON_VALUES),
            st.tuples(
                st.just("config"),
                st.just(0),
                st.sampled_from(["n_gen", "prompt_ids", "prompt", "identity"]),
                JSON_VALUES,
            ),
            st.tuples(st.just("prompt_id"), st.integers(0, 1), st.just(""), JSON_VALUES),
        ),
        min_size=1,
        max_size=3,
    )
)
@settings(deadline=None)
def test_a_damaged_reference_loads_whole_or_is_one_input_error(edits):
    doc = copy.deepcopy(GOOD_DOCUMENT)
    for where, index, key, value in edits:
        if where == "row":
            doc["results"][index][key] = value
        elif where == "config":
            doc["config"][key] = value
        elif isinstance(doc["config"]["prompt_ids"], list) and index < len(doc["config"]["prompt_ids"]):
            doc["config"]["prompt_ids"][index] = value
    try:
        ref = Reference.from_document(doc, "ref.json")
    except InputError as exc:
        assert str(exc).startswith("ref.json") and "\n" not in str(exc)
    else:
        assert _holds_together(ref)


@pytest.mark.parametrize(
    "key, value, words",
    [
        ("top2_logit", 9.0, "negative margin"),
        ("top1_logit", float("nan"), "finite logit"),
        ("token", "2_16", "expected an integer"),
        ("token", "+197", "expected an integer"),
        ("token", 5.0, "expected an integer"),
        ("top2_token", True, "expected an integer"),
        ("token", -1, "expected an integer >= 0"),
        ("margin", 99.0, "is not top1 - top2"),
    ],
)
def test_references_that_cannot_be_are_exit_2(models, tmp_path, key, value, words):
    path, _ = reference_store.save(_reference(models["base"]), tmp_path)
    doc = records.read(path)
    doc["results"][1][key] = value
    path.write_text(json.dumps(doc))
    with pytest.raises(InputError, match=words):
        reference_store.load(tmp_path, models["base"], "The capital of France is", 3)
