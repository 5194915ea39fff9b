"""The engine and an audit on CUDA agree with the CPU. The counter-based streams draw the same uniforms on every
device, so a model trained on the GPU equals its CPU twin up to float rounding, and an audit's trials (secrets,
batches, noise) are the same trials. Skipped where no CUDA device is present."""

from __future__ import annotations

import json

import pytest
import torch

from fdp_audit.config import OptimizerConfig
from fdp_audit.data.encoding import ColumnGroup
from fdp_audit.data.features import BlurMap, FeatureSplit
from fdp_audit.training.engine import Hyperparameters, TrainingProblem, train_models
from fdp_audit.training.mechanisms import MECHANISMS
from fdp_audit.training.models import Model
from fdp_audit.training.public_losses import build_public_loss
from tests.conftest import small_config, write_yaml

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def _problem(mechanism: str, model: Model) -> TrainingProblem:
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(60, model.n_inputs, generator=generator)
    y = torch.randint(0, model.n_classes, (60,), generator=generator)
    if model.kind == "cnn":
        feature_map, public_loss = BlurMap(model.image_side, model.image_side), "blur"
    else:
        groups = tuple(ColumnGroup(f"f{i}", "numeric", i, i + 1) for i in range(model.n_inputs))
        feature_map, public_loss = FeatureSplit(groups, ("f4", "f5")), "mask"
    hyper = Hyperparameters(noise_multiplier=1.0, sample_rate=0.2, steps=5, clip_norm=0.5, public_batch_size=8,
                            optimizer=OptimizerConfig(lr=0.3))
    return TrainingProblem(model, x, y, feature_map, build_public_loss(public_loss, feature_map),
                           MECHANISMS[mechanism].recipe, hyper)


@pytest.mark.parametrize("mechanism", ["fdp_sgd", "dp_sgd"])
@pytest.mark.parametrize("model", [Model("logistic", 8, 2), Model("mlp", 8, 3, (5,)), Model("cnn", 64, 3, (), 8)],
                         ids=["logistic", "mlp", "cnn"])
def test_models_trained_on_cuda_match_their_cpu_twins(mechanism, model):
    problem = _problem(mechanism, model)
    (cpu,) = train_models(problem, 3, range(6), record_iterates=True)
    (gpu,) = train_models(problem, 3, range(6), record_iterates=True, device="cuda")
    for name, value in cpu.params.items():
        assert gpu.params[name].device.type == "cuda"
        torch.testing.assert_close(gpu.params[name].cpu(), value, atol=2e-4, rtol=2e-4)


def test_an_audit_on_cuda_plays_the_cpu_trials(tmp_path, cli):
    results = {}
    for device in ("cpu", "cuda"):
        config = write_yaml(tmp_path / device / "config.yaml",
                            small_config("dp_sgd", device=device, audit={"trials": 64, "games": ["distinguishing"],
                                                                         "attacks": ["prior", "iterates"]}))
        assert cli("audit", str(config), "--out", str(tmp_path / device / "out")).code in (0, 1)
        results[device] = json.loads((tmp_path / device / "out" / "results.json").read_text())
    assert results["cuda"]["reproducibility"]["device"] == "cuda"
    assert results["cuda"]["verdict"]["status"] == results["cpu"]["verdict"]["status"]
    successes = {device: [row.get("successes") for row in r["comparisons"]] for device, r in results.items()}
    assert successes["cuda"] == successes["cpu"]
