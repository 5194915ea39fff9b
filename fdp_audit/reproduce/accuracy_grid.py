"""Test-accuracy grids over mechanisms and ε, several seeds batched through
:func:`~fdp_audit.training.engine.train_models`: the utility tables of the reproductions."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from fdp_audit.claim import Claim, noise_multiplier
from fdp_audit.config import Config
from fdp_audit.data.prepare import PreparedData
from fdp_audit.mechanisms import MECHANISMS
from fdp_audit.reproduce.files import markdown_table
from fdp_audit.training.engine import accuracy, train_models
from fdp_audit.training.run import build_problem, resolve_device, with_mechanism

UTILITY_MECHANISMS = ("nonprivate", "public_only", "dp_sgd", "fdp_sgd", "fdp_dpsgd")


@dataclass(frozen=True)
class AccuracyCell:
    """One cell of an accuracy grid: a mechanism at one privacy level, over seeds.

    Attributes:
        mechanism: the mechanism's registry name.
        epsilon: the target ε the noise was calibrated to; None for mechanisms without private steps.
        noise_multiplier: the calibrated noise multiplier z; None without private steps.
        accuracies: the test accuracy in [0, 1] of each seed's model.
    """

    mechanism: str
    epsilon: float | None  # target ε; None for mechanisms without private steps
    noise_multiplier: float | None
    accuracies: tuple[float, ...]  # one per seed (model index)

    @property
    def mean(self) -> float:
        return statistics.fmean(self.accuracies)

    @property
    def sd(self) -> float:
        return statistics.stdev(self.accuracies) if len(self.accuracies) > 1 else 0.0

    def as_dict(self) -> dict[str, Any]:
        """The cell as the reproductions' JSON stores it.

        Returns:
            ``mechanism``, ``epsilon``, ``noise_multiplier``, ``accuracies`` (a list), ``mean`` and ``sd``.
        """
        return {"mechanism": self.mechanism, "epsilon": self.epsilon, "noise_multiplier": self.noise_multiplier,
                "accuracies": list(self.accuracies), "mean": self.mean, "sd": self.sd}


def mechanism_config(config: Config, name: str, epsilon: float | None, pretrain_steps: int,
                     pretrained: Sequence[str] = ("fdp_dpsgd",)) -> Config:
    """``config`` with mechanism ``name`` calibrated to ``epsilon`` at the config's δ; public pre-training
    (``pretrain_steps``) only for the mechanisms in ``pretrained`` (by default ``fdp_dpsgd``, whose defining
    feature it is; public pre-training costs no privacy, Remark 2 of the FDP paper).

    Args:
        config: the reproduction's configuration.
        name: a registered mechanism.
        epsilon: the target ε, or None for a mechanism without private steps.
        pretrain_steps: the public pre-training steps of the mechanisms in ``pretrained``.
        pretrained: the mechanisms that pre-train on the public loss.

    Returns:
        The new configuration.
    """
    cfg = with_mechanism(config, name)
    pretrain = pretrain_steps if name in pretrained else 0
    return cfg.with_overrides({"mechanism.target_epsilon": epsilon, "mechanism.public_pretrain_steps": pretrain})


def seed_accuracies(config: Config, data: PreparedData, seeds: int) -> tuple[float, ...]:
    """Test accuracy of ``seeds`` models (model indices 0..seeds-1 of ``config.seed``), trained as one batch.

    Args:
        config: the configuration to train with.
        data: the prepared data (its training and test splits).
        seeds: the number of models.

    Returns:
        One test accuracy in [0, 1] per model, in model order.
    """
    device = resolve_device(config.device)
    problem = build_problem(config, data)
    x_test = torch.as_tensor(data.test.x, device=device)
    y_test = torch.as_tensor(data.test.y, device=device)
    acc = torch.cat([accuracy(problem.model, chunk.params, x_test, y_test)
                     for chunk in train_models(problem, config.seed, range(seeds), device=device)])
    return tuple(float(a) for a in acc)


def accuracy_grid(config: Config, data: PreparedData, epsilons: Sequence[float], seeds: int,
                  pretrain_steps: int, mechanisms: Sequence[str] = UTILITY_MECHANISMS,
                  pretrained: Sequence[str] = ("fdp_dpsgd",)) -> list[AccuracyCell]:
    """Test accuracy of every mechanism at every ε (once for mechanisms without private steps).

    Args:
        config: the reproduction's configuration.
        data: the prepared data.
        epsilons: the target ε values of the private mechanisms.
        seeds: the number of models per cell.
        pretrain_steps: the public pre-training steps of the mechanisms in ``pretrained``.
        mechanisms: the registered mechanisms compared, in table order.
        pretrained: the mechanisms that pre-train on the public loss.

    Returns:
        One cell per (mechanism, ε), and one per mechanism without private steps (its ε None).
    """
    cells = []
    for name in mechanisms:
        private = MECHANISMS[name].recipe.private
        for epsilon in (epsilons if private else (None,)):
            cfg = mechanism_config(config, name, epsilon, pretrain_steps, pretrained)
            z = noise_multiplier(cfg.mechanism) if private else None
            cells.append(AccuracyCell(name, epsilon, z, seed_accuracies(cfg, data, seeds)))
    return cells


def claimed_epsilon(config: Config) -> float:
    """ε at the configured δ of the configured mechanism's claim.

    Args:
        config: a configuration.

    Returns:
        ε(δ) under add/remove neighbours (∞ for a non-private mechanism).
    """
    return Claim.from_config(config).epsilon


def grid_table(cells: Sequence[AccuracyCell], epsilons: Sequence[float]) -> str:
    """Markdown: one row per mechanism, one column per ε, ``mean ± sd`` test accuracy in %.

    Args:
        cells: the grid of :func:`accuracy_grid`.
        epsilons: the ε columns, in order (a mechanism without private steps repeats its one value).

    Returns:
        The markdown table.
    """
    headers = ["mechanism", *(f"ε = {e:g}" for e in epsilons)]
    rows = []
    for name in dict.fromkeys(c.mechanism for c in cells):
        mine = [c for c in cells if c.mechanism == name]
        if mine[0].epsilon is None:
            rows.append([name, *([percent(mine[0])] * len(epsilons))])
        else:
            by_eps = {c.epsilon: c for c in mine}
            rows.append([name, *(percent(by_eps[e]) for e in epsilons)])
    return markdown_table(headers, rows)


def percent(cell: AccuracyCell) -> str:
    """A cell's accuracy as ``mean ± sd`` in percent, one decimal.

    Args:
        cell: the accuracy cell.

    Returns:
        The text, e.g. ``84.1 ± 0.3``.
    """
    return f"{100 * cell.mean:.1f} ± {100 * cell.sd:.1f}"


def cell(cells: Sequence[AccuracyCell], mechanism: str, epsilon: float | None = None) -> AccuracyCell:
    """The cell of a mechanism at an ε.

    Args:
        cells: the grid of :func:`accuracy_grid`.
        mechanism: the mechanism's name.
        epsilon: the target ε (ignored for a mechanism without private steps).

    Returns:
        The first matching cell.

    Raises:
        StopIteration: no cell matches.
    """
    return next(c for c in cells if c.mechanism == mechanism and (c.epsilon is None or c.epsilon == epsilon))
