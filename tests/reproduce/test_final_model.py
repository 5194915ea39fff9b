"""`fdp-audit reproduce final_model` in quick mode: the membership game against honest DP-SGD at ε = 8 (full
batch, T = 4), 200 trials on a fixed seed. A sound audit passes (a false VIOLATION has probability at most
α = 0.05 over seeds); a tight one bounds ε away from 0 from the final model alone, where the record-canary
attribute game measured nothing: on seed 0, 82 of 100 evaluation trials and ε_lb = 5.43 (0.68 of the claim)."""

from __future__ import annotations

import json

import pytest

from fdp_audit.reproduce import run_reproduction

pytestmark = pytest.mark.slow


def test_the_final_model_audit_passes_dp_sgd_and_bounds_its_epsilon(tmp_path):
    run_reproduction("final_model", tmp_path, quick=True)
    (row,) = json.loads((tmp_path / "final_model.json").read_text(encoding="utf-8"))["rows"]
    assert row["status"] == "pass"
    assert 0 < row["epsilon_lower_bound"] <= row["epsilon"]
    assert "| 1 | 4 |" in (tmp_path / "final_model.md").read_text(encoding="utf-8")
