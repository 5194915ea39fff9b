"""`fdp-audit audit CONFIG|CHECKPOINT` (docs/games.md, docs/files.md) → results.json, report.html. Exit 0 pass (or an
informational checkpoint audit), 1 violation, 2 bad input (including comparisons that cannot fail).

A config runs the game audit. A checkpoint (``.pt``) runs the checkpoint audit on its real training records
(verdict INFORMATIONAL, exit 0, unless ``audit.gate_on_estimated`` or ``--gate-on-estimated``); ``--games N``
instead replays its training recipe in a game audit of N trials."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from fdp_audit.api import DEFAULT_CHECKPOINT_OUT
from fdp_audit.cli import EXIT_OK, EXIT_VIOLATION, SEED_HELP
from fdp_audit.errors import BadInputError


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``fdp-audit audit``: the game audit of a config, or the checkpoint audit of a trained model.

    Args:
        subparsers: the ``fdp-audit`` parser's subcommands; its handler is :func:`run`.
    """
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
    count above the schema's limit would exhaust memory before the first model is trained).

    Args:
        args: the parsed command line: the target (a YAML config, or a ``.pt`` checkpoint whose recipe is
            replayed) and ``--trials``, ``--alpha``, ``--seed``, ``--scheduler``, ``--workers``.

    Returns:
        The validated configuration.

    Raises:
        BadInputError: an override out of range (naming its flag), both ``--scheduler`` and ``--workers``, or a
            checkpoint or config that cannot be read.
    """
    from fdp_audit.api import as_config, replay_checkpoint

    target = Path(args.target)
    if target.suffix == ".pt":
        try:
            config = replay_checkpoint(target, args.games)
        except BadInputError as err:
            if err.field != "games":
                raise
            raise BadInputError(err.detail, "--games") from err
    else:
        config = as_config(target)
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


def _refuse(args: argparse.Namespace, flags: tuple[str, ...], why: str) -> None:
    for flag in flags:
        if getattr(args, flag.removeprefix("--").replace("-", "_")) is not None:
            raise BadInputError(why, flag)


def audited(args: argparse.Namespace):
    """The audit the command line asks for, run through the library (:mod:`fdp_audit.api`); the flags that do
    not apply to the target are refused here, naming the flag.

    Args:
        args: the parsed command line.

    Returns:
        The library's audit result (game audit, checkpoint audit, one-run audit or audit of external weights).

    Raises:
        BadInputError: a flag that does not apply to the target, or bad input found by the audit.
    """
    from fdp_audit import api

    command = shlex.join(["fdp-audit", *sys.argv[1:]])
    target = Path(args.target)
    if args.games is not None and target.suffix != ".pt":
        raise BadInputError("replays a checkpoint's recipe; with a config use --trials", "--games")
    if args.config is not None:  # weights trained elsewhere
        # the audit of weights trains nothing: no trials to seed, count or send to a cluster
        _refuse(args, ("--trials", "--seed", "--games", "--scheduler", "--workers"),
                "does not apply to external weights")
    elif target.suffix in api.WEIGHTS_SUFFIXES:
        pass  # the library refuses weights without a config, saying how to audit them
    elif args.canaries is not None:
        _refuse(args, ("--trials", "--seed", "--games", "--scheduler", "--workers"),
                "does not apply to a one-run audit")
    elif target.suffix == ".pt" and args.games is None:
        _refuse(args, ("--trials", "--seed", "--scheduler", "--workers"),
                "applies to games; with a checkpoint pass --games N to replay its recipe")
    else:
        if args.gate_on_estimated:
            raise BadInputError("applies to the checkpoint audit of a .pt file without --games", "--gate-on-estimated")
        config = audit_config(args)
        return api.audit(config, out_dir=args.out or config.report.out_dir, command=command)
    if args.alpha is not None and not 0 < args.alpha < 1:
        raise BadInputError("must be in (0, 1)", "--alpha")
    return api.audit_checkpoint(target, config=args.config, canaries=args.canaries, alpha=args.alpha,
                                gate_on_estimated=args.gate_on_estimated, out_dir=args.out, command=command)


def run(args: argparse.Namespace) -> int:
    """Run ``fdp-audit audit``: the audit of the target through the library, its files written, the verdict printed.

    Args:
        args: the parsed command line: the target (a config, a checkpoint or weights) and the flags that apply to
            it (:func:`audited`).

    Returns:
        The exit code: 1 on a VIOLATION, else 0.

    Raises:
        BadInputError: bad input, naming the flag, field or file (exit code 2 through :func:`fdp_audit.cli.main`).
    """
    result = audited(args)
    written = result.write(junit=False)
    print(result.summary())
    print(f"results: {written.results}\nreport: {written.report}")
    return EXIT_VIOLATION if result.verdict == "VIOLATION" else EXIT_OK
