"""The FDP paper's diffusion experiment (Section 6.3, Figure 7) at a scale this suite runs (docs/generative.md).

For each seed: the non-private model, the public-only model (trained on Ψ̃(x)), DP-SGD from scratch, and, from
the public model, FDP by DP-SGD fine-tuning (Proposition 2) and Algorithm 1. Every model draws
``samples_per_class`` images of every class; the Fréchet distance of their classifier features to the held-out
test images' features, overall and per class, measures sample quality (lower is better). Two reference rows
bound what the distances can show: real training images (what a perfect generator would score at the same sample
size: the estimator's floor) and their public completions Ψ̃(x) (what the public feature alone scores).

The paper's ordering on AFHQ (FID): non-private 25.2 < FDP Alg. 1 101.9 < FDP DP-SGD 115.5 < public 149.1 < DP-SGD
286.7. The check reported here is the part of that ordering this scale can show, on the mean over seeds:
non-private < Algorithm 1, and FDP fine-tuning < public-only < DP-SGD (Algorithm 1 < fine-tuning is not checked:
at this scale they tie within the seed spread, docs/generative.md).

The paper's rejection step for blurry samples (a post-processing filter on Algorithm 1's samples) is not applied:
every sample counts, so the distances compare the mechanisms' raw generators.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np
import torch

from fdp_audit.generative.denoiser.unet import n_parameters
from fdp_audit.generative.diffusion.ddpm import sample
from fdp_audit.generative.quality.classifier import train_classifier
from fdp_audit.generative.quality.frechet import frechet_distance, null_distances, per_class_distances
from fdp_audit.generative.training.trainer import (
    DiffusionSetup,
    LabelledImages,
    TrainedDiffusion,
    state_dict,
    train_diffusion,
)
from fdp_audit.threads import threads_for

VARIANTS = ("nonprivate", "public_only", "dp_sgd", "fdp_dpsgd", "fdp_sgd")
LABELS = {"nonprivate": "non-private", "public_only": "public only (Ψ̃ images)", "dp_sgd": "DP-SGD",
          "fdp_dpsgd": "FDP: DP-SGD fine-tuning (Prop. 2)", "fdp_sgd": "FDP: Algorithm 1"}
PAPER_FID = {"nonprivate": 25.2, "public_only": 149.1, "dp_sgd": 286.7, "fdp_dpsgd": 115.5, "fdp_sgd": 101.9}


@dataclass(frozen=True)
class ExperimentPlan:
    """The diffusion experiment's settings (module docstring; docs/generative.md).

    Attributes:
        setup: the architecture, diffusion and optimisation settings every mechanism of the experiment shares.
        seeds: independent repetitions; the ordering is checked on their mean.
        samples_per_class: images each model draws per class for the Fréchet distances.
        grid_per_class: images per class in the sample grids of seed 0.
        classifier_steps: training steps of the feature classifier the distances are measured in.
        plain_steps: steps of the non-private and public-only models; None: ``setup.steps``.
        plain_learning_rate: their Adam learning rate; None: ``setup.learning_rate``.
    """

    setup: DiffusionSetup
    seeds: int = 3
    samples_per_class: int = 100
    grid_per_class: int = 6
    classifier_steps: int = 600
    plain_steps: int | None = None  # steps of the non-private and public-only models (default: setup.steps)
    plain_learning_rate: float | None = None  # their Adam rate (default: setup.learning_rate)


def _sample_features(trained: TrainedDiffusion, classifier, n_classes: int, per_class: int, shape: tuple[int, ...],
                     seed: int, device: torch.device) -> tuple[np.ndarray, np.ndarray, torch.Tensor, float]:
    labels = torch.arange(n_classes, device=device).repeat_interleave(per_class)
    generator = torch.Generator(device=device)
    generator.manual_seed(10_000 + seed)
    start = time.perf_counter()
    with threads_for(n_parameters(trained.model) * math.prod(shape) * min(len(labels), 1000)):
        images = sample(trained.model, trained.schedule, labels, shape, generator)
    seconds = time.perf_counter() - start
    return classifier.embed(images), labels.cpu().numpy(), images.cpu(), seconds


def grid_pixels(images: torch.Tensor, labels: np.ndarray, n_classes: int, per_class: int) -> list[list[list[int]]]:
    """The first ``per_class`` samples of every class as 0–255 grey levels: ``[class][sample][pixel]``.

    Args:
        images: samples ``[n, 1, H, W]`` in [-1, 1].
        labels: their classes ``[n]``.
        n_classes: the number of classes.
        per_class: samples kept per class.

    Returns:
        The grey levels, by class, then sample, then pixel (row-major).
    """
    levels = ((images[:, 0].flatten(1) + 1) * 127.5).round().clamp(0, 255).to(torch.uint8)
    return [[levels[i].tolist() for i in np.flatnonzero(labels == c)[:per_class]] for c in range(n_classes)]


def _summary(values: list[float]) -> dict[str, float]:
    return {"mean": statistics.fmean(values), "sd": statistics.stdev(values) if len(values) > 1 else 0.0,
            "min": min(values), "max": max(values)}


def run_experiment(train: LabelledImages, test_images: torch.Tensor, test_labels: torch.Tensor, plan: ExperimentPlan,
                   device: torch.device | str = "cpu", progress: Callable[[str], None] | None = None
                   ) -> dict[str, Any]:
    """Train every variant for every seed, sample, and measure (module doc); a JSON-able dict. ``progress``
    receives one line per measured model.

    Args:
        train: the training images with their public completions.
        test_images: held-out images ``[m, C, H, W]``, the reference of the distances.
        test_labels: their classes ``[m]``.
        plan: the experiment (setup, seeds, samples per class, classifier steps, the plain models' settings).
        device: where models train and sample.
        progress: called with one line per measured model, or None.

    Returns:
        The ``generative`` section: per variant its Fréchet distances (overall and per class), noise multiplier and
        times; the classifier, the real-data floor, the ordering checks and the sample grids of seed 0.
    """
    device = torch.device(device)
    shape = tuple(train.images.shape[1:])
    classes = list(range(train.n_classes))
    test_images, test_labels = test_images.to(device), test_labels.to(device)
    start = time.perf_counter()
    classifier = train_classifier(train.images.to(device), train.labels.to(device), test_images, test_labels,
                                  train.n_classes, seed=0, steps=plan.classifier_steps)
    classifier_seconds = time.perf_counter() - start
    reference = classifier.embed(test_images)
    reference_labels = test_labels.cpu().numpy()
    n_generated = plan.samples_per_class * train.n_classes
    train_features = classifier.embed(train.images.to(device))
    public_features = classifier.embed(train.public.to(device))
    floor = null_distances(np.concatenate([train_features, reference]), n_generated, len(reference), 8, seed=0)
    rows: dict[str, dict[str, Any]] = {name: {"distances": [], "per_class": [], "train_seconds": [],
                                              "sample_seconds": []} for name in VARIANTS}
    grids: dict[str, list] = {}
    noise = {}
    plain_setup = replace(plan.setup, steps=plan.plain_steps or plan.setup.steps,
                          learning_rate=plan.plain_learning_rate or plan.setup.learning_rate)
    for seed in range(plan.seeds):
        trained = {}
        trained["nonprivate"] = train_diffusion("nonprivate", train, plain_setup, seed, device)
        trained["public_only"] = train_diffusion("public_only", train, plain_setup, seed, device)
        public = state_dict(trained["public_only"].model)
        trained["dp_sgd"] = train_diffusion("dp_sgd", train, plan.setup, seed, device)
        for name in ("fdp_dpsgd", "fdp_sgd"):
            trained[name] = train_diffusion(name, train, plan.setup, seed, device, init=public)
        for name in VARIANTS:
            features, labels, images, seconds = _sample_features(trained[name], classifier, train.n_classes,
                                                                 plan.samples_per_class, shape, seed, device)
            row = rows[name]
            row["distances"].append(frechet_distance(features, reference))
            row["per_class"].append(per_class_distances(features, labels, reference, reference_labels, classes))
            row["train_seconds"].append(trained[name].seconds)
            row["sample_seconds"].append(seconds)
            noise[name] = trained[name].noise_multiplier
            if progress is not None:
                progress(f"seed {seed} {name}: Fréchet {row['distances'][-1]:.2f}, "
                         f"training {trained[name].seconds:.1f} s, sampling {seconds:.1f} s")
            if seed == 0:
                grids[name] = grid_pixels(images, labels, train.n_classes, plan.grid_per_class)
    variants = []
    for name in VARIANTS:
        row = rows[name]
        per_class = {c: _summary([d[c] for d in row["per_class"]]) for c in classes}
        variants.append({"mechanism": name, "label": LABELS[name], "paper_fid": PAPER_FID[name],
                         "noise_multiplier": noise[name], "distance": _summary(row["distances"]),
                         "distances": row["distances"],
                         "per_class_mean": {str(c): per_class[c]["mean"] for c in classes},
                         "train_seconds": _summary(row["train_seconds"]),
                         "sample_seconds": _summary(row["sample_seconds"])})
    means = {v["mechanism"]: v["distance"]["mean"] for v in variants}
    checks = {"nonprivate < fdp_sgd": means["nonprivate"] < means["fdp_sgd"],
              "fdp_dpsgd < public_only": means["fdp_dpsgd"] < means["public_only"],
              "public_only < dp_sgd": means["public_only"] < means["dp_sgd"]}
    return {
        "setup": asdict(plan.setup), "seeds": plan.seeds, "samples_per_class": plan.samples_per_class,
        "n_train": train.n, "n_test": len(test_images), "image_shape": list(shape), "n_classes": train.n_classes,
        "denoiser_parameters": n_parameters(trained["nonprivate"].model),
        "sample_rate": trained["dp_sgd"].sample_rate,
        "classifier": {"test_accuracy": classifier.test_accuracy, "features": reference.shape[1],
                       "seconds": classifier_seconds},
        "reference": {"real_train": _summary([float(d) for d in floor]),
                      "public_completions": frechet_distance(public_features, reference)},
        "variants": variants, "ordering": checks, "ordering_holds": all(checks.values()), "grids": grids,
    }
