"""Ghost clipping of the private loss (docs/training.md): the inner-product norms and the re-weighted sum
equal the computation on materialised per-example gradients."""

from __future__ import annotations

import pytest
import torch
from torch.func import grad, vmap

from fdp_audit.config import OptimizerConfig
from fdp_audit.data.encoding import ColumnGroup, EncodedData
from fdp_audit.data.features import ColumnSplit, LabelOnlyPublicMap
from fdp_audit.mechanisms import MECHANISMS
from fdp_audit.training import engine, ghost
from fdp_audit.training.engine import Canaries, Hyperparameters, TrainingProblem, train_models
from fdp_audit.training.models import Model, example_loss, label_free_loss
from fdp_audit.training.public_losses import build_public_loss

MODELS = {
    "logistic-binary": Model("logistic", 6, 2),
    "logistic-multiclass": Model("logistic", 6, 4),
    "mlp-multiclass": Model("mlp", 6, 3, (5, 4)),
    "mlp-binary": Model("mlp", 6, 2, (7,)),
}


def _random_params(model: Model, r: int, generator: torch.Generator) -> dict[str, torch.Tensor]:
    """Non-zero weights and biases (logistic models start at zero, where every input looks alike)."""
    return {name: torch.randn(r, *shape, generator=generator, dtype=torch.float64)
            for name, shape in model.shapes().items()}


def _materialised(model, params, x, y, public_inputs, label_free):
    """Per-example gradients ``[R, K, P]`` of ℓ_priv by torch.func, independent of the ghost code."""

    def loss(p, xi, yi, pi):
        value = example_loss(model.forward(p, xi), yi)
        if public_inputs is None:
            return value
        logits = model.forward(p, pi)
        return value - (label_free_loss(logits) if label_free else example_loss(logits, yi))

    per_example = vmap(vmap(grad(loss), in_dims=(None, 0, 0, 0)), in_dims=(0, 0, 0, 0))(
        params, x, y, x if public_inputs is None else public_inputs)
    return engine.flatten(per_example, lead=2)


# Column sets of the input splits: (shared, completed), out of order, with fewer or more shared columns
# (the fast path computes the completed inputs from the smaller set).
SPLITS = {"few-shared": ([4, 1], [0, 2, 3, 5]), "many-shared": ([0, 5, 2, 3], [4, 1]),
          "runs": ([0, 1], [2, 3, 4, 5]), "zero-fill": ([3, 1], [0, 2, 4, 5]), "columns": ([0, 1, 2], [3, 4, 5])}
STRUCTURES = ["none", "columns", "few-shared", "many-shared", "runs", "zero-fill", "all"]


def _case(model: Model, structure: str = "none", r: int = 3, k: int = 9, seed: int = 0):
    """Parameters, records, labels, and completed public inputs whose relation to the records is
    ``structure``: unrelated; equal on some columns with per-example values on the others (``columns``)
    or a fill row there (``few-shared``, ``many-shared``, ``runs``: contiguous column runs, ``zero-fill``:
    the mask); or equal everywhere (label DP)."""
    generator = torch.Generator().manual_seed(seed)
    params = _random_params(model, r, generator)
    x = torch.randn(r, k, model.n_inputs, generator=generator, dtype=torch.float64)
    y = torch.randint(0, model.n_classes, (r, k), generator=generator)
    public_inputs = torch.randn(r, k, model.n_inputs, generator=generator, dtype=torch.float64)
    split = None
    if structure in SPLITS:
        shared, completed = (torch.tensor(columns) for columns in SPLITS[structure])
        public_inputs[..., shared] = x[..., shared]
        if structure != "columns":
            fill = torch.linspace(-1.0, 0.5, len(completed), dtype=torch.float64)
            if structure == "zero-fill":  # the mask public loss
                fill = torch.zeros(len(completed), dtype=torch.float64)
            public_inputs[..., completed] = fill
            split = ghost.InputSplit(shared, completed, fill)
    elif structure == "all":
        public_inputs = x.clone()
        split = ghost.InputSplit(torch.arange(model.n_inputs), torch.zeros(0, dtype=torch.long),
                                 torch.zeros(0, dtype=torch.float64))
    return params, x, y, public_inputs, split


def _term(public_inputs: torch.Tensor | None, label_free: bool, split: ghost.InputSplit | None):
    """The public term of a test case; a split determines the inputs, so they are left out then."""
    if public_inputs is None:
        return None
    return ghost.PublicTerm(None if split is not None else public_inputs, label_free, split)


CASES = [("full", False, "none")] + [("decomposed", label_free, structure)
                                     for label_free in (False, True) for structure in STRUCTURES]


@pytest.mark.parametrize("name", sorted(MODELS))
@pytest.mark.parametrize(("loss", "label_free", "structure"), CASES)
def test_norms_equal_materialised_norms(name, loss, label_free, structure):
    model = MODELS[name]
    params, x, y, public_inputs, split = _case(model, structure)
    public = public_inputs if loss == "decomposed" else None
    expected = _materialised(model, params, x, y, public, label_free).norm(dim=-1)
    batch = ghost.PrivateBatch(x, y, torch.ones(x.shape[:2], dtype=torch.bool), _term(public, label_free, split))
    torch.testing.assert_close(ghost.private_norms(model, params, batch), expected, rtol=1e-10, atol=1e-12)
    if loss == "full" or split is not None:  # the engine's precomputed per-record products give the same
        products = ghost.input_products(x, split if loss == "decomposed" else None)
        given = ghost.PrivateBatch(batch.x, batch.y, batch.valid, batch.public, products)
        torch.testing.assert_close(ghost.private_norms(model, params, given), expected, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", sorted(MODELS))
@pytest.mark.parametrize(("loss", "label_free", "structure"), CASES)
def test_clipped_sum_equals_materialised_sum(name, loss, label_free, structure):
    """With and without clipping, with and without a gradient canary, with Poisson padding."""
    model = MODELS[name]
    params, x, y, public_inputs, split = _case(model, structure, seed=1)
    public = public_inputs if loss == "decomposed" else None
    generator = torch.Generator().manual_seed(2)
    valid = torch.rand(x.shape[:2], generator=generator) < 0.7
    mask = torch.zeros(x.shape[:2], dtype=torch.bool)
    mask[0, 2] = mask[2, 5] = mask[1, 4] = True
    valid[0, 2] = valid[2, 5] = True
    valid[1, 4] = False  # a canary slot that is padding contributes nothing
    canary = ghost.GradientOverride(mask, 3.0 * torch.randn(x.shape[0], model.n_parameters, generator=generator,
                                                              dtype=torch.float64))
    computed = _materialised(model, params, x, y, public, label_free)
    batch = ghost.PrivateBatch(x, y, valid, _term(public, label_free, split))
    for override in (None, canary):
        per_example = computed if override is None else torch.where(mask[..., None], canary.vectors[:, None, :],
                                                                    computed)
        for clip_norm in (0.5, None):
            weights = valid.double()
            if clip_norm is not None:
                weights = weights * torch.clamp(clip_norm / per_example.norm(dim=-1), max=1.0)
            expected = torch.einsum("rk,rkp->rp", weights, per_example)
            flat = ghost.clipped_private_sum(model, params, batch, clip_norm, override)
            torch.testing.assert_close(flat, expected, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", sorted(MODELS))
@pytest.mark.parametrize("label_free", [False, True])
def test_gradient_sum_equals_torch_func(name, label_free):
    """The public gradient Σ_k w_k ∇ℓ_pub(x'_k) by the same passes."""
    model = MODELS[name]
    params, x, y, _, _ = _case(model, seed=4)
    weights = torch.rand(x.shape[:2], generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    weights[0, :3] = 0.0

    def loss(p, xi, yi, wi):
        logits = model.forward(p, xi)
        return ((label_free_loss(logits) if label_free else example_loss(logits, yi)) * wi).sum()

    expected = engine.flatten(vmap(grad(loss))(params, x, y, weights), lead=1)
    torch.testing.assert_close(ghost.gradient_sum(model, params, x, y, weights, label_free), expected,
                               rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("structure", [s for s in STRUCTURES if s != "all"])
def test_float32_norms_are_as_accurate_as_materialised_ones(structure):
    """A protected part 1e-3 the size of the record, float32: the ghost norms are as close to the exact
    (float64) norms as the norms of materialised float32 gradients are. The direct form
    ‖δ‖²‖ã‖² + ‖δ'‖²‖ã'‖² − 2(δ·δ')(ã·ã') would subtract terms a million times larger than the result."""
    model = MODELS["mlp-multiclass"]
    params, x, y, public_inputs, split = _case(model, structure, r=2, k=64, seed=3)
    if split is None:
        public_inputs = x + 1e-3 * (public_inputs - x)
    else:  # records whose completed columns are close to the fill
        x[..., split.completed] = split.fill + 1e-3 * (x[..., split.completed] - split.fill)
    valid = torch.ones(x.shape[:2], dtype=torch.bool)
    exact = ghost.private_norms(model, params, ghost.PrivateBatch(x, y, valid, _term(public_inputs, False, split)))
    single = {name: value.float() for name, value in params.items()}
    x32, public32 = x.float(), public_inputs.float()
    float_split = None if split is None else ghost.InputSplit(split.shared, split.completed, split.fill.float())
    norms = ghost.private_norms(model, single, ghost.PrivateBatch(x32, y, valid, _term(public32, False, float_split)))
    materialised = _materialised(model, single, x32, y, public32, False).norm(dim=-1)
    ghost_error = (norms.double() - exact).abs().max()
    materialised_error = (materialised.double() - exact).abs().max()
    assert ghost_error <= 2 * materialised_error + 1e-7 * exact.max()


def test_identical_terms_give_zero_norm():
    """ℓ_pub evaluated on the record itself (the leaky-public recipe) cancels ℓ exactly."""
    model = MODELS["mlp-multiclass"]
    params, x, y, _, split = _case(model, "all")
    valid = torch.ones(x.shape[:2], dtype=torch.bool)
    for structure in (None, split):
        batch = ghost.PrivateBatch(x, y, valid, ghost.PublicTerm(x, split=structure))
        assert float(ghost.private_norms(model, params, batch).max()) == 0.0


@pytest.mark.parametrize("name", ["mask", "mean", "gaussian_pad", "impute", "label_dp"])
def test_input_split_describes_every_public_loss(name):
    """What the fast path assumes of each public loss holds: x' equals x on the shared columns and the fill
    row on the completed ones."""
    groups = (ColumnGroup("a", "numeric", 0, 1), ColumnGroup("b", "categorical", 1, 4),
              ColumnGroup("c", "numeric", 4, 5), ColumnGroup("d", "categorical", 5, 7))
    public_map = LabelOnlyPublicMap() if name == "label_dp" else ColumnSplit(groups, ("b", "c"))
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(30, 7, generator=generator)
    y = torch.randint(0, 2, (30,), generator=generator)
    population = EncodedData(x.numpy(), y.numpy(), groups, ("0", "1"), "label", "fp")
    loss = build_public_loss(name, public_map, population)
    view = public_map(x, y)
    noise = torch.randn(30, loss.pad_width, generator=generator) if loss.pad_width else None
    completed_inputs = loss.inputs(view, noise)
    assert ghost.input_split(loss, True, 7).completed.numel() == 0  # the leaky recipe: x' = x
    assert ghost.input_split(None, False, 7) is None
    split = ghost.input_split(loss, False, 7)
    if name in ("gaussian_pad", "impute"):  # per-record completions: no split, the inputs are passed
        assert split is None
        return
    assert sorted(split.shared.tolist() + split.completed.tolist()) == list(range(7))
    assert torch.equal(completed_inputs[:, split.shared], x[:, split.shared])
    assert torch.equal(completed_inputs[:, split.completed], split.fill.expand(30, -1))


def _split_problem(model: Model, mechanism: str, public_loss: str, n: int = 40, seed: int = 0,
                   steps: int = 5) -> TrainingProblem:
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(n, model.n_inputs, generator=generator)
    y = torch.randint(0, model.n_classes, (n,), generator=generator)
    groups = tuple(ColumnGroup(f"f{i}", "numeric", i, i + 1) for i in range(model.n_inputs))
    split = LabelOnlyPublicMap() if public_loss == "label_dp" else ColumnSplit(groups, ("f4", "f5"))
    population = EncodedData(x.numpy() + 1.0, y.numpy(), groups, tuple(map(str, range(model.n_classes))), "y", "")
    hyper = Hyperparameters(noise_multiplier=1.0, sample_rate=0.2, steps=steps, clip_norm=0.3,
                            public_batch_size=8, optimizer=OptimizerConfig(lr=0.3))
    return TrainingProblem(model, x, y, split, build_public_loss(public_loss, split, population),
                           MECHANISMS[mechanism].recipe, hyper)


def _canaries(model: Model, r: int, gradient: bool) -> Canaries:
    generator = torch.Generator().manual_seed(7)
    return Canaries(
        x=torch.randn(r, model.n_inputs, generator=generator),
        y=torch.randint(0, model.n_classes, (r,), generator=generator),
        in_private=torch.ones(r, dtype=torch.bool),
        in_public=torch.ones(r, dtype=torch.bool),
        private_gradient=torch.randn(r, model.n_parameters, generator=generator) if gradient else None,
        public_gradient=torch.randn(r, model.n_parameters, generator=generator) if gradient else None)


@pytest.mark.parametrize(("name", "mechanism", "public_loss", "canary"), [
    ("mlp-multiclass", "fdp_sgd", "mask", "gradient"),
    ("logistic-binary", "fdp_sgd", "gaussian_pad", "record"),
    ("mlp-binary", "fdp_sgd", "mean", "record"),
    ("logistic-multiclass", "fdp_sgd", "label_dp", "gradient"),
    ("mlp-binary", "dp_sgd", "mask", "gradient"),
    ("logistic-multiclass", "fdp_sgd_leaky_public", "mask", "record"),
    ("mlp-multiclass", "dp_sgd_no_clip", "mask", None),
])
def test_engine_fast_path_trains_the_same_models(monkeypatch, name, mechanism, public_loss, canary):
    """Whole training runs through the engine: the fast path and the torch.func path give the same models
    and the same released noisy sums (float32, 1e-5)."""
    model = MODELS[name]
    problem = _split_problem(model, mechanism, public_loss)
    canaries = None if canary is None else _canaries(model, 4, canary == "gradient")

    def run():
        (chunk,) = train_models(problem, seed=11, model_indices=range(4), canaries=canaries, record_iterates=True)
        return chunk

    fast = run()
    monkeypatch.setattr(ghost, "supports", lambda model: False)
    slow = run()
    assert fast.iterates.private_batch_sizes.sum() > 0
    assert canary is None or bool(fast.iterates.canary_private_sampled.any())
    torch.testing.assert_close(fast.iterates.noisy_private_sums, slow.iterates.noisy_private_sums,
                               rtol=1e-5, atol=1e-5)
    for key in fast.params:
        torch.testing.assert_close(fast.params[key], slow.params[key], rtol=1e-5, atol=1e-5)
