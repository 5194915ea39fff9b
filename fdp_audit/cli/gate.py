"""`fdp-audit gate RESULTS` (SPEC 5.1): re-judge saved results at a given α; exit 0 pass, 1 violation,
2 bad input (including a corrupt or hand-edited results file)."""

from __future__ import annotations

import argparse

from fdp_audit.cli import EXIT_OK, EXIT_VIOLATION


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("gate", help="re-judge a results.json at a given α (CI gate)")
    parser.add_argument("results", help="results.json written by 'fdp-audit audit'")
    parser.add_argument("--alpha", type=float, help="significance level (default: the audit's)")
    parser.add_argument("--junit", help="write JUnit XML here")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from fdp_audit.atomic_io import atomic_write_text
    from fdp_audit.audit.results import read_results
    from fdp_audit.gate import judge, junit_xml

    results = read_results(args.results)
    alpha = args.alpha if args.alpha is not None else results["verdict"].get("alpha", 0.05)
    verdict, judged = judge(results.get("comparisons", []), alpha)
    if args.junit:
        atomic_write_text(args.junit, junit_xml(verdict, judged))
    print(f"{verdict['status']} at α={alpha:g} over {verdict['n_comparisons']} comparisons: {verdict['explanation']}")
    return EXIT_VIOLATION if verdict["status"] == "VIOLATION" else EXIT_OK
