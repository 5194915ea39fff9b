"""Estimators of the per-feature correlation distance TV(j) (docs/corrdp.md; paper Sec. 4 and App. D).

``TV(j) = max_{x1, x2} TV(P_{X_S | X_j = x1}, P_{X_S | X_j = x2})`` (paper Def. 2.8, Remark 3.8): the
largest total-variation distance between the conditional laws of the sensitive block X_S under two
values of one insensitive feature j. Every estimator here returns the maximum over pairs of
conditioning values together with the rate exponent γ and the constant c2 of Assumption 4.1, so the
upper-confidence version TV~ (Def. 4.3) can be formed:

* discrete X_S, discrete X_j: plug-in, ``½ Σ_i |P̂_j1(i) − P̂_j2(i)|`` (Example D.1, Eq. 20), γ = 1/2;
* continuous X_S, discrete X_j: histogram with bin width ∝ n^{-1/(k+2)} on k min-max scaled columns
  (Example D.2, n^{-1/3} for k = 1; App. D.2 item 2 for k > 1), γ = 1/(k+2);
* continuous X_S, continuous X_j, jointly Gaussian: regression φ̂, ψ̂, η̂ (Eq. 21) and the closed form
  ``2Φ(|φ̂||u1 − u2| / (2η̂)) − 1`` (Example D.3), γ = 1/2; for k > 1 sensitive columns the same-covariance
  Gaussian formula ``2Φ(‖(η̂²)^{-1/2}φ̂‖|u1 − u2| / 2) − 1`` with η̂² the residual covariance (App. D.2 item 3);
* discrete X_S, continuous X_j: multinomial logistic regression of X_S on X_j (end of App. D.1), γ = 1/2.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.special import ndtr

# Grid on which a fitted conditional law P(X_S | X_j = u) is evaluated for a continuous X_j: the
# maximising pair need not be the end points when a class probability peaks inside the range.
_GRID_POINTS = 65


@dataclass(frozen=True)
class TVEstimate:
    """One estimate TV̂ = max over pairs of conditioning values, with its Assumption 4.1 constants."""

    value: float
    pair: tuple[str, str]
    n: int
    gamma: float
    c2: float
    method: str

    def upper(self, n_insensitive: int, delta: float, c2: float | None = None) -> float:
        """TV~ = TV̂ + 2 c2 sqrt(log((m − m_s)/δ)) / n^γ, capped at 1 (paper Def. 4.3); ``n_insensitive``
        is the number of insensitive features the union bound runs over (the paper's m − m_s).

        ``c2`` overrides the estimator's own constant (paper App. D), which is often so large that the
        correction alone exceeds 1.

        Args:
            n_insensitive: the number of insensitive features m − m_s.
            delta: the failure probability δ of the upper-confidence bound.
            c2: the constant to use instead of the estimator's; None keeps its own.

        Returns:
            TV~ in [0, 1].
        """
        constant = self.c2 if c2 is None else c2
        slack = 2.0 * constant * math.sqrt(math.log(n_insensitive / delta)) / self.n**self.gamma
        return min(1.0, self.value + slack)

    def to_dict(self) -> dict[str, object]:
        """The estimate for the results JSON (an infinite c2 written as null).

        Returns:
            Its value, pair, n, γ, c2 and method.
        """
        return {
            "value": self.value,
            "pair": list(self.pair),
            "n": self.n,
            "gamma": self.gamma,
            "c2": self.c2 if math.isfinite(self.c2) else None,
            "method": self.method,
        }


def joint_codes(*columns: np.ndarray) -> np.ndarray:
    """Integer code of each row's combination of values over several discrete columns.

    Args:
        columns: discrete columns of equal length N.

    Returns:
        One code per row, (N,), equal codes for equal combinations.
    """
    stacked = np.stack([np.unique(np.asarray(c), return_inverse=True)[1] for c in columns], axis=1)
    return np.unique(stacked, axis=0, return_inverse=True)[1].reshape(-1)


def pairwise_tv(p: np.ndarray) -> np.ndarray:
    """Matrix of TV distances ½ Σ |p_a − p_b| between the rows of a (levels × outcomes) matrix.

    Args:
        p: one probability vector per row, (levels, outcomes).

    Returns:
        The TV between every pair of rows, (levels, levels).
    """
    return 0.5 * np.abs(p[:, None, :] - p[None, :, :]).sum(axis=-1)


def _max_pair(tv: np.ndarray, labels: Sequence[object]) -> tuple[float, tuple[str, str]]:
    a, b = np.unravel_index(int(np.argmax(tv)), tv.shape)
    return float(tv[a, b]), (str(labels[a]), str(labels[b]))


def tv_discrete(s_codes: np.ndarray, u_values: np.ndarray) -> TVEstimate:
    """Plug-in TV̂ for discrete X_S given discrete X_j (paper Example D.1, Eq. 20).

    P̂_j(i) = n_ij / n_j; TV̂ = max_{j1, j2} ½ Σ_i |P̂_j1(i) − P̂_j2(i)|. The constant is
    c2 = sqrt(log(K_S K_U) / min_ij p̂_ij) over the observed cells (structural zeros such as
    Husband × Never-married would make the paper's min p_ij zero and c2 infinite).

    Args:
        s_codes: the sensitive block's value code of each row (:func:`joint_codes` for several columns).
        u_values: the insensitive feature's value of each row.

    Returns:
        The estimate, with the maximising pair of values, γ = 1/2 and c2.
    """
    s_index = np.unique(s_codes, return_inverse=True)[1].reshape(-1)
    u_levels, u_index = np.unique(u_values, return_inverse=True)
    counts = np.zeros((len(u_levels), int(s_index.max()) + 1))
    np.add.at(counts, (u_index.reshape(-1), s_index), 1.0)
    n = int(counts.sum())
    value, pair = _max_pair(pairwise_tv(counts / counts.sum(axis=1, keepdims=True)), u_levels)
    observed = counts[counts > 0] / n
    c2 = math.sqrt(math.log(max(counts.size, 2)) / observed.min())
    return TVEstimate(value, pair, n, 0.5, c2, "plug-in")


def histogram_codes(x: np.ndarray, scale: float = 1.0) -> tuple[np.ndarray, int]:
    """Bin each of the k columns of ``x`` (min-max scaled to [0, 1]) with width ``scale · n^{-1/(k+2)}``
    and return the joint bin code of each row and the number of bins per column.

    Args:
        x: the continuous columns, (n,) or (n, k).
        scale: the bin width's constant.

    Returns:
        ``(codes (n,), bins per column)``.
    """
    x = np.asarray(x, dtype=float).reshape(len(x), -1)
    n, k = x.shape
    bins = max(1, math.ceil(1.0 / (scale * n ** (-1.0 / (k + 2)))))
    lo, hi = x.min(axis=0), x.max(axis=0)
    unit = (x - lo) / np.where(hi > lo, hi - lo, 1.0)
    per_column = np.minimum((unit * bins).astype(np.int64), bins - 1)
    return per_column @ (bins ** np.arange(k, dtype=np.int64)), bins


def tv_histogram(
    x: np.ndarray, u_values: np.ndarray, discrete: np.ndarray | None = None, scale: float = 1.0
) -> TVEstimate:
    """Histogram TV̂ for continuous X_S (k columns) given discrete X_j (paper Example D.2).

    Bin width h = scale · n^{-1/(k+2)} on min-max scaled columns balances the O(h) bias against the
    O(1/sqrt(n h^k)) noise, so γ = 1/(k+2) (1/3 for one column). ``discrete`` crosses the bins with the
    codes of discrete sensitive columns, giving the plug-in on the joint law of a mixed X_S.
    c2 = B sqrt(log(K_S K_U) / min_j p̂_j) with B = 1 after scaling and K_S = bins^k, the histogram cells (the
    crossed discrete codes are not counted in K_S).

    Args:
        x: the continuous sensitive columns, (n,) or (n, k).
        u_values: the discrete insensitive feature's value of each row.
        discrete: codes of discrete sensitive columns to cross with the bins, or None.
        scale: the bin width's constant.

    Returns:
        The estimate, with γ = 1/(k+2) and c2.
    """
    codes, bins = histogram_codes(x, scale)
    if discrete is not None:
        codes = joint_codes(codes, discrete)
    plug_in = tv_discrete(codes, u_values)
    k = np.asarray(x).reshape(len(codes), -1).shape[1]
    u_share = np.unique(u_values, return_counts=True)[1] / len(codes)
    cells = bins**k * len(u_share)
    c2 = math.sqrt(math.log(max(cells, 2)) / u_share.min())
    return TVEstimate(plug_in.value, plug_in.pair, plug_in.n, 1.0 / (k + 2), c2, f"histogram({bins}^{k})")


def gaussian_tv(mean_difference: np.ndarray, covariance: np.ndarray) -> float:
    """TV between N(a, Σ) and N(b, Σ): 2Φ(‖Σ^{-1/2}(a − b)‖ / 2) − 1 (paper Example D.3).

    Args:
        mean_difference: a − b, (k,) or a scalar.
        covariance: Σ, (k, k) or a scalar variance.

    Returns:
        The total variation distance.
    """
    diff = np.atleast_1d(np.asarray(mean_difference, dtype=float))
    cov = np.atleast_2d(np.asarray(covariance, dtype=float))
    mahalanobis = math.sqrt(float(diff @ np.linalg.solve(cov, diff)))
    return float(2.0 * ndtr(mahalanobis / 2.0) - 1.0)


def gaussian_regression(s: np.ndarray, u: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Least squares of X_S on X_j (paper Eq. 21): slope φ̂, intercept ψ̂ and residual covariance η̂²
    (the 1/n maximum-likelihood normalisation of Eq. 21).

    Args:
        s: the sensitive columns, (n,) or (n, k).
        u: the insensitive feature, (n,).

    Returns:
        ``(φ̂ (k,), ψ̂ (k,), η̂² (k, k))``.
    """
    s = np.asarray(s, dtype=float).reshape(len(u), -1)
    u = np.asarray(u, dtype=float)
    uc = u - u.mean()
    phi = (uc @ (s - s.mean(axis=0))) / (uc @ uc)
    psi = s.mean(axis=0) - phi * u.mean()
    residual = s - np.outer(u, phi) - psi
    return phi, psi, residual.T @ residual / len(u)


def tv_gaussian(s: np.ndarray, u: np.ndarray, u_pair: tuple[float, float] | None = None) -> TVEstimate:
    """Closed-form TV̂ for jointly Gaussian (X_S, X_j) (paper Example D.3).

    P̂_u = N(φ̂u + ψ̂, η̂²), so TV̂(u1, u2) = 2Φ(|φ̂||u1 − u2| / (2η̂)) − 1, maximal at the widest pair:
    ``u_pair`` or, by default, the observed minimum and maximum of X_j (the max over data pairs of
    Example D.3). c2 = sqrt(log n) / η̂ with the paper's unspecified constant C set to 1 and η̂ the
    smallest residual standard deviation (the direction in which a mean shift costs most).

    Args:
        s: the sensitive columns, (n,) or (n, k).
        u: the insensitive feature, (n,).
        u_pair: the two conditioning values compared; None takes X_j's observed range.

    Returns:
        The estimate, with γ = 1/2 and c2.
    """
    u = np.asarray(u, dtype=float)
    lo, hi = (float(u.min()), float(u.max())) if u_pair is None else u_pair
    phi, _, eta2 = gaussian_regression(s, u)
    value = gaussian_tv(phi * (hi - lo), eta2)
    eta_min = math.sqrt(float(np.linalg.eigvalsh(np.atleast_2d(eta2)).min()))
    c2 = math.sqrt(math.log(len(u))) / eta_min
    return TVEstimate(value, (f"{lo:.6g}", f"{hi:.6g}"), len(u), 0.5, c2, "gaussian")


def tv_multinomial_logistic(
    s_codes: np.ndarray, u: np.ndarray, u_pair: tuple[float, float] | None = None
) -> TVEstimate:
    """TV̂ for discrete X_S given continuous X_j by multinomial logistic regression (end of App. D.1).

    The fitted P̂(X_S | X_j = u) is evaluated on a grid over ``u_pair`` (default: the observed range) and
    the largest pairwise TV is returned. γ = 1/2 (a parametric fit); c2 follows Example D.1 with the
    two end points as the K_U = 2 conditioning values.

    Args:
        s_codes: the sensitive block's value code of each row.
        u: the continuous insensitive feature, (n,).
        u_pair: the range of X_j the grid covers; None takes the observed range.

    Returns:
        The estimate, with the maximising pair of grid values, γ = 1/2 and c2.
    """
    from sklearn.linear_model import LogisticRegression

    u = np.asarray(u, dtype=float)
    lo, hi = (float(u.min()), float(u.max())) if u_pair is None else u_pair
    levels, y = np.unique(s_codes, return_inverse=True)
    centre, spread = u.mean(), u.std() or 1.0
    model = LogisticRegression(max_iter=1000).fit(((u - centre) / spread)[:, None], y.reshape(-1))
    grid = np.linspace(lo, hi, _GRID_POINTS)
    probs = model.predict_proba(((grid - centre) / spread)[:, None])
    value, pair = _max_pair(pairwise_tv(probs), [f"{g:.6g}" for g in grid])
    share = np.bincount(y.reshape(-1)) / len(u)
    c2 = math.sqrt(math.log(2 * len(levels)) / share[share > 0].min())
    return TVEstimate(value, pair, len(u), 0.5, c2, "multinomial-logistic")


@dataclass(frozen=True)
class FeatureTV:
    """TV(j) of one insensitive feature for a mixed sensitive block (paper App. E.2 recipe).

    ``continuous`` covers the numeric sensitive columns, ``discrete`` the categorical ones; the paper
    combines them as min(TV_c + TV_d, 1). That sum is *not* an upper bound on the joint TV (equal
    marginals with a different coupling give TV_c = TV_d = 0 and joint TV 1), so for a categorical
    feature ``joint`` also gives the histogram plug-in on the joint cells."""

    feature: str
    kind: str
    continuous: TVEstimate | None
    discrete: TVEstimate | None
    joint: TVEstimate | None

    @property
    def parts(self) -> tuple[TVEstimate, ...]:
        return tuple(p for p in (self.continuous, self.discrete) if p is not None)

    @property
    def estimate(self) -> float:
        """The paper's combination min(TV̂_c + TV̂_d, 1)."""
        return min(1.0, sum(p.value for p in self.parts))

    def upper(self, n_insensitive: int, delta: float, c2: float | None = None) -> float:
        """min(TV~_c + TV~_d, 1), each part with its own Def. 4.3 correction.

        Args:
            n_insensitive: the number of insensitive features m − m_s.
            delta: the failure probability δ.
            c2: the constant to use instead of each estimator's; None keeps their own.

        Returns:
            The combined upper-confidence TV~.
        """
        return min(1.0, sum(p.upper(n_insensitive, delta, c2) for p in self.parts))

    def to_dict(self, n_insensitive: int, delta: float, c2: float | None = None) -> dict[str, object]:
        """The feature's estimates for the results JSON, with the combined estimate and its upper-confidence version.

        Args:
            n_insensitive: the number of insensitive features m − m_s (for :meth:`upper`).
            delta: the failure probability δ (for :meth:`upper`).
            c2: the constant override (for :meth:`upper`).

        Returns:
            The feature, its kind, each part's estimate, ``estimate`` and ``upper``.
        """
        return {
            "feature": self.feature,
            "kind": self.kind,
            "continuous": None if self.continuous is None else self.continuous.to_dict(),
            "discrete": None if self.discrete is None else self.discrete.to_dict(),
            "joint": None if self.joint is None else self.joint.to_dict(),
            "estimate": self.estimate,
            "upper": self.upper(n_insensitive, delta, c2),
        }


def feature_tv(
    columns: Mapping[str, np.ndarray], kinds: Mapping[str, str], sensitive: Sequence[str], feature: str
) -> FeatureTV:
    """Estimate TV(feature) for a table of numeric and categorical columns, choosing the estimator
    by column kinds as in the paper's Adult recipe (App. E.2).

    A numeric feature is min-max scaled to [0, 1] and the conditional laws are compared at its two end
    points (App. E.2: "x_u = 0, 1"), continuous sensitive columns by the Gaussian closed form and
    discrete ones by multinomial logistic regression. A categorical feature uses the joint histogram
    for the continuous sensitive columns and the plug-in for the discrete ones.

    Args:
        columns: the table's columns by name.
        kinds: each column's kind, ``"numeric"`` or categorical.
        sensitive: the sensitive columns.
        feature: the insensitive feature j.

    Returns:
        The feature's TV estimates (continuous part, discrete part, and the joint one for a categorical feature).
    """
    numeric = [c for c in sensitive if kinds[c] == "numeric"]
    categorical = [c for c in sensitive if kinds[c] != "numeric"]
    x_num = np.stack([columns[c] for c in numeric], axis=1) if numeric else None
    s_cat = joint_codes(*(columns[c] for c in categorical)) if categorical else None
    u = columns[feature]
    if kinds[feature] == "numeric":
        lo, hi = float(u.min()), float(u.max())
        unit = (u - lo) / (hi - lo if hi > lo else 1.0)
        cont = None if x_num is None else tv_gaussian(x_num, unit, (0.0, 1.0))
        disc = None if s_cat is None else tv_multinomial_logistic(s_cat, unit, (0.0, 1.0))
        return FeatureTV(feature, "numeric", cont, disc, None)
    cont = None if x_num is None else tv_histogram(x_num, u)
    disc = None if s_cat is None else tv_discrete(s_cat, u)
    joint = None if x_num is None or s_cat is None else tv_histogram(x_num, u, discrete=s_cat)
    return FeatureTV(feature, "categorical", cont, disc, joint)
