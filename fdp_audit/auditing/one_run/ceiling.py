"""What no test of one pre-fixed guess count, valid for every mechanism that satisfies the claim, can certify: a
mechanism that satisfies the claim and still makes many right guesses with probability above α (docs/one_run.md,
"How far a test of one guess count can go"). Tests of several counts, tests of the scores, and tests that assume
the claimed family or independent canaries are not bounded by it.

**The flagged mechanism.** Let f be the claimed trade-off curve, ``f̄ = 1 - f`` its power and τ ∈ (0, 1). Draw
one shared flag ``U ~ Bernoulli(τ)``. With ``U = 1`` every canary's output is an independent draw from the
canonical pair of the curve g_τ with power

    ḡ_τ(x) = min(1, min(f̄(τx), f̄(τx + 1 - τ) - (1 - τ)) / τ),

with ``U = 0`` the output does not depend on the secrets at all. Per canary, with every other secret fixed, the
experiment is at most as informative as "observe U, then the canary's own draw" (the other canaries' outputs
depend on U and their own secrets only). That experiment's best test of type-I error α, putting ``α_1`` on the
flagged branch and ``α_0`` on the other, has power ``τ ḡ_τ(α_1) + (1 - τ) α_0``; writing ``a_0 = (1 - τ) α_0 ∈
[0, 1 - τ]``, ``τ ḡ_τ(α_1) <= f̄(τ α_1 + a_0) - a_0`` (the minimum over a_0 of that concave function is at an end
of the interval, which is the formula), so the power is at most ``f̄(α)``: the mechanism is f-DP for every
canary. (ḡ_τ is concave, a minimum of concave functions, so g_τ is a trade-off curve.)

**Which tests it bounds.** A test of the claim that is valid for every f-DP mechanism has
``P[reject] <= α`` under this one, hence ``P[reject | U = 1] <= α/τ``: on releases of the product of g_τ pairs it
rejects with probability at most α/τ. For a test that rejects when the c most confident guesses contain at least
v right ones, ``τ·P_{g_τ}[W_c >= v] <= α`` is necessary, so every valid critical count is at least
:func:`flagged_critical_count` (the smallest v that satisfies this for every τ of a grid). The f-DP recursion's
counts can be compared with it (a recursion below it would be invalid; a recursion near it cannot be improved by
any analysis of the same count), and a count-based audit of a release cannot certify a claim whose flagged
critical count its median W_c does not reach: that is the ceiling of :func:`count_ceiling`.

``P_{g_τ}[W_c >= v]`` is estimated from ``sims`` draws of m canaries (Neyman–Pearson guesser on the canonical
pair: guess the likelier secret, rank by the absolute privacy loss); the bound uses the Clopper–Pearson lower
limit of that probability at confidence ``1 - CEILING_ERROR``, so it errs towards smaller critical counts (a
higher ceiling).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from scipy import stats

from fdp_audit.accounting.tradeoff import TradeoffCurve

FLAG_RATES = (0.06, 0.08, 0.1, 0.15, 0.2, 0.3, 0.5)
CEILING_ERROR = 0.01
GRID_POINTS = 20_000


def flagged_curve(curve: TradeoffCurve, tau: float) -> TradeoffCurve:
    """g_τ of the module doc, as a piecewise-linear curve on a log-spaced grid of type-I errors.

    Args:
        curve: the claimed trade-off curve f.
        tau: the flag rate τ, in (0, 1].

    Returns:
        g_τ, with at most ``GRID_POINTS + 1`` vertices (fewer once its power reaches 1 before α = 1).

    Raises:
        ValueError: τ is outside (0, 1].
    """
    if not 0 < tau <= 1:
        raise ValueError(f"tau must be in (0, 1], got {tau}")
    x = np.concatenate([[0.0], np.geomspace(1e-14, 1.0, GRID_POINTS)])
    low = curve.power_at(tau * x)
    high = curve.power_at(np.minimum(tau * x + 1.0 - tau, 1.0)) - (1.0 - tau)
    power = np.minimum(1.0, np.minimum(low, high) / tau)
    return TradeoffCurve(x, np.maximum.accumulate(power))


def loss_distribution(curve: TradeoffCurve) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The canonical pair of ``curve``: privacy losses and their masses under the null and the alternative.
    Between vertices the power rises by ``Δpower`` while α rises by ``Δα``: an outcome of loss
    ``log(Δpower/Δα)`` with those masses; the power at α = 0 is an outcome of infinite loss.

    Args:
        curve: a piecewise-linear trade-off curve.

    Returns:
        ``(losses, null, alternative)``, three arrays of one length: the losses (the last ``inf``) and their
        probabilities under P_0 and P_1 (each summing to 1).
    """
    d_alpha, d_power = np.diff(curve.alpha), np.diff(curve.power)
    keep = d_alpha > 0
    with np.errstate(divide="ignore"):
        losses = np.log(d_power[keep]) - np.log(d_alpha[keep])
    null = np.append(d_alpha[keep], 0.0)
    alternative = np.append(d_power[keep], curve.power[0])
    return np.append(losses, np.inf), null / null.sum(), alternative / alternative.sum()


def canonical_losses(curve: TradeoffCurve, secrets: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One release of independent canaries of the canonical pair of ``curve``: each canary's privacy loss, drawn
    under the alternative where its secret is 1 and under the null where it is 0.

    Args:
        curve: the pair's trade-off curve.
        secrets: ``[m]`` secrets in {0, 1}.
        rng: the random stream.

    Returns:
        ``[m]`` privacy losses ``log(dP_1/dP_0)`` of the outputs (``inf`` for the outcome only P_1 has).
    """
    losses, null, alternative = loss_distribution(curve)
    draws = rng.random(len(secrets))
    under_null, under_alternative = np.cumsum(null), np.cumsum(alternative)
    index = np.where(secrets == 1, np.searchsorted(under_alternative, draws * under_alternative[-1]),
                     np.searchsorted(under_null, draws * under_null[-1]))
    return losses[np.minimum(index, len(losses) - 1)]


def ranked_correct(curve: TradeoffCurve, m: int, sims: int, rng: np.random.Generator) -> np.ndarray:
    """``[sims, m]`` running counts of right guesses, most confident first, of the Neyman–Pearson guesser on m
    independent canaries (secret uniform on {0, 1}) of the canonical pair of ``curve``.

    Args:
        curve: the pair's trade-off curve.
        m: the number of canaries.
        sims: the number of simulated releases.
        rng: the random stream.

    Returns:
        The counts, int32 array of shape (sims, m).
    """
    out = np.empty((sims, m), dtype=np.int32)
    for row in range(sims):
        secrets = rng.integers(0, 2, size=m)
        loss = canonical_losses(curve, secrets, rng)
        guess = loss > 0
        order = np.argsort(-np.abs(loss), kind="stable")
        out[row] = np.cumsum(guess[order] == secrets[order])
    return out


def flagged_critical_count(curve: TradeoffCurve, m: int, counts: Sequence[int], alpha: float, sims: int,
                           rng: np.random.Generator, taus: Sequence[float] = FLAG_RATES) -> np.ndarray:
    """For each guess count c, a lower bound on the critical count of every test of ``curve`` at level α that
    rejects when at least v of the c most confident guesses are right (module doc).

    Args:
        curve: the claimed trade-off curve.
        m: canaries.
        counts: the guess counts c.
        alpha: the level.
        sims: simulated audits per flag rate.
        rng: the random stream.
        taus: the flag rates tried.

    Returns:
        ``[len(counts)]`` critical counts: any valid test's is at least this (with confidence
        ``1 - CEILING_ERROR`` per count and flag rate).
    """
    index = np.asarray(counts) - 1
    bound = np.zeros(len(index), dtype=int)
    for tau in taus:
        if tau <= alpha:
            continue
        correct = ranked_correct(flagged_curve(curve, tau), m, sims, rng)[:, index]  # [sims, counts]
        for j, c in enumerate(np.asarray(counts)):
            tails = (correct[:, j][None, :] >= np.arange(c + 2)[:, None]).sum(axis=1)  # #sims with W >= v
            # Clopper–Pearson lower limits of P[W >= v]; the flag makes τ times that happen under the claim
            lower = stats.beta.ppf(CEILING_ERROR, np.maximum(tails, 1), sims - tails + 1)
            lower = np.where(tails > 0, lower, 0.0)
            exceeding = np.flatnonzero(tau * lower > alpha)
            if exceeding.size:
                bound[j] = max(bound[j], int(exceeding.max()) + 1)
    return bound


def count_ceiling(truth_correct: np.ndarray, member_curve: Callable[[float], TradeoffCurve],
                  parameters: Sequence[float], m: int, counts: Sequence[int], alpha: float, sims: int,
                  rng: np.random.Generator) -> tuple[int, int]:
    """The weakest claim of a family that a count-based one-run analysis could reject at the median of the
    audited mechanism's counts, at the best guess count (chosen knowing the truth).

    Args:
        truth_correct: ``[m]`` median running counts of right guesses of the audited release (most confident
            first).
        member_curve: the family member's curve for a parameter (larger means a weaker claim).
        parameters: the family parameters tried, ascending.
        m: canaries.
        counts: the guess counts tried.
        alpha: the level.
        sims: simulated audits per flag rate and member.
        rng: the random stream.

    Returns:
        ``(index, count)``: the index in ``parameters`` of the weakest claim whose flagged critical count the
        median reaches (-1 if none; found by bisection, a weaker claim being harder to reach) and the smallest
        guess count that reaches it (``counts[0]`` when none does).
    """
    observed = np.asarray(truth_correct)[np.asarray(counts) - 1]

    def reaching(i: int) -> np.ndarray:
        return observed >= flagged_critical_count(member_curve(parameters[i]), m, counts, alpha, sims, rng)

    low, high, best = -1, len(parameters), int(counts[0])  # parameters[:low+1] reached, [high:] not
    while high - low > 1:  # a weaker claim is harder to reach: bisection
        middle = (low + high) // 2
        reach = reaching(middle)
        if reach.any():
            low, best = middle, int(np.asarray(counts)[np.flatnonzero(reach)[0]])
        else:
            high = middle
    return low, best
