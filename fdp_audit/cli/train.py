"""`fdp-audit train CONFIG` (docs/files.md): train one model and write a checkpoint."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from fdp_audit.accounting.events import RELATIONS
from fdp_audit.cli import EXIT_OK, SEED_HELP, flags_for

if TYPE_CHECKING:
    from fdp_audit.config import Config


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``fdp-audit train``: train one model with the configured mechanism into a checkpoint.

    Args:
        subparsers: the ``fdp-audit`` parser's subcommands; its handler is :func:`run`.
    """
    parser = subparsers.add_parser("train", help="train one model with the configured mechanism → checkpoint")
    parser.add_argument("config", help="YAML config")
    parser.add_argument("--out", help="checkpoint path (default: <report.out_dir>/model.pt; with --canaries and "
                        "mechanism.training, safetensors weights <report.out_dir>/model.safetensors)")
    parser.add_argument("--seed", type=int, help=SEED_HELP)
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), help="override the config's device")
    parser.add_argument("--canaries", type=int, metavar="M", help="insert M canaries for a one-run audit; writes the "
                        "secrets' manifest <out>.canaries.json beside the checkpoint (and the gradient canaries' "
                        "release <out>.canary-release.pt); with mechanism.training, one run of the user's loop with "
                        "M gradient canaries")
    parser.add_argument("--canary-game", choices=("inclusion", "value"),
                        help="one-run game (default: value for FDP mechanisms, inclusion otherwise)")
    parser.add_argument("--canary-kind", choices=("gradient", "crafted", "record"), default="gradient",
                        help="gradient canaries (white box: final weights and updates; default), crafted input "
                        "canaries (records a training without privacy memorises; final model) or record canaries "
                        "(copies of population records; final model, informational unless violated)")
    parser.add_argument("--canary-values", type=int, default=2, metavar="K",
                        help="candidates per canary in the value game (default 2)")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Run ``fdp-audit train``: train one model (with ``--canaries``, once with canaries inserted) and write its
    checkpoint.

    Args:
        args: the parsed command line: the config, ``--out``, ``--seed``, ``--device`` and the canary flags
            (``--canaries``, ``--canary-game``, ``--canary-kind``, ``--canary-values``).

    Returns:
        The exit code, 0.

    Raises:
        BadInputError: bad input, naming the flag, field or file (exit code 2 through :func:`fdp_audit.cli.main`).
    """
    from fdp_audit.api import train

    with flags_for({"seed": "--seed", "device": "--device", "out": "--out"}):
        trained = train(args.config, out=args.out, seed=args.seed, device=args.device, canaries=args.canaries,
                        canary_game=args.canary_game, canary_kind=args.canary_kind, canary_values=args.canary_values)
    config = trained.config
    if trained.release is not None:
        print(f"canary release: {trained.release}")
    if trained.manifest is not None:
        print(f"canary manifest (secrets): {trained.manifest}")
    if trained.manifest is not None and config.mechanism.training is not None:
        print(f"trained the user's loop once with {args.canaries} gradient canaries: {trained.metadata['steps']} "
              f"optimizer steps released\nweights: {trained.checkpoint}\naudit: fdp-audit audit "
              f"{trained.checkpoint} --config {args.config} --canaries {trained.manifest}")
        return EXIT_OK
    print(f"trained {config.mechanism.name} (z={trained.metadata['noise_multiplier']:.4g}, "
          f"p={config.mechanism.sample_rate:g}, T={config.mechanism.steps}): {claimed_epsilons(config)} at "
          f"δ={config.mechanism.delta:g}, test accuracy {trained.test_accuracy:.4f}")
    print(f"checkpoint: {trained.checkpoint}")
    return EXIT_OK


def claimed_epsilons(config: Config) -> str:
    """``ε=1.856 (add/remove), ε=2.673 (replace-one)``: the ε the gate may judge against, under each relation.

    Args:
        config: the trained configuration (its mechanism's claim at its δ).

    Returns:
        The text.
    """
    from fdp_audit.claim import Claim

    claim, shown = Claim.from_config(config), []
    for relation in RELATIONS:
        eps = float(claim.accountant(relation).epsilon(claim.delta))
        shown.append(f"ε={'∞' if eps == float('inf') else f'{eps:.3f}'} ({relation.words})")
    return ", ".join(shown)
