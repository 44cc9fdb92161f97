"""End to end with the real thing: a tiny llama GGUF (Q4_K weights from our quantizer), the llama.cpp
reference recorded through llama-cpp-python, and `zincbench validate` with llama.cpp as the engine.
It must pass on the same model and fail, at the position the perturbation targets, on a copy."""

import json
import shutil
import subprocess
import sys

import pytest

pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (pip install -e '.[reference]')")

from zincbench import reference_store  # noqa: E402
from zincbench.catalog import DEFAULT_PROMPT  # noqa: E402
from zincbench.testing.tiny_gguf import write_suppressed_copy, write_tiny_llama  # noqa: E402

N_GEN, MIN_MATCH = 12, 8


def _zincbench(*args, cwd):
    return subprocess.run([sys.executable, "-m", "zincbench", *args], capture_output=True, text=True, cwd=cwd)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("e2e")
    model = write_tiny_llama(root / "original" / "tiny.gguf", quant="q4_k")
    refs = root / "refs"
    recorded = _zincbench("validate", "record", "--gguf", str(model), "--references-dir", str(refs), cwd=root)
    assert recorded.returncode == 0, recorded.stderr
    return {
        "root": root,
        "model": model,
        "refs": refs,
        "reference": reference_store.load(refs, model, DEFAULT_PROMPT, N_GEN),
    }


def _validate(tiny, gguf, *args):
    result = _zincbench(
        "validate",
        "--engine-kind",
        "llama-cpp",
        "--gguf",
        str(gguf),
        "--references-dir",
        str(tiny["refs"]),
        "--results-dir",
        str(tiny["root"] / "results"),
        "--json",
        *args,
        cwd=tiny["root"],
    )
    assert result.returncode in (0, 1), result.stderr
    (outcome,) = json.loads(result.stdout)["outcomes"]
    return result.returncode, outcome


def test_reference_is_llama_cpps_own_greedy_sampler(tiny):
    """Our argmax-over-logits decode agrees with llama.cpp's greedy sampler (Llama.generate, temp 0)."""
    from llama_cpp import Llama

    ref = tiny["reference"]
    llm = Llama(model_path=str(tiny["model"]), n_ctx=512, n_batch=512, n_gpu_layers=0, verbose=False)
    prompt_ids = llm.tokenize(DEFAULT_PROMPT.encode(), add_bos=True)
    sampled = []
    for token in llm.generate(prompt_ids, temp=0.0, repeat_penalty=1.0):
        sampled.append(token)
        if len(sampled) == N_GEN:
            break
    llm.close()
    assert ref.prompt_ids == prompt_ids and prompt_ids[0] == 1  # BOS, then the prompt's pieces
    assert ref.generated_ids == sampled
    assert all(row.top1_logit >= row.top2_logit for row in ref.tokens)


def test_same_model_passes_exact(tiny):
    code, outcome = _validate(tiny, tiny["model"], "--mode", "exact")
    assert code == 0
    assert (outcome["status"], outcome["match"], outcome["first_divergence"]) == ("OK", N_GEN, None)
    assert outcome["engine_ids"] == tiny["reference"].generated_ids


def test_live_reference_passes(tiny):
    code, outcome = _validate(tiny, tiny["model"], "--reference", "live", "--mode", "exact")
    assert code == 0 and outcome["status"] == "OK"


def test_perturbed_copy_fails_at_the_targeted_position(tiny):
    ref = tiny["reference"]
    ids = ref.generated_ids
    # Target the first position >= 3 whose token is new; suppress it and every later new token.
    target = next(p for p in range(3, N_GEN) if ids[p] not in ids[:p])
    suppressed = set(ids[target:]) - set(ids[:target])
    # Suppressing (logit -> 0) moves an argmax only where a suppressed token won, as long as the
    # other winners' logits are positive; teacher forcing then agrees exactly off the suppressed ones.
    assert all(row.top1_logit > 0 for row in ref.tokens)
    expected_tf = sum(token not in suppressed for token in ids)
    assert expected_tf < MIN_MATCH, f"tiny model's greedy run {ids} is too repetitive for this test"

    # Same file name and header as the original, so the recorded reference applies (only weights differ).
    copy_dir = tiny["root"] / "perturbed"
    copy_dir.mkdir()
    perturbed = write_suppressed_copy(tiny["model"], copy_dir / "tiny.gguf", suppressed)

    code, outcome = _validate(tiny, perturbed, "--mode", "exact")
    assert code == 1
    assert (outcome["status"], outcome["match"], outcome["first_divergence"]) == ("FAIL", target, target)
    assert outcome["margin"] == pytest.approx(ref.margin(target))
    assert outcome["engine_ids"][:target] == ids[:target] and outcome["engine_ids"][target] != ids[target]

    code, outcome = _validate(tiny, perturbed)  # tolerant: forgives only a near-tie at the divergence
    assert code == 1 and outcome["status"] == "FAIL"
    if ref.margin(target) >= 0.2:
        assert "not a near-tie" in outcome["reason"] and outcome["tf_match"] is None

    # Every margin a near-tie: the flip is forgiven only if the engine took llama.cpp's runner-up there, and
    # then the tokens after it are checked by teacher forcing, which finds the suppressed ones.
    code, outcome = _validate(tiny, perturbed, "--near-tie", "1e9")
    assert code == 1 and outcome["status"] == "FAIL"
    if outcome["engine_ids"][target] == ref.tokens[target].top2_token:
        assert (outcome["tf_match"], outcome["tf_total"]) == (expected_tf, N_GEN) and outcome["forgiven"]
    else:
        assert "not llama.cpp's runner-up" in outcome["reason"] and outcome["tf_match"] is None


def test_a_renamed_copy_has_no_reference(tiny, tmp_path):
    renamed = shutil.copyfile(tiny["model"], tmp_path / "renamed.gguf")
    result = _zincbench(
        "validate",
        "--engine-kind",
        "llama-cpp",
        "--gguf",
        str(renamed),
        "--references-dir",
        str(tiny["refs"]),
        cwd=tmp_path,
    )
    assert result.returncode == 2 and "zincbench validate record --gguf" in result.stderr


def test_a_broken_llama_build_is_an_error_row(tiny, tmp_path):
    """--engine-bin points the engine at another libllama; a folder without one crashes the child."""
    code, outcome = _validate(tiny, tiny["model"], "--engine-bin", str(tmp_path))
    assert code == 1 and outcome["status"] == "ERROR" and outcome["reason"].startswith("crash")
    assert "could not load libllama" in outcome["stderr_tail"]
