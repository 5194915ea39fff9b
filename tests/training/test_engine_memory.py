"""The engine's memory estimate follows the clipping path actually taken. Chunking and refusal by
that estimate are tested in tests/reliability/test_resource_guard.py."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from fdp_audit.config import OptimizerConfig
from fdp_audit.data.encoding import ColumnGroup
from fdp_audit.data.features import ColumnSplit
from fdp_audit.mechanisms import MECHANISMS
from fdp_audit.training import engine, ghost
from fdp_audit.training.engine import Hyperparameters, TrainingProblem, bytes_per_model
from fdp_audit.training.models import Model
from fdp_audit.training.public_losses import build_public_loss


def _problem(model: Model, mechanism: str = "dp_sgd", n: int = 4000, rate: float = 0.05) -> TrainingProblem:
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(n, model.n_inputs, generator=generator)
    y = torch.randint(0, model.n_classes, (n,), generator=generator)
    groups = tuple(ColumnGroup(f"f{i}", "numeric", i, i + 1) for i in range(model.n_inputs))
    split = ColumnSplit(groups, ("f0",))
    hyper = Hyperparameters(noise_multiplier=1.0, sample_rate=rate, steps=3, clip_norm=1.0, public_batch_size=32,
                            optimizer=OptimizerConfig(lr=0.5))
    return TrainingProblem(model, x, y, split, build_public_loss("mask", split), MECHANISMS[mechanism].recipe,
                           hyper)


def test_ghost_estimate_has_no_per_example_gradients(monkeypatch):
    """An MLP with 600·300 first-layer weights: the torch.func path needs per-example gradients, K·P floats
    (at least 4·K·P bytes, K ≈ 200 the expected batch), the ghost path only activations, a few K·width
    floats, so its estimate is far smaller and does not grow with P."""
    model = Model("mlp", 600, 2, (300,))
    problem = _problem(model)
    width = problem.hyper.sample_rate * problem.n
    fast = bytes_per_model(problem, record_iterates=False)
    monkeypatch.setattr(ghost, "supports", lambda model: False)
    materialised = bytes_per_model(problem, record_iterates=False)
    assert materialised >= 4 * width * model.n_parameters
    assert fast < materialised / 50
    assert fast >= 4 * width * (model.n_inputs + 300)  # at least the gathered inputs and one activation


@pytest.mark.parametrize(("public_loss", "path"), [("mask", "glm"), ("gaussian_pad", "ghost")])
def test_logistic_estimate_follows_the_path_the_engine_takes(monkeypatch, public_loss, path):
    """Logistic FDP-SGD takes the GLM path when ℓ_priv's public inputs are a function of the record, the
    ghost path under gaussian_pad; the engine and the estimate agree, and the GLM estimate (a few values per
    example and output, no gathered rows per model) is below the ghost one (every layer's inputs)."""
    problem = _problem(Model("logistic", 100, 2), "fdp_sgd")
    problem = replace(problem, public_loss=build_public_loss(public_loss, problem.public_map))
    assert engine.private_path(problem) == path
    step = engine._Step(problem, torch.zeros(2, dtype=torch.long), None, torch.device("cpu"))
    assert (step.tables is not None) == (path == "glm")
    if path == "glm":
        estimate = bytes_per_model(problem, record_iterates=False)
        monkeypatch.setattr(engine, "private_path", lambda problem: "ghost")
        assert estimate < bytes_per_model(problem, record_iterates=False) / 4
