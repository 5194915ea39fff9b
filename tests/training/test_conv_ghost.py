"""Per-example clipping for the GroupNorm CNN (docs/images.md): norms and clipped sums from one forward and
backward pass equal torch.func's materialised per-example gradients, on both conv routes, and whole trainings
through the engine equal the torch.func path."""

from __future__ import annotations

import pytest
import torch
from torch.func import grad, vmap

from fdp_audit.config import OptimizerConfig
from fdp_audit.data.image_psi import BlurPublicMap, DownsamplePublicMap
from fdp_audit.mechanisms import MECHANISMS
from fdp_audit.training import conv_ghost, engine, ghost, streams
from fdp_audit.training.cnn import cnn_model
from fdp_audit.training.engine import Canaries, Hyperparameters, TrainingProblem, train_models
from fdp_audit.training.models import Model, example_loss
from fdp_audit.training.public_losses import build_public_loss

MODELS = {"digits-3class": cnn_model(64, 3, (8, 4)), "binary-one-block": cnn_model(16, 2, (4,)),
          "default-channels": cnn_model(64, 10, ())}


def _params(model: Model, r: int, seed: int) -> dict[str, torch.Tensor]:
    """Initialised parameters moved off their initial values (GroupNorm scales 1 and zero biases are special)."""
    generator = torch.Generator().manual_seed(seed)
    params = model.init(streams.model_keys(seed, torch.arange(r)))
    return {name: (v + 0.2 * torch.randn(v.shape, generator=generator)).double() for name, v in params.items()}


def _materialised(model: Model, params, x, y, public_inputs):
    """Per-example gradients ``[R, K, P]`` of ℓ (or ℓ_priv with public inputs) by torch.func."""

    def loss(p, xi, yi, pi):
        value = example_loss(model.forward(p, xi), yi)
        return value if public_inputs is None else value - example_loss(model.forward(p, pi), yi)

    per_example = vmap(vmap(grad(loss), in_dims=(None, 0, 0, 0)))(
        params, x, y, x if public_inputs is None else public_inputs)
    return engine.flatten(per_example, lead=2)


def _case(model: Model, decomposed: bool, r: int = 3, k: int = 6, seed: int = 0):
    generator = torch.Generator().manual_seed(seed + 1)
    x = torch.rand(r, k, model.n_inputs, generator=generator, dtype=torch.float64)
    y = torch.randint(0, model.n_classes, (r, k), generator=generator)
    public = DownsamplePublicMap(model.image_side, model.image_side, factor=2)
    public_inputs = public.public_image(public(x, y).features) if decomposed else None
    return _params(model, r, seed), x, y, public_inputs


def assert_clips_as_torch_func(model: Model, params, x, y, public_inputs, route: str, padded: int
                               ) -> tuple[torch.Tensor, torch.Tensor, ghost.PrivateBatch]:
    """Per-example norms and the clipped sum at the median norm (half the examples clipped) equal torch.func's to
    1e-10, with model ``padded``'s last two slots Poisson padding; returns the validity, the per-example
    gradients and the batch for further checks."""
    valid = torch.ones(x.shape[:2], dtype=torch.bool)
    valid[padded, -2:] = False
    batch = ghost.PrivateBatch(x, y, valid, None if public_inputs is None else ghost.PublicTerm(public_inputs))
    per_example = _materialised(model, params, x, y, public_inputs)
    norms = per_example.norm(dim=-1)
    torch.testing.assert_close(conv_ghost.private_norms(model, params, batch, route), norms, rtol=1e-10, atol=1e-10)
    clip = float(norms.median())
    expected = torch.einsum("rk,rkp->rp", valid * torch.clamp(clip / norms, max=1.0), per_example)
    torch.testing.assert_close(conv_ghost.clipped_private_sum(model, params, batch, clip, route=route), expected,
                               rtol=1e-10, atol=1e-10)
    return valid, per_example, batch


@pytest.mark.parametrize("name", sorted(MODELS))
@pytest.mark.parametrize("decomposed", [False, True], ids=["full", "decomposed"])
@pytest.mark.parametrize("route", ["ghost", "direct", "auto"])
def test_norms_and_clipped_sums_equal_materialised_ones(name, decomposed, route):
    model = MODELS[name]
    params, x, y, public_inputs = _case(model, decomposed)
    valid, per_example, batch = assert_clips_as_torch_func(model, params, x, y, public_inputs, route, padded=0)
    unclipped = torch.einsum("rk,rkp->rp", valid.double(), per_example)
    torch.testing.assert_close(conv_ghost.clipped_private_sum(model, params, batch, None, route=route), unclipped,
                               rtol=1e-10, atol=1e-10)


def test_a_gradient_canary_enters_clipped_with_its_given_vector():
    model = MODELS["digits-3class"]
    params, x, y, public_inputs = _case(model, True)
    valid = torch.ones(x.shape[:2], dtype=torch.bool)
    mask = torch.zeros_like(valid)
    mask[:, 2] = True
    vectors = torch.randn(3, model.n_parameters, dtype=torch.float64)
    per_example = _materialised(model, params, x, y, public_inputs)
    per_example = torch.where(mask[..., None], vectors[:, None, :], per_example)
    weights = torch.clamp(0.7 / per_example.norm(dim=-1), max=1.0)
    batch = ghost.PrivateBatch(x, y, valid, ghost.PublicTerm(public_inputs))
    got = conv_ghost.clipped_private_sum(model, params, batch, 0.7, ghost.GradientOverride(mask, vectors))
    torch.testing.assert_close(got, torch.einsum("rk,rkp->rp", weights, per_example), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_gradient_sum_equals_torch_func(name):
    model = MODELS[name]
    params, x, y, _ = _case(model, False)
    weights = torch.rand(x.shape[:2], dtype=torch.float64)
    expected = torch.einsum("rk,rkp->rp", weights, _materialised(model, params, x, y, None))
    torch.testing.assert_close(conv_ghost.gradient_sum(model, params, x, y, weights), expected, rtol=1e-10, atol=1e-10)


def test_identical_terms_give_zero_norm():
    """ℓ_priv with the record as its own public input is identically zero: every route says so exactly."""
    model = MODELS["digits-3class"]
    params, x, y, _ = _case(model, False)
    batch = ghost.PrivateBatch(x, y, torch.ones(x.shape[:2], dtype=torch.bool), ghost.PublicTerm(x))
    for route in ("ghost", "direct"):
        assert float(conv_ghost.private_norms(model, params, batch, route).max()) < 1e-6


def _image_problem(model: Model, mechanism: str, psi) -> TrainingProblem:
    generator = torch.Generator().manual_seed(3)
    x = torch.rand(48, model.n_inputs, generator=generator)
    y = torch.randint(0, model.n_classes, (48,), generator=generator)
    hyper = Hyperparameters(noise_multiplier=0.8, sample_rate=0.25, steps=5, clip_norm=0.5, public_batch_size=8,
                            optimizer=OptimizerConfig(lr=0.2))
    return TrainingProblem(model, x, y, psi, build_public_loss("public_image", psi), MECHANISMS[mechanism].recipe,
                           hyper)


@pytest.mark.parametrize(("mechanism", "canary"), [("fdp_sgd", "gradient"), ("fdp_sgd", "record"),
                                                   ("dp_sgd", None), ("fdp_sgd_shared_batch", "record"),
                                                   ("fdp_sgd_leaky_public", None)])
def test_engine_conv_path_trains_the_same_models_as_torch_func(monkeypatch, mechanism, canary):
    """Whole trainings (float32): the conv path and the torch.func path give the same released noisy sums and
    models (1e-5)."""
    model = MODELS["digits-3class"]
    problem = _image_problem(model, mechanism, BlurPublicMap(8, 8, sigma=1.0))
    canaries = None
    if canary is not None:
        generator = torch.Generator().manual_seed(5)
        gradient = canary == "gradient"
        canaries = Canaries(torch.rand(4, 64, generator=generator), torch.randint(0, 3, (4,), generator=generator),
                            torch.ones(4, dtype=torch.bool), torch.ones(4, dtype=torch.bool),
                            torch.randn(4, model.n_parameters, generator=generator) if gradient else None,
                            torch.randn(4, model.n_parameters, generator=generator) if gradient else None)

    def run():
        (chunk,) = train_models(problem, seed=11, model_indices=range(4), canaries=canaries, record_iterates=True)
        return chunk

    assert engine.private_path(problem) == "conv"
    fast = run()
    monkeypatch.setattr(conv_ghost, "supports", lambda model: False)
    assert engine.private_path(problem) == "materialised"
    slow = run()
    assert fast.iterates.private_batch_sizes.sum() > 0
    torch.testing.assert_close(fast.iterates.noisy_private_sums, slow.iterates.noisy_private_sums, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(fast.iterates.public_gradients, slow.iterates.public_gradients, rtol=1e-5, atol=1e-5)
    for key in fast.params:
        torch.testing.assert_close(fast.params[key], slow.params[key], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("route", ["auto", "ghost"])
def test_float32_ghost_norms_do_not_under_clip_when_the_public_input_is_close_to_the_record(route):
    """A nearly block-constant image under 2×2 downsampling: the record and its public input differ by ~10⁻³,
    so ∇ℓ_priv is a small difference of large terms. In float32 the stacked-form ghost norm came out up to 2.4×
    too small (4.2× with the ghost route forced), releasing gradients far above C; every released per-example
    norm (true norms in float64) must stay within float32's rounding of C, as the direct route's do."""
    torch.manual_seed(0)
    model = cnn_model(64, 10, (16, 32, 64))
    params = {k: v + 0.05 * torch.randn_like(v) for k, v in model.init(streams.model_keys(0, torch.arange(3))).items()}
    psi = DownsamplePublicMap(8, 8, factor=2)
    x = psi.public_image(torch.rand(3, 32, 16, dtype=torch.float64)) + 1e-3 * torch.rand(3, 32, 64, dtype=torch.float64)
    public = psi.public_image(psi(x, None).features)
    y = torch.randint(0, 10, (3, 32))
    valid = torch.ones(3, 32, dtype=torch.bool)
    true = conv_ghost.private_norms(model, {k: v.double() for k, v in params.items()},
                                    ghost.PrivateBatch(x, y, valid, ghost.PublicTerm(public)), "direct")
    estimated = conv_ghost.private_norms(model, params, ghost.PrivateBatch(x.float(), y, valid,
                                                                           ghost.PublicTerm(public.float())), route)
    clip = 1e-3
    released = torch.clamp(clip / estimated.double().clamp_min(1e-12), max=1.0) * true
    assert released.max() <= clip * 1.01


def test_multiply_adds_count_every_convolution_position_and_the_classifier():
    """The Fashion-MNIST CNN (28×28, widths 16 and 32, 10 classes) by hand: 28²·16·9 + 14²·32·(16·9) + 7²·32·10."""
    model = cnn_model(784, 10, (16, 32))
    assert conv_ghost.multiply_adds_per_example(model) == 784 * 16 * 9 + 196 * 32 * 144 + 1568 * 10


@pytest.mark.parametrize("canary", [None, "gradient"])
def test_models_grouped_by_batch_size_train_as_in_one_group(monkeypatch, canary):
    """A chunk of 12 models in groups of 5 (sorted by Poisson batch width, each padded to its own widest) against
    one group: the same released sums and models (1e-5), so a model's training does not depend on the grouping;
    a group's sums written back to the wrong models would differ by the sums themselves."""
    model = MODELS["digits-3class"]
    problem = _image_problem(model, "fdp_sgd", DownsamplePublicMap(8, 8, factor=2))
    count = 12
    canaries = None
    if canary is not None:
        generator = torch.Generator().manual_seed(7)
        canaries = Canaries(torch.rand(count, 64, generator=generator),
                            torch.randint(0, 3, (count,), generator=generator),
                            torch.rand(count, generator=generator) < 0.5, torch.ones(count, dtype=torch.bool),
                            torch.randn(count, model.n_parameters, generator=generator),
                            torch.randn(count, model.n_parameters, generator=generator))

    def run():
        (chunk,) = train_models(problem, seed=2, model_indices=range(count), canaries=canaries,
                                record_iterates=True)
        return chunk

    one_group = run()
    monkeypatch.setattr(engine, "MODELS_PER_SIZE_GROUP", 5)
    grouped = run()
    sizes = one_group.iterates.private_batch_sizes
    assert len(set(sizes.flatten().tolist())) > 3  # widths do differ
    torch.testing.assert_close(grouped.iterates.noisy_private_sums, one_group.iterates.noisy_private_sums,
                               rtol=1e-5, atol=1e-5)
    for name in one_group.params:
        torch.testing.assert_close(grouped.params[name], one_group.params[name], rtol=1e-5, atol=1e-5)
