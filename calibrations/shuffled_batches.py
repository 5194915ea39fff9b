"""How much shuffled batches leak beyond a Poisson claim, along the canary's direction, at the user-loop matrix's
settings (tests/auditing/user_loops.py ``shuffled``: z = 1.5, p = ½, T = 4, C = 1; two epochs of two batches; with
``--low-noise`` ``shuffled_low_noise``'s z = 0.5).

A user's loop that cuts each epoch's batches from a fresh shuffle puts a record in exactly one batch per epoch,
where the claimed Poisson sampling puts it in each step independently with probability p. Along the canary's
coordinate a game sees, in units of the noise σ = z·C and with a = C/σ:

* the gradient-canary games (every step's update, :mod:`fdp_audit.auditing.games.gradient_canary`):
  y_t = s·a·c_t + N(0, 1), c_t the canary's membership of step t's batch; the distinguishing game's worlds are
  s = ±1 (replace-one), the simulator game's s = 1 and 0 (add/remove);
* the final-model games along that coordinate, the sum Σ_t y_t: the membership game's crafted canary adds C at
  every step it is in (worlds s = 1 and 0), the attribute game's worst case ±C (worlds s = ±1).

Under shuffling an epoch (two steps) has the canary in exactly one, uniformly: the epoch's density is
``½[φ(y₁ − s·a)φ(y₂) + φ(y₁)φ(y₂ − s·a)]``; under Poisson ``Π_t [(1 − p)φ(y_t) + p·φ(y_t − s·a)]``. Epochs are
independent, so the privacy loss L of the whole release is the sum of the epochs' losses. For each game this
computes, for both samplings:

* the Bayes-optimal success with a uniform prior, ``½ Σ max(P₁, P₀)`` over the release: a Riemann sum over a
  grid of step h on each epoch's (y₁, y₂) (the sum of the epochs' losses taken exactly, pair by pair, from the
  sorted losses), its numerical error stated as the change from h to h/2; the final-model view in closed form,
  Φ(μ/2) for the Gaussian shift μ of the sum (shuffled) or its binomial mixture (Poisson);
* the trade-off curve of the optimal (Neyman–Pearson) tests, from the epochs' losses binned to a width of 1e-3
  and convolved (binning can only make a test weaker, by at most that width in loss), against the claimed
  Poisson curve of the game's relation (:meth:`MechanismAccountant.f`): the largest amount by which the shuffled
  curve falls below it (β − f is concave between the curve's vertices, so the vertices suffice);

and against the game's bound (``min(1 − f(½), ½ + δ(0)/2)``, :func:`binary_game_bound`; the attribute game's is
Theorem 4's 1 − f(½), and its curve is not compared) the fewest audit trials at
which a test reaching the optimum is judged above it with probability ≥ 1 − 1e-3 at α/2 = 0.025 (one game, one
attack: a rate and an ε comparison), twice ``evaluation_trials_for_power`` (a game evaluates half its trials).
The Poisson rows check the method: its optimum must stay at or below the claim's bound (the accountant's PLD is
pessimistic, so slightly above is expected there only by the PLD's own discretisation).

Run ``python -m calibrations.shuffled_batches [--low-noise]`` (a few minutes; ``--step 0.02`` for a quicker, coarser
run).
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass

import numpy as np
from scipy.special import logsumexp
from scipy.stats import binom, norm

from fdp_audit.auditing.games.gradient_canary import binary_game_bound
from fdp_audit.auditing.stats import evaluation_trials_for_power
from fdp_audit.claim import Claim

LOSS_BIN = 1e-3  # the loss histogram's bin width for the trade-off curves
LEVEL = 0.05 / 2  # α/m of one game with one attack (a rate and an ε comparison) at α = 0.05
MISS = 1e-3


@dataclass(frozen=True)
class Epochs:
    """One epoch's release along the canary's coordinate on a grid, in both worlds: the grid points' log
    probabilities (log density + 2 log h) in world 1 and world 0."""

    log_p1: np.ndarray
    log_p0: np.ndarray

    @property
    def loss(self) -> np.ndarray:
        return self.log_p1 - self.log_p0


def _log_step(y: np.ndarray, shift: float, rate: float | None) -> np.ndarray:
    """log density of one step's coordinate: N(shift, 1) (the canary always in, rate None) or the Poisson mixture
    (1 − p)·N(0, 1) + p·N(shift, 1)."""
    present = norm.logpdf(y - shift)
    if rate is None:
        return present
    return np.logaddexp(np.log1p(-rate) + norm.logpdf(y), np.log(rate) + present)


def epoch_grid(sampling: str, a: float, signs: tuple[float, float], rate: float, h: float, reach: float = 9.0
               ) -> Epochs:
    """The epoch's two steps on the grid [−reach, reach]² of step h, in the worlds s = signs[0] (world 1) and
    signs[1] (world 0).

    Args:
        sampling: ``"shuffled"`` (the canary in exactly one of the two steps) or ``"poisson"`` (each step with
            probability ``rate``).
        a: the canary's shift per step in noise units, C/σ.
        signs: s in world 1 and world 0.
        rate: the Poisson rate p.
        h: the grid step.
        reach: the grid's half-width in noise units.

    Returns:
        The grid's log probabilities in both worlds.
    """
    y = np.arange(-reach, reach + h / 2, h)
    y1, y2 = np.meshgrid(y, y, indexing="ij")
    worlds = []
    for s in signs:
        if sampling == "shuffled":
            logp = logsumexp([norm.logpdf(y1 - s * a) + norm.logpdf(y2), norm.logpdf(y1) + norm.logpdf(y2 - s * a)],
                             axis=0) + np.log(0.5)
        else:
            logp = _log_step(y1, s * a, rate) + _log_step(y2, s * a, rate)
        worlds.append((logp + 2 * np.log(h)).ravel())
    return Epochs(*worlds)


def optimal_success(epoch: Epochs) -> float:
    """½ Σ max(P₁, P₀) over two independent epochs: for each grid point i of the first epoch, the second
    epoch's points j with L_i + L_j > 0 count P₁ and the others P₀, read from cumulative sums over the sorted
    losses (exact on the grid's product).

    Args:
        epoch: the epoch's grid.

    Returns:
        The Bayes-optimal success with a uniform prior.
    """
    loss = epoch.loss
    order = np.argsort(loss)
    sorted_loss = loss[order]
    p1, p0 = np.exp(epoch.log_p1[order]), np.exp(epoch.log_p0[order])
    # above[i]: Σ_{j ≥ i} p1_j; below[i]: Σ_{j < i} p0_j
    above = np.concatenate([np.cumsum(p1[::-1])[::-1], [0.0]])
    below = np.concatenate([[0.0], np.cumsum(p0)])
    first = np.searchsorted(sorted_loss, -sorted_loss, side="right")  # the first j with L_j > −L_i
    return float(0.5 * (np.sum(p1 * above[first]) + np.sum(p0 * below[first])))


def tradeoff_vertices(epoch: Epochs, epochs: int) -> tuple[np.ndarray, np.ndarray]:
    """The vertices (α, β) of the optimal tests' trade-off curve over ``epochs`` independent epochs, from the
    epoch's loss binned to LOSS_BIN and its histograms convolved.

    Args:
        epoch: the epoch's grid.
        epochs: how many epochs the release has.

    Returns:
        α and β at each threshold, α increasing.
    """
    loss = epoch.loss
    low = np.floor(loss.min() / LOSS_BIN)
    bins = np.round(loss / LOSS_BIN - low).astype(np.int64)
    p1 = np.bincount(bins, np.exp(epoch.log_p1))
    p0 = np.bincount(bins, np.exp(epoch.log_p0))
    h1, h0 = p1, p0
    for _ in range(epochs - 1):
        h1, h0 = np.convolve(h1, p1), np.convolve(h0, p0)
    h1, h0 = np.clip(h1, 0, None)[::-1], np.clip(h0, 0, None)[::-1]  # thresholds from the largest loss down
    alpha = np.concatenate([[0.0], np.cumsum(h0)]) / h0.sum()
    beta = 1 - np.concatenate([[0.0], np.cumsum(h1)]) / h1.sum()
    return np.clip(alpha, 0, 1), np.clip(beta, 0, 1)


def gaussian_vertices(mu: float, points: int = 20_001) -> tuple[np.ndarray, np.ndarray]:
    """The trade-off curve of N(0, 1) against N(μ, 1): β = Φ(Φ⁻¹(1 − α) − μ), on a grid of α.

    Args:
        mu: the shift μ.
        points: the grid's size.

    Returns:
        α and β.
    """
    alpha = np.linspace(0, 1, points)
    return alpha, norm.cdf(norm.ppf(1 - alpha) - mu)


def poisson_sum_success(a: float, signs: tuple[float, float], rate: float, steps: int) -> float:
    """½ ∫ max(P₁, P₀) for the sum of ``steps`` Poisson steps: K ~ Bin(T, p) participations, the sum
    N(s·a·K, T) in world s; by numerical quadrature on a fine grid.

    Args:
        a: the canary's shift per step in noise units.
        signs: s in world 1 and world 0.
        rate: the Poisson rate p.
        steps: T.

    Returns:
        The Bayes-optimal success on the sum.
    """
    y = np.linspace(-12 * np.sqrt(steps), 12 * np.sqrt(steps), 400_001)
    k = np.arange(steps + 1)
    weights = binom.pmf(k, steps, rate)
    dens = [(weights[:, None] * norm.pdf(y[None, :], s * a * k[:, None], np.sqrt(steps))).sum(0) for s in signs]
    return float(0.5 * np.maximum(*dens).sum() * (y[1] - y[0]))


def largest_shortfall(alpha: np.ndarray, beta: np.ndarray, claimed) -> float:
    """max over the curve's vertices of f(α) − β(α): how far the curve falls below the claimed f (≤ 0: never).

    Args:
        alpha: the vertices' α.
        beta: the vertices' β.
        claimed: the claimed trade-off function f.

    Returns:
        The largest shortfall.
    """
    return float(np.max(claimed(alpha) - beta))


def trials_to_catch(success: float, bound: float) -> tuple[int, bool] | None:
    """Audit trials at which a test of this success is judged above ``bound`` with probability ≥ 1 − MISS at
    LEVEL: exact (``evaluation_trials_for_power``) up to 20,000 evaluation trials, beyond by the normal
    approximation ((z_{1−level}·√(b(1−b)) + z_{1−miss}·√(s(1−s)))/(s − b))² of the binomial; None at or below
    the bound.

    Args:
        success: the test's success probability.
        bound: the game's bound.

    Returns:
        ``(audit trials, exact)``, or None.
    """
    if success <= bound:
        return None
    approximate = ((norm.isf(LEVEL) * np.sqrt(bound * (1 - bound)) + norm.isf(MISS) * np.sqrt(success * (1 - success)))
                   / (success - bound)) ** 2
    if approximate > 20_000:
        return 2 * math.ceil(approximate), False
    return 2 * evaluation_trials_for_power(success, bound, LEVEL, MISS), True


def main(argv: list[str] | None = None) -> None:
    """The command line (module docstring).

    Args:
        argv: the arguments (None: ``sys.argv``).
    """
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--step", type=float, default=0.01, help="the grid step h (its error: against 2h)")
    parser.add_argument("--low-noise", action="store_true",
                        help="the loop shuffled_low_noise's settings (z = 0.5) instead of shuffled's")
    args = parser.parse_args(argv)

    from tests.auditing.test_soundness import user_loop_config
    from tests.auditing.user_loops import LOW_NOISE, QUIET

    settings = LOW_NOISE if args.low_noise else QUIET
    claim = Claim.from_config(user_loop_config("shuffled", settings, 100, 2, ("distinguishing",), ("prior",)))
    z, rate, steps = settings["noise_multiplier"], settings["sample_rate"], settings["steps"]
    epochs, a = steps // round(1 / rate), 1 / z
    games = {  # game: (its worlds' signs, the relation's accountant (None: Theorem 4's bound alone), the view)
        "distinguishing": ((1.0, -1.0), claim.replace_one, "iterates"),
        "simulator": ((1.0, 0.0), claim.add_remove, "iterates"),
        "membership": ((1.0, 0.0), claim.add_remove, "final model"),
        "attribute": ((1.0, -1.0), None, "final model, a record's worst case ±C"),
    }
    print(f"z = {z}, p = {rate}, T = {steps} ({epochs} epochs), C = 1; level {LEVEL}, miss {MISS}")
    for game, (signs, accountant, view) in games.items():
        bound = (float(claim.add_remove.bound(0.5)) if accountant is None
                 else binary_game_bound(claim.add_remove, accountant))
        if view == "iterates":
            found = {}
            for sampling in ("shuffled", "poisson"):
                fine = epoch_grid(sampling, a, signs, rate, args.step)
                coarse = epoch_grid(sampling, a, signs, rate, 2 * args.step)
                success, error = optimal_success(fine), abs(optimal_success(fine) - optimal_success(coarse))
                alpha, beta = tradeoff_vertices(fine, epochs)
                found[sampling] = (success, error, largest_shortfall(alpha, beta, accountant.f))
        else:
            shift = signs[0] - signs[1]  # the sum's shift between the worlds per participation, in units of a
            shuffled_mu = shift * a * epochs / np.sqrt(steps)
            poisson = poisson_sum_success(a, signs, rate, steps)
            found = {"shuffled": (float(norm.cdf(shuffled_mu / 2)), 0.0, float("nan") if accountant is None else
                                  largest_shortfall(*gaussian_vertices(shuffled_mu), accountant.f)),
                     "poisson": (poisson, 0.0, float("nan"))}
        print(f"{game} ({view}; bound {bound:.5f}):")
        for sampling, (success, error, shortfall) in found.items():
            needed = trials_to_catch(success - error, bound)
            verdict = ("at or below the bound" if needed is None else
                       f"a catch needs {'' if needed[1] else 'about '}{needed[0]:,} audit trials")
            curve = ("" if np.isnan(shortfall) else
                     f"; curve {'below' if shortfall > 0 else 'within'} the claim's by at most {max(shortfall, 0):.2e}")
            print(f"  {sampling}: optimal success {success:.5f} ± {error:.1e}, {verdict}{curve}")


if __name__ == "__main__":
    main()
