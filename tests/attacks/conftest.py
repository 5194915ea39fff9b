"""Small trained logistic regressions for the attack tests.

``isolated`` is a known-answer setting: every record of S has all-zero protected columns, so the first-layer
weights on the candidates' protected columns receive gradient from the target alone. Trained with the target,
the weight of its true value moves towards its label and the weight of every other value stays exactly zero;
the true candidate therefore has the larger likelihood and the smaller loss gradient, whatever the data."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pytest
import torch

from fdp_audit.config import config_from_dict
from fdp_audit.data.encoding import ColumnGroup
from fdp_audit.data.prepare import PreparedData, prepare_data
from fdp_audit.training.engine import Canaries, TrainingProblem, train_models
from fdp_audit.training.models import Params
from fdp_audit.training.run import build_problem


@dataclass(frozen=True)
class Targets:
    """R targets (population rows, re-used cyclically): candidate completions ``[R, V, d]``, labels, true
    values."""

    candidates: torch.Tensor
    labels: torch.Tensor
    truth: torch.Tensor

    @property
    def x(self) -> torch.Tensor:
        return self.candidates[torch.arange(len(self.truth)), self.truth]


@dataclass(frozen=True)
class Setting:
    data: PreparedData
    problem: TrainingProblem
    group: ColumnGroup

    def targets(self, count: int, seed: int, prior: tuple[float, ...] = (0.5, 0.5)) -> Targets:
        index = np.arange(count) % self.data.population.n_rows  # wraps round when there are more trials
        rows = torch.as_tensor(self.data.population.x[index]).clone()
        truth = torch.as_tensor(np.random.default_rng(seed).choice(len(prior), size=count, p=prior))
        candidates = rows[:, None, :].repeat(1, len(prior), 1)
        candidates[:, :, self.group.start:self.group.stop] = 0.0
        candidates[:, torch.arange(len(prior)), self.group.start + torch.arange(len(prior))] = 1.0
        return Targets(candidates, torch.as_tensor(self.data.population.y[index]), truth)

    def train(self, targets: Targets | None, count: int, seed: int = 0, include: bool = True) -> Params:
        canaries = None if targets is None else Canaries(
            targets.x, targets.labels, torch.full((count,), include), torch.full((count,), include))
        (chunk,) = list(train_models(self.problem, seed, range(count), canaries, max_chunk=count))
        return chunk.params


def nonprivate_setting(sample_rate: float, steps: int, lr: float, rows: int = 200) -> Setting:
    config = config_from_dict({
        "seed": 0, "device": "cpu",
        "data": {"dataset": "synthetic", "protected": ["protected"], "synthetic_rows": rows},
        "mechanism": {"name": "nonprivate", "sample_rate": sample_rate, "steps": steps,
                      "optimizer": {"name": "sgd", "lr": lr}},
    })
    data = prepare_data(config.data, config.seed)
    (group,) = data.public_map.protected_groups
    assert group.categories == ("0", "1")
    return Setting(data, build_problem(config, data), group)


@pytest.fixture(scope="package")
def isolated() -> Setting:
    """Full-batch non-private gradient descent to near-optimum, S's protected columns zeroed."""
    setting = nonprivate_setting(sample_rate=1.0, steps=150, lr=2.0)
    x = setting.problem.x.clone()
    x[:, setting.group.start:setting.group.stop] = 0.0
    return replace(setting, problem=replace(setting.problem, x=x))


@pytest.fixture(scope="package")
def population_model() -> Setting:
    """Non-private SGD (Poisson rate 0.3) on the unmodified synthetic table, where the protected value
    moves the label: a model learns the population correlation."""
    return nonprivate_setting(sample_rate=0.3, steps=40, lr=1.0)
