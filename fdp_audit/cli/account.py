"""`fdp-audit account` (docs/files.md): ε(δ), δ(ε), the f-curve and the Theorem 4 bound for given
z, p, T (or the privacy metadata of a checkpoint).

The curve is the symmetric lower envelope of both add/remove directions (or the replace curve) of
the pessimistic PLD at discretisation 1e-4 (docs/accounting.md). In JSON, an infinite ε is written as null.
"""

from __future__ import annotations

import argparse
import contextlib
import json
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from fdp_audit.accounting.events import RELATIONS, Relation, relation_named
from fdp_audit.errors import BadInputError

if TYPE_CHECKING:
    from fdp_audit.accounting.mechanism import MechanismAccountant, MechanismSpec

DEFAULT_DELTAS = (1e-3, 1e-5, 1e-6)
DEFAULT_EPSILONS = (1.0, 2.0, 4.0, 8.0)
DEFAULT_ALPHAS = (1e-3, 1e-2, 0.1, 0.25, 0.5)
DEFAULT_BALLS = (1e-3, 0.1, 0.25, 0.5)
_FLAG_FIELDS = {"noise_multiplier": "--noise-multiplier", "sample_rate": "--sample-rate", "steps": "--steps"}


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``fdp-audit account``: ε(δ), δ(ε), the f-curve and the Theorem 4 bound of Gaussian-mechanism parameters.

    Args:
        subparsers: the ``fdp-audit`` parser's subcommands; its handler is :func:`run`.
    """
    parser = subparsers.add_parser(
        "account",
        help="ε(δ), δ(ε), f-curve and Theorem 4 bound for DP-SGD / FDP-SGD parameters",
        description="Privacy accounting of the Poisson-subsampled Gaussian mechanism (pessimistic PLD, "
        "discretisation 1e-4). The f-curve is the symmetric lower envelope of both directions.",
    )
    parser.add_argument("--noise-multiplier", type=float, metavar="Z", help="noise std / clip norm (> 0)")
    parser.add_argument("--sample-rate", type=float, metavar="P", help="Poisson sampling rate in (0, 1]")
    parser.add_argument("--steps", type=int, metavar="T", help="number of private steps (>= 1)")
    parser.add_argument("--checkpoint", metavar="PATH", help="read mechanism, z, p, T and δ from a checkpoint")
    parser.add_argument("--relation", type=relation_named, choices=RELATIONS, default=Relation.ADD_REMOVE,
                        help="neighbouring relation")
    parser.add_argument("--delta", type=float, action="append", metavar="D", help="report ε at this δ (repeatable)")
    parser.add_argument("--epsilon", type=float, action="append", metavar="E", help="report δ at this ε (repeatable)")
    parser.add_argument("--alpha", type=float, action="append", metavar="A", help="report f(α) (repeatable)")
    parser.add_argument("--ball", type=float, action="append", metavar="B", help="report 1 - f(Ball) (repeatable)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Run ``fdp-audit account``: account the parameters given (or a checkpoint's) and print a table, or one JSON object
    with ``--json``.

    Args:
        args: the parsed command line: the mechanism (``--noise-multiplier``, ``--sample-rate``, ``--steps``, or
            ``--checkpoint``), ``--relation``, the points asked for (``--delta``, ``--epsilon``, ``--alpha``,
            ``--ball``) and ``--json``.

    Returns:
        The exit code, 0.

    Raises:
        BadInputError: bad input, naming the flag, field or file (exit code 2 through :func:`fdp_audit.cli.main`).
    """
    accountant, checkpoint_delta = _accountant(args, args.relation)
    deltas = _values(args.delta, _default_deltas(checkpoint_delta), "--delta", lambda d: 0 < d < 1, "(0, 1)")
    epsilons = _values(args.epsilon, DEFAULT_EPSILONS, "--epsilon", lambda e: e >= 0, "[0, inf)")
    alphas = _values(args.alpha, DEFAULT_ALPHAS, "--alpha", lambda a: 0 <= a <= 1, "[0, 1]")
    balls = _values(args.ball, DEFAULT_BALLS, "--ball", lambda b: 0 <= b <= 1, "[0, 1]")

    with flag_names(_FLAG_FIELDS):
        result = _report(accountant, accountant.spec, deltas, epsilons, alphas, balls, args.checkpoint)
        if args.json:
            print(json.dumps(result, allow_nan=False))
        else:  # the JSON keeps its documented shape: --relation gives the other relation's ε there
            print(_table(result, _epsilon_by_relation(args, accountant, deltas)))
    return 0


def _report(
    accountant: MechanismAccountant,
    spec: MechanismSpec,
    deltas: list[float],
    epsilons: list[float],
    alphas: list[float],
    balls: list[float],
    checkpoint: str | None,
) -> dict[str, Any]:
    from fdp_audit.json_numbers import json_float

    return {
        "epsilon": {_key(d): json_float(accountant.epsilon(d)) for d in deltas},
        "delta": {_key(e): json_float(accountant.delta(e)) for e in epsilons},
        "f": {_key(a): json_float(accountant.f(a)) for a in alphas},
        "bound": {_key(b): json_float(accountant.bound(b)) for b in balls},
        "parameters": {
            "mechanism": spec.name,
            "noise_multiplier": spec.noise_multiplier,
            "sample_rate": spec.sample_rate,
            "steps": spec.steps,
            "relation": spec.relation,
            "checkpoint": checkpoint,
            "curve": ("symmetric lower envelope of both directions" if spec.relation == Relation.ADD_REMOVE
                      else "replace"),
            "accountant": "dp_accounting PLD, pessimistic",
            "discretization": accountant.discretization,
        },
    }


def _epsilon_by_relation(args: argparse.Namespace, accountant: MechanismAccountant,
                         deltas: list[float]) -> dict[str, dict[str, float | None]]:
    """ε(δ) under both neighbouring relations: the audit's games judge some comparisons under each (attribute and
    simulator games under add/remove, the distinguishing game under replace-one), so both are the claim; the other
    relation's accountant is the library's, as for ``--relation``."""
    from fdp_audit.json_numbers import json_float

    found = {}
    for relation in RELATIONS:
        other = accountant if relation == accountant.spec.relation else _accountant(args, relation)[0]
        found[relation] = {_key(d): json_float(other.epsilon(d)) for d in deltas}
    return found


@contextlib.contextmanager
def flag_names(fields: dict[str, str]) -> Iterator[None]:
    """Re-raise the accounting library's parameter errors under the command-line flag's name.

    Args:
        fields: the accounting parameter's field name → the flag that gave it (``noise_multiplier`` →
            ``--noise-multiplier``).

    Yields:
        Nothing; the block runs once.

    Raises:
        BadInputError: an :class:`InvalidParameterError` of a field in ``fields``, naming the flag; others are
            re-raised as they are.
    """
    from fdp_audit.accounting import InvalidParameterError

    try:
        yield
    except InvalidParameterError as err:
        text = str(err)
        if err.field in fields:
            text = text.removeprefix(f"{err.field}: ")
            raise BadInputError(text, field=fields[err.field]) from err
        raise


def _accountant(args: argparse.Namespace, relation: Relation) -> tuple[MechanismAccountant, float | None]:
    """The accountant of the claim the flags (or the checkpoint's metadata) state under ``relation``, from the
    library (:func:`fdp_audit.api.checkpoint_claim`, :func:`fdp_audit.api.account`), and the checkpoint's δ."""
    from fdp_audit import api

    explicit = {
        "--noise-multiplier": args.noise_multiplier,
        "--sample-rate": args.sample_rate,
        "--steps": args.steps,
    }
    if args.checkpoint is not None:
        given = [flag for flag, value in explicit.items() if value is not None]
        if given:
            raise BadInputError(f"cannot be combined with {', '.join(given)}", field="--checkpoint")
        try:
            return api.checkpoint_claim(args.checkpoint, relation)
        except BadInputError as err:
            raise BadInputError(err.detail, "--checkpoint" if err.field == "checkpoint" else err.field) from None
    for flag, value in explicit.items():
        if value is None:
            raise BadInputError("is required (or give --checkpoint PATH)", field=flag)
    api.check_gaussian_parameters(args.noise_multiplier, args.sample_rate, args.steps, _FLAG_FIELDS)
    return api.account(args.noise_multiplier, args.sample_rate, args.steps, relation=relation), None


def _default_deltas(checkpoint_delta: float | None) -> tuple[float, ...]:
    if checkpoint_delta is None:
        return DEFAULT_DELTAS
    return tuple(sorted({checkpoint_delta, *DEFAULT_DELTAS}, reverse=True))  # the rows in the defaults' order


def _values(
    given: Sequence[float] | None, default: Sequence[float], flag: str, ok: Callable[[float], bool], interval: str
) -> list[float]:
    values = list(default if not given else given)
    for value in values:
        if not ok(value):  # NaN fails every comparison and is rejected here too
            raise BadInputError(f"must be in {interval}, got {value!r}", field=flag)
    return list(dict.fromkeys(values))


def _key(value: float) -> str:
    return repr(float(value))


def _table(result: dict[str, Any], by_relation: dict[str, dict[str, float | None]]) -> str:
    """The text output; ``by_relation`` gives ε(δ) under each neighbouring relation, printed side by side."""
    params = result["parameters"]
    head = (
        f"{params['mechanism']} ({params['relation']}): noise multiplier {params['noise_multiplier']}, "
        f"sample rate {params['sample_rate']}, steps {params['steps']}"
        if params["noise_multiplier"] is not None
        else f"{params['mechanism']} ({params['relation']})"
    )
    lines = [
        head,
        f"accounting: {params['accountant']}, discretisation {params['discretization']:g}; f = {params['curve']}",
    ]
    if by_relation:  # ε under every relation some game is judged under, side by side
        lines += ["", "  " + f"{'delta':<12} " + "  ".join(f"{'epsilon (' + r + ')':<22}" for r in by_relation)]
        for arg in result["epsilon"]:
            shown = ["inf" if table[arg] is None else f"{table[arg]:.6g}" for table in by_relation.values()]
            lines.append(f"  {float(arg):<12g} " + "  ".join(f"{value:<22}" for value in shown))
    sections = (
        ("epsilon", "delta", "epsilon") if not by_relation else None,
        ("delta", "epsilon", "delta"),
        ("f", "alpha", "f(alpha)"),
        ("bound", "Ball", "1 - f(Ball)  (Theorem 4 bound)"),
    )
    for key, left, right in filter(None, sections):
        lines.append("")
        lines.append(f"  {left:<12} {right}")
        for arg, value in result[key].items():
            shown = "inf" if value is None else f"{value:.6g}"
            lines.append(f"  {float(arg):<12g} {shown}")
    return "\n".join(lines)
