"""`fdp-audit gate RESULTS` (docs/files.md): re-judge saved results at a given α; exit 0 pass, 1 violation (or, with
``--max-regression``, a significant rise since ``--baseline``), 2 bad input (including a corrupt or
hand-edited results file, and results with no comparison to judge or one that cannot fail at that α). See
docs/files.md, "The gate's outputs"."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from fdp_audit.cli import EXIT_OK, EXIT_VIOLATION, flags_for
from fdp_audit.errors import BadInputError


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``fdp-audit gate``: re-judge a results.json at a given α, optionally against a baseline (the CI gate).

    Args:
        subparsers: the ``fdp-audit`` parser's subcommands; its handler is :func:`run`.
    """
    parser = subparsers.add_parser("gate", help="re-judge a results.json at a given α (CI gate)")
    parser.add_argument("results", help="results.json written by 'fdp-audit audit'")
    parser.add_argument("--alpha", type=float, help="significance level (default: the audit's)")
    parser.add_argument("--junit", help="write JUnit XML here")
    parser.add_argument("--markdown", metavar="PATH", help="write a Markdown summary here, for a CI job summary "
                        "(default with --junit to a file: beside it, the JUnit path with the suffix .md)")
    parser.add_argument("--baseline", metavar="OLD_RESULTS",
                        help="an earlier results.json (e.g. the main branch's last audit): show how each "
                        "comparison's margin and ε lower bound moved")
    parser.add_argument("--max-regression", type=float, metavar="T",
                        help="with --baseline: fail when an attack's success rate rose by more than T since the "
                        "baseline, at confidence 1 − α (default: report only)")
    parser.add_argument("--allow-config-change", action="store_true",
                        help="with --baseline: compare with a baseline that audited other settings (data, model, "
                        "mechanism, games, attacks); refused otherwise, since its rates measure something else")
    parser.set_defaults(handler=run)


def beside_files(path: str | None) -> bool:
    """Whether a file may be written beside ``path``: it is a regular file or a new name, not a device or a FIFO
    (``--junit /dev/null`` or ``/dev/stdout`` would put a ``.md`` file in ``/dev``).

    Args:
        path: the ``--junit`` path, or None.

    Returns:
        True for a regular file or a name that does not exist yet; False for None or anything else.
    """
    return path is not None and (not os.path.exists(path) or os.path.isfile(path))


# the library's keywords, as the command's flags, in its one-line errors
_FLAGS = {"max_regression": "--max-regression", "allow_config_change": "--allow-config-change",
          "baseline": "--baseline", "alpha": "--alpha"}


def run(args: argparse.Namespace) -> int:
    """Run ``fdp-audit gate``: judge the results file through the library, write the JUnit and markdown files asked for,
    print the verdict.

    Args:
        args: the parsed command line: the results file, ``--alpha``, ``--junit``, ``--markdown``, ``--baseline``,
            ``--max-regression`` and ``--allow-config-change``.

    Returns:
        The exit code: 1 when the gate fails (a violation or a regression), else 0.

    Raises:
        BadInputError: bad input, naming the flag, field or file (exit code 2 through :func:`fdp_audit.cli.main`).
    """
    for path, field in ((args.results, None), (args.baseline, "--baseline")):
        if path is not None and not os.path.lexists(path):  # said before the heavy imports, not after seconds
            raise BadInputError(f"results file not found: {path}", field)
    from fdp_audit.api import gate
    from fdp_audit.atomic_io import atomic_write_text

    try:
        with flags_for(_FLAGS):
            judgement = gate(args.results, alpha=args.alpha, baseline=args.baseline,
                             max_regression=args.max_regression, allow_config_change=args.allow_config_change)
    except BadInputError as err:
        detail = err.detail.replace("Pass allow_config_change", "Pass --allow-config-change")
        raise BadInputError(detail, err.field) from None
    if args.junit:
        atomic_write_text(args.junit, judgement.junit())
    markdown = args.markdown or (Path(args.junit).with_suffix(".md") if beside_files(args.junit) else None)
    if markdown:
        atomic_write_text(markdown, judgement.markdown())
    print("\n".join(judgement.lines()))
    return EXIT_VIOLATION if judgement.failed else EXIT_OK

