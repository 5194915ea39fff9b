"""Trade-off functions and their conversions (docs/accounting.md; FDP paper Theorem 2, Proposition 1).

Convention (docs/accounting.md): the trade-off function of a null P and an alternative Q is
``T(P, Q)(α) = inf {β_φ : α_φ <= α}`` with ``α_φ = E_P[φ]`` and ``β_φ = 1 - E_Q[φ]``. Everything here
is a function of the type-I error α; the "power" ``1 - f(α)`` is carried separately wherever it is
the quantity of interest (the Theorem 4 bound is ``1 - f(Ball)``) so that it keeps full relative
precision when it is tiny.

Contents:

* closed forms: Gaussian DP ``G_μ``, composition of Gaussians, ``f_{ε,δ}``, the exact (ε, δ) profile
  of ``G_μ``, the GDP central-limit approximation (a labelled approximation, never a verdict);
* conversions: f → ε(δ) (Theorem 2), f → δ(ε), a privacy profile δ(ε) → f (docs/accounting.md's public-API
  route), insertion/deletion → replacement (Proposition 1, corrected, see
  :func:`replacement_from_insertion`);
* :class:`TradeoffCurve`, the piecewise-linear convex trade-off function that the PLD accountant
  (:mod:`fdp_audit.accounting.pld`) produces, with exact ε(δ), δ(ε) and inverse.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt
from scipy import optimize, stats

from fdp_audit.accounting import _validate

TradeoffFunction = Callable[[npt.ArrayLike], "float | np.ndarray"]

# Default α grid for conversions of closed-form (callable) trade-off functions: log-spaced down to
# 1e-300 because at δ ~ 1e-12 the supremum in Theorem 2 sits at α of the order of δ or below.
_DEFAULT_ALPHAS = np.concatenate([np.geomspace(1e-300, 1e-3, 30_000, endpoint=False), np.linspace(1e-3, 1, 10_001)])


# Below this, 1 - δ - f(α) from a callable f is dominated by rounding (see epsilon_from_tradeoff).
_NUMERATOR_FLOOR = 1e-12


def _scalar_or_array(value: np.ndarray, like: npt.ArrayLike) -> float | np.ndarray:
    return float(value) if np.ndim(like) == 0 else value


# --------------------------------------------------------------------------------------------------
# Closed forms
# --------------------------------------------------------------------------------------------------


def gaussian_tradeoff(alpha: npt.ArrayLike, mu: float) -> float | np.ndarray:
    """Gaussian DP: ``G_μ(α) = Φ(Φ^{-1}(1 - α) - μ) = T(N(0,1), N(μ,1))(α)`` (docs/accounting.md).

    ``Φ^{-1}(1 - α)`` is evaluated as the inverse survival function so that tiny α keep their value.

    Args:
        alpha: type-I errors α in [0, 1], one value or an array.
        mu: the GDP parameter μ >= 0.

    Returns:
        ``G_μ(α)``: a float for a scalar ``alpha``, else an array of its shape.

    Raises:
        InvalidParameterError: an α outside [0, 1], or μ negative or not finite.
    """
    a = _validate.unit_interval(alpha, "alpha")
    mu = _nonnegative(mu, "mu")
    return _scalar_or_array(stats.norm.cdf(stats.norm.isf(a) - mu), alpha)


def gaussian_power(alpha: npt.ArrayLike, mu: float) -> float | np.ndarray:
    """``1 - G_μ(α) = Φ(μ - Φ^{-1}(1 - α))``, computed without cancellation.

    Args:
        alpha: type-I errors α in [0, 1], one value or an array.
        mu: the GDP parameter μ >= 0.

    Returns:
        The power ``1 - G_μ(α)``: a float for a scalar ``alpha``, else an array of its shape.

    Raises:
        InvalidParameterError: an α outside [0, 1], or μ negative or not finite.
    """
    a = _validate.unit_interval(alpha, "alpha")
    mu = _nonnegative(mu, "mu")
    return _scalar_or_array(stats.norm.sf(stats.norm.isf(a) - mu), alpha)


def compose_gaussian(mus: Sequence[float]) -> float:
    """Composition of ``G_{μ_1}, …, G_{μ_T}`` is exactly ``G_{sqrt(Σ μ_t²)}`` (docs/accounting.md).

    Args:
        mus: the GDP parameters μ_t >= 0 of the composed mechanisms.

    Returns:
        The composed μ, ``sqrt(Σ μ_t²)`` (0 for no mechanism).

    Raises:
        InvalidParameterError: a μ_t negative or not finite.
    """
    return float(math.sqrt(sum(_nonnegative(m, "mu") ** 2 for m in mus)))


def gaussian_delta(epsilon: npt.ArrayLike, mu: float) -> float | np.ndarray:
    """Exact privacy profile of ``G_μ`` (Balle & Wang 2018; Dong et al. 2022, Corollary 2.13):
    ``δ(ε) = Φ(-ε/μ + μ/2) - e^ε Φ(-ε/μ - μ/2)``; the second term is formed in log space so that
    large ε do not overflow.

    Args:
        epsilon: ε >= 0 (+inf allowed), one value or an array.
        mu: the GDP parameter μ >= 0.

    Returns:
        δ(ε) in [0, 1] (0 at μ = 0 and at ε = +inf): a float for a scalar ``epsilon``, else an array of its shape.

    Raises:
        InvalidParameterError: a negative ε, or μ negative or not finite.
    """
    eps = _validate.epsilons(epsilon)
    mu = _nonnegative(mu, "mu")
    if mu == 0:
        return _scalar_or_array(np.zeros_like(eps), epsilon)
    with np.errstate(over="ignore", invalid="ignore"):
        first = stats.norm.cdf(-eps / mu + mu / 2)
        second = np.exp(eps + stats.norm.logcdf(-eps / mu - mu / 2))
        out = np.where(np.isinf(eps), 0.0, np.maximum(first - second, 0.0))
    return _scalar_or_array(out, epsilon)


def gaussian_epsilon(delta: float, mu: float) -> float:
    """Smallest ε >= 0 with ``gaussian_delta(ε, μ) <= δ`` (root of a decreasing function).

    Args:
        delta: δ in (0, 1).
        mu: the GDP parameter μ >= 0.

    Returns:
        ε(δ) of ``G_μ``, to a tolerance of 1e-12.

    Raises:
        InvalidParameterError: δ outside (0, 1), or μ negative or not finite.
    """
    delta = float(_validate.deltas(delta))
    mu = _nonnegative(mu, "mu")
    if gaussian_delta(0.0, mu) <= delta:
        return 0.0
    hi = max(1.0, mu * mu)
    while gaussian_delta(hi, mu) > delta:
        hi *= 2
    return float(optimize.brentq(lambda e: gaussian_delta(e, mu) - delta, 0.0, hi, xtol=1e-12, rtol=1e-12))


def eps_delta_tradeoff(alpha: npt.ArrayLike, epsilon: float, delta: float) -> float | np.ndarray:
    """``f_{ε,δ}(α) = max(0, 1 - δ - e^ε α, e^{-ε}(1 - δ - α))`` (docs/accounting.md): the trade-off function of
    (ε, δ)-DP for a symmetric neighbouring relation.

    Args:
        alpha: type-I errors α in [0, 1], one value or an array.
        epsilon: ε >= 0 (+inf allowed).
        delta: δ in [0, 1].

    Returns:
        ``f_{ε,δ}(α)``: a float for a scalar ``alpha``, else an array of its shape.

    Raises:
        InvalidParameterError: α or δ outside [0, 1], or a negative ε.
    """
    a = _validate.unit_interval(alpha, "alpha")
    eps = float(_validate.epsilons(epsilon))
    delta = float(_validate.unit_interval(delta, "delta"))
    with np.errstate(over="ignore", invalid="ignore"):
        steep = np.where(a == 0, 1 - delta, 1 - delta - math.exp(min(eps, 700.0)) * a)
    out = np.maximum.reduce([np.zeros_like(a), steep, math.exp(-eps) * (1 - delta - a)])
    return _scalar_or_array(out, alpha)


def gdp_clt_mu_approximation(noise_multiplier: float, sample_rate: float, steps: int) -> float:
    """APPROXIMATION, never for verdicts (docs/accounting.md): the GDP central-limit theorem of Bu et al. / Dong
    et al. says ``μ ≈ p · sqrt(T (e^{1/z²} - 1))`` for T Poisson-subsampled Gaussian steps. It
    understates leakage at small α (the true curve has heavier tails than ``G_μ``); reports show it
    only as a labelled comparison.

    Args:
        noise_multiplier: the noise multiplier z (noise standard deviation over the clip norm).
        sample_rate: the Poisson sampling rate p in (0, 1].
        steps: the number of steps T (>= 1).

    Returns:
        The approximate μ.

    Raises:
        InvalidParameterError: z, p or T out of range.
    """
    z = _validate.noise_multiplier(noise_multiplier)
    p = _validate.rate(sample_rate, "sample_rate")
    t = _validate.step_count(steps, "steps")
    return float(p * math.sqrt(t * math.expm1(1.0 / (z * z))))


# --------------------------------------------------------------------------------------------------
# Conversions
# --------------------------------------------------------------------------------------------------


def epsilon_from_tradeoff(f: TradeoffFunction, delta: float, alphas: npt.ArrayLike | None = None) -> float:
    """Theorem 2 (Dong et al.): an f-DP mechanism is (ε, δ)-DP with
    ``ε(δ) = sup_α log((1 - δ - f(α)) / α)`` (clipped at 0; +inf when ``f(0) < 1 - δ``).

    For a :class:`TradeoffCurve` the supremum is exact (attained at a vertex); for any other callable
    it is taken over ``alphas`` (default: a log grid down to 1e-300), a slight under-estimate of the
    supremum between grid points. A callable returns f, not 1 - f, so ``1 - δ - f(α)`` carries an
    absolute rounding error of about 1e-16: numerators below ``_NUMERATOR_FLOOR`` are ignored, since
    divided by a tiny α they would be noise. This limits callables to δ above about 1e-11.

    Args:
        f: the trade-off function: a :class:`TradeoffCurve` or a callable of α in [0, 1].
        delta: δ in (0, 1).
        alphas: the α grid for a callable, in [0, 1] (α = 0 is skipped); None for the default grid.

    Returns:
        ε(δ) >= 0 (+inf possible for a :class:`TradeoffCurve`).

    Raises:
        InvalidParameterError: δ outside (0, 1) or an α outside [0, 1].
    """
    if isinstance(f, TradeoffCurve):
        return f.epsilon(delta)
    delta = float(_validate.deltas(delta))
    a = _DEFAULT_ALPHAS if alphas is None else _validate.unit_interval(alphas, "alphas")
    a = a[a > 0]
    numerators = 1 - delta - np.asarray(f(a), dtype=float)
    trusted = numerators > _NUMERATOR_FLOOR
    best = float(np.max(numerators[trusted] / a[trusted], initial=0.0))
    return math.log(best) if best > 1 else 0.0


def delta_from_tradeoff(f: TradeoffFunction, epsilon: float, alphas: npt.ArrayLike | None = None) -> float:
    """Privacy profile of f: ``δ(ε) = sup_α (1 - f(α) - e^ε α)`` (the convex conjugate of f; for
    ``f = T(P, Q)`` this is the hockey-stick divergence ``H_{e^ε}(Q ‖ P)``). Exact for a
    :class:`TradeoffCurve`, over ``alphas`` otherwise.

    Args:
        f: the trade-off function: a :class:`TradeoffCurve` or a callable of α in [0, 1].
        epsilon: ε >= 0.
        alphas: the α grid for a callable, in [0, 1]; None for the default grid.

    Returns:
        δ(ε) in [0, 1].

    Raises:
        InvalidParameterError: a negative ε or an α outside [0, 1].
    """
    if isinstance(f, TradeoffCurve):
        return float(f.delta(epsilon))
    eps = float(_validate.epsilons(epsilon))
    a = _DEFAULT_ALPHAS if alphas is None else _validate.unit_interval(alphas, "alphas")
    with np.errstate(over="ignore", invalid="ignore"):
        values = 1 - np.asarray(f(a), dtype=float) - np.where(a == 0, 0.0, math.exp(min(eps, 700.0)) * a)
    return float(np.clip(np.max(values), 0.0, 1.0))


def tradeoff_from_profile(
    alpha: npt.ArrayLike, epsilons: npt.ArrayLike, deltas: npt.ArrayLike
) -> float | np.ndarray:
    """docs/accounting.md's public-API route from a privacy profile to f: ``f(α) = sup_ε f_{ε,δ(ε)}(α)`` over a
    grid of ε >= 0 with the *symmetric* profile δ(ε) (the maximum over both directions). The result
    is a valid, slightly conservative (lower) trade-off function; on a grid containing every
    privacy-loss value of a discrete PLD it is exact. :mod:`fdp_audit.accounting.pld` computes the same
    curve exactly from the PLD's probability mass function and uses this function as its cross-check.

    Args:
        alpha: type-I errors α in [0, 1], one value or an array.
        epsilons: the ε grid, 1-D, each >= 0.
        deltas: δ(ε) at each ε of the grid, same length, each in [0, 1].

    Returns:
        f(α): a float for a scalar ``alpha``, else an array of its shape.

    Raises:
        InvalidParameterError: a value out of range, or ``epsilons`` and ``deltas`` not 1-D of equal length.
    """
    a = _validate.unit_interval(alpha, "alpha")
    eps = _validate.epsilons(epsilons, "epsilons")
    dlt = _validate.unit_interval(deltas, "deltas")
    if eps.shape != dlt.shape or eps.ndim != 1:
        raise _validate.InvalidParameterError("epsilons and deltas must be 1-D arrays of equal length", "deltas")
    flat = a.ravel()
    out = np.zeros_like(flat)
    scale = np.exp(np.minimum(eps, 700.0))
    # Chunked so that a long ε grid times many α never builds a huge matrix.
    for start in range(0, flat.size, 256):
        x = flat[start : start + 256, None]
        lines = np.maximum(1 - dlt - scale * x, (1 - dlt - x) / scale)
        out[start : start + 256] = np.max(lines, axis=1, initial=0.0)
    return _scalar_or_array(out.reshape(a.shape), alpha)


def replacement_from_insertion(f: TradeoffFunction) -> TradeoffFunction:
    """Proposition 1: an f-DP_i^Ψ mechanism is f_r-DP_r^Ψ with ``f_r(α) = f(1 - f(α))``.

    The paper writes ``f∘f``; that is right for the *upper* function ``α ↦ 1 - f(α)`` used in its proof
    (``e^ε x + δ``), but not for the trade-off function itself: chaining ``T(M(S), sim) >= f`` and
    ``T(sim, M(S')) >= f`` gives ``T(M(S), M(S'))(α) >= f(1 - f(α))`` (the group-privacy composition of
    Dong et al.). Literal ``f∘f`` is wrong: for perfect privacy ``f(α) = 1 - α`` it gives ``α``, which
    is not even a trade-off function. Check: ``G_μ(1 - G_μ(α)) = G_{2μ}(α)``.

    Args:
        f: the insertion/deletion trade-off function, a callable of α in [0, 1].

    Returns:
        The replacement trade-off function ``α ↦ f(1 - f(α))``, vectorised like ``f``.
    """

    def f_replacement(alpha: npt.ArrayLike) -> float | np.ndarray:
        a = _validate.unit_interval(alpha, "alpha")
        inner = np.clip(1 - np.asarray(f(a), dtype=float), 0.0, 1.0)
        return _scalar_or_array(np.asarray(f(inner), dtype=float), alpha)

    return f_replacement


def _nonnegative(value: float, field: str) -> float:
    value = float(value)
    if not (math.isfinite(value) and value >= 0):
        raise _validate.InvalidParameterError(f"must be a finite number >= 0, got {value!r}", field=field)
    return value


# --------------------------------------------------------------------------------------------------
# Piecewise-linear trade-off curves
# --------------------------------------------------------------------------------------------------


class TradeoffCurve:
    """A convex, piecewise-linear trade-off function given by its vertices.

    ``alpha`` (ascending, from 0 to 1) and ``power`` = ``1 - f`` at those vertices. The PLD accountant
    builds these from a discretised privacy-loss distribution (the Neyman–Pearson curve of the
    discrete dominating pair, :mod:`fdp_audit.accounting.pld`); closed cases use
    :meth:`perfect_privacy` and :meth:`no_privacy`.

    The constructor repairs only the ends, which is where a discretised PLD can be off by rounding:
    it clips ``power`` to [0, 1], drops vertices beyond α = 1, merges vertices with equal α (keeping
    the larger power, i.e. the smaller, conservative f) and joins the curve to ``f(1) = 0`` along the
    tangent from (1, 0), so the result stays convex and satisfies ``f(α) <= 1 - α``. Convexity of the
    interior is the caller's responsibility.
    """

    __slots__ = ("alpha", "power", "_slopes")

    def __init__(self, alpha: npt.ArrayLike, power: npt.ArrayLike):
        a = np.asarray(alpha, dtype=float).ravel()
        pw = np.asarray(power, dtype=float).ravel()
        if a.shape != pw.shape or a.size == 0 or np.isnan(a).any() or np.isnan(pw).any():
            raise ValueError("alpha and power must be non-empty arrays of equal length without NaN")
        if np.any(np.diff(a) < 0):
            order = np.argsort(a, kind="stable")
            a, pw = a[order], pw[order]
        if a[0] != 0:
            raise ValueError("the first vertex must be at alpha = 0")
        pw = np.clip(pw, 0.0, 1.0)
        keep = a < 1
        a, pw = a[keep], pw[keep]
        # Equal α (a vertical step of the discretised curve): keep the largest power of the run.
        starts = np.flatnonzero(np.append(True, a[1:] != a[:-1]))
        a, pw = a[starts], np.maximum.reduceat(pw, starts)
        # Tangent from (1, power 1): the vertex minimising (1 - power) / (1 - α) is where the upper
        # concave hull of the vertices and (1, 1) leaves the curve.
        k = int(np.argmin((1 - pw) / (1 - a)))
        self.alpha = np.append(a[: k + 1], 1.0)
        self.power = np.append(pw[: k + 1], 1.0)
        self.alpha.setflags(write=False)
        self.power.setflags(write=False)
        self._slopes: np.ndarray | None = None

    @classmethod
    def perfect_privacy(cls) -> TradeoffCurve:
        """``f(α) = 1 - α``: (0, 0)-DP, e.g. a mechanism that never reads the private features.

        Returns:
            The two-vertex curve from (0, power 0) to (1, power 1).
        """
        return cls([0.0, 1.0], [0.0, 1.0])

    @classmethod
    def no_privacy(cls) -> TradeoffCurve:
        """``f ≡ 0``: the two hypotheses are perfectly distinguishable (ε = ∞).

        Returns:
            The curve with power 1 at every α.
        """
        return cls([0.0, 1.0], [1.0, 1.0])

    def __repr__(self) -> str:
        return f"TradeoffCurve({self.alpha.size} vertices, f(0)={1 - self.power[0]:.6g})"

    def __call__(self, alpha: npt.ArrayLike) -> float | np.ndarray:
        """``f(α)``, vectorised, by linear interpolation between vertices."""
        a = _validate.unit_interval(alpha, "alpha")
        out = np.clip(1 - np.interp(a, self.alpha, self.power), 0.0, 1 - a)
        return _scalar_or_array(out, alpha)

    def power_at(self, alpha: npt.ArrayLike) -> float | np.ndarray:
        """``1 - f(α)`` without the cancellation of ``1 - f`` when it is tiny.

        Args:
            alpha: type-I errors α in [0, 1], one value or an array.

        Returns:
            The power, linearly interpolated between vertices and clipped to [α, 1]: a float for a scalar ``alpha``,
            else an array of its shape.

        Raises:
            InvalidParameterError: an α outside [0, 1].
        """
        a = _validate.unit_interval(alpha, "alpha")
        out = np.clip(np.interp(a, self.alpha, self.power), a, 1.0)
        return _scalar_or_array(out, alpha)

    def epsilon(self, delta: npt.ArrayLike) -> float | np.ndarray:
        """Theorem 2, exactly: ``ε(δ) = max(0, sup_α log((power(α) - δ) / α))``. On a segment the ratio
        ``(a + bα)/α`` is monotone, so the supremum is attained at a vertex; ``+inf`` when
        ``f(0) < 1 - δ`` (a privacy-loss atom at +∞ heavier than δ).

        Args:
            delta: δ in (0, 1), one value or an array.

        Returns:
            ε(δ) >= 0: a float for a scalar ``delta``, else an array of its shape.

        Raises:
            InvalidParameterError: a δ outside (0, 1).
        """
        d = _validate.deltas(delta)
        a, pw = self.alpha[1:], self.power[1:]
        out = np.empty(d.size)
        for i, di in enumerate(d.ravel()):
            if self.power[0] > di * (1 + 1e-9):  # tolerance: power(0) = δ exactly, up to rounding
                out[i] = math.inf
                continue
            best = float(np.max((pw - di) / a))
            out[i] = math.log(best) if best > 1 else 0.0
        return _scalar_or_array(out.reshape(d.shape), delta)

    def delta(self, epsilon: npt.ArrayLike) -> float | np.ndarray:
        """Privacy profile ``δ(ε) = max_vertices (power - e^ε α)`` (the conjugate of f, exact).

        Vectorised: the maximising vertex is where the segment slopes (``e^{loss}`` for a PLD curve)
        fall below ``e^ε``, found by binary search; its neighbours are checked too, which absorbs
        rounding in slopes of very short segments.

        Args:
            epsilon: ε >= 0 (+inf allowed), one value or an array.

        Returns:
            δ(ε) in [0, 1]: a float for a scalar ``epsilon``, else an array of its shape.

        Raises:
            InvalidParameterError: a negative ε.
        """
        eps = _validate.epsilons(epsilon)
        slopes = self._segment_slopes()
        with np.errstate(over="ignore"):
            t = np.exp(eps.ravel())
        k = np.searchsorted(-slopes, -t, side="left")
        candidates = np.clip(k[:, None] + np.array([-1, 0, 1]), 0, self.alpha.size - 1)
        a, pw = self.alpha[candidates], self.power[candidates]
        with np.errstate(invalid="ignore"):
            values = np.where(a == 0, pw, pw - t[:, None] * a)
        out = np.clip(values.max(axis=1), 0.0, 1.0)
        return _scalar_or_array(out.reshape(eps.shape), epsilon)

    def inverse(self) -> TradeoffCurve:
        """``f^{-1}``: the trade-off function of the swapped pair, ``T(Q, P) = T(P, Q)^{-1}``.

        Returns:
            A new curve: this one reflected about the diagonal ``f = α`` (each vertex's α and f swap).
        """
        return TradeoffCurve((1 - self.power)[::-1], (1 - self.alpha)[::-1])

    def _segment_slopes(self) -> np.ndarray:
        if self._slopes is None:
            # Non-increasing for a convex f; rounding in very short segments can break that slightly,
            # and the binary search in delta() needs it sorted.
            self._slopes = np.minimum.accumulate(np.diff(self.power) / np.diff(self.alpha))
        return self._slopes
