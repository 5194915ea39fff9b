"""The CorrDP neighbour distance d(D, D') and the per-feature TV(j) on discrete laws (docs/corrdp.md;
paper Def. 2.3, Def. 2.5 / Eq. 1, Def. 2.8, Example 2.6).

For neighbouring data sets whose differing entries are e and e',
``d(D, D') = max_{I ⊆ [m]} TV(P_{X_S | X_I = e_I}, P_{X_S | X_I = e'_I})`` (Eq. 1). Conditioning on a
set I that contains a sensitive coordinate k fixes X_k to e_k (resp. e'_k), so a sensitive change
gives two point masses at different values and d = 1 (axiom 2); when the insensitive features are
independent of the sensitive ones every conditional equals the same law and d = 0 (axiom 4).

Laws are given as a probability table ``pmf`` with one axis per feature. A conditioning event of
probability zero leaves the conditional law undefined; the distance is then reported as 1, the
conservative value (nothing rules out a full disclosure).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np


def _conditional_sensitive(pmf: np.ndarray, sensitive: Sequence[int], given: dict[int, int]) -> np.ndarray | None:
    """Law of the free sensitive coordinates (those not in ``given``) given X_k = v for (k, v) in
    ``given``, as a flat vector; None when the conditioning event has probability zero."""
    index = tuple(given.get(axis, slice(None)) for axis in range(pmf.ndim))
    sliced = pmf[index]
    remaining = [axis for axis in range(pmf.ndim) if axis not in given]
    keep = [pos for pos, axis in enumerate(remaining) if axis in sensitive]
    drop = tuple(pos for pos in range(len(remaining)) if pos not in keep)
    marginal = sliced.sum(axis=drop) if drop else sliced
    total = float(np.sum(marginal))
    if total <= 0.0:
        return None
    return np.ravel(marginal) / total


def neighbour_distance(
    pmf: np.ndarray, sensitive: Sequence[int], e: Sequence[int], e_prime: Sequence[int]
) -> float:
    """d(D, D') of Eq. 1 for differing entries ``e`` and ``e_prime`` (value indices per feature) under
    the law ``pmf`` (one axis per feature); ``sensitive`` lists the sensitive axes.

    Args:
        pmf: the probability table, one axis per feature.
        sensitive: the sensitive axes S.
        e: the differing entry of D, one value index per feature.
        e_prime: the differing entry of D', one value index per feature.

    Returns:
        d in [0, 1]: the largest TV over conditioning sets I; 1 for a sensitive change or a conditioning event of
        probability zero.
    """
    pmf = np.asarray(pmf, dtype=float)
    sensitive = sorted(set(sensitive))
    m = pmf.ndim
    best = 0.0
    for size in range(1, m + 1):
        for subset in itertools.combinations(range(m), size):
            if all(e[k] == e_prime[k] for k in subset):
                continue  # identical conditioning events give TV 0
            if any(k in sensitive and e[k] != e_prime[k] for k in subset):
                return 1.0  # the two conditionals are point masses at different sensitive values
            free = [k for k in sensitive if k not in subset]
            if not free:
                continue  # X_S is fully fixed, and to the same value on both sides
            p = _conditional_sensitive(pmf, sensitive, {k: e[k] for k in subset})
            q = _conditional_sensitive(pmf, sensitive, {k: e_prime[k] for k in subset})
            if p is None or q is None:
                return 1.0
            best = max(best, 0.5 * float(np.abs(p - q).sum()))
    return min(best, 1.0)


def empirical_pmf(codes: np.ndarray, levels: Sequence[int]) -> np.ndarray:
    """Empirical probability table of integer-coded records (rows) with ``levels[k]`` values in column k.

    Args:
        codes: integer-coded records, (N, m), column k in ``range(levels[k])``.
        levels: the number of values of each column.

    Returns:
        The table of relative frequencies, shape ``levels``.
    """
    codes = np.asarray(codes, dtype=np.int64)
    table = np.zeros(tuple(levels))
    np.add.at(table, tuple(codes.T), 1.0)
    return table / len(codes)


def feature_tv_exact(pmf: np.ndarray, sensitive: Sequence[int], feature: int) -> float:
    """Population TV(j) = max_{v1, v2} TV(P_{X_S | X_j = v1}, P_{X_S | X_j = v2}) (Def. 2.8) for an
    insensitive axis ``feature``; conditioning values of probability zero are skipped.

    Args:
        pmf: the probability table, one axis per feature.
        sensitive: the sensitive axes S.
        feature: the insensitive axis j.

    Returns:
        TV(j).
    """
    pmf = np.asarray(pmf, dtype=float)
    laws = [_conditional_sensitive(pmf, sensitive, {feature: v}) for v in range(pmf.shape[feature])]
    defined = np.array([p for p in laws if p is not None])
    return float(0.5 * np.abs(defined[:, None, :] - defined[None, :, :]).sum(axis=-1).max())


def example_2_6() -> dict[str, float]:
    """Paper Example 2.6: X = (X1, X2), S = {1}, U = {2}, X1 | X2 = k ~ Bernoulli(k/3) for k ∈ {1, 2}.

    e = (1, 2), e' = (0, 1) gives d = 1 (conditioning on I = {1}); e = (1, 2), e' = (1, 1) gives
    d = TV(Bern(2/3), Bern(1/3)) = 1/3. The marginal of X2 does not matter; it is taken uniform.

    Returns:
        ``d_sensitive_change`` and ``d_insensitive_change`` as computed by :func:`neighbour_distance`.
    """
    pmf = np.zeros((2, 2))  # axis 0: X1 ∈ {0, 1}; axis 1: X2 ∈ {1, 2} stored at index k − 1
    for k in (1, 2):
        pmf[1, k - 1] = 0.5 * k / 3
        pmf[0, k - 1] = 0.5 * (1 - k / 3)
    return {
        "d_sensitive_change": neighbour_distance(pmf, [0], (1, 1), (0, 0)),
        "d_insensitive_change": neighbour_distance(pmf, [0], (1, 1), (1, 0)),
    }
