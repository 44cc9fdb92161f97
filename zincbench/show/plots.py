"""PNG plots of a merged report (matplotlib, the optional ``plot`` extra).

- T2: time vs N_e per variant, one panel per expert shape, with the hardware floor (max of
  bytes_min / copy bandwidth and FLOPs / fp16 peak, measured in the same run) as a black line and
  llama.cpp's recorded time (shown, never judged) in grey;
- T1: speedup over the baseline (the engine's round trip) per shape and T, one panel per run;
- ab: the scoreboard as bars (prefill p90 per arm, and llama-bench's ppT where recorded);
- layer: the block's stages stacked per T, the gate's baseline and candidate side by side, one panel
  per case family (every key part but T), from the per-stage times of the same run.

Runs of several devices share an axis: line style and marker tell the runs apart, colour the variant.
"""

from __future__ import annotations

import collections
from pathlib import Path

from zincbench.errors import EnvironmentProblem

LINE_STYLES = ("-", "--", ":", "-.")
MARKERS = ("o", "s", "^", "D", "v")


def require_matplotlib():
    """pyplot on the file-only Agg backend, or an environment error naming the extra to install."""
    try:
        import matplotlib
    except ImportError:
        from zincbench.install import extra_hint

        raise EnvironmentProblem(f"--plot needs matplotlib, which is not installed: {extra_hint('plot')}") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _rows(report, family: str) -> list[tuple]:
    """(source label, MicrobenchRow) for each timed row of a microbench family."""
    return [
        (s.label, r)
        for s in report.of_kind("microbench")
        for r in s.doc.get("results") or []
        if (r.family or s.doc["config"].get("family")) == family and r.summary
    ]


def plot_t2(report, out_dir: Path, plt) -> Path | None:
    from matplotlib.ticker import ScalarFormatter

    rows = _rows(report, "t2")
    if not rows:
        return None
    shapes = list(dict.fromkeys((r.params["experts"], r.params["rows"], r.params["k"]) for _, r in rows))
    labels = list(dict.fromkeys(label for label, _ in rows))
    variants = list(dict.fromkeys(r.variant for _, r in rows))
    colors = {v: f"C{i}" for i, v in enumerate(variants)}
    fig, axes = plt.subplots(1, len(shapes), figsize=(5 * len(shapes), 4), squeeze=False)
    for ax, (e, m, k) in zip(axes[0], shapes):
        mine = [(label, r) for label, r in rows if (r.params["experts"], r.params["rows"], r.params["k"]) == (e, m, k)]
        for li, label in enumerate(labels):
            suffix = f" · {label}" if len(labels) > 1 else ""
            for variant in variants:
                points = sorted(
                    (r.params["tokens_per_expert"], r.summary.median_us)
                    for lab, r in mine
                    if lab == label and r.variant == variant and r.summary.median_us is not None
                )
                if points:
                    ax.plot(
                        *zip(*points),
                        color=colors[variant],
                        linestyle=LINE_STYLES[li % len(LINE_STYLES)],
                        marker=MARKERS[li % len(MARKERS)],
                        label=f"{variant}{suffix}",
                    )
            # Per case, the same for every variant: the hardware floor, and llama.cpp's time where recorded.
            floors, llama = collections.defaultdict(list), {}
            for lab, r in mine:
                if lab != label:
                    continue
                if r.floor and r.floor.us is not None:
                    floors[r.params["tokens_per_expert"]].append(r.floor.us)
                if (r.reference or {}).get("llama_cpp_us") is not None:
                    llama[r.params["tokens_per_expert"]] = r.reference["llama_cpp_us"]
            style = LINE_STYLES[(li + 1) % len(LINE_STYLES)]
            if floors:
                xs = sorted(floors)
                ax.plot(
                    xs,
                    [min(floors[x]) for x in xs],
                    color="black",
                    linewidth=1,
                    linestyle=style,
                    label=f"hardware floor{suffix}",
                )
            if llama:
                xs = sorted(llama)
                ax.plot(
                    xs,
                    [llama[x] for x in xs],
                    color="grey",
                    marker="x",
                    linewidth=1,
                    linestyle=style,
                    label=f"llama.cpp{suffix}",
                )
        ax.set(
            title=f"E{e} M{m} K{k}",
            xlabel="tokens per expert N_e",
            ylabel="median time (µs, log)",
            xscale="log",
            yscale="log",
        )  # variants differ by orders of magnitude; the floor must stay visible
        ax.set_xticks(sorted({r.params["tokens_per_expert"] for _, r in mine}))
        ax.get_xaxis().set_major_formatter(ScalarFormatter())
        ax.minorticks_off()
        ax.grid(alpha=0.3)
    axes[0][-1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))
    fig.suptitle("T2 routed-expert projection: time vs N_e")
    fig.tight_layout()
    return _save(fig, out_dir / "t2_time_vs_ne.png", plt)


def plot_t1(report, out_dir: Path, plt) -> Path | None:
    rows = [(label, r) for label, r in _rows(report, "t1") if r.vs_baseline and r.vs_baseline.speedup is not None]
    if not rows:
        return None
    labels = list(dict.fromkeys(label for label, _ in rows))
    variants = list(dict.fromkeys(r.variant for _, r in rows))
    cases = list(dict.fromkeys(r.case for _, r in rows))
    baseline = rows[0][1].vs_baseline.baseline
    height = 0.8 / len(variants)
    fig, axes = plt.subplots(
        1, len(labels), figsize=(6 * len(labels), 1.5 + 0.3 * len(cases)), squeeze=False, sharey=True
    )
    for ax, label in zip(axes[0], labels):
        for vi, variant in enumerate(variants):
            speed = {r.case: r.vs_baseline.speedup for lab, r in rows if lab == label and r.variant == variant}
            ys = [ci + vi * height for ci, case in enumerate(cases) if case in speed]
            ax.barh(ys, [speed[c] for c in cases if c in speed], height=height, color=f"C{vi}", label=variant)
        ax.axvline(1.0, color="black", linewidth=1)
        ax.set(title=label, xlabel=f"speedup over {baseline} (×)")
        ax.grid(axis="x", alpha=0.3)
    axes[0][0].set_yticks([ci + 0.4 - height / 2 for ci in range(len(cases))], cases, fontsize=7)
    axes[0][0].invert_yaxis()
    axes[0][-1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))
    fig.suptitle(f"T1 dense GEMM: each variant vs {baseline} per shape and T")
    fig.tight_layout()
    return _save(fig, out_dir / "t1_vs_round_trip.png", plt)


def plot_ab(report, out_dir: Path, plt) -> Path | None:
    if not report.ab:
        return None
    fig, axes = plt.subplots(len(report.ab), 1, figsize=(8, 3.5 * len(report.ab)), squeeze=False)
    for ax, run in zip(axes[:, 0], report.ab):
        models = [m.model for m in run["models"]]
        bars = {f"{arm} prefill p90": [m.arms[arm].prefill_p90 for m in run["models"]] for arm in run["arms"]}
        llama = [((m.llama or {}).get("pp") or {}).get("avg_ts") for m in run["models"]]
        if any(v is not None for v in llama):
            bars["llama-bench ppT"] = llama
        width = 0.8 / len(bars)
        for bi, (name, values) in enumerate(bars.items()):
            xs = [i + bi * width for i, v in enumerate(values) if v is not None]
            ax.bar(xs, [v for v in values if v is not None], width=width, color=f"C{bi}", label=name)
        ax.set_xticks([i + 0.4 - width / 2 for i in range(len(models))], models, rotation=20, ha="right")
        ax.set(title=f"{run['run']} · {run['overall']}", ylabel="prefill tokens/s")
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    return _save(fig, out_dir / "ab_scoreboard.png", plt)


def plot_layer_stages(report, out_dir: Path, plt) -> Path | None:
    rows = [(label, r) for label, r in _rows(report, "layer") if (r.detail or {}).get("stages_us")]
    if not rows:
        return None
    groups = list(dict.fromkeys((label, r.case.replace(f"-T{r.params['tokens']}", "")) for label, r in rows))
    stages = list(dict.fromkeys(s["stage"] for _, r in rows for s in r.detail["stages_us"]))
    colors = {stage: f"C{i % 10}" for i, stage in enumerate(stages)}
    fig, axes = plt.subplots(1, len(groups), figsize=(6 * len(groups), 4.5), squeeze=False)
    for ax, (label, family_key) in zip(axes[0], groups):
        mine = [r for lab, r in rows if lab == label and r.case.replace(f"-T{r.params['tokens']}", "") == family_key]
        bars = sorted({(r.params["tokens"], r.role != "baseline", r.variant) for r in mine})
        ticks = []
        for x, (t, _, variant) in enumerate(bars):
            row = next(r for r in mine if r.params["tokens"] == t and r.variant == variant)
            bottom = 0.0
            for s in row.detail["stages_us"]:
                ax.bar(
                    x,
                    s["median_us"],
                    bottom=bottom,
                    color=colors[s["stage"]],
                    label=s["stage"] if s["stage"] not in ax.get_legend_handles_labels()[1] else None,
                )
                bottom += s["median_us"]
            ax.plot([x - 0.4, x + 0.4], [row.summary.median_us] * 2, color="black", linewidth=1)  # the whole block
            ticks.append(f"T{t}\n{variant}")
        ax.set_xticks(range(len(bars)), ticks, fontsize=7)
        ax.set(
            title=f"{family_key} · {label}" if len(report.of_kind("microbench")) > 1 else family_key,
            ylabel="median time per stage (µs); black: whole block",
        )
        ax.grid(axis="y", alpha=0.3)
    axes[0][-1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))
    fig.suptitle("MoE FFN block: time per stage, each stage timed alone")
    fig.tight_layout()
    return _save(fig, out_dir / "layer_stages.png", plt)


def _save(fig, path: Path, plt) -> Path:
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_report(report, out_dir: str | Path) -> list[Path]:
    """Every plot the report's documents support, written into ``out_dir`` (created)."""
    plt = require_matplotlib()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    return [
        p
        for p in (
            plot_t2(report, out, plt),
            plot_t1(report, out, plt),
            plot_ab(report, out, plt),
            plot_layer_stages(report, out, plt),
        )
        if p
    ]
