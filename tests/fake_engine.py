"""A fake inference engine printing the real output lines of the engines zincbench drives.

Modes, chosen by the command line (the same argv the adapters build):
  zinc main binary   ``fake -m MODEL --prompt TEXT --raw -n N``  -> std.log lines on stderr:
                     ``info(forward): Prefill complete: T tokens in X ms (Y tok/s)`` and
                     ``info(forward): Generated N tokens in X ms — Y tok/s (Z ms/tok)``
  cuda-dbg           ``fake gen IDS N MODEL``                   -> ``PREFILL: …`` / ``DECODE: …`` lines
  llama-bench        ``fake -m MODEL -p T -n N -r R … -o jsonl`` -> jsonl rows shaped like the real
                     fixture tests/fixtures/llama-bench/tiny.jsonl

Behaviour from the environment:
  FAKE_PREFILL_TPS, FAKE_DECODE_TPS  base speeds (2000, 100 tokens/s)
  FAKE_SPEED      multiplier on both (0.95 = a 5% slower build)
  FAKE_NOISE      each run's speeds are multiplied by a factor drawn uniformly in [1-NOISE, 1+NOISE]
  FAKE_NOISE_SD   each run's speeds are multiplied by exp(N(0, SD)): run-to-run noise with a relative
                  standard deviation of about SD (0.015 = "1.5% noise"); independent of FAKE_NOISE
  FAKE_DRIFT      per-run relative drift (thermal throttling): run k is scaled by (1+DRIFT)**k
  FAKE_SEED       seed of the noise; run k draws from Random(f"{SEED}:{k}")
  FAKE_COUNTER    a file holding the run counter k, incremented by every run (shared by A and B)
  FAKE_FAIL       crash | hang | garbage
  FAKE_FAIL_RUNS  comma-separated run indices k that fail (default: every run)
  FAKE_HANG_MARKER  a file a hanging run writes its pid to, right before it hangs
"""

from __future__ import annotations

import json
import math
import os
import random
import sys
import time
from pathlib import Path

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "llama-bench" / "tiny.jsonl"


def write_launcher(directory: Path, name: str = "fake-engine") -> Path:
    """An executable that runs this script with the current interpreter (what tests pass as a binary);
    -S skips site-packages, which the fake does not need, and halves its start-up time."""
    path = Path(directory) / name
    path.write_text(f'#!/bin/sh\nexec "{sys.executable}" -S "{Path(__file__).resolve()}" "$@"\n')
    path.chmod(0o755)
    return path


def _run_index() -> int:
    counter = os.environ.get("FAKE_COUNTER")
    if not counter:
        return 0
    path = Path(counter)
    k = int(path.read_text() or 0) if path.exists() else 0
    path.write_text(str(k + 1))
    return k


def _speeds(k: int) -> tuple[float, float]:
    rng = random.Random(f"{os.environ.get('FAKE_SEED', '0')}:{k}")
    noise = float(os.environ.get("FAKE_NOISE", "0"))
    scale = float(os.environ.get("FAKE_SPEED", "1")) * (1 + float(os.environ.get("FAKE_DRIFT", "0"))) ** k
    sd = float(os.environ.get("FAKE_NOISE_SD", "0"))

    def factor() -> float:
        return (1 + noise * rng.uniform(-1, 1)) * math.exp(rng.gauss(0, sd) if sd else 0.0)

    prefill = float(os.environ.get("FAKE_PREFILL_TPS", "2000")) * scale * factor()
    decode = float(os.environ.get("FAKE_DECODE_TPS", "100")) * scale * factor()
    return prefill, decode


def _fail_now(k: int) -> str | None:
    mode = os.environ.get("FAKE_FAIL")
    runs = os.environ.get("FAKE_FAIL_RUNS")
    if mode and (not runs or k in {int(r) for r in runs.split(",")}):
        return mode
    return None


def _arg(argv: list[str], flag: str, default=None):
    return argv[argv.index(flag) + 1] if flag in argv else default


def main_binary(argv: list[str], prefill_tps: float, decode_tps: float) -> None:
    prompt = _arg(argv, "--prompt", "")
    n_gen = int(_arg(argv, "-n", "256"))
    tokens = 1 + len(prompt.split()) + prompt.count(".")  # BOS + words + full stops
    log = sys.stderr
    print("info(cuda): ZINC CUDA backend \u2014 Fake GPU (sm_90, 132 SMs)", file=log)
    print("info(forward): CUDA forward init OK (n_embd=256, n_layers=2, vocab=320, max_ctx=2048)", file=log)
    print(f"info(forward): Prompt tokens ({tokens}): {list(range(1, min(tokens, 30) + 1))}", file=log)
    # A rate of 0 (FAKE_*_TPS=0) prints "0.00 tok/s" after a long time, as an engine that rounds would.
    prefill_ms, ms_per_tok = tokens / max(prefill_tps, 1e-6) * 1e3, 1e3 / max(decode_tps, 1e-6)
    print(
        f"info(forward): Prefill complete: {tokens} tokens in {prefill_ms:.1f} ms ({prefill_tps:.2f} tok/s)", file=log
    )
    decode_ms = (n_gen - 1) * ms_per_tok
    print(
        f"info(forward): Generated {n_gen} tokens in {decode_ms:.1f} ms \u2014 {decode_tps:.2f} tok/s "
        f"({ms_per_tok:.2f} ms/tok)",
        file=log,
    )
    print(f"Output ({n_gen} tokens): the garden opens early")


def cuda_dbg(argv: list[str], prefill_tps: float, decode_tps: float) -> None:
    ids, n_gen = argv[1].split(","), int(argv[2])
    log = sys.stderr
    print(f"PROMPT_IDS:{','.join(ids)}", file=log)
    if len(ids) > 1:
        print(
            f"PREFILL: {len(ids)} tokens in {len(ids) / prefill_tps:.3f}s = {prefill_tps:.2f} tok/s "
            f"(skip=false batched=true)",
            file=log,
        )
    print(f"GEN_IDS:{','.join(str(7 + i) for i in range(n_gen))}", file=log)
    if n_gen > 1:
        print(
            f"DECODE: {n_gen - 1} tokens in {(n_gen - 1) / decode_tps:.3f}s = {decode_tps:.2f} tok/s "
            f"(correctness-first, sync-per-layer)",
            file=log,
        )


def llama_bench(argv: list[str], prefill_tps: float, decode_tps: float) -> None:
    template = json.loads(FIXTURE.read_text().splitlines()[0])
    n_prompt, n_gen = int(_arg(argv, "-p", "512")), int(_arg(argv, "-n", "128"))
    for p, g, rate in ((n_prompt, 0, prefill_tps), (0, n_gen, decode_tps)):
        if p + g == 0:
            continue
        ns = int((p + g) / rate * 1e9)
        row = dict(
            template,
            model_filename=_arg(argv, "-m"),
            n_prompt=p,
            n_gen=g,
            n_depth=0,
            avg_ns=ns,
            stddev_ns=0,
            avg_ts=round(rate, 6),
            stddev_ts=0.0,
            samples_ns=[ns],
            samples_ts=[round(rate, 2)],
        )
        print(json.dumps(row))


def main(argv: list[str]) -> int:
    k = _run_index()
    failure = _fail_now(k)
    if failure == "hang":
        print("info(forward): Prompt tokens (4): [1, 2, 3, 4]", file=sys.stderr, flush=True)
        marker = os.environ.get("FAKE_HANG_MARKER")
        if marker:  # say "hanging now" (its pid), whole or not at all, for a test to act on without guessing
            Path(marker + ".tmp").write_text(str(os.getpid()))
            os.replace(marker + ".tmp", marker)
        time.sleep(3600)
    if failure == "crash":
        print("info(forward): Prompt tokens (4): [1, 2, 3, 4]", file=sys.stderr)
        print("CUDA error 700 at kernels.cu:1743: an illegal memory access was encountered", file=sys.stderr)
        return 134
    if failure == "garbage":
        print("Segmentation fault? no: just some unrelated chatter\nPrefill complete: soon", file=sys.stderr)
        return 0
    prefill_tps, decode_tps = _speeds(k)
    if argv[:1] == ["gen"]:
        cuda_dbg(argv, prefill_tps, decode_tps)
    elif _arg(argv, "-o") == "jsonl":
        llama_bench(argv, prefill_tps, decode_tps)
    else:
        main_binary(argv, prefill_tps, decode_tps)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
