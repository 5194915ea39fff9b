"""Sanity warnings (fdp_audit/auditing/sanity.py): a model that learned nothing, an empty section, a game in which no
attack beat the prior; a PASS with any of them says it is weak in results.json, the gate's line, JUnit and
Markdown."""

from __future__ import annotations

import copy
import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from fdp_audit.auditing.sanity import EMPTY_SECTION, LEARNED_NOTHING, NEVER_BEAT_PRIOR, sanity_warnings, weak_pass

UTILITY = {"metric": "test accuracy", "chance": 0.3,
           "rows": [{"mechanism": "fdp_sgd", "accuracy": 0.8}, {"mechanism": "dp_sgd", "accuracy": 0.75},
                    {"mechanism": "public_only", "accuracy": 0.7}, {"mechanism": "nonprivate", "accuracy": 0.9}]}


def rate(view: str, attack: str, successes: int, ball: float = 0.25, trials: int = 100, **extra: Any) -> dict:
    return {"id": f"{view}/{attack}", "kind": "rate", "game": view.removesuffix("-attribute"), "attack": attack,
            "threat_model": "prior" if attack == "prior" else "iterates", "trials": trials, "successes": successes,
            "ball": ball, "bound": 0.41, **extra}


def results(**sections: Any) -> dict[str, Any]:
    found = {"utility": copy.deepcopy(UTILITY), "tightness": {"rows": [{"epsilon": 2.0}]},
             "comparisons": [rate("image_gradient_canary", "iterates", 31)]}
    return found | sections


def kinds(found: dict[str, Any]) -> list[str]:
    return [warning.kind for warning in sanity_warnings(found)]


def test_a_model_that_learned_something_and_full_sections_warn_nothing() -> None:
    assert sanity_warnings(results()) == []


@pytest.mark.parametrize(("accuracy", "floor"), [(0.7, "public-only"), (0.158, "public-only"), (0.3, "chance")])
def test_a_model_at_or_below_public_only_or_chance_learned_nothing(accuracy: float, floor: str) -> None:
    """The shipped image audit trained a CNN to 0.158 on ten digits, below the public-only model's 0.317, and
    passed without a word."""
    found = results()
    found["utility"]["rows"][0]["accuracy"] = accuracy
    if floor == "chance":
        found["utility"]["rows"][2]["accuracy"] = 0.2
    (warning,) = sanity_warnings(found)
    assert warning.kind == LEARNED_NOTHING and warning.where == "utility/rows/0/accuracy"
    assert f"fdp_sgd's test accuracy {accuracy:.3f} is at or below" in warning.message and floor in warning.message


def test_a_dp_claim_is_held_to_chance_not_to_the_public_only_model() -> None:
    """DP-SGD treats every feature as private: a public-only model that reads Ψ(x) is no floor for it."""
    found = results()
    found["utility"]["rows"][0] |= {"mechanism": "dp_sgd", "accuracy": 0.5, "public_features": False}
    assert sanity_warnings(found) == []
    found["utility"]["rows"][0]["accuracy"] = 0.25
    (warning,) = sanity_warnings(found)
    assert "chance (0.300" in warning.message and "public-only" not in warning.message


def test_a_non_private_model_no_better_than_public_only_is_named() -> None:
    found = results()
    found["utility"]["rows"][3]["accuracy"] = 0.7 + 1e-12  # equal but for float rounding
    (warning,) = sanity_warnings(found)
    assert warning.kind == LEARNED_NOTHING and warning.where == "utility/rows/3/accuracy"
    assert "even the non-private model" in warning.message


def test_empty_sections_are_named() -> None:
    """configs/images_games.yaml's tightness table had a header and no rows."""
    found = results(tightness={"rows": []}, games=[{"game": "attribute", "attacks": []}])
    assert [(w.kind, w.where) for w in sanity_warnings(found)] == [
        (EMPTY_SECTION, "tightness/rows"), (EMPTY_SECTION, "games/0/attacks")]


def test_a_game_in_which_no_attack_beat_the_prior_is_named_once() -> None:
    """Each game view on its own: one attack above Ball carries its view; the prior attack never counts; a
    reconstruction's radii are one view."""
    comparisons = [
        rate("image_gradient_canary", "iterates", 31), rate("image_gradient_canary", "iterates_public_aligned", 20),
        rate("image_record_canary", "prior", 40), rate("image_record_canary", "likelihood", 25),
        rate("image_record_canary", "informed_gradient", 22),
        rate("reconstruction", "reconstruction", 5, ball=0.118, rho=0.5),
        rate("reconstruction", "reconstruction", 14, ball=0.39, rho=1.0),
    ]
    comparisons[-1]["id"] += "/rho=1"
    comparisons[-2]["id"] += "/rho=0.5"
    found = sanity_warnings(results(comparisons=comparisons))
    assert [(w.kind, w.where) for w in found] == [(NEVER_BEAT_PRIOR, "comparisons/3"),
                                                 (NEVER_BEAT_PRIOR, "comparisons/5")]
    assert found[0].message.startswith("Image game · record canaries: no attack beat the prior (informed_gradient, "
                                       "likelihood; "
                                       "the closest, likelihood, succeeded 0.250 ≤ Ball 0.250 over 100 judged trials)")
    assert "the closest, reconstruction at ρ = 0.5, succeeded 0.050 ≤ Ball 0.118" in found[1].message
    comparisons[4]["successes"] = 26  # one attack above the prior: the game's evidence is not empty
    assert kinds(results(comparisons=comparisons)) == [NEVER_BEAT_PRIOR]


def test_only_a_pass_is_weak() -> None:
    warnings = sanity_warnings(results(tightness={"rows": []}))
    assert weak_pass("PASS", warnings) == "PASS (weak: 1 sanity warning)"
    assert weak_pass("PASS", []) == "PASS"
    assert weak_pass("VIOLATION", warnings) == "VIOLATION"


def test_a_weak_pass_says_so_in_results_gate_junit_and_markdown(cli, tmp_path: Path) -> None:
    """The gate test's results (DP-SGD claimed at z = 4, p = 1, T = 1) with an empty tightness section and a model
    below the public-only one: results.json stores both warnings, and each output of the gate says the PASS is
    weak and why."""
    from fdp_audit.auditing.results import write_results
    from tests.cli.test_gate import results as gate_results

    found = gate_results(110)
    found["comparisons"][0]["successes"] = 110  # both attacks above the prior
    found |= {"tightness": {"rows": []}, "utility": copy.deepcopy(UTILITY)}
    found["utility"]["rows"][0]["accuracy"] = 0.5
    path = write_results(tmp_path / "results.json", found)
    stored = json.loads(path.read_text(encoding="utf-8"))["warnings"]
    assert [w["kind"] for w in stored] == [LEARNED_NOTHING, EMPTY_SECTION]

    junit, markdown = tmp_path / "gate.xml", tmp_path / "gate.md"
    gated = cli("gate", path, "--junit", junit, "--markdown", markdown)
    assert gated.code == 0
    lines = gated.out.splitlines()
    assert lines[0].startswith("PASS (weak: 2 sanity warnings) at α=0.05, 2 of 2 comparisons judged: ")
    assert lines[1:] == [f"warning: {w['message']}" for w in stored]
    properties = ET.parse(junit).getroot().find("properties")
    assert [p.get("value") for p in properties] == [w["message"] for w in stored]
    summary = markdown.read_text(encoding="utf-8")
    assert summary.startswith("## fdp-audit gate: PASS (weak: 2 sanity warnings) ⚠️")
    assert all(f"- {w['message']}" in summary for w in stored)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["images_games", "images_audit", "images_reconstruction"])
def test_the_shipped_image_configs_train_models_that_learn(name: str) -> None:
    """The utility section of each shipped image config, as its audit computes it (seeded, 3 models per
    mechanism): no learned-nothing warning, and Algorithm 1 above the public-only model where the audited
    mechanism is Algorithm 1 (measured: images_games 0.789 against 0.666, images_audit 0.775 against 0.683;
    images_reconstruction's DP-SGD 0.537 against chance, its non-private model 0.741 above public-only's 0.678)."""
    from fdp_audit.auditing.runner import utility_section
    from fdp_audit.claim import Claim
    from fdp_audit.config import load_config
    from fdp_audit.data.prepare import prepare_data
    from fdp_audit.reproduce import CONFIGS

    config = load_config(CONFIGS / f"{name}.yaml").with_overrides({"device": "cpu"}, {"device": "device"})
    utility = utility_section(config, prepare_data(config.data, config.seed), Claim.from_config(config))
    assert sanity_warnings({"utility": utility}) == []
    accuracy = {row["mechanism"]: row["accuracy"] for row in utility["rows"]}
    if config.mechanism.name == "fdp_sgd":
        assert accuracy["fdp_sgd"] > accuracy["public_only"]
    assert accuracy[config.mechanism.name] > utility["chance"]
