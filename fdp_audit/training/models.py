"""Functional models (docs/training.md): parameters are a dict of tensors and ``forward`` is plain torch,
so the same code runs per example under ``torch.func.vmap`` and over a leading model dimension.

Binary tasks use one logit and the logistic loss; multiclass tasks use softmax cross-entropy.

The ``cnn`` kind (docs/images.md) is a small convolutional network for ``image_side × image_side`` grey-scale
images: per entry of ``channels``, a 3×3 convolution (padding 1), GroupNorm (:func:`norm_groups` groups; no
BatchNorm, whose batch statistics would mix examples and break per-example clipping), ReLU and 2×2 average
pooling; then one linear layer on the flattened features.
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

    @property
    def channels(self) -> tuple[int, ...]:
        """The CNN's convolution widths (``hidden``; (16, 32) when empty)."""
        return self.hidden or DEFAULT_CNN_CHANNELS

    def shapes(self) -> dict[str, tuple[int, ...]]:
        if self.kind == "cnn":
            shapes: dict[str, tuple[int, ...]] = {}
            previous = 1
            for i, width in enumerate(self.channels, start=1):
                shapes[f"conv{i}.weight"] = (width, previous, 3, 3)
                shapes[f"conv{i}.bias"] = (width,)
                shapes[f"norm{i}.weight"] = (width,)
                shapes[f"norm{i}.bias"] = (width,)
                previous = width
            side = self.image_side >> len(self.channels)
            shapes["fc.weight"] = (self.n_outputs, previous * side * side)
            shapes["fc.bias"] = (self.n_outputs,)
            return shapes
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
        """Logits ``[..., n_outputs]`` for inputs ``[..., n_inputs]``."""
        if self.kind == "cnn":
            lead = x.shape[:-1]
            h = x.reshape(-1, 1, self.image_side, self.image_side)
            for i, width in enumerate(self.channels, start=1):
                h = F.conv2d(h, params[f"conv{i}.weight"], params[f"conv{i}.bias"], padding=1)
                h = F.group_norm(h, norm_groups(width), params[f"norm{i}.weight"], params[f"norm{i}.bias"])
                h = F.avg_pool2d(F.relu(h), 2)
            out = F.linear(h.flatten(1), params["fc.weight"], params["fc.bias"])
            return out.reshape(*lead, self.n_outputs)
        h = x
        n_layers = len(self.hidden) + 1
        for i in range(n_layers):
            h = F.linear(h, params[f"layer{i}.weight"], params[f"layer{i}.bias"])
            if i < n_layers - 1:
                h = F.relu(h)
        return h

    def init(self, keys: torch.Tensor, device: torch.device | str = "cpu") -> Params:
        """Parameters for each model key, ``[R, *shape]``: zeros for logistic regression (a convex
        problem), scaled Gaussians (He initialisation) for weights of deeper models, GroupNorm scales 1."""
        params: Params = {}
        for j, (name, shape) in enumerate(self.shapes().items()):
            if name.startswith("norm") and name.endswith("weight"):
                params[name] = torch.ones(keys.shape[0], *shape, device=device)
                continue
            if self.kind == "logistic" or name.endswith("bias"):
                params[name] = torch.zeros(keys.shape[0], *shape, device=device)
                continue
            fan_in = math.prod(shape[1:])
            draw = streams.normal(keys, j, streams.Stream.INIT, math.prod(shape), device)
            params[name] = (draw * math.sqrt(2.0 / fan_in)).reshape(keys.shape[0], *shape)
        return params


DEFAULT_CNN_CHANNELS = (16, 32)


def norm_groups(channels: int) -> int:
    """GroupNorm's group count for a layer of ``channels``: 4 groups where 4 divides it, else 1."""
    return 4 if channels % 4 == 0 else 1


def example_loss(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Per-example loss: logistic loss on one logit, or softmax cross-entropy."""
    if logits.shape[-1] == 1:
        return F.binary_cross_entropy_with_logits(logits[..., 0], y.to(logits.dtype), reduction="none")
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1), reduction="none").reshape(
        y.shape)


def label_free_loss(logits: torch.Tensor) -> torch.Tensor:
    """Label DP public loss (docs/training.md): ``logsumexp(wᵀx)``, so that ∇ = x pᵀ with p = softmax.
    With one logit the implicit second class has logit 0."""
    if logits.shape[-1] == 1:
        return F.softplus(logits[..., 0])
    return torch.logsumexp(logits, dim=-1)
