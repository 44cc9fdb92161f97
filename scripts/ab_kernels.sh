#!/usr/bin/env bash
# Side-by-side A/B of two kernel sources on one GPU: A = an older kernels/ folder (BASE, e.g. `git archive REV kernels`
# unpacked into an ignored folder), B = this checkout's. The fused probe runs in the order A B B A (ROUNDS times),
# each side in its own process over its own copy of the package, so drift over the run shows in A against A; then
# one line per (case, tile): both sides' medians and B / A.
#
#   bash scripts/ab_kernels.sh BASE PROBE_MODE [ROUNDS]      (run from the checkout; PROBE_MODE: see probe_fused.py)
set -eu
[ $# -ge 2 ] || { echo "usage: bash scripts/ab_kernels.sh BASE PROBE_MODE [ROUNDS]"; exit 2; }
base=$1 mode=$2 rounds=${3:-1}
[ -f "$base/kquant_fused_mma.cu" ] || { echo "ab_kernels: $base holds no kernels/ folder"; exit 2; }
tree=/tmp/zb-ab-base
rm -rf "$tree" && mkdir -p "$tree"
cp -r zincbench scripts experiments pyproject.toml "$tree"/ && cp -r "$base" "$tree/kernels"
logs=$(mktemp -d)
side() {  # side A|B N: one probe run of that side into $logs/side-N.log
    if [ "$1" = A ]; then
        (cd "$tree" && PYTHONPATH="$tree${PYTHONPATH:+:$PYTHONPATH}" python3 scripts/probe_fused.py "$mode") >"$logs/$1-$2.log"
    else
        python3 scripts/probe_fused.py "$mode" >"$logs/$1-$2.log"
    fi
    echo "--- $1 run $2"
    cat "$logs/$1-$2.log"
}
for i in $(seq "$rounds"); do
    side A "$i.1"; side B "$i.1"; side B "$i.2"; side A "$i.2"
done
python3 - "$logs" <<'EOF'
import pathlib, re, statistics, sys

runs = {"A": {}, "B": {}}
for path in sorted(pathlib.Path(sys.argv[1]).glob("*.log")):
    case = None
    for line in path.read_text().splitlines():
        if line.startswith("T2 ") or line.startswith("T1 "):
            case = line.split(":")[0]
        elif (m := re.match(r"\s+gemm (\S+)\s+\S+\s+([\d.]+) us", line)) and case:
            runs[path.name[0]].setdefault((case, m.group(1)), []).append(float(m.group(2)))
print(f"{'case':20s} {'tile':20s} {'A us':>13s} {'B us':>13s} {'B/A':>6s}")
for key in runs["A"]:
    a, b = runs["A"][key], runs["B"].get(key, [])
    if b:
        ratio = statistics.median(b) / statistics.median(a)
        fmt = lambda v: "/".join(f"{x:.1f}" for x in v)
        print(f"{key[0]:20s} {key[1]:20s} {fmt(a):>13s} {fmt(b):>13s} {ratio:6.3f}")
EOF
