"""A training's promise (fdp_audit/auditing/promise.py): the trained schedule must spend no more ε than the plan,
judged without error from what the comparison states, outside the Bonferroni count of the statistical ones."""

from __future__ import annotations

import pytest

from fdp_audit.accounting.mechanism import MechanismSpec, accountant_for
from fdp_audit.auditing.gate import judge
from fdp_audit.auditing.promise import Promise, judge_promise, planned_steps
from fdp_audit.auditing.stats import lower_confidence_bound
from fdp_audit.errors import BadInputError

Z, P = 1.2, 0.1


def promise(trained: tuple[tuple[float, float, int], ...], source: str = "make_private_with_epsilon") -> Promise:
    target = {"target_epsilon": 4.0, "epochs": 1} if source == "make_private_with_epsilon" else {}
    return Promise("opacus", source, Z, P, planned_steps(P, 1), 1e-5, trained, **target)


def epsilon(z: float, p: float, steps: int) -> float:
    return float(accountant_for(MechanismSpec.gaussian("dp_sgd", z, p, steps)).epsilon(1e-5))


def test_the_plan_trained_as_planned_keeps_the_promise() -> None:
    """One epoch at p = 0.1 plans 10 steps; an accountant's history split into runs of equal settings is the
    same schedule."""
    for trained in (((Z, P, 10),), ((Z, P, 6), (Z, P, 4))):
        j = judge_promise(promise(trained).row(), 0.01, "row")
        assert not j["violated"] and j["steps_planned"] == j["steps_taken"] == 10
        assert j["promised_epsilon"] == pytest.approx(epsilon(Z, P, 10))
        assert j["spent_epsilon"] == pytest.approx(j["promised_epsilon"], rel=1e-6)


def test_twice_the_epochs_or_less_noise_break_the_promise() -> None:
    """Known answers: the spent ε is the PLD ε of what was trained (twice the steps; or the planned steps with the
    noise multiplier overwritten by 0.9 after the first step), the promised ε that of the plan, and the explanation
    names both, the target, and what changed."""
    twice = judge([promise(((Z, P, 20),)).row()], 0.05)
    (j,) = twice[1]
    assert j["violated"] and j["spent_epsilon"] == pytest.approx(epsilon(Z, P, 20))
    assert j["spent_epsilon"] > j["promised_epsilon"] == pytest.approx(epsilon(Z, P, 10))
    explanation = twice[0]["explanation"]
    assert twice[0]["status"] == "VIOLATION"
    assert explanation.startswith("Training's promise · opacus: the training spent more")
    for shown in (f"spending ε = {j['spent_epsilon']:.4g}", f"spends ε = {j['promised_epsilon']:.4g}",
                  "its target ε = 4", "it took 20 steps where 10 were planned"):
        assert shown in explanation
    quiet_verdict, (quiet,) = judge([promise(((Z, P, 1), (0.9, P, 9)), "make_private").row()], 0.05)
    assert quiet["violated"] and quiet["steps_taken"] == 10
    assert "noise multiplier 0.9 where 1.2 was promised" in quiet_verdict["explanation"]


def test_the_promise_is_outside_the_bonferroni_count_and_explains_first() -> None:
    """A rate comparison at the crossing of α = 0.05 is violated alone and beside a kept promise (m = 1 both times);
    with a broken promise the promise explains the verdict."""
    k = next(k for k in range(200) if lower_confidence_bound(k, 200, 0.05) > 0.6)
    rate = {"id": "attribute/likelihood", "kind": "rate", "trials": 200, "successes": k, "ball": 0.5, "bound": 0.6}
    alone, _ = judge([rate], 0.05)
    kept, _ = judge([rate, promise(((Z, P, 10),)).row()], 0.05)
    assert alone["status"] == kept["status"] == "VIOLATION" and kept["violations"] == ["attribute/likelihood"]
    broken, _ = judge([rate, promise(((Z, P, 20),)).row()], 0.05)
    assert broken["explanation"].startswith("Training's promise · opacus")
    passing, _ = judge([{**rate, "successes": 100}, promise(((Z, P, 10),)).row()], 0.05)
    assert passing["status"] == "PASS" and "Training's promise · opacus: kept" in passing["explanation"]
    assert passing["worst_comparison"] == "attribute/likelihood"


@pytest.mark.parametrize(("edit", "field"), [
    ({"source": "opacus"}, "row.source"),
    ({"planned": {"noise_multiplier": Z, "sample_rate": P, "steps": 5}}, "row.planned.steps"),
    ({"trained": []}, "row.trained"),
    ({"trained": [{"noise_multiplier": -1.0, "sample_rate": P, "steps": 10}]}, "row.trained[0].noise_multiplier"),
    ({"delta": 0}, "row.delta"),
    ({"own_promise": {"source": "make_private", "plan": {"noise_multiplier": 0}}}, "row.own_promise.plan"),
    ({"own_promise": {"source": "make_private_with_epsilon", "plan": {"noise_multiplier": Z, "sample_rate": P,
                                                                     "steps": 10}}}, "row.own_promise.target_epsilon"),
])
def test_a_malformed_promise_is_bad_input(edit: dict, field: str) -> None:
    """The planned steps of a target are those of its epochs (int(epochs / p)), not any stated number."""
    with pytest.raises(BadInputError, match=field.replace("[", r"\[").replace("]", r"\]")):
        judge_promise({**promise(((Z, P, 10),)).row(), **edit}, 0.05, "row")


def test_a_trial_promised_more_than_the_claim_is_judged_against_the_claim() -> None:
    """A trial whose engine was promised ε = 8 (z = 0.6) and trained as planned, against the claim's plan (z = 1.2):
    it spent more than the claim — the PLD ε of its history above the plan's — and the explanation names its own
    promise and its ε beside the claim's."""
    from dataclasses import replace

    own = {"source": "make_private_with_epsilon", "plan": {"noise_multiplier": 0.6, "sample_rate": P, "steps": 10},
           "target_epsilon": 8.0, "epochs": 1}
    row = replace(promise(((0.6, P, 10),)), seed=7, own_promise=own).row()
    verdict, (j,) = judge([row], 0.05)
    assert j["violated"] and j["spent_epsilon"] == pytest.approx(epsilon(0.6, P, 10))
    assert j["own_promise"]["epsilon"] == pytest.approx(j["spent_epsilon"])
    assert j["spent_epsilon"] > j["promised_epsilon"] == pytest.approx(epsilon(Z, P, 10))
    assert verdict["explanation"].startswith(
        "Training's promise · opacus: the training of the trial of seed 7 spent more than the claim, the promise of "
        "the probe's training, though it kept its own: its engine was promised more (make_private_with_epsilon's "
        f"target ε = 8 over 1 epoch: noise multiplier 0.6 over 10 steps, ε = {j['spent_epsilon']:.4g}")
    assert "where the claim's plan, the 10 steps" in verdict["explanation"]
    assert "it trained with noise multiplier 0.6 where 1.2 was promised" in verdict["explanation"]
