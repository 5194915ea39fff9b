"""The report opened in a real headless browser (docs/files.md): it draws, shows the stored numbers, and
fetches nothing."""

from __future__ import annotations

from pathlib import Path

import matplotlib.image
import numpy as np
import pytest

from fdp_audit.report import write_report
from fdp_audit.report.format import signed
from tests.report.conftest import assert_shows

pytestmark = pytest.mark.browser

# the verdict banner's colours (report.css --pass / --fail), as 0-1 RGB
PASS_GREEN = np.array([0x16, 0x65, 0x34]) / 255
FAIL_RED = np.array([0x99, 0x1B, 0x1B]) / 255


def _colour_share(pixels: np.ndarray, colour: np.ndarray) -> float:
    return float(np.mean(np.all(np.abs(pixels[..., :3] - colour) < 0.02, axis=-1)))


def test_screenshot_is_drawn_with_the_verdict_on_top(recorded_visit):
    png = matplotlib.image.imread(recorded_visit.screenshot)
    assert png.shape[:2] == (2000, 1280)
    ink = np.mean(png[..., :3], axis=-1) < 0.95
    assert 0.03 < ink.mean() < 0.9, f"the screenshot is (nearly) blank: {ink.mean():.3f} of it inked"
    assert png[..., :3].std() > 0.05
    # the green PASS banner is in the first screenful, before any section
    assert _colour_share(png[:600], PASS_GREEN) > 0.002


def _expected_pointers(results: dict) -> set[str]:
    """The values a reviewer must find on the page: verdict, the ε table, every attack row, utility."""
    wanted = {
        f"/verdict/{key}" for key in ("worst_margin", "worst_comparison", "explanation", "alpha", "n_comparisons")
    } | {"/mechanism/name", "/mechanism/delta", "/reproducibility/trials"}
    wanted |= {f"/accounting/epsilon/{delta}" for delta in results["accounting"]["epsilon"]}
    for g, game in enumerate(results["games"]):
        for a, attack in enumerate(game["attacks"]):
            base = f"/games/{g}/attacks/{a}"
            if game["game"] == "reconstruction":
                wanted |= {f"{base}/points/{p}/{key}" for p, point in enumerate(attack["points"]) for key in point}
            else:
                wanted |= {f"{base}/{key}" for key, value in attack.items() if not isinstance(value, dict | list)}
    wanted |= {f"/utility/rows/{r}/{key}" for r, row in enumerate(results["utility"]["rows"]) for key in row
               if key != "faulty"}
    return wanted


def test_dom_shows_the_verdict_and_the_stored_numbers(recorded_visit, results, page_reader, pointer):
    shown = page_reader(recorded_visit.dom)
    assert shown.verdict_status == results["verdict"]["status"] == "PASS"
    # the trade-off curve, the ε sweep, two reconstruction plots (prior and attack), two ROC plots each on linear
    # and log-log axes and the profile figure; the summary chart is HTML
    assert shown.svg_count == 9
    seen: set[str] = set()
    for cell in shown.cells:
        for where, value in cell.fields.items():
            assert pointer(results, where) == value, where
            seen.add(where)
            assert_shows(cell, where, value, results)
    missing = _expected_pointers(results) - seen
    assert not missing, f"not shown: {sorted(missing)[:10]}"


def test_no_external_url_is_referenced_or_fetched(
    recorded_visit, recorded_html, external_references, chromium, tmp_path
):
    assert external_references(recorded_html) == []
    assert "default-src 'none'" in recorded_html  # the page's own policy forbids any fetch, should one slip in
    assert recorded_visit.requests == []

    # the NetLog check itself works: a page with one remote image is caught
    control = tmp_path / "control.html"
    control.write_text('<!doctype html><img src="http://fdp-audit.invalid/pixel.png">', encoding="utf-8")
    assert chromium.visit(control, height=200).requests == ["http://fdp-audit.invalid/pixel.png"]


def test_violation_is_red_and_flags_the_faulty_mechanism(violation_results, chromium, page_reader, tmp_path: Path):
    visit = chromium.visit(write_report(violation_results, tmp_path / "report.html"))
    png = matplotlib.image.imread(visit.screenshot)
    assert _colour_share(png[:900], FAIL_RED) > 0.002
    assert _colour_share(png, PASS_GREEN) < 0.0005  # no PASS banner anywhere in view

    shown = page_reader(visit.dom)
    assert shown.verdict_status == "VIOLATION"
    margin = next(c for c in shown.cells if "/verdict/worst_margin" in c.fields)
    worst = signed(violation_results["verdict"]["worst_margin"])
    assert margin.text.startswith(f"{worst} · ") and worst == "+0.1171"
    assert "Known-faulty test mechanism" in visit.dom
    assert "fdp_sgd_shared_batch" in visit.dom
