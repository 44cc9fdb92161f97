"""``zincbench history --html``: the history as one self-contained HTML page (nothing fetched at view time).

First the current regressions (series whose newest step made them slower), then one plot per family x
case: a line per variant and GPU (its runs' medians over recording time, log scale), the median's
interval as a band, steps marked where they happened. The plots are inline SVG drawn here; a little
vanilla JS finds the run nearest the pointer and shows its commit, median and interval.
"""

from __future__ import annotations

import html
import json
import math

from zincbench.history import History, Run, Series
from zincbench.show.history_table import percent, us

WIDTH, HEIGHT = 760, 240
LEFT, RIGHT, TOP, BOTTOM = 64, 12, 12, 28
COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f"]

STYLE = """
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em auto;max-width:800px;color:#222}
h1{font-size:1.4em}h2{font-size:1.1em;margin:1.6em 0 .3em}
table{border-collapse:collapse;font-size:13px;display:block;overflow-x:auto}
td,th{padding:2px 8px;border-bottom:1px solid #ddd;text-align:left;white-space:nowrap}
td.n{text-align:right;font-variant-numeric:tabular-nums}
svg.plot{display:block;border:1px solid #eee;background:#fff}
svg text{font:11px system-ui,sans-serif;fill:#555}
.legend{font-size:12px;margin:.2em 0 0}.legend span{display:inline-block;margin-right:1em}
.legend i{display:inline-block;width:10px;height:10px;margin-right:4px;vertical-align:middle}
#tip{position:fixed;pointer-events:none;background:#222;color:#fff;padding:4px 8px;border-radius:4px;
font-size:12px;white-space:pre;display:none;z-index:9}
"""

SCRIPT = """
(function () {
  var data = JSON.parse(document.getElementById("history-data").textContent);
  var tip = document.getElementById("tip");
  var ready = 0;
  data.plots.forEach(function (plot) {
    var svg = document.getElementById(plot.id);
    var mark = svg.querySelector(".hover");
    svg.addEventListener("mousemove", function (ev) {
      var pt = svg.createSVGPoint();
      pt.x = ev.clientX; pt.y = ev.clientY;
      var p = pt.matrixTransform(svg.getScreenCTM().inverse());
      var best = null, bestD = Infinity;
      plot.series.forEach(function (s) {
        s.points.forEach(function (q) {
          var d = (q[0] - p.x) * (q[0] - p.x) + (q[1] - p.y) * (q[1] - p.y);
          if (d < bestD) { bestD = d; best = [s, q]; }
        });
      });
      if (!best) { return; }
      var s = best[0], q = best[1], run = data.runs[q[5]];
      mark.setAttribute("cx", q[0]); mark.setAttribute("cy", q[1]);
      mark.setAttribute("stroke", s.color); mark.style.display = "";
      tip.textContent = s.label + "\\ncommit " + run[0] + "\\nrecorded " + run[1] +
        "\\nmedian " + q[2] + " \\u00b5s\\ninterval [" + q[3] + ", " + q[4] + "] \\u00b5s";
      tip.style.display = "block";  // shown before it is placed: its width keeps it inside the window
      var left = ev.clientX + 14;
      if (left + tip.offsetWidth > window.innerWidth) { left = Math.max(0, ev.clientX - 14 - tip.offsetWidth); }
      tip.style.left = left + "px"; tip.style.top = (ev.clientY + 10) + "px";
    });
    svg.addEventListener("mouseleave", function () { tip.style.display = "none"; mark.style.display = "none"; });
    svg.setAttribute("data-ready", "1");
    ready += 1;
  });
  document.body.setAttribute("data-plots-ready", String(ready));
})();
"""


def _e(text) -> str:
    return html.escape(str(text), quote=True)


def _num(value: float) -> str:
    """A finite number for the page's data, at 4 significant digits (null where there is none)."""
    return float(f"{value:.4g}") if math.isfinite(value) else None


class _Axes:
    """Recording time -> x, log10(µs) -> y, for one plot."""

    def __init__(self, runs: list[Run]):
        times = [r.timestamp.timestamp() for r in runs]
        values = [v for r in runs for v in (r.median_us, *r.interval_us) if math.isfinite(v) and v > 0]
        self.t0, self.t1 = min(times), max(times)
        lo, hi = math.log10(min(values)), math.log10(max(values))
        pad = max((hi - lo) * 0.08, 0.01)
        self.y0, self.y1 = lo - pad, hi + pad

    def x(self, run: Run) -> float:
        span = self.t1 - self.t0
        frac = (run.timestamp.timestamp() - self.t0) / span if span else 0.5
        return round(LEFT + frac * (WIDTH - LEFT - RIGHT), 1)

    def y(self, value: float) -> float:
        frac = (math.log10(value) - self.y0) / (self.y1 - self.y0)
        return round(TOP + (1 - frac) * (HEIGHT - TOP - BOTTOM), 1)

    def ticks(self) -> list[float]:
        """Round values inside the y range: 1, 2 and 5 of each decade across more than one decade, else
        at most six evenly spaced ones (a 1-2-5 step)."""
        lo, hi = 10**self.y0, 10**self.y1
        if self.y1 - self.y0 > 1:
            return [
                m * 10**d
                for d in range(math.floor(self.y0), math.ceil(self.y1) + 1)
                for m in (1, 2, 5)
                if lo <= m * 10**d <= hi
            ]
        base = 10 ** math.floor(math.log10((hi - lo) / 6))
        step = next(base * m for m in (1, 2, 5, 10) if (hi - lo) / (base * m) <= 6)
        return [k * step for k in range(math.ceil(lo / step), math.floor(hi / step) + 1)]


def _band(axes: _Axes, runs: list[Run]) -> str:
    """The median's interval as a polygon: upper bounds left to right, lower bounds back."""
    upper = [(axes.x(r), axes.y(r.interval_us[1] if math.isfinite(r.interval_us[1]) else r.median_us)) for r in runs]
    lower = [(axes.x(r), axes.y(r.interval_us[0] if math.isfinite(r.interval_us[0]) else r.median_us)) for r in runs]
    return " ".join(f"{x},{y}" for x, y in upper + lower[::-1])


def _plot(plot_id: str, members: list[Series], run_index: dict) -> tuple[str, dict]:
    axes = _Axes([r for s in members for r in s.runs])
    parts = [
        f'<svg class="plot" id="{plot_id}" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" role="img">'
    ]
    for value in axes.ticks():
        y = axes.y(value)
        parts.append(
            f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y}" y2="{y}" stroke="#eee"/>'
            f'<text x="{LEFT - 4}" y="{y + 4}" text-anchor="end">{_e(us(value))}</text>'
        )
    first, last = (
        min((r for s in members for r in s.runs), key=lambda r: r.timestamp),
        max((r for s in members for r in s.runs), key=lambda r: r.timestamp),
    )
    parts.append(
        f'<text x="{LEFT}" y="{HEIGHT - 8}">{_e(first.timestamp.date())}</text>'
        f'<text x="{WIDTH - RIGHT}" y="{HEIGHT - 8}" text-anchor="end">{_e(last.timestamp.date())}</text>'
        f'<text x="{(LEFT + WIDTH) // 2}" y="{HEIGHT - 8}" text-anchor="middle">'
        "median µs (log scale) over recording time</text>"
    )
    series_data = []
    for i, series in enumerate(members):
        color = COLORS[i % len(COLORS)]
        points = " ".join(f"{axes.x(r)},{axes.y(r.median_us)}" for r in series.runs)
        parts.append(
            f'<polygon class="band" points="{_band(axes, series.runs)}" fill="{color}" fill-opacity="0.15"/>'
            f'<polyline class="line" points="{points}" fill="none" stroke="{color}" stroke-width="1.5"/>'
        )
        if len(series.runs) == 1:  # a line of one run is invisible: a dot instead
            run = series.runs[0]
            parts.append(f'<circle cx="{axes.x(run)}" cy="{axes.y(run.median_us)}" r="3" fill="{color}"/>')
        for step in series.steps:
            run = series.runs[step.index]
            x, y = axes.x(run), axes.y(run.median_us)
            parts.append(
                f'<g class="step"><title>{_e(series.key.variant)} on {_e(series.key.gpu)}: step '
                f"{_e(percent(step.ratio))} at {_e(run.label)}</title>"
                f'<line x1="{x}" x2="{x}" y1="{TOP}" y2="{HEIGHT - BOTTOM}" stroke="{color}" '
                f'stroke-dasharray="4 3"/><path d="M{x - 5},{y - 10}h10l-5,8z" fill="{color}"/></g>'
            )
        series_data.append(
            {
                "label": f"{series.key.variant} on {series.key.gpu}",
                "color": color,
                "points": [
                    [
                        axes.x(r),
                        axes.y(r.median_us),
                        _num(r.median_us),
                        _num(r.interval_us[0]),
                        _num(r.interval_us[1]),
                        run_index[(r.label, r.timestamp.isoformat())],
                    ]
                    for r in series.runs
                ],
            }
        )
    parts.append('<circle class="hover" r="5" fill="none" stroke-width="2" style="display:none"/></svg>')
    legend = "".join(f'<span><i style="background:{s["color"]}"></i>{_e(s["label"])}</span>' for s in series_data)
    return "".join(parts) + f'<p class="legend">{legend}</p>', {"id": plot_id, "series": series_data}


def _level(value: float, interval: tuple[float, float]) -> str:
    """A segment's level and the envelope of its runs' intervals: '60.04 [59.1, 61.2]'."""
    return f"{us(value)} [{us(interval[0])}, {us(interval[1])}]"


def _regressions(history: History) -> str:
    rows = []
    for series in history.regressions:
        step = series.regression
        run = series.runs[step.index]
        rows.append(
            f"<tr><td>{_e(series.key.label)}</td><td class=n>{_e(percent(step.ratio))}</td>"
            f"<td>{_e(run.label)}</td>"
            f"<td class=n>{_e(_level(step.before, step.before_interval))}</td>"
            f"<td class=n>{_e(_level(step.after, step.after_interval))}</td></tr>"
        )
    if not rows:
        return "<p>None: no series' newest step made it slower.</p>"
    return (
        "<table><tr><th>series</th><th>step</th><th>at commit</th><th>before µs</th>"
        "<th>now µs</th></tr>" + "".join(rows) + "</table>"
    )


def to_text(history: History) -> str:
    """The page."""
    runs = {(r.label, r.timestamp.isoformat()): None for s in history.series for r in s.runs}
    run_index = {key: i for i, key in enumerate(runs)}
    groups: dict[tuple[str, str], list[Series]] = {}
    for series in history.series:
        groups.setdefault((series.key.family, series.key.case), []).append(series)
    sections, plots = [], []
    for n, ((family, case), members) in enumerate(groups.items()):
        svg, data = _plot(f"plot-{n}", members, run_index)
        sections.append(f"<h2>{_e(family)} · {_e(case)}</h2>{svg}")
        plots.append(data)
    payload = json.dumps(
        {"plots": plots, "runs": [list(key) for key in run_index]}, separators=(",", ":"), allow_nan=False
    ).replace("</", "<\\/")  # no "</script>" inside the script
    rules = history.rules
    return (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>zincbench history</title>'
        f"<style>{STYLE}</style></head><body>"
        f"<h1>zincbench history</h1><p>{history.documents} microbench documents, {len(history.series)} series, "
        f"runs placed by document timestamp (when each was recorded). A step: adjacent segments of runs "
        f"whose median intervals do not overlap, levels at least {rules.min_change:.0%} apart, each of at "
        f"least {rules.min_runs} runs but the newest (experiments/history.yaml).</p>"
        f"<h2>Current regressions</h2>{_regressions(history)}{''.join(sections)}"
        f'<div id="tip"></div><script type="application/json" id="history-data">{payload}</script>'
        f"<script>{SCRIPT}</script></body></html>\n"
    )
