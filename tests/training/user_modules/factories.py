"""Model factories for the nn.Module tests (named by configs as ``factories.py:function``)."""

from __future__ import annotations

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
