"""The throughput adapters ab drives: the engine's main binary and llama-bench."""

from __future__ import annotations

import pytest
from fake_engine import write_launcher

from zincbench.engines import make_engine
from zincbench.engines.zinc_main import parse_throughput
from zincbench.errors import InputError
from zincbench.measure.process import EngineFailure

# The lines as zinc logs them (std.log on stderr, src/main.zig), with their log prefix.
ZINC_LOG = """\
info(cuda): ZINC CUDA backend \u2014 NVIDIA GeForce RTX 4090 (sm_89, 128 SMs)
info(forward): CUDA forward init OK (n_embd=5376, n_layers=62, vocab=262144, max_ctx=2048)
info(forward): Prompt tokens (1041): [2, 818, 5279, 529]
info(forward): Prefill complete: 1041 tokens in 2508.4 ms (415.01 tok/s)
info(forward): Generated 160 tokens in 4968.9 ms \u2014 32.00 tok/s (31.25 ms/tok)
"""


def test_parse_main_binary_lines_with_log_prefix_and_em_dash():
    result = parse_throughput(ZINC_LOG)
    assert (result.prefill_tokens, result.prefill_tps) == (1041, 415.01)
    assert (result.decode_tokens, result.decode_tps) == (160, 32.00)
    assert result.extra == {"prefill_ms": 2508.4, "decode_ms": 4968.9, "ms_per_token": 31.25}


def test_last_prefill_line_wins_and_decode_is_optional():
    text = ZINC_LOG.splitlines()[3].replace("1041", "7") + "\n" + ZINC_LOG.splitlines()[3]
    result = parse_throughput(text)
    assert result.prefill_tokens == 1041 and result.decode_tps is None


@pytest.mark.parametrize(
    "text",
    [
        "",
        "Prefill complete: soon",
        "Prefill complete: 12 tokens in nan ms (inf tok/s)",
        "info(forward): Generated 160 tokens in 4968.9 ms \u2014 32.00 tok/s (31.25 ms/tok)",
    ],
)
def test_garbage_is_an_engine_failure(text):
    with pytest.raises(EngineFailure) as exc:
        parse_throughput(text)
    assert exc.value.reason == "garbage"


def test_main_binary_adapter_runs_the_documented_command(tmp_path, monkeypatch):
    monkeypatch.delenv("FAKE_COUNTER", raising=False)
    engine = make_engine("zinc-main", bin=write_launcher(tmp_path))
    result = engine.throughput(tmp_path / "m.gguf", "one two three.", 5, env={"FAKE_PREFILL_TPS": "1234"})
    assert result.prefill_tokens == 5 and result.prefill_tps == 1234.0 and result.decode_tokens == 5
    assert engine.describe()["md5"]


def test_main_binary_crash_and_missing_binary(tmp_path):
    engine = make_engine("zinc-main", bin=write_launcher(tmp_path))
    with pytest.raises(EngineFailure) as exc:
        engine.throughput(tmp_path / "m.gguf", "x", 2, env={"FAKE_FAIL": "crash"})
    assert exc.value.reason == "crash" and "CUDA error 700" in exc.value.stderr_tail
    with pytest.raises(EngineFailure) as exc:
        make_engine("zinc-main", bin=tmp_path / "absent").throughput(tmp_path / "m.gguf", "x", 2)
    assert exc.value.reason == "missing"


def test_adapters_need_a_binary():
    for kind in ("zinc-main", "llama-bench"):
        with pytest.raises(InputError, match="needs"):
            make_engine(kind)


def test_llama_bench_adapter_one_repetition_per_round(tmp_path):
    engine = make_engine("llama-bench", bin=write_launcher(tmp_path), prompt_tokens=96)
    result = engine.throughput(
        tmp_path / "m.gguf", "ignored", 24, env={"FAKE_PREFILL_TPS": "5000", "FAKE_DECODE_TPS": "250"}
    )
    assert (result.prefill_tokens, result.prefill_tps) == (96, 5000.0)
    assert (result.decode_tokens, result.decode_tps) == (24, 250.0)


def test_llama_bench_adapter_garbage(tmp_path):
    engine = make_engine("llama-bench", bin=write_launcher(tmp_path))
    with pytest.raises(EngineFailure) as exc:
        engine.throughput(tmp_path / "m.gguf", "", 8, env={"FAKE_FAIL": "garbage"})
    assert exc.value.reason == "garbage"
