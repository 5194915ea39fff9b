"""The report's words count trials as its tables do (docs/files.md, "The report"): the trials played per game once,
and beside them the judged ones, never a played count read as the judged one."""

from __future__ import annotations

from typing import Any

from fdp_audit.report.summary import build_summary


def test_the_summary_names_the_judged_trials_beside_the_played_ones(results: dict[str, Any]):
    results["reproducibility"]["trials"] = 64
    for row in results["comparisons"]:
        if row["kind"] == "rate":
            row["trials"], row["successes"] = 32, min(row["successes"], 32) // 2
    tested = build_summary(results).tested
    assert "trials each" not in tested
    assert "64 trials played per game: success rates 32 judged (the other 32 choose the attack)" in tested
