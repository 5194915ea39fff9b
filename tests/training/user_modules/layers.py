"""Layers imported by ``factories.py`` as a sibling module (the factory file's folder is importable)."""

from __future__ import annotations

import torch
from torch import nn


class InPlaceBias(nn.Module):
    """A linear layer whose bias is written in place into a fresh buffer: no vmap batching rule over stacked
    parameters (the engine loops over models), fine per example."""

    def __init__(self, n_in: int, n_out: int):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(n_out, n_in) * 0.3)
        self.bias = nn.Parameter(torch.zeros(n_out))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.zeros(x.shape[0], self.bias.shape[0], dtype=x.dtype)
        out += self.bias
        return out + x @ self.weight.T
