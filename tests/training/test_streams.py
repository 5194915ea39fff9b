"""Stream independence (docs/training.md step 3): the public batch stream B is independent of the private
Poisson stream A and of the noise. Re-seeding one stream (every draw of it hashed from a different key)
must leave every draw of the others bit for bit unchanged."""

from __future__ import annotations

import pytest
import torch

from fdp_audit.config import OptimizerConfig
from fdp_audit.data.encoding import ColumnGroup
from fdp_audit.data.features import ColumnSplit
from fdp_audit.mechanisms import MECHANISMS
from fdp_audit.training import streams
from fdp_audit.training.engine import Canaries, Hyperparameters, Iterates, TrainingProblem, train_models
from fdp_audit.training.models import Model
from fdp_audit.training.public_losses import build_public_loss

PRIVATE = {streams.Stream.PRIVATE_SAMPLE, streams.Stream.NOISE}
PUBLIC = {streams.Stream.PUBLIC_SAMPLE}


def _reseed(monkeypatch: pytest.MonkeyPatch, reseeded: set[streams.Stream]) -> None:
    """Give the streams in ``reseeded`` another seed: their counter hash sees every model key XOR a salt."""
    words = streams._words

    def reseeded_words(keys, step, stream, count, device):
        return words(keys ^ 0x5EED if stream in reseeded else keys, step, stream, count, device)

    monkeypatch.setattr(streams, "_words", reseeded_words)


def _run(models: int = 6, n: int = 40, d: int = 6) -> Iterates:
    """FDP-SGD models (public columns 0-3, protected 4-5) whose canary is in both populations, at learning
    rate 0: the parameters never move, so every recorded private sum depends only on stream A and the
    noise, and every public gradient only on stream B."""
    generator = torch.Generator().manual_seed(0)
    model = Model("logistic", d, 2)
    split = ColumnSplit(tuple(ColumnGroup(f"f{i}", "numeric", i, i + 1) for i in range(d)), ("f4", "f5"))
    hyper = Hyperparameters(noise_multiplier=1.0, sample_rate=0.2, steps=30, clip_norm=0.5, public_batch_size=8,
                            optimizer=OptimizerConfig(lr=0.0))
    x, y = torch.randn(n, d, generator=generator), torch.randint(0, 2, (n,), generator=generator)
    problem = TrainingProblem(model, x, y, split, build_public_loss("mask", split), MECHANISMS["fdp_sgd"].recipe, hyper)
    everywhere = torch.ones(models, dtype=torch.bool)
    canaries = Canaries(torch.randn(models, d, generator=generator),
                        torch.randint(0, 2, (models,), generator=generator), everywhere, everywhere)
    (chunk,) = train_models(problem, 1, range(models), canaries=canaries, record_iterates=True)
    return chunk.iterates


def test_changing_the_public_seed_leaves_private_masks_and_noise_unchanged(monkeypatch):
    before = _run()
    _reseed(monkeypatch, PUBLIC)
    after = _run()
    assert torch.equal(before.private_batch_sizes, after.private_batch_sizes)
    assert torch.equal(before.canary_private_sampled, after.canary_private_sampled)
    assert torch.equal(before.noisy_private_sums, after.noisy_private_sums)
    # the public stream really changed
    assert not torch.equal(before.canary_public_counts, after.canary_public_counts)
    assert not torch.equal(before.public_gradients, after.public_gradients)


def test_changing_the_private_seed_leaves_public_batches_unchanged(monkeypatch):
    before = _run()
    _reseed(monkeypatch, PRIVATE)
    after = _run()
    assert torch.equal(before.canary_public_counts, after.canary_public_counts)
    assert torch.equal(before.public_gradients, after.public_gradients)
    # the private stream really changed
    assert not torch.equal(before.private_batch_sizes, after.private_batch_sizes)
    assert not torch.equal(before.noisy_private_sums, after.noisy_private_sums)
