"""Simulated one-run audits (exact Gaussian and Poisson-subsampled Gaussian releases, the real guesser, designed
guess count and analysis): false alarms on correct mechanisms, faults caught in one run, tightness."""

import numpy as np
import pytest
from scipy import stats

from fdp_audit.accounting.calibration import calibrate_noise_multiplier
from fdp_audit.auditing.one_run.evaluation import simulated_audit
from fdp_audit.claim import Claim

SEEDS = 200
# If a verdict's false-alarm rate is <= α = 0.05, more than 19 alarms in 200 seeds has probability 0.0027.
MAX_ALARMS = 19


def test_alarm_threshold_is_a_binomial_test_at_the_stated_error():
    assert stats.binom.sf(MAX_ALARMS, SEEDS, 0.05) < 0.003


@pytest.mark.slow
@pytest.mark.parametrize("game,relation,m,rate,steps", [("inclusion", "add_remove", 300, 0.05, 50),
                                                        ("value", "replace", 200, 0.05, 50)])
def test_false_alarms_on_correct_mechanisms(game, relation, m, rate, steps):
    """200 simulated trainings of a correct mechanism (z = 1) judged against its own claim: at most 19 alarms
    (error probability 0.0027 if the verdict's false-alarm rate is α = 0.05). Measured: 0 of 200 in both games;
    the full calibration at the Adult settings (ε = 2, 4, 8, 1,000 canaries, 200 seeds each) is in
    docs/one_run.md."""
    claim = Claim.stated("dp_sgd", 1.0, rate, steps, 1e-5).one_run_curve(relation)
    rng = np.random.default_rng(11)
    alarms = sum(simulated_audit(rng, m, game, 2, 1.0, rate, steps, claim, 0.05)["status"] == "VIOLATION"
                 for _ in range(SEEDS))
    assert alarms <= MAX_ALARMS


@pytest.mark.parametrize("fault", ["half noise", "four times the rate", "no clipping"])
def test_faults_are_caught_in_one_run(fault):
    """The release of z/2, of rate 4p, or of an unclipped canary gradient three times the clip norm, judged
    against the claim (z = 2, p = 0.05, T = 100): a violation in one simulated run of 2,000 canaries (5 of 5 seeds
    were caught when this was written; the seed is fixed)."""
    claim = Claim.stated("dp_sgd", 2.0, 0.05, 100, 1e-5).one_run_curve("add_remove")
    z, rate, gradient = {"half noise": (1.0, 0.05, 1.0), "four times the rate": (2.0, 0.2, 1.0),
                         "no clipping": (2.0, 0.05, 3.0)}[fault]
    result = simulated_audit(np.random.default_rng(3), 2000, "inclusion", 2, z, rate, 100, claim, 0.05,
                             gradient=gradient)
    assert result["status"] == "VIOLATION"


def test_tightness_of_the_gaussian_mechanism_with_ten_thousand_canaries():
    """One unsampled Gaussian release (ε = 4 at δ = 1e-5), 10,000 canaries: empirical ε in the claimed family is
    at least 0.6 of the claim (measured 0.82 at this seed, 0.61–0.82 over seeds 0–3) and never above it."""
    z = calibrate_noise_multiplier(4.0, 1e-5, 1.0, 1)
    claim = Claim.stated("dp_sgd", z, 1.0, 1, 1e-5).one_run_curve("add_remove")
    result = simulated_audit(np.random.default_rng(1), 10_000, "inclusion", 2, z, 1.0, 1, claim, 0.05,
                             updates=False, family_search=True)
    assert result["status"] == "PASS"
    assert 0.6 <= result["tightness"] <= 1.0


FLAG_RATE = 0.06
FLAGGED_RELEASES = 50
# A claim-satisfying mechanism raises the verdict's alarm with probability <= α; the flagged one does only when its
# flag is up (probability τ: with the flag down its release ignores the secrets and the guesses are coin flips),
# so P[alarm | flag up] <= α/τ = 0.833, and more than 48 alarms in 50 flagged releases has probability 0.0013.
MAX_FLAGGED_ALARMS = 48


def test_flagged_alarm_threshold_is_a_binomial_test_at_the_stated_error():
    assert stats.binom.sf(MAX_FLAGGED_ALARMS, FLAGGED_RELEASES, 0.05 / FLAG_RATE) < 0.0013


@pytest.mark.slow
def test_false_alarms_on_the_flagged_mechanism():
    """The mechanism that satisfies the claim but correlates its canaries (fdp_audit/auditing/one_run/ceiling.py:
    with probability τ every canary is an independent draw of the leakier pair g_τ) judged through the verdict's
    entry point against the claim it satisfies (DP-SGD z = 0.968, p = 0.017, T = 300: ε = 2 at δ = 1e-5; 1,000
    canaries, so 203 of the 256 guesses the claim fixes reject it), with the Neyman–Pearson guesser's scores (the
    privacy losses), with the count test alone (the test whose null it belongs to; the conformance test's null,
    independent canaries, excludes it). It is the hardest known null: the critical count must hold against it.
    With the flag up, at most 48 alarms in 50 releases (error probability 0.0013 if the verdict is valid; with the
    flag down an alarm needs 203 heads in 256 coin flips, probability 4e-22). Measured: 15 of 50 here, 24 of 60
    with another seed (P[alarm] ≈ τ · 0.3–0.4 ≈ 0.02 <= α = 0.05); τ = 0.06, the flag rate nearest α that the
    ceiling tries, is where the flagged mechanism comes closest to the level (0.4 against 0.83 with the flag up;
    0.08 against 0.5 at τ = 0.1). An analysis whose critical count were 185 instead of 203 (P[W >= 185 | flag up]
    = 0.99 in 400 draws) would fail this test with probability 0.87."""
    from fdp_audit.accounting.mechanism import accountant_for
    from fdp_audit.auditing.one_run.ceiling import canonical_losses, flagged_curve
    from fdp_audit.auditing.one_run.evaluation import judge_scores

    claim = Claim.stated("dp_sgd", 0.968, 0.017, 300, 1e-5).one_run_curve("add_remove")
    assert claim.epsilon == pytest.approx(2.0, abs=0.01)
    flagged = flagged_curve(accountant_for(claim.spec).curve(), FLAG_RATE)
    rng = np.random.default_rng(31)
    alarms = 0
    for _ in range(FLAGGED_RELEASES):
        secrets = rng.integers(0, 2, size=1000)
        scores = np.stack([np.zeros(1000), canonical_losses(flagged, secrets, rng)], axis=1)
        section = judge_scores({"updates": scores}, secrets, claim, 0.05, family_search=False,
                               independent_canaries=False)
        assert (section["guesses"], section["rejecting_correct"]) == (256, 203)
        alarms += section["status"] == "VIOLATION"
    assert alarms <= MAX_FLAGGED_ALARMS
