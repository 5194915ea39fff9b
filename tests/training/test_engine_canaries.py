"""Many canary records per model (:class:`fdp_audit.training.engine.Canaries` with K > 1): each canary is Poisson
sampled on its own, clipped on its own and summed like any record, on every private path, and costs memory."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy import stats

from fdp_audit.config import OptimizerConfig
from fdp_audit.data.encoding import ColumnGroup
from fdp_audit.data.features import ColumnSplit
from fdp_audit.mechanisms import MECHANISMS
from fdp_audit.training import engine, ghost, streams
from fdp_audit.training.engine import Canaries, Hyperparameters, TrainingProblem, train_models
from fdp_audit.training.models import Model, example_loss
from fdp_audit.training.public_losses import build_public_loss

N_INPUTS = 6
MODELS = {"logistic": Model("logistic", N_INPUTS, 2), "mlp": Model("mlp", N_INPUTS, 3, (5,))}


def _problem(model: Model, mechanism: str = "fdp_sgd", n: int = 30, rate: float = 0.3, steps: int = 5,
             noise: float = 0.0, clip: float = 0.5, scale: float = 5.0) -> TrainingProblem:
    """Random records at ``scale`` (most raw gradients above C), learning rate 0: every step sees the initial
    parameters, so its released sums depend only on its batches."""
    generator = torch.Generator().manual_seed(3)
    x = scale * torch.randn(n, model.n_inputs, generator=generator)
    y = torch.randint(0, model.n_classes, (n,), generator=generator)
    groups = tuple(ColumnGroup(f"f{i}", "numeric", i, i + 1) for i in range(model.n_inputs))
    public_map = ColumnSplit(groups, ("f4", "f5"))
    hyper = Hyperparameters(noise_multiplier=noise, sample_rate=rate, steps=steps, clip_norm=clip,
                            public_batch_size=8, optimizer=OptimizerConfig(lr=0.0))
    return TrainingProblem(model, x, y, public_map, build_public_loss("mask", public_map),
                           MECHANISMS[mechanism].recipe, hyper)


def _canaries(model: Model, r: int, k: int, in_private: torch.Tensor | None = None,
              in_public: torch.Tensor | None = None, gradient_scale: float | None = None,
              scale: float = 5.0) -> Canaries:
    generator = torch.Generator().manual_seed(11)
    gradients = None
    if gradient_scale is not None:
        gradients = gradient_scale * torch.randn(r, k, model.n_parameters, generator=generator)
    return Canaries(scale * torch.randn(r, k, model.n_inputs, generator=generator),
                    torch.randint(0, model.n_classes, (r, k), generator=generator),
                    torch.ones(r, k, dtype=torch.bool) if in_private is None else in_private,
                    torch.ones(r, k, dtype=torch.bool) if in_public is None else in_public,
                    gradients, None if gradients is None else torch.zeros_like(gradients))


def _iterates(problem: TrainingProblem, canaries: Canaries | None, indices=range(3)) -> engine.Iterates:
    (chunk,) = train_models(problem, 1, indices, canaries=canaries, record_iterates=True)
    return chunk.iterates


@pytest.fixture
def materialised(monkeypatch):
    """Switch the engine to its torch.func fallback."""
    monkeypatch.setattr(ghost, "supports", lambda model: False)


def test_each_canary_is_sampled_alone_at_the_poisson_rate():
    """300 models × 6 canaries (canary 5 outside the private population) over 40 steps at q = 0.1. A canary in
    the private population is in a step's batch with probability q, independently of the other canaries and of
    the steps: its inclusion count over the steps is Binomial(40, q), and the number of a step's canaries in the
    batch is Binomial(5, q). Each chi-square goodness-of-fit test rejects a correct sampler with probability
    1e-3 (2e-3 together); the seed is fixed, so the outcome is deterministic. The excluded canary is never in
    a batch, and no canary is in a batch twice."""
    model, r, k, steps, rate = MODELS["logistic"], 300, 6, 40, 0.1
    problem = _problem(model, n=20, rate=rate, steps=steps)
    in_private = torch.ones(r, k, dtype=torch.bool)
    in_private[:, -1] = False
    step = engine._Step(problem, streams.model_keys(5, range(r)), _canaries(model, r, k, in_private),
                        torch.device("cpu"))
    params = model.init(step.keys)
    included = torch.zeros(steps, r, k, dtype=torch.long)
    for t in range(steps):
        _, batch = step.private_part(params, t)
        included[t].scatter_add_(1, batch["canary_ids"], batch["is_canary"].long())
    assert int(included.max()) <= 1
    assert int(included[..., -1].sum()) == 0

    def fits_binomial(counts: np.ndarray, trials: int) -> bool:
        observed = np.bincount(counts, minlength=trials + 1).astype(float)
        expected = stats.binom.pmf(np.arange(trials + 1), trials, rate) * counts.size
        lo, hi = np.argmax(expected >= 5), trials - np.argmax(expected[::-1] >= 5)  # pool tails to ≥ 5 expected
        cells_observed = np.concatenate([[observed[:lo + 1].sum()], observed[lo + 1:hi], [observed[hi:].sum()]])
        cells_expected = np.concatenate([[expected[:lo + 1].sum()], expected[lo + 1:hi], [expected[hi:].sum()]])
        cells_expected *= cells_observed.sum() / cells_expected.sum()
        return stats.chisquare(cells_observed, cells_expected).pvalue > 1e-3

    assert fits_binomial(included[..., :-1].sum(dim=0).flatten().numpy(), steps)
    assert fits_binomial(included[..., :-1].sum(dim=2).flatten().numpy(), k - 1)


@pytest.mark.parametrize("name", ["logistic", "mlp", "materialised"])
def test_private_sum_with_many_canaries_equals_an_autograd_loop_over_the_batch(request, name):
    """Noise-free private sums of a step with 4 record canaries per model (one outside the private population),
    on the GLM, ghost and torch.func paths, against the sum over the sampled batch, canaries included, of
    clip_C(∇ℓ_priv) computed by torch.autograd one record at a time from the canary records themselves."""
    if name == "materialised":
        request.getfixturevalue("materialised")
    model = MODELS["mlp" if name == "mlp" else "logistic"]
    problem, r, k = _problem(model, rate=0.4), 3, 4
    in_private = torch.ones(r, k, dtype=torch.bool)
    in_private[1, 2] = False
    canaries = _canaries(model, r, k, in_private)
    step = engine._Step(problem, streams.model_keys(2, range(r)), canaries, torch.device("cpu"))
    params = model.init(step.keys)
    loss_map, clip = problem.public_loss, problem.hyper.clip_norm
    canaries_seen = 0
    for t in range(3):
        flat, batch = step.private_part(params, t)
        for m in range(r):
            leaves = {key: value[m].clone().requires_grad_(True) for key, value in params.items()}
            expected = torch.zeros(model.n_parameters)
            for b in torch.nonzero(batch["valid"][m]).flatten().tolist():
                if batch["is_canary"][m, b]:
                    canary = int(batch["canary_ids"][m, b])
                    assert bool(in_private[m, canary])
                    x, y = canaries.x[m, canary], canaries.y[m, canary]
                    canaries_seen += 1
                else:
                    x, y = problem.x[batch["rows"][m, b]], problem.y[batch["rows"][m, b]]
                public = loss_map.inputs(problem.public_map(x[None], y[None]))[0]
                loss = example_loss(model.forward(leaves, x), y) - example_loss(model.forward(leaves, public), y)
                gradient = torch.cat([g.flatten() for g in torch.autograd.grad(loss, list(leaves.values()))])
                expected += gradient * min(1.0, clip / float(gradient.norm()))
            torch.testing.assert_close(flat[m], expected, rtol=1e-5, atol=1e-5)
    assert canaries_seen >= 5


@pytest.mark.parametrize("name", ["logistic", "mlp", "materialised"])
def test_every_gradient_canary_is_clipped_on_its_own(request, name):
    """K = 5 gradient canaries per model with raw gradients of norm ~ 40·C: a step's private sum minus the same
    step's sum without them (the records of S are sampled the same with or without canaries) is
    Σ over the sampled canaries of C·g_k/‖g_k‖, so each one contributes exactly norm C."""
    if name == "materialised":
        request.getfixturevalue("materialised")
    model = MODELS["mlp" if name == "mlp" else "logistic"]
    problem, r, k = _problem(model, rate=0.5), 4, 5
    present = _canaries(model, r, k, gradient_scale=10.0)
    absent = Canaries(present.x, present.y, torch.zeros(r, k, dtype=torch.bool), present.in_public,
                      present.private_gradient, present.public_gradient)
    keys = streams.model_keys(4, range(r))
    with_canaries = engine._Step(problem, keys, present, torch.device("cpu"))
    without = engine._Step(problem, keys, absent, torch.device("cpu"))
    params = model.init(keys)
    clip = problem.hyper.clip_norm
    unit = present.private_gradient / present.private_gradient.norm(dim=-1, keepdim=True)
    sampled = 0
    for t in range(4):
        flat, batch = with_canaries.private_part(params, t)
        reference, _ = without.private_part(params, t)
        uses = torch.zeros(r, k).scatter_add_(1, batch["canary_ids"], batch["is_canary"].float())
        sampled += int(uses.sum())
        torch.testing.assert_close(flat - reference, clip * torch.einsum("rk,rkp->rp", uses, unit),
                                   rtol=1e-5, atol=1e-5)
    assert sampled >= 10


@pytest.mark.parametrize("name", ["logistic", "mlp"])
def test_canaries_are_records_of_the_data_set(name):
    """A model's K canaries, in both populations, are K more records: its released noisy private sums and public
    gradients equal those of the model trained alone, without canaries, on S followed by its canaries (the slots
    n … n+K-1 and the streams are the same)."""
    model, k = MODELS[name], 3
    problem = _problem(model, noise=1.0, steps=6)
    canaries = _canaries(model, 3, k)
    together = _iterates(problem, canaries)
    for m in range(3):
        extended = TrainingProblem(problem.model, torch.cat([problem.x, canaries.x[m]]),
                                   torch.cat([problem.y, canaries.y[m]]), problem.public_map, problem.public_loss,
                                   problem.recipe, problem.hyper)
        alone = _iterates(extended, None, [m])
        torch.testing.assert_close(together.noisy_private_sums[m], alone.noisy_private_sums[0], rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(together.public_gradients[m], alone.public_gradients[0], rtol=1e-5, atol=1e-5)
        assert torch.equal(together.private_batch_sizes[m], alone.private_batch_sizes[0])


def test_a_public_gradient_canary_enters_as_often_as_its_slot_is_drawn():
    """3 gradient canaries per model of which only canary 1 is in the public population: the public gradient
    with canaries minus the one with silent canaries is count·g₁/m' on every step, count the draws of the
    canary slot."""
    model, r, k = MODELS["logistic"], 4, 3
    problem = _problem(model, steps=10)
    in_public = torch.zeros(r, k, dtype=torch.bool)
    in_public[:, 1] = True
    loud = _canaries(model, r, k, in_public=in_public, gradient_scale=1.0)
    loud = Canaries(loud.x, loud.y, loud.in_private, loud.in_public, loud.private_gradient,
                    torch.randn(r, k, model.n_parameters, generator=torch.Generator().manual_seed(2)))
    silent = Canaries(loud.x, loud.y, loud.in_private, loud.in_public, loud.private_gradient,
                      torch.zeros_like(loud.public_gradient))
    heard, quiet = _iterates(problem, loud, range(r)), _iterates(problem, silent, range(r))
    assert int(heard.canary_public_counts.sum()) >= 5
    expected = heard.canary_public_counts[..., None] * loud.public_gradient[:, None, 1] / 8
    torch.testing.assert_close(heard.public_gradients - quiet.public_gradients, expected, rtol=1e-5, atol=1e-6)


def test_one_canary_with_or_without_its_axis_trains_the_same_models():
    """A set of K = 1 given as ``[R, 1, ...]`` trains bit for bit the models of the same set given as ``[R, ...]``
    (the shape every caller used before many canaries per model)."""
    model = MODELS["mlp"]
    problem = _problem(model, noise=1.0, steps=6)
    stacked = _canaries(model, 3, 1, gradient_scale=1.0)
    flat = Canaries(*(t[:, 0] for t in (stacked.x, stacked.y, stacked.in_private, stacked.in_public,
                                        stacked.private_gradient, stacked.public_gradient)))
    assert flat.count == stacked.count == 1
    one, other = _iterates(problem, stacked), _iterates(problem, flat)
    for field in ("noisy_private_sums", "public_gradients", "canary_public_counts", "canary_private_sampled"):
        assert torch.equal(getattr(one, field), getattr(other, field))


@pytest.mark.parametrize("name", ["logistic", "mlp", "materialised"])
def test_memory_estimate_grows_with_the_canaries(request, name):
    """Each canary adds at least its record row and its two gradient vectors (float32) to a model's share."""
    if name == "materialised":
        request.getfixturevalue("materialised")
    model = MODELS["mlp" if name == "mlp" else "logistic"]
    problem = _problem(model, n=200)
    sizes = [engine.bytes_per_model(problem, False, canaries=k) for k in (0, 1, 8, 64)]
    assert sizes[0] == engine.bytes_per_model(problem, False)
    for (k0, smaller), (k1, larger) in zip(zip((0, 1, 8), sizes), zip((1, 8, 64), sizes[1:]), strict=True):
        assert larger - smaller >= 4 * (k1 - k0) * (N_INPUTS + 2 * model.n_parameters)
