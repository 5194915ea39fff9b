"""`fdp-audit demo` (SPEC 1, 5.1): the embedded-default end-to-end run."""

from __future__ import annotations

import argparse

from fdp_audit.errors import BadInputError


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("demo", help="train, audit and report on the bundled Adult data")
    parser.add_argument("--quick", action="store_true", help="a smaller run, under a minute")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    raise BadInputError("'demo' is not implemented yet")
