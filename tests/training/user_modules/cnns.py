"""CNN factories for the layer-plan tests (named by configs as ``cnns.py:function``): 8×8 grey-scale images as
inputs ``[B, 64]``, one logit per class (one for a binary task)."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn


def _outputs(n_classes: int) -> int:
    return 1 if n_classes == 2 else n_classes


def strided(n_inputs: int, n_classes: int) -> nn.Module:
    """A 5×5 stride-2 convolution, GELU, a 3×3 convolution, max pooling and two linear layers."""
    return nn.Sequential(nn.Unflatten(1, (1, 8, 8)), nn.Conv2d(1, 4, 5, stride=2, padding=2), nn.GroupNorm(2, 4),
                         nn.GELU(), nn.Conv2d(4, 6, 3, padding=1), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(24, 12),
                         nn.Tanh(), nn.Linear(12, _outputs(n_classes)))


class LayerNormCNN(nn.Module):
    """Its own forward: a reshape, a bias-free convolution, LayerNorm over channels and positions, SiLU, average
    pooling, functional ReLU, a scaling by a constant and a bias-free linear layer."""

    def __init__(self, n_classes: int):
        super().__init__()
        self.conv = nn.Conv2d(1, 3, 3, padding=1, bias=False)
        self.norm = nn.LayerNorm((3, 8, 8))
        self.pool = nn.AvgPool2d(2)
        self.head = nn.Linear(48, _outputs(n_classes), bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.pool(F.silu(self.norm(self.conv(x.view(-1, 1, 8, 8)))))
        return self.head(torch.relu(h.flatten(1)) * 0.5)


def layer_norm(n_inputs: int, n_classes: int) -> nn.Module:
    return LayerNormCNN(n_classes)


def dilated(n_inputs: int, n_classes: int) -> nn.Module:
    """A dilated 'same' convolution, a 2×2 valid one, LayerNorm over the last dimension, adaptive pooling."""
    return nn.Sequential(nn.Unflatten(1, (1, 8, 8)), nn.Conv2d(1, 4, 3, padding="same", dilation=2),
                         nn.LeakyReLU(0.1), nn.Conv2d(4, 4, 2), nn.LayerNorm(7), nn.AdaptiveAvgPool2d(2),
                         nn.Flatten(), nn.Linear(16, _outputs(n_classes)))


def grouped(n_inputs: int, n_classes: int) -> nn.Module:
    """A depthwise convolution with two outputs per input channel (groups = 4) between two ordinary ones, and
    InstanceNorm."""
    return nn.Sequential(nn.Unflatten(1, (1, 8, 8)), nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(),
                         nn.Conv2d(4, 8, 3, padding=1, groups=4), nn.InstanceNorm2d(8, affine=True), nn.ReLU(),
                         nn.AvgPool2d(2),
                         nn.Conv2d(8, 4, 1), nn.Flatten(), nn.Linear(64, _outputs(n_classes)))


def padded(n_inputs: int, n_classes: int) -> nn.Module:
    """``strided``'s function with the first convolution's padding as a ``ZeroPad2d`` layer, which has no plan."""
    return nn.Sequential(nn.Unflatten(1, (1, 8, 8)), nn.ZeroPad2d(2), nn.Conv2d(1, 4, 5, stride=2),
                         nn.GroupNorm(2, 4), nn.GELU(), nn.Conv2d(4, 6, 3, padding=1), nn.MaxPool2d(2), nn.Flatten(),
                         nn.Linear(24, 12), nn.Tanh(), nn.Linear(12, _outputs(n_classes)))


class Residual(nn.Module):
    """The ``strided`` layers with a residual connection around the GELU: ``h + gelu(h)`` (no layer plan)."""

    def __init__(self, n_classes: int):
        super().__init__()
        self.body = strided(64, n_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        layers = list(self.body)
        h = x
        for layer in layers[:3]:
            h = layer(h)
        h = h + layers[3](h)
        for layer in layers[4:]:
            h = layer(h)
        return h


def residual(n_inputs: int, n_classes: int) -> nn.Module:
    return Residual(n_classes)


def batch_norm(n_inputs: int, n_classes: int) -> nn.Module:
    return nn.Sequential(nn.Unflatten(1, (1, 8, 8)), nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
                         nn.Flatten(), nn.Linear(256, _outputs(n_classes)))


class Idioms(nn.Module):
    """Common idioms: in-place activations (module and functional) right after recorded layers, and reshapes
    sized by ``x.size(0)`` / ``h.shape[0]``."""

    def __init__(self, n_classes: int):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3, padding=1)
        self.norm = nn.GroupNorm(2, 4)
        self.act = nn.ReLU(inplace=True)
        self.pool = nn.MaxPool2d(2)
        self.hidden = nn.Linear(64, 16)
        self.head = nn.Linear(16, _outputs(n_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.pool(self.act(self.norm(self.conv(x.reshape(x.shape[0], 1, 8, 8)))))
        return self.head(F.leaky_relu(self.hidden(h.view(h.size(0), -1)), 0.1, True))


def idioms(n_inputs: int, n_classes: int) -> nn.Module:
    return Idioms(n_classes)


class TutorialNet(nn.Module):
    """PyTorch's MNIST example, shrunk to 8×8: functional ReLU and max pooling, dropout, ``torch.flatten`` and
    log-softmax outputs."""

    def __init__(self, n_classes: int):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 4, 3, 1)
        self.conv2 = nn.Conv2d(4, 8, 3, 1)
        self.dropout = nn.Dropout(0.25)
        self.fc1 = nn.Linear(32, 16)
        self.fc2 = nn.Linear(16, n_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.conv1(x.view(-1, 1, 8, 8)))
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = self.fc2(F.relu(self.fc1(torch.flatten(self.dropout(x), 1))))
        return F.log_softmax(x, dim=1)


def tutorial(n_inputs: int, n_classes: int) -> nn.Module:
    return TutorialNet(n_classes)


def batch_softmax(n_inputs: int, n_classes: int) -> nn.Module:
    """A softmax across the batch (dim 0): it mixes the records, so it has no plan."""
    return nn.Sequential(nn.Linear(n_inputs, n_classes), nn.Softmax(dim=0))


class FrozenFeatures(nn.Module):
    """A feature extractor frozen by ``torch.no_grad()`` in ``forward`` (torch.fx drops the context): only the
    head learns."""

    def __init__(self, n_classes: int):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3, padding=1)
        self.head = nn.Linear(64, _outputs(n_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            h = F.avg_pool2d(F.relu(self.conv(x.view(-1, 1, 8, 8))), 2)
        return self.head(h.flatten(1))


def no_grad(n_inputs: int, n_classes: int) -> nn.Module:
    return FrozenFeatures(n_classes)


def _hooked(n_classes: int, hook: Callable[[nn.Module, tuple, torch.Tensor], torch.Tensor | None]) -> nn.Module:
    model = nn.Sequential(nn.Unflatten(1, (1, 8, 8)), nn.Conv2d(1, 4, 3, padding=1), nn.Tanh(), nn.Flatten(),
                          nn.Linear(256, _outputs(n_classes)))
    model[1].register_forward_hook(hook)
    return model


def detached(n_inputs: int, n_classes: int) -> nn.Module:
    """The convolution's output detached by a forward hook (torch.fx drops module hooks): its weights get no
    gradient."""
    return _hooked(n_classes, lambda module, inputs, output: output.detach())


def gradient_scaled(n_inputs: int, n_classes: int) -> nn.Module:
    """A forward hook that halves the gradient flowing back into the convolution (a tensor hook): the same outputs,
    half the convolution's gradients."""

    def halve_gradient(module: nn.Module, inputs: tuple, output: torch.Tensor) -> None:
        if output.requires_grad:
            output.register_hook(lambda gradient: 0.5 * gradient)

    return _hooked(n_classes, halve_gradient)


class LinearOverPositions(nn.Module):
    """A linear layer over the last axis of 3-D activations (convolution, ``flatten(2)``: ``[B, C, H·W]``)."""

    def __init__(self, n_classes: int):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3, padding=1)
        self.mix = nn.Linear(64, 8)
        self.head = nn.Linear(32, _outputs(n_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.conv(x.view(-1, 1, 8, 8)).flatten(2)
        return self.head(F.relu(self.mix(h)).flatten(1))


def linear_over_positions(n_inputs: int, n_classes: int) -> nn.Module:
    return LinearOverPositions(n_classes)


def pool_over_positions(n_inputs: int, n_classes: int) -> nn.Module:
    """2-D max pooling of 3-D activations ``[B, C, H·W]``, which torch reads as one unbatched image ``[C, H, W]``
    with the batch as its channels."""
    return nn.Sequential(nn.Unflatten(1, (1, 8, 8)), nn.Conv2d(1, 4, 3, padding=1), nn.Flatten(2),
                         nn.MaxPool2d((1, 2)), nn.Flatten(), nn.Linear(128, _outputs(n_classes)))
