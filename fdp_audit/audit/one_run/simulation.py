"""Simulated one-run audits: exact releases of m gradient canaries under a Gaussian or a Poisson-subsampled Gaussian
mechanism, fast enough for hundreds of seeds (no training).

Canary i has secret ``v_i`` (uniform over the game's candidates) and candidate pattern ``u`` (inclusion
``(0, 1)``, a protected value ``2v/(k-1) - 1``; :func:`~fdp_audit.audit.one_run.guesser.candidate_pattern`).
One step adds ``b_t·u_{v_i}`` (``b_t ~ Bernoulli(p)``; p = 1 is the plain Gaussian mechanism) to the canary's
coordinate and ``N(0, z²)`` to every coordinate — the clipped contribution of a record of norm 1 and the noise of
DP-SGD with noise multiplier z, on coordinates that nothing else touches. The release is the negated sums (a
gradient step lowers the weight) and, for ``updates``, the negated per-step values; ``m`` null coordinates carry
noise only. The guesser and the analysis are exactly those of a real audit.
"""

from __future__ import annotations

import numpy as np

from fdp_audit.audit.one_run.evaluation import ClaimedCurve, judge_scores
from fdp_audit.audit.one_run.guesser import Release, candidate_pattern, threat_scores


def simulate_release(rng: np.random.Generator, m: int, game: str, k: int, noise_multiplier: float,
                     sample_rate: float, steps: int, updates: bool) -> tuple[Release, np.ndarray]:
    """One simulated training's canary block and the secrets (``[m]`` candidate indices)."""
    pattern = candidate_pattern(game, k)
    secrets = rng.integers(0, len(pattern), size=m)
    sampled = rng.random((steps, m)) < sample_rate
    per_step = sampled * pattern[secrets][None, :] + noise_multiplier * rng.standard_normal((steps, m))
    null = noise_multiplier * rng.standard_normal((steps, m))
    release = Release(-per_step.sum(axis=0), -null.sum(axis=0),
                      -per_step if updates else None, -null if updates else None)
    return release, secrets


def simulated_audit(rng: np.random.Generator, m: int, game: str, k: int, noise_multiplier: float,
                    sample_rate: float, steps: int, claim: ClaimedCurve, alpha: float, updates: bool = True,
                    family_search: bool = False) -> dict:
    """Simulate one training and judge it against ``claim`` (the results section of a real one-run audit)."""
    release, secrets = simulate_release(rng, m, game, k, noise_multiplier, sample_rate, steps, updates)
    return judge_scores(threat_scores(release, candidate_pattern(game, k)), secrets, claim, alpha, family_search)
