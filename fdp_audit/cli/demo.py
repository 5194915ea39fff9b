"""`fdp-audit demo` (docs/design.md, docs/files.md): the embedded-default end-to-end run → reports/demo/."""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from importlib import resources
from pathlib import Path

from fdp_audit.cli import EXIT_OK

ONE_RUN_CANARIES = 1000


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("demo", help="train, audit and report on the bundled Adult data")
    parser.add_argument("--quick", action="store_true", help="fewer trials and rows: under a minute")
    parser.add_argument("--out", help="output folder (default: reports/demo)")
    parser.set_defaults(handler=run)


def demo_config(quick: bool):
    import yaml

    from fdp_audit.config import config_from_dict

    config = config_from_dict(yaml.safe_load(resources.files("fdp_audit").joinpath("demo.yaml").read_text()))
    if quick:
        config = config.with_overrides({"data.max_rows": 6000, "mechanism.steps": 100, "mechanism.sample_rate": 0.04,
                                        "audit.trials": 256})
    return config


def run(args: argparse.Namespace) -> int:
    from fdp_audit.atomic_io import all_or_nothing
    from fdp_audit.audit.checkpoint_audit import summary_lines, train_and_attack
    from fdp_audit.audit.one_run.canaries import audit_with_canaries, train_with_canaries
    from fdp_audit.audit.one_run.evaluation import summary_lines as one_run_lines
    from fdp_audit.audit.results import write_results
    from fdp_audit.audit.runner import run_audit
    from fdp_audit.audit.sanity import sanity_warnings
    from fdp_audit.data.prepare import prepare_data
    from fdp_audit.report.render import write_report
    from fdp_audit.report.terminal import verdict_lines

    start = time.time()
    config = demo_config(args.quick)
    out = Path(args.out or config.report.out_dir)
    mech = config.mechanism
    print(f"fdp-audit demo: {mech.name} on Adult, protected {', '.join(config.data.protected)}, "
          f"target ε={mech.target_epsilon:g} at δ={mech.delta:g}, {config.audit.trials} trials per game")
    results = run_audit(config, out, command=shlex.join(["fdp-audit", *sys.argv[1:]]))
    # : the trained model's real records too (informational; the games above give the verdict)
    data = prepare_data(config.data, config.seed)
    results["checkpoint_audit"] = train_and_attack(config, data, out / "model.pt", config.audit.alpha)
    # one training with gradient canaries, judged on its own (shown beside the games' verdict)
    canaries = 500 if args.quick else ONE_RUN_CANARIES
    trained = train_with_canaries(config, data, canaries, out / "one_run" / "model.pt")
    results["one_run"] = audit_with_canaries(trained.checkpoint, trained.manifest, config.audit.alpha)
    with all_or_nothing():
        write_results(out / "results.json", results)
        report = write_report(results, out / "report.html")
    m = results["mechanism"]
    print(f"accounting: z={m['noise_multiplier']:.3f}, p={m['sample_rate']:g}, T={m['steps']} → "
          f"ε={m['epsilon']:.3f} at δ={m['delta']:g}")
    for row in results["utility"]["rows"]:
        print(f"utility: {row['mechanism']:<12} test accuracy {row['accuracy']:.4f}")
    for game in results["games"]:
        for attack in game["attacks"]:
            if game["game"] == "attribute":
                print(attribute_line(game, attack))
            else:
                claimed = attack["epsilon_claimed"]
                claimed_text = "∞" if claimed is None else f"{claimed:.3f}"
                print(f"{game['game']} game: {attack['attack']:<24} ε lower bound "
                      f"{attack['epsilon_lower_bound']:.3f} in the claimed family, "
                      f"{attack['epsilon_lower_bound_cp']:.3f} assumption-free "
                      f"(claimed {claimed_text}) {attack['status']}")
    print("\n".join(summary_lines(results["checkpoint_audit"])))
    print("\n".join(one_run_lines(results["one_run"])) + f" — {results['one_run']['status']}")
    verdict = results["verdict"]
    print("VERDICT: " + "\n".join(verdict_lines(verdict, sanity_warnings(results))))
    print(f"report: {report}  ({time.time() - start:.0f} s)")
    return EXIT_OK


def attribute_line(game: dict, attack: dict) -> str:
    """One attack of an attribute game for the command line. A rate above the bound that still passes says why:
    the verdict compares the rate's lower confidence bound (Clopper–Pearson, docs/statistics.md) with the bound."""
    status = attack["status"]
    if status == "pass" and attack["rate"] > attack["bound"]:
        status = (f"pass (the rate is above the bound, but its lower confidence bound {attack['lower_bound']:.3f} is "
                  "not: the excess is within chance at these trials)")
    return (f"attribute ({game['canary']}): {attack['attack']:<24} success {attack['rate']:.3f} "
            f"(Ball {attack['ball']:.3f}, bound {attack['bound']:.3f}) {status}")
