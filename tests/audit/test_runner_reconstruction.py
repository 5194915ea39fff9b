"""The runner plays the reconstruction game (SPEC 4 mode 1): its comparisons reach the gate and its section
has the shape the report renders."""

from __future__ import annotations

import pytest

from fdp_audit.audit.runner import run_audit
from fdp_audit.config import config_from_dict
from fdp_audit.errors import BadInputError
from fdp_audit.report.render import render_report


def test_reconstruction_game_is_judged_and_reported() -> None:
    config = config_from_dict({
        "seed": 5, "device": "cpu",
        "data": {"dataset": "synthetic", "protected": ["protected-0", "protected-1"], "synthetic_rows": 200,
                 "synthetic_prior_kind": "gaussian"},
        "mechanism": {"name": "dp_sgd", "sample_rate": 0.25, "steps": 40, "noise_multiplier": 1.0},
        "audit": {"trials": 40, "games": ["reconstruction"], "attacks": ["prior", "reconstruction"],
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
