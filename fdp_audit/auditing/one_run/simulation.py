"""Simulated one-run releases: exact releases of m gradient canaries under a Gaussian or a Poisson-subsampled
Gaussian mechanism, fast enough for hundreds of seeds (no training).

Canary i has secret ``v_i`` (uniform over the game's candidates) and candidate pattern ``u`` (inclusion
``(0, 1)``, a protected value ``2v/(k-1) - 1``; :func:`~fdp_audit.auditing.one_run.guesser.candidate_pattern`).
One step adds ``b_t·g·u_{v_i}`` (``b_t ~ Bernoulli(p)``; p = 1 is the plain Gaussian mechanism; ``g`` the
canary's clipped gradient, 1 for a mechanism that clips to the clip norm) to the canary's coordinate and
``N(0, z²)`` to every coordinate — the clipped contribution of a record and the noise of DP-SGD with noise
multiplier z, in units of the clip norm, on coordinates that nothing else touches. The release is the negated
sums (a gradient step lowers the weight) and, for ``updates``, the negated per-step values; ``m`` null
coordinates carry noise only. Judging a simulated release is
:func:`fdp_audit.auditing.one_run.evaluation.simulated_audit`, with the guesser and analysis of a real audit.
"""

from __future__ import annotations

import numpy as np

from fdp_audit.accounting.events import Relation
from fdp_audit.auditing.one_run.guesser import Release, StepModel, candidate_pattern, mixture_scores, rank_guesses

GAMES_OF_RELATIONS = {Relation.ADD_REMOVE: "inclusion", Relation.REPLACE: "value"}


def game_of(relation: str) -> str:
    """The one-run game whose neighbouring relation is ``relation`` (inclusion: add/remove; value: replace).

    Args:
        relation: ``Relation.ADD_REMOVE`` or ``Relation.REPLACE``.

    Returns:
        ``"inclusion"`` or ``"value"``.
    """
    return GAMES_OF_RELATIONS[relation]


def simulate_release(rng: np.random.Generator, m: int, game: str, k: int, noise_multiplier: float,
                     sample_rate: float, steps: int, updates: bool, gradient: float = 1.0
                     ) -> tuple[Release, np.ndarray]:
    """One simulated training's canary block and the secrets (``[m]`` candidate indices); ``gradient`` is the
    canary's contribution in clip norms (more than 1: a mechanism that does not clip).

    Args:
        rng: the random stream.
        m: the number of canaries (and of null coordinates).
        game: ``"inclusion"`` or ``"value"``.
        k: the number of candidate values (ignored for inclusion).
        noise_multiplier: z, the noise's standard deviation in clip norms.
        sample_rate: the Poisson sampling rate p (1: every step).
        steps: the number of steps T.
        updates: release the per-step updates too.
        gradient: the canary's contribution per sampled step, in clip norms.

    Returns:
        ``(release, secrets)``.
    """
    pattern = candidate_pattern(game, k)
    secrets = rng.integers(0, len(pattern), size=m)
    sampled = rng.random((steps, m)) < sample_rate
    per_step = sampled * (gradient * pattern[secrets])[None, :] + noise_multiplier * rng.standard_normal((steps, m))
    null = noise_multiplier * rng.standard_normal((steps, m))
    release = Release(-per_step.sum(axis=0), -null.sum(axis=0),
                      -per_step if updates else None, -null if updates else None)
    return release, secrets


def oracle_correct(rng: np.random.Generator, m: int, game: str, k: int, noise_multiplier: float, sample_rate: float,
                   steps: int, seeds: int) -> np.ndarray:
    """``[seeds, m]`` running counts of right guesses (most confident first) of the Neyman–Pearson guesser, which
    knows the rate and the step ``1/z``, on ``seeds`` exact releases of the mechanism: the best ranking of a
    release's canaries (the likelihood ratio of the per-step model).

    Args:
        rng: the random stream.
        m: the number of canaries.
        game: ``"inclusion"`` or ``"value"``.
        k: the number of candidate values.
        noise_multiplier: z (> 0).
        sample_rate: the Poisson sampling rate p.
        steps: the number of steps T.
        seeds: the number of simulated releases.

    Returns:
        The counts, int64 array of shape (seeds, m).
    """
    pattern = candidate_pattern(game, k)
    model = StepModel(sample_rate, 1.0 / noise_multiplier)
    out = np.empty((seeds, m), dtype=np.int64)
    for row in range(seeds):
        release, secrets = simulate_release(rng, m, game, k, noise_multiplier, sample_rate, steps, updates=True)
        assert release.updates is not None
        out[row] = rank_guesses(mixture_scores(-release.updates / noise_multiplier, pattern, model), secrets).correct
    return out
