"""``label_dp``: the label-DP case study of the FDP paper (Sec. 5; docs/training.md ``label_dp``).

With Ψ(x, y) = x and ℓ_pub(w; x) = logsumexp(wᵀx̃) (x̃ = (x, 1): the bias input), softmax regression has
``∇ℓ = x̃ (p − y)ᵀ`` and ``∇ℓ_priv = ∇ℓ − ∇ℓ_pub = −x̃ yᵀ``, so ``‖∇ℓ_priv‖ = ‖x̃‖`` exactly while
``‖∇ℓ‖ = ‖p − y‖·‖x̃‖ ≤ √2‖x̃‖`` (the sup is reached when p puts its mass on a wrong class). The
reproduction measures both ratios ``‖∇‖ / ‖x̃‖`` per example with ``torch.func`` — on a trained model and
on large random weights (confident, mostly wrong predictions, where the √2 is approached) — and then
trains, at equal ε and equal noise multiplier, DP-SGD with the clip norm its Lipschitz bound needs
(C = √2·R, R = max ‖x̃‖, so nothing is clipped) against label-DP FDP-SGD with C = R: the FDP noise is √2
smaller for the same guarantee.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import torch
from torch.func import grad, vmap

from fdp_audit.claim import noise_multiplier
from fdp_audit.config import load_config
from fdp_audit.data.prepare import prepare_data
from fdp_audit.reproduce import CONFIGS, Summary
from fdp_audit.reproduce.accuracy_grid import (
    AccuracyCell,
    accuracy_grid,
    cell,
    grid_table,
    mechanism_config,
    seed_accuracies,
)
from fdp_audit.reproduce.files import markdown_table, write_reproduction
from fdp_audit.training.architectures import build_model
from fdp_audit.training.engine import train_models
from fdp_audit.training.models import Model, Params, example_loss, label_free_loss
from fdp_audit.training.run import build_problem, with_mechanism

CONFIG = CONFIGS / "label_dp.yaml"
EPSILONS, SEEDS = (1.0, 2.0, 4.0), 3
QUICK_EPSILONS, QUICK_SEEDS, QUICK_STEPS = (2.0,), 2, 40
RANDOM_WEIGHT_SCALE = 10.0  # logits of order 10·‖x‖: near one-hot predictions, wrong for 9 in 10 classes


def lipschitz_ratios(model: Model, params: Params, x: torch.Tensor, y: torch.Tensor) -> dict[str, np.ndarray]:
    """Per example ``‖∇ℓ‖ / ‖x̃‖`` and ``‖∇ℓ_priv‖ / ‖x̃‖`` (ℓ_priv = ℓ − logsumexp), one model ``params``.

    Args:
        model: the softmax-regression model.
        params: one model's parameters.
        x: the records, shape ``[n, d]``.
        y: their labels, shape ``[n]``.

    Returns:
        ``{"full": ratios, "private": ratios}``, each an array of shape ``(n,)`` (per-example gradients by
        ``torch.func``).
    """
    def full(p: Params, xi: torch.Tensor, yi: torch.Tensor) -> torch.Tensor:
        return example_loss(model.forward(p, xi), yi)

    def private(p: Params, xi: torch.Tensor, yi: torch.Tensor) -> torch.Tensor:
        return full(p, xi, yi) - label_free_loss(model.forward(p, xi))

    x_norm = torch.sqrt((x.double() ** 2).sum(dim=1) + 1.0)
    out = {}
    for name, loss in (("full", full), ("private", private)):
        grads = vmap(grad(loss), in_dims=(None, 0, 0))(params, x, y)
        norms = torch.sqrt(sum((g.double().reshape(len(x), -1) ** 2).sum(dim=1) for g in grads.values()))
        out[name] = (norms / x_norm).numpy()
    return out


def _ratio_rows(ratios: dict[str, dict[str, np.ndarray]]) -> list[list[object]]:
    return [[weights, loss, float(r.mean()), float(np.quantile(r, 0.99)), float(r.max())]
            for weights, by_loss in ratios.items() for loss, r in by_loss.items()]


def run(out_dir: Path, quick: bool = False) -> Summary:
    """The label-DP case study (module docstring): the gradient-norm ratios at trained and random weights, and the
    utility grid; writes ``label_dp.md`` and ``label_dp.json``.

    Args:
        out_dir: the folder the reproduction writes into.
        quick: the seconds-long version the test suite runs (module docstring).

    Returns:
        The reproduction's summary: the largest ratios of the private and the full gradient's norm to ‖x̃‖.
    """
    config = load_config(CONFIG)
    epsilons, seeds = (QUICK_EPSILONS, QUICK_SEEDS) if quick else (EPSILONS, SEEDS)
    if quick:
        config = config.with_overrides({"mechanism.steps": QUICK_STEPS})
    data = prepare_data(config.data, config.seed)
    x, y = data.tensors()
    model = build_model(config.model, data.train.n_features, data.train.n_classes)

    trained_cfg = with_mechanism(config, "nonprivate")
    (chunk,) = train_models(build_problem(trained_cfg, data), config.seed, [0])
    trained = {k: v[0] for k, v in chunk.params.items()}
    generator = torch.Generator().manual_seed(config.seed)
    random = {k: RANDOM_WEIGHT_SCALE * torch.randn(v.shape, generator=generator) for k, v in trained.items()}
    ratios = {"trained (non-private)": lipschitz_ratios(model, trained, x, y),
              f"random N(0, {RANDOM_WEIGHT_SCALE:g}²)": lipschitz_ratios(model, random, x, y)}
    max_full = max(float(r["full"].max()) for r in ratios.values())
    max_private = max(float(r["private"].max()) for r in ratios.values())

    radius = float(torch.sqrt((x.double() ** 2).sum(dim=1) + 1.0).max())
    dp_clip, fdp_clip = math.sqrt(2) * radius, radius
    cells = []
    for name, clip in (("dp_sgd", dp_clip), ("fdp_sgd", fdp_clip)):
        for epsilon in epsilons:
            cfg = mechanism_config(config, name, epsilon, 0)
            cfg = cfg.with_overrides({"mechanism.clip_norm": clip})
            cells.append(AccuracyCell(name, epsilon, noise_multiplier(cfg.mechanism),
                                      seed_accuracies(cfg, data, seeds)))
    cells += accuracy_grid(config, data, epsilons, seeds, 0, ("nonprivate",))
    gains = {e: cell(cells, "fdp_sgd", e).mean - cell(cells, "dp_sgd", e).mean for e in epsilons}

    ratio_table = markdown_table(["weights", "loss", "mean ‖∇‖/‖x̃‖", "99th percentile", "max"], _ratio_rows(ratios))
    setup = (f"Digits (10 classes, {data.train.n_rows} training rows), softmax regression, Ψ(x, y) = x. Gradient "
             f"norms per example over the training set. Closed forms: private ratio = 1 exactly, full ratio "
             f"= ‖p − y‖ ≤ √2 = {math.sqrt(2):.4f}." + (" QUICK MODE." if quick else ""))
    utility = (f"Test accuracy (%, {seeds} seeds) at equal ε (δ = {config.mechanism.delta:g}) and equal z: DP-SGD "
               f"with C = √2·R = {dp_clip:.3g}, label-DP FDP-SGD with C = R = {fdp_clip:.3g} (R = max ‖x̃‖; neither "
               "clips anything), so FDP-SGD's noise is √2 smaller.")
    notes = [f"- Measured Lipschitz ratio: private loss max {max_private:.6f} (paper: 1), full loss max "
             f"{max_full:.4f} (paper: √2 = {math.sqrt(2):.4f}, reached only in the limit of a confident wrong "
             "prediction).",
             *(f"- ε = {e:g}: FDP-SGD − DP-SGD = {100 * gains[e]:+.1f} points." for e in epsilons)]
    summary = f"max ‖∇ℓ_priv‖/‖x̃‖ = {max_private:.4f}, max ‖∇ℓ‖/‖x̃‖ = {max_full:.4f} (√2 = 1.4142)"
    return write_reproduction(
        out_dir, "label_dp", "Label DP: the √2 Lipschitz saving",
        [setup, ratio_table, utility, grid_table(cells, epsilons), "## Notes\n\n" + "\n".join(notes)],
        {"quick": quick, "config": config.to_dict(), "max_ratio_full": max_full, "max_ratio_private": max_private,
         "ratios": {w: {k: {"mean": float(v.mean()), "max": float(v.max())} for k, v in r.items()}
                    for w, r in ratios.items()},
         "clip_dp": dp_clip, "clip_fdp": fdp_clip, "cells": [c.as_dict() for c in cells],
         "fdp_minus_dp": {f"{e:g}": gains[e] for e in epsilons}},
        summary)
