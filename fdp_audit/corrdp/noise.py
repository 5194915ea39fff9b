"""Per-coordinate noise of CorrDP-SGD and its baselines (docs/corrdp.md; paper Eq. 4, Eq. 5, Sec. 5).

Eq. 4: coordinate i of a GLM gets Gaussian noise of variance
``σ_S² = (log(1/δ) + 1) L² T / (n² ε²)`` if i ∈ S and ``σ_S² · max(TV(i), m_s²/m²)`` if i ∈ U. For a
neural network (Eq. 5) the same factors apply to the first-layer weights of each input coordinate and
σ_S² to every other parameter. The paper's baselines (Sec. 5): *Standard* (σ_S² everywhere, i.e.
DP-SGD), *Semi* (no noise on U), *Partial* (drop the sensitive features, train without noise). A
*nonprivate* reference (no noise, same clipping) is added for the utility gap.

Coordinates are columns of the design matrix (one-hot columns of a categorical feature share its
TV, as in the paper's App. E.2), so m and m_s count columns; an intercept column is data-independent
in x but its gradient moves under any change, so it gets σ_S².
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Literal

import numpy as np

Variant = Literal["corrdp", "semi", "standard", "partial", "nonprivate"]
INTERCEPT = "(intercept)"


def eq4_variance(epsilon: float, delta: float, lipschitz: float, steps: int, n: int) -> float:
    """σ_S² = (log(1/δ) + 1) L² T / (n² ε²) (paper Eq. 4).

    Args:
        epsilon: the nominal ε.
        delta: δ.
        lipschitz: the clipping bound L.
        steps: the number of steps T.
        n: the number of rows.

    Returns:
        σ_S², the noise variance of a sensitive coordinate.
    """
    return (math.log(1.0 / delta) + 1.0) * lipschitz**2 * steps / (n**2 * epsilon**2)


def sensitive_share(groups: Sequence[str], sensitive: frozenset[str]) -> float:
    """m_s²/m², the floor of the insensitive factor, counting design columns (intercept excluded).

    Args:
        groups: the feature group of each design column.
        sensitive: the sensitive feature groups.

    Returns:
        (m_s/m)².
    """
    features = [g for g in groups if g != INTERCEPT]
    m_s = sum(g in sensitive for g in features)
    return (m_s / len(features)) ** 2


def variance_factors(
    groups: Sequence[str], sensitive: frozenset[str], tv: Mapping[str, float], variant: Variant
) -> np.ndarray:
    """Per-column factor f_i with noise variance σ_S² · f_i for ``variant``.

    ``groups[i]`` names the raw feature of column i; ``tv`` maps each insensitive feature to the TV(j)
    used for calibration (the estimate, its upper-confidence version, or a known value).

    Args:
        groups: the feature group of each design column.
        sensitive: the sensitive feature groups.
        tv: TV(j) of each insensitive feature (read by ``corrdp`` only).
        variant: ``corrdp`` (max(TV(i), m_s²/m²) on U), ``standard`` (1), ``semi`` (0 on U), ``partial`` and
            ``nonprivate`` (0 everywhere); sensitive and intercept columns get 1 unless no column is noised.

    Returns:
        The factors f_i, one per column.
    """
    floor = sensitive_share(groups, sensitive)
    factors = np.empty(len(groups))
    for i, group in enumerate(groups):
        protected = group in sensitive or group == INTERCEPT
        if variant in ("partial", "nonprivate"):
            factors[i] = 0.0
        elif variant == "standard" or protected:
            factors[i] = 1.0
        elif variant == "semi":
            factors[i] = 0.0
        else:
            factors[i] = max(tv[group], floor)
    return factors


def column_mask(groups: Sequence[str], sensitive: frozenset[str], variant: Variant) -> np.ndarray:
    """1 for the columns a variant trains on: *Partial* discards the sensitive features.

    Args:
        groups: the feature group of each design column.
        sensitive: the sensitive feature groups.
        variant: the training variant.

    Returns:
        A 0/1 mask over the columns.
    """
    return np.array([0.0 if variant == "partial" and g in sensitive else 1.0 for g in groups])
