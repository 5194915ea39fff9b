"""The game audit's results (docs/statistics.md, docs/files.md): the verdict is the gate's judgement of the saved
comparisons,
every comparison appears in the report sections, and the same config and seed give the same results (CPU)."""

from __future__ import annotations

import math

import pytest

from fdp_audit.auditing.gate import judge
from fdp_audit.auditing.runner import run_audit
from fdp_audit.config import config_from_dict


@pytest.fixture(scope="module")
def config(small_config):
    return config_from_dict(small_config(
        "fdp_sgd", rows=200, mechanism={"steps": 10},
        audit={"trials": 24, "games": ["attribute", "distinguishing"],
               "attacks": ["prior", "likelihood", "gradient", "iterates", "iterates_public_aligned"]}))


@pytest.fixture(scope="module")
def results(config):
    return run_audit(config, None, command="fdp-audit audit first")


def strip(results: dict) -> dict:
    out = {k: v for k, v in results.items() if k != "created"}
    out["reproducibility"] = {k: v for k, v in results["reproducibility"].items() if k != "command"}
    return out


def test_same_config_and_seed_give_identical_results(config, results) -> None:
    again = run_audit(config, None, command="fdp-audit audit second")
    assert again["reproducibility"]["command"] == "fdp-audit audit second"
    assert strip(again) == strip(results)


def test_verdict_is_the_gate_judgement_of_the_comparisons(results) -> None:
    verdict, judged = judge(results["comparisons"], results["verdict"]["alpha"])
    assert verdict == results["verdict"]
    assert len(judged) == 6 and verdict["n_comparisons"] == 6


def test_results_are_json_clean(results) -> None:
    """Non-finite numbers (the non-private baseline's ε) are null in the returned dictionary already, so the
    report renders exactly what results.json holds."""

    def walk(value):
        if isinstance(value, float):
            assert math.isfinite(value)
        elif isinstance(value, dict):
            for v in value.values():
                walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)

    walk(results)


def test_game_sections_agree_with_the_comparisons(results) -> None:
    by_id = {c["id"]: c for c in results["comparisons"]}
    for section in results["games"]:
        for attack in section["attacks"]:
            if "successes" not in attack:
                continue
            prefix = "attribute" if section.get("canary") == "record" else "distinguishing-attribute"
            comparison = by_id.get(f"{prefix}/{attack['attack']}")
            if attack["attack"] == "prior":
                assert comparison is None and attack["status"] == "info"
                continue
            assert comparison is not None
            assert (attack["successes"], attack["trials"]) == (comparison["successes"], comparison["trials"])
            assert attack["bound"] == pytest.approx(comparison["bound"])
    mechanism = results["mechanism"]
    assert (mechanism["name"], mechanism["steps"], mechanism["sample_rate"]) == ("fdp_sgd", 10, 0.1)


def test_epsilon_rows_state_their_claim_and_test(config, results) -> None:
    """Each ε comparison carries what the gate needs to re-derive it: the test's orientation and threshold
    (chosen on every fourth trial), its error counts on the other trials, and the claim of the game's relation."""
    rows = [c for c in results["comparisons"] if c["kind"] == "epsilon"]
    assert rows and all(r["relation"] == "replace" and r["orientation"] in (1, -1) for r in rows)
    for row in rows:
        assert row["claim"] == {"mechanism": "fdp_sgd", "noise_multiplier": results["mechanism"]["noise_multiplier"],
                                "sample_rate": 0.1, "steps": 10}
        judged = config.audit.trials - (config.audit.trials + 3) // 4  # all but every fourth trial
        assert len(row["thresholds"]) == 1 and row["negatives"] + row["positives"] == judged
    (section,) = [s for s in results["games"] if s["game"] == "distinguishing"]
    for attack in section["attacks"]:
        assert attack["epsilon_claimed"] == pytest.approx(results["accounting"]["epsilon_replace"]["1e-05"], rel=1e-6)
        assert {"epsilon_lower_bound_cp", "epsilon_ratio_cp", "epsilon_family", "orientation"} <= set(attack)
