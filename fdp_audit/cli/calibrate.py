"""`fdp-audit calibrate` (docs/files.md): the noise multiplier z that meets a target (ε, δ) for a sample
rate and number of steps; with ``--max-steps``, the largest number of steps a given z affords.

Both use the pessimistic PLD (discretisation 1e-4) and round towards privacy: the printed z (or T)
meets the budget.
"""

from __future__ import annotations

import argparse
import json

from fdp_audit.accounting.events import RELATIONS, Relation, relation_named
from fdp_audit.cli import flags_for
from fdp_audit.errors import BadInputError

# the library's keywords, as the command's flags, in its one-line errors
_FLAGS = {"epsilon": "--epsilon", "delta": "--delta", "noise_multiplier": "--noise-multiplier",
          "sample_rate": "--sample-rate", "steps": "--steps", "step_limit": "--step-limit"}


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``fdp-audit calibrate``: the noise multiplier for a target (ε, δ), or with ``--max-steps`` the largest T.

    Args:
        subparsers: the ``fdp-audit`` parser's subcommands; its handler is :func:`run`.
    """
    parser = subparsers.add_parser(
        "calibrate",
        help="noise multiplier z for a target (ε, δ); with --max-steps, the largest T for a given z",
        description="Calibrate DP-SGD / FDP-SGD on the pessimistic PLD (discretisation 1e-4): print the "
        "smallest noise multiplier (relative tolerance 1e-3) whose ε(δ) meets --epsilon, or with "
        "--max-steps the largest number of steps that a given --noise-multiplier affords.",
    )
    parser.add_argument("--epsilon", type=float, required=True, metavar="E", help="target ε (> 0)")
    parser.add_argument("--delta", type=float, required=True, metavar="D", help="target δ in (0, 1)")
    parser.add_argument("--sample-rate", type=float, required=True, metavar="P", help="Poisson rate in (0, 1]")
    parser.add_argument("--steps", type=int, metavar="T", help="number of private steps (calibrating z)")
    parser.add_argument("--max-steps", action="store_true", help="find the largest T for --noise-multiplier")
    parser.add_argument("--noise-multiplier", type=float, metavar="Z", help="noise multiplier (with --max-steps)")
    parser.add_argument(
        "--step-limit", type=int, default=1_000_000, metavar="N", help="search limit for --max-steps (default 1e6)"
    )
    parser.add_argument("--relation", type=relation_named, choices=RELATIONS, default=Relation.ADD_REMOVE,
                        help="neighbouring relation")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Run ``fdp-audit calibrate`` (:func:`fdp_audit.api.calibrate`) and print the answer with the ε it achieves
    (one JSON object with ``--json``).

    Args:
        args: the parsed command line: the target ``--epsilon`` and ``--delta``, ``--sample-rate``, then ``--steps``
            (calibrating z) or ``--max-steps`` with ``--noise-multiplier`` and ``--step-limit``; ``--relation``,
            ``--json``.

    Returns:
        The exit code, 0.

    Raises:
        BadInputError: bad input, naming the flag, field or file (exit code 2 through :func:`fdp_audit.cli.main`).
    """
    from fdp_audit.api import calibrate

    if args.max_steps and args.noise_multiplier is None:
        raise BadInputError("is required with --max-steps", field="--noise-multiplier")
    if args.max_steps and args.steps is not None:
        raise BadInputError("cannot be combined with --max-steps (it is the answer)", field="--steps")
    if not args.max_steps and args.noise_multiplier is not None:
        raise BadInputError("is only used with --max-steps (calibration computes it)", field="--noise-multiplier")
    if not args.max_steps and args.steps is None:  # the library's message names its keyword, not the flag
        raise BadInputError("is required (or use --max-steps)", field="--steps")
    with flags_for(_FLAGS):
        result = calibrate(args.epsilon, args.delta, args.sample_rate, args.steps,
                           noise_multiplier=args.noise_multiplier, step_limit=args.step_limit, relation=args.relation)
    if args.json:
        print(json.dumps(result, allow_nan=False))
        return 0
    if args.max_steps:
        line = (f"max steps: at least {result['max_steps']} (the search stopped at --step-limit with ε still within "
                "the target; raise --step-limit to search further)" if result["reached_step_limit"]
                else f"max steps: {result['max_steps']}")
    else:
        line = f"noise multiplier: {result['noise_multiplier']:.6g}"
    achieved = result["achieved_epsilon"]
    shown = "n/a" if achieved is None else f"{achieved:.6g}"
    print(f"{line}\n(achieved ε = {shown} at δ = {args.delta:g}, target ε = {args.epsilon:g})")
    return 0
