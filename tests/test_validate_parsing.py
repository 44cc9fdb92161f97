"""Parsing of the engine output lines validate and ab rely on (cuda-dbg and YAML-declared engines)."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from zincbench.config import load_yaml
from zincbench.engines.generic import EngineSpec, load_engine_spec, parse_ids, render_command
from zincbench.engines.zinc_dbg import PROMPT_IDS_RE, parse_gen_ids, parse_tf_match, parse_throughput
from zincbench.errors import ConfigError, InputError
from zincbench.measure.process import EngineFailure

# What cuda-dbg prints on stderr for `gen` (shared/reference/zinc-kernels.md §3.2), with the
# CUDA init chatter around it.
DBG_GEN = """\
ZINC CUDA backend — NVIDIA GeForce RTX 4090 (sm_89, 128 SMs)
PROMPT_IDS:760,6511,314,9338,369
PREFILL: 5 tokens in 0.043s = 116.28 tok/s (skip=false batched=true)
GEN_IDS:11751,13,576,6722,315,9625,374,12095,13,576,6722,315
DECODE: 11 tokens in 0.412s = 26.70 tok/s (correctness-first, sync-per-layer)
"""


def test_gen_ids_and_prompt_ids_are_read():
    assert parse_gen_ids(DBG_GEN) == [11751, 13, 576, 6722, 315, 9625, 374, 12095, 13, 576, 6722, 315]
    assert parse_ids(DBG_GEN, PROMPT_IDS_RE, "PROMPT_IDS line") == [760, 6511, 314, 9338, 369]


def test_last_gen_ids_line_wins():
    assert parse_gen_ids("GEN_IDS:1,2\nretrying\nGEN_IDS:3, 4\n") == [3, 4]


@pytest.mark.parametrize(
    "text, words",
    [
        ("no ids here\n", "no GEN_IDS line"),
        ("GEN_IDS:\n", "empty GEN_IDS line"),
        ("GEN_IDS:1,2,x,4\n", "malformed number 'x'"),
        ("GEN_IDS:1,,2\n", "malformed number ''"),
        ("GEN_IDS:1.5,2\n", "malformed number '1.5'"),
        ("GEN_IDS:1,2_16\n", "malformed number '2_16'"),  # int() reads 216
        ("GEN_IDS:+197,2\n", "malformed number '+197'"),
        ("GEN_IDS:-1,2\n", "malformed number '-1'"),
        ("GEN_IDS:\u0663,2\n", "malformed number"),  # an Arabic-Indic 3, which int() also reads
    ],
)
def test_bad_gen_ids_are_garbage(text, words):
    with pytest.raises(EngineFailure) as info:
        parse_gen_ids(text)
    assert info.value.reason == "garbage"
    assert words in str(info.value)


def test_tf_match():
    tf = parse_tf_match("loading\nTF_MATCH:11/12\n")
    assert (tf.match, tf.total) == (11, 12)


@pytest.mark.parametrize("text", ["TF_MATCH:\n", "TF_MATCH:a/12\n", "TF_MATCH:13/12\n", "TF_MATCH:-1/12\n", "done\n"])
def test_bad_tf_match_is_garbage(text):
    with pytest.raises(EngineFailure) as info:
        parse_tf_match(text)
    assert info.value.reason == "garbage"


def test_throughput_lines():
    t = parse_throughput(DBG_GEN)
    assert (t.prefill_tokens, t.prefill_tps, t.decode_tokens, t.decode_tps) == (5, 116.28, 11, 26.70)


def test_decode_line_is_optional_for_a_single_token():
    t = parse_throughput("PREFILL: 250 tokens in 0.100s = 2500.00 tok/s (skip=false batched=true)\nGEN_IDS:7\n")
    assert (t.prefill_tokens, t.prefill_tps, t.decode_tokens, t.decode_tps) == (250, 2500.0, None, None)


@pytest.mark.parametrize(
    "text",
    [
        "GEN_IDS:1,2\n",  # no PREFILL line (a 1-token prompt prints none)
        "PREFILL: 5 tokens in 0.1s = 1.2.3 tok/s (x)\n",
        "PREFILL: five tokens in 0.1s = 50.00 tok/s (x)\n",
    ],
)
def test_bad_throughput_is_garbage(text):
    with pytest.raises(EngineFailure) as info:
        parse_throughput(text)
    assert info.value.reason == "garbage"


def test_command_templates_keep_values_whole():
    argv = render_command(
        "{bin} --prompt {prompt} -n {n_gen} -m '{model}'",
        {"bin": "/opt/e", "prompt": "The capital of France is", "n_gen": 12, "model": "a b.gguf"},
    )
    assert argv == ["/opt/e", "--prompt", "The capital of France is", "-n", "12", "-m", "a b.gguf"]


def test_unknown_placeholder_is_input_error():
    with pytest.raises(InputError, match=r"unknown placeholder \{tokens\}"):
        render_command("{bin} {tokens}", {"bin": "x"})


def test_engine_spec_yaml(tmp_path):
    good = tmp_path / "engine.yaml"
    good.write_text(
        "bin: /opt/e\ngenerate:\n  command: '{bin} gen {prompt_ids} {n_gen} {model}'\n  ids_regex: 'IDS=(.*)'\n"
    )
    spec = load_engine_spec(good)
    assert isinstance(spec, EngineSpec) and spec.generate.ids_regex == "IDS=(.*)" and spec.teacher_forced is None
    assert load_yaml(good)["bin"] == spec.bin


@pytest.mark.parametrize(
    "body, words",
    [
        ("generate:\n  command: x\n  ids_regex: '(unclosed'\n", "invalid regex"),
        ("generate:\n  command: x\n  ids_regex: 'a(.*)'\n  colour: red\n", "unknown key 'colour'"),
        ("max_prompt_ids: many\n", "max_prompt_ids: expected an integer"),
    ],
)
def test_engine_spec_errors_name_file_and_key(tmp_path, body, words):
    path = tmp_path / "engine.yaml"
    path.write_text(body)
    with pytest.raises(ConfigError) as info:
        load_engine_spec(path)
    assert str(path) in str(info.value) and words in str(info.value)


def test_the_documented_generic_example_reads_zincs_log_lines(tmp_path):
    """The YAML example in zincbench.engines.generic's docstring loads and parses real `zinc` lines."""
    import textwrap

    from zincbench.engines import generic

    example = textwrap.dedent(generic.__doc__.split("::\n\n")[1].split("\n\nPlaceholders")[0])
    (tmp_path / "zinc.yaml").write_text(example)
    spec = load_engine_spec(tmp_path / "zinc.yaml")
    log = (
        "info(forward): Prefill complete: 512 tokens in 210.3 ms (2434.65 tok/s)\n"
        "info(forward): Generated 160 tokens in 1500.0 ms — 106.60 tok/s (9.38 ms/tok)\n"
    )
    rates = generic.parse_throughput(log, spec.throughput.prefill_regex, spec.throughput.decode_regex)
    assert (rates.prefill_tokens, rates.prefill_tps, rates.decode_tokens, rates.decode_tps) == (
        512,
        2434.65,
        160,
        106.6,
    )


@given(st.lists(st.text(max_size=6), min_size=1, max_size=5))
def test_gen_ids_are_ascii_digits_or_garbage(fields):
    """Every field of a GEN_IDS line is a non-negative integer in ASCII digits, or the line is garbage."""
    text = "GEN_IDS:" + ",".join(fields) + "\n"
    if any(c in "".join(fields) for c in "\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"):
        return  # a line break ends the line early: another case
    try:
        ids = parse_gen_ids(text)
    except EngineFailure as exc:
        assert exc.reason == "garbage"
        assert not all(f.strip().isascii() and f.strip().isdigit() for f in fields)
    else:
        assert ids == [int(f) for f in fields] and all(f.strip().isascii() and f.strip().isdigit() for f in fields)
