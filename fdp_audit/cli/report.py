"""`fdp-audit report RESULTS [-o HTML]` (docs/files.md): (re)render the HTML report of a results.json.

Exit 0 when the report is written, 2 on bad input (missing or malformed results, results that ``gate`` would
refuse — a stale checksum or MAC, a limit or verdict that the stated configuration does not give — an output path
that is a directory or the results file itself), with one line naming the file or field.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from fdp_audit.errors import BadInputError

DEFAULT_NAME = "report.html"


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
        "-o", "--output", metavar="HTML", help=f"report to write (default: {DEFAULT_NAME} beside RESULTS)"
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
    from fdp_audit.auditing.gate import verified_results
    from fdp_audit.report import load_results, write_report

    source = Path(args.results)
    target = Path(args.output) if args.output else source.with_name(DEFAULT_NAME)
    if target.is_dir():
        raise BadInputError(f"{target} is a directory", "--output")
    if target.exists() and source.exists() and target.samefile(source):
        raise BadInputError("would overwrite RESULTS with the report", "--output")
    results = verified_results(source)  # exactly what `gate` verifies
    if args.profile:
        results["profile"] = load_results(args.profile)
    baseline = verified_results(args.baseline, "--baseline") if args.baseline else None
    try:
        written = write_report(results, target, baseline)
    except BadInputError as err:  # a contract error names the field; the user also needs the file
        raise BadInputError(str(err), str(source)) from None
    except OSError as err:
        raise BadInputError(f"cannot write {target}: {err.strerror or err}", "--output") from None
    print(f"wrote {written}")
    return 0
