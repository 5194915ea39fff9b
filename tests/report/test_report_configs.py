"""Every shipped audit config's report in a real headless Chromium at phone (390 px) and desktop (1280 px) width
(docs/files.md, "The report"): nothing wider than the screen, nothing scrolling sideways, every legend inside its
figure. The results are recorded from a small variant of each config, the demo and the tour's checkpoint audit
(tests/report/fixtures/record_configs.py); all reports are laid out in one browser start."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from fdp_audit.report import render_report
from tests.report.conftest import assert_fits, layouts_of, probed_pages
from tests.report.fixtures.record_configs import OUT, audit_configs, fixture_name

SCREENS = {"phone": (390, 844), "desktop": (1280, 800)}


def recorded() -> dict[str, dict]:
    return {path.name.removesuffix(".json.gz"): json.loads(gzip.decompress(path.read_bytes()))
            for path in sorted(OUT.glob("*.json.gz"))}


def test_every_shipped_audit_config_has_a_recorded_report() -> None:
    """A config added without its recorded report (or a recording left after its config went) fails here."""
    expected = {fixture_name(path) for path in audit_configs()} | {"demo", "checkpoint"}
    assert set(recorded()) == expected


@pytest.mark.browser
def test_every_shipped_config_report_fits_a_phone_and_a_laptop(chromium, tmp_path: Path) -> None:
    pages = {name: render_report(results) for name, results in recorded().items()}
    frames = {f"{name}--{screen}": (page, width, height) for name, page in pages.items()
              for screen, (width, height) in SCREENS.items()}
    widest = max(width for width, _ in SCREENS.values())
    visit = chromium.visit(probed_pages(frames, tmp_path / "probe.html"), width=widest + 20, height=900)
    layouts = layouts_of(visit)
    assert set(layouts) == set(frames)
    for frame, layout in layouts.items():
        name, screen = frame.split("--")
        width, height = SCREENS[screen]
        assert layout["viewport"] == [width, height], frame
        assert_fits(layout, width, f"{name} at {screen} width")
        # an image game's example canaries: every panel at least 96 px wide, on a phone too
        assert all(panel >= 96 for panel in layout["panels"]), (frame, layout["panels"])
    assert layouts["images_games--phone"]["panels"], "the image games' example canaries were not drawn"
