"""A soundness-matrix cell's power, measured: the cell's own audit on another seed with many trials.

For every rate comparison of the audit (an attack's success on the evaluation trials against the claim's bound),
prints the successes k of n, the bound b, the Clopper–Pearson lower bound s⁻ on the success at confidence
1 − 1e-4, and — at the per-comparison level α/m of the audit the test runs (``--test-comparisons`` m, α = 0.05
unless ``--alpha``) — the fewest audit trials 2·N (the games evaluate half their trials) at which a success of s⁻
is judged above b with probability ≥ 1 − 1e-3 (``evaluation_trials_for_power``), and the miss probability
P[Bin(T/2, s⁻) < k_{T/2}] at the test's trial count T (``--test-trials``). A success at or below the bound is
reported as not seen: no trial count catches it.

The audit runs without its informational sections (accounting curves, utility), as the tests' verdict_only_audit
fixture runs it. Cells:

* ``user-loop FAULT``: tests/auditing/user_loops.py's loop FAULT at the settings of the user-loop matrix
  (tests/auditing/test_soundness.py), its games and attacks unless ``--games``/``--attacks``;
* ``config PATH``: a config file (e.g. configs/opacus_misuse.yaml), with ``--games``/``--attacks``;
* ``opacus-loop FUNCTION:ROWS``: tests/integrations/opacus_loops.py's FUNCTION on ROWS records under
  ``integration: opacus`` (e.g. ``train_twice:195``), the default games of a user's loop unless ``--games``;
* ``membership FAULT``: tests/auditing/third_party_mechanisms.py's FAULT in the membership game alone, at its
  rows, claim and attack in tests/auditing/games/test_membership.py (CAUGHT).

With ``--seeds FIRST LAST`` it instead runs the audit as the test runs it (``--trials`` its trial count) on each
seed from FIRST to LAST and prints each rate comparison's successes and whether the gate found it violated: the
direct check of a calibrated cell, whose rule the test fits on far fewer selection trials than the calibration.

Example: ``python -m calibrations.matrix_cells user-loop no_clip --games attribute --attacks prior likelihood
gradient --trials 4000 --test-trials 232 --test-comparisons 6``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from scipy.stats import binom

from fdp_audit.auditing import runner
from fdp_audit.auditing.gate import statistical_count
from fdp_audit.auditing.stats import evaluation_trials_for_power, lower_confidence_bound
from fdp_audit.config import Config, load_config

CONFIDENCE = 1e-4  # one-sided error of the lower bound on the calibrated success
MISS = 1e-3  # the miss probability a catching test is allowed


def user_loop_cell(fault: str, games: tuple[str, ...] | None, attacks: tuple[str, ...] | None) -> Config:
    """The user-loop matrix's audit of ``fault``: its settings and rows, and its caught games and attacks unless
    given.

    Args:
        fault: a loop of tests/auditing/user_loops.py.
        games: the games played (None: the cell's caught games).
        attacks: the attacks (None: the prior and the cell's).

    Returns:
        The audit's config (seed and trials still to set).
    """
    from tests.auditing.test_soundness import (
        USER_LOOP_CAUGHT,
        USER_LOOP_NOT_CAUGHT,
        USER_LOOP_PASSING,
        user_loop_config,
    )

    if fault in USER_LOOP_CAUGHT:
        settings, rows, _, caught = USER_LOOP_CAUGHT[fault]
    elif fault in USER_LOOP_PASSING:  # its first run's games and attacks
        settings, rows, _, played, played_attacks = USER_LOOP_PASSING[fault][0]
        games, attacks = games or played, attacks or played_attacks
        caught = {}
    elif fault in USER_LOOP_NOT_CAUGHT:
        settings, rows, caught = USER_LOOP_NOT_CAUGHT[fault][0], 100, {}
    else:
        raise SystemExit(f"unknown user loop {fault!r}")
    games = games or tuple(caught)
    attacks = attacks or ("prior", *dict.fromkeys(caught.values()))
    return user_loop_config(fault, settings, rows, 2, games, attacks)


def membership_cell(fault: str) -> Config:
    """The membership test's audit of the third-party DP-SGD ``fault``: its rows, claim, the prior and its attack.

    Args:
        fault: a key of tests/auditing/games/test_membership.py's CAUGHT.

    Returns:
        The audit's config (seed and trials still to set).
    """
    from tests.auditing.games.test_membership import CAUGHT, membership_config
    from tests.conftest import small_config

    if fault not in CAUGHT:
        raise SystemExit(f"unknown third-party fault {fault!r}")
    rows, claim, _, attack = CAUGHT[fault]
    return membership_config(small_config, fault, rows, 2, claim, ("prior", attack))


def cell_config(kind: str, cell: str, games: list[str] | None, attacks: list[str] | None, seed: int,
                alpha: float) -> Config:
    """The audit of a cell named on the command line (module docstring), as its test runs it.

    Args:
        kind: ``user-loop``, ``config``, ``opacus-loop`` or ``membership``.
        cell: the loop's name, the config's path, FUNCTION:ROWS of an Opacus loop, or a third-party fault.
        games: the games played (None: the cell's).
        attacks: the attacks (None: the cell's).
        seed: an Opacus loop's seed (the others keep their test's).
        alpha: an Opacus loop's α.

    Returns:
        The audit's config (trials still to set).
    """
    games = tuple(games) if games else None
    attacks = tuple(attacks) if attacks else None
    if kind == "user-loop":
        return user_loop_cell(cell, games, attacks)
    if kind == "membership":
        return membership_cell(cell)
    if kind == "opacus-loop":
        from tests.integrations.test_opacus import opacus_loop_config

        function, rows = cell.split(":")
        config = opacus_loop_config(function, int(rows), 2, seed, games, alpha)
    else:
        config = load_config(Path(cell)).with_overrides({"audit.games": games} if games else {})
    return config.with_overrides({"audit.attacks": attacks} if attacks else {})


def quiet_audit(config: Config) -> dict[str, Any]:
    """``run_audit`` without the accounting and utility sections (neither enters a comparison).

    Args:
        config: the audit's config.

    Returns:
        The audit's results.
    """
    return played_audit(config)[0]


def played_audit(config: Config) -> tuple[dict[str, Any], dict[str, Any]]:
    """:func:`quiet_audit`, with each played game's record (its trials' secrets and every attack's scores).

    Args:
        config: the audit's config.

    Returns:
        ``(results, records)``: the audit's results and each game's record by its name.
    """
    records: dict[str, Any] = {}
    judge = runner.judge_games

    def capture(played, *args, **kwargs):
        records.update({game.name: record for game, record in played})
        return judge(played, *args, **kwargs)

    runner.accounting_section = lambda claim: {}
    runner.utility_section = lambda config, data, claim: {}
    runner.judge_games = capture
    try:
        return runner.run_audit(config, None), records
    finally:
        runner.judge_games = judge


def power_rows(comparisons: list[dict[str, Any]], level: float, test_trials: int | None) -> list[dict[str, Any]]:
    """Each rate comparison's calibrated success, lower bound and the trials a catch at miss ≤ MISS needs.

    Args:
        comparisons: the calibration's comparison rows.
        level: the test's per-comparison level α/m.
        test_trials: the test's trial count (None: no miss probability).

    Returns:
        One row per rate comparison (module docstring).
    """
    rows = []
    for row in comparisons:
        if row["kind"] != "rate":
            continue
        k, n, bound = row["successes"], row["trials"], row["bound"]
        lower = lower_confidence_bound(k, n, CONFIDENCE)
        needed = evaluation_trials_for_power(lower, bound, level, MISS) if lower > bound else None
        miss = None
        if test_trials is not None:
            half = test_trials // 2
            k_needed = next((j for j in range(half + 1) if lower_confidence_bound(j, half, level) > bound), None)
            miss = 1.0 if k_needed is None else float(binom.cdf(k_needed - 1, half, lower))
        rows.append({"id": row["id"], "successes": k, "trials": n, "bound": bound, "lower": lower,
                     "audit_trials_needed": None if needed is None else 2 * needed, "miss_at_test_trials": miss,
                     "seen": k / n > bound})
    return rows


def sweep(config: Config, seeds: range) -> None:
    """The audit of ``config`` on each seed: every rate comparison's successes, and whether it was violated.

    Args:
        config: the audit as the test runs it.
        seeds: the seeds.
    """
    from fdp_audit.errors import BadInputError

    for seed in seeds:
        try:
            results = quiet_audit(config.with_overrides({"seed": seed}))
        except BadInputError as error:  # e.g. a tiny synthetic table with one label on this seed
            print(f"seed {seed}: refused: {error}")
            continue
        violated = set(results["verdict"]["violations"])
        print(f"seed {seed}: " + "; ".join(f"{row['id']} {row['successes']}/{row['trials']}"
                                           f"{' violated' if row['id'] in violated else ''}"
                                           for row in results["comparisons"] if row["kind"] == "rate"))


def main(argv: list[str] | None = None) -> None:
    """The command line (module docstring).

    Args:
        argv: the arguments (None: ``sys.argv``).
    """
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("kind", choices=["user-loop", "config", "opacus-loop", "membership"])
    parser.add_argument("cell", help="the user loop's name, the config's path, FUNCTION:ROWS of an Opacus loop, or "
                                     "a third-party fault")
    parser.add_argument("--games", nargs="+")
    parser.add_argument("--attacks", nargs="+")
    parser.add_argument("--trials", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--test-trials", type=int, help="the test's trial count, for its miss probability")
    parser.add_argument("--test-comparisons", type=int,
                        help="the Bonferroni m of the test's audit (default: this audit's statistical comparisons)")
    parser.add_argument("--out", type=Path, help="a JSON file for the raw comparison rows and the table")
    parser.add_argument("--seeds", type=int, nargs=2, metavar=("FIRST", "LAST"), help="the direct check's seeds")
    args = parser.parse_args(argv)
    config = cell_config(args.kind, args.cell, args.games, args.attacks, args.seed, args.alpha)
    if args.seeds:
        sweep(config.with_overrides({"audit.trials": args.trials}), range(args.seeds[0], args.seeds[1] + 1))
        return
    config = config.with_overrides({"seed": args.seed, "audit.trials": args.trials})
    started = time.perf_counter()
    results = quiet_audit(config)
    seconds = time.perf_counter() - started
    m = args.test_comparisons or statistical_count(results["comparisons"])
    table = power_rows(results["comparisons"], args.alpha / m, args.test_trials)
    print(f"{args.cell}: {args.trials} trials, seed {args.seed}, {seconds:.0f} s; level α/m = {args.alpha}/{m}")
    for row in table:
        needed = row["audit_trials_needed"]
        print(f"  {row['id']}: {row['successes']}/{row['trials']} against {row['bound']:.4f}, lower "
              f"{row['lower']:.3f}; " + ("not seen (at or below the bound)" if not row["seen"] else
                                         f"audit trials needed {needed}" if needed else "lower bound at or below "
                                         "the bound: no count suffices at this calibration")
              + ("" if row["miss_at_test_trials"] is None else f"; miss at {args.test_trials}: "
                 f"{row['miss_at_test_trials']:.2e}"))
    if args.out:
        args.out.write_text(json.dumps({"cell": args.cell, "seed": args.seed, "trials": args.trials,
                                        "seconds": seconds, "level": args.alpha / m, "table": table,
                                        "comparisons": results["comparisons"]}, indent=1, default=str))


if __name__ == "__main__":
    main()
