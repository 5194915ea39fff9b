"""A compact class-conditional U-Net that predicts the noise of a diffused image (docs/generative.md).

``ε_θ(x_t, t, y)``: a 3×3 input convolution, then at each resolution one residual block (GroupNorm → SiLU →
conv, twice, with the time-and-class embedding added between the convolutions), a stride-2 convolution down,
a residual block at the bottom, and the mirror path up (nearest-neighbour upsampling, a convolution, and the
skip connection of the same resolution concatenated before its residual block). The embedding is the sum of a
sinusoidal embedding of the diffusion time t/T passed through a two-layer MLP and a learned class embedding.

GroupNorm (not BatchNorm) keeps every example's output a function of that example alone, which per-example
gradients (``torch.func.vmap``) and DP-SGD's per-example clipping need. The module is the scaled-down form of
the U-Net in the FDP paper's diffusion experiments (Section 6.3: 32.8M parameters on AFHQ); for ten classes it has
99,969 parameters with the default widths (16, 32) and embedding 64, and 25,537 with the (8, 16) and 32 of
``fdp-audit reproduce diffusion`` (the count does not depend on the image side).
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F


def _groups(channels: int) -> int:
    """Groups of GroupNorm: 8 when they divide the channels, else the largest divisor up to 8."""
    return max(g for g in range(1, 9) if channels % g == 0)


def time_embedding(t: torch.Tensor, dim: int) -> torch.Tensor:
    """Sinusoidal embedding of times ``t`` ∈ [0, 1]: ``[sin(1000 t ω_j), cos(1000 t ω_j)]`` with
    ``ω_j = 10000^(-j / (dim/2))``, the Transformer positional code of the diffusion step 1000 t.

    Args:
        t: times in [0, 1], ``[B]``.
        dim: the embedding width (even).

    Returns:
        The embeddings ``[B, dim]``, float32.
    """
    half = dim // 2
    freqs = torch.exp(-math.log(10000.0) * torch.arange(half, device=t.device, dtype=torch.float32) / half)
    angles = 1000.0 * t.float()[:, None] * freqs[None, :]
    return torch.cat([torch.sin(angles), torch.cos(angles)], dim=1)


class ResidualBlock(nn.Module):
    """``h = conv(SiLU(GN(x))) + W e``, ``out = conv(SiLU(GN(h))) + skip(x)`` for the embedding e."""

    def __init__(self, channels_in: int, channels_out: int, embedding: int):
        super().__init__()
        self.norm1 = nn.GroupNorm(_groups(channels_in), channels_in)
        self.conv1 = nn.Conv2d(channels_in, channels_out, 3, padding=1)
        self.embed = nn.Linear(embedding, channels_out)
        self.norm2 = nn.GroupNorm(_groups(channels_out), channels_out)
        self.conv2 = nn.Conv2d(channels_out, channels_out, 3, padding=1)
        self.skip = nn.Conv2d(channels_in, channels_out, 1) if channels_in != channels_out else nn.Identity()

    def forward(self, x: torch.Tensor, emb: torch.Tensor) -> torch.Tensor:
        """The block's output for feature maps ``x`` and the time-and-class embedding ``emb`` (class docstring).

        Args:
            x: feature maps ``[B, channels_in, H, W]``.
            emb: the embeddings ``[B, embedding]``.

        Returns:
            Feature maps ``[B, channels_out, H, W]``.
        """
        h = self.conv1(F.silu(self.norm1(x))) + self.embed(emb)[:, :, None, None]
        return self.conv2(F.silu(self.norm2(h))) + self.skip(x)


class TinyUNet(nn.Module):
    """``forward(x_t [B, C, H, W], t [B] in [0, 1], y [B] class) -> predicted noise [B, C, H, W]``.

    ``widths`` are the channel counts of the resolutions, finest first; every level but the last halves the
    side, so H and W must be divisible by ``2^(len(widths) - 1)``.
    """

    def __init__(self, n_classes: int, image_channels: int = 1, widths: tuple[int, ...] = (16, 32),
                 embedding: int = 64):
        super().__init__()
        self.n_classes, self.image_channels, self.widths = n_classes, image_channels, tuple(widths)
        self.embedding = embedding
        self.time_mlp = nn.Sequential(nn.Linear(embedding, embedding), nn.SiLU(), nn.Linear(embedding, embedding))
        self.class_embedding = nn.Embedding(n_classes, embedding)
        self.conv_in = nn.Conv2d(image_channels, widths[0], 3, padding=1)
        self.down_blocks = nn.ModuleList()
        self.downsample = nn.ModuleList()
        for level, width in enumerate(widths):
            previous = widths[max(level - 1, 0)]
            self.down_blocks.append(ResidualBlock(previous, width, embedding))
            if level < len(widths) - 1:
                self.downsample.append(nn.Conv2d(width, width, 3, stride=2, padding=1))
        self.middle = ResidualBlock(widths[-1], widths[-1], embedding)
        self.up_blocks = nn.ModuleList()
        self.upsample = nn.ModuleList()
        for level in reversed(range(len(widths))):
            below = widths[min(level + 1, len(widths) - 1)]
            if level < len(widths) - 1:
                self.upsample.append(nn.Conv2d(below, widths[level], 3, padding=1))
            self.up_blocks.append(ResidualBlock(2 * widths[level], widths[level], embedding))
        self.norm_out = nn.GroupNorm(_groups(widths[0]), widths[0])
        self.conv_out = nn.Conv2d(widths[0], image_channels, 3, padding=1)

    def forward(self, x: torch.Tensor, t: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """The predicted noise ε_θ(x_t, t, y) (module docstring).

        Args:
            x: diffused images x_t ``[B, C, H, W]``.
            t: diffusion times t/T in [0, 1], ``[B]``.
            y: class labels ``[B]``.

        Returns:
            The predicted noise ``[B, C, H, W]``.
        """
        emb = self.time_mlp(time_embedding(t, self.embedding)) + self.class_embedding(y)
        h = self.conv_in(x)
        skips = []
        for level, block in enumerate(self.down_blocks):
            h = block(h, emb)
            skips.append(h)
            if level < len(self.downsample):
                h = self.downsample[level](h)
        h = self.middle(h, emb)
        ups = iter(self.upsample)
        for block, skip in zip(self.up_blocks, reversed(skips), strict=True):
            if h.shape[-1] != skip.shape[-1]:
                h = next(ups)(F.interpolate(h, size=skip.shape[-2:], mode="nearest"))
            h = block(torch.cat([h, skip], dim=1), emb)
        return self.conv_out(F.silu(self.norm_out(h)))


def n_parameters(module: nn.Module) -> int:
    """The number of parameters of a module.

    Args:
        module: any ``nn.Module``.

    Returns:
        The total element count of its parameters.
    """
    return sum(p.numel() for p in module.parameters())
