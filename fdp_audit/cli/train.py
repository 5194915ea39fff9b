"""`fdp-audit train CONFIG` (SPEC 5.1): train one model and write a checkpoint."""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

from fdp_audit.cli import EXIT_OK


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("train", help="train one model with the configured mechanism → checkpoint")
    parser.add_argument("config", help="YAML config")
    parser.add_argument("--out", help="checkpoint path (default: <report.out_dir>/model.pt)")
    parser.add_argument("--seed", type=int, help="override the config's seed")
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), help="override the config's device")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from fdp_audit.config import load_config
    from fdp_audit.data.prepare import prepare_data
    from fdp_audit.training.checkpoint import save_checkpoint
    from fdp_audit.training.run import train_one

    config = load_config(args.config)
    if args.device:
        config = replace(config, device=args.device)
    seed = config.seed if args.seed is None else args.seed
    data = prepare_data(config.data, config.seed)
    trained = train_one(config, data, seed, progress=True)
    out = Path(args.out) if args.out else Path(config.report.out_dir) / "model.pt"
    save_checkpoint(out, trained.params, trained.metadata)
    eps = trained.metadata["epsilon"]
    eps_text = "∞" if eps is None else f"{eps:.3f}"
    print(f"trained {config.mechanism.name} (z={trained.metadata['noise_multiplier']:.4g}, "
          f"p={config.mechanism.sample_rate:g}, T={config.mechanism.steps}): ε={eps_text} at "
          f"δ={config.mechanism.delta:g}, test accuracy {trained.test_accuracy:.4f}")
    print(f"checkpoint: {out}")
    return EXIT_OK
