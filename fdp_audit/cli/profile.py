"""`fdp-audit profile CONFIG [--out DIR]` (SPEC 5.1, 2.7): privacy profiles and the ε transition.

Writes ``profile.json`` (every number the report shows), ``profiles.npz`` (the full per-row arrays)
and ``figures/*.png`` into ``--out`` (default: the config's ``report.out_dir``), each file atomically.
"""

from __future__ import annotations

import argparse
import sys

from fdp_audit.config import load_config
from fdp_audit.profiles.pipeline import run_profile, write_outputs


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "profile",
        help="privacy profiles and the ε transition of output perturbation (SPEC 2.7)",
        description="Compute per-row privacy profiles, typical profiles over model samples, the ε sweep and "
        "its transition, and write profile.json, profiles.npz and figures.",
    )
    parser.add_argument("config", metavar="CONFIG", help="YAML config with a 'profile' section")
    parser.add_argument("--out", metavar="DIR", default=None, help="output folder (default: report.out_dir)")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    out_dir = args.out or config.report.out_dir
    results = write_outputs(run_profile(config), out_dir)
    transition = results["transition"]
    accuracy = results["worst_case_accuracy"]["max_relative_error"]
    print(
        f"profile: n = {results['setting']['n']}, d = {results['setting']['d']}; "
        f"ε_low = {_fmt(transition['epsilon_low'])}, ε_high = {_fmt(transition['epsilon_high'])}, "
        f"ε* = {_fmt(transition['epsilon_star'])}; max A_wc relative error {_fmt(accuracy)}; "
        f"wrote {out_dir}/profile.json",
        file=sys.stdout,
    )
    return 0


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4g}"
