"""A calibrated soundness-matrix cell's miss probability for the test's own decision rule, resampled from a pool.

A calibration (:mod:`calibrations.matrix_cells`) bounds the success of the rule it fitted on ≥ 1,000 selection
trials; the test fits its own on its selection half (a few hundred trials), whose success is lower and spread out.
This module plays the cell's audit once on another seed with many trials (the pool: each trial's secret and every
attack's scores), splits the pool by trial index into a fitting part A (even positions) and a held-out part B (odd
positions), and for each test trial count N and each rate comparison the test asserts:

* draws F selection halves as the test's own: the test's secrets at its seed on its selection positions
  (:func:`fdp_audit.auditing.decision.selection_split`), each trial's scores drawn without replacement from A's
  trials of the same secret; fits the gate's rule (:func:`calibrations.size_leak_bound.fit_two_candidates`, checked
  here against :func:`fdp_audit.auditing.decision.fit_decision_rule` on the pool's own score columns);
* estimates each rule's success s on the test's evaluation secrets from B: B's trials of each secret in the
  proportions of the test's evaluation trials (the most B holds), so that its successes X are a sum of independent
  Bernoulli trials of mean s; s⁻ is X's Clopper–Pearson lower bound at confidence 1 − 1e-4 (by Hoeffding's
  theorem on such sums, no less valid than for a binomial), as the calibration bounded its own rule's;
* bounds P[miss] = E[P[Bin(E, s) < k_E]] with :func:`calibrations.size_leak_bound.miss_bound` from the F values
  of s⁻ (the grid bound, its P[s < s_j] at joint confidence 1 − 1e-4 over the fits), k_E the fewest evaluation
  successes the gate judges above the bound at the test's level α/m;
* plays the whole test F times (its selection from A as above, its evaluation trials drawn from B the same way)
  and counts the misses: the direct resampled miss.

What is empirical: the pool stands for the law of one trial at the pool's seed (the cell's canary and data at that
seed, as in the calibration), the fits' rules are fitted to draws from A's empirical law, and s⁻ bounds each rule's
success at confidence 1 − 1e-4 separately (the fits share B, so not jointly). A test asserting several comparisons
misses with probability at most the sum of theirs.

Commands (seed 11 pools, F = 100,000; a pool is saved to and reused from ``--pool-file``; the cells' tests quote
theirs):

* ``python -m calibrations.own_rule_bound user-loop realised_batch --pool 16000 --fits 100000 --test-trials 552``
* ``python -m calibrations.own_rule_bound config configs/opacus_misuse.yaml --games membership --attacks prior
  canary_logit --pool 8000 --fits 100000 --test-trials 624``
* ``python -m calibrations.own_rule_bound membership quiet_dp_sgd --pool 6000 --fits 100000 --test-trials 576``
* ``python -m calibrations.own_rule_bound user-loop half_noise --pool 10000 --fits 100000 --test-trials 1406``
  (the whole test resampled 100,000 times: its misses)

``--test-trials`` takes several counts (one pool, each count's bound): the miss is not monotone in the trials.
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats

from calibrations.matrix_cells import CONFIDENCE, cell_config, played_audit
from calibrations.size_leak_bound import fit_two_candidates, miss_bound
from fdp_audit.auditing.decision import fit_decision_rule, selection_split
from fdp_audit.auditing.games import GAMES
from fdp_audit.auditing.gate import level_per_comparison, statistical_count
from fdp_audit.auditing.stats import lower_confidence_bound
from fdp_audit.config import Config

GRID_TOP, GRID_STEP = 0.995, 0.002  # the grid of successes (the cells' reach 0.99)


@dataclass(frozen=True)
class PooledComparison:
    """One rate comparison's pool: the secrets and the attack's two candidate scores of every pool trial.

    Attributes:
        id: the comparison's id.
        game: its game.
        bound: the claim's bound it is judged against.
        labels: the pool trials' secrets (0 absent, 1 present).
        scores: their scores, shape (P, 2).
    """

    id: str
    game: str
    bound: float
    labels: np.ndarray
    scores: np.ndarray

    def part(self, positions: np.ndarray, world: int) -> np.ndarray:
        """The score differences s₁ − s₀ of the pool trials at ``positions`` whose secret is ``world``.

        Args:
            positions: pool positions.
            world: the secret.

        Returns:
            The differences, in trial order.
        """
        chosen = positions[self.labels[positions] == world]
        return self.scores[chosen, 1] - self.scores[chosen, 0]


def play_pool(config: Config, trials: int, seed: int) -> tuple[list[PooledComparison], int]:
    """The cell's audit on ``seed`` with ``trials`` trials: each rate comparison's pool and the audit's m.

    Args:
        config: the cell's audit as its test runs it.
        trials: the pool's trials.
        seed: the pool's seed.

    Returns:
        ``(pools, m)``.
    """
    pool_config = config.with_overrides({"seed": seed, "audit.trials": trials})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results, records = played_audit(pool_config)
    pools = []
    for row in results["comparisons"]:
        if row["kind"] != "rate":
            continue
        record = records[row["game"]]
        labels = np.asarray(record.labels).astype(int)
        assert (labels == audit_secrets(pool_config, row["game"], trials)).all(), row["id"]
        scores = np.asarray(record.scores[row["attack"]], float)
        assert scores.shape == (trials, 2) and np.isfinite(scores).all(), (row["id"], scores.shape)
        pools.append(PooledComparison(row["id"], row["game"], float(row["bound"]), labels, scores))
    return pools, statistical_count(results["comparisons"])


def save_pool(path: Path, pools: list[PooledComparison], m: int, seconds: float) -> None:
    """Write the pools to ``path`` (an .npz).

    Args:
        path: the file.
        pools: the comparisons' pools.
        m: the audit's statistical comparisons.
        seconds: the pool's playing time.
    """
    meta = {"m": m, "seconds": seconds, "comparisons": [[p.id, p.game, p.bound] for p in pools]}
    arrays = {f"labels{i}": p.labels for i, p in enumerate(pools)} | {f"scores{i}": p.scores
                                                                       for i, p in enumerate(pools)}
    with path.open("wb") as handle:
        np.savez(handle, meta=json.dumps(meta), **arrays)


def load_pool(path: Path) -> tuple[list[PooledComparison], int]:
    """The pools :func:`save_pool` wrote.

    Args:
        path: the file.

    Returns:
        ``(pools, m)``.
    """
    with np.load(path) as saved:
        meta = json.loads(str(saved["meta"]))
        pools = [PooledComparison(i, game, bound, saved[f"labels{k}"], saved[f"scores{k}"])
                 for k, (i, game, bound) in enumerate(meta["comparisons"])]
    return pools, int(meta["m"])


def audit_secrets(config: Config, game: str, trials: int) -> np.ndarray:
    """The secrets of the first ``trials`` trials of ``game`` in ``config``'s audit (they depend on the seed and
    the trial's index alone).

    Args:
        config: the audit.
        game: the game's name.
        trials: how many.

    Returns:
        The secrets.
    """
    played = GAMES[game]()
    return np.asarray(played.secrets(config, None, played.trial_indices(trials))).astype(int)


def draw_rows(values: np.ndarray, count: int, fits: int, rng: np.random.Generator) -> np.ndarray:
    """``fits`` draws of ``count`` of ``values`` without replacement (independent across draws).

    Args:
        values: what is drawn from.
        count: the draw's size.
        fits: how many draws.
        rng: the draws' generator.

    Returns:
        Shape (fits, count).
    """
    if count > len(values):
        raise SystemExit(f"the pool holds {len(values)} trials of a secret the test needs {count} of: a larger pool")
    return values[np.argsort(rng.random((fits, len(values))), axis=1)[:, :count]]


def present_guessed(o: np.ndarray, b: np.ndarray, differences: np.ndarray) -> np.ndarray:
    """Whether each rule (row) guesses present on each difference: o·d + b > 0.

    Args:
        o: the rules' orientations, shape (F,).
        b: their offsets, shape (F,).
        differences: shape (F, R) or (R,).

    Returns:
        Shape (F, R).
    """
    return o[:, None] * differences + b[:, None] > 0


@dataclass(frozen=True)
class OwnRuleFits:
    """F fits of the test's own rule and what became of each.

    Attributes:
        estimate: each rule's success on the matched held-out trials.
        lower: its Clopper–Pearson lower bound.
        direct: each resampled test's evaluation successes.
        held_out: the matched held-out trials.
    """

    estimate: np.ndarray
    lower: np.ndarray
    direct: np.ndarray
    held_out: int


def own_rule_fits(pool: PooledComparison, secrets: np.ndarray, fits: int, rng: np.random.Generator,
                  block: int = 2_000) -> OwnRuleFits:
    """Fit the test's rule on ``fits`` selection halves drawn from the pool's part A and judge each on part B
    (module docstring).

    Args:
        pool: the comparison's pool.
        secrets: the test's secrets (all its trials, at its seed).
        fits: F.
        rng: the draws' generator.
        block: fits drawn at once.

    Returns:
        The fits.
    """
    fitting, held = selection_split(len(pool.labels))
    selection, evaluation = selection_split(len(secrets))
    chosen, judged = secrets[selection], secrets[evaluation]
    counts = [int((judged == w).sum()) for w in (0, 1)]
    a_parts = [pool.part(fitting, w) for w in (0, 1)]
    b_parts = [pool.part(held, w) for w in (0, 1)]
    scale = min(len(b_parts[w]) / counts[w] for w in (0, 1) if counts[w])
    matched = [np.sort(b_parts[w][:int(scale * counts[w])]) for w in (0, 1)]
    held_out = sum(len(part) for part in matched)
    estimate, direct = [], []
    for start in range(0, fits, block):
        m = min(block, fits - start)
        scores = np.empty((m, len(chosen)))
        for w in (0, 1):
            scores[:, chosen == w] = draw_rows(a_parts[w], int((chosen == w).sum()), m, rng)
        o, b = fit_two_candidates(scores, chosen)
        if start == 0:
            check_fits(pool, scores[:50], chosen, o[:50], b[:50], held)
        threshold = np.where(o == 1, -b, b)  # present iff d > t (o = 1) or d < t (o = −1)
        right = np.zeros(m)
        for w, part in enumerate(matched):
            above = len(part) - np.searchsorted(part, threshold, side="right")
            below = np.searchsorted(part, threshold, side="left")
            present = np.where(o == 1, above, below)
            right += present if w == 1 else len(part) - present
        estimate.append(right)
        k = np.zeros(m, int)
        for w in (0, 1):
            guessed = present_guessed(o, b, draw_rows(b_parts[w], counts[w], m, rng))
            k += (guessed if w == 1 else ~guessed).sum(1)
        direct.append(k)
    right = np.concatenate(estimate)
    counts, where = np.unique(right.astype(int), return_inverse=True)
    lower = np.array([lower_confidence_bound(int(x), held_out, CONFIDENCE) for x in counts])[where]
    return OwnRuleFits(right / held_out, lower, np.concatenate(direct), held_out)


def check_fits(pool: PooledComparison, scores: np.ndarray, chosen: np.ndarray, o: np.ndarray, b: np.ndarray,
               held: np.ndarray) -> None:
    """The vectorised fits guess as :func:`fit_decision_rule` fitted on the two score columns does, on the
    held-out pool (the fit on differences equals the fit on the columns up to rounding).

    Args:
        pool: the comparison's pool.
        scores: some fits' selection differences, shape (F', R).
        chosen: the selection secrets.
        o: those fits' orientations.
        b: their offsets.
        held: the held-out positions.
    """
    for i in range(len(scores)):
        rule = fit_decision_rule(np.stack([np.zeros(len(chosen)), scores[i]], 1), chosen)
        ours = present_guessed(o[i:i + 1], b[i:i + 1], scores[i])[0]
        assert (rule.guess(np.stack([np.zeros(len(chosen)), scores[i]], 1)) == ours).all(), i
        columns = pool.scores[held]
        assert (rule.guess(columns) == present_guessed(
            o[i:i + 1], b[i:i + 1], columns[:, 1] - columns[:, 0])[0]).all(), i


def report(pool: PooledComparison, trials: int, secrets: np.ndarray, level: float, fitted: OwnRuleFits
           ) -> dict[str, Any]:
    """One comparison's figures at one trial count.

    Args:
        pool: the comparison's pool.
        trials: the test's trials.
        secrets: the test's secrets.
        level: its level α/m.
        fitted: the fits.

    Returns:
        The row (printed and saved).
    """
    bound, k, evaluation = miss_bound(fitted.lower, trials, CONFIDENCE, pool.bound, level, GRID_TOP, GRID_STEP)
    at_estimate = miss_bound(fitted.estimate, trials, CONFIDENCE, pool.bound, level, GRID_TOP, GRID_STEP)[0]
    misses = int((fitted.direct < k).sum())
    fits = len(fitted.direct)
    return {"id": pool.id, "trials": trials, "present": int(secrets[1::2].sum()), "evaluation": evaluation,
            "needed": k, "fits": fits, "held_out": fitted.held_out,
            "success_median": float(np.median(fitted.estimate)),
            "success_1pc": float(np.quantile(fitted.estimate, 0.01)),
            "lower_median": float(np.median(fitted.lower)), "miss_bound": bound, "miss_bound_at_estimate": at_estimate,
            "average_miss_at_lower": float(stats.binom.cdf(k - 1, evaluation, fitted.lower).mean()),
            "direct_misses": misses,
            "direct_upper": float(stats.beta.ppf(1 - CONFIDENCE, misses + 1, fits - misses))}


def main(argv: list[str] | None = None) -> None:
    """The command line (module docstring).

    Args:
        argv: the arguments (None: ``sys.argv``).
    """
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("kind", choices=["user-loop", "config", "opacus-loop", "membership"])
    parser.add_argument("cell", help="as for calibrations.matrix_cells")
    parser.add_argument("--games", nargs="+")
    parser.add_argument("--attacks", nargs="+")
    parser.add_argument("--alpha", type=float, default=0.05, help="the test's α")
    parser.add_argument("--test-trials", type=int, nargs="+", required=True, help="the test's trial counts")
    parser.add_argument("--only", nargs="+", help="the comparison ids the test asserts (default: every rate)")
    parser.add_argument("--pool", type=int, default=4000, help="the pool's trials")
    parser.add_argument("--pool-seed", type=int, default=11)
    parser.add_argument("--pool-file", type=Path, help="an .npz the pool is read from, or saved to when absent")
    parser.add_argument("--fits", type=int, default=100_000)
    parser.add_argument("--out", type=Path, help="a JSON file for the rows")
    args = parser.parse_args(argv)
    config = cell_config(args.kind, args.cell, args.games, args.attacks, 0, args.alpha)
    if args.pool_file and args.pool_file.exists():
        pools, m = load_pool(args.pool_file)
    else:
        started = time.perf_counter()
        pools, m = play_pool(config, args.pool, args.pool_seed)
        seconds = time.perf_counter() - started
        print(f"{args.cell}: pool of {args.pool} trials on seed {args.pool_seed} in {seconds:.0f} s")
        if args.pool_file:
            save_pool(args.pool_file, pools, m, seconds)
    level = level_per_comparison(args.alpha, m)
    rows = []
    for pool in pools:
        if args.only and pool.id not in args.only:
            continue
        print(f"{pool.id}: pool {len(pool.labels)} trials (half held out), bound {pool.bound:.4f}, level "
              f"{args.alpha}/{m}")
        for trials in args.test_trials:
            secrets = audit_secrets(config, pool.game, trials)
            fitted = own_rule_fits(pool, secrets, args.fits, np.random.default_rng([args.pool_seed, trials]))
            row = report(pool, trials, secrets, level, fitted)
            rows.append(row)
            print(f"  {trials} trials (test seed {config.seed}, {row['present']} of {row['evaluation']} evaluation "
                  f"trials present): a catch needs {row['needed']}; {row['fits']:,} own rules, success median "
                  f"{row['success_median']:.4f}, 1 % below {row['success_1pc']:.4f} (on {row['held_out']} held "
                  f"out; lower bound median {row['lower_median']:.4f}); miss ≤ {row['miss_bound']:.2e} (at the "
                  f"estimates {row['miss_bound_at_estimate']:.2e}; the fits' average at their lower bounds "
                  f"{row['average_miss_at_lower']:.2e}); whole test resampled: {row['direct_misses']} misses in "
                  f"{row['fits']:,} (≤ {row['direct_upper']:.1e} at 1 − {CONFIDENCE:g})")
    if args.out:
        args.out.write_text(json.dumps({"cell": args.cell, "m": m, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
