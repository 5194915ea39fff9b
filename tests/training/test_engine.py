"""The batched training engine (docs/training.md): per-example gradients, clipping, Poisson sampling, stream
independence, noise scale, the documented behaviour of each faulty recipe, batching and reproducibility."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
import torch
from scipy import stats

from fdp_audit.config import OptimizerConfig
from fdp_audit.data.encoding import ColumnGroup
from fdp_audit.data.features import ColumnSplit
from fdp_audit.data.image_psi import BlurPublicMap
from fdp_audit.errors import BadInputError
from fdp_audit.mechanisms import MECHANISMS
from fdp_audit.training import engine, ghost, streams
from fdp_audit.training.cnn import cnn_model
from fdp_audit.training.engine import Canaries, Hyperparameters, TrainingProblem, train_models
from fdp_audit.training.models import Model, example_loss
from fdp_audit.training.public_losses import build_public_loss

N_INPUTS = 6
PROTECTED = ("f4", "f5")
PROTECTED_COLUMNS = [4, 5]


def _problem(mechanism: str = "fdp_sgd", model: Model | None = None, n: int = 40, rate: float = 0.2,
             steps: int = 6, lr: float = 0.3, noise: float = 1.0, clip: float = 0.5, public_batch: int = 8,
             scale: float = 1.0, seed: int = 0) -> TrainingProblem:
    """A small problem on random data; ``scale`` multiplies the inputs (large inputs: gradients above C)."""
    model = model or Model("logistic", N_INPUTS, 2)
    generator = torch.Generator().manual_seed(seed)
    x = scale * torch.randn(n, model.n_inputs, generator=generator)
    y = torch.randint(0, model.n_classes, (n,), generator=generator)
    if model.kind == "cnn":
        public_map, public_loss = BlurPublicMap(model.image_side, model.image_side), "public_image"
    else:
        groups = tuple(ColumnGroup(f"f{i}", "numeric", i, i + 1) for i in range(model.n_inputs))
        public_map, public_loss = ColumnSplit(groups, PROTECTED), "mask"
    hyper = Hyperparameters(noise_multiplier=noise, sample_rate=rate, steps=steps, clip_norm=clip,
                            public_batch_size=public_batch, optimizer=OptimizerConfig(lr=lr))
    return TrainingProblem(model, x, y, public_map, build_public_loss(public_loss, public_map),
                           MECHANISMS[mechanism].recipe, hyper)


def _train(problem: TrainingProblem, models: int = 4, canaries: Canaries | None = None, seed: int = 1,
           indices=None) -> engine.ChunkResult:
    (chunk,) = train_models(problem, seed, range(models) if indices is None else indices, canaries=canaries,
                            record_iterates=True)
    return chunk


def _canaries(model: Model, r: int, gradient: bool = False, seed: int = 7) -> Canaries:
    generator = torch.Generator().manual_seed(seed)
    return Canaries(
        x=torch.randn(r, model.n_inputs, generator=generator),
        y=torch.randint(0, model.n_classes, (r,), generator=generator),
        in_private=torch.ones(r, dtype=torch.bool), in_public=torch.ones(r, dtype=torch.bool),
        private_gradient=torch.randn(r, model.n_parameters, generator=generator) if gradient else None,
        public_gradient=torch.randn(r, model.n_parameters, generator=generator) if gradient else None)


@pytest.fixture
def materialised(monkeypatch):
    """Switch the engine to its torch.func fallback (every model then takes the path of non-linear layers)."""
    monkeypatch.setattr(ghost, "supports", lambda model: False)


# -- per-example gradients and clipping -----------------------------------------------------------------


@pytest.mark.parametrize("model", [Model("logistic", N_INPUTS, 2), Model("mlp", N_INPUTS, 3, (5,)),
                                   cnn_model(64, 3, ())], ids=["logistic", "mlp", "cnn"])
def test_per_example_gradients_match_an_autograd_loop(model):
    """The engine's per-example gradients of ℓ_priv = ℓ − ℓ_pub∘Ψ (vmap over models of vmap over examples)
    and, for linear stacks, the ghost norms, against torch.autograd.grad one example at a time."""
    problem = _problem(model=model)
    keys = streams.model_keys(0, range(2))
    step = engine._Step(problem, keys, None, torch.device("cpu"))
    params = {k: v.double() + 0.1 * torch.randn_like(v, dtype=torch.float64) for k, v in model.init(keys).items()}
    idx = torch.tensor([[0, 3, 5], [1, 2, 7]])
    x, y = problem.x[idx].double(), problem.y[idx]
    public_inputs = step._public_inputs(idx, 0, streams.Stream.PRIVATE_PAD).double()
    per_example = engine.flatten(step.per_example_grad(params, x, y, public_inputs), lead=2)
    for r in range(2):
        leaves = {k: v[r].clone().requires_grad_(True) for k, v in params.items()}
        for k in range(3):
            loss = (example_loss(model.forward(leaves, x[r, k]), y[r, k])
                    - example_loss(model.forward(leaves, public_inputs[r, k]), y[r, k]))
            expected = torch.cat([g.flatten() for g in torch.autograd.grad(loss, list(leaves.values()))])
            torch.testing.assert_close(per_example[r, k], expected, rtol=1e-6, atol=1e-6)
    if ghost.supports(model):
        batch = ghost.PrivateBatch(x, y, torch.ones_like(idx, dtype=torch.bool), ghost.PublicTerm(public_inputs))
        torch.testing.assert_close(ghost.private_norms(model, params, batch), per_example.norm(dim=-1),
                                   rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("path", ["fast", "materialised"])
@pytest.mark.parametrize("mechanism", ["dp_sgd", "fdp_sgd"])
def test_clipping_bounds_every_private_gradient_by_c(request, path, mechanism):
    """Noise-free runs at learning rate 0 on large inputs (raw private gradients far above C): every
    released sum of a one-record batch is one clipped gradient, of norm exactly C, and no sum exceeds
    |B|·C. The unclipped faulty recipe exceeds C on the same batches."""
    if path == "materialised":
        request.getfixturevalue("materialised")
    clip = 0.5
    iterates = _train(_problem(mechanism, rate=0.05, steps=30, lr=0.0, noise=0.0, clip=clip, scale=20.0),
                      models=8).iterates
    sizes, norms = iterates.private_batch_sizes, iterates.noisy_private_sums.norm(dim=-1)
    single = sizes == 1
    assert int(single.sum()) >= 20
    torch.testing.assert_close(norms[single], torch.full_like(norms[single], clip), rtol=1e-5, atol=0.0)
    assert bool((norms <= clip * sizes * (1 + 1e-5)).all())
    unclipped = _train(_problem("dp_sgd_no_clip", rate=0.05, steps=30, lr=0.0, noise=0.0, clip=clip, scale=20.0),
                       models=8).iterates
    assert bool((unclipped.noisy_private_sums.norm(dim=-1)[single] > 2 * clip).all())


# -- sampling and streams ------------------------------------------------------------------------------


def test_private_batch_sizes_are_binomial():
    """Chi-square goodness of fit of 3,200 recorded private batch sizes (160 models × 20 steps) to
    Binomial(n = 50, p = 0.1). Under a correct sampler the test rejects with probability 1e-3; the seed is
    fixed, so the outcome is deterministic."""
    n, rate = 50, 0.1
    sizes = _train(_problem("dp_sgd", n=n, rate=rate, steps=20, lr=0.0), models=160).iterates.private_batch_sizes
    observed = np.bincount(sizes.flatten().numpy(), minlength=n + 1).astype(float)
    expected = stats.binom.pmf(np.arange(n + 1), n, rate) * sizes.numel()
    # Pool the tails so that every cell expects at least 5.
    lo, hi = np.argmax(expected >= 5), n - np.argmax(expected[::-1] >= 5)
    cells_observed = np.concatenate([[observed[:lo + 1].sum()], observed[lo + 1:hi], [observed[hi:].sum()]])
    cells_expected = np.concatenate([[expected[:lo + 1].sum()], expected[lo + 1:hi], [expected[hi:].sum()]])
    cells_expected *= cells_observed.sum() / cells_expected.sum()
    assert stats.chisquare(cells_observed, cells_expected).pvalue > 1e-3


def test_private_and_public_streams_are_independent():
    """Stream A (private Poisson) and stream B (public batches) are separate hashes: changing the public
    batch size leaves every private batch unchanged, changing the private rate leaves every public batch
    unchanged, and the two streams' uniforms are uncorrelated."""
    model = Model("logistic", N_INPUTS, 2)
    canaries = _canaries(model, 6)
    small = _train(_problem(public_batch=8), models=6, canaries=canaries).iterates
    large = _train(_problem(public_batch=32), models=6, canaries=canaries).iterates
    assert torch.equal(small.private_batch_sizes, large.private_batch_sizes)
    assert torch.equal(small.canary_private_sampled, large.canary_private_sampled)
    other_rate = _train(_problem(rate=0.35), models=6, canaries=canaries).iterates
    assert not torch.equal(other_rate.private_batch_sizes, small.private_batch_sizes)
    assert torch.equal(other_rate.canary_public_counts, small.canary_public_counts)

    keys = streams.model_keys(3, range(4))
    idx, valid = streams.poisson_sample(keys, 5, 100, 0.3)
    streams.uniform_indices(keys, 5, streams.Stream.PUBLIC_SAMPLE, 64, torch.full((4,), 100))
    again, valid_again = streams.poisson_sample(keys, 5, 100, 0.3)
    assert torch.equal(idx, again) and torch.equal(valid, valid_again)
    private = streams.uniform(keys, 5, streams.Stream.PRIVATE_SAMPLE, 5000).flatten().numpy()
    public = streams.uniform(keys, 5, streams.Stream.PUBLIC_SAMPLE, 5000).flatten().numpy()
    assert abs(np.corrcoef(private, public)[0, 1]) < 4 / math.sqrt(private.size)


# -- noise -------------------------------------------------------------------------------------------


def _noise(mechanism: str, noise: float) -> tuple[torch.Tensor, float]:
    """The noise of g_priv = (clipped sum + N(0, σ²I)) / m, isolated: at learning rate 0 the parameters never
    move, so two runs that differ only in z release the same clipped sums, and their difference is the noise
    (the other run's noise is 1e-9 of it). Returns the noise of g_priv and the expected batch size m."""
    problem = _problem(mechanism, n=60, rate=0.1, steps=25, lr=0.0, noise=noise)
    quiet = _problem(mechanism, n=60, rate=0.1, steps=25, lr=0.0, noise=noise * 1e-9)
    m = min(1.0, 0.1 * MECHANISMS[mechanism].recipe.rate_factor) * 60
    loud_sums = _train(problem, models=40).iterates.noisy_private_sums
    return (loud_sums - _train(quiet, models=40).iterates.noisy_private_sums) / m, m


@pytest.mark.parametrize("mechanism", ["dp_sgd", "fdp_sgd"])
def test_noise_std_is_z_c_over_m(mechanism):
    """25 steps × 40 models × 7 parameters = 7,000 draws: the standard deviation is within 3 % of z·C/m
    (its standard error is 0.85 %)."""
    g_noise, m = _noise(mechanism, 1.3)
    assert abs(float(g_noise.std()) / (1.3 * 0.5 / m) - 1) < 0.03
    assert abs(float(g_noise.mean())) < 4 * 1.3 * 0.5 / m / math.sqrt(g_noise.numel())


def test_half_noise_recipe_halves_the_noise():
    g_noise, m = _noise("dp_sgd_half_noise", 1.3)
    assert abs(float(g_noise.std()) / (0.5 * 1.3 * 0.5 / m) - 1) < 0.03


# -- the faulty recipes ----------------------------------------------------------------------------------


def test_shared_batch_recipe_uses_the_canary_publicly_exactly_when_it_is_privately_sampled():
    """Proposition 3: with the shared batch the canary's public gradient enters g_pub on exactly the steps
    its private gradient was sampled; with Algorithm 1 it follows the independent stream B instead."""
    model = Model("logistic", N_INPUTS, 2)
    canaries = _canaries(model, 6, gradient=True)
    silent = Canaries(canaries.x, canaries.y, canaries.in_private, canaries.in_public, canaries.private_gradient,
                      torch.zeros_like(canaries.public_gradient))
    for mechanism in ("fdp_sgd_shared_batch", "fdp_sgd"):
        problem = _problem(mechanism, rate=0.2, steps=30, lr=0.0)
        loud, quiet = _train(problem, 6, canaries).iterates, _train(problem, 6, silent).iterates
        used = (loud.public_gradients - quiet.public_gradients).abs().amax(dim=-1) > 0
        if mechanism == "fdp_sgd_shared_batch":
            assert torch.equal(used, loud.canary_private_sampled)
        else:
            assert torch.equal(used, loud.canary_public_counts > 0)
            assert not torch.equal(used, loud.canary_private_sampled)


def test_leaky_public_recipe_reads_the_protected_value():
    """The canary's public gradient changes with its protected columns under the leaky recipe, never under
    Algorithm 1 (learning rate 0: only the canary's own contribution can differ)."""
    model = Model("logistic", N_INPUTS, 2)
    canaries = _canaries(model, 6)
    other_x = canaries.x.clone()
    other_x[:, PROTECTED_COLUMNS] += 3.0
    changed = Canaries(other_x, canaries.y, canaries.in_private, canaries.in_public)
    for mechanism, leaks in (("fdp_sgd_leaky_public", True), ("fdp_sgd", False)):
        problem = _problem(mechanism, rate=0.2, steps=20, lr=0.0)
        a, b = _train(problem, 6, canaries).iterates, _train(problem, 6, changed).iterates
        differs = (a.public_gradients - b.public_gradients).abs().amax(dim=-1) > 1e-7
        if leaks:
            assert bool((a.canary_public_counts > 0).any())
            assert torch.equal(differs, a.canary_public_counts > 0)
        else:
            assert not bool(differs.any())


def test_wrong_rate_recipe_samples_four_times_as_many():
    n, rate = 200, 0.05
    sizes = _train(_problem("dp_sgd_wrong_rate", n=n, rate=rate, steps=20, lr=0.0), models=20
                   ).iterates.private_batch_sizes.double()
    expected = 4 * rate * n
    assert abs(float(sizes.mean()) - expected) < 4 * math.sqrt(expected * (1 - 4 * rate) / sizes.numel())


# -- batching and reproducibility ----------------------------------------------------------------------


@pytest.mark.parametrize(("model", "public_loss"), [
    (Model("logistic", N_INPUTS, 2), "mask"), (Model("logistic", N_INPUTS, 2), "gaussian_pad"),
    (Model("mlp", N_INPUTS, 3, (5,)), "mask"), (cnn_model(64, 3, ()), "public_image")],
    ids=["logistic-glm", "logistic-gaussian-pad-ghost", "mlp-ghost", "cnn-materialised"])
def test_model_in_a_batch_equals_the_model_alone(model, public_loss):
    """Model k of a batch equals model k trained alone (1e-5): its streams are keyed by (seed, k), and its
    padding noise (gaussian_pad) is drawn per position, whatever the batch width the other models need."""
    problem = _problem(model=model, steps=4)
    if public_loss == "gaussian_pad":
        problem = replace(problem, public_loss=build_public_loss("gaussian_pad", problem.public_map))
    canaries = _canaries(model, 4, gradient=True)
    batch = _train(problem, models=4, canaries=canaries)
    alone = _train(problem, canaries=canaries.take(torch.tensor([2])), indices=[2])
    for name in batch.params:
        torch.testing.assert_close(alone.params[name][0], batch.params[name][2], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(alone.iterates.noisy_private_sums[0], batch.iterates.noisy_private_sums[2],
                               rtol=1e-5, atol=1e-5)
    assert torch.equal(alone.iterates.private_batch_sizes[0], batch.iterates.private_batch_sizes[2])


def test_seeded_run_is_bit_for_bit_reproducible():
    problem = _problem(model=Model("mlp", N_INPUTS, 3, (5,)))
    canaries = _canaries(problem.model, 4)
    first, second = _train(problem, canaries=canaries), _train(problem, canaries=canaries)
    for name in first.params:
        assert torch.equal(first.params[name], second.params[name])
    assert torch.equal(first.iterates.noisy_private_sums, second.iterates.noisy_private_sums)
    assert torch.equal(first.iterates.public_gradients, second.iterates.public_gradients)


@pytest.mark.parametrize("mechanism", ["dp_sgd", "fdp_sgd", "fdp_sgd_shared_batch"])
def test_steps_where_no_model_samples_anyone(mechanism):
    """At a tiny sample rate most steps have an empty private batch in every model (batch width 0): the
    update is the noise alone, and the shared-batch public gradient is zero."""
    problem = _problem(mechanism, rate=1e-3, steps=20)
    chunk = _train(problem, models=3)
    sizes = chunk.iterates.private_batch_sizes
    assert (sizes.sum(dim=0) == 0).any()  # some step sampled no one in any model
    for value in chunk.params.values():
        assert torch.isfinite(value).all()
    alone = _train(problem, indices=[1], models=1)
    for name in chunk.params:
        torch.testing.assert_close(alone.params[name][0], chunk.params[name][1], rtol=1e-5, atol=1e-5)


# -- a canary block of many gradient canaries -----------------------------------------------------------------

@pytest.mark.parametrize("model", [Model("logistic", N_INPUTS, 2), Model("mlp", N_INPUTS, 3, (5,)),
                                   cnn_model(64, 3, ())], ids=["logistic", "mlp", "cnn"])
def test_canary_block_leaves_the_model_alone_and_matches_a_reference(model):
    """M gradient canaries on a block: the model's coordinates equal those trained without the block (same
    streams), and the block equals the reference Σ_t of clipped sampled canary values plus noise, rebuilt here
    from the Poisson sampler over n + M slots and the noise stream's tail. Every private path (table, ghost,
    torch.func) takes the block; the torch.func path once differentiated the block too and doubled it."""
    problem = _problem("dp_sgd", model=model, steps=8, rate=0.3)
    hyper, n, m = problem.hyper, problem.n, 50
    generator = torch.Generator().manual_seed(3)
    values = 3.0 * torch.where(torch.rand(1, m, generator=generator) < 0.5, -1.0, 1.0)  # raw 6C: clipped to C
    present = torch.rand(1, m, generator=generator) < 0.5
    block = engine.CanaryBlock(values, torch.ones(1, m), present, m)
    (plain,) = train_models(problem, 5, [0])
    (with_block,) = train_models(problem, 5, [0], canary_block=block)
    for name, value in plain.params.items():
        torch.testing.assert_close(with_block.params[name], value, atol=1e-5, rtol=1e-5)
    keys = streams.model_keys(5, torch.tensor([0]))
    p_model = problem.model.n_parameters
    sigma = hyper.noise_multiplier * hyper.clip_norm
    expected = torch.zeros(block.size, dtype=torch.float64)
    hits = torch.zeros(m, dtype=torch.float64)
    for t in range(hyper.steps):
        idx, valid = streams.poisson_sample(keys, t, n + m, hyper.sample_rate)
        slots = idx[0][valid[0]]
        canaries = slots[slots >= n] - n
        step = torch.zeros(block.size, dtype=torch.float64)
        step[canaries] = (values[0, canaries].sign() * hyper.clip_norm * present[0, canaries]).double()
        hits += step[:m].abs()
        step += sigma * streams.normal(keys, t, streams.Stream.NOISE, p_model + block.size)[0, p_model:].double()
        expected -= hyper.optimizer.lr * hyper.private_weight * step / (hyper.sample_rate * n)
    assert hits.sum() >= 5  # present canaries were sampled and moved their coordinates
    torch.testing.assert_close(with_block.params[engine.BLOCK_KEY][0].double(), expected, atol=1e-5, rtol=1e-5)


def test_canary_block_public_values_follow_the_public_batch():
    """fdp_sgd: a canary's public value reaches its public coordinate exactly when stream B draws its slot; with
    the faulty shared batch, exactly when it is in the private Poisson batch."""
    for mechanism in ("fdp_sgd", "fdp_sgd_shared_batch"):
        problem = _problem(mechanism, steps=1, noise=1e-6)
        n, m = problem.n, 30
        block = engine.CanaryBlock(torch.zeros(1, m), torch.ones(1, m), torch.ones(1, m, dtype=torch.bool), 5)
        (chunk,) = train_models(problem, 2, [0], canary_block=block)
        public = -chunk.params[engine.BLOCK_KEY][0, m:2 * m] / problem.hyper.optimizer.lr
        keys = streams.model_keys(2, torch.tensor([0]))
        if mechanism == "fdp_sgd":
            idx = streams.uniform_indices(keys, 0, streams.Stream.PUBLIC_SAMPLE, problem.hyper.public_batch_size,
                                          torch.tensor([n + m]))[0]
            hits = torch.bincount(idx[idx >= n] - n, minlength=m).float() / problem.hyper.public_batch_size
        else:
            idx, valid = streams.poisson_sample(keys, 0, n + m, problem.hyper.sample_rate)
            slots = idx[0][valid[0]]
            hits = torch.bincount(slots[slots >= n] - n, minlength=m).float() / (problem.hyper.sample_rate * n)
        torch.testing.assert_close(public, hits, atol=1e-4, rtol=1e-4)


# -- divergence -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("model", [Model("logistic", N_INPUTS, 2), Model("mlp", N_INPUTS, 3, (5,)),
                                   cnn_model(64, 3, ())], ids=["glm", "ghost", "materialised"])
@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_diverged_training_is_bad_input_naming_the_learning_rate(model, optimizer):
    """The reproduced defect: lr = 1e308 trained to NaN weights that were then attacked, judged and saved.
    Every private path (GLM table, ghost norms, torch.func) and both optimisers: one model of a chunk with
    non-finite weights stops the run with the field to change."""
    problem = _problem("fdp_sgd", model=model, steps=4, lr=1e308)
    problem = replace(problem, hyper=replace(problem.hyper, optimizer=OptimizerConfig(name=optimizer, lr=1e308)))
    with pytest.raises(BadInputError, match=r"mechanism.optimizer.lr: training diverged: \d+ of 3 models"):
        list(train_models(problem, 1, range(3), record_iterates=model.kind != "cnn"))
    healthy = _problem("fdp_sgd", model=model, steps=4)
    (chunk,) = train_models(healthy, 1, range(3))  # the check passes a finite run untouched
    assert all(bool(torch.isfinite(v).all()) for v in chunk.params.values())


def test_training_starts_from_the_given_initial_parameters() -> None:
    """A column no record has a value in receives no data gradient, so two trainings from the same streams whose
    starting points differ only on that column's weight end exactly that far apart there, and equal elsewhere;
    without a given start, logistic regression starts from zeros."""
    problem = _problem("dp_sgd", n=30)
    problem = replace(problem, x=torch.cat([problem.x, torch.zeros(problem.n, 1)], dim=1),
                      model=Model("logistic", N_INPUTS + 1, 2))
    zeros = {name: torch.zeros(shape) for name, shape in problem.model.shapes().items()}
    shifted = {**zeros, "layer0.weight": zeros["layer0.weight"].clone()}
    shifted["layer0.weight"][0, N_INPUTS] = -3.0
    default = _train(problem).params
    from_zeros = _train(replace(problem, initial_params=zeros)).params
    from_shifted = _train(replace(problem, initial_params=shifted)).params
    for name in default:
        assert torch.equal(default[name], from_zeros[name])
    difference = from_shifted["layer0.weight"] - from_zeros["layer0.weight"]
    assert torch.allclose(difference[:, 0, N_INPUTS], torch.full((4,), -3.0), atol=1e-5)
    difference[:, 0, N_INPUTS] = 0.0
    assert torch.allclose(difference, torch.zeros_like(difference), atol=1e-6)
    assert torch.allclose(from_shifted["layer0.bias"], from_zeros["layer0.bias"], atol=1e-6)


def test_a_cnn_steps_work_counts_its_multiply_adds_not_its_parameters(monkeypatch):
    """threads_for gets a step's multiply-adds: for a CNN, rows × the convolutions' and classifier's multiply-adds
    per example (a 28×28 CNN's 1.03 M), not rows × its 20 k parameters, which kept CNN steps on one thread."""
    model = cnn_model(784, 10, (16, 32))
    generator = torch.Generator().manual_seed(0)
    x, y = torch.rand(40, 784, generator=generator), torch.randint(0, 10, (40,), generator=generator)
    psi = BlurPublicMap(28, 28, sigma=1.0)
    hyper = Hyperparameters(noise_multiplier=1.0, sample_rate=0.25, steps=1, clip_norm=1.0, public_batch_size=8,
                            optimizer=OptimizerConfig(lr=0.1))
    problem = TrainingProblem(model, x, y, psi, build_public_loss("public_image", psi), MECHANISMS["fdp_sgd"].recipe,
                              hyper)
    works = []
    chosen = engine.threads_for
    monkeypatch.setattr(engine, "threads_for", lambda work: works.append(work) or chosen(work))
    list(train_models(problem, seed=0, model_indices=[0, 1]))
    per_example = 784 * 16 * 9 + 196 * 32 * 144 + 1568 * 10
    assert works == [int(2 * (40 * 0.25 + 8) * per_example)]
