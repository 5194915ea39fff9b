"""The engine and an audit on CUDA agree with the CPU. The counter-based streams draw the same uniforms on every
device, so a model trained on the GPU equals its CPU twin up to float rounding, and an audit's trials (secrets,
batches, noise) are the same trials. Skipped where no CUDA device is present."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from fdp_audit.auditing.runner import run_audit
from fdp_audit.config import OptimizerConfig, config_from_dict
from fdp_audit.data.encoding import ColumnGroup
from fdp_audit.data.features import ColumnSplit
from fdp_audit.data.image_psi import BlurPublicMap
from fdp_audit.mechanisms import MECHANISMS
from fdp_audit.training.cnn import cnn_model
from fdp_audit.training.engine import Hyperparameters, TrainingProblem, train_models
from fdp_audit.training.models import Model
from fdp_audit.training.modules import build_module_model
from fdp_audit.training.public_losses import build_public_loss
from tests.conftest import small_config

CNNS = Path(__file__).parent / "user_modules" / "cnns.py"
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def _problem(mechanism: str, model: Model) -> TrainingProblem:
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(60, model.n_inputs, generator=generator)
    y = torch.randint(0, model.n_classes, (60,), generator=generator)
    if model.kind in ("cnn", "module"):  # 8×8 images
        public_map, public_loss = BlurPublicMap(8, 8), "public_image"
    else:
        groups = tuple(ColumnGroup(f"f{i}", "numeric", i, i + 1) for i in range(model.n_inputs))
        public_map, public_loss = ColumnSplit(groups, ("f4", "f5")), "mask"
    hyper = Hyperparameters(noise_multiplier=1.0, sample_rate=0.2, steps=5, clip_norm=0.5, public_batch_size=8,
                            optimizer=OptimizerConfig(lr=0.3))
    return TrainingProblem(model, x, y, public_map, build_public_loss(public_loss, public_map),
                           MECHANISMS[mechanism].recipe, hyper)


@pytest.mark.parametrize("mechanism", ["fdp_sgd", "dp_sgd"])
@pytest.mark.parametrize("model", [Model("logistic", 8, 2), Model("mlp", 8, 3, (5,)), cnn_model(64, 3, (4, 8)),
                                   build_module_model(f"{CNNS}:strided", 64, 3)],
                         ids=["logistic", "mlp", "cnn", "user-cnn"])
def test_models_trained_on_cuda_match_their_cpu_twins(mechanism, model):
    """Models of fewer than HASHED_NORMALS parameters: every normal they draw is hashed, hence device-free."""
    problem = _problem(mechanism, model)
    (cpu,) = train_models(problem, 3, range(6), record_iterates=True)
    (gpu,) = train_models(problem, 3, range(6), record_iterates=True, device="cuda")
    for name, value in cpu.params.items():
        assert gpu.params[name].device.type == "cuda"
        torch.testing.assert_close(gpu.params[name].cpu(), value, atol=2e-4, rtol=2e-4)


def test_normals_beyond_the_hashed_head_are_standard_normal_on_cuda():
    """Beyond the first HASHED_NORMALS draws of a request the normals come from the device's own generator
    (CUDA's Philox, not the CPU's Mersenne Twister), so they differ from the CPU's but must still be i.i.d.
    N(0, 1): the hashed head equals the CPU's, and a Kolmogorov–Smirnov test of the rest (2·NORMAL_BLOCK draws
    per model, 4 models) rejects a correct generator with probability 1e-3."""
    from scipy import stats as scipy_stats

    from fdp_audit.training import streams
    keys = streams.model_keys(0, range(4))
    count = streams.HASHED_NORMALS + 2 * streams.NORMAL_BLOCK
    cpu = streams.normal(keys, 7, streams.Stream.NOISE, count)
    gpu = streams.normal(keys.cuda(), 7, streams.Stream.NOISE, count, "cuda").cpu()
    head = streams.HASHED_NORMALS
    torch.testing.assert_close(gpu[:, :head], cpu[:, :head], atol=1e-6, rtol=1e-6)
    assert scipy_stats.kstest(gpu[:, head:].flatten().double().numpy(), "norm").pvalue > 1e-3


GAME_CONFIGS = {
    "distinguishing": small_config("dp_sgd", audit={"trials": 64, "games": ["distinguishing"],
                                                    "attacks": ["prior", "iterates", "iterates_public_aligned"]}),
    "attribute": small_config("fdp_sgd", rows=100, mechanism={"steps": 5},
                              audit={"trials": 200, "games": ["attribute"], "target_prior": [0.5, 0.5],
                                     "attacks": ["prior", "likelihood", "gradient", "informed_gradient"]}),
    "reconstruction": {
        "seed": 5, "data": {"dataset": "synthetic", "protected": ["protected-0", "protected-1"],
                            "synthetic_rows": 200, "synthetic_prior_kind": "gaussian"},
        "mechanism": {"name": "dp_sgd", "sample_rate": 0.25, "steps": 40, "noise_multiplier": 1.0},
        "audit": {"trials": 60, "games": ["reconstruction"], "attacks": ["prior", "reconstruction"],
                  "rho_grid": [0.5, 1.0]}},
}


def audit_results(raw: dict, device: str) -> dict:
    return run_audit(config_from_dict({**raw, "device": device}), out_dir=None)


@pytest.mark.parametrize("game", sorted(GAME_CONFIGS))
def test_an_audit_on_cuda_plays_the_cpu_trials(game):
    """Every attack of every game scores the GPU's models; secrets and successes are those of the CPU run."""
    cpu, gpu = (audit_results(GAME_CONFIGS[game], device) for device in ("cpu", "cuda"))
    assert gpu["reproducibility"]["device"] == "cuda"
    assert gpu["verdict"]["status"] == cpu["verdict"]["status"]
    assert [row.get("successes") for row in gpu["comparisons"]] == [row.get("successes") for row in cpu["comparisons"]]
