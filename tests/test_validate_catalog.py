"""The model catalog: the bundled file, selection by name/alias, env expansion and schema errors."""

from pathlib import Path

import pytest

from zincbench.catalog import DEFAULT_PROMPT, load_catalog
from zincbench.errors import ConfigError, InputError

CATALOG_NAMES = ["qwen35-9b", "qwen36-27b", "qwen36-35b-a3b", "gemma4-31b", "gemma4-26b-a4b"]


def test_bundled_catalog_has_the_five_models():
    catalog = load_catalog()
    assert list(catalog.models) == CATALOG_NAMES
    for model in catalog.models.values():
        assert model.gguf_template.startswith("${ZINC_MODELS}/") and model.gguf_basename.endswith(".gguf")
        assert (model.prompt, model.n_gen, model.min_match) == (DEFAULT_PROMPT, 12, 8)
        assert model.shape in ("dense", "moe", "hybrid-ssm")
    assert catalog.models["qwen36-35b-a3b"].shape == "moe"


def test_select_by_name_and_alias_keeps_order():
    catalog = load_catalog()
    chosen = catalog.select(["gemma4-26b", "QWEN38-27B", "qwen35-9b", "qwen36-27b"])
    assert [m.name for m in chosen] == ["gemma4-26b-a4b", "qwen36-27b", "qwen35-9b"]
    assert [m.name for m in catalog.select(None)] == CATALOG_NAMES


def test_unknown_name_lists_known_ones():
    with pytest.raises(InputError) as info:
        load_catalog().select(["llama-70b"])
    assert "'llama-70b'" in str(info.value) and all(n in str(info.value) for n in CATALOG_NAMES)


def test_gguf_path_expands_the_environment_when_used(monkeypatch):
    model = load_catalog().models["gemma4-31b"]
    monkeypatch.delenv("ZINC_MODELS", raising=False)
    with pytest.raises(InputError, match="ZINC_MODELS, which is not set"):
        model.gguf
    monkeypatch.setenv("ZINC_MODELS", "/data/models")
    assert model.gguf == Path("/data/models/gemma-4-31B-it-Q4_K_M.gguf")


def test_matches_file_by_basename_or_alias():
    model = load_catalog().models["qwen36-27b"]
    assert model.matches_file("/anywhere/Qwen3.8-27B-Q4_K_M.gguf")
    assert model.matches_file("qwen38-27b") and model.matches_file("qwen36-27b.gguf")
    assert not model.matches_file("/anywhere/Qwen3.5-9B-Q4_K_M.gguf")


def test_for_file_uses_the_matching_row_or_the_defaults(tmp_path):
    catalog = load_catalog()
    row = catalog.for_file(tmp_path / "gemma-4-31B-it-Q4_K_M.gguf")
    assert row.name == "gemma4-31b" and row.gguf == tmp_path / "gemma-4-31B-it-Q4_K_M.gguf"
    ad_hoc = catalog.for_file(tmp_path / "mine.gguf")
    assert (ad_hoc.name, ad_hoc.n_gen, ad_hoc.min_match, ad_hoc.arch) == ("mine", 12, 8, None)


def test_per_model_values_and_env_merge(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(
        "defaults:\n  n_gen: 16\n  engine_env: {A: '1', B: '1'}\n"
        "models:\n  m:\n    gguf: /x/m.gguf\n    arch: llama\n    shape: dense\n"
        "    min_match: 10\n    prompt: Hello\n    engine_env: {B: '2', N: 3}\n"
    )
    model = load_catalog(path).models["m"]
    assert (model.n_gen, model.min_match, model.prompt) == (16, 10, "Hello")
    assert model.engine_env == {"A": "1", "B": "2", "N": "3"}


MODEL = "models:\n  m:\n    gguf: /x/m.gguf\n    arch: llama\n    shape: dense\n"


@pytest.mark.parametrize(
    "text, words",
    [
        (MODEL + "    colour: red\n", "models.m: unknown key 'colour'"),
        (MODEL + "    n_gen: twelve\n", "models.m.n_gen: expected an integer"),
        (MODEL.replace("dense", "sparse"), "models.m.shape: must be one of"),
        (MODEL + "    min_match: 13\n", "models.m.min_match: must be between 1 and n_gen (12)"),
        (MODEL + "    aliases: [m]\n", "already used by m"),
        (MODEL.replace("/x/m.gguf", "${1BAD}/m.gguf"), "bad ${VAR} placeholder"),
        ("defaults: {n_gen: 12}\n", "missing required key 'models'"),
        ("models: {}\n", "lists no models"),
        ("models: [a, b]\n", "models: expected a mapping"),
        (MODEL + "  n:\n    gguf: /x/n.gguf\n    arch: llama\n", "models.n: missing required key 'shape'"),
    ],
)
def test_schema_errors_name_file_and_key(tmp_path, text, words):
    path = tmp_path / "catalog.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_catalog(path)
    assert str(path) in str(info.value) and words in str(info.value)


def test_missing_catalog_file(tmp_path):
    with pytest.raises(InputError, match="file not found"):
        load_catalog(tmp_path / "none.yaml")
