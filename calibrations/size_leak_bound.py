"""The miss probability of the Opacus size-leak test, bounded from the attack score's exact law
(tests/integrations/test_opacus.py, ``test_the_size_leak_of_the_tutorial_loop_is_caught_by_the_default_games``;
docs/user_training.md, "How many trials").

The loop (tests/integrations/opacus_loops.py ``train``: a linear module, one epoch of Poisson batches at p = 0.01
on n = 999 records, lr 0.5, C = 1) divides the noisy sum by int(|D|·p): B = 10 with the membership canary, 9
without. The membership game's ``noise_scale`` attack reads the weights on the K = 256 appended noise-only columns
(2 classes: 512 weights), which no record has a value in: each is its fixed start W₀ minus lr·Σ_t ξ_t/B with
ξ_t ~ N(0, z²C²) i.i.d., so ``Σ W² = b_B²·χ'²_512(ΣW₀²/b_B²)`` with b_B = lr·z·C·√T/B, and the score
``−log b_B − ½ log(χ'²/512)`` has an exact law in each world (:class:`ScoreLaw`).

The gate fits its decision rule (orientation and threshold, :func:`fit_decision_rule`) on the selection trials
and judges the rule's successes k on the E evaluation trials at α/8 against the claim's bound 0.5526: a miss is
k < k_E. Given the rule, k ~ Bin(E, s) for the rule's success s on the evaluation trials' secrets, so
P[miss | s] ≤ h(s) = P[Bin(E, s) < k_E]; for a grid s₁ < … < s_J,

    P[miss] ≤ h(s_J) + Σ_j P[s < s_j]·(h(s_{j−1}) − h(s_j)),  h(s₀) = 1,

with P[s < s_j] replaced by its Clopper–Pearson upper bound (confidence 1 − γ/J each, so 1 − γ jointly) from F
fits of the gate's own rule to selection scores drawn from the law, each fit's s exact from the law's CDF. The
vectorised fit (:func:`fit_two_candidates`) is checked against :func:`fit_decision_rule` before use.

``--check-law TRIALS`` instead runs the real loop's membership game (seed 11) and compares its scores with the law
(Kolmogorov–Smirnov in each world) and the success of rules fitted on its selection trials with the law's.

Run ``python -m calibrations.size_leak_bound`` (10⁶ fits at 110 trials, seed 4: the test's; tens of minutes) or
``python -m calibrations.size_leak_bound --check-law 1000`` (the real loop, about ten minutes).
"""

from __future__ import annotations

import argparse
import math
import warnings
from dataclasses import dataclass

import numpy as np
from scipy import stats

from fdp_audit.auditing.decision import _finite, fit_decision_rule, selection_split
from fdp_audit.auditing.stats import lower_confidence_bound

LR, CLIP_NORM, NOISE_COLUMNS = 0.5, 1.0, 256  # opacus_loops.py's learning rate, C, the game's noise-only columns
BOUND, LEVEL = 0.5525909005421205, 1e-3 / 8  # the membership game's bound there; α/m of the test's audit
GRID_STEP = 0.01


@dataclass(frozen=True)
class ScoreLaw:
    """The noise_scale score's law in the two worlds (index 0: the canary absent, B = 9; 1: present, B = 10).

    Attributes:
        df: the noise-only weights' count (the χ'²'s degrees of freedom).
        scales: b_B in each world.
        noncentralities: ΣW₀²/b_B² in each world.
    """

    df: int
    scales: tuple[float, float]
    noncentralities: tuple[float, float]

    @classmethod
    def of(cls, noise_multiplier: float, steps: int, start_square_sum: float, df: int,
           batches: tuple[int, int] = (9, 10)) -> ScoreLaw:
        """The law of a loop of this noise multiplier and steps.

        Args:
            noise_multiplier: z.
            steps: T.
            start_square_sum: ΣW₀² over the noise-only weights.
            df: their count.
            batches: B without and with the canary.

        Returns:
            The law.
        """
        scales = tuple(LR * noise_multiplier * CLIP_NORM * math.sqrt(steps) / b for b in batches)
        return cls(df, scales, tuple(start_square_sum / s**2 for s in scales))

    def sample(self, labels: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """One score per label, drawn from its world's law.

        Args:
            labels: each trial's world.
            rng: the draws' generator.

        Returns:
            The scores.
        """
        out = np.empty(labels.shape)
        for world in (0, 1):
            mask = labels == world
            x = stats.ncx2.rvs(self.df, self.noncentralities[world], size=int(mask.sum()), random_state=rng)
            out[mask] = -math.log(self.scales[world]) - 0.5 * np.log(x / self.df)
        return out

    def cdf(self, world: int, t: np.ndarray) -> np.ndarray:
        """P[score ≤ t] in ``world``: score ≤ t ⟺ χ'² ≥ df·exp(−2(t + log b)).

        Args:
            world: 0 (absent) or 1 (present).
            t: thresholds.

        Returns:
            The probabilities.
        """
        return stats.ncx2.sf(self.df * np.exp(-2 * (t + math.log(self.scales[world]))), self.df,
                             self.noncentralities[world])


def score_law(rows: int, seed: int, trials: int) -> tuple[ScoreLaw, np.ndarray]:
    """The law of the loop's membership game on ``rows`` records at ``seed``, and its first ``trials`` secrets
    (1: the canary in).

    Args:
        rows: the loop's n.
        seed: the audit's seed.
        trials: the audit's trials.

    Returns:
        ``(law, secrets)``.
    """
    from fdp_audit.auditing.games import MembershipGame
    from fdp_audit.data.prepare import prepare_data
    from fdp_audit.integrations.opacus import claimed_config
    from tests.integrations.test_opacus import opacus_loop_config

    config = opacus_loop_config("train", rows, trials, seed, ("membership",), alpha=1e-3)
    data = prepare_data(config.data, config.seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        claimed, _ = claimed_config(config, data)
    game = MembershipGame()
    setup = game.setup(claimed, data)
    start = setup.problem.initial_params["weight"].double().numpy()[:, -NOISE_COLUMNS:]
    mechanism = claimed.mechanism
    labels = np.asarray(game.secrets(claimed, setup, game.trial_indices(trials))).astype(int)
    law = ScoreLaw.of(mechanism.noise_multiplier, mechanism.steps, float((start**2).sum()), start.size)
    return law, labels


def fit_two_candidates(scores: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`fit_decision_rule` on candidates (absent: 0, present: s), for many fits at once (rows of
    ``scores``): the orientation o and offset b of each fit, which guesses present iff o·s + b > 0.

    Args:
        scores: the present candidate's scores, shape (F, R).
        labels: the trials' secrets, shape (R,).

    Returns:
        ``(o, b)``, each of shape (F,).
    """
    fits = scores.shape[0]
    rows = np.arange(fits)

    def successes(o: np.ndarray, b: np.ndarray) -> np.ndarray:
        guesses = np.argmax(np.stack([np.zeros_like(scores), _finite(o[:, None] * scores) + b[:, None]], 2), 2)
        return (guesses == labels).sum(1)

    best_o, best_b = np.ones(fits), np.zeros(fits)
    best_k = successes(best_o, best_b)
    for orientation in (1.0, -1.0):
        t = -_finite(orientation * scores)  # present is guessed iff b > t
        order = np.argsort(t, axis=1, kind="stable")
        t_sorted = np.take_along_axis(t, order, 1)
        ordered = np.take_along_axis(np.broadcast_to(labels, t.shape), order, 1)
        gained = np.concatenate([np.zeros((fits, 1)), np.cumsum(ordered == 1, 1)], 1)
        kept = np.concatenate([np.cumsum((ordered == 0)[:, ::-1], 1)[:, ::-1], np.zeros((fits, 1))], 1)
        best = np.argmax(gained + kept, 1)
        n = t.shape[1]
        lower = t_sorted[rows, np.clip(best - 1, 0, n - 1)]
        upper = t_sorted[rows, np.clip(best, 0, n - 1)]
        b = np.where(best == 0, t_sorted[:, 0] - 1.0, np.where(best == n, t_sorted[:, -1] + 1.0, (lower + upper) / 2))
        o = np.full(fits, orientation)
        k = successes(o, b)
        better = k > best_k
        best_o, best_b, best_k = np.where(better, o, best_o), np.where(better, b, best_b), np.where(better, k, best_k)
    return best_o, best_b


def check_two_candidate_fit(fits: int = 2000, trials: int = 60, seed: int = 0) -> None:
    """:func:`fit_two_candidates` gives :func:`fit_decision_rule`'s rule on random scores (ties included).

    Args:
        fits: the random score sets.
        trials: the trials of each.
        seed: their generator's seed.
    """
    rng = np.random.default_rng(seed)
    labels = (rng.random(trials) < 0.5).astype(int)
    scores = rng.normal(size=(fits, trials)) + labels * rng.choice([-1, 0, 0.1, 3], size=(fits, 1))
    scores[:10] = np.round(scores[:10])
    o, b = fit_two_candidates(scores, labels)
    for i in range(fits):
        rule = fit_decision_rule(np.stack([np.zeros(trials), scores[i]], 1), labels)
        assert (rule.orientation, rule.offsets[0], rule.offsets[1]) == (o[i], 0, b[i]), (i, rule, o[i], b[i])


def rule_success(law: ScoreLaw, o: np.ndarray, b: np.ndarray, evaluation: np.ndarray) -> np.ndarray:
    """Each rule's exact success on the evaluation trials' secrets: it guesses present iff o·s + b > 0, that is
    s > −b (o = 1) or s < b (o = −1).

    Args:
        law: the score's law.
        o: the rules' orientations.
        b: their offsets.
        evaluation: the evaluation trials' secrets.

    Returns:
        Each rule's success.
    """
    t = np.where(o == 1, -b, b)
    absent_right = np.where(o == 1, law.cdf(0, t), 1 - law.cdf(0, t))
    present_right = np.where(o == 1, 1 - law.cdf(1, t), law.cdf(1, t))
    present = int(evaluation.sum())
    return ((len(evaluation) - present) * absent_right + present * present_right) / len(evaluation)


def simulated_successes(law: ScoreLaw, labels: np.ndarray, fits: int, rng: np.random.Generator,
                        block: int = 20_000) -> np.ndarray:
    """The success s of ``fits`` rules, each fitted on selection scores drawn from the law.

    Args:
        law: the score's law.
        labels: the audit's secrets (its selection and evaluation trials).
        fits: how many rules.
        rng: the draws' generator.
        block: the fits drawn at once.

    Returns:
        Each rule's success on the evaluation trials.
    """
    selection, evaluation = selection_split(len(labels))
    chosen = labels[selection]
    out = []
    for start in range(0, fits, block):
        m = min(block, fits - start)
        scores = law.sample(np.tile(chosen, m), rng).reshape(m, len(chosen))
        out.append(rule_success(law, *fit_two_candidates(scores, chosen), labels[evaluation]))
    return np.concatenate(out)


def miss_bound(successes: np.ndarray, trials: int, confidence: float, bound: float = BOUND, level: float = LEVEL,
               top: float = 0.95, step: float = GRID_STEP) -> tuple[float, int, int]:
    """The grid bound on P[miss] from simulated fits' successes (module docstring).

    Args:
        successes: the fitted rules' successes.
        trials: the audit's trials (half evaluate).
        confidence: γ, the joint error of the Clopper–Pearson upper bounds.
        bound: the claim's bound the rate is judged against.
        level: the rate's level α/m.
        top: the grid's last point s_J.
        step: the grid's step.

    Returns:
        ``(bound, k_E, E)``.
    """
    evaluation = trials // 2
    k = next(k for k in range(evaluation + 1) if lower_confidence_bound(k, evaluation, level) > bound)
    grid = np.arange(math.ceil(k / evaluation / step - 1e-9) * step, top + step / 2, step)
    fits = len(successes)

    def upper(below: int) -> float:
        return 1.0 if below == fits else float(stats.beta.ppf(1 - confidence / len(grid), below + 1, fits - below))

    h = [1.0, *(float(stats.binom.cdf(k - 1, evaluation, s)) for s in grid)]
    total = h[-1] + sum(upper(int((successes < s).sum())) * (h[j] - h[j + 1]) for j, s in enumerate(grid))
    return total, k, evaluation


def check_law(trials: int, seed: int = 11, rows: int = 999) -> None:
    """The real loop's membership game against the law: KS in each world, and rules fitted on the real
    selection scores (all of them, and disjoint blocks of 52 and 60) evaluated on the real evaluation trials.

    Args:
        trials: the real audit's trials.
        seed: its seed.
        rows: the loop's n.
    """
    from calibrations.matrix_cells import played_audit
    from tests.integrations.test_opacus import opacus_loop_config

    config = opacus_loop_config("train", rows, trials, seed, ("membership",), alpha=1e-3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        records = played_audit(config)[1]
    record = records["membership"]
    labels, scores = np.asarray(record.labels).astype(int), np.asarray(record.scores["noise_scale"])[:, 1]
    law, expected = score_law(rows, seed, trials)
    assert (expected == labels).all()
    for world in (0, 1):
        found = stats.kstest(scores[labels == world], lambda t, w=world: law.cdf(w, t))
        print(f"world {world}: {int((labels == world).sum())} real scores, KS D = {found.statistic:.4f}, "
              f"p = {found.pvalue:.3f}")
    selection, evaluation = selection_split(trials)
    for size in (len(selection), 60, 52):
        real = []
        for start in range(0, len(selection) - size + 1, size):
            chosen = selection[start:start + size]
            o, b = fit_two_candidates(scores[chosen][None], labels[chosen])
            guess = o[0] * scores[evaluation] + b[0] > 0
            real.append(int((guess == labels[evaluation].astype(bool)).sum()))
        print(f"rules fitted on {size} real selection trials: {sorted(real)} of {len(evaluation)} right")


def main(argv: list[str] | None = None) -> None:
    """The command line (module docstring).

    Args:
        argv: the arguments (None: ``sys.argv``).
    """
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=110, help="the audit's trials")
    parser.add_argument("--seed", type=int, default=4, help="the audit's seed (its secrets)")
    parser.add_argument("--fits", type=int, default=1_000_000)
    parser.add_argument("--confidence", type=float, default=1e-4)
    parser.add_argument("--check-law", type=int, metavar="TRIALS", help="compare a real calibration with the law")
    args = parser.parse_args(argv)
    if args.check_law:
        check_law(args.check_law)
        return
    check_two_candidate_fit()
    law, labels = score_law(999, args.seed, args.trials)
    successes = simulated_successes(law, labels, args.fits, np.random.default_rng(1000 + args.trials))
    bound, k, evaluation = miss_bound(successes, args.trials, args.confidence)
    h = stats.binom.cdf(k - 1, evaluation, successes)
    print(f"{args.trials} trials (seed {args.seed}): a catch needs {k} of {evaluation}; {args.fits:,} fits, success "
          f"median {np.median(successes):.4f}, 1 % below {np.quantile(successes, 0.01):.4f}; miss ≤ {bound:.2e} "
          f"(confidence 1 − {args.confidence:g}); the fits' average miss {h.mean():.2e}")


if __name__ == "__main__":
    main()
