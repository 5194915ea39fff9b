"""The plain PyTorch DP-SGD loop of train.py, run once as a script and audited in one run: the lines marked
``# one-run audit`` are all it adds (docs/one_run.md).

    python examples/plain_dp_sgd/one_run.py configs/plain_dp_sgd.yaml model.safetensors
    fdp-audit audit model.safetensors --config configs/plain_dp_sgd.yaml --canaries model.canaries.json

The config states the claim of train.py's constants (z = 1, p = 0.2, T = 10, C = 1); 1,000 gradient canaries, each
in the data set with probability ½, are sampled, clipped and noised by the loop like any record."""

import sys

import torch
from model import make_model
from torch.utils.data import TensorDataset
from train import train

import fdp_audit  # one-run audit
from fdp_audit.config import load_config
from fdp_audit.data.prepare import prepare_data

CANARIES = 1000


def main(config_path: str, out: str) -> None:
    config = load_config(config_path)
    x, y = prepare_data(config.data, config.seed).tensors()  # the training records (a real script loads its own)
    canaries = fdp_audit.GradientCanaries.from_config(config, CANARIES)  # one-run audit
    dataset = canaries.add_to(TensorDataset(x, y))  # one-run audit
    torch.manual_seed(config.seed)
    model = canaries.wrap(make_model(x.shape[1], int(y.max()) + 1))  # one-run audit
    with canaries.observing():  # one-run audit: train() builds its own optimizer
        train(model, dataset, config.seed)
    canaries.save(model, out)  # one-run audit: weights, release and manifest


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
