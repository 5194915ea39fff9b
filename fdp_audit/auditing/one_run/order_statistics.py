"""The order-statistics analysis of a one-run audit that releases only its r most confident guesses: Xiang, Wang,
Xiao, Tian & Wang, "Tight Privacy Audit in One Run" (arXiv:2509.08704, the tail of the number of wrong released
guesses by the order statistics of the per-canary scores). It tests the whole ranking through one count of
*wrong* guesses, with the distribution of that count computed exactly, not bounded by a recursion.

**What it assumes.** Canary i's secret ``S_i`` is uniform on {0, 1} and reaches the release only through its own
channel ``Y_i``, the ``Y_i`` independent given the secrets, each with trade-off curve at least the claimed f
(every other part of the release independent of the secrets). DP-SGD with gradient canaries is such a mechanism:
each canary moves only its own coordinate, by independent Poisson sampling, under independent Gaussian noise, so
``Y_i`` is the one-record composed subsampled Gaussian mechanism whose curve the PLD accountant bounds. A
mechanism that satisfies f for every canary but correlates them (the flagged mechanism of
:mod:`fdp_audit.auditing.one_run.ceiling`) is outside this null: the test may reject it, and does
(docs/one_run.md); the count test of :mod:`fdp_audit.auditing.one_run.analysis` holds for it. So this is the
*conformance* test of a one-run verdict (:mod:`fdp_audit.auditing.one_run.evaluation`): its null is that the
training behaves as the claimed DP-SGD, and it judges gradient canaries only, whose contribution in the built-in
engine and in the user-loop canary head is a fixed clipped value on a coordinate of their own (docs/one_run.md,
"Are the canaries independent?").

**Why the tail below bounds every auditor.** Let ``(P, Q)`` be the canonical pair of f (the privacy-loss
distribution of the curve's segments, :func:`fdp_audit.auditing.one_run.ceiling.loss_distribution`). A binary
experiment with curve at least f is a garbling of ``(P, Q)`` (Blackwell), so the release is a post-processing,
with randomness independent across canaries, of n independent canonical outputs ``X_i ~ P`` or ``Q`` by ``S_i``.
Given the X's (and so given the whole release: its other parts and the auditor's own randomness add no
information on the secrets) the secrets are independent a posteriori, and guessing canary i wrongly has
probability at least ``γ(X_i) = 1/(1 + e^{|L(X_i)|})`` (L the privacy loss), with equality for the likelier value.
For any auditor that releases r guesses — chosen and ranked by any function of the whole release, e.g. a noise
scale read off null coordinates or a rate fitted over all canaries — the number T of wrong ones is, given the X's,
a sum of independent Bernoullis whose probabilities are at least the r smallest ``γ(X_i)``; so ``P[T <= u]`` is
largest for the auditor that releases the r canaries of smallest ``γ`` with their likelier values, whatever u. For
that auditor write each canary's
outcome in quantile coordinates ``w ∈ [0, 1]`` of the mixture ``(P + Q)/2``, sorted by decreasing ``γ`` (ties
broken uniformly, which changes nothing): the n quantiles are independent uniforms, the (r+1)-th largest, the
*cut*, is ``Beta(n - r, r + 1)``, and given the cut at w the r released are independent uniforms on ``(w, 1]``,
each wrong with probability ``γ̄(w) = ∫_w^1 γ / (1 - w)``. Hence, for every mechanism of the null and every
auditor (Xiang et al.'s tail, their Theorem 2):

    P[T <= u]  <=  ∫_0^1 Beta(n - r, r + 1)(w) · P[Binomial(r, γ̄(w)) <= u] dw,

an equality for the canonical mechanism itself (a claimed DP-SGD whose noise, rate and clip norm are as claimed,
guessed by the Neyman–Pearson ranking). ``γ̄`` does not increase with w, so the integrand does not decrease, and
the upper Riemann sum over :data:`CUT_BINS` equal-probability bins of the cut is an upper bound on the integral
(it exceeds it by at most ``1/CUT_BINS``): the p-value computed is never below the true one. With ``r = n`` there
is no cut and T is ``Binomial(n, γ̄(0))``.

Rejecting when ``T <= u`` at a count u whose bound is at most α is a test of level α for a fixed r. The number of
released guesses is therefore fixed from the claim before anything is seen (:func:`designed_release_count`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy import stats

from fdp_audit.accounting.tradeoff import TradeoffCurve
from fdp_audit.auditing.one_run.ceiling import loss_distribution

CUT_BINS = 20_000
RELEASE_POINTS = 40  # candidate release counts, geometric between MIN_RELEASED and m
MIN_RELEASED = 8
FAMILY_POINTS = 24
FAMILY_SPAN = 3.0  # the design's family grid reaches claims with 1/z a third of the claimed one


@dataclass(frozen=True)
class ErrorProfile:
    """A canonical pair's per-outcome error of the likelier guess in quantile coordinates of the mixture
    ``(P + Q)/2``, outcomes sorted from least to most confident: outcome j fills ``(upper[j-1], upper[j]]``, is
    guessed wrongly with probability ``gamma[j]`` (non-increasing), and ``above[j]`` is the error mass of the
    outcomes after it."""

    upper: np.ndarray
    gamma: np.ndarray
    above: np.ndarray

    def mean_error_above(self, w: np.ndarray) -> np.ndarray:
        """``γ̄(w) = ∫_w^1 γ / (1 - w)``: the error rate of an outcome drawn above quantile w.

        Args:
            w: quantiles in [0, 1] (any shape).

        Returns:
            ``γ̄`` at each (at w = 1, ``γ`` of the most confident outcome).
        """
        w = np.clip(np.asarray(w, dtype=float), 0.0, 1.0)
        j = np.minimum(np.searchsorted(self.upper, w, side="right"), len(self.gamma) - 1)
        mass = self.gamma[j] * np.maximum(self.upper[j] - w, 0.0) + self.above[j]
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(w < 1.0, np.minimum(mass / (1.0 - w), 0.5), self.gamma[-1])


def error_profile(curve: TradeoffCurve) -> ErrorProfile:
    """The :class:`ErrorProfile` of the canonical pair of a piecewise-linear trade-off curve (a segment of the curve
    is an outcome with null mass ``Δα`` and alternative mass ``Δpower``; the power at α = 0 is an outcome only the
    alternative has, never guessed wrongly).

    Args:
        curve: the claimed trade-off curve (a pessimistic PLD's: its canonical pair dominates the mechanism's).

    Returns:
        The profile.
    """
    _, null, alternative = loss_distribution(curve)
    # loss_distribution normalises; the curve's masses already sum to one, up to rounding.
    mixture = (null + alternative) / 2.0
    total = null + alternative
    gamma = np.divide(np.minimum(null, alternative), total, out=np.zeros_like(total), where=total > 0)
    order = np.argsort(-gamma, kind="stable")
    gamma, mixture = gamma[order], mixture[order]
    upper = np.cumsum(mixture)
    upper /= upper[-1]
    errors = gamma * np.diff(np.concatenate([[0.0], upper]))
    above = np.concatenate([np.cumsum(errors[::-1])[::-1][1:], [0.0]])
    return ErrorProfile(upper, gamma, above)


def _check(m: int, released: int, errors: int) -> None:
    if not 0 <= errors <= released <= m or released < 1:
        raise ValueError(f"need 0 <= errors <= released <= m and released >= 1 (m={m}, released={released}, "
                         f"errors={errors})")


@lru_cache(maxsize=64)
def _cut_quantiles(m: int, released: int) -> np.ndarray:
    """The upper ends of :data:`CUT_BINS` equal-probability bins of the cut ``Beta(m - r, r + 1)``."""
    return stats.beta.ppf(np.arange(1, CUT_BINS + 1) / CUT_BINS, m - released, released + 1)


def wrong_guess_p_value(profile: ErrorProfile, m: int, released: int, errors: int) -> float:
    """An upper bound on ``P[T <= errors]``, T the wrong guesses among ``released`` of m canaries, for every
    mechanism of the null that satisfies the curve of ``profile`` (module doc).

    Args:
        profile: the claimed curve's :class:`ErrorProfile`.
        m: canaries.
        released: guesses released, the most confident, fixed before the release is seen.
        errors: wrong guesses among them.

    Returns:
        The p-value of the claim (never below the exact tail; at most ``1/CUT_BINS`` above it).
    """
    _check(m, released, errors)
    if released == m:
        return float(stats.binom.cdf(errors, m, profile.mean_error_above(np.array(0.0))))
    rate = profile.mean_error_above(_cut_quantiles(m, released))
    return min(1.0, float(np.mean(stats.binom.cdf(errors, released, rate))))


def critical_errors(profile: ErrorProfile, m: int, released: int, alpha: float) -> int:
    """The largest number of wrong guesses among ``released`` that rejects the claim at level α.

    Args:
        profile: the claimed curve's :class:`ErrorProfile`.
        m: canaries.
        released: guesses released.
        alpha: the level.

    Returns:
        That count; -1 if not even ``released`` right guesses reject the claim.
    """
    _check(m, released, 0)
    low, high = -1, released + 1  # wrong_guess_p_value(low) <= α < wrong_guess_p_value(high), ends virtual
    while high - low > 1:
        middle = (low + high) // 2
        if wrong_guess_p_value(profile, m, released, middle) <= alpha:
            low = middle
        else:
            high = middle
    return low


def _weakest_rejected_index(profiles: Callable[[float], ErrorProfile], parameters: np.ndarray, m: int, released: int,
                       errors: int, alpha: float) -> int:
    """Index of the weakest claim of the ascending family grid ``parameters`` that ``errors`` wrong of ``released``
    reject (-1 if none; rejection is monotone along a family whose weaker claims err less)."""
    low, high = -1, len(parameters)
    while high - low > 1:
        middle = (low + high) // 2
        if wrong_guess_p_value(profiles(float(parameters[middle])), m, released, errors) <= alpha:
            low = middle
        else:
            high = middle
    return low


def family_parameter(profiles: Callable[[float], ErrorProfile], start: float, limit: float, m: int, released: int,
                     errors: int, alpha: float, tolerance: float) -> float:
    """The largest family parameter (weaker as it grows, up to ``limit``) whose claim ``errors`` wrong of
    ``released`` reject at level α, by doubling from ``start`` and bisection (rejection is monotone along a
    family whose weaker claims err less).

    Args:
        profiles: each claim's :class:`ErrorProfile` by its parameter (0: perfect privacy).
        start: the claimed parameter, where the doubling starts.
        limit: the weakest claim searched; a rejection there is reported as ``limit``.
        m: canaries.
        released: guesses released.
        errors: wrong guesses among them.
        alpha: the level.
        tolerance: relative, on the parameter.

    Returns:
        The parameter (a rejected one, within ``tolerance`` of the boundary); 0 if even the perfectly private
        claim is not rejected.
    """
    _check(m, released, errors)

    def rejects(parameter: float) -> bool:
        return wrong_guess_p_value(profiles(parameter), m, released, errors) <= alpha

    if not rejects(0.0):
        return 0.0
    low, high = 0.0, start
    while rejects(high):
        if high >= limit:
            return limit
        low, high = high, min(2.0 * high, limit)
    while high - low > tolerance * max(high, 1e-12):
        middle = 0.5 * (low + high)
        low, high = (middle, high) if rejects(middle) else (low, middle)
    return low


def median_errors(profile: ErrorProfile, m: int, released: int) -> int:
    """The median number of wrong guesses among the ``released`` most confident of m canaries of the canonical pair
    (the claimed mechanism guessed by its Neyman–Pearson ranking).

    Args:
        profile: the claimed curve's :class:`ErrorProfile`.
        m: canaries.
        released: guesses released.

    Returns:
        The smallest u with ``P[T <= u] >= ½``.
    """
    low, high = -1, released  # P[T <= low] < ½ <= P[T <= high]
    while high - low > 1:
        middle = (low + high) // 2
        if wrong_guess_p_value(profile, m, released, middle) >= 0.5:
            high = middle
        else:
            low = middle
    return high


def _candidate_releases(m: int) -> np.ndarray:
    """The geometric grid of release counts the design chooses from."""
    return np.unique(np.geomspace(min(MIN_RELEASED, m), m, RELEASE_POINTS).astype(int))


def designed_release_count(profiles: Callable[[float], ErrorProfile], start: float, m: int, alpha: float) -> int:
    """The number of most confident guesses to release, fixed from the claim (family parameter ``start``) before
    anything is seen: the count at which the claimed mechanism's median wrong guesses (:func:`median_errors`)
    would reject the weakest claim of the family grid (from ``start / FAMILY_SPAN`` to ``start``); the middle of
    the counts that tie (the optimum is flat). Nothing of the release enters, so every count it gives is a valid
    test.

    Args:
        profiles: each claim's :class:`ErrorProfile` by its family parameter (larger is weaker).
        start: the claimed parameter.
        m: canaries.
        alpha: the level the test will run at.

    Returns:
        The release count, between 1 and m (m when no count would reject even the strongest claim of the grid).
    """
    claimed = profiles(start)
    parameters = np.geomspace(start / FAMILY_SPAN, start, FAMILY_POINTS)
    counts = _candidate_releases(m)
    reach = np.array([_weakest_rejected_index(profiles, parameters, m, int(r), median_errors(claimed, m, int(r)), alpha)
                      for r in counts])
    if reach.max() < 0:
        return m
    best = np.flatnonzero(reach == reach.max())
    return int(counts[best[len(best) // 2]])
