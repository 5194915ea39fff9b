"""`fdp-audit profile CONFIG [--out DIR]` (docs/files.md, docs/profiles.md): privacy profiles and the ε transition.

Writes ``profile.json`` (every number the report shows), ``profiles.npz`` (the full per-row arrays),
``report_section.json`` (the section ``fdp-audit report --profile`` adds to an HTML report) and
``figures/*.png`` into ``--out`` (default: the config's ``report.out_dir``), each file atomically.
Output perturbation (laplace, gaussian) gets exact profiles and the ε transition; DP-SGD and FDP-SGD
get a Monte Carlo estimate over trained models (:mod:`fdp_audit.profiles.trained`).
"""

from __future__ import annotations

import argparse
import sys

from fdp_audit.cli import flags_for


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``fdp-audit profile``: privacy profiles and the ε transition (docs/profiles.md).

    Args:
        subparsers: the ``fdp-audit`` parser's subcommands; its handler is :func:`run`.
    """
    parser = subparsers.add_parser(
        "profile",
        help="privacy profiles and the ε transition (docs/profiles.md)",
        description="Compute per-row privacy profiles, typical profiles over model samples, the ε sweep and "
        "its transition (output perturbation), or Monte Carlo estimates of the privacy loss over trained "
        "models (dp_sgd, fdp_sgd), and write profile.json, profiles.npz, report_section.json and figures.",
    )
    parser.add_argument("config", metavar="CONFIG", help="YAML config with a 'profile' section")
    parser.add_argument("--out", metavar="DIR", default=None, help="output folder (default: report.out_dir)")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Run ``fdp-audit profile`` on its config and write its outputs together (all or nothing).

    Args:
        args: the parsed command line: the config (with a ``profile`` section) and ``--out``.

    Returns:
        The exit code, 0.

    Raises:
        BadInputError: bad input, naming the flag, field or file (exit code 2 through :func:`fdp_audit.cli.main`).
    """
    from fdp_audit.api import profile

    with flags_for({"out_dir": "--out"}):
        results, written = profile(args.config, out_dir=args.out)
    setting = results["setting"]
    head = f"profile: {setting['mechanism']}, n = {setting['n']}, d = {setting['d']}; "
    if results["kind"] == "privacy_profile_estimate":
        centre = results["centre"]
        finite = [abs(v) for v in centre["estimate"] if v is not None]
        body = (
            f"{results['label']} over {results['estimate']['base_samples']} trained models per distribution, "
            f"{results['estimate']['neighbours_studied']} neighbours: max |l̂| at the centre "
            f"{_fmt(max(finite) if finite else None)} (cutoff c = {_fmt(centre['cutoff'])}, "
            f"{centre['unresolved']} unresolved), claimed ε = {_fmt(results['training']['claimed_epsilon'])}"
        )
    else:
        transition = results["transition"]
        body = (
            f"ε_low = {_fmt(transition['epsilon_low'])}, ε_high = {_fmt(transition['epsilon_high'])}, "
            f"ε* = {_fmt(transition['epsilon_star'])}; max A_wc relative error "
            f"{_fmt(results['worst_case_accuracy']['max_relative_error'])}"
        )
    print(f"{head}{body}; wrote {written}", file=sys.stdout)
    return 0


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4g}"
