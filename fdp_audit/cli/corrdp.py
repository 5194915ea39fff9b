"""`fdp-audit corrdp tv CONFIG [--out DIR]` and `fdp-audit corrdp train CONFIG [--out DIR]` (docs/files.md,
docs/corrdp.md).

``tv`` writes ``corrdp_tv.json`` (Example 2.6 and the per-feature TV table: paper Table 2 on Adult);
``train`` writes ``corrdp_train.json`` (utility curves, realised vs nominal ε per neighbour type, the
Eq. 4 and Theorem 3.9 checks) and ``corrdp_utility.png``. Output goes to ``--out`` or the config's
``report.out_dir`` and is written atomically, only after every computation has succeeded.
"""

from __future__ import annotations

import argparse

from fdp_audit.cli import flags_for


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``fdp-audit corrdp`` and its actions (docs/corrdp.md).

    Args:
        subparsers: the ``fdp-audit`` parser's subcommands; its handler is :func:`run`.
    """
    parser = subparsers.add_parser("corrdp", help="CorrDP: TV estimation and CorrDP-SGD (docs/corrdp.md)")
    actions = parser.add_subparsers(dest="corrdp_command", metavar="ACTION", required=True)
    for name, text in (
        ("tv", "estimate TV(j) per insensitive feature (Adult: paper Table 2) and Example 2.6"),
        ("train", "train CorrDP-SGD and the baselines; utility curves and realised vs nominal ε"),
    ):
        action = actions.add_parser(name, help=text)
        action.add_argument("config", metavar="CONFIG", help="YAML config with a corrdp section")
        action.add_argument("--out", metavar="DIR", help="output folder (default: report.out_dir)")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Run the ``fdp-audit corrdp`` action asked for on its config and write its outputs together (all or nothing).

    Args:
        args: the parsed command line: the action (``tv`` or ``train``), its config and ``--out``.

    Returns:
        The exit code, 0.

    Raises:
        BadInputError: bad input, naming the flag, field or file (exit code 2 through :func:`fdp_audit.cli.main`).
    """
    from fdp_audit.api import corrdp

    with flags_for({"out_dir": "--out"}):
        result, written = corrdp(args.corrdp_command, args.config, out_dir=args.out)
    print(f"wrote {' and '.join(map(str, written))}")
    for row in result.get("features", []) if args.corrdp_command == "tv" else ():
        paper = row["paper_table2"]
        print(f"  TV({row['feature']}) = {row['estimate']:.3f} (upper {row['upper']:.3f}, paper {paper})")
    return 0
