"""The built-in ``cnn`` kind (docs/images.md): a small convolutional network for ``side × side`` grey-scale images,
built as an ``nn.Module`` and trained through the same layer plan as any user module
(:mod:`fdp_audit.training.layer_plan`, :mod:`fdp_audit.training.conv_ghost`).

Per entry of ``channels``: a 3×3 convolution (padding 1), GroupNorm (:func:`norm_groups` groups; no BatchNorm,
whose batch statistics would mix examples and break per-example clipping), ReLU and 2×2 average pooling; then one
linear layer on the flattened features. Weights are He-initialised (``N(0, 2/fan_in)``), biases zero, GroupNorm
scales one.
"""

from __future__ import annotations

import math
from functools import partial

import torch
from torch import nn

from fdp_audit.errors import BadInputError
from fdp_audit.training.modules import ModuleModel, module_model

DEFAULT_CNN_CHANNELS = (16, 32)


def norm_groups(channels: int) -> int:
    """GroupNorm's group count for a layer of ``channels``: 4 groups where 4 divides it, else 1.

    Args:
        channels: the layer's channel count.

    Returns:
        The number of groups.
    """
    return 4 if channels % 4 == 0 else 1


class GroupNormCNN(nn.Module):
    """The ``cnn`` architecture (module docstring) on inputs ``[B, side²]``, logits ``[B, n_outputs]``."""

    def __init__(self, side: int, channels: tuple[int, ...] = DEFAULT_CNN_CHANNELS, n_outputs: int = 10):
        super().__init__()
        layers: list[nn.Module] = []
        previous = 1
        for width in channels:
            layers += [nn.Conv2d(previous, width, 3, padding=1), nn.GroupNorm(norm_groups(width), width), nn.ReLU(),
                       nn.AvgPool2d(2)]
            previous = width
        self.side = side
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Linear(previous * (side >> len(channels)) ** 2, n_outputs)
        for layer in self.modules():
            if isinstance(layer, (nn.Conv2d, nn.Linear)):
                nn.init.normal_(layer.weight, std=math.sqrt(2.0 / math.prod(layer.weight.shape[1:])))
                nn.init.zeros_(layer.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits of a batch of images.

        Args:
            x: pixels ``[B, side²]`` (any shape holding ``B·side²`` values, reshaped to ``[B, 1, side, side]``).

        Returns:
            Logits ``[B, n_outputs]``.
        """
        return self.classifier(self.features(x.reshape(-1, 1, self.side, self.side)).flatten(1))


def _architecture(n_inputs: int, n_classes: int, hidden: tuple[int, ...], field: str
                  ) -> tuple[int, tuple[int, ...], int]:
    """The image side, the convolution widths and the output width; bad input at ``field`` where the pixels are no
    square image whose side 2 divides once per pooling block."""
    channels = tuple(hidden) or DEFAULT_CNN_CHANNELS
    if min(channels) < 1:
        raise BadInputError(f"cnn widths must be positive, got {list(channels)}", field)
    side = math.isqrt(n_inputs)
    if side * side != n_inputs or side % (1 << len(channels)) or side == 0:
        raise BadInputError(f"cnn with {len(channels)} pooling blocks needs square images with side divisible by "
                            f"{1 << len(channels)}, got {n_inputs} inputs", field)
    return side, channels, 1 if n_classes == 2 else n_classes


def cnn_size(n_inputs: int, n_classes: int, hidden: tuple[int, ...], field: str) -> tuple[int, int]:
    """The ``cnn`` model's parameter count and its first layer's activations per example, counted on the meta
    device (nothing allocated): what a checkpoint's description is checked against before the model is built.

    Args:
        n_inputs: pixels per image (``side²``).
        n_classes: label classes (2 gives one logit).
        hidden: convolution widths (empty: :data:`DEFAULT_CNN_CHANNELS`).
        field: the input field named in errors.

    Returns:
        ``(parameter count, first layer's activations per example)``.

    Raises:
        BadInputError: the widths are not positive or the images are not square with a side 2 divides once per
            pooling block.
    """
    side, channels, n_outputs = _architecture(n_inputs, n_classes, hidden, field)
    with torch.device("meta"):
        module = GroupNormCNN(side, channels, n_outputs)
    return sum(p.numel() for p in module.parameters()), n_inputs * channels[0]


def cnn_model(n_inputs: int, n_classes: int, hidden: tuple[int, ...] = (), field: str = "model.kind") -> ModuleModel:
    """The ``cnn`` model on ``n_inputs = side²`` pixels: convolution widths ``hidden`` (default
    :data:`DEFAULT_CNN_CHANNELS`); the side must be divisible by 2 per pooling block (bad input at ``field``).

    Args:
        n_inputs: the image's pixel count, ``side²``.
        n_classes: the number of label classes; a binary task gets one logit.
        hidden: one convolution block per entry, its output channels (empty: the default widths).
        field: the config field named in errors (``model.kind``, or the checkpoint's model description).

    Returns:
        The :class:`ModuleModel` of :class:`GroupNormCNN`, with its layer plan.

    Raises:
        BadInputError: the widths or the image side do not fit the architecture.
    """
    side, channels, n_outputs = _architecture(n_inputs, n_classes, hidden, field)
    return module_model(partial(GroupNormCNN, side, channels, n_outputs), n_inputs, n_classes, "cnn", tuple(hidden),
                        side)
