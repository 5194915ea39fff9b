"""`fdp-audit audit CONFIG|CHECKPOINT` (docs/games.md, docs/files.md) → results.json, report.html. Exit 0 pass (or an
informational checkpoint audit), 1 violation, 2 bad input (including comparisons that cannot fail).

A config runs the game audit. A checkpoint (``.pt``) runs the checkpoint audit on its real training records
(verdict INFORMATIONAL, exit 0, unless ``audit.gate_on_estimated`` or ``--gate-on-estimated``); ``--games N``
instead replays its training recipe in a game audit of N trials."""

from __future__ import annotations

import argparse
import contextlib
import shlex
import sys
from pathlib import Path

from fdp_audit.atomic_io import all_or_nothing
from fdp_audit.cli import EXIT_OK, EXIT_VIOLATION, SEED_HELP
from fdp_audit.errors import BadInputError

DEFAULT_CHECKPOINT_OUT = "reports/run"  # a checkpoint's metadata never chooses where output goes


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("audit", help="run the audit games → results.json and report.html (exit 1 on a "
                                   "violation)")
    parser.add_argument("target", help="YAML config (game audit) or .pt checkpoint (checkpoint audit)")
    parser.add_argument("--trials", type=int, help="number of trials per game (overrides audit.trials)")
    parser.add_argument("--alpha", type=float, help="significance level of the verdict (overrides audit.alpha)")
    parser.add_argument("--games", type=int, metavar="N", help="with a checkpoint: replay its recipe in N trials")
    parser.add_argument("--out", help=f"output folder (default: report.out_dir of the config; for a checkpoint "
                        f"{DEFAULT_CHECKPOINT_OUT})")
    parser.add_argument("--seed", type=int, help=SEED_HELP)
    parser.add_argument("--canaries", metavar="MANIFEST",
                        help="with a checkpoint trained with --canaries: the one-run audit of its canaries (gating)")
    parser.add_argument("--config", metavar="CONFIG",
                        help="with a state_dict trained outside fdp-audit (.safetensors, or .pt/.pth/.bin of tensors): "
                        "the config naming its model.factory, data and claim (checkpoint audit, or --canaries)")
    parser.add_argument("--gate-on-estimated", action="store_true",
                        help="with a checkpoint: let the attacks on its real records (estimated bound) fail the gate")
    parser.add_argument("--scheduler", metavar="ADDRESS", help="run the trials on the Dask cluster of this "
                        "scheduler, e.g. tcp://host:8786 (sets audit.executor: dask; docs/cluster.md)")
    parser.add_argument("--workers", type=int, metavar="N", help="run the trials on a Dask cluster of N worker "
                        "processes started on this machine (sets audit.executor: dask)")
    parser.set_defaults(handler=run)


def audit_config(args: argparse.Namespace):
    """The config to audit, with the command line's overrides checked against the schema's ranges (a trial
    count above the schema's limit would exhaust memory before the first model is trained)."""
    from fdp_audit.config import load_config

    target = Path(args.target)
    if target.suffix == ".pt":
        from fdp_audit.audit.checkpoint_audit import checkpoint_data, read_checkpoint, replay_config

        checkpoint = read_checkpoint(target)  # the claim pinned to the metadata, as the checkpoint audit uses it
        config = replay_config(checkpoint, args.games)
        checkpoint_data(checkpoint)  # refuses data that are not the ones it was trained on
    else:
        config = load_config(target)
    flags = {"audit.trials": "--trials", "audit.alpha": "--alpha", "seed": "--seed", "audit.scheduler": "--scheduler",
             "audit.workers": "--workers"}
    values = {"audit.trials": args.trials, "audit.alpha": args.alpha, "seed": args.seed}
    overrides = {field: value for field, value in values.items() if value is not None}
    if args.scheduler is not None and args.workers is not None:
        raise BadInputError("give a scheduler address (an existing cluster) or a number of local workers, not both",
                            "--workers")
    if args.scheduler is not None or args.workers is not None:  # replaces the config's choice of where trials run
        overrides.update({"audit.executor": "dask", "audit.scheduler": args.scheduler, "audit.workers": args.workers})
    return config.with_overrides(overrides, flags)


def checkpoint_results(args: argparse.Namespace) -> tuple[dict, Path]:
    """The checkpoint audit of the real training records (no --games)."""
    from fdp_audit.audit.checkpoint_audit import read_checkpoint, run_checkpoint_audit

    for flag, value in (("--trials", args.trials), ("--seed", args.seed), ("--scheduler", args.scheduler),
                        ("--workers", args.workers)):
        if value is not None:
            raise BadInputError("applies to games; with a checkpoint pass --games N to replay its recipe", flag)
    if args.alpha is not None and not 0 < args.alpha < 1:
        raise BadInputError("must be in (0, 1)", "--alpha")
    checkpoint = read_checkpoint(args.target)
    audit = checkpoint.config.audit
    alpha = audit.alpha if args.alpha is None else args.alpha
    results = run_checkpoint_audit(checkpoint, alpha, audit.gate_on_estimated or args.gate_on_estimated,
                                   command=shlex.join(["fdp-audit", *sys.argv[1:]]))
    return results, Path(args.out or DEFAULT_CHECKPOINT_OUT)


def one_run_results(args: argparse.Namespace) -> tuple[dict, Path]:
    """The one-run audit of a checkpoint's canaries (``--canaries MANIFEST``)."""
    from fdp_audit.audit.one_run.canaries import one_run_results as results_of

    for flag, value in (("--trials", args.trials), ("--seed", args.seed), ("--games", args.games),
                        ("--scheduler", args.scheduler), ("--workers", args.workers)):
        if value is not None:
            raise BadInputError("does not apply to a one-run audit", flag)
    if Path(args.target).suffix != ".pt":
        raise BadInputError("a one-run audit takes the checkpoint trained with --canaries", "target")
    alpha = 0.05 if args.alpha is None else args.alpha
    if not 0 < alpha < 1:
        raise BadInputError("must be in (0, 1)", "--alpha")
    results = results_of(Path(args.target), Path(args.canaries), alpha, shlex.join(["fdp-audit", *sys.argv[1:]]))
    return results, Path(args.out or Path(args.target).parent)


def external_results(args: argparse.Namespace) -> tuple[dict, Path]:
    """External weights (``--config``): the checkpoint audit of their training records, or with ``--canaries`` the
    one-run audit of the record canaries inserted before training."""
    from fdp_audit.audit.checkpoint_audit import read_external_checkpoint, run_checkpoint_audit
    from fdp_audit.audit.one_run.canaries import one_run_results as results_of
    from fdp_audit.config import load_config

    for flag, value in (("--trials", args.trials), ("--seed", args.seed), ("--games", args.games)):
        if value is not None:
            raise BadInputError("does not apply to external weights", flag)
    alpha = 0.05 if args.alpha is None else args.alpha
    if not 0 < alpha < 1:
        raise BadInputError("must be in (0, 1)", "--alpha")
    config = load_config(args.config)
    checkpoint = read_external_checkpoint(Path(args.target), config)
    command = shlex.join(["fdp-audit", *sys.argv[1:]])
    out = Path(args.out or DEFAULT_CHECKPOINT_OUT)
    if args.canaries is not None:
        return results_of(checkpoint.path, Path(args.canaries), alpha, command, external=checkpoint), out
    gate = config.audit.gate_on_estimated or args.gate_on_estimated
    return run_checkpoint_audit(checkpoint, alpha, gate, command=command), out


def run(args: argparse.Namespace) -> int:
    from fdp_audit.audit.checkpoint_audit import summary_lines
    from fdp_audit.audit.gate import NOT_JUDGED
    from fdp_audit.audit.results import write_results
    from fdp_audit.audit.runner import run_audit
    from fdp_audit.report.render import write_report

    if args.games is not None and Path(args.target).suffix != ".pt":
        raise BadInputError("replays a checkpoint's recipe; with a config use --trials", "--games")
    if args.config is not None:
        results, out = external_results(args)
    elif Path(args.target).suffix in (".safetensors", ".pth", ".bin"):
        from fdp_audit.config import EXTERNAL_MODEL_HINT

        raise BadInputError(f"{Path(args.target).name} holds weights only; {EXTERNAL_MODEL_HINT}")
    elif args.canaries is not None:
        results, out = one_run_results(args)
    elif Path(args.target).suffix == ".pt" and args.games is None:
        results, out = checkpoint_results(args)
    else:
        if args.gate_on_estimated:
            raise BadInputError("applies to the checkpoint audit of a .pt file without --games",
                                "--gate-on-estimated")
        config = audit_config(args)
        out = Path(args.out or config.report.out_dir)
        fresh = not out.exists()
        try:
            results = run_audit(config, out, command=shlex.join(["fdp-audit", *sys.argv[1:]]))
        except BadInputError:
            if fresh:  # refused: the folder this run created holds only the journal of a run that cannot resume
                (out / "journal.jsonl").unlink(missing_ok=True)
                with contextlib.suppress(OSError):
                    out.rmdir()
            raise
    if results["verdict"]["status"] == NOT_JUDGED:  # never written as if it were a verdict
        raise BadInputError(results["verdict"]["explanation"])
    with all_or_nothing():  # results.json and report.html are replaced together or not at all
        path = write_results(out / "results.json", results)
        report = write_report(results, out / "report.html")
    verdict = results["verdict"]
    if "checkpoint_audit" in results:
        print("\n".join(summary_lines(results["checkpoint_audit"])))
    if "one_run" in results:
        from fdp_audit.audit.one_run.evaluation import summary_lines as one_run_lines

        print("\n".join(one_run_lines(results["one_run"])))
    print(f"{verdict['status']}: {verdict['explanation']}")
    print(f"results: {path}\nreport: {report}")
    return EXIT_VIOLATION if verdict["status"] == "VIOLATION" else EXIT_OK

