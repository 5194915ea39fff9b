"""The proof that the gate works (docs/statistics.md, docs/games.md): every known-faulty mechanism is caught — by the
attack that exploits its fault — and the correct mechanisms pass; the gate's false-alarm rate on a correct mechanism
is at most α.

The configs in ``configs/`` are small versions of ``configs/faulty/*.yaml``, tuned so that each audit takes
seconds on two cores; their headers give the expected success, the bound and the margins measured over
seeds 0-4. They share three (z, p, T) settings so that the accountant's cache serves several audits."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import binom, binomtest, norm

from fdp_audit.auditing.gate import judge
from fdp_audit.config import config_from_dict, load_config

pytestmark = pytest.mark.slow

CONFIGS = Path(__file__).parent / "configs"
SHIPPED = Path(__file__).parents[2] / "configs" / "faulty"

# faulty mechanism → the comparison that must be violated (the attack built for its fault)
CAUGHT_BY = {
    "shared_batch": "distinguishing-attribute/iterates_public_aligned",
    "leaky_public": "distinguishing-attribute/iterates",
    "wrong_rate": "distinguishing-attribute/iterates",
    "half_noise": "distinguishing-attribute/iterates",
    "no_clip": "distinguishing-attribute/iterates",
}
CORRECT = ("fdp_sgd", "fdp_dpsgd", "dp_sgd")


def test_every_faulty_mechanism_has_a_gate_proof() -> None:
    shipped = {load_config(p).mechanism.name for p in SHIPPED.glob("*.yaml")}
    tested = {load_config(CONFIGS / f"{name}.yaml").mechanism.name for name in CAUGHT_BY}
    assert shipped == tested
    assert {load_config(CONFIGS / f"{name}.yaml").mechanism.faulty for name in CORRECT} == {False}


@pytest.mark.parametrize("name", list(CAUGHT_BY))
def test_faulty_mechanism_is_a_violation(verdict_only_audit, name: str) -> None:
    """Each config's header states how unlikely a miss is (at most 2e-9)."""
    results = verdict_only_audit(load_config(CONFIGS / f"{name}.yaml"))
    verdict = results["verdict"]
    assert verdict["status"] == "VIOLATION", verdict["explanation"]
    assert CAUGHT_BY[name] in verdict["violations"]
    assert results["mechanism"]["faulty"] is True


@pytest.mark.parametrize("name", CORRECT)
def test_correct_mechanism_passes(verdict_only_audit, name: str) -> None:
    """A false VIOLATION has probability ≤ α = 0.05 by the gate's guarantee (far less at these margins; see
    the config headers)."""
    results = verdict_only_audit(load_config(CONFIGS / f"{name}.yaml"))
    assert results["verdict"]["status"] == "PASS", results["verdict"]["explanation"]
    assert results["mechanism"]["faulty"] is False


def test_false_alarm_rate_of_a_correct_mechanism(verdict_only_audit, small_config) -> None:
    """fdp_sgd in 20 independent small audits (one seed each) at p = 1, where Theorem 4 is tight and the
    iterates attack is Bayes-optimal, so its success sits on the bound: the hardest case for the gate.

    * Violations: the gate promises a false-alarm probability ≤ α = 0.05 per audit; the one-sided binomial
      test rejects that promise at level 0.001 (it fails only if 7 or more of the 20 audits are violations).
    * Optimality: pooled over the 1,000 trials, the iterates attack's success must match the optimum
      Φ(√T/z) = 0.760 within the two-sided binomial interval at level 1e-3."""
    base = config_from_dict(small_config(
        "fdp_sgd", rows=100, mechanism={"noise_multiplier": 2.0, "sample_rate": 1.0, "steps": 2},
        audit={"trials": 50, "attacks": ["prior", "iterates"]}))
    violations, successes, trials = 0, 0, 0
    for seed in range(20):
        results = verdict_only_audit(replace(base, seed=seed))
        violations += results["verdict"]["status"] == "VIOLATION"
        (row,) = [c for c in results["comparisons"] if c["id"] == "distinguishing-attribute/iterates"]
        successes, trials = successes + row["successes"], trials + row["trials"]
    assert binomtest(violations, 20, 0.05, alternative="greater").pvalue >= 0.001, violations
    optimum = norm.cdf(math.sqrt(2) / 2)
    assert binom.ppf(5e-4, trials, optimum) <= successes <= binom.ppf(1 - 5e-4, trials, optimum)
    # the judged comparisons of one audit are exactly what `fdp-audit gate` re-judges
    verdict, _ = judge(results["comparisons"], results["verdict"]["alpha"])
    assert verdict == results["verdict"]
    assert np.isclose(results["verdict"]["alpha"], 0.05)
