"""Image Ψ maps (docs/images.md): block-average downsampling and the band-limited Gaussian blur, their
protected parts, and neighbours with exactly the same public image."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from fdp_audit.data.features import ColumnSplit
from fdp_audit.data.image_psi import BlurPublicMap, DownsamplePublicMap, blur_matrix, gaussian_blur
from fdp_audit.errors import BadInputError
from fdp_audit.training.public_losses import build_public_loss

MAPS = [DownsamplePublicMap(8, 8, factor=2), DownsamplePublicMap(28, 28, factor=4),
        BlurPublicMap(8, 8, sigma=1.0, tolerance=0.1),
        BlurPublicMap(28, 28, sigma=1.0, tolerance=0.1), BlurPublicMap(12, 20, sigma=2.0, tolerance=0.05)]
IDS = ["down-8/2", "down-28/4", "blur-8", "blur-28", "blur-12x20"]


def _images(psi, n: int = 5, seed: int = 0) -> torch.Tensor:
    return torch.rand(n, psi.n_pixels, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def test_downsampling_is_the_block_mean():
    x = _images(DownsamplePublicMap(28, 28, factor=4))
    expected = x.numpy().reshape(5, 7, 4, 7, 4).mean(axis=(2, 4)).reshape(5, 49)
    np.testing.assert_allclose(DownsamplePublicMap(28, 28, factor=4)(x, None).features.numpy(), expected, atol=1e-12)


def test_downsampling_neighbours_add_blocks_that_sum_to_zero():
    psi = DownsamplePublicMap(28, 28, factor=4)
    x = _images(psi)
    neighbours = psi.neighbours(x, 3, 0.5, torch.Generator().manual_seed(1))
    h = (neighbours - x).numpy().reshape(3, 5, 7, 4, 7, 4)
    assert np.abs(h.sum(axis=(3, 5))).max() < 1e-12  # every 4×4 block of h sums to zero
    assert np.linalg.norm(h.reshape(15, -1), axis=1).min() > 1.0  # and h is not zero
    assert psi.protected_dimension == 784 - 49


@pytest.mark.parametrize("psi", MAPS, ids=IDS)
def test_neighbours_have_the_same_public_image_and_another_protected_part(psi):
    x = _images(psi)
    neighbours = psi.neighbours(x, 4, 0.3, torch.Generator().manual_seed(2))
    assert neighbours.shape == (4, *x.shape)
    assert float((psi(neighbours, None).features - psi(x, None).features).abs().max()) < 1e-12
    assert float((psi.protected_part(neighbours) - psi.protected_part(x)).norm(dim=-1).min()) > 0.1


@pytest.mark.parametrize("psi", MAPS, ids=IDS)
def test_the_protected_part_is_an_orthogonal_projection_that_completes_the_public_part(psi):
    x, z = _images(psi, seed=3), _images(psi, seed=4)
    p = psi.protected_part
    torch.testing.assert_close(p(p(x)), p(x), atol=1e-12, rtol=0)
    torch.testing.assert_close((p(x) * z).sum(-1), (x * p(z)).sum(-1), atol=1e-12, rtol=0)  # self-adjoint
    mixed = psi.with_protected(x, z)
    torch.testing.assert_close(psi(mixed, None).features, psi(x, None).features, atol=1e-12, rtol=0)
    torch.testing.assert_close(p(mixed), p(z), atol=1e-12, rtol=0)
    # rank of P, from P applied to the standard basis
    rank = torch.linalg.matrix_rank(p(torch.eye(psi.n_pixels, dtype=torch.float64))).item()
    assert rank == psi.protected_dimension


def test_the_public_image_of_downsampling_is_the_upsampled_block_mean():
    psi = DownsamplePublicMap(8, 8, factor=2)
    x = _images(psi)
    image = psi.public_image(psi(x, None).features)
    torch.testing.assert_close(image + psi.protected_part(x), x, atol=1e-12, rtol=0)
    expected = F.interpolate(psi(x, None).features.reshape(5, 1, 4, 4), scale_factor=2, mode="nearest")
    torch.testing.assert_close(image, expected.reshape(5, 64), atol=1e-12, rtol=0)


@pytest.mark.parametrize(("size", "sigma"), [(8, 1.0), (28, 1.0), (28, 2.5)])
def test_gaussian_blur_equals_a_reflect_padded_convolution(size, sigma):
    """Against torch's own padding and convolution (the radius fits inside the image)."""
    x = _images(BlurPublicMap(size, size)).reshape(5, 1, size, size)
    radius = max(1, int(3 * sigma + 0.5))
    offsets = torch.arange(-radius, radius + 1, dtype=torch.float64)
    kernel = torch.exp(-0.5 * (offsets / sigma) ** 2)
    kernel = kernel / kernel.sum()
    padded = F.pad(x, (radius,) * 4, mode="reflect")
    expected = F.conv2d(F.conv2d(padded, kernel.view(1, 1, 1, -1)), kernel.view(1, 1, -1, 1))
    torch.testing.assert_close(gaussian_blur(x, sigma), expected, atol=1e-12, rtol=0)


def test_blur_removes_fine_detail_and_keeps_constants_even_with_a_kernel_wider_than_the_image():
    checker = ((torch.arange(8).view(-1, 1) + torch.arange(8).view(1, -1)) % 2).double()
    assert gaussian_blur(checker, 1.0).std() < 0.05 * checker.std()
    constant = torch.full((8, 8), 0.7, dtype=torch.float64)
    torch.testing.assert_close(gaussian_blur(constant, 4.0), constant)  # radius 12 > 7: reflected repeatedly
    torch.testing.assert_close(blur_matrix(8, 4.0).sum(dim=1), torch.ones(8, dtype=torch.float64))


@pytest.mark.parametrize("tolerance", [0.02, 0.1, 0.3])
def test_band_limited_blur_against_the_full_matrix_svd(tolerance):
    """Independent construction: the 64×64 blur matrix K = B_h ⊗ B_w, numpy's SVD, and the projector onto
    the right singular vectors with s ≤ τ·s_max; Ψ_τ = K(I − P)."""
    psi = BlurPublicMap(8, 8, sigma=1.0, tolerance=tolerance)
    full = np.kron(blur_matrix(8, 1.0).numpy(), blur_matrix(8, 1.0).numpy())
    _, s, vt = np.linalg.svd(full)
    protected = vt[s <= tolerance * s.max()]
    projector = protected.T @ protected
    x = _images(psi)
    np.testing.assert_allclose(psi.protected_part(x).numpy(), x.numpy() @ projector, atol=1e-10)
    np.testing.assert_allclose(psi(x, None).features.numpy(), x.numpy() @ (full @ (np.eye(64) - projector)).T,
                               atol=1e-10)
    assert psi.protected_dimension == len(protected) > 0


@pytest.mark.parametrize("psi", [m for m in MAPS if isinstance(m, BlurPublicMap)], ids=[i for i in IDS if "blur" in i])
def test_blur_neighbours_have_the_same_ordinary_blur_to_the_tolerance(psi):
    """‖blur(x + h) − blur(x)‖ = ‖B h‖ ≤ τ‖h‖ for h in the protected span; and Ψ_τ moves the blurred image
    by at most τ‖P x‖ from the ordinary blur."""
    x = _images(psi)
    h = psi.neighbours(x, 3, 1.0, torch.Generator().manual_seed(5)) - x
    moved = gaussian_blur(h.reshape(*h.shape[:-1], psi.height, psi.width), psi.sigma).flatten(-2)
    assert bool((moved.norm(dim=-1) <= psi.tolerance * h.norm(dim=-1) + 1e-12).all())
    plain = gaussian_blur(x.reshape(5, psi.height, psi.width), psi.sigma).flatten(-2)
    gap = (psi(x, None).features - plain).norm(dim=-1)
    assert bool((gap <= psi.tolerance * psi.protected_part(x).norm(dim=-1) + 1e-12).all())


def test_the_literal_blur_is_injective_and_protects_nothing():
    psi = BlurPublicMap(8, 8, sigma=1.0, tolerance=0.0)
    assert psi.protected_dimension == 0
    x = _images(psi)
    torch.testing.assert_close(psi(x, None).features, gaussian_blur(x.reshape(5, 8, 8), 1.0).flatten(-2))
    with pytest.raises(BadInputError, match="protects nothing"):
        psi.neighbours(x, 2, 1.0, torch.Generator())


def test_maps_keep_the_label_when_public_and_run_in_float32():
    psi = BlurPublicMap(8, 8, label_public=False)
    x = torch.rand(3, 64)
    assert psi(x, torch.zeros(3)).labels is None and psi(x, None).features.dtype == torch.float32
    assert torch.equal(DownsamplePublicMap(8, 8)(x, torch.arange(3)).labels, torch.arange(3))
    with pytest.raises(BadInputError, match="expects 8×8 images"):
        psi(torch.rand(3, 63), None)


def test_public_image_loss_gives_the_model_the_rendered_public_image_only():
    psi = DownsamplePublicMap(8, 8, factor=4)
    loss = build_public_loss("public_image", psi)
    x = torch.rand(3, 64)
    torch.testing.assert_close(loss.inputs(psi(x, None)), x - psi.protected_part(x))
    with pytest.raises(BadInputError, match="needs an image public map"):
        build_public_loss("public_image", ColumnSplit((), ()))


@pytest.mark.parametrize("psi", [DownsamplePublicMap(8, 8, factor=2), BlurPublicMap(8, 8, sigma=1.0, tolerance=0.2)],
                         ids=["downsample", "blur"])
def test_canary_candidates_share_the_public_image_are_deterministic_and_sized_like_the_population(psi):
    """The CandidateMap protocol the record-canary games use: same Ψ, different protected parts, the same
    records on every call, patterns of the population's protected size."""
    from fdp_audit.data.encoding import EncodedData
    from fdp_audit.data.features import CandidateMap

    assert isinstance(psi, CandidateMap)
    images = torch.rand(50, 64, generator=torch.Generator().manual_seed(7))
    population = EncodedData(images.numpy(), np.zeros(50, dtype=np.int64), (), ("a", "b"), "label", "f")
    found = psi.canary_candidates(images[0], population, 4)
    again = psi.canary_candidates(images[0], population, 4)
    assert found.records.shape == (4, 64) and len(set(found.names)) == 4 and torch.equal(found.records, again.records)
    public = psi(found.records.double(), None).features
    torch.testing.assert_close(public, psi(images[:1].double(), None).features.expand(4, -1), atol=1e-6, rtol=0)
    size = psi.protected_part(images.double()).square().mean().sqrt()
    drawn = psi.protected_part(found.records.double()).square().mean().sqrt()
    assert 0.5 * size < drawn < 2 * size
