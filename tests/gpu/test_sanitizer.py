"""compute-sanitizer over every bundled kernel group at edge shapes: ``pytest -m sanitizer`` on a GPU host.

Each test runs ``compute-sanitizer --tool TOOL --error-exitcode 99 python -m
zincbench.testing.sanitize_driver GROUP`` (one process per group and tool: a sanitizer error in one
kernel group cannot hide another's) and requires a clean exit, the tool's zero-error summary and the
driver's completion line. The driver disables CuPy's memory pool so memcheck sees exact buffer
bounds, and leaves outputs uninitialised so initcheck catches reads of unwritten memory. No
``--kernel-name`` filter, cuBLAS's own kernels included (moe_cublas): under a filter initcheck stops
tracking the writes of the excluded kernels, so our scatter reading the cuBLAS GEMM's output would
be reported as an uninitialised read. If a cuBLAS-internal kernel ever reports, filter that group's
initcheck to our kernels with ``--kernel-name regex=...`` only after moving its consumers out of it.
On failure the assertion shows the tail of the sanitizer's report and the driver's seed
(``python -m zincbench.testing.sanitize_driver GROUP --seed N`` replays the inputs).
Budget on an H200: 27 runs (shapes are tiny; NVRTC output is disk-cached), most a few seconds; the layer
group's racecheck takes about 40 s. The whole run: about 130 s.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys

import pytest

from zincbench.testing.sanitize_driver import GROUPS

pytestmark = [pytest.mark.sanitizer, pytest.mark.gpu]

TOOLS = ("memcheck", "racecheck", "initcheck")
CLEAN_SUMMARY = {
    "memcheck": "ERROR SUMMARY: 0 errors",
    "initcheck": "ERROR SUMMARY: 0 errors",
    # racecheck summarises hazards instead; warnings (possible hazards) count as unclean too.
    "racecheck": "RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)",
}
ERROR_EXIT = 99
TIMEOUT_S = 180
REPORT_TAIL = 6000


FIRST_ERROR = re.compile(r"^========= (?!COMPUTE-SANITIZER|ERROR SUMMARY|RACECHECK SUMMARY)\S", re.M)


def sanitizer_report(text: str) -> str:
    """The first error the tool printed (the one to fix: later ones are often its consequences), then the
    tail with the summary and the driver's seed."""
    first = FIRST_ERROR.search(text)
    if first is None or first.start() >= len(text) - REPORT_TAIL:
        return text[-REPORT_TAIL:]
    return text[first.start() : first.start() + REPORT_TAIL] + "\n[...]\n" + text[-REPORT_TAIL:]


@pytest.mark.parametrize("tool", TOOLS)
@pytest.mark.parametrize("group", sorted(GROUPS))
def test_kernel_group_is_sanitizer_clean(group, tool):
    argv = [
        shutil.which("compute-sanitizer"),
        "--tool",
        tool,
        "--error-exitcode",
        str(ERROR_EXIT),
        sys.executable,
        "-m",
        "zincbench.testing.sanitize_driver",
        group,
    ]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired as exc:
        partial = b"".join(part or b"" for part in (exc.stdout, exc.stderr)).decode(errors="replace")
        pytest.fail(f"compute-sanitizer {tool} on {group} ran past {TIMEOUT_S} s:\n{sanitizer_report(partial)}")
    report = sanitizer_report(done.stdout + done.stderr)
    assert done.returncode == 0, f"compute-sanitizer {tool} on {group} exited {done.returncode}:\n{report}"
    assert CLEAN_SUMMARY[tool] in done.stdout + done.stderr, report
    assert f"sanitize_driver {group}: all launches completed" in done.stdout, report
