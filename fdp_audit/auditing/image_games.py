"""The image games' building blocks (docs/images.md; the registered games are
:mod:`fdp_audit.auditing.games.images`): the protected part of a canary image is one of K known candidates sharing
its public image, so Ball = 1/K (after Hayes, Mahloujifar & Balle, NeurIPS 2023, "Bounding Training Data
Reconstruction in DP-SGD"), and an attack's success is judged against Theorem 4's ``1 − f(1/K)``.

* **Candidates**: K images ``x − P x + P z_k`` with P the Ψ map's protected projection
  (:meth:`~fdp_audit.data.image_psi.ImagePublicMap.canary_candidates`).
* **Gradient canaries**: the K candidates are K gradient canaries on a canary block of the model
  (:class:`~fdp_audit.training.engine.CanaryBlock`, parameters the forward pass never reads): candidate k's private
  gradient is ``a·e_k`` (raw norm a = factor·C above the clip norm) and only the secret candidate is in the
  private population; all K are in the public population with the same public gradient, as K images with one
  public image are (:func:`gradient_canary_block`). A correct mechanism releases, per step, along ``e_k``:
  ``(1 − p) N(0, σ²) + p N(C, σ²)`` for the secret and ``N(0, σ²)`` for the others. The Bayes-optimal guess
  knows p and σ (:func:`bayes_optimal_success`, Monte Carlo); the iterates attacks (:mod:`attacks.iterates`) know
  neither.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from fdp_audit.training.engine import CanaryBlock

NOISE_COORDINATES = 32
MONTE_CARLO_BLOCK = 20_000  # releases whose secret coordinates are drawn at once
MONTE_CARLO_BYTES = 256 << 20  # at most this much of draws, and of arrays computed from them, held at once


def gradient_canary_block(secrets: np.ndarray, k: int, magnitude: float) -> CanaryBlock:
    """K block canaries per trial: private value ``magnitude`` on the secret's coordinate only, the same public
    value on every candidate's, :data:`NOISE_COORDINATES` noise-only coordinates.

    Args:
        secrets: each trial's secret candidate, shape (R,).
        k: the number of candidates K.
        magnitude: each canary's raw gradient (``canary_norm_factor`` times the clip norm).

    Returns:
        The block: private values and presence of shape (R, K), public values ``magnitude``.
    """
    secret = torch.as_tensor(secrets)
    present = torch.nn.functional.one_hot(secret, k).bool()
    return CanaryBlock(magnitude * present.float(), torch.full((len(secrets), k), magnitude), present,
                       NOISE_COORDINATES)


def bayes_optimal_success(sample_rate: float, noise_multiplier: float, steps: int, k: int, draws: int = 200_000,
                          seed: int = 0) -> tuple[float, float]:
    """Success of the Bayes-optimal guess in the gradient-canary game (known p and σ = z): the posterior of
    candidate j is proportional to ``Π_t [(1 − p) + p·exp((y_tj − ½)/σ²)]``, so the optimal guess is the argmax
    of ``Σ_t log[(1 − p) + p·exp((y_tj − ½)/σ²)]``. Monte Carlo over ``draws`` releases (the secret is candidate
    0 by symmetry; a tie goes to it, as the first of the argmax). The noise of a block of
    :data:`MONTE_CARLO_BLOCK` releases is drawn a few releases at a time, so that at most
    :data:`MONTE_CARLO_BYTES` of it (and of what is computed from it) is held at once — drawn whole, 20,000
    releases of T = 20 steps and K = 1,000 candidates were 3.2 GB an array — and only each release's secret
    coordinate and best other score are kept; the secret's sampling draws follow its block's noise, so the draws
    and the result do not depend on how the block is split. Returns the success and its standard error.

    Args:
        sample_rate: the Poisson sampling rate p.
        noise_multiplier: z (σ = z in clip norms).
        steps: the number of steps T.
        k: the number of candidates K.
        draws: the Monte Carlo releases.
        seed: the Monte Carlo seed.

    Returns:
        ``(success, standard_error)``.
    """
    rng = np.random.default_rng(seed)
    rows = max(1, MONTE_CARLO_BYTES // (4 * 8 * steps * k))  # releases whose T × K noise is held at once
    absent = math.log1p(-sample_rate) if sample_rate < 1 else -np.inf

    def scores(y: np.ndarray) -> np.ndarray:  # [n, T, K] → [n, K]
        return np.logaddexp(absent, math.log(sample_rate) + (y - 0.5) / noise_multiplier ** 2).sum(axis=1)

    successes, done = 0, 0
    while done < draws:
        n = min(MONTE_CARLO_BLOCK, draws - done)
        secret, best_other = np.empty((n, steps, 1)), np.full(n, -np.inf)
        for start in range(0, n, rows):
            y = rng.standard_normal((min(rows, n - start), steps, k)) * noise_multiplier
            secret[start:start + len(y)] = y[:, :, :1]
            if k > 1:
                best_other[start:start + len(y)] = scores(y[:, :, 1:]).max(axis=1)
        secret[:, :, 0] += rng.random((n, steps)) < sample_rate
        successes += int((scores(secret)[:, 0] >= best_other).sum())
        done += n
    rate = successes / draws
    return rate, math.sqrt(rate * (1 - rate) / draws)
