"""Monte Carlo coverage for mechanisms without a known output density (docs/profiles.md; paper footnote 1).

For DP-SGD or Algorithm 1 the law of the trained parameters is unknown, so coverage is *estimated*
from independently trained models: with K samples of 𝒜(D) and K' samples of 𝒜(y_i),

    Ĉ(D, M) = #{k : ‖θ_k^D - M‖ < c} / K,    Ĉ(y_i, M) = #{k : ‖θ_k^{y_i} - M‖ < c} / K',
    l̂(D, y_i, M) = log Ĉ(D, M) - log Ĉ(y_i, M),

reported with the cutoff radius c and the sample counts, and labelled as an estimate. The standard
error is the delta-method one, sqrt((1 - p)/(K p) + (1 - p')/(K' p')). A count of zero gives an
infinite estimate (the sample cannot resolve that coverage); such entries are flagged, not hidden.

Default cutoff: the distance from M to its ⌈√K⌉-th nearest sample of 𝒜(D), the usual k-nearest-
neighbour choice — the expected count in the ball grows like √K, so the estimate's relative error
falls like K^{-1/4} while the ball (and the bias of treating coverage as a density) shrinks.

This module takes plain arrays of sampled parameter vectors (shape [K, d]); the batched training
engine supplies them for DP-SGD / FDP-SGD. For a mechanism with a density the estimate converges to
the analytic loss as K → ∞ and c → 0 (tested on Gaussian output perturbation).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from fdp_audit.profiles.profile import PrivacyProfile, privacy_profile

LABEL = "Monte Carlo estimate"


@dataclass(frozen=True)
class MonteCarloLoss:
    """Estimated coverage and privacy loss at P model points for m neighbours (arrays (P,) and (P, m))."""

    cutoff: float
    base_samples: int
    neighbour_samples: int
    base_counts: np.ndarray
    neighbour_counts: np.ndarray
    loss: np.ndarray
    standard_error: np.ndarray
    label: str = LABEL

    @property
    def resolved(self) -> np.ndarray:
        """Where both counts are positive, i.e. the estimate is finite."""
        return (self.base_counts[:, None] > 0) & (self.neighbour_counts > 0)

    def profile(self, point: int = 0, rows: np.ndarray | None = None) -> PrivacyProfile:
        """Estimated privacy profile at one of the points; unresolved (infinite) losses rank last.

        Args:
            point: the model point's index among the P points.
            rows: the neighbours' row ids; None numbers them 0 … m−1.

        Returns:
            The profile: |l̂| sorted ascending and the row ids in that order.
        """
        return privacy_profile(self.loss[point], rows)


def _within(samples: np.ndarray, points: np.ndarray, cutoff: float) -> np.ndarray:
    """Counts of ``samples`` (..., K, d) within ``cutoff`` of each point (P, d): shape (P, ...)."""
    offsets = samples[None, ...] - points.reshape((points.shape[0],) + (1,) * (samples.ndim - 1) + (points.shape[1],))
    return (np.einsum("...j,...j->...", offsets, offsets) < cutoff**2).sum(axis=-1)


def default_cutoff(base_samples: np.ndarray, point: np.ndarray) -> float:
    """Distance from ``point`` to its ⌈√K⌉-th nearest sample of 𝒜(D).

    Args:
        base_samples: K samples of 𝒜(D), (K, d).
        point: the model point M, (d,).

    Returns:
        The cutoff radius c.
    """
    k = math.ceil(math.sqrt(base_samples.shape[0]))
    distances = np.linalg.norm(base_samples - point[None, :], axis=1)
    return float(np.partition(distances, k - 1)[k - 1])


def monte_carlo_privacy_loss(
    base_samples: np.ndarray,
    neighbour_samples: np.ndarray,
    points: np.ndarray,
    cutoff: float | None = None,
    block: int = 64,
) -> MonteCarloLoss:
    """Estimate l(D, y_i, M) at ``points`` (P, d) from ``base_samples`` (K, d) of 𝒜(D) and
    ``neighbour_samples`` (m, K', d) of 𝒜(y_i). ``cutoff`` defaults to :func:`default_cutoff` at the
    first point.

    Args:
        base_samples: K samples of 𝒜(D), (K, d).
        neighbour_samples: K' samples of each 𝒜(y_i), (m, K', d).
        points: the model points M, (P, d) (one point may be given as (d,)).
        cutoff: the radius c; None takes :func:`default_cutoff`.
        block: neighbours whose samples are counted at a time (bounds the memory).

    Returns:
        The counts, the estimated losses l̂ (P, m) (infinite where a count is zero) and their delta-method
        standard errors.
    """
    points = np.atleast_2d(np.asarray(points, dtype=np.float64))
    if cutoff is None:
        cutoff = default_cutoff(base_samples, points[0])
    base = _within(base_samples, points, cutoff)
    counts = np.concatenate(
        [
            _within(neighbour_samples[s : s + block], points, cutoff)
            for s in range(0, neighbour_samples.shape[0], block)
        ],
        axis=1,
    )
    k, k_prime = base_samples.shape[0], neighbour_samples.shape[1]
    with np.errstate(divide="ignore", invalid="ignore"):
        p, p_prime = base[:, None] / k, counts / k_prime
        loss = np.log(p) - np.log(p_prime)
        error = np.sqrt((1 - p) / (k * p) + (1 - p_prime) / (k_prime * p_prime))
    return MonteCarloLoss(float(cutoff), k, k_prime, base, counts, loss, error)
