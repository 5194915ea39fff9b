"""The GLM path: logistic-regression norms, clipped sums and public gradients computed from record
tables equal the same quantities from per-example gradients materialised by ``torch.func`` (float64,
1e-10), for the full loss and for ℓ_priv = ℓ − ℓ_pub(x') with every kind of completed input x'."""

from __future__ import annotations

import pytest
import torch
from torch.func import grad, vmap

from fdp_audit.training import engine, ghost, glm
from fdp_audit.training.models import Model, example_loss, label_free_loss

N, D, R, K = 30, 7, 5, 6


def _materialised(model: Model, params, x, y, public_x, label_free: bool) -> torch.Tensor:
    """Per-example gradients ``[R, K, P]`` of ℓ (``public_x`` None) or of ℓ(x) − ℓ_pub(x')."""

    def loss(p, xi, yi, pi):
        value = example_loss(model.forward(p, xi), yi)
        if public_x is None:
            return value
        logits = model.forward(p, pi)
        return value - (label_free_loss(logits) if label_free else example_loss(logits, yi))

    per_example = vmap(vmap(grad(loss), in_dims=(None, 0, 0, 0)))(params, x, y, x if public_x is None else public_x)
    return engine.flatten(per_example, lead=2)


def _public_inputs(records: torch.Tensor, kind: str, generator: torch.Generator) -> torch.Tensor | None:
    """Completed inputs x' of every record: None (the full loss), a fill row on columns 2 and 5 (mask,
    mean), per-record values there (impute), or x itself (label DP, the leaky recipe)."""
    if kind == "full":
        return None
    public = records.clone()
    if kind == "fill":
        public[:, [2, 5]] = torch.tensor([0.5, -1.0], dtype=records.dtype)
    elif kind == "per-record":
        public[:, [2, 5]] = torch.randn(records.shape[0], 2, generator=generator, dtype=records.dtype)
    return public


@pytest.mark.parametrize("n_classes", [2, 3, 12], ids=["binary", "three-class", "twelve-class"])
@pytest.mark.parametrize(("kind", "label_free"), [("full", False), ("fill", False), ("per-record", False),
                                                  ("same", True), ("same", False)])
@pytest.mark.parametrize("block_bytes", [1 << 19, 4 * K * D], ids=["one-block", "block-per-model"])
def test_clipped_sum_equals_materialised(monkeypatch, n_classes, kind, label_free, block_bytes):
    """Random tables and batches with padding, with and without clipping and a gradient canary; twelve
    classes take the blocked matrix product instead of embedding_bag, and small blocks split the models."""
    monkeypatch.setattr(glm, "BLOCK_BYTES", block_bytes)
    model = Model("logistic", D, n_classes)
    generator = torch.Generator().manual_seed(n_classes)
    records = torch.randn(N, D, generator=generator, dtype=torch.float64)
    labels = torch.randint(0, n_classes, (N,), generator=generator)
    public = _public_inputs(records, kind, generator)
    params = {name: torch.randn(R, *shape, generator=generator, dtype=torch.float64)
              for name, shape in model.shapes().items()}
    rows = torch.randint(0, N, (R, K), generator=generator)
    valid = torch.rand(R, K, generator=generator) < 0.8
    mask = torch.zeros(R, K, dtype=torch.bool)
    mask[0, 1] = mask[3, 4] = True
    valid[0, 1] = valid[3, 4] = True
    canary = ghost.GradientOverride(mask, 3.0 * torch.randn(R, model.n_parameters, generator=generator,
                                                            dtype=torch.float64))
    tables = glm.record_tables(records, public)
    x, y = records[rows], labels[rows]
    computed = _materialised(model, params, x, y, None if public is None else public[rows], label_free)
    for override in (None, canary):
        per_example = computed if override is None else torch.where(mask[..., None], canary.vectors[:, None, :],
                                                                    computed)
        for clip_norm in (0.7, None):
            weights = valid.double()
            if clip_norm is not None:
                weights = weights * torch.clamp(clip_norm / per_example.norm(dim=-1), max=1.0)
            expected = torch.einsum("rk,rkp->rp", weights, per_example)
            flat = glm.clipped_private_sum(params, tables, rows, y, valid, clip_norm, label_free, override)
            torch.testing.assert_close(flat, expected, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("n_classes", [2, 12])
@pytest.mark.parametrize("label_free", [False, True])
def test_gradient_sum_equals_torch_func(n_classes, label_free):
    model = Model("logistic", D, n_classes)
    generator = torch.Generator().manual_seed(1)
    table = torch.randn(N, D, generator=generator, dtype=torch.float64)
    labels = torch.randint(0, n_classes, (N,), generator=generator)
    params = {name: torch.randn(R, *shape, generator=generator, dtype=torch.float64)
              for name, shape in model.shapes().items()}
    rows = torch.randint(0, N, (R, K), generator=generator)
    weights = torch.rand(R, K, generator=generator, dtype=torch.float64)

    def loss(p, xi, yi, wi):
        logits = model.forward(p, xi)
        return ((label_free_loss(logits) if label_free else example_loss(logits, yi)) * wi).sum()

    expected = engine.flatten(vmap(grad(loss))(params, table[rows], labels[rows], weights), lead=1)
    torch.testing.assert_close(glm.gradient_sum(params, table, rows, labels[rows], weights, label_free), expected,
                               rtol=1e-10, atol=1e-12)


def test_tables_hold_the_record_quantities():
    """Known answers for one record: x = (1, 2, 3), x' = (1, 0, 3): f = (0, 2, 0) on column 1 only."""
    records = torch.tensor([[1.0, 2.0, 3.0]], dtype=torch.float64)
    public = torch.tensor([[1.0, 0.0, 3.0]], dtype=torch.float64)
    full = glm.record_tables(records, None)
    assert full.products.tolist() == [[15.0]]  # ‖x‖² + 1
    tables = glm.record_tables(records, public)
    assert tables.differing.tolist() == [1]
    assert tables.difference.tolist() == [[2.0]]
    assert tables.products.tolist() == [[4.0, 0.0, 11.0]]  # ‖f‖², f·x̃', ‖x̃'‖² (x̃' = (1, 0, 3, 1))
