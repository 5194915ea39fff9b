"""`fdp-audit audit CONFIG|CHECKPOINT` (SPEC 5.1): run the game audit → results.json, report.html.
Exit 0 pass, 1 violation, 2 bad input."""

from __future__ import annotations

import argparse
import shlex
import sys
from dataclasses import replace
from pathlib import Path

from fdp_audit.cli import EXIT_OK, EXIT_VIOLATION
from fdp_audit.errors import BadInputError


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("audit", help="run the audit games → results.json and report.html (exit 1 on a "
                                   "violation)")
    parser.add_argument("target", help="YAML config (game audit) or .pt checkpoint (checkpoint audit)")
    parser.add_argument("--trials", type=int, help="number of trials per game (overrides audit.trials)")
    parser.add_argument("--alpha", type=float, help="significance level of the verdict (overrides audit.alpha)")
    parser.add_argument("--games", type=int, metavar="N", help="with a checkpoint: replay its recipe in N trials")
    parser.add_argument("--out", help="output folder (default: report.out_dir of the config)")
    parser.add_argument("--seed", type=int, help="override the config's seed")
    parser.set_defaults(handler=run)


def audit_config(args: argparse.Namespace):
    from fdp_audit.config import config_from_dict, load_config

    target = Path(args.target)
    if target.suffix == ".pt":
        from fdp_audit.training.checkpoint import load_checkpoint

        _, metadata, _ = load_checkpoint(target)
        if not args.games:
            raise BadInputError("auditing a checkpoint's real records is not implemented yet; pass --games N to "
                                "replay its training recipe in a game audit", "--games")
        config = config_from_dict(metadata["config"])
        config = replace(config, audit=replace(config.audit, trials=args.games))
    else:
        config = load_config(target)
    audit = config.audit
    if args.trials is not None:
        if args.trials < 1:
            raise BadInputError("must be >= 1", "--trials")
        audit = replace(audit, trials=args.trials)
    if args.alpha is not None:
        if not 0 < args.alpha < 1:
            raise BadInputError("must be in (0, 1)", "--alpha")
        audit = replace(audit, alpha=args.alpha)
    config = replace(config, audit=audit)
    if args.seed is not None:
        config = replace(config, seed=args.seed)
    return config


def run(args: argparse.Namespace) -> int:
    from fdp_audit.audit.results import write_results
    from fdp_audit.audit.runner import run_audit
    from fdp_audit.report.render import write_report

    config = audit_config(args)
    out = Path(args.out or config.report.out_dir)
    results = run_audit(config, out, command=shlex.join(["fdp-audit", *sys.argv[1:]]))
    path = write_results(out / "results.json", results)
    report = write_report(results, out / "report.html")
    verdict = results["verdict"]
    print(f"{verdict['status']}: {verdict['explanation']}")
    print(f"results: {path}\nreport: {report}")
    return EXIT_VIOLATION if verdict["status"] == "VIOLATION" else EXIT_OK

