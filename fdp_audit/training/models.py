"""Functional models (docs/training.md): parameters are a dict of tensors and ``forward`` is plain torch,
so the same code runs per example under ``torch.func.vmap`` and over a leading model dimension.

Binary tasks use one logit and the logistic loss; multiclass tasks use softmax cross-entropy.

The ``cnn`` kind (docs/images.md) is an ``nn.Module`` (:mod:`fdp_audit.training.cnn`); this class only carries its
description (``hidden`` the convolution widths, ``image_side``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from fdp_audit.training import streams

Params = dict[str, torch.Tensor]


@dataclass(frozen=True)
class Model:
    """An architecture: parameter shapes, a forward pass on one example or a batch, and initialisation."""

    kind: str
    n_inputs: int
    n_classes: int
    hidden: tuple[int, ...] = ()
    image_side: int = 0

    @property
    def n_outputs(self) -> int:
        return 1 if self.n_classes == 2 else self.n_classes

    def shapes(self) -> dict[str, tuple[int, ...]]:
        """The parameter shapes of the ``logistic``/``mlp`` architecture: per layer ``i``, ``layer{i}.weight``
        ``[out, in]`` and ``layer{i}.bias`` ``[out]``, widths ``n_inputs → hidden… → n_outputs``.

        Returns:
            Each parameter's shape by name, in layer order.
        """
        widths = (self.n_inputs, *self.hidden, self.n_outputs)
        shapes: dict[str, tuple[int, ...]] = {}
        for i in range(len(widths) - 1):
            shapes[f"layer{i}.weight"] = (widths[i + 1], widths[i])
            shapes[f"layer{i}.bias"] = (widths[i + 1],)
        return shapes

    @property
    def n_parameters(self) -> int:
        return sum(math.prod(s) for s in self.shapes().values())

    def forward(self, params: Params, x: torch.Tensor) -> torch.Tensor:
        """Logits ``[..., n_outputs]`` for inputs ``[..., n_inputs]``: affine layers with ReLU between them.

        Args:
            params: the parameters by name (:meth:`shapes`), without a model dimension.
            x: inputs ``[..., n_inputs]``.

        Returns:
            Logits ``[..., n_outputs]``.
        """
        h = x
        n_layers = len(self.hidden) + 1
        for i in range(n_layers):
            h = F.linear(h, params[f"layer{i}.weight"], params[f"layer{i}.bias"])
            if i < n_layers - 1:
                h = F.relu(h)
        return h

    def init(self, keys: torch.Tensor, device: torch.device | str = "cpu") -> Params:
        """Parameters for each model key, ``[R, *shape]``: zeros for logistic regression (a convex
        problem), scaled Gaussians (He initialisation, ``N(0, 2/fan_in)``) for weights of deeper models, zero biases.

        Args:
            keys: model keys ``[R, 2]`` (:func:`fdp_audit.training.streams.model_keys`); draws from their INIT stream.
            device: where the parameters are made.

        Returns:
            The parameters by name, each ``[R, *shape]``.
        """
        params: Params = {}
        for j, (name, shape) in enumerate(self.shapes().items()):
            if self.kind == "logistic" or name.endswith("bias"):
                params[name] = torch.zeros(keys.shape[0], *shape, device=device)
                continue
            fan_in = math.prod(shape[1:])
            draw = streams.normal(keys, j, streams.Stream.INIT, math.prod(shape), device)
            params[name] = (draw * math.sqrt(2.0 / fan_in)).reshape(keys.shape[0], *shape)
        return params


def example_loss(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Per-example loss: logistic loss on one logit, or softmax cross-entropy.

    Args:
        logits: logits ``[..., V]`` (``V = 1`` for a binary task).
        y: integer labels ``[...]`` (0/1 for a binary task).

    Returns:
        The loss of each example, ``[...]``.
    """
    if logits.shape[-1] == 1:
        return F.binary_cross_entropy_with_logits(logits[..., 0], y.to(logits.dtype), reduction="none")
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1), reduction="none").reshape(
        y.shape)


def label_free_loss(logits: torch.Tensor) -> torch.Tensor:
    """Label DP public loss (docs/training.md): ``logsumexp(wᵀx)``, so that ∇ = x pᵀ with p = softmax.
    With one logit the implicit second class has logit 0 (``softplus``).

    Args:
        logits: logits ``[..., V]``.

    Returns:
        The loss of each example, ``[...]``.
    """
    if logits.shape[-1] == 1:
        return F.softplus(logits[..., 0])
    return torch.logsumexp(logits, dim=-1)
