"""The runner plays the reconstruction game (docs/games.md): its comparisons reach the gate and its section
has the shape the report renders."""

from __future__ import annotations

from pathlib import Path

import pytest

from fdp_audit.auditing.runner import run_audit
from fdp_audit.config import config_from_dict
from fdp_audit.errors import BadInputError
from fdp_audit.report.render import render_report


def test_reconstruction_game_is_judged_and_reported() -> None:
    config = config_from_dict({
        "seed": 5, "device": "cpu",
        "data": {"dataset": "synthetic", "protected": ["protected-0", "protected-1"], "synthetic_rows": 200,
                 "synthetic_prior_kind": "gaussian"},
        "mechanism": {"name": "dp_sgd", "sample_rate": 0.25, "steps": 40, "noise_multiplier": 1.0},
        "audit": {"trials": 60, "games": ["reconstruction"], "attacks": ["prior", "reconstruction"],
                  "rho_grid": [0.5, 1.0]},
    })
    results = run_audit(config, out_dir=None)
    ids = {c["id"] for c in results["comparisons"]}
    assert ids == {"reconstruction/reconstruction/rho=0.5", "reconstruction/reconstruction/rho=1"}
    (section,) = results["games"]
    assert section["game"] == "reconstruction" and section["prior"] == {"kind": "gaussian", "scale": 1.0, "dim": 2}
    by_attack = {a["attack"]: a for a in section["attacks"]}
    assert {p["status"] for p in by_attack["prior"]["points"]} == {"info"}
    judged = by_attack["reconstruction"]["points"]
    assert {p["status"] for p in judged} <= {"pass", "violation"}
    for point in judged:
        assert 0 <= point["ci_low"] <= point["rate"] <= point["ci_high"] <= 1
        assert point["ball"] <= point["bound"] <= 1
    assert results["verdict"]["status"] == "PASS"  # a correct mechanism; seeded, so deterministic
    html = render_report(results)
    assert "Reconstruction" in html and "reconstruction-attacks" in html


def test_an_audit_with_nothing_to_judge_is_refused() -> None:
    """Only the prior (which realises Ball and is never judged): a PASS would be one that cannot fail."""
    config = config_from_dict({
        "seed": 5, "device": "cpu",
        "data": {"dataset": "synthetic", "protected": ["protected"], "synthetic_rows": 60},
        "mechanism": {"name": "dp_sgd", "sample_rate": 0.5, "steps": 2, "noise_multiplier": 1.0},
        "audit": {"trials": 4, "games": ["attribute"], "attacks": ["prior"]},
    })
    with pytest.raises(BadInputError) as err:
        run_audit(config, out_dir=None)
    assert err.value.field == "audit.attacks"


def test_reconstruction_game_catches_a_model_trained_without_noise(monkeypatch) -> None:
    """A third-party function that claims DP-SGD with z = 30 (p = 1, T = 200: μ = √200/30 ≈ 0.47) but trains
    without clipping or noise: the closed-form reconstruction lands within ρ = 0.5 in nearly every trial
    (known answer: 120/120 on the same setting, tests/auditing/test_reconstruction_game.py), far above
    1 − f(Ball(0.5)), so the gate must say VIOLATION."""
    from fdp_audit.auditing import runner

    monkeypatch.setattr(runner, "utility_section", lambda config, data, claim: {})
    examples = Path(__file__).parent / "third_party_mechanisms.py"
    config = config_from_dict({
        "seed": 3, "device": "cpu",
        "data": {"dataset": "synthetic", "protected": ["protected-0", "protected-1"], "synthetic_rows": 200,
                 "synthetic_prior_kind": "gaussian"},
        "mechanism": {"name": "dp_sgd", "third_party": f"{examples}:nonprivate_claimed_as_dp_sgd",
                      "sample_rate": 1.0, "steps": 200, "noise_multiplier": 30.0,
                      "optimizer": {"name": "sgd", "lr": 2.0}},
        "audit": {"trials": 30, "games": ["reconstruction"], "attacks": ["prior", "reconstruction"],
                  "rho_grid": [0.5]},
    })
    results = run_audit(config, out_dir=None)
    assert results["verdict"]["status"] == "VIOLATION", results["verdict"]["explanation"]
    (point,) = [a for a in results["games"][0]["attacks"] if a["attack"] == "reconstruction"][0]["points"]
    assert point["bound"] < 0.5 and point["rate"] > 0.9
