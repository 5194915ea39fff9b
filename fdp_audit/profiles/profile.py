"""Privacy profiles and typical profiles (docs/profiles.md; paper Secs. 4.3-4.4, 5.3-5.4).

Privacy profile of a model point M: the values |l(D, y_i, M)| sorted ascending over the neighbours i,
with the ranked row ids {i_M} = argsort |l|. For the Laplace mechanism |l| = β·| ‖A(y_i) - M‖ -
‖A(D) - M‖ |, so the ranking of the rows for a fixed M does not depend on β (paper Sec. 4.2).

Typical profile: for each M ~ 𝒜(D), sort its |l| values, then average position by position over the
samples of M — the mean of the k-th smallest loss, for every k. Computed in blocks of samples as one
(block × n) loss matrix and one row-wise sort, with no Python loop over rows; the per-neighbour means
of l (the KL estimate) and of |l| come out of the same matrices.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fdp_audit.profiles.mechanisms import OutputPerturbation

# Loss-matrix rows per block: 128 × n doubles stays well inside cache-friendly sizes for n ≈ 3·10⁴.
BLOCK = 128


@dataclass(frozen=True)
class PrivacyProfile:
    """|l| sorted ascending (``values``) and the neighbour row ids in that order (``rows``)."""

    values: np.ndarray
    rows: np.ndarray


@dataclass(frozen=True)
class TypicalProfile:
    """Position-by-position mean of the sorted |l| over ``samples`` model points M ~ 𝒜(D) drawn at
    inverse noise scale ``scale``, and the per-neighbour means of l and |l| over the same points."""

    scale: float
    samples: int
    values: np.ndarray
    mean_loss: np.ndarray
    mean_abs_loss: np.ndarray


def privacy_profile(loss: np.ndarray, rows: np.ndarray | None = None) -> PrivacyProfile:
    """Profile of one model point from its signed losses l(D, y_i, M) (one per neighbour).

    Args:
        loss: the signed losses, one per neighbour (m,).
        rows: the neighbours' row ids; None numbers them 0 … m−1.

    Returns:
        |l| sorted ascending (stable) and the row ids in that order.
    """
    magnitude = np.abs(np.asarray(loss, dtype=np.float64))
    order = np.argsort(magnitude, kind="stable")
    ids = np.arange(magnitude.size) if rows is None else np.asarray(rows)
    return PrivacyProfile(magnitude[order], ids[order])


def spread_positions(order: np.ndarray, count: int) -> np.ndarray:
    """``count`` entries evenly spread over ``order`` (neighbour positions ranked ascending by some
    measure of exposure), always including its last, most exposed one.

    Args:
        order: neighbour positions, ranked ascending.
        count: how many to pick (fewer when ``order`` is shorter).

    Returns:
        The picked entries of ``order``, in its order, without repeats.
    """
    picks = np.unique(np.round(np.linspace(0, order.size - 1, min(count, order.size))).astype(int))
    return order[picks]


def profile_at(
    mechanism: OutputPerturbation, deltas: np.ndarray, offset: np.ndarray, rows: np.ndarray | None = None
) -> PrivacyProfile:
    """Profile of the model point M = A(D) + ``offset`` for neighbours with Δ_i = A(y_i) - A(D).

    Args:
        mechanism: the output perturbation.
        deltas: the offsets Δ_i, (m, d).
        offset: the noise b with M = A(D) + b, (d,).
        rows: the neighbours' row ids; None numbers them 0 … m−1.

    Returns:
        The point's privacy profile.
    """
    return privacy_profile(mechanism.privacy_loss(deltas, np.asarray(offset, dtype=np.float64)[None, :])[0], rows)


def typical_profile(
    mechanism: OutputPerturbation, deltas: np.ndarray, noise: np.ndarray, block: int = BLOCK
) -> TypicalProfile:
    """Typical profile over the model points M_k = A(D) + ``noise[k]`` (``noise`` (K, d) drawn from the
    mechanism's noise law, e.g. by ``mechanism.sample_noise``).

    Args:
        mechanism: the output perturbation.
        deltas: the offsets Δ_i = A(y_i) − A(D), (m, d).
        noise: the noise draws b_k, (K, d).
        block: noise rows per loss matrix.

    Returns:
        The position-by-position mean of the sorted |l| (m,), and the per-neighbour means of l and |l|.
    """
    k, n = noise.shape[0], deltas.shape[0]
    sorted_sum, loss_sum, abs_sum = np.zeros(n), np.zeros(n), np.zeros(n)
    for start in range(0, k, block):
        loss = mechanism.privacy_loss(deltas, noise[start : start + block])
        loss_sum += loss.sum(axis=0)
        magnitude = np.abs(loss, out=loss)
        abs_sum += magnitude.sum(axis=0)
        magnitude.sort(axis=1)
        sorted_sum += magnitude.sum(axis=0)
    return TypicalProfile(mechanism.scale, k, sorted_sum / k, loss_sum / k, abs_sum / k)
