"""`--gpu` for commands that run on one GPU at a time: a UUID, an index, a comma list, or `all`.

One GPU: the command pins itself (CUDA_VISIBLE_DEVICES) before CUDA is initialised. Several: the
command re-runs itself once per GPU in turn (separate processes, so each sees one device) and exits
with the worst exit code; `zincbench report` merges the per-GPU documents side by side.
"""

from __future__ import annotations

import os
import subprocess
import sys

from zincbench.errors import EnvironmentProblem, ExitCode, InputError, worst


def _nvml_uuids() -> list[str]:
    try:
        import pynvml

        pynvml.nvmlInit()
        uuids = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            uuid = pynvml.nvmlDeviceGetUUID(pynvml.nvmlDeviceGetHandleByIndex(i))
            uuids.append(uuid.decode() if isinstance(uuid, bytes) else uuid)
        return uuids
    except Exception as exc:
        raise EnvironmentProblem(f"cannot list GPUs through NVML ({type(exc).__name__}: {exc})") from None


def resolve_gpus(spec: str) -> list[str]:
    """UUIDs for `all`, a UUID, an index, or a comma list of those."""
    parts = [p.strip() for p in spec.split(",") if p.strip()]
    if not parts:
        raise InputError("--gpu needs a UUID, an index, a comma list or 'all'")
    if parts == ["all"]:
        uuids = _nvml_uuids()
        if not uuids:
            raise EnvironmentProblem("no GPU found")
        return uuids
    if all(p.startswith("GPU-") or p.startswith("MIG-") for p in parts):
        return parts
    known = _nvml_uuids()
    out = []
    for p in parts:
        if p.isdigit() and int(p) < len(known):
            out.append(known[int(p)])
        elif p in known:
            out.append(p)
        else:
            raise InputError(f"--gpu {p!r}: not a GPU of this host (have {len(known)}: {', '.join(known)})")
    return out


def argv_for_gpu(argv: list[str], uuid: str) -> list[str]:
    """This command line with its --gpu value replaced by one UUID."""
    out, skip = [], False
    for i, arg in enumerate(argv):
        if skip:
            skip = False
            continue
        if arg == "--gpu" and i + 1 < len(argv):
            out += ["--gpu", uuid]
            skip = True
        elif arg.startswith("--gpu="):
            out.append(f"--gpu={uuid}")
        else:
            out.append(arg)
    return out


def run_per_gpu(gpus: list[str], argv: list[str] | None = None) -> int:
    """Re-run `python -m zincbench ARGV` once per GPU, in turn; the worst exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    codes = []
    for uuid in gpus:
        print(f"=== {uuid}", file=sys.stderr, flush=True)
        code = subprocess.run([sys.executable, "-m", "zincbench", *argv_for_gpu(argv, uuid)]).returncode
        if code not in {int(c) for c in ExitCode}:  # killed by a signal, or a code zincbench never gives: not a verdict
            died = f"was killed by signal {-code}" if code < 0 else f"ended with exit code {code}"
            print(f"zincbench: error: the run on {uuid} {died}", file=sys.stderr, flush=True)
            code = ExitCode.INTERNAL
        codes.append(code)
    return int(worst(codes))


def pin(uuid: str) -> None:
    """Make this process see only ``uuid`` (call before CUDA is initialised)."""
    os.environ["CUDA_VISIBLE_DEVICES"] = uuid
