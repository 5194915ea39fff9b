"""Logistic regression (a generalised linear model) computed straight from record tables (docs/training.md).

For a linear model ``z = W x + b`` the per-example gradient of a loss is ``δ x̃ᵀ`` with ``δ = ∂ℓ/∂z``
(``softmax − onehot``, or ``σ(z) − y`` for one logit) and ``x̃ = [x, 1]``, so DP-SGD's per-example norm is
``‖δ‖·‖x̃‖`` and the clipped sum ``Σ_k w_k δ_k x̃_kᵀ`` is a weighted sum of records. For Algorithm 1's
ℓ_priv = ℓ(x) − ℓ_pub(x') (docs/training.md) the gradient is ``g = δ x̃ᵀ − δ' x̃'ᵀ`` with ``e = δ − δ'`` and
``f = x̃ − x̃'``. Written as ``g = δ fᵀ + e x̃'ᵀ`` its norm is (as in :mod:`fdp_audit.training.ghost`, in its
difference form)

    ‖g‖² = ‖δ‖²‖f‖² + ‖e‖²‖x̃'‖² + 2 (δ·e)(f·x̃'),

and written as ``g = e x̃ᵀ + δ' fᵀ`` its sum over records reads the record table and the columns where x'
differs only.

Everything that depends on the record alone — ``‖x̃‖²``, or ``‖f‖², f·x̃', ‖x̃'‖²`` and ``f`` itself on the
columns where ``x'`` differs from ``x`` — is computed once per data set (:func:`record_tables`) when the
public inputs ``x'`` are a function of the record (mask, mean, impute, label DP, the leaky recipe; not
gaussian_pad's fresh noise). A step then reads each sampled record twice and writes nothing of its size:

* the logits ``z`` gather the batch rows block by block into a buffer that stays in cache and multiply it
  by ``W`` (``z' = z − f_D W_Dᵀ`` over the differing columns D only);
* the clipped sum is ``embedding_bag`` of the table rows with per-row weights ``w_k e_k`` (and ``w_k δ'_k``
  over D), which gathers and accumulates in one pass.

Gathering all batch rows of every model at once moves R·K·d floats through memory three times (write,
then read for the logits and for the sum); on a CPU shared with other jobs that traffic, not arithmetic,
bounds the batched step (B2 profile).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from fdp_audit.training import ghost
from fdp_audit.training.models import Params

BLOCK_BYTES = 1 << 19  # gathered rows per block on a CPU: well within a core's L2 cache (B2: 512 KiB is fastest)
EMBEDDING_BAG_MAX_OUTPUTS = 8  # above this, the weighted sum is a blocked matrix product (one read per row)


@dataclass(frozen=True)
class RecordTables:
    """Per-record quantities of the private loss, one row per record (data set, then canaries).

    ``difference`` is ``x − x'`` on the ``differing`` columns (None for the full loss ℓ); ``products`` is
    ``[N, 1]`` ``‖x̃‖²`` for the full loss, else ``[N, 3]`` ``‖f‖², f·x̃', ‖x̃'‖²``."""

    records: torch.Tensor  # [N, d]
    differing: torch.Tensor | None  # long [d_D]
    difference: torch.Tensor | None  # [N, d_D]
    products: torch.Tensor


def _dots(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Row-wise inner products, without a table-sized temporary."""
    return torch.einsum("nd,nd->n", a, b)


def record_tables(records: torch.Tensor, public_inputs: torch.Tensor | None) -> RecordTables:
    """Tables for the full loss (``public_inputs`` None) or for ℓ_priv with the given completed inputs: ``‖x̃‖²``,
    or ``‖f‖², f·x̃', ‖x̃'‖²`` and ``f`` on the columns where ``x'`` differs (module docstring).

    Args:
        records: the records ``[N, d]`` (data set, then canaries).
        public_inputs: their completed public inputs ``x'`` ``[N, d]``, or None for the full loss.

    Returns:
        The record tables.
    """
    if public_inputs is None:
        return RecordTables(records, None, None, (_dots(records, records) + 1.0)[:, None])
    public_inputs = public_inputs.to(records.dtype)
    f = records - public_inputs
    differing = f.ne(0).any(dim=0).nonzero()[:, 0]
    f_squared, f_dot = _dots(f, f), _dots(f, public_inputs)
    public_squared = _dots(public_inputs, public_inputs) + 1.0
    products = torch.stack([f_squared, f_dot, public_squared], dim=1)
    return RecordTables(records, differing, f[:, differing].contiguous(), products)


def _models_per_block(rows: torch.Tensor, width: int) -> int:
    """Models whose gathered rows fit :data:`BLOCK_BYTES` (on a CPU); one block on an accelerator."""
    r, k = rows.shape
    if rows.device.type != "cpu":
        return max(1, r)
    return max(1, min(r, BLOCK_BYTES // max(1, 4 * k * width)))


def _gathered_blocks(table: torch.Tensor, rows: torch.Tensor, block: int) -> Iterator[torch.Tensor]:
    """The table rows ``rows`` of ``block`` models at a time, ``[b, K, d]``, gathered into one reused
    buffer: each block is valid until the next one is drawn."""
    k, d = rows.shape[1], table.shape[1]
    buffer = table.new_empty(block * k, d)
    for piece in rows.reshape(-1).split(block * k):
        inputs = buffer[:piece.numel()]
        torch.index_select(table, 0, piece, out=inputs)
        yield inputs.view(-1, k, d)


def logits(table: torch.Tensor, rows: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None
           ) -> torch.Tensor:
    """``W x_k + b`` for table rows ``rows`` ``[R, K]`` and per-model ``weight`` ``[R, o, d]``: ``[R, K, o]``.

    Args:
        table: the table ``[N, d]`` the rows are read from.
        rows: each model's table rows ``[R, K]``.
        weight: each model's weight ``[R, o, d]``.
        bias: each model's bias ``[R, o]``, or None.

    Returns:
        The logits ``[R, K, o]``.
    """
    if rows.shape[1] == 0:  # no model sampled anyone at this step (small p)
        return table.new_zeros(rows.shape[0], 0, weight.shape[1])
    out = table.new_empty(rows.shape[0], weight.shape[1], rows.shape[1])
    block = _models_per_block(rows, table.shape[1])
    for inputs, block_weight, block_out in zip(_gathered_blocks(table, rows, block), weight.split(block),
                                               out.split(block)):
        # (W xᵀ) rather than x Wᵀ: for few outputs BLAS runs this orientation several times faster.
        torch.bmm(block_weight, inputs.transpose(1, 2), out=block_out)
    z = out.transpose(1, 2)
    return z if bias is None else z + bias[:, None, :]


def weighted_rows(table: torch.Tensor, rows: torch.Tensor, coefficients: torch.Tensor) -> torch.Tensor:
    """``Σ_k c_k x_kᵀ`` per model for table rows ``rows`` ``[R, K]`` and coefficients ``[R, K, o]``:
    ``[R, o, d]``. For few outputs one ``embedding_bag`` (a bag per model and output) gathers and sums in one
    pass; for many, a blocked matrix product reads each row once.

    Args:
        table: the table ``[N, d]`` the rows are read from.
        rows: each model's table rows ``[R, K]``.
        coefficients: the coefficients ``[R, K, o]``.

    Returns:
        The weighted sums ``[R, o, d]``.
    """
    r, k, o = coefficients.shape
    d = table.shape[1]
    if k == 0:
        return table.new_zeros(r, o, d)
    if o <= EMBEDDING_BAG_MAX_OUTPUTS:
        bags = rows[:, None, :].expand(r, o, k).reshape(-1)
        weights = coefficients.transpose(1, 2).reshape(-1).to(table.dtype)
        offsets = torch.arange(0, r * o * k, k, device=rows.device)
        return F.embedding_bag(bags, table, offsets, mode="sum", per_sample_weights=weights).view(r, o, d)
    out = table.new_empty(r, o, d)
    block = _models_per_block(rows, d)
    for inputs, block_coefficients, block_out in zip(_gathered_blocks(table, rows, block),
                                                     coefficients.split(block), out.split(block)):
        torch.bmm(block_coefficients.transpose(1, 2), inputs, out=block_out)
    return out


def clipped_private_sum(params: Params, tables: RecordTables, rows: torch.Tensor, y: torch.Tensor,
                        valid: torch.Tensor, clip_norm: float | None, public_label_free: bool = False,
                        override: ghost.GradientOverride | None = None) -> torch.Tensor:
    """``Σ_k valid_k · clip_C(∇ℓ_priv,k)`` per model, ``[R, P]`` in the order of ``Model.shapes()``, for a
    logistic model and table rows ``rows`` (no clipping when ``clip_norm`` is None). ``public_label_free``:
    ℓ_pub is the label-free loss of label DP. Overridden examples (a gradient canary) are handled as in
    :func:`fdp_audit.training.ghost.clipped_private_sum`.

    Args:
        params: the stacked parameters ``layer0.weight`` ``[R, o, d]`` and ``layer0.bias`` ``[R, o]``.
        tables: the record tables (:func:`record_tables`).
        rows: each model's batch as table rows ``[R, K]``.
        y: the batch's labels ``[R, K]``.
        valid: which entries are real records ``[R, K]`` (the rest is Poisson padding).
        clip_norm: the clipping norm C, or None for no clipping.
        public_label_free: whether ℓ_pub is label DP's label-free loss.
        override: examples whose gradients are fixed vectors, or None.

    Returns:
        The clipped sums ``[R, P]``.
    """
    weight, bias = params["layer0.weight"], params["layer0.bias"]
    r, k = rows.shape
    z = logits(tables.records, rows, weight, bias)
    delta = ghost.logit_gradients(z, y, False)
    products = tables.products.index_select(0, rows.reshape(-1)).view(r, k, -1)
    weights = valid.to(z.dtype)
    computed = weights if override is None else weights * ~override.mask
    delta_public = None
    if tables.difference is None:
        squared = delta.square().sum(dim=-1) * products[..., 0]
        coefficients = delta
    else:
        assert tables.differing is not None
        z_public = z
        if tables.differing.numel():
            z_public = z - logits(tables.difference, rows, weight[:, :, tables.differing])
        delta_public = ghost.logit_gradients(z_public, y, public_label_free)
        coefficients = delta - delta_public
        f_squared, f_dot, public_squared = products.unbind(-1)
        squared = (delta.square().sum(dim=-1) * f_squared + coefficients.square().sum(dim=-1) * public_squared
                   + 2.0 * (delta * coefficients).sum(dim=-1) * f_dot)
    if clip_norm is not None:
        computed = computed * torch.clamp(clip_norm / squared.clamp_min(1e-24).sqrt(), max=1.0)
    weighted = coefficients * computed[..., None]
    weight_gradient = weighted_rows(tables.records, rows, weighted)
    if delta_public is not None and tables.differing is not None and tables.differing.numel():
        assert tables.difference is not None
        difference_part = weighted_rows(tables.difference, rows, delta_public * computed[..., None])
        weight_gradient[:, :, tables.differing] += difference_part
    flat = torch.cat([weight_gradient.flatten(1), weighted.sum(dim=1)], dim=1)
    return ghost.add_override(flat, weights, override, clip_norm)


def gradient_sum(params: Params, table: torch.Tensor, rows: torch.Tensor, y: torch.Tensor, weights: torch.Tensor,
                 label_free: bool = False) -> torch.Tensor:
    """``Σ_k w_k ∇ℓ(x_k)`` per model, ``[R, P]``, for a logistic model on table rows ``rows`` (the public
    gradient of docs/training.md step 4 when ``table`` holds the public loss's inputs).

    Args:
        params: the stacked parameters ``layer0.weight`` ``[R, o, d]`` and ``layer0.bias`` ``[R, o]``.
        table: the table ``[N, d]`` the rows are read from.
        rows: each model's table rows ``[R, K]``.
        y: their labels ``[R, K]``.
        weights: each example's weight ``[R, K]``.
        label_free: whether the loss is label DP's label-free one.

    Returns:
        The weighted gradient sums ``[R, P]``.
    """
    z = logits(table, rows, params["layer0.weight"], params["layer0.bias"])
    weighted = ghost.logit_gradients(z, y, label_free) * weights.to(z.dtype)[..., None]
    return torch.cat([weighted_rows(table, rows, weighted).flatten(1), weighted.sum(dim=1)], dim=1)
