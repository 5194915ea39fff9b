"""Regression against a baseline audit: the rise of a success rate is tested with exact bounds at overall level
α, checked against scipy's beta quantiles, on null data (no false alarms beyond α) and on a real rise."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from scipy.stats import beta

from fdp_audit.auditing.regression import compare
from fdp_audit.errors import BadInputError


def _results(successes: dict[str, int], trials: int = 400, eps_fp: int | None = 40,
             noise: float = 1.0) -> dict[str, Any]:
    comparisons: list[dict[str, Any]] = [
        {"id": key, "kind": "rate", "game": "attribute", "attack": key.split("/")[-1], "trials": trials,
         "successes": k, "ball": 0.5, "bound": 0.8}
        for key, k in successes.items()
    ]
    # an ε comparison: 200 negatives and positives, one threshold
    if eps_fp is not None:
        comparisons.append({"id": "distinguishing-epsilon/iterates", "kind": "epsilon", "game": "distinguishing",
                            "attack": "iterates", "relation": "replace", "thresholds": [0.0], "orientation": 1,
                            "false_positives": [eps_fp], "false_negatives": [eps_fp], "negatives": 200,
                            "positives": 200, "delta": 1e-5,
                            "claim": {"mechanism": "dp_sgd", "noise_multiplier": 1.0, "sample_rate": 1.0, "steps": 1}})
    return {"verdict": {"alpha": 0.05}, "mechanism": {"name": "fdp_sgd", "noise_multiplier": noise},
            "comparisons": comparisons}


def test_rise_bound_is_the_exact_clopper_pearson_difference():
    now, before = _results({"attribute/a": 300}), _results({"attribute/a": 250})
    (change,) = [c for c in compare(now, before, 0.05).changes if c.kind == "rate"]
    level = 0.05 / 2  # one matched rate comparison: α/(2m)
    # Clopper–Pearson from the beta quantiles: lower = B(level; k, n−k+1), upper = B(1−level; k+1, n−k)
    expected = beta.ppf(level, 300, 400 - 300 + 1) - beta.ppf(1 - level, 250 + 1, 400 - 250)
    assert change.rise_lower_bound == pytest.approx(expected, abs=1e-9)
    assert (change.rate_before, change.rate_now) == (0.625, 0.75)
    assert change.margin_change == pytest.approx(change.margin_now - change.margin_before)


def test_no_false_regressions_on_null_data():
    """Baseline and current drawn from the same rates: with five comparisons at overall α = 0.05 the chance of
    any flag is at most 0.05 (union bound; the exact test makes it much smaller). Over 200 audits the flag count
    is Binomial(200, ≤ 0.05), mean ≤ 10: P(more than 25) < 1e-4, so this does not flake."""
    rng = np.random.default_rng(7)
    rates = [0.55, 0.6, 0.65, 0.7, 0.75]
    flagged = 0
    for _ in range(200):
        draw = {f"attribute/a{i}": int(rng.binomial(400, p)) for i, p in enumerate(rates)}
        again = {f"attribute/a{i}": int(rng.binomial(400, p)) for i, p in enumerate(rates)}
        flagged += bool(compare(_results(draw, eps_fp=None), _results(again, eps_fp=None), 0.05, 0.0).regressed)
    assert flagged <= 25


def test_a_real_rise_is_caught_and_a_tolerance_absorbs_a_small_one():
    before, now = _results({"attribute/a": 220}), _results({"attribute/a": 300})  # 0.55 → 0.75
    assert [c.id for c in compare(now, before, 0.05, tolerance=0.0).regressed] == ["attribute/a"]
    assert compare(now, before, 0.05, tolerance=0.15).regressed == []  # the rise is at least ≈ 0.11, not 0.15
    # report only: the rise is computed but nothing is flagged
    report_only = compare(now, before, 0.05)
    assert report_only.regressed == [] and report_only.changes[0].rise_lower_bound > 0


def test_epsilon_moves_are_shown_never_judged_and_unmatched_ids_listed():
    before = _results({"attribute/a": 250, "attribute/gone": 200}, eps_fp=60)
    now = _results({"attribute/a": 250, "attribute/new": 200}, eps_fp=10, noise=0.8)
    regression = compare(now, before, 0.05, tolerance=0.0)
    (eps,) = [c for c in regression.changes if c.kind == "epsilon"]
    assert eps.epsilon_now > eps.epsilon_before and not eps.regressed and eps.rise_lower_bound is None
    assert regression.new == ["attribute/new"] and regression.gone == ["attribute/gone"]
    assert regression.mechanism_changes == ["noise_multiplier: 1 → 0.8"]


@pytest.mark.parametrize(("current", "tolerance", "field"), [
    ({"verdict": {"alpha": 0.05}, "comparisons": []}, None, "results.comparisons"),
    (_results({"attribute/a": 1}), 1.5, "--max-regression"),
])
def test_bad_input(current, tolerance, field):
    with pytest.raises(BadInputError) as err:
        compare(current, _results({"attribute/a": 1}), 0.05, tolerance)
    assert err.value.field == field
