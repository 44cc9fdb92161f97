"""``zincbench history --html``: one self-contained page (nothing fetched at view time), a plot per case
with a line per variant and GPU, steps marked, regressions first; and the page in a real headless
Chromium (Playwright): every plot rendered, hover shows a run, no script error. That test skips, saying
why, where Playwright or a Chromium is not installed (CI has neither: `pip install playwright` and the
distribution's chromium package make it run)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from test_history import ROOT, RULES, run_cli, write_history

from zincbench import history
from zincbench.show import history_html


@pytest.fixture(scope="module")
def page(tmp_path_factory) -> Path:
    """Two GPUs, two cases' worth of variants, one regression (fused on the H200, at commit 8)."""
    folder = tmp_path_factory.mktemp("history")
    write_history(folder / "h200", {"base": [100.0] * 12, "fused": [50.0] * 8 + [60.0] * 4}, gpu="NVIDIA H200")
    write_history(folder / "h100", {"base": [130.0] * 6, "fused": [70.0] * 6}, gpu="NVIDIA H100", seed=1)
    out = folder / "history.html"
    code, _, err = run_cli("history", folder / "h200", folder / "h100", "--html", out)
    assert code == 0, err
    return out


def test_the_page_is_self_contained(page):
    text = page.read_text()
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", text)  # no script, style or image fetched
    assert "@import" not in text and "url(" not in text
    assert text.count("<svg") == 1  # one case (Ne16): one plot, its four lines inside
    assert text.count('class="line"') == 4 and text.count('class="step"') == 1


def test_regressions_come_first(page):
    text = page.read_text()
    assert text.index("Current regressions") < text.index("<svg")
    table = text[text.index("Current regressions") : text.index("<svg")]
    assert "t2/Ne16/fused on NVIDIA H200" in table and "0008abab" in table
    assert re.search(r"<td class=n>\+(19\.\d|20\.\d)%</td>", table)  # 50 -> 60 µs


def test_no_regressions_say_so(tmp_path):
    write_history(tmp_path, {"fused": [50.0] * 4})
    assert "None: no series" in history_html.to_text(history.build_history([tmp_path], RULES))


def test_the_committed_results_render(tmp_path):
    out = tmp_path / "page.html"
    code, _, err = run_cli("history", ROOT / "results", "--html", out)
    assert code == 0, err
    assert out.read_text().count("<svg") == len(
        {(s.key.family, s.key.case) for s in history.build_history([ROOT / "results"], RULES).series}
    )


# --- in a real browser -----------------------------------------------------------------------------------------


def _chromium() -> str | None:
    """The distribution's Chromium; None lets Playwright look for its own download."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if shutil.which(name):
            return shutil.which(name)
    return None


def test_the_page_renders_in_a_headless_browser(page):
    playwright = pytest.importorskip(
        "playwright.sync_api", reason="Playwright is not installed (pip install -e '.[browser]')"
    )
    executable = _chromium()
    with playwright.sync_playwright() as p:
        try:
            browser = p.chromium.launch(executable_path=executable, args=["--no-sandbox"])
        except playwright.Error as exc:
            pytest.skip(f"no Chromium to drive (install the distribution's chromium package): {exc}"[:300])
        errors = []
        view = browser.new_page()
        view.on("pageerror", lambda exc: errors.append(str(exc)))
        view.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
        view.on("request", lambda req: errors.append(f"fetched {req.url}") if not req.url.startswith("file:") else None)
        view.goto(page.as_uri())
        plots = view.locator("svg.plot")
        assert plots.count() == 1
        assert view.evaluate("document.body.dataset.plotsReady") == "1"
        for i in range(plots.count()):
            plot = plots.nth(i)
            assert plot.get_attribute("data-ready") == "1"
            box = plot.bounding_box()
            assert box and box["width"] > 100 and box["height"] > 100
            assert plot.locator("polyline.line").count() == 4
        box = plots.nth(0).bounding_box()
        view.mouse.move(box["x"] + box["width"] - 20, box["y"] + box["height"] / 2)  # near the newest runs
        tip = view.locator("#tip")
        assert tip.is_visible() and "commit" in tip.inner_text() and "interval" in tip.inner_text()
        browser.close()
    assert errors == []
