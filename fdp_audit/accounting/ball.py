"""Ball: the best success probability of an attribute-inference adversary who does not see the model
(docs/accounting.md; FDP paper Definition 8):

    Ball(X, u, d, ρ) = sup_{x* ∈ supp(X)} Pr_{x ~ X | Ψ(X) = u}[ d(x, x*) <= ρ ].

Exact helpers return floats (vectorised where it makes sense). Helpers that estimate return a
:class:`BallEstimate` whose ``upper`` field -- a one-sided upper confidence bound -- is what a verdict
must use (a larger Ball gives a larger, i.e. conservative, Theorem 4 bound ``1 - f(Ball)``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt
from scipy import stats

from fdp_audit.accounting import _validate

Metric = Literal["l2", "l1", "linf"]
_NORM_ORDER = {"l2": 2, "l1": 1, "linf": np.inf}


@dataclass(frozen=True)
class BallEstimate:
    """A Ball value with its uncertainty. ``upper`` is a one-sided upper confidence bound at level
    ``confidence`` (equal to ``estimate`` when ``method == "exact"``)."""

    estimate: float
    standard_error: float
    upper: float
    confidence: float
    samples: int
    method: Literal["exact", "monte-carlo"]


def ball_discrete(probabilities: npt.ArrayLike) -> float | np.ndarray:
    """Discrete private attribute, 0/1 metric, ρ = 0: ``Ball = max_v Pr[v | u]``.

    Args:
        probabilities: a prior over the values (1-D) or a conditional table ``Pr[v | u]`` with one row per public
            value u (2-D); non-negative, each row summing to 1.

    Returns:
        The largest probability: a float for a prior, one Ball per row (shape ``(rows,)``) for a table.

    Raises:
        InvalidParameterError: not 1-D or 2-D, empty, negative, or a row not summing to 1 (within 1e-6).
    """
    table = np.asarray(probabilities, dtype=float)
    if table.ndim not in (1, 2) or table.shape[-1] == 0:
        raise _validate.InvalidParameterError("must be a 1-D prior or a 2-D table Pr[v|u]", "probabilities")
    if not np.all(table >= 0) or not np.allclose(table.sum(axis=-1), 1.0, atol=1e-6):
        raise _validate.InvalidParameterError(
            "must be non-negative and sum to 1 (per row for a table)", "probabilities"
        )
    best = np.minimum(table.max(axis=-1), 1.0)
    return float(best) if table.ndim == 1 else best


def ball_gaussian(radius: npt.ArrayLike, scale: float, dim: int) -> float | np.ndarray:
    """Isotropic Gaussian prior ``N(μ, s² I_k)`` with the L2 metric: ``Ball = F_{χ²_k}(ρ² / s²)``.

    The optimal centre is μ: by Anderson's theorem the probability that a centred, symmetric,
    unimodal distribution puts on a symmetric convex set shifted by c is largest at c = 0.

    Args:
        radius: the success radius ρ >= 0, one value or an array.
        scale: the prior's standard deviation s per coordinate (> 0).
        dim: the dimension k of the private part (>= 1).

    Returns:
        Ball: a float for a scalar ``radius``, else an array of its shape.

    Raises:
        InvalidParameterError: a negative radius, a non-positive scale or a dimension below 1.
    """
    rho = np.asarray(radius, dtype=float)
    if not np.all(rho >= 0):
        raise _validate.InvalidParameterError("must be >= 0", "radius")
    s = _validate.positive_finite(scale, "scale")
    k = _validate.step_count(dim, "dim")
    out = stats.chi2.cdf((rho / s) ** 2, k)
    return float(out) if np.ndim(radius) == 0 else out


def gaussian_radius(level: npt.ArrayLike, scale: float, dim: int) -> float | np.ndarray:
    """The radius at which the isotropic Gaussian prior's Ball is ``level``: ``ρ = s·sqrt(F⁻¹_{χ²_k}(level))``,
    the inverse of :func:`ball_gaussian` in ρ (a function of the prior alone).

    Args:
        level: the Ball value in [0, 1], one value or an array.
        scale: the prior's standard deviation s per coordinate (> 0).
        dim: the dimension k of the private part (>= 1).

    Returns:
        ρ: a float for a scalar ``level``, else an array of its shape (``inf`` at level 1).

    Raises:
        InvalidParameterError: a level outside [0, 1], a non-positive scale or a dimension below 1.
    """
    q = np.asarray(level, dtype=float)
    if not np.all((q >= 0) & (q <= 1)):
        raise _validate.InvalidParameterError("must be in [0, 1]", "level")
    s = _validate.positive_finite(scale, "scale")
    k = _validate.step_count(dim, "dim")
    out = s * np.sqrt(stats.chi2.ppf(q, k))
    return float(out) if np.ndim(level) == 0 else out


def circle_rectangle_area(radius: npt.ArrayLike, width: float, height: float) -> float | np.ndarray:
    """Area of the intersection of a disk of radius ρ and a ``width × height`` rectangle centred at
    the disk's centre, in closed form.

    By symmetry it is four times the area in one quadrant, ``Q = ∫_0^{min(h1, ρ)} min(h2,
    sqrt(ρ² - x²)) dx`` with half-sides h1, h2: the integrand is h2 up to ``x0 = sqrt(ρ² - h2²)`` and
    the circle after it, whose antiderivative is ``F(x) = (x sqrt(ρ² - x²) + ρ² asin(x/ρ)) / 2``.

    Args:
        radius: the disk's radius ρ >= 0, one value or an array.
        width: the rectangle's side along x (> 0).
        height: the rectangle's side along y (> 0).

    Returns:
        The area (0 at ρ = 0): a float for a scalar ``radius``, else an array of its shape.

    Raises:
        InvalidParameterError: a negative radius or a non-positive side.
    """
    r = np.asarray(radius, dtype=float)
    if not np.all(r >= 0):
        raise _validate.InvalidParameterError("must be >= 0", "radius")
    h1 = _validate.positive_finite(width, "width") / 2
    h2 = _validate.positive_finite(height, "height") / 2
    safe_r = np.where(r > 0, r, 1.0)  # the formula divides by ρ; ρ = 0 has area 0

    def antiderivative(x: np.ndarray) -> np.ndarray:
        return (x * np.sqrt(np.maximum(safe_r**2 - x**2, 0.0)) + safe_r**2 * np.arcsin(np.clip(x / safe_r, -1, 1))) / 2

    x1 = np.minimum(h1, r)
    x0 = np.minimum(np.sqrt(np.maximum(r**2 - h2**2, 0.0)), x1)
    quadrant = h2 * x0 + antiderivative(x1) - antiderivative(x0)
    out = np.where(r > 0, 4 * quadrant, 0.0)
    return float(out) if np.ndim(radius) == 0 else out


def ball_uniform_box(
    radius: float,
    sides: Sequence[float],
    *,
    metric: Metric = "l2",
    samples: int = 200_000,
    confidence: float = 0.95,
    seed: int | None = 0,
) -> BallEstimate:
    """Uniform prior on a box with the given side lengths: the largest fraction of the box that a
    ball of radius ρ can cover.

    The best centre is the box centre. The covered volume ``V(c) = (1_box * 1_ball)(c)`` is a
    convolution of two log-concave functions, hence log-concave (Prékopa), and symmetric about the
    box centre c0 because box and ball are centrally symmetric, so
    ``log V(c0) >= (log V(c0 + v) + log V(c0 - v)) / 2 = log V(c0 + v)``. The centre is in the
    support, as Definition 8 requires.

    The volume is exact in 1-D (``min(2ρ, a) / a``) and, for the L2 metric, in 2-D
    (:func:`circle_rectangle_area`; for L∞ it is a product of 1-D fractions in any dimension).
    Otherwise it is estimated by Monte Carlo with a Clopper–Pearson upper confidence bound.

    Args:
        radius: the success radius ρ >= 0.
        sides: the box's side lengths, one per coordinate of the private part (each > 0).
        metric: the distance d: ``"l2"``, ``"l1"`` or ``"linf"``.
        samples: the number of uniform points of the Monte Carlo estimate (unused when the volume is exact).
        confidence: the level of the one-sided upper confidence bound, in (0, 1).
        seed: the seed of the Monte Carlo points (None draws fresh entropy).

    Returns:
        A :class:`BallEstimate`: ``method="exact"`` with ``upper == estimate`` when the volume is exact, else
        ``"monte-carlo"`` with its Clopper–Pearson ``upper``.

    Raises:
        InvalidParameterError: a negative radius, no side or a non-positive side, an unknown metric, or (only
            when the volume is estimated) fewer than one sample or a confidence outside (0, 1).
    """
    rho = float(radius)
    if not (rho >= 0):
        raise _validate.InvalidParameterError(f"must be >= 0, got {rho!r}", "radius")
    widths = np.array([_validate.positive_finite(s, "sides") for s in sides])
    if widths.size == 0:
        raise _validate.InvalidParameterError("needs at least one side", "sides")
    if metric not in _NORM_ORDER:
        raise _validate.InvalidParameterError(f"must be one of {', '.join(_NORM_ORDER)}", "metric")
    if widths.size == 1 or metric == "linf":
        return _exact(float(np.prod(np.minimum(2 * rho, widths) / widths)))
    if widths.size == 2 and metric == "l2":
        return _exact(min(1.0, circle_rectangle_area(rho, *widths) / float(np.prod(widths))))
    n = _validate.step_count(samples, "samples")
    rng = np.random.default_rng(seed)
    points = (rng.random((n, widths.size)) - 0.5) * widths
    hits = int(np.count_nonzero(np.linalg.norm(points, ord=_NORM_ORDER[metric], axis=1) <= rho))
    return _binomial(hits, n, confidence, candidates=1)


def ball_monte_carlo(
    samples: npt.ArrayLike,
    radius: float,
    candidates: npt.ArrayLike | None = None,
    *,
    metric: Metric = "l2",
    n_candidates: int = 256,
    confidence: float = 0.95,
) -> BallEstimate:
    """General prior: Monte Carlo over candidate centres.

    ``samples`` are independent draws of the private part from ``X | Ψ(X) = u``. Each candidate centre's probability
    ``Pr[d(x, c) <= ρ]`` is estimated on the samples; the estimate is the best candidate's, with its binomial standard
    error, and ``upper`` is the largest Clopper–Pearson upper bound at the Bonferroni-corrected level
    ``(1 - confidence) / m``, a simultaneous upper bound on all m candidates, hence on their maximum.

    Without ``candidates`` the first ``n_candidates`` samples (at most a quarter of them) are used as
    candidate centres and the rest to estimate, so that selection and estimation are independent.
    Ball is a supremum over *all* centres: the result can only be as good as the candidates, which
    is why drawing them from the prior itself (where the mass is) is the default.

    Args:
        samples: the draws, shape ``(n, k)`` or ``(n,)`` for k = 1, finite, n >= 2.
        radius: the success radius ρ >= 0.
        candidates: the candidate centres, reshaped to ``(m, k)``; None takes them from ``samples``.
        metric: the distance d: ``"l2"``, ``"l1"`` or ``"linf"``.
        n_candidates: how many samples become centres when ``candidates`` is None (>= 1).
        confidence: the simultaneous level of the upper confidence bound, in (0, 1).

    Returns:
        A :class:`BallEstimate` with ``method="monte-carlo"`` and ``samples`` the number of draws used to estimate.

    Raises:
        InvalidParameterError: samples not a finite ``(n, k)`` array with n >= 2, a negative radius, an unknown
            metric, ``n_candidates`` below 1, or a confidence outside (0, 1).
    """
    x = np.asarray(samples, dtype=float)
    if x.ndim == 1:
        x = x[:, None]
    if x.ndim != 2 or x.shape[0] < 2 or not np.all(np.isfinite(x)):
        raise _validate.InvalidParameterError("must be a finite (n, k) array with n >= 2", "samples")
    rho = float(radius)
    if not (rho >= 0):
        raise _validate.InvalidParameterError(f"must be >= 0, got {rho!r}", "radius")
    if metric not in _NORM_ORDER:
        raise _validate.InvalidParameterError(f"must be one of {', '.join(_NORM_ORDER)}", "metric")
    if candidates is None:
        m = max(1, min(_validate.step_count(n_candidates, "n_candidates"), x.shape[0] // 4))
        centres, x = x[:m], x[m:]
    else:
        centres = np.asarray(candidates, dtype=float).reshape(-1, x.shape[1])
    n = x.shape[0]
    hits = np.empty(centres.shape[0], dtype=np.int64)
    # Chunked so that n samples × m candidates never materialises more than ~16M distances.
    chunk = max(1, 16_000_000 // max(n * x.shape[1], 1))
    for start in range(0, centres.shape[0], chunk):
        diff = x[None, :, :] - centres[start : start + chunk, None, :]
        hits[start : start + chunk] = np.count_nonzero(
            np.linalg.norm(diff, ord=_NORM_ORDER[metric], axis=2) <= rho, axis=1
        )
    return _binomial(hits, n, confidence, candidates=centres.shape[0])


def _exact(value: float) -> BallEstimate:
    return BallEstimate(value, 0.0, value, 1.0, 0, "exact")


def _binomial(hits: npt.ArrayLike, n: int, confidence: float, candidates: int) -> BallEstimate:
    """Best-candidate proportion, its standard error, and a Bonferroni Clopper–Pearson upper bound."""
    if not (0 < confidence < 1):
        raise _validate.InvalidParameterError(f"must be in (0, 1), got {confidence!r}", "confidence")
    k = np.atleast_1d(np.asarray(hits))
    level = (1 - confidence) / candidates
    with np.errstate(invalid="ignore"):
        upper = np.where(k >= n, 1.0, stats.beta.ppf(1 - level, k + 1, np.maximum(n - k, 1)))
    best = int(k.max())
    p_hat = best / n
    return BallEstimate(
        estimate=p_hat,
        standard_error=math.sqrt(p_hat * (1 - p_hat) / n),
        upper=float(upper.max()),
        confidence=confidence,
        samples=n,
        method="monte-carlo",
    )
