"""Statistics of a one-run audit: from (canaries, guesses, correct guesses) to a test of a privacy claim and an
empirical ε.

The game (both papers below). ``m`` canaries are inserted in one training; canary i carries an independent secret
``S_i`` drawn uniformly from ``k`` values (membership: included or not, ``k = 2``; a protected value from a
uniform ``k``-value prior with Ψ fixed, for FDP). After the training the auditor guesses the secret of ``c``
canaries of its choice and abstains on the others; ``c'`` guesses are correct. The mechanism is private with
respect to each canary's secret with the other canaries fixed, which is the per-record guarantee of the
accountant (add/remove for inclusion, replace-one for a protected value).

**(ε, δ) analysis** — Steinke, Nasr & Jagielski, "Privacy Auditing with One (1) Training Run", NeurIPS 2023
(arXiv:2305.08846, main theorem, Theorem 3; ``k = 2``). If the mechanism is (ε, δ)-DP, the number W of correct
guesses among at most ``c`` satisfies, for every v,

    P[W >= v] <= β(v) + 2 m δ · max_{1 <= i <= v} (β(v - i) - β(v)) / i,   β(v) = P[Binomial(c, q) >= v],

with ``q = e^ε / (1 + e^ε)`` (randomized response is the extremal mechanism). The paper takes the maximum over
i in [m]; for i >= v, β(v - i) = 1, so the ratio (1 - β(v)) / i is largest at i = v and the maximum over 1 … v
is the same number. With δ = 0 the count of correct guesses is stochastically dominated by Binomial(c, q).
This right-hand side is the p-value of the claim (:func:`steinke_p_value`); the empirical ε is the largest ε whose
claim (ε, δ) is rejected at level α (:func:`steinke_epsilon`).

**f-DP analysis** — Mahloujifar, Melis & Chaudhuri, "Auditing f-Differential Privacy in One Run", ICML 2025
(arXiv:2410.22235; the reconstruction game with k candidates and abstention, and its numerical procedure,
which the paper's appendix states as ``audit_rh_with_cap``). Write ``f̄(α) = 1 - f(α)`` for the *power* of the
claimed trade-off curve (the largest probability under one neighbour of an event of probability α under the
other) and ``f̄⁻¹(y) = inf{α : f̄(α) >= y}``. Starting from the hypothesis that the event "at least ``c'`` of
``c`` guesses are correct" has probability τ, set

    r_{c'} = τ c' / m,   h_{c'} = τ (c - c') / m,
    h_i = max(h_{i+1}, (k - 1) f̄⁻¹(r_{i+1})),   r_i = min(1, r_{i+1} + i / (c - i) · (h_i - h_{i+1})),   i = c'-1 … 0.

An f-DP mechanism can reach that event with probability τ only if ``r_0 + h_0 <= c / m``; if the recursion ends
above ``c / m`` the event has probability below τ under the claim, so observing it rejects the claimed f at
level τ (:func:`fdp_rejects`; :func:`critical_count` runs it for every starting count at once and returns the
smallest rejecting one). The test uses the whole curve, not one (ε, δ) point, which is why it is tighter
than the (ε, δ) analysis for Gaussian mechanisms. For ``f = f_{ε,0}``, ``k = 2`` the two analyses agree within
about 1 % in ε (the f-DP recursion being the more conservative) once ε is near 1 or above; nearer 0 the relative
gap grows (0.038 against 0.052 at 60 of 100 guesses) but stayed below 0.02 in ε for c = 20 … 500 at α = 0.05
(a known-answer test checks the agreement).

*Why the recursion holds for any mechanism satisfying f* (k = 2, then k candidates). Let the
auditor make exactly c guesses, a function of the release Y, and let ``X_i`` / ``Z_i`` say that canary i was
guessed rightly / wrongly, ``W = Σ X_i``. Fix canary i and every other secret ``s_{-i}``; then the count of right
guesses among the *other* canaries, ``W_{-i}``, is a function of Y, so for any count v the events
``A_b = {i guessed b, W_{-i} >= v - 1}`` (b = 0, 1) are post-processings of the release. f-DP bounds each:
``P_1(A_1) <= f̄(P_0(A_1))`` and ``P_0(A_0) <= f̄(P_1(A_0))``, so with a uniform secret and f̄ concave,
``P[X_i = 1, W_{-i} >= v - 1] <= f̄(P[Z_i = 1, W_{-i} >= v - 1])``, and the same after averaging over
``s_{-i}`` (concavity again). On ``X_i = 1``, ``W_{-i} >= v - 1`` is ``W >= v``; on ``Z_i = 1`` it is ``W >= v - 1``.
Summing over the m canaries and using concavity once more,

    E[W; W >= v] / m  <=  f̄( E[c - W; W >= v - 1] / m ).

With ``r_v = E[W; W >= v]/m`` and ``h_v = E[c - W; W >= v]/m``, going from v to v - 1 adds the mass
``P[W = v - 1]``, which raises r by ``(v - 1)/(c - v + 1)`` times what it raises h: exactly the recursion, whose
``h_{v-1} = max(h_v, f̄⁻¹(r_v))`` adds the least mass the inequality allows. Start from
``P[W >= c'] = τ`` held at exactly c' right (``r = τc'/m``, ``h = τ(c - c')/m``; Mahloujifar et al. show this
start is the extremal one): the recursion's ``r_0 + h_0`` is then the least value of ``E[W + (c - W)]/m`` any
mechanism satisfying f can have, and that expectation is exactly c/m, so a recursion ending above c/m rules
the event's probability τ out. For k candidates the
wrong guesses spread over k - 1 other values and the lemma reads ``(k - 1) f̄⁻¹``. How close to optimal this is:
the flagged mechanism of :mod:`fdp_audit.auditing.one_run.ceiling`, which satisfies f, reaches counts within 3 % of
the recursion's critical ones with probability above α, so no valid analysis of the same count can do much
better.

**Empirical ε in the claimed family.** A one-run audit that rejects a claim also rejects every *stronger* claim
of the same family (smaller μ for μ-GDP, a larger noise multiplier for the same subsampled Gaussian mechanism, a
smaller ε at fixed δ); the empirical ε is the ε(δ) of the weakest claim the data reject at level α
(:func:`family_epsilon`). That is a statement inside the family — the assumption is stated beside the number —
while the Steinke ε needs no family.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy import special, stats

from fdp_audit.accounting.tradeoff import TradeoffCurve, gaussian_epsilon
from fdp_audit.auditing.one_run.order_statistics import ErrorProfile

InversePower = Callable[[npt.ArrayLike], "float | np.ndarray"]  # y ↦ f̄⁻¹(y), non-decreasing on [0, 1]


def _check_counts(m: int, guesses: int, correct: int) -> None:
    if not 0 <= correct <= guesses <= m or m < 1:
        raise ValueError(f"need 0 <= correct <= guesses <= m, m >= 1 (m={m}, guesses={guesses}, correct={correct})")


# -- (ε, δ): Steinke, Nasr & Jagielski ---------------------------------------------------------------------------

def steinke_p_value(m: int, guesses: int, correct: int, epsilon: float, delta: float) -> float:
    """Upper bound on ``P[W >= correct]`` for an (ε, δ)-DP mechanism (Theorem 3 of Steinke et al.; module doc).

    Args:
        m: the number of canaries in the training.
        guesses: the number c of canaries guessed (the others abstained on).
        correct: the number c' of correct guesses.
        epsilon: the claimed ε.
        delta: the claimed δ.

    Returns:
        The p-value of the claim "(ε, δ)-DP", capped at 1.

    Raises:
        ValueError: unless 0 ≤ correct ≤ guesses ≤ m and m ≥ 1.
    """
    _check_counts(m, guesses, correct)
    q = 1.0 / (1.0 + math.exp(-epsilon))
    tail = float(stats.binom.sf(correct - 1, guesses, q))
    if delta == 0 or correct == 0:
        return min(1.0, tail)
    below = np.arange(1, correct + 1)
    between = stats.binom.sf(correct - below - 1, guesses, q) - tail  # P[correct - i <= W < correct]
    return min(1.0, tail + 2.0 * m * delta * float(np.max(between / below)))


def _largest_rejected(rejects: Callable[[float], bool], low: float, high: float, tolerance: float,
                      limit: float = 1e6) -> float:
    """The supremum of the parameters in [low, limit] that ``rejects`` (monotone: true below a point, false above),
    by doubling from ``high`` and then bisection; ``low`` when even ``low`` is not rejected, ``limit`` when
    ``limit`` is."""
    if not rejects(low):
        return low
    while rejects(high):
        if high >= limit:
            return limit
        low, high = high, min(2.0 * high, limit)
    while high - low > tolerance * max(1.0, low):
        middle = 0.5 * (low + high)
        low, high = (middle, high) if rejects(middle) else (low, middle)
    return low


def steinke_epsilon(m: int, guesses: int, correct: int, delta: float, alpha: float) -> float:
    """The largest ε such that "(ε, δ)-DP" is rejected at level α: ``sup{ε : p(ε) <= α}`` (0 if none).

    Args:
        m: the number of canaries in the training.
        guesses: the number c of canaries guessed (the others abstained on).
        correct: the number c' of correct guesses.
        delta: the δ of the claims.
        alpha: the level α of the test.

    Returns:
        The empirical ε, the rejected end of a bracket of width at most 1e-6·max(1, ε) (1e6, the search's end,
        if every ε up to it is rejected).

    Raises:
        ValueError: unless 0 ≤ correct ≤ guesses ≤ m and m ≥ 1.
    """
    _check_counts(m, guesses, correct)
    if guesses == 0:
        return 0.0
    return _largest_rejected(lambda e: steinke_p_value(m, guesses, correct, e, delta) <= alpha, 0.0, 1.0, 1e-6)


# -- f-DP: Mahloujifar, Melis & Chaudhuri -------------------------------------------------------------------------

def _as_input(y: npt.ArrayLike) -> tuple[np.ndarray, bool]:
    array = np.asarray(y, dtype=float)
    return array, array.ndim == 0


def gaussian_inverse_power(mu: float) -> InversePower:
    """``f̄⁻¹`` of μ-GDP: ``1 - G_μ(α) = Φ(Φ⁻¹(α) + μ)``, so ``f̄⁻¹(y) = Φ(Φ⁻¹(y) - μ)`` (vectorised, as every
    ``f̄⁻¹`` here).

    Args:
        mu: the GDP parameter μ ≥ 0 (``inf``: no privacy, f̄⁻¹ ≡ 0).

    Returns:
        ``f̄⁻¹`` as a function of y in [0, 1], scalar or array.
    """

    def inverse(y: npt.ArrayLike) -> float | np.ndarray:
        array, scalar = _as_input(y)
        with np.errstate(divide="ignore"):
            out = np.zeros_like(array) if mu == math.inf else special.ndtr(special.ndtri(np.clip(array, 0, 1)) - mu)
        return float(out) if scalar else out

    return inverse


def eps_delta_inverse_power(epsilon: float, delta: float) -> InversePower:
    """``f̄⁻¹`` of (ε, δ)-DP: ``f̄(α) = min(1, δ + e^ε α, 1 - e^{-ε}(1 - δ - α))``, the minimum of increasing
    lines, so its inverse is the maximum of theirs: ``max(0, (y - δ) e^{-ε}, 1 - δ - e^ε (1 - y))``.

    Args:
        epsilon: the claimed ε ≥ 0.
        delta: the claimed δ in [0, 1].

    Returns:
        ``f̄⁻¹`` as a function of y in [0, 1], scalar or array.
    """
    scale = math.exp(-epsilon)

    def inverse(y: npt.ArrayLike) -> float | np.ndarray:
        array, scalar = _as_input(y)
        out = np.maximum(0.0, np.maximum((array - delta) * scale, 1.0 - delta - (1.0 - array) / scale))
        return float(out) if scalar else out

    return inverse


def curve_inverse_power(curve: TradeoffCurve) -> InversePower:
    """``f̄⁻¹`` of a piecewise-linear curve (the PLD accountant's): invert its power ``1 - f`` by interpolation
    (the power is non-decreasing; a flat run returns its smallest α, the infimum).

    Args:
        curve: the claimed trade-off curve (its vertices' α and power ``1 − β``).

    Returns:
        ``f̄⁻¹`` as a function of y in [0, 1], scalar or array (0 up to the power at the curve's first vertex).
    """
    power, alpha = np.asarray(curve.power), np.asarray(curve.alpha)
    # np.interp needs increasing abscissae: keep the first vertex of each run of equal power (the infimum).
    keep = np.append(True, np.diff(power) > 0)
    power, alpha = power[keep], alpha[keep]

    def inverse(y: npt.ArrayLike) -> float | np.ndarray:
        array, scalar = _as_input(y)
        out = np.where(array <= power[0], 0.0, np.interp(array, power, alpha))
        return float(out) if scalar else out

    return inverse


def fdp_statistic(inverse_power: InversePower, m: int, guesses: int, correct: int, k: int, alpha: float) -> float:
    """``r_0 + h_0 - c/m`` of the recursion in the module doc at τ = α: positive means the claim is rejected.

    Args:
        inverse_power: the claim's ``f̄⁻¹``.
        m: the number of canaries in the training.
        guesses: the number c of canaries guessed (the others abstained on).
        correct: the number c' of correct guesses.
        k: the number of values a canary's secret takes (2 for membership).
        alpha: the level α of the test (the τ the recursion starts from).

    Returns:
        The statistic (−1 when no guess was made).

    Raises:
        ValueError: unless 0 ≤ correct ≤ guesses ≤ m, m ≥ 1 and k ≥ 2.
    """
    _check_counts(m, guesses, correct)
    if k < 2:
        raise ValueError("k must be >= 2")
    if guesses == 0:
        return -1.0
    r = alpha * correct / m
    h = alpha * (guesses - correct) / m
    for i in range(correct - 1, -1, -1):
        h_next = max(h, (k - 1) * inverse_power(r))
        if h_next == h:  # a fixed point: neither r nor h changes again
            break
        r = min(1.0, r + i / (guesses - i) * (h_next - h))
        h = h_next
    return r + h - guesses / m


def critical_count(inverse_power: InversePower, m: int, guesses: int, k: int, alpha: float) -> int:
    """The smallest number of correct guesses among ``guesses`` that rejects the claimed f at level α
    (``guesses + 1`` when none does): the recursion of the module doc run for every starting count at once.

    Rejecting whenever ``W >= critical_count`` is a test of level α because the recursion rejects that count:
    ``P[W >= v] <= α`` for the smallest rejecting v whatever happens above it.

    Args:
        inverse_power: the claim's ``f̄⁻¹``.
        m: the number of canaries in the training.
        guesses: the number c of canaries guessed.
        k: the number of values a canary's secret takes (2 for membership).
        alpha: the level α of the test.

    Returns:
        The critical count, in 1 … guesses + 1.

    Raises:
        ValueError: unless 0 ≤ guesses ≤ m, m ≥ 1 and k ≥ 2.
    """
    _check_counts(m, guesses, 0)
    if k < 2:
        raise ValueError("k must be >= 2")
    if guesses == 0:
        return 1
    start = np.arange(guesses + 1, dtype=float)
    r, h = alpha * start / m, alpha * (guesses - start) / m
    for i in range(guesses - 1, -1, -1):
        active = start > i  # the recursion of count c' runs i = c'-1 … 0
        h_next = np.where(active, np.maximum(h, (k - 1) * inverse_power(r)), h)
        r = np.where(active, np.minimum(1.0, r + i / (guesses - i) * (h_next - h)), r)
        h = h_next
    rejecting = np.flatnonzero(r + h - guesses / m > 0)
    return int(rejecting[0]) if rejecting.size else guesses + 1


def fdp_rejects(inverse_power: InversePower, m: int, guesses: int, correct: int, k: int, alpha: float) -> bool:
    """Whether ``correct`` of ``guesses`` guesses among ``m`` k-ary canaries reject the claimed f at level α.

    Args:
        inverse_power: the claim's ``f̄⁻¹``.
        m: the number of canaries in the training.
        guesses: the number c of canaries guessed (the others abstained on).
        correct: the number c' of correct guesses.
        k: the number of values a canary's secret takes.
        alpha: the level α of the test.

    Returns:
        True when :func:`fdp_statistic` is positive.

    Raises:
        ValueError: unless 0 ≤ correct ≤ guesses ≤ m, m ≥ 1 and k ≥ 2.
    """
    return fdp_statistic(inverse_power, m, guesses, correct, k, alpha) > 0


def gdp_mu_lower_bound(m: int, guesses: int, correct: int, k: int, alpha: float) -> float:
    """The largest μ such that μ-GDP is rejected at level α (0 if none; 1e6, the search's end, if every μ up to it
    is).

    Args:
        m: the number of canaries in the training.
        guesses: the number c of canaries guessed (the others abstained on).
        correct: the number c' of correct guesses.
        k: the number of values a canary's secret takes.
        alpha: the level α of the test.

    Returns:
        μ, a 1 − α lower confidence bound on the mechanism's GDP parameter (the rejected end of a bracket of width
        at most 1e-4·max(1, μ)).

    Raises:
        ValueError: unless 0 ≤ correct ≤ guesses ≤ m, m ≥ 1 and k ≥ 2 (when a guess was made).
    """
    if guesses == 0:
        return 0.0
    return _largest_rejected(
        lambda mu: fdp_rejects(gaussian_inverse_power(mu), m, guesses, correct, k, alpha), 0.0, 1.0, 1e-4)


@dataclass(frozen=True)
class Family:
    """A one-parameter family of claims ordered from strong to weak privacy as ``parameter`` grows (μ of GDP, ε at
    fixed δ, or 1/z of a subsampled Gaussian), with its f̄⁻¹ and the ε(δ) each claim gives."""

    name: str
    inverse_power: Callable[[float], InversePower]
    epsilon: Callable[[float], float]
    start: float = 1.0
    limit: float = 1e6  # the weakest claim searched; a rejection there is reported as its ε (a lower bound)
    # each claim's canonical error profile, for the order-statistics analysis (None: not available)
    error_profile: Callable[[float], ErrorProfile] | None = None


def gdp_family(delta: float) -> Family:
    """The μ-GDP family (parameter μ), its claims read as ε at δ from the Gaussian privacy profile
    (docs/accounting.md, ``δ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2)``).

    Args:
        delta: the δ at which each claim's ε is read.

    Returns:
        The family.
    """
    return Family("μ-GDP", gaussian_inverse_power, lambda mu: gaussian_epsilon(delta, mu))


def eps_delta_family(delta: float) -> Family:
    """The (ε, δ)-DP family at fixed δ (parameter ε).

    Args:
        delta: the fixed δ.

    Returns:
        The family, whose ε(δ) of each claim is its parameter.
    """
    return Family(f"(ε, δ={delta:g})-DP", lambda e: eps_delta_inverse_power(e, delta), lambda e: e)


def family_epsilon(family: Family, m: int, guesses: int, correct: int, k: int, alpha: float,
                   tolerance: float = 1e-3) -> float:
    """ε(δ) of the weakest claim of ``family`` rejected at level α (0 if even perfect privacy is not rejected).

    Args:
        family: the claimed mechanism's family.
        m: the number of canaries in the training.
        guesses: the number c of canaries guessed (the others abstained on).
        correct: the number c' of correct guesses.
        k: the number of values a canary's secret takes.
        alpha: the level α of the test.
        tolerance: the bracket width on the boundary parameter, relative above 1 and absolute below (its rejected
            end is reported).

    Returns:
        The empirical ε at the family's δ.

    Raises:
        ValueError: unless 0 ≤ correct ≤ guesses ≤ m and m ≥ 1.
    """
    _check_counts(m, guesses, correct)
    if guesses == 0:
        return 0.0
    parameter = _largest_rejected(
        lambda t: fdp_rejects(family.inverse_power(t), m, guesses, correct, k, alpha), 0.0, family.start, tolerance,
        family.limit)
    if parameter == 0.0:
        return 0.0
    return family.epsilon(parameter)
