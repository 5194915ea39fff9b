"""The ``iterates`` threat model (docs/games.md) on synthesised releases ``y_t = s·B_t + z·N(0, 1)`` (B_t ~ Bern(p)),
the distribution a correct mechanism gives the canary coordinate, with further pure-noise coordinates. The
attack is told neither z nor p: it estimates the noise scale from the release and averages its likelihood over
the sampling rate, and must still reach the optimum Φ(√T/z) at p = 1 and come within 0.9 of the PLD optimum
under sampling."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.stats import binom, norm

from attacks import Knowledge, View
from attacks.iterates import IteratesAttack, PublicAlignedIteratesAttack, mixture_log_likelihood
from fdp_audit.accounting import accountant_for
from fdp_audit.accounting.mechanism import MechanismSpec
from fdp_audit.training.models import Model

PRIVATE, PUBLIC = 1, 2  # canary coordinates in a 20-parameter model
NOISE = (2, *range(4, 20))  # coordinates no record touches


def knowledge(clip: float = 1.0, prior=(0.5, 0.5), signs=(-1.0, 1.0)) -> Knowledge:
    return Knowledge(Model("logistic", 19, 2), torch.zeros(2, 19), 0, torch.tensor(prior), clip_norm=clip,
                     canary_private_coordinate=PRIVATE, canary_public_coordinate=PUBLIC,
                     candidate_signs=torch.tensor(signs), noise_coordinates=NOISE)


def release(seed: int, trials: int, steps: int, z: float, p: float, clip: float = 1.0):
    """Secret bits, and the noisy private sums ``[R, T, 20]`` with the canary on coordinate PRIVATE."""
    rng = np.random.default_rng(seed)
    bits = rng.random(trials) < 0.5
    sampled = rng.random((trials, steps)) < p
    sums = clip * z * rng.standard_normal((trials, steps, 20))
    sums[:, :, PRIVATE] += clip * np.where(bits, 1.0, -1.0)[:, None] * sampled
    return bits, torch.as_tensor(sums, dtype=torch.float32), torch.as_tensor(sampled)


def within_binomial(successes: int, trials: int, p: float, level: float = 1e-3) -> bool:
    return binom.ppf(level / 2, trials, p) <= successes <= binom.ppf(1 - level / 2, trials, p)


@pytest.mark.parametrize(("p", "z"), [(0.3, 1.0), (1.0, 2.0), (1e-3, 0.5)])
def test_mixture_log_likelihood_closed_form(p: float, z: float) -> None:
    y = torch.linspace(-4, 4, 17, dtype=torch.float64)[None, :]
    signs = torch.tensor([-1.0, 0.0, 1.0], dtype=torch.float64)
    got = mixture_log_likelihood(y, signs, p, z)
    assert got.shape == (1, 17, 3)
    for j, s in enumerate(signs.tolist()):
        density = (1 - p) * norm.pdf(y.numpy(), 0, z) + p * norm.pdf(y.numpy(), s, z)
        expected = np.log(density) - math.log(norm.pdf(0, 0, z))  # the constant the function leaves out
        np.testing.assert_allclose(got[..., j].numpy(), expected, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize(("steps", "z", "clip"), [(9, 3.0, 0.5), (4, 1.0, 2.0)])
def test_reaches_bayes_optimum_of_the_pure_gaussian_mechanism(steps: int, z: float, clip: float) -> None:
    """p = 1: Σ_t y_t is sufficient and the optimal success is Φ(√T/z) (0.841 and 0.977 here). 4,000 trials;
    the two-sided binomial interval at level 1e-3 fails with probability ≤ 1e-3 for an optimal attack."""
    bits, sums, _ = release(seed=steps, trials=4000, steps=steps, z=z, p=1.0, clip=clip)
    out = IteratesAttack().fit(knowledge(clip)).infer(View(noisy_private_sums=sums))
    successes = int((out.guess.numpy() == bits).sum())
    assert within_binomial(successes, 4000, norm.cdf(math.sqrt(steps) / z))


def test_near_optimal_under_poisson_sampling() -> None:
    """p = 0.25, z = 1, T = 10 (replacement game): the PLD optimum is ½ + δ(0)/2 ≈ 0.767. The attack must
    realise at least 0.9 of the optimal advantage (docs/games.md) and cannot beat the optimum: with 20,000 trials the
    standard error is 0.003, so both checks (≥ 0.740, ≤ optimum + 0.012) have failure probability < 1e-4."""
    z, p, steps, trials = 1.0, 0.25, 10, 20_000
    replace_one = accountant_for(MechanismSpec.gaussian("dp_sgd", z, p, steps, relation="replace"))
    optimum = 0.5 + 0.5 * float(replace_one.delta(0.0))
    bits, sums, _ = release(seed=1, trials=trials, steps=steps, z=z, p=p)
    guess = IteratesAttack().fit(knowledge()).infer(View(noisy_private_sums=sums)).guess.numpy()
    rate = float((guess == bits).mean())
    assert 0.5 + 0.9 * (optimum - 0.5) <= rate <= optimum + 4 * math.sqrt(optimum * (1 - optimum) / trials)


def test_reads_a_leaking_public_channel() -> None:
    """A correct public gradient has no component on the private coordinate; a leaking one decides."""
    bits, sums, _ = release(seed=2, trials=200, steps=5, z=50.0, p=1.0)  # the private channel is useless
    public = torch.zeros_like(sums)
    attack = IteratesAttack().fit(knowledge())
    clean = attack.infer(View(noisy_private_sums=sums, public_gradients=public)).scores
    torch.testing.assert_close(clean, attack.infer(View(noisy_private_sums=sums)).scores)
    public[:, 3, PRIVATE] = torch.as_tensor(np.where(bits, 0.01, -0.01), dtype=torch.float32)
    leaked = attack.infer(View(noisy_private_sums=sums, public_gradients=public))
    assert np.array_equal(leaked.guess.numpy(), bits)


def test_public_aligned_attack_uses_only_steps_with_the_canary_in_the_public_batch() -> None:
    """Shared batch (Proposition 3): the steps where the canary was in the public batch are the steps where
    it was privately sampled, and there the release is an unsubsampled Gaussian observation."""
    z, p, steps, trials = 1.0, 0.05, 60, 4000
    bits, sums, sampled = release(seed=3, trials=trials, steps=steps, z=z, p=p)
    attack = PublicAlignedIteratesAttack().fit(knowledge())
    out = attack.infer(View(noisy_private_sums=sums, canary_public_counts=sampled.long()))
    # success: ½ when never sampled, Φ(√k/z) after k sampled steps
    k = np.arange(steps + 1)
    expected = float((binom.pmf(k, steps, p) * np.where(k == 0, 0.5, norm.cdf(np.sqrt(k) / z))).sum())
    assert within_binomial(int((out.guess.numpy() == bits).sum()), trials, expected)
    never = attack.infer(View(noisy_private_sums=sums, canary_public_counts=torch.zeros(trials, steps).long()))
    torch.testing.assert_close(never.scores[:, 0], never.scores[:, 1])  # no aligned step: no evidence


def test_prior_enters_the_scores() -> None:
    _, sums, _ = release(seed=4, trials=10, steps=3, z=1.0, p=0.5)
    flat = IteratesAttack().fit(knowledge()).infer(View(noisy_private_sums=sums)).scores
    skewed = IteratesAttack().fit(knowledge(prior=(0.9, 0.1))).infer(View(noisy_private_sums=sums)).scores
    shift = torch.tensor([math.log(0.9 / 0.5), math.log(0.1 / 0.5)], dtype=torch.float64)
    torch.testing.assert_close(skewed - flat, shift.expand(10, 2))


BLOCK_K, BLOCK_NOISE = 4, 32  # a canary block: K private coordinates, K public ones, then noise-only ones


def block_knowledge(clip: float = 1.0) -> Knowledge:
    """A canary block after a 19-parameter model (coordinates 19 … 19 + 2K + 31)."""
    p, k = 19, BLOCK_K
    return Knowledge(Model("logistic", 18, 2), torch.zeros(k, 18), 0, torch.full((k,), 1 / k), clip_norm=clip,
                     candidate_coordinates=tuple(range(p, p + k)),
                     candidate_public_coordinates=tuple(range(p + k, p + 2 * k)),
                     noise_coordinates=tuple(range(p + 2 * k, p + 2 * k + BLOCK_NOISE)))


def block_release(seed: int, trials: int, steps: int, z: float, p: float, clip: float = 1.0):
    """Secrets ``[R]`` uniform on K, and noisy sums ``[R, T, 19 + 2K + 32]``: the secret's private coordinate
    carries C at each step it is sampled (probability p), every coordinate noise z·C."""
    rng = np.random.default_rng(seed)
    secrets = rng.integers(0, BLOCK_K, trials)
    sampled = rng.random((trials, steps)) < p
    sums = clip * z * rng.standard_normal((trials, steps, 19 + 2 * BLOCK_K + BLOCK_NOISE))
    sums[np.arange(trials), :, 19 + secrets] += clip * sampled
    return secrets, torch.as_tensor(sums, dtype=torch.float32), sampled


def test_block_canaries_are_scored_on_each_candidates_coordinate() -> None:
    """p = 1, z = 0.3: the secret's coordinate carries C at every step, far above the noise the attack estimates
    from the noise-only coordinates: every guess is right (a wrong one needs a 10-σ excursion over 10 steps). A
    public gradient on another candidate's private coordinate (a public loss that reads the protected part)
    names that candidate instead."""
    secrets, sums, _ = block_release(seed=5, trials=50, steps=10, z=0.3, p=1.0, clip=2.0)
    attack = IteratesAttack().fit(block_knowledge(clip=2.0))
    assert np.array_equal(attack.infer(View(noisy_private_sums=sums)).guess.numpy(), secrets)
    public = torch.zeros_like(sums)
    other = (secrets + 1) % BLOCK_K
    public[np.arange(50), 0, 19 + other] = 1e-3
    leaked = attack.infer(View(noisy_private_sums=sums, public_gradients=public))
    assert np.array_equal(leaked.guess.numpy(), other)


@pytest.mark.slow
def test_block_iterates_attack_realises_the_bayes_optimal_advantage() -> None:
    """K = 4, p = 1/4, z = 2.57, T = 20 (the image games' setting at ε = 2): the Bayes-optimal guess (known p and
    z) succeeds with 0.378 (Monte Carlo, ±0.001); the attack, told neither, must realise ≥ 0.9 of the optimal
    advantage over Ball = 1/4 and not beat the optimum. 20,000 trials: standard error 0.0034, so either check
    fails with probability < 1e-4 for an attack at 0.97 of the optimal advantage."""
    from fdp_audit.auditing.image_games import bayes_optimal_success

    z, p, steps, trials = 2.57, 0.25, 20, 20_000
    optimum, _ = bayes_optimal_success(p, z, steps, BLOCK_K)
    secrets, sums, _ = block_release(seed=6, trials=trials, steps=steps, z=z, p=p)
    rate = float((IteratesAttack().fit(block_knowledge()).infer(View(noisy_private_sums=sums)).guess.numpy()
                  == secrets).mean())
    error = math.sqrt(optimum * (1 - optimum) / trials)
    assert 0.25 + 0.9 * (optimum - 0.25) <= rate <= optimum + 4 * error


def test_block_public_aligned_attack_reads_each_candidates_public_presence() -> None:
    """Shared batch (Proposition 3) in a block: a candidate's public coordinate moves at the steps its record is
    in the public batch, which are the steps the secret's was privately sampled. z = 1, p = 0.1, T = 40: the
    secret is found whenever it was sampled enough; without any public presence, every candidate scores 0."""
    secrets, sums, sampled = block_release(seed=7, trials=2000, steps=40, z=1.0, p=0.1)
    public = torch.zeros_like(sums)
    public[np.arange(2000), :, 19 + BLOCK_K + secrets] = torch.as_tensor(sampled, dtype=torch.float32)
    attack = PublicAlignedIteratesAttack().fit(block_knowledge())
    out = attack.infer(View(noisy_private_sums=sums, public_gradients=public))
    # a lone aligned candidate with observations N(1, 1): wins when its log-ratio Σ(y − ½) is positive
    k = np.arange(41)
    expected = float((binom.pmf(k, 40, 0.1) * np.where(k == 0, 0.25, norm.cdf(np.sqrt(k) / 2))).sum())
    assert within_binomial(int((out.guess.numpy() == secrets).sum()), 2000, expected)
    silent = attack.infer(View(noisy_private_sums=sums, public_gradients=torch.zeros_like(sums)))
    assert bool((silent.scores == silent.scores[:, :1]).all())
