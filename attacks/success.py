"""Success of a reconstruction (docs/accounting.md, Theorem 4): the estimate x̂ of the protected coordinates succeeds
when ``d(x̂, x) <= ρ``, with d the L2 (default) or L∞ distance -- the metrics whose Ball the accounting
computes (:mod:`fdp_audit.accounting.ball`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import torch

from fdp_audit.errors import BadInputError

ReconstructionMetric = Literal["l2", "linf"]
_ORDERS = {"l2": 2.0, "linf": float("inf")}


def reconstruction_distance(estimate: torch.Tensor, truth: torch.Tensor,
                            metric: ReconstructionMetric = "l2") -> torch.Tensor:
    """``d(x̂, x)`` per trial: ``‖x̂ − x‖₂`` or ``‖x̂ − x‖_∞`` (docs/accounting.md).

    Args:
        estimate: the reconstructions x̂ ``[R, k]``.
        truth: the true protected values x ``[R, k]``.
        metric: ``"l2"`` or ``"linf"``.

    Returns:
        The distances ``[R]`` (float64).

    Raises:
        BadInputError: an unknown metric, or the two are not both ``[R, k]`` of one shape.
    """
    if metric not in _ORDERS:
        raise BadInputError(f"unknown metric {metric!r} (known: {', '.join(_ORDERS)})", "metric")
    if estimate.shape != truth.shape or estimate.dim() != 2:
        raise BadInputError(f"estimate {tuple(estimate.shape)} and truth {tuple(truth.shape)} must both be [R, k]",
                            "estimate")
    return torch.linalg.vector_norm(estimate.double() - truth.double(), ord=_ORDERS[metric], dim=1)


def reconstruction_success(estimate: torch.Tensor, truth: torch.Tensor, rho: float | Sequence[float],
                           metric: ReconstructionMetric = "l2") -> torch.Tensor:
    """Whether each reconstruction succeeds, ``d(x̂, x) <= ρ`` (docs/accounting.md, Theorem 4). A non-finite
    estimate (a failed reconstruction) never succeeds.

    Args:
        estimate: the reconstructions x̂ ``[R, k]``.
        truth: the true protected values x ``[R, k]``.
        rho: the radius ρ >= 0, or a grid of G radii.
        metric: ``"l2"`` or ``"linf"`` (:func:`reconstruction_distance`).

    Returns:
        ``[R]`` booleans for one radius, ``[R, G]`` for a grid.

    Raises:
        BadInputError: a negative radius or a nested list of radii, or a bad estimate, truth or metric.
    """
    radii = torch.as_tensor(rho, dtype=torch.float64)
    if radii.dim() > 1 or not bool(torch.all(radii >= 0)):
        raise BadInputError("must be a radius >= 0 or a list of them", "rho")
    distance = reconstruction_distance(estimate, truth, metric)
    return distance[:, None] <= radii[None, :] if radii.dim() == 1 else distance <= radii
