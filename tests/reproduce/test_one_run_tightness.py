"""`fdp-audit reproduce one_run_tightness --quick`: the rows of its table, null calibration and a fault, in one
small setting (the full run's numbers are in docs/one_run.md, "Measured")."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.slow


def test_quick_run_writes_the_rows_calibration_and_faults(tmp_path):
    from fdp_audit.cli import main

    assert main(["reproduce", "one_run_tightness", "--out", str(tmp_path), "--quick"]) == 0
    payload = json.loads((tmp_path / "one_run_tightness.json").read_text(encoding="utf-8"))
    assert payload["quick"] is True and payload["alpha"] == 0.05
    loops = {row["loop"]: row for row in payload["rows"]}
    built_in, opacus = loops["built-in"], loops["opacus"]
    assert {"epsilon", "canaries", "ratio_simulated", "ratio_trained"} <= set(opacus)
    assert all(row["ratio_trained"] is not None for row in payload["rows"])  # every row it claims is trained
    # each training is kept as its loop saves it, to be judged again: the Opacus loop's as a user's script does
    assert len(list((tmp_path / "one_run_tightness").glob("opacus-*/model.canaries.json"))) == 1
    for key in ("ratio_simulated", "ratio_trained", "steinke_simulated", "steinke_trained",
                "ratio_simulated_count", "ratio_trained_count"):
        assert 0.0 <= built_in[key] <= 1.0, key
    assert len(built_in["simulated"]) == len(built_in["simulated_count"]) == 1
    assert 0.0 < built_in["ceiling"] <= 1.0 and built_in["ceilings"] == [built_in["ceiling"]]
    assert 0.0 <= built_in["ratio_sampling_informed"] <= 1.0
    assert 0.0 <= opacus["ratio_trained"] <= 1.0 and 0.0 <= opacus["steinke_trained"] <= 1.0
    assert 0.0 <= opacus["ratio_trained_count"] <= 1.0
    # 12 correct releases (10 simulated, one training of each loop), judged by the verdict and by each of its tests.
    # The verdict and its conformance test run at their level on correct mechanisms: up to 4 alarms of 12 (5 or more
    # has probability 2.2e-4 at rate α). The count test is far more conservative (0 of 600 in the offline
    # calibration), so none of its 12 runs may alarm (probability >= 0.975^12 = 0.74 even at its level α/2: a
    # smoke check, not the calibration).
    calibration = payload["calibration"]
    verdict = [row for row in calibration if not row["kind"].endswith(" test")]
    conformance = [row for row in calibration if row["kind"].endswith("conformance test")]
    counted = [row for row in calibration if row["kind"].endswith("count test")]
    assert len(verdict) == len(conformance) == len(counted) == 3
    assert sum(row["trials"] for row in verdict) == 12
    assert sum(row["alarms"] for row in verdict) <= 4 and sum(row["alarms"] for row in conformance) <= 4
    assert all(row["alarms"] == 0 for row in counted)
    assert [fault["status"] for fault in payload["faults"]] == ["VIOLATION"]
    assert "| 0.05 | 40 | 200 |" in (tmp_path / "one_run_tightness.md").read_text(encoding="utf-8")
