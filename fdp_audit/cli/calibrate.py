"""`fdp-audit calibrate` (docs/files.md): the noise multiplier z that meets a target (ε, δ) for a sample
rate and number of steps; with ``--max-steps``, the largest number of steps a given z affords.

Both use the pessimistic PLD (discretisation 1e-4) and round towards privacy: the printed z (or T)
meets the budget.
"""

from __future__ import annotations

import argparse
import json
import math

from fdp_audit.accounting.events import RELATIONS, Relation, relation_named
from fdp_audit.cli.account import flag_names
from fdp_audit.errors import BadInputError

_FLAG_FIELDS = {
    "epsilon": "--epsilon",
    "delta": "--delta",
    "noise_multiplier": "--noise-multiplier",
    "sample_rate": "--sample-rate",
    "steps": "--steps",
    "max_steps": "--step-limit",
}


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
    """Run ``fdp-audit calibrate`` on the pessimistic PLD and print the answer with the ε it achieves (one JSON object
    with ``--json``).

    Args:
        args: the parsed command line: the target ``--epsilon`` and ``--delta``, ``--sample-rate``, then ``--steps``
            (calibrating z) or ``--max-steps`` with ``--noise-multiplier`` and ``--step-limit``; ``--relation``,
            ``--json``.

    Returns:
        The exit code, 0.

    Raises:
        BadInputError: bad input, naming the flag, field or file (exit code 2 through :func:`fdp_audit.cli.main`).
    """
    from fdp_audit.accounting.calibration import calibrate_noise_multiplier, max_steps_for_budget

    _check(args)
    parameters = {
        "epsilon": args.epsilon,
        "delta": args.delta,
        "sample_rate": args.sample_rate,
        "relation": args.relation,
        "accountant": "dp_accounting PLD, pessimistic",
    }
    with flag_names(_FLAG_FIELDS):
        if args.max_steps:
            steps = max_steps_for_budget(
                args.epsilon, args.delta, args.noise_multiplier, args.sample_rate, args.relation, args.step_limit
            )
            achieved = _achieved(args.noise_multiplier, args.sample_rate, steps, args.delta, args.relation)
            parameters.update(noise_multiplier=args.noise_multiplier, step_limit=args.step_limit)
            capped = steps == args.step_limit  # the search stopped at its limit, not at the budget
            result = {"max_steps": steps, "reached_step_limit": capped, "achieved_epsilon": achieved,
                      "parameters": parameters}
            line = (f"max steps: at least {steps} (the search stopped at --step-limit with ε still within the "
                    "target; raise --step-limit to search further)" if capped else f"max steps: {steps}")
        else:
            z = calibrate_noise_multiplier(args.epsilon, args.delta, args.sample_rate, args.steps, args.relation)
            achieved = _achieved(z, args.sample_rate, args.steps, args.delta, args.relation)
            parameters.update(steps=args.steps)
            result = {"noise_multiplier": z, "achieved_epsilon": achieved, "parameters": parameters}
            line = f"noise multiplier: {z:.6g}"
    if args.json:
        print(json.dumps(result, allow_nan=False))
    else:
        shown = "n/a" if achieved is None else f"{achieved:.6g}"
        print(f"{line}\n(achieved ε = {shown} at δ = {args.delta:g}, target ε = {args.epsilon:g})")
    return 0


def _check(args: argparse.Namespace) -> None:
    if not (math.isfinite(args.epsilon) and args.epsilon > 0):
        raise BadInputError(f"must be a finite number > 0, got {args.epsilon!r}", field="--epsilon")
    if not (0 < args.delta < 1):
        raise BadInputError(f"must be in (0, 1), got {args.delta!r}", field="--delta")
    if not (0 < args.sample_rate <= 1):
        raise BadInputError(f"must be in (0, 1], got {args.sample_rate!r}", field="--sample-rate")
    if args.max_steps:
        if args.noise_multiplier is None:
            raise BadInputError("is required with --max-steps", field="--noise-multiplier")
        if args.steps is not None:
            raise BadInputError("cannot be combined with --max-steps (it is the answer)", field="--steps")
        if not (math.isfinite(args.noise_multiplier) and args.noise_multiplier > 0):
            z = args.noise_multiplier
            raise BadInputError(f"must be a finite number > 0, got {z!r}", field="--noise-multiplier")
        if args.step_limit < 1:
            raise BadInputError(f"must be an integer >= 1, got {args.step_limit!r}", field="--step-limit")
    else:
        if args.noise_multiplier is not None:
            raise BadInputError("is only used with --max-steps (calibration computes it)", field="--noise-multiplier")
        if args.steps is None:
            raise BadInputError("is required (or use --max-steps)", field="--steps")
        if args.steps < 1:
            raise BadInputError(f"must be an integer >= 1, got {args.steps!r}", field="--steps")


def _achieved(z: float, p: float, steps: int, delta: float, relation: str) -> float | None:
    """ε(δ) of the answer, for the user to see that it meets the budget (None for T = 0)."""
    if steps < 1:
        return None
    from fdp_audit.accounting.mechanism import MechanismSpec, accountant_for

    return float(accountant_for(MechanismSpec.gaussian("dp_sgd", z, p, steps, relation)).epsilon(delta))
