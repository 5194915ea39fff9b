"""`fdp-audit report RESULTS [-o HTML]` (docs/files.md): (re)render the HTML report of a results.json.

Exit 0 when the report is written, 2 on bad input (missing or malformed results, results that ``gate`` would
refuse — a stale checksum or MAC, a limit or verdict that the stated configuration does not give — an output path
that is a directory or the results file itself), with one line naming the file or field.
"""

from __future__ import annotations

import argparse

from fdp_audit.cli import flags_for


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``fdp-audit report``: (re)render the HTML report of a results.json.

    Args:
        subparsers: the ``fdp-audit`` parser's subcommands; its handler is :func:`run`.
    """
    parser = subparsers.add_parser(
        "report",
        help="(re)render the HTML report of a results.json",
        description="Render a self-contained HTML report (verdict, accounting, attacks, utility, "
        "reproducibility) from the results.json of an audit.",
    )
    parser.add_argument("results", metavar="RESULTS", help="results.json written by 'fdp-audit audit'")
    parser.add_argument(
        "-o", "--output", metavar="HTML", help="report to write (default: report.html beside RESULTS)"
    )
    parser.add_argument(
        "--profile", metavar="SECTION", help="report_section.json written by 'fdp-audit profile', shown as the "
        "report's privacy-profile section"
    )
    parser.add_argument(
        "--baseline", metavar="OLD_RESULTS", help="an earlier results.json: add a section showing how each "
        "comparison moved since"
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Run ``fdp-audit report``: verify the results file as the gate does and write its report (with a profile and a
    baseline comparison when given).

    Args:
        args: the parsed command line: the results file, and ``--output``, ``--profile`` and ``--baseline``.

    Returns:
        The exit code, 0.

    Raises:
        BadInputError: bad input, naming the flag, field or file (exit code 2 through :func:`fdp_audit.cli.main`).
    """
    from fdp_audit.api import report

    with flags_for({"output": "--output", "profile": "--profile", "baseline": "--baseline"}):
        written = report(args.results, args.output, profile=args.profile, baseline=args.baseline)
    print(f"wrote {written}")
    return 0
