"""What the reproductions share: test-accuracy grids over mechanisms and ε (several seeds batched through
:func:`~fdp_audit.training.engine.train_models`), markdown tables, and writing ``<name>.md`` +
``<name>.json``."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from fdp_audit.atomic_io import atomic_write_json, atomic_write_text
from fdp_audit.claim import Claim, noise_multiplier
from fdp_audit.config import Config
from fdp_audit.data.prepare import PreparedData
from fdp_audit.mechanisms import MECHANISMS
from fdp_audit.reproduce import Summary
from fdp_audit.training.engine import accuracy, train_models
from fdp_audit.training.run import build_problem, resolve_device, with_mechanism

UTILITY_MECHANISMS = ("nonprivate", "public_only", "dp_sgd", "fdp_sgd", "fdp_dpsgd")


@dataclass(frozen=True)
class AccuracyCell:
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


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A markdown table; floats are shown to 4 significant digits, infinity as ∞.

    Args:
        headers: the column headers.
        rows: the rows, one value per header.

    Returns:
        The table's lines joined by newlines (no final newline).
    """
    def text(value: Any) -> str:
        if isinstance(value, float):
            return "∞" if math.isinf(value) else f"{value:.4g}"
        return str(value)

    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(text(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def write_reproduction(out_dir: Path, name: str, title: str, sections: Sequence[str], payload: dict[str, Any],
                       summary: str) -> Summary:
    """Write ``<name>.md`` (title, then the markdown sections) and ``<name>.json`` (``payload``), atomically.

    Args:
        out_dir: the folder both files go into.
        name: the reproduction's name (the files' stem).
        title: the markdown's heading and the JSON's ``title``.
        sections: the markdown sections, in order.
        payload: the numbers, stored in the JSON beside ``name``, ``title`` and ``summary``.
        summary: the one-line summary.

    Returns:
        The reproduction's summary: ``name``, ``summary`` and the paths of ``markdown`` and ``json``.
    """
    out_dir = Path(out_dir)
    markdown = "\n\n".join([f"# {title}", *sections]) + "\n"
    md_path = atomic_write_text(out_dir / f"{name}.md", markdown)
    json_path = atomic_write_json(out_dir / f"{name}.json", {"name": name, "title": title, "summary": summary,
                                                             **payload})
    return {"name": name, "summary": summary, "markdown": str(md_path), "json": str(json_path)}
