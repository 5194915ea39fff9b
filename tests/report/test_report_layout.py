"""The report's layout in a real headless Chromium at desktop and phone width (docs/files.md): nothing wider than
the screen, every legend inside its figure, section titles unique, detail folded away, and a VIOLATION's
failing comparison with its numbers and meaning on the first screen.

Screenshots of every page checked (first screen and whole page, both widths) are written to the folder
``reports/browser-test/`` of the repository, or to ``$FDP_AUDIT_SCREENSHOTS`` when set, for a person to look at.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from fdp_audit.auditing.labels import attack_words
from fdp_audit.report import render_report
from fdp_audit.report.format import number
from tests.report.conftest import assert_fits

pytestmark = pytest.mark.browser

SCREENSHOTS = Path(os.environ.get("FDP_AUDIT_SCREENSHOTS") or Path(__file__).resolve().parents[2] / "reports"
                   / "browser-test")
# (name, width, first-screen height): a laptop and a phone (CSS pixels of a common 6.1-inch phone)
SCREENS = [("desktop", 1280, 800), ("phone", 390, 844)]
TALLEST = 16000  # a whole-page screenshot taller than this is cut (Chromium's own limit is near 16,384)


@pytest.fixture(scope="module")
def screenshot_dir() -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    return SCREENSHOTS


def _check_page(chromium, probe, page_html: str, name: str, screen: tuple[str, int, int], tmp_path: Path,
                screenshot_dir: Path) -> dict:
    label, width, height = screen
    report = tmp_path / f"{name}.html"
    report.write_text(page_html, encoding="utf-8")
    layout = probe.read(chromium.visit(probe.copy(page_html, tmp_path / f"{name}-probe.html", width, height),
                                       width=max(width, 500), height=height + 100))
    assert layout["viewport"] == [width, height]
    first = chromium.visit(report, width=width, height=height)
    whole = chromium.visit(report, width=width, height=min(layout["scrollHeight"], TALLEST))
    shutil.copyfile(first.screenshot, screenshot_dir / f"{name}-{label}-first-screen.png")
    shutil.copyfile(whole.screenshot, screenshot_dir / f"{name}-{label}-page.png")

    assert_fits(layout, width, f"{name} at {label} width")
    assert layout["legends"], "no legend measured: the probe lost its figures"
    assert layout["details"], "no <details>: per-threshold tables must be folded away"
    return layout


@pytest.mark.parametrize("screen", SCREENS, ids=[s[0] for s in SCREENS])
def test_pass_report_fits_the_screen(chromium, layout_probe, results, baseline_results, screen, tmp_path,
                                     screenshot_dir):
    page = render_report(results, baseline_results)
    assert "Change since the baseline" in page
    layout = _check_page(chromium, layout_probe, page, "pass", screen, tmp_path, screenshot_dir)
    assert layout["failing"] == []
    # the summary chart's legend and the trade-off plot's (the one that held 20 entries) are both measured
    figures = {legend["figure"] for legend in layout["legends"]}
    assert {"fig-summary", "fig-tradeoff"} <= figures


@pytest.mark.parametrize("screen", SCREENS, ids=[s[0] for s in SCREENS])
def test_violation_shows_the_failing_comparison_on_the_first_screen(
    chromium, layout_probe, violation_results, screen, tmp_path, screenshot_dir
):
    page = render_report(violation_results)
    layout = _check_page(chromium, layout_probe, page, "violation", screen, tmp_path, screenshot_dir)
    (failing,) = layout["failing"]
    _, _, height = screen
    assert failing["bottom"] <= height, f"the failing comparison ends below the first screen ({failing['bottom']})"
    comparison = next(c for c in violation_results["comparisons"] if c["successes"] == 170)
    attack = next(a for a in violation_results["games"][2]["attacks"] if a["attack"] == comparison["attack"])
    assert violation_results["verdict"]["violations"] == [comparison["id"]]
    for shown in (attack_words(comparison), "170 of 200", number(attack["lower_bound"]), number(comparison["bound"]),
                  "leaks more than its privacy accounting says"):
        assert shown in failing["text"], (shown, failing["text"])
