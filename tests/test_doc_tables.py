"""The tables the docs quote are what committed files give: every `<!-- zincbench: ARGS -->` block of README.md
and docs/*.md must equal what `zincbench ARGS` prints now (scripts/update_doc_tables.py rewrites them).

The profile tables come from results/h200/profile-t2-Ne16/, whose raw exports (nsys.sqlite.gz, ncu.csv.gz,
microbench.json) the GPU step `profile` of scripts/gpu_session.sh produces; while that folder lacks them,
the blocks that read it are skipped, saying so.
"""

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PROFILE = ROOT / "results" / "h200" / "profile-t2-Ne16"
RAW_EXPORTS = ("nsys.sqlite.gz", "ncu.csv.gz", "microbench.json")
FIXTURES = ROOT / "tests" / "fixtures" / "profile"


def _script():
    spec = importlib.util.spec_from_file_location("update_doc_tables", ROOT / "scripts" / "update_doc_tables.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("update_doc_tables", module)  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


doc_tables = _script()
BLOCKS = doc_tables.blocks()


def missing_raw_exports() -> list[str]:
    return [name for name in RAW_EXPORTS if not (PROFILE / name).is_file()]


def test_the_docs_quote_the_profile_tables_through_generated_blocks():
    commands = [b.args for b in BLOCKS]
    rel = PROFILE.relative_to(ROOT)
    assert any(f"profile parse {rel}/nsys.sqlite.gz" in c and "--table ranges" in c for c in commands), commands
    assert any(f"profile parse {rel}/ncu.csv.gz --microbench {rel}/microbench.json" in c for c in commands), commands


@pytest.mark.parametrize("block", BLOCKS, ids=lambda b: f"{b.doc.name}: {b.args}")
def test_generated_block_matches_what_its_command_prints(block):
    if str(PROFILE.relative_to(ROOT)) in block.args and missing_raw_exports():
        pytest.skip(
            f"{PROFILE.relative_to(ROOT)} lacks {', '.join(missing_raw_exports())}: "
            "run the GPU step `profile` (scripts/gpu_session.sh) and commit its folder"
        )
    assert doc_tables.output(block.args) == block.body, (
        f"{block.doc.relative_to(ROOT)} quotes a stale table: run python3 scripts/update_doc_tables.py"
    )


def test_update_rewrites_a_stale_block_and_check_then_passes(tmp_path):
    (tmp_path / "docs").mkdir()
    args = f"profile parse {FIXTURES / 'nsys_run.sqlite'} --markdown --table categories"
    doc = tmp_path / "docs" / "x.md"
    doc.write_text(f"before\n<!-- zincbench: {args} -->\n| old |\n<!-- /zincbench -->\nafter\n")
    (tmp_path / "README.md").write_text("no blocks\n")
    assert [b.args for b, _ in doc_tables.stale(tmp_path)] == [args]
    assert [b.args for b in doc_tables.update(tmp_path)] == [args]
    text = doc.read_text()
    assert text.startswith("before\n<!-- zincbench: ") and text.endswith("<!-- /zincbench -->\nafter\n")
    assert "**GPU time per category**" in text and "| old |" not in text
    assert doc_tables.stale(tmp_path) == []
