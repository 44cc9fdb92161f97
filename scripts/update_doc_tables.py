"""Regenerate the tables the docs quote from the committed files they were computed from.

A generated block in README.md or docs/*.md names the zincbench command that prints it:

    <!-- zincbench: profile parse results/h200/profile-t2-Ne16/nsys.sqlite.gz --markdown --table ranges -->
    ...what that command prints...
    <!-- /zincbench -->

    python3 scripts/update_doc_tables.py          rewrite every block with what its command prints now
    python3 scripts/update_doc_tables.py --check  list the blocks that differ, exit 1 if any (tests do this)

Commands run from the repository root as `python3 -m zincbench ARGS` with this checkout first on the path,
so a block can only quote what committed files give.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BLOCK = re.compile(r"(<!-- zincbench: (?P<args>.+?) -->\n)(?P<body>.*?)(<!-- /zincbench -->)", re.DOTALL)


@dataclass
class Block:
    doc: Path
    args: str
    body: str


def documents(root: Path = ROOT) -> list[Path]:
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def blocks(root: Path = ROOT) -> list[Block]:
    return [
        Block(doc, m["args"], m["body"])
        for doc in documents(root)
        for m in BLOCK.finditer(doc.read_text(encoding="utf-8"))
    ]


def output(args: str, root: Path = ROOT) -> str:
    """What `zincbench ARGS` prints, run from ``root`` with this checkout's zincbench; a failing command
    raises with its stderr."""
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}", "COLUMNS": "100"}
    result = subprocess.run(
        [sys.executable, "-m", "zincbench", *shlex.split(args)],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if result.returncode != 0:
        raise RuntimeError(f"`zincbench {args}` exited {result.returncode}: {result.stderr.strip()}")
    return result.stdout if result.stdout.endswith("\n") else result.stdout + "\n"


def stale(root: Path = ROOT) -> list[tuple[Block, str]]:
    """(block, what its command prints now) for every block whose text differs."""
    return [(b, text) for b in blocks(root) if (text := output(b.args, root)) != b.body]


def update(root: Path = ROOT) -> list[Block]:
    """Rewrite every stale block in place; the blocks rewritten."""
    changed = stale(root)
    for doc in {b.doc for b, _ in changed}:
        fresh = {b.args: text for b, text in changed if b.doc == doc}
        text = doc.read_text(encoding="utf-8")
        text = BLOCK.sub(lambda m: m[1] + fresh.get(m["args"], m["body"]) + m[4], text)
        doc.write_text(text, encoding="utf-8")
    return [b for b, _ in changed]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="only list stale blocks; exit 1 if any")
    opts = parser.parse_args(argv)
    found = stale() if opts.check else [(b, "") for b in update()]
    for block, _ in found:
        print(f"{'stale' if opts.check else 'updated'}: {block.doc.relative_to(ROOT)}: zincbench {block.args}")
    if not found:
        print(f"{len(blocks())} generated blocks, all current")
    return 1 if opts.check and found else 0


if __name__ == "__main__":
    sys.exit(main())
