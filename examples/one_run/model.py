"""The model of the one-run examples: a small MLP over the encoded records (one logit per class)."""

from torch import nn


def make_model(n_inputs: int, n_classes: int) -> nn.Module:
    return nn.Sequential(nn.Linear(n_inputs, 32), nn.ReLU(), nn.Linear(32, n_classes))
