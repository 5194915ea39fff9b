"""Statistics of a verdict (docs/statistics.md).

Success counts k of N independent trials get exact Clopper–Pearson intervals; the verdict uses the
one-sided lower bound at level 1 − α/m (Bonferroni over the m comparisons of one audit).

A distinguishing game (two worlds, a score per trial) is judged by a *test chosen on a selection split*:
the orientation (score or −score, so that a ROC below the diagonal counts as leakage just like its mirror
image) and the threshold are chosen on the selection trials, and only the other trials are counted. Those
counts then give

* the **curve test**: the claimed trade-off curve f is rejected when a joint confidence region of the test's
  (FPR, FNR) (Fisher's combination of the two exact binomial p-values) lies strictly below f
  (:func:`curve_rejected`; no assumption about the mechanism);
* the **family ε**: the largest claim in the claimed mechanism's own family (same mechanism with a smaller
  noise multiplier, or μ-GDP) that the box rejects, read as ε at δ (:func:`family_epsilon`; valid under the
  family assumption, which is reported beside it);
* the **Clopper–Pearson ε**: ``log((1 − δ − FNR_ub)/FPR_ub)`` and its mirror, read off the jointly valid
  Clopper–Pearson box of the same test (:func:`epsilon_lower_bound`; no assumption at all).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, replace

import numpy as np
from scipy.stats import beta, binom, norm
from statsmodels.stats.proportion import proportion_confint

from fdp_audit.accounting.mechanism import MechanismSpec, accountant_for
from fdp_audit.accounting.pld import build_pld, resolve_discretization, tradeoff_curves
from fdp_audit.accounting.tradeoff import TradeoffCurve, TradeoffFunction, gaussian_epsilon, gaussian_tradeoff


def clopper_pearson(successes: int, trials: int, alpha: float) -> tuple[float, float]:
    """Exact two-sided 1 − α Clopper–Pearson interval of a success probability (docs/statistics.md).

    Args:
        successes: the success count k.
        trials: the trial count N (0 gives the interval [0, 1]).
        alpha: the two-sided error probability α, in (0, 1).

    Returns:
        ``(lower, upper)``, the α/2 quantile of Beta(k, N − k + 1) and the 1 − α/2 quantile of Beta(k + 1, N − k)
        (0 when k = 0, 1 when k = N).
    """
    lo, hi = proportion_confint(successes, trials, alpha=alpha, method="beta")
    return float(np.nan_to_num(lo, nan=0.0)), float(np.nan_to_num(hi, nan=1.0))


def lower_confidence_bound(successes: int, trials: int, alpha: float) -> float:
    """Exact one-sided lower bound at level 1 − α (the lower end of the two-sided 1 − 2α interval).

    Args:
        successes: the success count k.
        trials: the trial count N.
        alpha: the one-sided error probability α, in (0, ½).

    Returns:
        The lower confidence bound on the success probability (0 when k = 0).
    """
    return clopper_pearson(successes, trials, 2 * alpha)[0]


def evaluation_trials_for_power(rate: float, bound: float, level: float, miss: float,
                                most: int = 100_000) -> int | None:
    """The fewest evaluation trials N at which an attack whose true success probability is ``rate`` is judged
    above ``bound`` with probability at least ``1 − miss``: ``P[k ≥ k_N] ≥ 1 − miss`` for k ~ Binomial(N, rate),
    where k_N is the fewest successes whose one-sided Clopper–Pearson lower bound at ``level`` exceeds the bound
    (the gate's rate comparison). None when no N up to ``most`` is enough (``rate ≤ bound`` never is).

    Args:
        rate: the attack's true success probability.
        bound: the limit the rate is compared with (e.g. Theorem 4's bound).
        level: the one-sided error probability of the gate's lower bound.
        miss: the allowed probability of not judging the rate above the bound.
        most: the largest N tried.

    Returns:
        The fewest such N, or None.
    """
    if rate <= bound:
        return None
    for trials in range(1, most + 1):
        low, high = 0, trials + 1  # the fewest k in [0, trials] whose lower bound exceeds the bound (N + 1: none)
        while low < high:
            middle = (low + high) // 2
            if lower_confidence_bound(middle, trials, level) > bound:
                high = middle
            else:
                low = middle + 1
        if low <= trials and binom.sf(low - 1, trials, rate) >= 1 - miss:
            return trials
    return None


def upper_confidence_bound(successes: int, trials: int, alpha: float) -> float:
    """Exact one-sided upper bound at level 1 − α.

    Args:
        successes: the success (or error) count k.
        trials: the trial count N.
        alpha: the one-sided error probability α, in (0, ½).

    Returns:
        The upper confidence bound on the probability (1 when k = N).
    """
    return clopper_pearson(successes, trials, 2 * alpha)[1]


def upper_confidence_bounds(errors: np.ndarray, trials: int, alpha: float) -> np.ndarray:
    """Vectorised one-sided Clopper–Pearson upper bounds at level 1 − α: the (1 − α) quantile of
    Beta(k + 1, n − k), and 1 when k = n or n = 0.

    Args:
        errors: error counts k, any shape.
        trials: the trial count n every count is out of.
        alpha: the one-sided error probability α of each bound.

    Returns:
        The bounds, float array of the shape of ``errors``.
    """
    k = np.asarray(errors, dtype=float)
    if trials == 0:
        return np.ones_like(k)
    with np.errstate(invalid="ignore"):
        bound = beta.ppf(1 - alpha, k + 1, trials - k)
    return np.where(k >= trials, 1.0, bound)


def tightness(rate: float, ball: float, bound: float) -> float | None:
    """Share of the advantage Theorem 4 allows that the attack realises: (rate − Ball)/(bound − Ball).

    Args:
        rate: the attack's success rate (or its lower confidence bound).
        ball: the prior's success probability Ball.
        bound: Theorem 4's bound ``1 − f(Ball)``.

    Returns:
        The share (1 when the attack reaches the bound, 0 at the prior), or None when the bound allows no
        advantage over Ball.
    """
    return None if bound - ball <= 1e-12 else (rate - ball) / (bound - ball)


@dataclass(frozen=True)
class RocCounts:
    """Error counts of score threshold tests on a distinguishing game: the test says "positive" (world 1)
    when the score is at least the threshold."""

    thresholds: np.ndarray
    false_positives: np.ndarray
    false_negatives: np.ndarray
    negatives: int
    positives: int


def roc_counts(scores: np.ndarray, labels: np.ndarray, thresholds: np.ndarray) -> RocCounts:
    """The false positives and false negatives of the threshold tests "positive when score ≥ t", for every t.

    Args:
        scores: one score per trial, shape (n,).
        labels: the world of each trial (True: world 1, the positives), shape (n,).
        thresholds: the thresholds t, shape (k,).

    Returns:
        The counts: per threshold, the negatives scoring at least t and the positives scoring below it.
    """
    scores, labels = np.asarray(scores, float), np.asarray(labels, bool)
    thresholds = np.asarray(thresholds, float)
    negative, positive = np.sort(scores[~labels]), np.sort(scores[labels])
    fp = len(negative) - np.searchsorted(negative, thresholds, side="left")
    fn = np.searchsorted(positive, thresholds, side="left")
    return RocCounts(thresholds, fp, fn, int(len(negative)), int(len(positive)))


def threshold_split(trials: int) -> tuple[np.ndarray, np.ndarray]:
    """Indices of the trials that choose a distinguishing game's test (every fourth) and of those that judge
    it (the rest). Choosing one threshold needs fewer trials than judging it: at a few hundred trials a
    quarter doubles the chance that an optimal attack shows a non-zero ε, compared with half (simulated), and
    at thousands it costs nothing measurable.

    Args:
        trials: the number of judged trials of the game.

    Returns:
        ``(selection, evaluation)``, the two index arrays (disjoint, together ``range(trials)``).
    """
    trial = np.arange(trials)
    return trial[trial % 4 == 0], trial[trial % 4 != 0]


@dataclass(frozen=True)
class SelectedTest:
    """A threshold test fixed on the selection split: positive when ``orientation · score ≥ threshold``."""

    orientation: int
    threshold: float


def select_test(scores: np.ndarray, labels: np.ndarray, level: float) -> SelectedTest:
    """The single threshold test that the selection trials favour (Nasr et al. 2023 choose one threshold on
    held-out canaries the same way): over both orientations and every observed score as threshold, the one
    whose Clopper–Pearson box (at ``level`` per bound) certifies the largest GDP parameter
    ``μ = Φ⁻¹(1 − FPR_ub) − Φ⁻¹(FNR_ub)`` (:func:`gdp_mu_lower_bound`). μ is only the selection criterion: it
    ranks boxes by their distance below the trade-off curves, and whatever is chosen here is judged on other
    trials, so a poor choice costs power, never validity.

    Args:
        scores: the selection trials' scores, shape (n,).
        labels: their worlds (True: world 1), shape (n,).
        level: the one-sided error probability of each Clopper–Pearson bound of the criterion.

    Returns:
        The chosen orientation and threshold (orientation 1 at the median score when the trials hold only one
        world).
    """
    scores, labels = np.asarray(scores, float), np.asarray(labels, bool)
    best = (-math.inf, 1, float(np.median(scores)) if scores.size else 0.0)
    if labels.all() or not labels.any():
        return SelectedTest(best[1], best[2])
    for orientation in (1, -1):
        oriented = orientation * scores
        counts = roc_counts(oriented, labels, np.unique(oriented))
        mu = gdp_mu_lower_bound(upper_confidence_bounds(counts.false_positives, counts.negatives, level),
                                upper_confidence_bounds(counts.false_negatives, counts.positives, level))
        i = int(np.argmax(mu))
        if mu[i] > best[0]:
            best = (float(mu[i]), orientation, float(counts.thresholds[i]))
    return SelectedTest(best[1], best[2])


def error_bounds(counts: RocCounts, level: float) -> tuple[np.ndarray, np.ndarray]:
    """Upper confidence bounds (FPR_ub, FNR_ub) of every threshold, holding *jointly* with probability
    ≥ 1 − ``level``: Bonferroni over the 2k one-sided Clopper–Pearson bounds of k thresholds.

    Args:
        counts: the error counts of the tests on the evaluation trials.
        level: the joint error probability.

    Returns:
        ``(fpr_ub, fnr_ub)``, one bound per threshold in each, shape (k,).
    """
    each = level / (2 * max(len(counts.thresholds), 1))
    return (upper_confidence_bounds(counts.false_positives, counts.negatives, each),
            upper_confidence_bounds(counts.false_negatives, counts.positives, each))


# The α grid of the curve test: relative steps of 1.8% towards both ends (a step costs power, never validity).
_HALF_GRID = np.geomspace(1e-12, 0.5, 1500)
_ALPHA_GRID = np.unique(np.concatenate([[0.0], _HALF_GRID, 1 - _HALF_GRID, [1.0]]))


def curve_p_value(counts: RocCounts, f: TradeoffFunction) -> np.ndarray:
    """Per threshold, the p-value of the joint test of the claim "β ≥ f(α) for this test": with
    P0(α) = Pr_α[K0 ≤ k0] (K0 ~ Bin(negatives, α), the false positives) and P1(β) = Pr_β[K1 ≤ k1] (the false
    negatives), the largest Fisher combination ``C(P0(α)·P1(f(α)))``, ``C(x) = x(1 − ln x)``, over the curve.

    Validity. If the mechanism satisfies f, the threshold test (fixed before the evaluation trials are seen)
    has some (α*, β*) with β* ≥ f(α*) (f-DP; f is symmetric, so the orientation does not matter). At α = α*,
    P0(α*) is a binomial cdf evaluated at its own draw, hence Pr[P0 ≤ u] ≤ u; and P1(f(α*)) ≥ P1(β*) because
    the binomial cdf falls as its success probability grows (f(α*) ≤ β*), and P1(β*) is again a cdf at its
    own draw. The two are independent (disjoint trials), so Pr[C(P0·P1) ≤ level] ≤ level (Fisher), and the
    largest combination over the curve is at least the one at α*: a true claim gets a p-value ≤ level with
    probability ≤ level. The acceptance region {(α, β): C(P0(α)·P1(β)) > level} is a joint 1 − level
    confidence region for (α*, β*); rejecting means it lies strictly below f. It is far smaller than the
    Clopper–Pearson box at level/2 per side (each coordinate needs about 1.5 instead of 2.2 standard errors
    when both carry evidence).

    The supremum over α is bounded rigorously on a grid: P0 falls with α and f does too, so on
    [α_i, α_{i+1}] the product is at most P0(α_i)·P1(f(α_{i+1})); the grid only makes the test conservative.

    Args:
        counts: the error counts of the tests on the evaluation trials.
        f: the claimed trade-off function (α ↦ β, vectorised).

    Returns:
        The p-values, one per threshold, shape (k,).
    """
    grid = _ALPHA_GRID
    f_values = np.clip(np.asarray(f(grid), float), 0.0, 1.0)
    k0 = np.asarray(counts.false_positives, float)[:, None]
    k1 = np.asarray(counts.false_negatives, float)[:, None]
    log_p0 = binom.logcdf(k0, counts.negatives, grid[None, :])
    log_p1 = binom.logcdf(k1, counts.positives, f_values[None, :])
    log_product = np.max(log_p0[:, :-1] + log_p1[:, 1:], axis=1)
    with np.errstate(invalid="ignore"):
        return np.where(np.isneginf(log_product), 0.0, np.minimum(np.exp(log_product) * (1 - log_product), 1.0))


def curve_rejected(counts: RocCounts, f: TradeoffFunction, level: float) -> bool:
    """The curve test at joint level ``level``: some threshold's p-value (:func:`curve_p_value`) is at most
    level/k (Bonferroni over the k thresholds).

    Args:
        counts: the error counts of the tests on the evaluation trials.
        f: the claimed trade-off function.
        level: the joint error probability of the test.

    Returns:
        True when the claim f is rejected.
    """
    return bool(np.any(curve_p_value(counts, f) <= level / max(len(counts.thresholds), 1)))


def gdp_mu_lower_bound(fpr_ub: np.ndarray, fnr_ub: np.ndarray) -> np.ndarray:
    """The μ whose Gaussian trade-off curve passes through the corner (a, b), G_μ(a) = b:
    ``Φ⁻¹(1 − a) − Φ⁻¹(b)``; every μ' below it has G_μ'(a) > b. G_μ is symmetric, so the mirrored corner
    gives the same μ.

    Args:
        fpr_ub: upper bounds a on the false positive rate, any shape.
        fnr_ub: upper bounds b on the false negative rate, the same shape.

    Returns:
        μ per corner, the shape of the inputs: 0 on the diagonal a + b = 1, negative above it, +inf at a = 0 or
        b = 0 (when the other is below 1).
    """
    with np.errstate(divide="ignore"):
        return norm.isf(np.asarray(fpr_ub, float)) - norm.ppf(np.asarray(fnr_ub, float))


def epsilon_lower_bound(counts: RocCounts, delta: float, alpha: float) -> tuple[float, list[dict]]:
    """The assumption-free ε: ``max_t max(log((1 − δ − FNR_ub)/FPR_ub), log((1 − δ − FPR_ub)/FNR_ub))`` with
    the jointly valid upper bounds of :func:`error_bounds`. Any (ε, δ)-DP mechanism has
    β ≥ 1 − δ − e^ε α and α ≥ 1 − δ − e^ε β for every test, so with probability ≥ 1 − α its ε is at least
    this bound.

    Args:
        counts: the error counts of the tests on the evaluation trials.
        delta: the claimed δ.
        alpha: the joint error probability of the bounds.

    Returns:
        ``(epsilon, points)``: the bound (0 when no corner gives a positive one) and, per threshold, a dict of
        ``threshold``, the observed ``fpr`` and ``fnr`` and their upper bounds ``fpr_ub`` and ``fnr_ub``.
    """
    fpr_ub, fnr_ub = error_bounds(counts, alpha)
    best, points = 0.0, []
    for t, fp, fn, a_ub, b_ub in zip(counts.thresholds, counts.false_positives, counts.false_negatives, fpr_ub,
                                     fnr_ub, strict=True):
        for a, b in ((b_ub, a_ub), (a_ub, b_ub)):
            if b > 0 and 1 - delta - a > 0:
                best = max(best, math.log((1 - delta - a) / b))
        points.append({"threshold": float(t), "fpr": int(fp) / max(counts.negatives, 1),
                       "fnr": int(fn) / max(counts.positives, 1), "fpr_ub": float(a_ub), "fnr_ub": float(b_ub)})
    return best, points


@dataclass(frozen=True)
class FamilyEpsilon:
    """The largest claim of a family that the data reject, as ε at δ.

    ``parameter`` is the family's boundary value: the noise multiplier z* (every z' > z* is rejected) or
    the GDP μ* (every μ' < μ* is rejected); ``capped`` says the search stopped at its end (z/2, μ = 40), so
    the true boundary is further and ``epsilon`` is conservative."""

    epsilon: float
    parameter: float
    family: str
    capped: bool = False


# The noise-multiplier search: log2(z'/z) on a dyadic grid, so different comparisons of one claim share
# the PLDs of their first bisection steps (the accountant caches them).
_SEARCH_LOW, _SEARCH_HIGH, _SEARCH_STEP = -1.0, 8.0, 1 / 32
_GDP_SEARCH_HIGH = 40.0


@functools.lru_cache(maxsize=48)
def _family_curve(spec: MechanismSpec, log2_ratio: float) -> TradeoffCurve:
    """The claim's curve (the accountant's cache) or a member of its family (this cache, kept apart so that a
    search does not evict the claim's curves): a search visits ~9 grid points, the first ones shared by every
    comparison of one claim, and repeated audits of one mechanism land near the same boundary."""
    if log2_ratio == 0:
        return accountant_for(spec).curve()
    scaled = replace(spec, event=spec.event.with_noise_scaled(2.0 ** log2_ratio))
    schedule = scaled.segments()
    return tradeoff_curves(build_pld(schedule, scaled.relation, True, resolve_discretization(schedule)))["symmetric"]


def family_epsilon(spec: MechanismSpec, counts: RocCounts, level: float, delta: float) -> FamilyEpsilon:
    """The largest claim in the claimed mechanism's family that the curve test (:func:`curve_rejected`, at
    ``level``) rejects, as ε(δ).

    * A Poisson-subsampled Gaussian claim (p < 1): the family is the same mechanism (same p, T, neighbouring
      relation) with noise multiplier z'. More noise is a post-processing (add independent noise), so f_z'
      grows with z' and the curve test rejects all z' above a boundary z* (its p-value only falls as f
      rises). If the mechanism is in the family with z_true, its claim is rejected with probability
      ≤ level, and otherwise z_true ≤ z*, so ε_true(δ) ≥ ε_{z*}(δ): ε_{z*}(δ) is a 1 − level lower
      confidence bound under the family assumption. z* is found by bisection on log2(z'/z) (precision
      1/32, i.e. ~2% in z; the reported end is the conservative one, with the larger z); the search runs
      from z/2 (``capped`` when even that is rejected) to 256·z (ε = 0 when nothing there is rejected).
      f_z' is the pessimistic PLD curve, a lower bound on the true one, so rejections stay valid.
      At p = 1 this family is exactly μ-GDP with μ = √T/z (add/remove) or 2√T/z (replace-one).
    * A claim without noise multiplier (``nonprivate``, ``public_only``): the μ-GDP family. G_μ' falls as
      μ' grows, so the rejected μ' are all below a boundary μ*, found by bisection (to 1e-3, the reported end
      the smaller μ), and ε = ε_{G_μ*}(δ) from δ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2).

    Args:
        spec: the claimed mechanism.
        counts: the error counts of the tests on the evaluation trials.
        level: the error probability of the curve test.
        delta: the δ at which ε is read.

    Returns:
        The family's ε at δ, with the boundary parameter and the family's description.
    """
    if not spec.is_gaussian:
        low, high = 0.0, _GDP_SEARCH_HIGH  # invariant: low rejected (or 0), high not rejected
        if curve_rejected(counts, lambda a: gaussian_tradeoff(a, high), level):
            low = high
        while high - low > 1e-3:
            mid = (low + high) / 2
            low, high = (mid, high) if curve_rejected(counts, lambda a, m=mid: gaussian_tradeoff(a, m), level) \
                else (low, mid)
        return FamilyEpsilon(gaussian_epsilon(delta, low) if low > 0 else 0.0, low, "μ-GDP (G_μ trade-off curves)",
                             low == _GDP_SEARCH_HIGH)
    family = (f"{spec.name} with p = {spec.sample_rate:g}, T = {spec.steps}, {spec.relation} relation and a "
              f"smaller noise multiplier than the claimed z = {spec.noise_multiplier:.4g}")

    def rejected(log2_ratio: float) -> bool:
        return curve_rejected(counts, _family_curve(spec, log2_ratio), level)

    def epsilon_at(log2_ratio: float) -> float:
        return float(_family_curve(spec, log2_ratio).epsilon(delta))

    if rejected(0.0):
        if rejected(_SEARCH_LOW):
            return FamilyEpsilon(epsilon_at(_SEARCH_LOW), spec.noise_multiplier * 2.0 ** _SEARCH_LOW, family, True)
        low, high = _SEARCH_LOW, 0.0
    elif not rejected(_SEARCH_HIGH):
        return FamilyEpsilon(0.0, math.inf, family)
    else:
        low, high = 0.0, _SEARCH_HIGH
    # invariant: low is not rejected, high is rejected; z* lies between them
    while high - low > _SEARCH_STEP:
        mid = (low + high) / 2
        low, high = (low, mid) if rejected(mid) else (mid, high)
    return FamilyEpsilon(epsilon_at(high), spec.noise_multiplier * 2.0 ** high, family)
