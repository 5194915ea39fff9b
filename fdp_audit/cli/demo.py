"""`fdp-audit demo` (docs/design.md, docs/files.md): the embedded-default end-to-end run → reports/demo/."""

from __future__ import annotations

import argparse
import shlex
import sys
import time

from fdp_audit.cli import EXIT_OK


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``fdp-audit demo``: train, audit and report on the bundled Adult data.

    Args:
        subparsers: the ``fdp-audit`` parser's subcommands; its handler is :func:`run`.
    """
    parser = subparsers.add_parser("demo", help="train, audit and report on the bundled Adult data")
    parser.add_argument("--quick", action="store_true", help="fewer trials and rows: under a minute")
    parser.add_argument("--out", help="output folder (default: reports/demo)")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Run ``fdp-audit demo``: the demo audit through the library, its files written, and what it found printed line by
    line.

    Args:
        args: the parsed command line: ``--quick`` and ``--out``.

    Returns:
        The exit code, 0 (the verdict is printed, not returned).

    Raises:
        BadInputError: bad input, naming the flag, field or file (exit code 2 through :func:`fdp_audit.cli.main`).
    """
    from fdp_audit import api
    from fdp_audit.auditing.checkpoint_audit import summary_lines
    from fdp_audit.auditing.games import report_view
    from fdp_audit.auditing.labels import attack_words
    from fdp_audit.auditing.one_run.evaluation import summary_lines as one_run_lines
    from fdp_audit.auditing.sanity import sanity_warnings
    from fdp_audit.report.terminal import verdict_lines

    start = time.time()
    config = api.demo_config(args.quick)
    mech = config.mechanism
    print(f"fdp-audit demo: {mech.name} on Adult, protected {', '.join(config.data.protected)}, "
          f"target ε={mech.target_epsilon:g} at δ={mech.delta:g}, {config.audit.trials} trials per game")
    result = api.demo(quick=args.quick, out_dir=args.out, command=shlex.join(["fdp-audit", *sys.argv[1:]]))
    report = result.write(junit=False).report
    results = result.results
    m = results["mechanism"]
    print(f"accounting: z={m['noise_multiplier']:.3f}, p={m['sample_rate']:g}, T={m['steps']} → "
          f"ε={m['epsilon']:.3f} at δ={m['delta']:g}")
    for row in results["utility"]["rows"]:
        print(f"utility: {row['mechanism']:<12} test accuracy {row['accuracy']:.4f}")
    for game in results["games"]:
        for attack in game["attacks"]:
            view = report_view(game["game"], game.get("canary"))
            if view is not None and view.layout == "attribute":
                print(attribute_line(game, attack))
            else:
                claimed = attack["epsilon_claimed"]
                claimed_text = "∞" if claimed is None else f"{claimed:.3f}"
                print(f"{game['game']} game: {attack_words(attack)}: ε lower bound "
                      f"{attack['epsilon_lower_bound']:.3f} in the claimed family, "
                      f"{attack['epsilon_lower_bound_cp']:.3f} assumption-free "
                      f"(claimed {claimed_text}) {attack['status']}")
    print("\n".join(summary_lines(results["checkpoint_audit"])))
    one_run = results["one_run"]
    print(f"one-run audit: {one_run['canaries']} canaries ({one_run['game']} game), {one_run['status']}")
    print("\n".join(one_run_lines(one_run)))
    verdict = results["verdict"]
    print("VERDICT: " + "\n".join(verdict_lines(verdict, sanity_warnings(results))))
    print(f"report: {report}  ({time.time() - start:.0f} s)")
    return EXIT_OK


def attribute_line(game: dict, attack: dict) -> str:
    """One attack of an attribute game for the command line. A rate above the bound that still passes says why:
    the verdict compares the rate's lower confidence bound (Clopper–Pearson, docs/statistics.md) with the bound.

    Args:
        game: the game's section of results.json (its ``canary``).
        attack: one attack's row of that section (rate, Ball, bound, lower confidence bound, status).

    Returns:
        The line, without a newline.
    """
    from fdp_audit.auditing.labels import attack_words

    status = attack["status"]
    if status == "pass" and attack["rate"] > attack["bound"]:
        status = (f"pass (the rate is above the bound, but its lower confidence bound {attack['lower_bound']:.3f} is "
                  "not: the excess is within chance at these trials)")
    return (f"attribute ({game['canary']}): {attack_words(attack)}: success {attack['rate']:.3f} "
            f"(Ball {attack['ball']:.3f}, bound {attack['bound']:.3f}) {status}")
