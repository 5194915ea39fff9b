"""From a validated config to a training problem, its accounting, and trained models (docs/design.md: config →
data+Ψ → mechanism → models)."""

from __future__ import annotations

import platform
from dataclasses import dataclass
from typing import Any

import torch

from fdp_audit import __version__
from fdp_audit.accounting.calibration import calibrate_noise_multiplier
from fdp_audit.accounting.mechanism import MechanismAccountant, MechanismSpec
from fdp_audit.config import Config, MechanismConfig
from fdp_audit.data.prepare import PreparedData
from fdp_audit.errors import BadInputError
from fdp_audit.training.architectures import build_model
from fdp_audit.training.engine import Hyperparameters, TrainingProblem, accuracy, train_models
from fdp_audit.training.mechanisms import ENGINE, MECHANISMS
from fdp_audit.training.models import Params
from fdp_audit.training.progress import TrainingProgress, epsilon_curve
from fdp_audit.training.public_losses import build_public_loss


def resolve_device(name: str) -> torch.device:
    if name == "cuda" or (name == "auto" and torch.cuda.is_available()):
        if not torch.cuda.is_available():
            raise BadInputError("CUDA requested but not available", "device")
        return torch.device("cuda")
    return torch.device("cpu")


# per process, by (ε, δ, p, T): a calibration costs seconds of accounting and an audit asks for it many times
_CALIBRATED: dict[tuple[float, float, float, int], float] = {}


def _calibration_key(mech: MechanismConfig) -> tuple[float, float, float, int]:
    return (mech.target_epsilon, mech.delta, mech.sample_rate, mech.steps)


def noise_multiplier(mech: MechanismConfig) -> float:
    """The configured z, or the z calibrated to ``target_epsilon`` at ``delta`` (docs/files.md ``calibrate``)."""
    if mech.target_epsilon is not None:
        key = _calibration_key(mech)
        if key not in _CALIBRATED:
            _CALIBRATED[key] = calibrate_noise_multiplier(*key)
        return _CALIBRATED[key]
    if mech.noise_multiplier is None:
        return 0.0
    return mech.noise_multiplier


def adopt_noise_multiplier(mech: MechanismConfig, z: float) -> None:
    """Take ``z`` as this process's calibration of ``mech`` (nothing to take without a ``target_epsilon``): a
    worker given the driver's z skips seconds of accounting that would give it the same number, as it runs the
    driver's code (:mod:`fdp_audit.execution.dask` checks that before a chunk runs)."""
    if mech.target_epsilon is not None:
        _CALIBRATED[_calibration_key(mech)] = z


def accountant(mech: MechanismConfig, relation: str = "add-remove") -> MechanismAccountant:
    """The mechanism's claimed privacy (faulty mechanisms are accounted as they claim)."""
    if MECHANISMS[mech.name].accounting != "subsampled_gaussian":
        return MechanismAccountant(MechanismSpec(mech.name))
    return MechanismAccountant(MechanismSpec(mech.name, noise_multiplier(mech), mech.sample_rate, mech.steps,
                                             mech.public_pretrain_steps, relation))


def build_problem(config: Config, data: PreparedData) -> TrainingProblem:
    mech = config.mechanism
    row = MECHANISMS[mech.name]
    if row.trained_by != ENGINE:
        raise BadInputError(f"{mech.name} is trained by '{row.trained_by}'", "mechanism.name")
    if row.needs_public_pretraining and mech.public_pretrain_steps == 0:
        raise BadInputError(f"{mech.name} needs public_pretrain_steps > 0", "mechanism.public_pretrain_steps")
    model = build_model(config.model, data.train.n_features, data.train.n_classes)
    recipe = row.recipe
    needs_public = recipe.public_batch != "none" or recipe.private_loss == "decomposed" or mech.public_pretrain_steps
    public_loss = build_public_loss(mech.public_loss, data.feature_split, data.population) if needs_public else None
    hyper = Hyperparameters(
        noise_multiplier=noise_multiplier(mech), sample_rate=mech.sample_rate, steps=mech.steps,
        clip_norm=mech.clip_norm, public_batch_size=mech.public_batch_size, private_weight=mech.private_weight,
        public_pretrain_steps=mech.public_pretrain_steps, projection_radius=mech.projection_radius,
        optimizer=mech.optimizer)
    x, y = data.tensors()
    return TrainingProblem(model, x, y, data.feature_split, public_loss, recipe, hyper)


def with_mechanism(config: Config, name: str) -> Config:
    """The same config with another (correct) built-in mechanism, for utility comparisons (the user's own
    training, if the config names one, replaced by the engine's)."""
    return config.with_overrides({"mechanism.name": name, "mechanism.faulty": False, "mechanism.training": None,
                                  "mechanism.integration": "none"})


@dataclass(frozen=True)
class TrainedModel:
    params: Params  # one model, no model dimension
    metadata: dict[str, Any]
    test_accuracy: float


def checkpoint_metadata(config: Config, data: PreparedData, problem: TrainingProblem, seed: int) -> dict[str, Any]:
    mech, model = config.mechanism, problem.model
    acct = accountant(mech)
    epsilon = float(acct.epsilon(mech.delta))
    return {
        "format_version": 1, "package_version": __version__, "python": platform.python_version(),
        "torch": torch.__version__, "mechanism": mech.name, "faulty": mech.faulty,
        "noise_multiplier": problem.hyper.noise_multiplier, "sample_rate": mech.sample_rate,
        "public_batch_size": mech.public_batch_size, "steps": mech.steps, "clip_norm": mech.clip_norm,
        "private_weight": mech.private_weight, "public_pretrain_steps": mech.public_pretrain_steps,
        "public_loss": mech.public_loss, "delta": mech.delta,
        "epsilon": epsilon if epsilon != float("inf") else None,
        "psi": data.feature_split.spec(), "dataset": config.data.dataset, "dataset_fingerprint": data.fingerprint,
        "seed": seed, "config": config.to_dict(),
        "model": {"kind": model.kind, "n_inputs": model.n_inputs, "n_classes": model.n_classes,
                  "hidden": list(model.hidden), "image_side": model.image_side},
    }


def train_one(config: Config, data: PreparedData, seed: int | None = None, progress: bool = False) -> TrainedModel:
    """Train the configured mechanism once (model index 0 of ``seed``); ``progress`` shows a per-step bar
    with the training loss and the ε spent so far (:mod:`fdp_audit.training.progress`)."""
    seed = config.seed if seed is None else seed
    device = resolve_device(config.device)
    problem = build_problem(config, data)
    on_step = None
    if progress:
        mech = config.mechanism
        curve = epsilon_curve(mech, problem.hyper.noise_multiplier, float(accountant(mech).epsilon(mech.delta)))
        on_step = TrainingProgress(problem, mech.name, curve)
    try:
        (chunk,) = list(train_models(problem, seed, [0], device=device, on_step=on_step))
    except BaseException:
        if on_step is not None:
            on_step.close(succeeded=False)
        raise
    if on_step is not None:
        on_step.close()
    params = {k: v[0].detach().cpu() for k, v in chunk.params.items()}
    acc = accuracy(problem.model, {k: v[None] for k, v in params.items()}, torch.as_tensor(data.test.x),
                   torch.as_tensor(data.test.y))
    return TrainedModel(params, checkpoint_metadata(config, data, problem, seed), float(acc[0]))
