"""Model factories for the nn.Module tests (named by configs as ``factories.py:function``)."""

from __future__ import annotations

import torch
from layers import InPlaceBias  # a sibling import: works because the factory's folder is importable
from torch import nn


def mlp(n_inputs: int, n_classes: int) -> nn.Module:
    """The built-in MLP's architecture (one hidden layer of 8), with the module's own parameter names."""
    out = 1 if n_classes == 2 else n_classes
    return nn.Sequential(nn.Linear(n_inputs, 8), nn.ReLU(), nn.Linear(8, out))


def in_place(n_inputs: int, n_classes: int) -> nn.Module:
    return nn.Sequential(InPlaceBias(n_inputs, 8), nn.ReLU(), nn.Linear(8, 1 if n_classes == 2 else n_classes))


def fixed() -> nn.Module:
    """A factory without arguments (its input width fixed): for the synthetic table's 7 encoded columns."""
    return nn.Linear(7, 1)


def not_a_module() -> object:
    return [1, 2]


def wrong_output(n_inputs: int, n_classes: int) -> nn.Module:
    return nn.Linear(n_inputs, 5)


class SignBranch(nn.Module):
    """Python control flow on the data: no torch.func transform can trace it."""

    def __init__(self, n_inputs: int):
        super().__init__()
        self.linear = nn.Linear(n_inputs, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x) if x.sum() > 0 else -self.linear(x)


class CountingBuffer(nn.Module):
    """A buffer changed in forward: state that would carry from one model's step to another's."""

    def __init__(self, n_inputs: int):
        super().__init__()
        self.linear = nn.Linear(n_inputs, 1)
        self.register_buffer("calls", torch.zeros(()))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls.add_(1.0)
        return self.linear(x)


def sign_branch(n_inputs: int, n_classes: int) -> nn.Module:
    return SignBranch(n_inputs)


def counting_buffer(n_inputs: int, n_classes: int) -> nn.Module:
    return CountingBuffer(n_inputs)
