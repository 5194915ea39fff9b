"""`fdp-audit reproduce [NAME ...] [--out DIR] [--quick]` (docs/files.md): regenerate the paper
reproductions (:mod:`fdp_audit.reproduce`), each as ``<name>.md`` + ``<name>.json`` in ``--out``."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from fdp_audit.cli import EXIT_OK


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``fdp-audit reproduce``: regenerate the paper reproduction tables.

    Args:
        subparsers: the ``fdp-audit`` parser's subcommands; its handler is :func:`run`.
    """
    from fdp_audit.reproduce import REPRODUCTIONS

    parser = subparsers.add_parser("reproduce", help="regenerate the paper reproduction tables → <out>/<name>.md/.json",
                                   description=f"Reproductions: {', '.join(REPRODUCTIONS)} (default: all).")
    parser.add_argument("names", nargs="*", metavar="NAME", help="reproductions to run (default: all)")
    parser.add_argument("--out", default="reports/reproduce", help="output folder (default: reports/reproduce)")
    parser.add_argument("--quick", action="store_true", help="small data, few steps and seeds (seconds each)")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Run ``fdp-audit reproduce``: each named reproduction (all by default) in order, each one's summary printed.

    Args:
        args: the parsed command line: the reproductions' names (none: all), ``--out`` and ``--quick``.

    Returns:
        The exit code, 0.

    Raises:
        BadInputError: bad input, naming the flag, field or file (exit code 2 through :func:`fdp_audit.cli.main`).
    """
    from fdp_audit.phases import Phase
    from fdp_audit.reproduce import REPRODUCTIONS, run_reproduction

    names = list(dict.fromkeys(args.names)) or list(REPRODUCTIONS)
    REPRODUCTIONS.lookup(names)  # refuse an unknown name before any work starts
    for name in names:
        start = time.monotonic()
        with Phase(f"reproduce {name}{' --quick' * args.quick}"):
            summary = run_reproduction(name, Path(args.out), args.quick)
        print(f"{name}: {summary['summary']} [{time.monotonic() - start:.0f} s] → {summary['markdown']}")
    return EXIT_OK
