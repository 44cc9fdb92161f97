"""Pack the newest `zincbench profile microbench` run into a folder to commit, raw exports included.

    python3 scripts/profile_pack.py RESULTS_DIR DEST

RESULTS_DIR is where the run wrote its `profile-*.json` document (ZINCBENCH_RESULTS / --results-dir); the
run's own folder is found from the document's artifacts. DEST gets:

- profile.json: the run's results document, verbatim (its paths are the GPU host's);
- nsys.sqlite.gz: nsys's SQLite export, gzip'd (the per-kernel, per-range and category tables come from it);
- ncu.csv.gz: ncu's raw CSV (--page raw, one row per launch with DRAM bytes), gzip'd;
- microbench.json: the profiled microbench's results document (the traffic model next to ncu's bytes);
- nsys.log, ncu.log, and the run's derived files (nsys stats CSVs, *_kernels/_ranges/_categories/_traffic.csv,
  *_tables.md, *_categories.png) as the run wrote them;
- README.md saying what each file is and how to print the tables again from the files alone.

Left out: nsys.nsys-rep (nsys's binary report; the .sqlite is its export and holds what the tables read) and
the microbench's own folder. Both gzip files are written with mtime 0, so packing twice gives the same bytes.
`zincbench profile parse` reads the .gz files directly; the pack checks that they give the run's tables.
"""

from __future__ import annotations

import gzip
import json
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from zincbench.profile import newest_document  # noqa: E402
from zincbench.profile.parse import parse_file  # noqa: E402

RAW = {"nsys.sqlite": "nsys.sqlite.gz", "ncu.csv": "ncu.csv.gz"}
DERIVED = ("*.log", "*.csv", "*_tables.md", "*_categories.png")

README = """# {name}: `zincbench profile microbench {args}` on {gpu}

Run {timestamp} (zincbench {version}, git {commit}); nsys {nsys}, ncu {ncu}. Packed by
`scripts/profile_pack.py` (step `profile` of `scripts/gpu_session.sh`).

Raw exports, from which every table here and in the docs is computed:

| file | what |
|---|---|
| `nsys.sqlite.gz` | nsys's SQLite export of the whole run, gzip'd ({nsys_size}; {nsys_raw} unpacked) |
| `ncu.csv.gz` | ncu's raw CSV (`--page raw`, one row per profiled launch), gzip'd ({ncu_size}; {ncu_raw} unpacked) |
| `microbench.json` | the profiled microbench's results document: its traffic model per variant |
| `profile.json` | the profile run's results document (every table row; paths are the GPU host's) |
| `nsys.log`, `ncu.log` | the profilers' command lines and console output |

The other files are what the run derived (nsys stats CSVs `nsys_cuda_*`/`nsys_nvtx_*`, tables as CSV and
markdown, category charts). Print the tables again from the raw exports alone:

```
zincbench profile parse {folder}/nsys.sqlite.gz
zincbench profile parse {folder}/ncu.csv.gz --microbench {folder}/microbench.json
```

(`--markdown` prints them as markdown; `python3 scripts/update_doc_tables.py` rewrites the tables the docs
quote, and `tests/test_doc_tables.py` fails when they differ from what these files give.)
"""


def gzip_file(src: Path, dest: Path) -> None:
    with src.open("rb") as fh, dest.open("wb") as raw, gzip.GzipFile("", "wb", 9, raw, mtime=0) as gz:
        shutil.copyfileobj(fh, gz, 1 << 20)


def size(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 1e5 else f"{n / 1e3:.0f} kB"


def same_tables(a: Path, b: Path) -> bool:
    x, y = parse_file(a), parse_file(b)
    return all(getattr(x, t).equals(getattr(y, t)) for t in ("kernels", "ranges", "categories"))


def pack(results_dir: Path, dest: Path, folder_name: str | None = None) -> list[Path]:
    doc_path = newest_document(results_dir, kind="profile")
    if doc_path is None:
        raise SystemExit(f"no profile results document in {results_dir}")
    doc = json.loads(doc_path.read_text(encoding="utf-8"))
    artifacts = doc["config"].get("artifacts", {})
    run_dir = Path(artifacts.get("nsys", artifacts.get("ncu", {})).get("log", "")).parent
    missing = [name for name in (*RAW, "nsys.log", "ncu.log") if not (run_dir / name).is_file()]
    if missing:
        raise SystemExit(f"{run_dir}: no {', '.join(missing)} (was it `profile microbench --tool both`?)")
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(doc_path, dest / "profile.json")
    bench = doc["config"].get("microbench_document")
    if not bench or not Path(bench).is_file():
        raise SystemExit(f"the run recorded no microbench document ({bench!r}): no traffic model to commit")
    shutil.copyfile(bench, dest / "microbench.json")
    for src, packed in RAW.items():
        gzip_file(run_dir / src, dest / packed)
        if not same_tables(run_dir / src, dest / packed):
            raise SystemExit(f"{dest / packed} does not parse to the tables of {run_dir / src}")
    for pattern in DERIVED:
        for path in sorted(run_dir.glob(pattern)):
            if path.name not in RAW:
                shutil.copyfile(path, dest / path.name)
    env = doc.get("environment", {})
    gpu_info = env.get("gpu")
    gpu = gpu_info["name"] if isinstance(gpu_info, dict) and gpu_info.get("name") else "the GPU"
    versions = doc["config"].get("tool_versions", {})
    (dest / "README.md").write_text(
        README.format(
            name=folder_name or dest.name,
            args=" ".join(["--tool both", *doc["config"].get("microbench_args", [])]),
            gpu=gpu,
            timestamp=doc.get("timestamp"),
            version=doc.get("zincbench_version"),
            commit=(doc.get("git_commit") or "?")[:12],
            nsys=versions.get("nsys"),
            ncu=versions.get("ncu"),
            nsys_size=size((dest / "nsys.sqlite.gz").stat().st_size),
            nsys_raw=size((run_dir / "nsys.sqlite").stat().st_size),
            ncu_size=size((dest / "ncu.csv.gz").stat().st_size),
            ncu_raw=size((run_dir / "ncu.csv").stat().st_size),
            folder=f"results/h200/{folder_name or dest.name}",
        ),
        encoding="utf-8",
    )
    return sorted(dest.iterdir())


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    for path in pack(Path(argv[0]), Path(argv[1])):
        print(f"{path.stat().st_size:>12,}  {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
