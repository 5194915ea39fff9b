"""One generative study end to end (docs/generative.md): image data and Ψ, the five-way experiment, the audits of
the training step, and the files — ``results.json`` (Algorithm 1's audit verdict, its one-run section and the
``generative`` section the report draws), ``report.html``, and one results file per audited mechanism, which
``fdp-audit gate`` judges again.

Used by ``fdp-audit reproduce diffusion`` (digits, on the CPU) and by ``python -m benchmarks.diffusion_fmnist``
(Fashion-MNIST, on a GPU where there is one).
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from fdp_audit.auditing.gate import judge
from fdp_audit.auditing.results import write_results
from fdp_audit.claim import Claim
from fdp_audit.config import Config, config_from_dict
from fdp_audit.data.catalog import DATASETS, load_images
from fdp_audit.data.image_psi import BlurPublicMap, DownsamplePublicMap, ImagePublicMap
from fdp_audit.data.images import ImageSet
from fdp_audit.generative.audit.one_run import AuditPlan, audit_generative
from fdp_audit.generative.denoiser.unet import TinyUNet
from fdp_audit.generative.experiment import ExperimentPlan, run_experiment
from fdp_audit.generative.training.trainer import DiffusionSetup, LabelledImages
from fdp_audit.mechanisms import MECHANISMS
from fdp_audit.report.render import write_report

AUDITED = ("fdp_sgd", "fdp_sgd_shared_batch", "dp_sgd_half_noise")


@dataclass(frozen=True)
class StudyData:
    """Where the images come from and what is public: the registered image set, its folder (None: the default),
    the number of test images held out when the set has no test split, and Ψ (``blur`` or ``downsample`` and its
    parameter: σ of the blur or the downsampling factor)."""

    dataset: str = "digits"
    path: str | None = None
    test_fraction: float = 0.2
    psi: str = "blur"
    psi_parameter: float = 1.0
    train_limit: int | None = None  # the first N training images (a shorter run on a large set)


def public_map(data: StudyData, height: int, width: int) -> ImagePublicMap:
    """Ψ of the study's images: a Gaussian blur of σ ``psi_parameter``, or downsampling by that factor.

    Args:
        data: the study's data settings (``psi`` and ``psi_parameter``).
        height: the image height in pixels.
        width: the image width in pixels.

    Returns:
        The image map.
    """
    if data.psi == "blur":
        return BlurPublicMap(height, width, sigma=float(data.psi_parameter))
    return DownsamplePublicMap(height, width, factor=int(data.psi_parameter))


def _scaled(images: np.ndarray) -> torch.Tensor:
    """``[N, H, W]`` intensities in [0, 1] as ``[N, 1, H, W]`` in [-1, 1], the denoiser's range."""
    return torch.as_tensor(images, dtype=torch.float32)[:, None] * 2 - 1


def load_study_images(data: StudyData, seed: int = 0) -> tuple[LabelledImages, torch.Tensor, torch.Tensor,
                                                                ImagePublicMap]:
    """Training images with their public completions Ψ̃(x) (Ψ applied to the [0, 1] images, rendered at full
    resolution), and the held-out test images and labels.

    Args:
        data: where the images come from and what is public.
        seed: the seed of the stratified test split of a set without one.

    Returns:
        ``(training images with completions, test images, test labels, Ψ)``, images ``[n, 1, H, W]`` in [-1, 1].
    """
    train = load_images(data.dataset, "train", data.path)
    if "test" in DATASETS[data.dataset].image_splits:
        test = load_images(data.dataset, "test", data.path)
    else:  # a set without a test split (digits) is split here, stratified by class
        train, test = _split(train, data.test_fraction, seed)
    if data.train_limit is not None:
        train = train.take(np.arange(min(data.train_limit, train.n_images)))
    psi = public_map(data, train.height, train.width)
    flat = torch.as_tensor(train.flat(), dtype=torch.float32)
    labels = torch.as_tensor(train.labels)
    public = psi.public_image(psi(flat, labels).features).reshape(-1, train.height, train.width)
    completed = LabelledImages(_scaled(train.images), labels, _scaled(public.numpy()), len(train.classes))
    return completed, _scaled(test.images), torch.as_tensor(test.labels), psi


def _split(images: ImageSet, test_fraction: float, seed: int) -> tuple[ImageSet, ImageSet]:
    from sklearn.model_selection import train_test_split

    rows = np.arange(images.n_images)
    train, test = train_test_split(rows, test_size=test_fraction, stratify=images.labels, random_state=seed)
    return images.take(np.sort(train)), images.take(np.sort(test))


def claim_config(mechanism: str, data: StudyData, audit: AuditPlan, sample_rate: float, setup: DiffusionSetup,
                 device: str) -> Config:
    """The configuration an audit's results state: the audited mechanism with its claimed (z, p, T, C, δ), the
    image data and Ψ, and the denoiser as the model factory. The gate re-derives the mechanism section and every
    comparison's claim from it.

    Args:
        mechanism: the audited mechanism.
        data: the study's data settings.
        audit: the audit plan (claimed z, T, δ, private weight).
        sample_rate: the audited training's sampling rate p.
        setup: the training settings (clip norm, public batch size).
        device: the device recorded.

    Returns:
        The validated configuration.
    """
    psi = {"blur_sigma": float(data.psi_parameter)} if data.psi == "blur" else {
        "downsample_factor": int(data.psi_parameter)}
    return config_from_dict({
        "name": f"generative_{mechanism}", "seed": 0, "device": device,
        "data": {"dataset": data.dataset, "path": data.path, "protected": [], "public_map": data.psi, **psi},
        "model": {"factory": f"{TinyUNet.__module__}:{TinyUNet.__name__}"},
        "mechanism": {"name": mechanism, "faulty": MECHANISMS[mechanism].faulty,
                      "noise_multiplier": audit.noise_multiplier, "sample_rate": sample_rate, "steps": audit.steps,
                      "clip_norm": setup.clip_norm, "delta": audit.delta, "public_batch_size": setup.public_batch_size,
                      "private_weight": audit.private_weight, "public_loss": "public_image"},
    })


def audit_results(section: dict[str, Any], comparisons: list[dict[str, Any]], config: Config, alpha: float,
                  title: str, reproducibility: dict[str, Any]) -> dict[str, Any]:
    """results.json of one generative audit (kind ``audit``): the one-run comparisons judged by the gate, the
    mechanism section and the configuration the gate restates them from.

    Args:
        section: the audit's one-run section.
        comparisons: its comparisons in the gate's form.
        config: the configuration the results state (:func:`claim_config`).
        alpha: the level α of the verdict.
        title: the report's title.
        reproducibility: seed, command, device and study settings.

    Returns:
        The results, with the verdict the gate gives the comparisons.
    """
    verdict, _ = judge(comparisons, alpha)
    return {"schema_version": 1, "kind": "audit", "title": title,
            "created": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"), "verdict": verdict,
            "mechanism": Claim.from_config(config).section(), "one_run": section, "comparisons": comparisons,
            "reproducibility": {**reproducibility, "config": config.to_dict()}}


def run_study(data: StudyData, plan: ExperimentPlan, audit: AuditPlan, out_dir: Path, device: str = "cpu",
              command: str = "", progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Experiment, audits and files (module doc); returns the ``generative`` section with the audit verdicts.
    ``progress`` receives a line per measured model and per audit.

    Args:
        data: where the images come from and what is public.
        plan: the five-way experiment.
        audit: the audit plan of each audited mechanism.
        out_dir: where ``results.json``, ``report.html`` and each ``audit-<mechanism>/results.json`` are written.
        device: where models train.
        command: the command recorded for reproduction.
        progress: called with one line per measured model and per audit, or None.

    Returns:
        The ``generative`` section.
    """
    out_dir = Path(out_dir)
    start = time.perf_counter()
    train, test_images, test_labels, psi = load_study_images(data)
    generative = run_experiment(train, test_images, test_labels, plan, device, progress)
    audits = {}
    for name in AUDITED:
        audits[name] = audit_generative(name, train, plan.setup, audit, seed=0, device=device)
        if progress is not None:
            progress(f"audit {name}: {audits[name][0]['status']} ({audits[name][0]['train_seconds']:.1f} s training)")
    reproducibility = {"seed": 0, "command": command, "device": device,
                       "study": {"data": asdict(data), "experiment": asdict(plan), "audit": asdict(audit)}}
    configs = {name: claim_config(name, data, audit, section["claim_parameters"]["sample_rate"], plan.setup, device)
               for name, (section, _) in audits.items()}
    for name, (section, comparisons) in audits.items():
        results = audit_results(section, comparisons, configs[name], audit.alpha, f"Generative audit: {name}",
                                reproducibility)
        write_results(out_dir / f"audit-{name}" / "results.json", results)
    generative.update({
        "dataset": f"{data.dataset} ({train.n} training, {len(test_images)} test images)",
        "public_feature": str(psi.spec()), "epsilon": plan.setup.epsilon, "delta": plan.setup.delta,
        "classifier_accuracy": generative["classifier"]["test_accuracy"],
        "audits": [{"mechanism": name, "status": s["status"], "claimed_epsilon": s["claimed_epsilon"],
                    "best": s["best"], "explanation": s["explanation"]} for name, (s, _) in audits.items()],
        "seconds": time.perf_counter() - start,
    })
    main = audit_results(*audits["fdp_sgd"], configs["fdp_sgd"], audit.alpha,
                         f"Diffusion model on {data.dataset}: FDP (Algorithm 1)", reproducibility)
    main["generative"] = generative
    write_results(out_dir / "results.json", main)
    write_report(main, out_dir / "report.html")
    return generative

