"""How big and how slow `zincbench history --html` is on a long history: writes N synthetic microbench
documents (one per commit; CASES cases x VARIANTS variants, SAMPLES samples a row, a 10% slowdown in
one variant at 3/4 of the history), then times the command and measures the page.

    python scripts/history_bench.py [--documents 1000] [--keep DIR]

Prints a markdown summary (results/cpu/history-bench.md records one)."""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from zincbench import records
from zincbench.testing.synthetic_rows import timed_row

CASES = ["Ne16-T512", "Ne16-T2048", "Ne64-T512", "Ne64-T2048"]
VARIANTS = ["baseline", "fused"]
SAMPLES = 40


def write_documents(folder: Path, documents: int, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    start = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    for i in range(documents):
        rows = []
        for c, case in enumerate(CASES):
            for variant in VARIANTS:
                level = (100.0 + 50 * c) * (0.6 if variant == "fused" else 1.0)
                if variant == "fused" and c == 0 and i >= documents * 3 // 4:
                    level *= 1.10
                level *= 1 + 0.01 * rng.standard_normal()
                role = "baseline" if variant == "baseline" else "candidate"
                rows.append(timed_row(case, variant, level * (1 + 0.01 * rng.standard_normal(SAMPLES)), role=role))
        doc = records.Document(
            kind="microbench",
            config={"family": "t2"},
            environment={"gpu": {"name": "NVIDIA H200"}},
            results=rows,
            git_commit=f"{int(rng.integers(1 << 48)):012x}",
            timestamp=(start + dt.timedelta(hours=i)).isoformat(timespec="seconds"),
        )
        records.write(doc, folder / f"microbench-{i:05d}.json")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=1000)
    parser.add_argument("--keep", type=Path, help="write the documents and the page here (kept)")
    args = parser.parse_args()
    folder = args.keep or Path(tempfile.mkdtemp(prefix="zincbench-history-bench-"))
    docs = folder / "results"
    docs.mkdir(parents=True, exist_ok=True)
    write_documents(docs, args.documents)
    page = folder / "history.html"
    command = [sys.executable, "-m", "zincbench", "history", str(docs), "--html", str(page)]
    began = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    seconds = time.perf_counter() - began
    size = sum(p.stat().st_size for p in docs.iterdir())
    print(
        f"| documents | {args.documents} ({len(CASES) * len(VARIANTS)} rows x {SAMPLES} samples each, "
        f"{size / 2**20:.1f} MiB) |\n"
        "| command | `zincbench history DIR --html FILE` (whole process, table included) |\n"
        f"| wall time | {seconds:.2f} s |\n| page size | {page.stat().st_size / 2**10:.0f} KiB |\n"
        f"| machine | {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()} |"
    )


if __name__ == "__main__":
    main()
