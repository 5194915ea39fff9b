"""From a validated config to a training problem, its accounting, and trained models (docs/design.md: config →
data+Ψ → mechanism → models)."""

from __future__ import annotations

import platform
from dataclasses import dataclass
from typing import Any

import torch

from fdp_audit import __version__
from fdp_audit.claim import Claim, noise_multiplier
from fdp_audit.config import Config
from fdp_audit.data.prepare import PreparedData
from fdp_audit.errors import BadInputError
from fdp_audit.mechanisms import ENGINE, MECHANISMS
from fdp_audit.training.architectures import build_model
from fdp_audit.training.engine import Hyperparameters, TrainingProblem, accuracy, train_models
from fdp_audit.training.models import Params
from fdp_audit.training.progress import TrainingProgress, epsilon_curve
from fdp_audit.training.public_losses import build_public_loss


def resolve_device(name: str) -> torch.device:
    """The torch device a config's ``device`` names: ``cuda``, ``cpu``, or ``auto`` (CUDA when available).

    Args:
        name: ``"auto"``, ``"cuda"`` or ``"cpu"``.

    Returns:
        The device.

    Raises:
        BadInputError: CUDA is requested and not available.
    """
    if name == "cuda" or (name == "auto" and torch.cuda.is_available()):
        if not torch.cuda.is_available():
            raise BadInputError("CUDA requested but not available", "device")
        return torch.device("cuda")
    return torch.device("cpu")


def build_problem(config: Config, data: PreparedData) -> TrainingProblem:
    """The training problem of a config on prepared data: the model, the data tensors, Ψ, the public loss the
    mechanism's recipe needs, and the hyperparameters with the claimed noise multiplier.

    Args:
        config: a validated configuration.
        data: the prepared data set and its public map Ψ.

    Returns:
        The problem the batched engine trains.

    Raises:
        BadInputError: the mechanism is not trained by the engine, needs public pre-training that is not
            configured, or the model or public loss does not fit the data.
    """
    mech = config.mechanism
    row = MECHANISMS[mech.name]
    if row.trained_by != ENGINE:
        raise BadInputError(f"{mech.name} is trained by '{row.trained_by}'", "mechanism.name")
    if row.needs_public_pretraining and mech.public_pretrain_steps == 0:
        raise BadInputError(f"{mech.name} needs public_pretrain_steps > 0", "mechanism.public_pretrain_steps")
    model = build_model(config.model, data.train.n_features, data.train.n_classes, config.audit.trial_timeout)
    recipe = row.recipe
    needs_public = recipe.public_batch != "none" or recipe.private_loss == "decomposed" or mech.public_pretrain_steps
    public_loss = build_public_loss(mech.public_loss, data.public_map, data.population) if needs_public else None
    hyper = Hyperparameters(
        noise_multiplier=noise_multiplier(mech), sample_rate=mech.sample_rate, steps=mech.steps,
        clip_norm=mech.clip_norm, public_batch_size=mech.public_batch_size, private_weight=mech.private_weight,
        public_pretrain_steps=mech.public_pretrain_steps, projection_radius=mech.projection_radius,
        optimizer=mech.optimizer)
    x, y = data.tensors()
    return TrainingProblem(model, x, y, data.public_map, public_loss, recipe, hyper)


def with_mechanism(config: Config, name: str) -> Config:
    """The same config with another (correct) built-in mechanism, for utility comparisons (the user's own
    training, if the config names one, replaced by the engine's).

    Args:
        config: the configuration.
        name: the registered mechanism to use instead.

    Returns:
        The new configuration.
    """
    return config.with_overrides({"mechanism.name": name, "mechanism.faulty": False, "mechanism.training": None,
                                  "mechanism.integration": "none"})


@dataclass(frozen=True)
class TrainedModel:
    """One model trained by the configured mechanism, with what its checkpoint records.

    Attributes:
        params: the trained parameters by name, without a model dimension, on the CPU.
        metadata: the checkpoint's metadata (:func:`checkpoint_metadata`: the claim, the data's fingerprint, the seed,
            the configuration, the model's shape).
        test_accuracy: its accuracy on the test split, in [0, 1].
    """

    params: Params  # one model, no model dimension
    metadata: dict[str, Any]
    test_accuracy: float


def checkpoint_metadata(config: Config, data: PreparedData, problem: TrainingProblem, seed: int,
                        claim: Claim | None = None) -> dict[str, Any]:
    """What a checkpoint records beside the weights (docs/files.md): the claim (``claim``, by default the
    configuration's), the data's fingerprint, the seed, the configuration and the model's shape.

    Args:
        config: the configuration trained.
        data: the prepared data (its fingerprint and Ψ are recorded).
        problem: the training problem (its noise multiplier and model are recorded).
        seed: the seed the model was trained with.
        claim: the claim whose ε is recorded; None builds the configuration's.

    Returns:
        The metadata (JSON-serialisable; ``epsilon`` None when the claim's ε is infinite).
    """
    mech, model = config.mechanism, problem.model
    epsilon = (claim or Claim.from_config(config)).epsilon
    return {
        "format_version": 1, "package_version": __version__, "python": platform.python_version(),
        "torch": torch.__version__, "mechanism": mech.name, "faulty": mech.faulty,
        "noise_multiplier": problem.hyper.noise_multiplier, "sample_rate": mech.sample_rate,
        "public_batch_size": mech.public_batch_size, "steps": mech.steps, "clip_norm": mech.clip_norm,
        "private_weight": mech.private_weight, "public_pretrain_steps": mech.public_pretrain_steps,
        "public_loss": mech.public_loss, "delta": mech.delta,
        "epsilon": epsilon if epsilon != float("inf") else None,
        "psi": data.public_map.spec(), "dataset": config.data.dataset, "dataset_fingerprint": data.fingerprint,
        "seed": seed, "config": config.to_dict(),
        "model": {"kind": model.kind, "n_inputs": model.n_inputs, "n_classes": model.n_classes,
                  "hidden": list(model.hidden), "image_side": model.image_side},
    }


def train_one(config: Config, data: PreparedData, seed: int | None = None, progress: bool = False) -> TrainedModel:
    """Train the configured mechanism once (model index 0 of ``seed``); ``progress`` shows a per-step bar
    with the training loss and the ε spent so far (:mod:`fdp_audit.training.progress`).

    Args:
        config: a validated configuration.
        data: the prepared data.
        seed: the seed; None takes the configuration's.
        progress: whether to show the progress bar.

    Returns:
        The trained model's parameters (on the CPU), its checkpoint metadata and its test accuracy.

    Raises:
        BadInputError: the configuration cannot be trained (:func:`build_problem`) or training diverged.
    """
    seed = config.seed if seed is None else seed
    device = resolve_device(config.device)
    problem = build_problem(config, data)
    claim = Claim.from_config(config)
    on_step = None
    if progress:
        mech = config.mechanism
        curve = epsilon_curve(mech, problem.hyper.noise_multiplier, claim.epsilon)
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
    return TrainedModel(params, checkpoint_metadata(config, data, problem, seed, claim), float(acc[0]))
