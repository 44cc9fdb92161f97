"""`zincbench profile` end to end on this CPU machine.

nsys and ncu cannot run here, so stand-ins named ``nsys``/``ncu`` are put first on PATH: they record the
command line they were given, run the profiled command, and write the real recorded outputs from
tests/fixtures/profile/ where the real tool would. What is under test is the wrapper: the options it
passes, the files it expects, tool choice, error lines and exit codes.
"""

import json
import os
import stat
import sys
import textwrap
from pathlib import Path

import pytest

from zincbench.cli import main
from zincbench.errors import EnvironmentProblem
from zincbench.profile import choose_tools, microbench_argv, ncu, newest_document, nsys
from zincbench.profile.parse import parse_file
from zincbench.records import Document, write

FIXTURES = Path(__file__).parent / "fixtures" / "profile"

FAKE_NCU = """
    import json, os, shutil, subprocess, sys
    args = sys.argv[1:]
    if args == ["--version"]:
        print("Version 2025.3.1.0 (stand-in)"); sys.exit(0)
    open(sys.argv[0] + ".argv", "a").write(json.dumps(args) + "\\n")
    log = args[args.index("--log-file") + 1]
    shutil.copy({fixture!r}, log)
    app = args[args.index("--log-file") + 2:]
    if os.environ.get("STAND_IN_MICROBENCH_DOC"):  # play a microbench that wrote its document and said NO-GO
        shutil.copy(os.environ["STAND_IN_MICROBENCH_DOC"], os.environ["ZINCBENCH_RESULTS"])
        sys.exit(1)
    sys.exit(subprocess.run(app).returncode)
"""

FAKE_NSYS = """
    import json, shutil, subprocess, sys
    args = sys.argv[1:]
    fixtures = {fixtures!r}
    if args == ["--version"]:
        print("NVIDIA Nsight Systems version 2025.3.1.0 (stand-in)"); sys.exit(0)
    open(sys.argv[0] + ".argv", "a").write(json.dumps(args) + "\\n")
    if args[0] == "profile":
        base = args[args.index("-o") + 1]
        app = args[args.index("-o") + 2:]
        rc = subprocess.run(app).returncode
        open(base + {report_suffix!r}, "w").write("stand-in report")
        sys.exit(rc)
    if args[:2] == ["stats", "--help-reports"]:
        print(open(fixtures + "/nsys_help_reports.txt").read()); sys.exit(0)
    if args[0] == "stats":
        base, report = args[args.index("-o") + 1], args[-1]
        for name in args[args.index("-r") + 1].split(","):
            shutil.copy(f"{{fixtures}}/nsys_run_{{name}}.csv", f"{{base}}_{{name}}.csv")
        shutil.copy(fixtures + "/nsys_run.sqlite", report.rsplit(".", 1)[0] + ".sqlite")
        sys.exit(0)
    sys.exit(2)
"""


def install(bin_dir: Path, name: str, body: str) -> Path:
    path = bin_dir / name
    path.write_text(f"#!{sys.executable}\n" + textwrap.dedent(body))
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


@pytest.fixture
def tools(tmp_path, monkeypatch):
    """A PATH with stand-in profilers (and nothing else from /opt/nvidia): returns an installer."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}/usr/bin:/bin")
    monkeypatch.setattr("zincbench.gpu.tools._EXTRA_LOCATIONS", {})

    def add(name: str, report_suffix: str = ".nsys-rep", ncu_log: Path = FIXTURES / "ncu_raw_nvtx.csv") -> Path:
        if name == "ncu":
            return install(bin_dir, "ncu", FAKE_NCU.format(fixture=str(ncu_log)))
        return install(bin_dir, "nsys", FAKE_NSYS.format(fixtures=str(FIXTURES), report_suffix=report_suffix))

    return add


def calls(fake: Path) -> list[list[str]]:
    """The argument lists a stand-in was called with (except --version)."""
    return [json.loads(line) for line in Path(f"{fake}.argv").read_text().splitlines()]


def run_cli(args, capsys) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exit_info:
        main(args)
    out, err = capsys.readouterr()
    return exit_info.value.code, out, err


def test_run_under_ncu(tools, tmp_path, capsys):
    fake = tools("ncu")
    out_dir, results = tmp_path / "out", tmp_path / "results"
    code, out, err = run_cli(
        [
            "profile",
            "run",
            "--tool",
            "ncu",
            "--out",
            str(out_dir),
            "--results-dir",
            str(results),
            "--json",
            "--",
            sys.executable,
            "-c",
            "print('workload ran')",
        ],
        capsys,
    )
    assert code == 0, err
    report = json.loads(out[out.index("{") :])  # the profiled command's own stdout is not ours to parse
    (run,) = report["runs"]
    assert run["tool"] == "ncu" and run["exit_code"] == 0
    assert {row["category"] for row in run["categories"]} >= {"gemm", "norm", "moe-routing"}
    (argv,) = calls(fake)
    for option in ("--csv", "--nvtx", "--rename-kernels", "--clock-control", "--print-units"):
        assert option in argv
    assert argv[argv.index("--print-units") + 1] == "base" and argv[argv.index("--clock-control") + 1] == "none"
    assert argv[-3:] == [sys.executable, "-c", "print('workload ran')"]
    assert (out_dir / "ncu_kernels.csv").exists() and (out_dir / "ncu_tables.md").exists()
    doc = json.loads(Path(report["document"]).read_text())
    assert doc["kind"] == "profile" and doc["complete"] is True
    assert {row["table"] for row in doc["results"]} == {"category", "kernel", "range"}


def test_run_under_nsys_reads_the_fresh_export(tools, tmp_path, capsys):
    fake = tools("nsys")
    code, out, err = run_cli(
        [
            "profile",
            "run",
            "--tool",
            "nsys",
            "--out",
            str(tmp_path / "out"),
            "--results-dir",
            str(tmp_path / "results"),
            "--",
            sys.executable,
            "-c",
            "pass",
        ],
        capsys,
    )
    assert code == 0, err
    made = calls(fake)
    profile_call = next(c for c in made if c[0] == "profile")
    for option in ("-t", "cuda,nvtx,cublas", "--sample=none", "--cpuctxsw=none", "--cuda-graph-trace=node"):
        assert option in profile_call
    stats_call = next(c for c in made if c[:2] == ["stats", "--force-export=true"])
    assert "cuda_gpu_kern_sum,cuda_gpu_mem_time_sum,nvtx_kern_sum,nvtx_sum" in stats_call
    assert "t2/norm_swiglu/T64-D1024" in out  # the ranges table, from the SQLite the stats step wrote
    assert "nsys" in out.splitlines()[0]


def test_auto_prefers_nsys_then_ncu(tools):
    tools("ncu")
    picked, reason = choose_tools("auto")
    assert picked == ["ncu"] and "nsys not found" in reason
    tools("nsys")
    assert choose_tools("auto")[0] == ["nsys"]
    assert choose_tools("auto", prefer_both=True)[0] == ["nsys", "ncu"]


def test_missing_profilers_exit_4_naming_what_to_install(tools, tmp_path, capsys):
    code, _, err = run_cli(["profile", "run", "--out", str(tmp_path), "--", "true"], capsys)
    assert code == 4
    assert "Nsight Systems" in err and "Nsight Compute" in err
    assert len(err.strip().splitlines()) == 1
    code, _, err = run_cli(["profile", "run", "--tool", "ncu", "--out", str(tmp_path), "--", "true"], capsys)
    assert code == 4 and "ncu (NVIDIA Nsight Compute) not found" in err
    code, _, err = run_cli(["profile", "run", "--tool", "nsys", "--out", str(tmp_path), "--", "true"], capsys)
    assert code == 4 and "nsys (NVIDIA Nsight Systems) not found" in err and len(err.strip().splitlines()) == 1


def test_qdstrm_only_capture_is_an_environment_problem(tools, tmp_path, monkeypatch):
    tools("nsys", report_suffix=".qdstrm")
    monkeypatch.setattr(nsys, "nsys_importer_problem", lambda path: "QdstrmImporter cannot load libdw.so.1")
    with pytest.raises(EnvironmentProblem, match="only a .qdstrm.*libdw.so.1"):
        nsys.profile_command(["true"], tmp_path)


def test_ncu_without_counter_permission_is_an_environment_problem(tools, tmp_path):
    """ncu writes its refusal into the log file (found line by line there), not as a CSV."""
    log = tmp_path / "denied.csv"
    log.write_text(
        "==PROF== Connected to process 4242 (/usr/bin/python3)\n"
        "==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance "
        "Counters on the target device 0.\n==PROF== Disconnected from process 4242\n"
    )
    tools("ncu", ncu_log=log)
    with pytest.raises(EnvironmentProblem, match="NVreg_RestrictProfilingToAdminUsers=0"):
        ncu.profile_command(["true"], tmp_path / "out")


def test_failing_command_exits_1(tools, tmp_path, capsys):
    tools("ncu")
    code, _, err = run_cli(
        [
            "profile",
            "run",
            "--tool",
            "ncu",
            "--out",
            str(tmp_path / "o"),
            "--results-dir",
            str(tmp_path / "r"),
            "--",
            sys.executable,
            "-c",
            "raise SystemExit(3)",
        ],
        capsys,
    )
    assert code == 1 and "exit 3" in err


def test_parse_json_and_files(tmp_path, capsys):
    code, out, err = run_cli(
        ["profile", "parse", str(FIXTURES / "edge_ncu_raw.csv"), "--json", "--out", str(tmp_path)], capsys
    )
    assert code == 0, err
    data = json.loads(out)
    assert data["format"] == "ncu-csv"
    assert sum(row["share"] for row in data["categories"]) == pytest.approx(1.0)
    assert (tmp_path / "edge_ncu_raw_kernels.csv").exists()
    markdown = (tmp_path / "edge_ncu_raw_tables.md").read_text()
    assert "| matvec |" in markdown


@pytest.mark.parametrize(
    "args",
    [["profile", "parse", "/no/such/file.csv"], ["profile", "run"], ["profile", "run", "--tool", "perf", "--", "true"]],
)
def test_bad_input_exits_2_with_one_line(args, capsys):
    code, _, err = run_cli(args, capsys)
    assert code == 2
    assert len(err.strip().splitlines()) == 1 and err.startswith("zincbench: error:")


def test_category_chart_without_matplotlib(monkeypatch, tmp_path):
    from zincbench.show.profile_tables import write_category_chart

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if the plot extra were not installed
    tables = parse_file(FIXTURES / "edge_ncu_raw.csv")
    with pytest.raises(EnvironmentProblem, match=r"the category chart needs matplotlib: pip install"):
        write_category_chart(tables, tmp_path / "c.png")


def test_category_chart_png(tmp_path):
    pytest.importorskip("matplotlib")
    from zincbench.show.profile_tables import write_category_chart

    path = write_category_chart(parse_file(FIXTURES / "edge_ncu_raw.csv"), tmp_path / "c.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_microbench_dram_bytes_next_to_the_traffic_model(tools, tmp_path, capsys, monkeypatch):
    fake = tools("ncu")
    rows = [
        {"variant": "norm_swiglu", "case": "T64-D1024", "traffic": {"bytes_model": 800_000}},
        {"variant": "gather_template", "case": "T64-D1024", "traffic": {"bytes_model": 266_922}},
    ]
    bench_doc = write(Document(kind="microbench", config={}, environment={}, results=rows), tmp_path / "mb.json")
    monkeypatch.setenv("STAND_IN_MICROBENCH_DOC", str(bench_doc))
    out_dir = tmp_path / "out"
    (out_dir / "microbench").mkdir(parents=True)
    code, out, err = run_cli(
        [
            "profile",
            "microbench",
            "--tool",
            "ncu",
            "--out",
            str(out_dir),
            "--results-dir",
            str(tmp_path / "results"),
            "--json",
            "t2",
            "--quick",
        ],
        capsys,
    )
    assert code == 0, err  # the microbench's NO-GO (exit 1) is its verdict, not a profiling failure
    (argv,) = calls(fake)
    assert argv[-5:] == ["-m", "zincbench", "microbench", "t2", "--quick"]
    traffic = {row["variant"]: row for row in json.loads(out)["traffic"]}
    assert set(traffic) == {"norm_swiglu", "gather_template"}
    # ncu_raw_nvtx.csv: 3 invocations of rms_norm_f32 + swiglu_f32 in that range
    assert traffic["norm_swiglu"]["invocations"] == 3
    assert traffic["norm_swiglu"]["measured_bytes"] == pytest.approx(
        (271360 + 528384 + 271104 + 528640 + 271360 + 528640) / 3
    )
    assert traffic["gather_template"]["measured_over_model"] == pytest.approx(800768 / 3 / 266_922)


def test_microbench_command_line_and_results_document(tmp_path):
    assert microbench_argv(["t2", "--quick"]) == [sys.executable, "-m", "zincbench", "microbench", "t2", "--quick"]
    assert newest_document(tmp_path) is None
    write(Document(kind="ab", config={}, environment={}), directory=tmp_path)
    path = write(Document(kind="microbench", config={}, environment={}), directory=tmp_path)
    (tmp_path / "broken.json").write_text("{")
    assert newest_document(tmp_path) == path


H200_NSYS_EXPORT = Path(__file__).resolve().parents[1] / "results" / "h200" / "profile-t2-Ne16" / "nsys.sqlite.gz"
NSYS_EXPORTS = sorted(FIXTURES.glob("nsys_run*.sqlite")) + sorted(FIXTURES.glob("nsys_run_*.csv")) + [H200_NSYS_EXPORT]


@pytest.mark.parametrize("path", NSYS_EXPORTS, ids=lambda p: p.name)
def test_parse_of_the_committed_nsys_export_fits_a_ci_log(path, capsys, monkeypatch):
    """COLUMNS=80: at most 32 lines, none wider than 80, names whole, every header on one line."""
    if path == H200_NSYS_EXPORT and not path.exists():
        pytest.skip(f"{path.name} of the H200 profile run not committed yet (GPU step `profile` makes it)")
    monkeypatch.setenv("COLUMNS", "80")
    code, out, _ = run_cli(["profile", "parse", str(path)], capsys)
    lines = out.splitlines()
    assert code == 0 and len(lines) <= 32, "\n".join(lines)
    assert max(len(line) for line in lines) <= 80 and "…" not in out
    headers = [line.split() for line in lines if line.split()[:1] in (["category"], ["range"], ["kernel"])]
    assert headers and all(len(h) >= 3 for h in headers), headers  # a header row, not one letter a line


def test_stacked_rows_keep_each_header_on_its_line():
    """The narrowest layout (a name per line) widens a column of one-digit numbers to its header's word."""
    import io

    from rich.console import Console

    from zincbench.show.fit import print_stacked

    out = io.StringIO()
    print_stacked(
        Console(file=out, width=40, color_system=None),
        "t",
        ["name", "calls", "share"],
        [["a_very_long_kernel_name_that_fills_the_line", "3", "1.0%"]],
        keys=[0],
    )
    assert "calls" in out.getvalue() and "\nc\n" not in out.getvalue().replace(" ", "")


def _pack_script():
    import importlib.util

    path = Path(__file__).resolve().parents[1] / "scripts" / "profile_pack.py"
    spec = importlib.util.spec_from_file_location("profile_pack", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("profile_pack", module)  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_pack_commits_the_raw_exports_and_parse_prints_the_runs_tables(tools, tmp_path, capsys, monkeypatch):
    """scripts/profile_pack.py on a `profile microbench --tool both` run (stand-in profilers): the folder it
    makes holds the gzip'd raw exports, and `profile parse` of them gives the run's tables, traffic included."""
    tools("nsys"), tools("ncu")
    rows = [{"variant": "norm_swiglu", "case": "T64-D1024", "traffic": {"bytes_model": 800_000}}]
    bench_doc = write(Document(kind="microbench", config={}, environment={}, results=rows), tmp_path / "mb.json")
    monkeypatch.setenv("STAND_IN_MICROBENCH_DOC", str(bench_doc))
    monkeypatch.setattr("zincbench.profile.microbench_argv", lambda args: [sys.executable, "-c", "pass"])
    results, run_dir = tmp_path / "results", tmp_path / "run"
    (run_dir / "microbench").mkdir(parents=True)  # the microbench makes it; the stand-in copies into it
    code, out, err = run_cli(
        ["profile", "microbench", "--tool", "both", "--out", str(run_dir), "--results-dir", str(results)]
        + ["--json", "t2", "--quick"],
        capsys,
    )
    assert code == 0, err
    run = json.loads(out[out.index("{") :])
    pack = _pack_script()
    dest = tmp_path / "profile-t2-Ne16"
    pack.pack(results, dest)
    names = {p.name for p in dest.iterdir()}
    assert {"nsys.sqlite.gz", "ncu.csv.gz", "microbench.json", "profile.json", "README.md"} <= names
    assert {"nsys.log", "ncu.log", "nsys_kernels.csv", "ncu_traffic.csv", "nsys_tables.md"} <= names
    assert not names & {"nsys.sqlite", "ncu.csv", "nsys.nsys-rep"}
    first = (dest / "nsys.sqlite.gz").read_bytes()
    pack.pack(results, dest)
    assert (dest / "nsys.sqlite.gz").read_bytes() == first  # mtime 0: packing again changes nothing

    code, out, err = run_cli(
        ["profile", "parse", str(dest / "ncu.csv.gz"), "--microbench", str(dest / "microbench.json"), "--json"],
        capsys,
    )
    assert code == 0, err
    ncu_run = next(r for r in run["runs"] if r["tool"] == "ncu")
    parsed = json.loads(out)
    assert parsed["traffic"] == run["traffic"] and parsed["ranges"] == ncu_run["ranges"]
    nsys_run = next(r for r in run["runs"] if r["tool"] == "nsys")
    code, out, err = run_cli(["profile", "parse", str(dest / "nsys.sqlite.gz"), "--json"], capsys)
    assert code == 0 and json.loads(out)["kernels"] == nsys_run["kernels"]
    code, out, err = run_cli(
        ["profile", "parse", str(dest / "nsys.sqlite.gz"), "--markdown", "--table", "ranges"], capsys
    )
    assert code == 0 and "**NVTX ranges" in out and "**Kernels" not in out and "|--:|" in out
    readme = (dest / "README.md").read_text()
    assert "zincbench profile parse results/h200/profile-t2-Ne16/nsys.sqlite.gz" in readme


def test_parse_microbench_option_needs_dram_bytes(capsys):
    code, _, err = run_cli(
        ["profile", "parse", str(FIXTURES / "nsys_run.sqlite"), "--microbench", str(FIXTURES / "versions.txt")],
        capsys,
    )
    assert code == 2 and "--microbench needs an ncu CSV" in err


def test_a_damaged_gzip_export_is_an_input_error(tmp_path, capsys):
    blob = tmp_path / "x.sqlite"
    blob.write_bytes(FIXTURES.joinpath("nsys_run.sqlite").read_bytes())
    import gzip

    packed = gzip.compress(blob.read_bytes())
    (tmp_path / "x.sqlite.gz").write_bytes(packed[: len(packed) // 2])
    code, _, err = run_cli(["profile", "parse", str(tmp_path / "x.sqlite.gz")], capsys)
    assert code == 2 and "damaged gzip file" in err
