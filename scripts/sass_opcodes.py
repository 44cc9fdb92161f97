"""Static instruction counts per kernel of a cuobjdump -sass listing, by opcode (the `sass_t2` step's summary).

    python scripts/sass_opcodes.py LISTING [OPCODE...]

Prints one line per kernel: its total and the count of each named opcode (default: the decode's and the MMA's)."""

from __future__ import annotations

import re
import sys
from collections import Counter

DEFAULT = ("HADD2", "HFMA2", "LOP3", "PRMT", "LDS", "LDGSTS", "UTMALDG", "HGMMA", "R2UR", "SYNCS", "WARPGROUP")


def kernels(listing: str) -> dict[str, Counter]:
    counts: dict[str, Counter] = {}
    name = None
    for line in listing.splitlines():
        if line.strip().startswith("Function : "):
            name = line.split(":", 1)[1].strip()
            counts[name] = Counter()
        elif name and (m := re.search(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9]*)", line)):
            counts[name][m.group(1)] += 1
    return counts


def main() -> None:
    if len(sys.argv) < 2:
        print("usage: python scripts/sass_opcodes.py LISTING [OPCODE...]", file=sys.stderr)
        sys.exit(2)
    try:
        listing = open(sys.argv[1], errors="replace").read()
    except OSError as exc:
        print(f"sass_opcodes: cannot read {sys.argv[1]}: {exc.strerror}", file=sys.stderr)
        sys.exit(2)
    wanted = sys.argv[2:] or DEFAULT
    for name, ops in kernels(listing).items():
        print(f"{name[:90]}\n  total {sum(ops.values())}: " + ", ".join(f"{op} {ops[op]}" for op in wanted))


if __name__ == "__main__":
    main()
