"""``fdp-audit gate RESULTS --baseline OLD`` and ``--markdown``: how each comparison moved since an earlier audit,
failing only on a significant rise when ``--max-regression`` asks; a Markdown summary for CI job pages."""

from __future__ import annotations

import copy
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from attacks import ATTACKS
from fdp_audit.auditing.gate import judge
from fdp_audit.auditing.results import SCHEMA_VERSION, write_results
from fdp_audit.claim import Claim
from fdp_audit.config import config_from_dict
from fdp_audit.json_numbers import finite_or_none

# the attacks as the labels name them: their registered titles
ITERATES = ATTACKS["iterates"].title
LIKELIHOOD = ATTACKS["likelihood"].title

TRIALS = 400


def results(iterates: int, likelihood: int = 220, noise: float = 1.0) -> dict[str, Any]:
    """Results as an audit of DP-SGD at p = 1, T = 1 writes them, with the bound Φ(1/z) that the gate
    re-derives from the stated configuration (0.84 at z = 1)."""
    config = config_from_dict({
        "data": {"dataset": "synthetic", "protected": ["protected"]},
        "mechanism": {"name": "dp_sgd", "noise_multiplier": noise, "sample_rate": 1.0, "steps": 1},
        "audit": {"target_prior": [0.5, 0.5]}})
    bound = float(Claim.of(config.mechanism).add_remove.bound(0.5))
    comparisons = [
        {"id": "attribute/likelihood", "kind": "rate", "game": "attribute", "attack": "likelihood",
         "trials": TRIALS, "successes": likelihood, "ball": 0.5, "bound": bound},
        {"id": "distinguishing-attribute/iterates", "kind": "rate", "game": "distinguishing", "attack": "iterates",
         "trials": TRIALS, "successes": iterates, "ball": 0.5, "bound": bound},
    ]
    verdict, _ = judge(comparisons, 0.05)
    return {"schema_version": SCHEMA_VERSION, "kind": "audit", "created": "2024-01-01T00:00:00Z",
            "verdict": verdict, "mechanism": finite_or_none(Claim.from_config(config).section()),
            "reproducibility": {"seed": 0, "config": config.to_dict()}, "comparisons": comparisons}


@pytest.fixture
def baseline(tmp_path: Path) -> Path:
    return write_results(tmp_path / "main" / "results.json", results(iterates=220))


@pytest.fixture
def risen(tmp_path: Path) -> Path:
    """The iterates attack went from 0.55 to 0.75: still below its bound 0.8 (a PASS), but far stronger."""
    return write_results(tmp_path / "branch" / "results.json", results(iterates=300))


def test_baseline_is_reported_without_failing_by_default(cli, risen, baseline):
    result = cli("gate", risen, "--baseline", baseline)
    assert result.code == 0
    assert result.out.startswith("PASS")
    assert "since the baseline: 2 comparisons matched, 0 regressed (report only)" in result.out
    # the rates, their difference and the confidence bound on the rise, never a bare signed bound
    assert ("largest rise in success rate: Attribute inference · gradient canaries (distinguishing game) · "
            f"{ITERATES} 0.55 → 0.75 (+0.2), a rise of at least 0.09") in result.out


def test_a_rise_that_is_not_significant_says_so(cli, baseline, tmp_path):
    """The baseline line said "largest rise … at least −0.1587" while the rate rose from 0.637 to 0.781."""
    slightly = write_results(tmp_path / "slightly.json", results(iterates=230))
    result = cli("gate", slightly, "--baseline", baseline)
    assert result.code == 0
    assert (f"(distinguishing game) · {ITERATES} 0.55 → 0.575 (+0.025), not a significant rise: at confidence 0.95 "
            "the rise is only known to be above -0.") in result.out


def test_a_significant_rise_fails_with_max_regression(cli, risen, baseline, tmp_path):
    junit, markdown = tmp_path / "gate.xml", tmp_path / "gate.md"
    result = cli("gate", risen, "--baseline", baseline, "--max-regression", "0.02", "--junit", junit,
                 "--markdown", markdown)
    assert result.code == 1
    assert "REGRESSION: since the baseline: 2 comparisons matched, 1 regressed" in result.out
    suite = ET.parse(junit).getroot()
    failed = [case.get("name") for case in suite.iter("testcase") if case.find("failure") is not None]
    assert failed == ["Rise since the baseline · Attribute inference · gradient canaries (distinguishing game) · "
                      f"{ITERATES}"]
    assert suite.get("tests") == "4"
    summary = markdown.read_text(encoding="utf-8")
    assert summary.startswith("## fdp-audit gate: PASS")
    assert "### Since the baseline: 1 regressed of 2 matched" in summary
    row = next(line for line in summary.splitlines()
               if line.startswith(f"| Attribute inference · gradient canaries (distinguishing game) · {ITERATES} | -"))
    assert "0.55 → 0.75" in row and "**REGRESSED**" in row


def test_the_summary_is_written_beside_the_junit_file_by_default(cli, risen, tmp_path):
    assert cli("gate", risen, "--junit", tmp_path / "ci" / "junit.xml").code == 0
    assert (tmp_path / "ci" / "junit.md").read_text(encoding="utf-8").startswith("## fdp-audit gate: PASS")


def test_a_tolerance_above_the_rise_passes(cli, risen, baseline):
    assert cli("gate", risen, "--baseline", baseline, "--max-regression", "0.3").code == 0


def test_same_results_never_regress(cli, baseline):
    assert cli("gate", baseline, "--baseline", baseline, "--max-regression", "0").code == 0


def test_markdown_without_baseline_lists_comparisons_closest_first(cli, risen, tmp_path):
    markdown = tmp_path / "summary.md"
    assert cli("gate", risen, "--markdown", markdown).code == 0
    lines = [line for line in markdown.read_text(encoding="utf-8").splitlines() if line.startswith("| Attribute")]
    assert [line.split(" | ")[0][2:] for line in lines] == [
        f"Attribute inference · gradient canaries (distinguishing game) · {ITERATES}",
        f"Attribute inference · record canaries · {LIKELIHOOD}"]
    assert "Theorem 4: 1 − f(Ball), add/remove" in lines[1]  # the limit says where it comes from
    assert "Since the baseline" not in markdown.read_text(encoding="utf-8")


def test_a_baseline_of_other_settings_is_refused_unless_allowed(cli, tmp_path, baseline, one_line_error):
    """A baseline that audited another noise multiplier was accepted with a note: its success rates measure
    another mechanism. It is bad input unless --allow-config-change, and then the change is named."""
    other = write_results(tmp_path / "other.json", results(iterates=220, noise=0.5))
    markdown = tmp_path / "summary.md"
    refused = cli("gate", other, "--baseline", baseline, "--markdown", markdown)
    assert refused.code == 2 and not markdown.exists()
    line = one_line_error(refused.err)
    assert "--baseline" in line and "mechanism.noise_multiplier: 1 → 0.5" in line and "--allow-config-change" in line
    assert cli("gate", other, "--baseline", baseline, "--markdown", markdown, "--allow-config-change").code == 0
    summary = markdown.read_text(encoding="utf-8")
    assert "noise_multiplier: 1 → 0.5" in summary and "other settings" in summary


def test_settings_that_leave_the_rates_comparable_are_no_change(baseline, tmp_path):
    """More trials, another seed, level, executor, title or data path: the same setting, measured again."""
    from fdp_audit.auditing.regression import config_changes
    from fdp_audit.auditing.results import read_results

    before = read_results(baseline)
    now = copy.deepcopy(before)
    config = now["reproducibility"]["config"]
    config["seed"] += 1
    config["audit"] |= {"trials": 10 * config["audit"]["trials"], "alpha": 0.01, "workers": 4}
    config["report"]["title"] = "another title"
    config["data"]["path"] = "/elsewhere/data.csv"
    assert config_changes(now, before) == []
    config["audit"]["attacks"] = ["prior"]
    assert config_changes(now, before) == [f"audit.attacks: {before['reproducibility']['config']['audit']['attacks']}"
                                           " → ['prior']"]


def test_allow_config_change_needs_a_baseline(cli, risen, one_line_error):
    result = cli("gate", risen, "--allow-config-change")
    assert result.code == 2 and "--allow-config-change" in one_line_error(result.err)


def test_max_regression_needs_a_baseline(cli, risen, one_line_error):
    result = cli("gate", risen, "--max-regression", "0.1")
    assert result.code == 2
    assert "--max-regression" in one_line_error(result.err)


def test_a_corrupt_baseline_is_bad_input_naming_it(cli, risen, tmp_path, one_line_error):
    corrupt = tmp_path / "old.json"
    corrupt.write_text("{not json", encoding="utf-8")
    result = cli("gate", risen, "--baseline", corrupt)
    assert result.code == 2
    assert "--baseline" in one_line_error(result.err) and str(corrupt) in result.err


def test_report_shows_the_change_since_the_baseline(cli, risen, baseline, tmp_path):
    html = tmp_path / "report.html"
    assert cli("report", risen, "--baseline", baseline, "-o", html).code == 0
    page = html.read_text(encoding="utf-8")
    assert "<h2>Change since the baseline</h2>" in page and 'id="baseline-table"' in page
    assert "0.55 → 0.75" in page
