"""`fdp-audit audit` (SPEC 5.1)."""

from __future__ import annotations

import argparse

from fdp_audit.errors import BadInputError


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("audit", help="(not implemented yet)")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    raise BadInputError("'audit' is not implemented yet")
