"""Train the plain PyTorch DP-SGD loop outside fdp-audit and save its weights as safetensors, with crafted input
canaries inserted into the training data for a one-run audit of the final weights (docs/one_run.md; one_run.py
audits every update with gradient canaries instead):

    python examples/plain_dp_sgd/train_and_save.py configs/plain_dp_sgd.yaml model.safetensors 100
    fdp-audit audit model.safetensors --config configs/plain_dp_sgd.yaml                      # checkpoint audit
    fdp-audit audit model.safetensors --config configs/plain_dp_sgd.yaml --canaries model.canaries.json

The config names the model factory, the data and the claim; the weights file holds tensors only."""

import sys
from pathlib import Path

import torch
from model import make_model
from safetensors.torch import save_file
from train import train

from fdp_audit.auditing.one_run.canaries import insert_record_canaries
from fdp_audit.config import load_config


def main(config_path: str, out: str, canaries: int) -> None:
    config = load_config(config_path)
    dataset = insert_record_canaries(config, canaries, Path(out).with_suffix(".canaries.json"))
    inputs, labels = dataset[:]
    torch.manual_seed(config.seed)
    model = make_model(inputs.shape[1], int(labels.max()) + 1)
    train(model, dataset, config.seed)
    save_file(model.state_dict(), out)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
