"""`fdp-audit gate RESULTS` (docs/files.md): re-judge saved results at a given α; exit 0 pass, 1 violation (or, with
``--max-regression``, a significant rise since ``--baseline``), 2 bad input (including a corrupt or
hand-edited results file, and results with no comparison to judge or one that cannot fail at that α). See
docs/files.md, "The gate's outputs"."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from fdp_audit.cli import EXIT_OK, EXIT_VIOLATION


def register(subparsers: argparse._SubParsersAction) -> None:
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
    (``--junit /dev/null`` or ``/dev/stdout`` would put a ``.md`` file in ``/dev``)."""
    return path is not None and (not os.path.exists(path) or os.path.isfile(path))


def run(args: argparse.Namespace) -> int:
    from fdp_audit.atomic_io import atomic_write_text
    from fdp_audit.audit.gate import INFORMATIONAL, NOT_JUDGED, judge, junit_xml, verified_results
    from fdp_audit.audit.regression import compare
    from fdp_audit.audit.sanity import sanity_warnings
    from fdp_audit.errors import BadInputError
    from fdp_audit.report.markdown import gate_summary, rise_words
    from fdp_audit.report.terminal import verdict_lines

    for flag, value in (("--max-regression", args.max_regression is not None),
                        ("--allow-config-change", args.allow_config_change)):
        if value and not args.baseline:
            raise BadInputError("needs --baseline", flag)
    results = verified_results(args.results)
    alpha = args.alpha if args.alpha is not None else results["verdict"].get("alpha", 0.05)
    comparisons = results.get("comparisons", [])
    verdict, judged = judge(comparisons, alpha)
    if verdict["status"] in (NOT_JUDGED, INFORMATIONAL):  # nothing that can fail, or nothing that tests: no pass
        raise BadInputError(f"{args.results}: {verdict['explanation']}", "results.comparisons")
    regression = None
    if args.baseline:
        baseline = verified_results(args.baseline, "--baseline")
        regression = compare(results, baseline, alpha, args.max_regression)
        if regression.config_changes and not args.allow_config_change:
            shown = "; ".join(regression.config_changes[:3]) + (
                f" and {len(regression.config_changes) - 3} more" if len(regression.config_changes) > 3 else "")
            raise BadInputError(f"{args.baseline} audited other settings ({shown}); its success rates are no "
                                "baseline for these. Pass --allow-config-change to compare them anyway", "--baseline")
    cases = [stored | j for stored, j in zip(comparisons, judged, strict=True)]
    if regression is not None and regression.tolerance is not None:
        # one JUnit case per tested rise, failed when the rise exceeds the tolerance
        cases += [{"id": f"regression/{c.id}", "label": f"Rise since the baseline · {c.label}",
                   "violated": c.regressed, "observed": c.rise_lower_bound, "theoretical": regression.tolerance}
                  for c in regression.changes if c.rise_lower_bound is not None]
    warnings = sanity_warnings(results)
    if args.junit:
        atomic_write_text(args.junit, junit_xml(verdict, cases, warnings))
    markdown = args.markdown or (Path(args.junit).with_suffix(".md") if beside_files(args.junit) else None)
    if markdown:
        atomic_write_text(markdown, gate_summary(verdict, judged, comparisons, regression, warnings))
    print("\n".join(verdict_lines(verdict, warnings)))
    if regression is not None:
        worst = max(regression.changes, key=lambda c: c.rise_lower_bound if c.rise_lower_bound is not None else -2,
                    default=None)
        rule = ("report only" if regression.tolerance is None
                else f"fails above a rise of {regression.tolerance:g}")
        line = f"since the baseline: {len(regression.changes)} comparisons matched, {len(regression.regressed)} " \
               f"regressed ({rule})"
        if worst is not None and worst.rise_lower_bound is not None:
            line += "; largest rise in success rate: " + rise_words(worst, 1 - alpha)
        print(("REGRESSION: " if regression.regressed else "") + line)
    if verdict["status"] == "VIOLATION" or (regression is not None and regression.regressed):
        return EXIT_VIOLATION
    return EXIT_OK
