"""Public maps Ψ for images (docs/images.md): block-average downsampling and Gaussian blur.

Records are grey-scale images flattened row-major to ``[..., H·W]``. Both maps are linear, Ψ(x) = A x, so
"the same public image" is a statement about the null space of A, and every map here says which part of an
image it protects by an orthogonal projection ``P`` onto that part (:meth:`protected_part`):

* **Downsampling** by k (:class:`DownsamplePublicMap`): Ψ(x) is the ``(H/k)×(W/k)`` image of k×k block means. Its
  null space is exactly the images whose every k×k block sums to zero, ``P x = x − U D x`` with ``U`` the
  nearest-neighbour upsampling, and x' = x + h has Ψ(x') = Ψ(x) for every such h (to float rounding of a
  block sum).
* **Gaussian blur** (:class:`BlurPublicMap`): a blur with reflect padding is the separable matrix ``B = B_h ⊗ B_w``,
  which is *injective*: its smallest singular value is small (the high frequencies are damped by about
  ``exp(−σ²ω²/2)``) but not zero, so deconvolution recovers x from B x, and "same blurred image" taken
  literally admits no neighbour. The map implemented is the *band-limited* blur of tolerance τ: with the
  singular value decomposition ``B = Σ s_ij u_ij v_ijᵀ`` (``s_ij = s_h,i s_w,j``, ``v_ij = v_h,i ⊗ v_w,j``),
  the protected part is the span of the ``v_ij`` with ``s_ij ≤ τ·s_max``, and

      Ψ_τ(x) = B (x − P x),

  the blur of the image's visible part. Ψ_τ(x + h) = Ψ_τ(x) exactly for h in the protected span, and the
  ordinary blur moves by ‖B h‖ ≤ τ·s_max‖h‖ (s_max, B's largest singular value, is slightly above 1 with
  reflect padding: 1.015 at 28×28 and σ = 1): x and x + h have the same blurred image up to a relative
  tolerance τ. τ = 0 is the literal blur, which protects nothing (:attr:`protected_dimension` is then 0).

The public loss trains on Ψ(x) rendered at the full resolution (:meth:`public_image`: the upsampled block
means, or the blurred image), as the FDP paper's public baseline trains on the blurred images.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import torch

from fdp_audit.data.encoding import EncodedData
from fdp_audit.data.features import CanaryCandidates, PublicView
from fdp_audit.errors import BadInputError

CANDIDATE_SEED = 0x1A6E  # the candidates' patterns are a function of the record alone
CANDIDATE_SCALE_ROWS = 2_000  # population images that set the patterns' size


def _reflect(index: torch.Tensor, size: int) -> torch.Tensor:
    """Reflect padding's source indices (the edge pixel not repeated, as ``torch.nn.functional.pad``'s
    ``reflect``), for any offsets: reflection repeats every ``2(size − 1)`` pixels."""
    if size == 1:
        return torch.zeros_like(index)
    period = 2 * (size - 1)
    index = torch.remainder(index, period)
    return torch.where(index < size, index, period - index)


def blur_matrix(size: int, sigma: float) -> torch.Tensor:
    """The 1-D Gaussian blur ``[size, size]`` (float64): kernel ``exp(−o²/2σ²)`` normalised over offsets
    ``|o| ≤ max(1, round(3σ))``, reflect padding. ``(B X)`` blurs the columns of an image X.

    Args:
        size: the number of pixels along the axis.
        sigma: the kernel's standard deviation σ > 0, in pixels.

    Returns:
        The matrix B, float64 of shape ``[size, size]``, each row summing to 1.
    """
    radius = max(1, int(3 * sigma + 0.5))
    offsets = torch.arange(-radius, radius + 1, dtype=torch.int64)
    kernel = torch.exp(-0.5 * (offsets.double() / sigma) ** 2)
    kernel = kernel / kernel.sum()
    sources = _reflect(torch.arange(size)[:, None] + offsets[None, :], size)
    return torch.zeros(size, size, dtype=torch.float64).scatter_add_(1, sources, kernel.expand(size, -1).clone())


def gaussian_blur(images: torch.Tensor, sigma: float) -> torch.Tensor:
    """Separable Gaussian blur of ``[..., H, W]`` images (:func:`blur_matrix` along each axis).

    Args:
        images: images of shape ``[..., H, W]``.
        sigma: the kernel's standard deviation σ > 0, in pixels.

    Returns:
        ``B_h X B_wᵀ`` for each image, same shape, dtype and device.
    """
    h, w = images.shape[-2:]
    rows = blur_matrix(h, sigma).to(images.device, images.dtype)
    columns = blur_matrix(w, sigma).to(images.device, images.dtype)
    return rows @ images @ columns.T


@dataclass(frozen=True)
class ImagePublicMap:
    """What the image maps share: shape handling, the label, and the protected-part algebra. Subclasses
    define ``_public`` (Ψ's features), :meth:`public_image` and :meth:`protected_part`."""

    height: int
    width: int
    label_public: bool = True

    @property
    def n_pixels(self) -> int:
        return self.height * self.width

    def _images(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[-1] != self.n_pixels:
            raise BadInputError(f"{type(self).__name__} expects {self.height}×{self.width} images "
                                f"({self.n_pixels} features), got {x.shape[-1]}", "data.public_map")
        return x.reshape(*x.shape[:-1], self.height, self.width)

    def __call__(self, x: torch.Tensor, y: torch.Tensor) -> PublicView:
        return PublicView(self._public(x), y if self.label_public else None)

    def _public(self, x: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def public_image(self, features: torch.Tensor) -> torch.Tensor:
        """Ψ(x)'s features rendered as a full-resolution image ``[..., H·W]`` (the public loss's input).

        Args:
            features: Ψ's features, as the map's :class:`PublicView` holds them.

        Returns:
            Images of shape ``[..., H·W]``.
        """
        raise NotImplementedError

    def protected_part(self, x: torch.Tensor) -> torch.Tensor:
        """``P x``: the orthogonal projection of images ``[..., H·W]`` onto the part Ψ does not see.

        Args:
            x: flattened images, shape ``[..., H·W]``.

        Returns:
            ``P x``, same shape.

        Raises:
            BadInputError: the last dimension is not ``H·W``.
        """
        raise NotImplementedError

    @property
    def protected_dimension(self) -> int:
        """The dimension of the protected subspace (the rank of P)."""
        raise NotImplementedError

    def with_protected(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        """Records with x's public image and ``residual``'s protected part: ``x − P x + P r``.

        Args:
            x: flattened images giving the public image, shape ``[..., H·W]``.
            residual: flattened images giving the protected part, broadcastable to ``x``.

        Returns:
            The combined images, shape of the broadcast.
        """
        return x - self.protected_part(x) + self.protected_part(residual)

    def canary_candidates(self, record: torch.Tensor, population: EncodedData, count: int) -> CanaryCandidates:
        """``count`` records with ``record``'s public image: ``x − P x + P z_j``, z_j ~ N(0, s²I) with s the
        root-mean-square protected pixel of ``population`` (so the patterns have the size real protected parts
        have), drawn from a fixed seed so that every worker builds the same candidates (the
        :class:`~fdp_audit.data.features.CandidateMap` protocol). The labels are the record's (Ψ does not fix
        them: the caller keeps its label).

        Args:
            record: a flattened image, shape ``[H·W]``.
            population: images whose first :data:`CANDIDATE_SCALE_ROWS` set the scale s.
            count: the number of candidates.

        Returns:
            ``count`` candidates named ``pattern 0`` … in the record's dtype.

        Raises:
            BadInputError: Ψ protects nothing (:attr:`protected_dimension` 0), or the images have the wrong size.
        """
        pixels = torch.as_tensor(population.x[:CANDIDATE_SCALE_ROWS], dtype=torch.float64)
        scale = float(self.protected_part(pixels).square().mean().sqrt()) if len(pixels) else 1.0
        base = record.to(torch.float64)
        records = self.neighbours(base - self.protected_part(base), count, scale or 1.0,
                                  torch.Generator().manual_seed(CANDIDATE_SEED))
        return CanaryCandidates(records.to(record.dtype), tuple(f"pattern {j}" for j in range(count)))

    def neighbours(self, x: torch.Tensor, count: int, scale: float, generator: torch.Generator) -> torch.Tensor:
        """``count`` records ``[count, ..., H·W]`` with Ψ equal to Ψ(x): ``x + P z`` with z ~ N(0, scale²I) drawn
        from ``generator`` (float64, then x's dtype).

        Args:
            x: flattened images, shape ``[..., H·W]``.
            count: the number of neighbours of each image.
            scale: the standard deviation of z per pixel.
            generator: the random generator z is drawn from (on the CPU).

        Returns:
            The neighbours, shape ``[count, ..., H·W]``, x's dtype and device.

        Raises:
            BadInputError: Ψ protects nothing (:attr:`protected_dimension` 0).
        """
        if self.protected_dimension == 0:
            raise BadInputError(f"Ψ {self.spec()} protects nothing: every image is its own only neighbour",
                                "data.public_map")
        noise = torch.randn((count, *x.shape), generator=generator, dtype=torch.float64).to(x.device)
        return (x.to(torch.float64) + self.protected_part(noise * scale)).to(x.dtype)


@dataclass(frozen=True)
class DownsamplePublicMap(ImagePublicMap):
    """Ψ(x, y) = (k×k block means of x, y); protected: every image whose k×k blocks each sum to zero."""

    factor: int = 4

    def __post_init__(self) -> None:
        if self.factor < 1 or self.height % self.factor or self.width % self.factor:
            raise BadInputError(f"downsampling by {self.factor} needs a side divisible by it, got "
                                f"{self.height}×{self.width}", "data.downsample_factor")

    @property
    def public_shape(self) -> tuple[int, int]:
        return self.height // self.factor, self.width // self.factor

    def _public(self, x: torch.Tensor) -> torch.Tensor:
        images = self._images(x)
        k = self.factor
        blocks = images.reshape(*images.shape[:-2], self.height // k, k, self.width // k, k)
        return blocks.mean(dim=(-3, -1)).flatten(-2)

    def public_image(self, features: torch.Tensor) -> torch.Tensor:
        """The k×k block means repeated over their blocks (nearest-neighbour upsampling ``U``).

        Args:
            features: block means, shape ``[..., (H/k)·(W/k)]``.

        Returns:
            Images of shape ``[..., H·W]``.
        """
        small = features.reshape(*features.shape[:-1], *self.public_shape)
        k = self.factor
        return small.repeat_interleave(k, dim=-2).repeat_interleave(k, dim=-1).flatten(-2)

    def protected_part(self, x: torch.Tensor) -> torch.Tensor:
        """``P x = x − U D x``: each pixel minus its block's mean.

        Args:
            x: flattened images, shape ``[..., H·W]``.

        Returns:
            ``P x``, same shape; each k×k block of it sums to zero.

        Raises:
            BadInputError: the last dimension is not ``H·W``.
        """
        return x - self.public_image(self._public(x))

    @property
    def protected_dimension(self) -> int:
        return self.n_pixels - math.prod(self.public_shape)

    def spec(self) -> dict[str, Any]:
        """A JSON-able description stored in checkpoints and results.

        Returns:
            ``{"kind": "downsample", "height", "width", "factor", "label_public"}``.
        """
        return {"kind": "downsample", "height": self.height, "width": self.width, "factor": self.factor,
                "label_public": self.label_public}


@dataclass(frozen=True)
class BlurPublicMap(ImagePublicMap):
    """Ψ_τ(x, y) = (B(x − P x), y), the band-limited Gaussian blur of the module docstring; protected: the span
    of the blur's right singular vectors with singular value at most ``tolerance`` times the largest."""

    sigma: float = 1.0
    tolerance: float = 0.1
    _basis: tuple[torch.Tensor, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not (self.sigma > 0 and 0 <= self.tolerance < 1):
            raise BadInputError(f"blur needs σ > 0 and a tolerance in [0, 1), got σ={self.sigma}, "
                                f"τ={self.tolerance}", "data.blur_tolerance")
        u_h, s_h, v_h = torch.linalg.svd(blur_matrix(self.height, self.sigma))
        u_w, s_w, v_w = torch.linalg.svd(blur_matrix(self.width, self.sigma))
        singular = s_h[:, None] * s_w[None, :]
        protected = singular <= self.tolerance * singular.max()
        # (U_h, U_w, V_h, V_w) with V's columns the right singular vectors; the visible gain s_ij·[not protected]
        object.__setattr__(self, "_basis", (u_h, u_w, v_h.T, v_w.T, singular * ~protected, protected.double()))

    @cached_property
    def _device_basis(self) -> dict[tuple[torch.device, torch.dtype], tuple[torch.Tensor, ...]]:
        return {}

    def _on(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        key = (x.device, x.dtype)
        if key not in self._device_basis:
            self._device_basis[key] = tuple(t.to(x.device, x.dtype) for t in self._basis)
        return self._device_basis[key]

    def _public(self, x: torch.Tensor) -> torch.Tensor:
        u_h, u_w, v_h, v_w, gain, _ = self._on(x)
        coefficients = v_h.T @ self._images(x) @ v_w
        return (u_h @ (gain * coefficients) @ u_w.T).flatten(-2)

    def public_image(self, features: torch.Tensor) -> torch.Tensor:
        """Ψ_τ's features are already the full-resolution blurred image.

        Args:
            features: the band-limited blur, shape ``[..., H·W]``.

        Returns:
            ``features`` itself.
        """
        return features

    def protected_part(self, x: torch.Tensor) -> torch.Tensor:
        """``P x``: the projection onto the right singular vectors with ``s_ij ≤ τ·s_max`` (module docstring).

        Args:
            x: flattened images, shape ``[..., H·W]``.

        Returns:
            ``P x``, same shape, dtype and device.

        Raises:
            BadInputError: the last dimension is not ``H·W``.
        """
        _, _, v_h, v_w, _, mask = self._on(x)
        coefficients = v_h.T @ self._images(x) @ v_w
        return (v_h @ (mask * coefficients) @ v_w.T).flatten(-2)

    @property
    def protected_dimension(self) -> int:
        return int(self._basis[5].sum())

    def spec(self) -> dict[str, Any]:
        """A JSON-able description stored in checkpoints and results.

        Returns:
            ``{"kind": "blur", "height", "width", "sigma", "tolerance", "label_public"}``.
        """
        return {"kind": "blur", "height": self.height, "width": self.width, "sigma": self.sigma,
                "tolerance": self.tolerance, "label_public": self.label_public}
