"""Ghost clipping of the private loss for stacks of linear layers (docs/training.md).

For a linear layer ``z = W a + b`` and a per-example loss ℓ, the per-example gradient is rank one:
``∇_W ℓ = δ aᵀ`` and ``∇_b ℓ = δ`` with ``a`` the layer's input and ``δ = ∂ℓ/∂z``. Algorithm 1's private
loss ``ℓ_priv(x) = ℓ(x) − ℓ_pub(Ψ(x))`` (docs/training.md) is a difference of two such losses, one on the record
``x`` and one on the completed public input ``x'`` built from Ψ(x), so with the bias folded in as an input
constant 1 (``ã = [a, 1]``) its per-example gradient is ``g = δ ãᵀ − δ' ã'ᵀ`` and, summed over layers,

    ‖g‖² = ‖δ‖²‖ã‖² + ‖δ'‖²‖ã'‖² − 2 (δ·δ')(ã·ã')                                        (docs/training.md)

— a few inner products per example and layer; DP-SGD (the full loss ℓ) keeps only the first term. No
per-example gradient is materialised. The code evaluates the same quantity in its difference form: with
``e = δ − δ'`` and ``f = ã − ã'``, ``g = δ fᵀ + e ã'ᵀ`` and

    ‖g‖² = ‖δ‖²‖f‖² + ‖e‖²‖ã'‖² + 2 (δ·e)(f·ã'),

whose terms are as small as the private gradient itself when the protected part of a record is small; the
first form subtracts terms of the size of the full-loss gradient and loses the private part to float32
rounding. The clipped sum ``Σ_k w_k g_k`` with ``w_k = min(1, C/‖g_k‖)`` is the gradient of the re-weighted
loss ``Σ_k w_k ℓ_priv,k``; the δ of every layer are known from the norm pass, so its weight part is one
batched matrix product per layer, ``Σ_k w_k (δ_k ã_kᵀ − δ'_k ã'_kᵀ)``.

The column-subset public losses copy Ψ(x)'s columns into the model input unchanged (:class:`InputSplit`),
so the first layer computes their contribution once for both terms, and ``mask``/``mean`` fill the
protected columns with one fixed row, whose term is rank one for the whole batch. For label DP (Ψ(x) = x)
every input column is shared. This is what keeps a step at the cost of about one DP-SGD step plus the
public batch.

Everything carries the engine's leading model dimension: parameters ``[R, ...]`` and examples
``[R, K, ...]`` (matrix products are ``bmm`` over models). Padding of the Poisson batch enters as zero
weights. Layers other than linear (and ReLU between them) fall back to the materialised ``torch.func``
path of :mod:`fdp_audit.training.engine`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from fdp_audit.data.features import ColumnSplit, LabelOnlyPublicMap
from fdp_audit.training.models import Model, Params
from fdp_audit.training.public_losses import PublicLoss


def supports(model: Model) -> bool:
    """Whether the model is a stack of linear layers with ReLU between them (logistic regression, MLP).

    Args:
        model: the architecture.

    Returns:
        True for the ``logistic`` and ``mlp`` kinds.
    """
    return model.kind in ("logistic", "mlp")


@dataclass(frozen=True)
class InputSplit:
    """The public term's model input ``x'`` as a function of the record ``x``: equal to ``x`` on the
    ``shared`` columns and to the fixed row ``fill`` on the ``completed`` ones (``mask``, ``mean``; label DP
    and the leaky recipe share every column)."""

    shared: torch.Tensor  # long [d_u]
    completed: torch.Tensor  # long [d_v]
    fill: torch.Tensor  # [d_v]


def input_split(public_loss: PublicLoss | None, reads_protected: bool, n_inputs: int) -> InputSplit | None:
    """The :class:`InputSplit` of a public loss (docs/training.md constructions), or None when ``x'`` is not such a
    function of ``x`` (``gaussian_pad`` and ``impute`` complete each record differently, ``public_image`` changes
    every column). ``reads_protected``: the faulty recipe whose public loss reads the record itself.

    Args:
        public_loss: the public loss, or None.
        reads_protected: whether the recipe's public term reads the record itself (every column shared).
        n_inputs: the model's input width.

    Returns:
        The split, or None.
    """
    if reads_protected or (public_loss is not None and isinstance(public_loss.public_map, LabelOnlyPublicMap)):
        return InputSplit(torch.arange(n_inputs), torch.zeros(0, dtype=torch.long), torch.zeros(0))
    if public_loss is None or public_loss.fill is None or not isinstance(public_loss.public_map, ColumnSplit):
        return None
    split = public_loss.public_map
    return InputSplit(split.public_columns, split.protected_columns, public_loss.fill)


@dataclass(frozen=True)
class PublicTerm:
    """The public loss inside ℓ_priv = ℓ − ℓ_pub∘Ψ: its model inputs ``x'`` ``[R, K, d]`` (not needed when a
    ``split`` determines them), and whether it is label-free (label DP)."""

    inputs: torch.Tensor | None
    label_free: bool = False
    split: InputSplit | None = None


@dataclass(frozen=True)
class PrivateBatch:
    """A private batch ``[R, K, ...]`` and its loss: the full loss ℓ (DP-SGD) or, with a ``public`` term,
    ℓ_priv = ℓ − ℓ_pub∘Ψ. ``valid`` marks real records (the rest is Poisson padding). ``input_products``:
    the first layer's per-record inner products (:func:`input_products`), which depend on the record only,
    so the engine computes them once per data set and gathers them instead of reading every input row."""

    x: torch.Tensor  # [R, K, d]
    y: torch.Tensor  # [R, K]
    valid: torch.Tensor  # [R, K] bool
    public: PublicTerm | None = None
    input_products: torch.Tensor | None = None  # [R, K, 1 or 3]: input_products of x, if already known


@dataclass(frozen=True)
class GradientOverride:
    """Per-example gradients fixed to given vectors (the gradient canaries of the audit games): where
    ``mask[r, b]`` holds, example b of model r has gradient ``vectors[r, ids[r, b]]`` instead of the computed
    one. One vector per model may be given as ``vectors`` ``[R, P]`` without ``ids``."""

    mask: torch.Tensor  # [R, B] bool
    vectors: torch.Tensor  # [R, K, P], or [R, P]
    ids: torch.Tensor | None = None  # [R, B] long: which of the K vectors each example takes

    def stacked(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The vectors ``[R, K, P]`` and each example's vector id ``[R, B]``.

        Returns:
            ``(vectors, ids)``; one vector per model is lifted to K = 1 with every id 0.
        """
        if self.vectors.dim() == 2:
            return self.vectors[:, None, :], torch.zeros(self.mask.shape, dtype=torch.long, device=self.mask.device)
        assert self.ids is not None
        return self.vectors, self.ids

    def per_example(self) -> torch.Tensor:
        """Each example's override vector, ``[R, B, P]`` (read where ``mask`` holds).

        Returns:
            The vectors gathered by example.
        """
        vectors, ids = self.stacked()
        return vectors.gather(1, ids[..., None].expand(-1, -1, vectors.shape[2]))


@dataclass(frozen=True)
class _Layer:
    """Inputs ``[R, K, in]`` of one linear layer on the records and, for the decomposed loss, on their
    completed public inputs."""

    record: torch.Tensor
    public: torch.Tensor | None


Runs = tuple[slice, ...]  # a set of input columns as contiguous runs (encoded features are runs)


@dataclass(frozen=True)
class _SplitLayer:
    """Inputs of a first layer under an :class:`InputSplit`: the records ``x`` ``[R, K, d]``, the column runs
    of the shared and completed columns, the fill row ``c`` (``[d_v]``, and in a full-width row of zeros),
    and the side the matrix products need: the shared columns ``u`` when they are fewer, else
    ``Δ = v − c``, the records' completed columns minus the fill, which is all of ``x − x'``."""

    record: torch.Tensor
    shared_runs: Runs
    completed_runs: Runs
    fill: torch.Tensor
    fill_row: torch.Tensor
    shared: torch.Tensor | None
    difference: torch.Tensor | None


def _runs(indices: torch.Tensor) -> Runs:
    """Consecutive indices grouped into slices, in the given order."""
    values = indices.tolist()
    runs, start = [], 0
    for i in range(1, len(values) + 1):
        if i == len(values) or values[i] != values[i - 1] + 1:
            runs.append(slice(values[start], values[i - 1] + 1))
            start = i
    return tuple(runs)


def _take(t: torch.Tensor, runs: Runs) -> torch.Tensor:
    """The columns of ``t`` in ``runs``; a single run is a view, not a copy."""
    if len(runs) == 1:
        return t[..., runs[0]]
    return torch.cat([t[..., run] for run in runs], dim=-1) if runs else t[..., :0]


def _add_columns(target: torch.Tensor, runs: Runs, values: torch.Tensor, alpha: float = 1.0) -> None:
    offset = 0
    for run in runs:
        width = run.stop - run.start
        target[..., run].add_(values[..., offset:offset + width], alpha=alpha)
        offset += width


def _square_over(t: torch.Tensor, runs: Runs) -> torch.Tensor:
    """``Σ_j t_j²`` over the columns in ``runs``, read in place."""
    total = torch.zeros(t.shape[:-1], dtype=t.dtype, device=t.device)
    for run in runs:
        total += _square(t[..., run])
    return total


def logit_gradients(logits: torch.Tensor, y: torch.Tensor, label_free: bool) -> torch.Tensor:
    """``∂ℓ/∂logits`` per example for the losses of :mod:`fdp_audit.training.models`: logistic loss
    ``σ(z) − y``, cross-entropy ``softmax(z) − onehot(y)``, and the label-free ``softplus`` /
    ``logsumexp`` of label DP, whose gradients are ``σ(z)`` / ``softmax(z)``.

    Args:
        logits: logits ``[..., V]``.
        y: integer labels ``[...]`` (ignored when ``label_free``).
        label_free: whether the loss is label DP's label-free one.

    Returns:
        The gradients ``[..., V]``.
    """
    if logits.shape[-1] == 1:
        probabilities = torch.sigmoid(logits)
        if label_free:  # torch's softplus is linear above 20, and so is the loss the engine defines
            return torch.where(logits > 20.0, torch.ones_like(logits), probabilities)
        return probabilities - y[..., None].to(logits.dtype)
    probabilities = torch.softmax(logits, dim=-1)
    if label_free:
        return probabilities
    return probabilities.scatter_add(-1, y[..., None], -torch.ones_like(probabilities[..., :1]))


def _linear(h: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    return torch.baddbmm(bias[:, None, :], h, weight.transpose(1, 2))


def _first_layer(params: Params, batch: PrivateBatch
                 ) -> tuple[_Layer | _SplitLayer, torch.Tensor, torch.Tensor | None]:
    """The first layer's inputs and its pre-activations on the records and the completed inputs.

    Under an :class:`InputSplit`, ``z' = u W_uᵀ + W c + b`` when fewer columns are shared than completed,
    else ``z' = z − Δ W_vᵀ`` (``x'`` is ``x`` minus ``Δ`` on the completed columns): either way the
    completed inputs cost a product over the smaller column set only."""
    weight, bias, x = params["layer0.weight"], params["layer0.bias"], batch.x
    z = _linear(x, weight, bias)
    if batch.public is None:
        return _Layer(x, None), z, None
    split = batch.public.split
    if split is None:
        assert batch.public.inputs is not None
        public = batch.public.inputs.to(x.dtype)
        return _Layer(x, public), z, _linear(public, weight, bias)
    shared_runs, completed_runs = _runs(split.shared), _runs(split.completed)
    fill = split.fill.to(x.device, x.dtype)
    fill_row = x.new_zeros(x.shape[-1])
    _add_columns(fill_row, completed_runs, fill)
    if split.shared.numel() < split.completed.numel():
        shared = _take(x, shared_runs)
        z_public = _linear(shared, _take(weight, shared_runs), bias + weight @ fill_row)
        return _SplitLayer(x, shared_runs, completed_runs, fill, fill_row, shared, None), z, z_public
    difference = _take(x, completed_runs) - fill
    z_public = torch.baddbmm(z, difference, _take(weight, completed_runs).transpose(1, 2), alpha=-1.0)
    return _SplitLayer(x, shared_runs, completed_runs, fill, fill_row, None, difference), z, z_public


def _trace(model: Model, params: Params, batch: PrivateBatch, label_free: bool = False
           ) -> tuple[list[_Layer | _SplitLayer], list[tuple[torch.Tensor, torch.Tensor | None]]]:
    """Forward pass of ``Model.forward`` (linear layers, ReLU between) on the records and on the completed
    public inputs; backward pass of the per-example losses down to every layer's output. Returns each
    layer's inputs and its output gradients ``(δ, δ')``. ``label_free``: the records' own loss is the
    label-free one (a label-DP public batch)."""
    n_layers = len(model.hidden) + 1
    layer, z, z_public = _first_layer(params, batch)
    layers, pre_activations = [layer], [(z, z_public)]
    for i in range(1, n_layers):
        weight, bias = params[f"layer{i}.weight"], params[f"layer{i}.bias"]
        h, h_public = torch.relu(z), None if z_public is None else torch.relu(z_public)
        layers.append(_Layer(h, h_public))
        z, z_public = _linear(h, weight, bias), None if h_public is None else _linear(h_public, weight, bias)
        pre_activations.append((z, z_public))
    delta = logit_gradients(z, batch.y, label_free)
    delta_public = None
    if batch.public is not None:
        delta_public = logit_gradients(z_public, batch.y, batch.public.label_free)
    output_grads = [(delta, delta_public)]
    for i in range(n_layers - 1, 0, -1):
        # ReLU passes the gradient where its input was positive (torch's convention at 0 too).
        weight, (below, below_public) = params[f"layer{i}.weight"], pre_activations[i - 1]
        delta = torch.bmm(delta, weight) * (below > 0)
        if delta_public is not None:
            delta_public = torch.bmm(delta_public, weight) * (below_public > 0)
        output_grads.append((delta, delta_public))
    return layers, output_grads[::-1]


def _dot(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.linalg.vecdot(a, b)


def _square(a: torch.Tensor) -> torch.Tensor:
    return torch.linalg.vector_norm(a, dim=-1).square()


def _split_inner_products(record: torch.Tensor, shared_runs: Runs, completed_runs: Runs, fill: torch.Tensor,
                          difference: torch.Tensor | None = None
                          ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``‖f‖², f·ã', ‖ã'‖²`` per record under an :class:`InputSplit`: ``f`` is ``Δ`` on the completed columns
    and ``ã' = [u, c, 1]``. The record is read in place; ``Δ`` (if not given) is formed only for a non-zero
    fill."""
    public_squared = _square_over(record, shared_runs) + fill.square().sum() + 1.0
    if difference is None and bool(fill.any()):
        difference = _take(record, completed_runs) - fill
    if difference is None:  # a zero fill (mask): Δ is the completed columns themselves and Δ·c = 0
        return _square_over(record, completed_runs), torch.zeros_like(public_squared), public_squared
    return _square(difference), difference @ fill, public_squared


def input_products(x: torch.Tensor, split: InputSplit | None) -> torch.Tensor:
    """The first layer's share of the norm identity that depends on the record alone, ``[..., 1]`` for the
    full loss (``split`` None): ``‖x̃‖² = ‖x‖² + 1``; ``[..., 3]`` for ℓ_priv under ``split``:
    ``‖f‖², f·ã', ‖ã'‖²`` of the difference form (module docstring).

    Args:
        x: records ``[..., d]``.
        split: the public loss's input split, or None for the full loss.

    Returns:
        The inner products ``[..., 1]`` or ``[..., 3]``.
    """
    if split is None:
        return (_square(x) + 1.0)[..., None]
    fill = split.fill.to(x.device, x.dtype)
    return torch.stack(_split_inner_products(x, _runs(split.shared), _runs(split.completed), fill), dim=-1)


def _inner_products(layer: _Layer | _SplitLayer, decomposed: bool, bias: bool = True) -> tuple[torch.Tensor, ...]:
    """What :func:`input_products` gives, for any layer's inputs: ``(‖ã‖²,)`` for the full loss, else
    ``(‖f‖², f·ã', ‖ã'‖²)`` with ``f = ã − ã'`` (``ã = a`` for a layer without ``bias``)."""
    constant = 1.0 if bias else 0.0
    if not decomposed:
        return (_square(layer.record) + constant,)
    if isinstance(layer, _SplitLayer):
        return _split_inner_products(layer.record, layer.shared_runs, layer.completed_runs, layer.fill,
                                     layer.difference)
    assert layer.public is not None
    f = layer.record - layer.public
    return _square(f), _dot(f, layer.public), _square(layer.public) + constant


def _layer_squared_norms(products: tuple[torch.Tensor, ...], delta: torch.Tensor, delta_public: torch.Tensor | None
                         ) -> torch.Tensor:
    """One layer's share of ``‖g‖²`` per example ``[R, K]``: ``‖δ‖²‖ã‖²`` for the full loss, else the
    difference form ``‖δ‖²‖f‖² + ‖e‖²‖ã'‖² + 2(δ·e)(f·ã')`` of the module docstring (``f`` is zero on the
    shared columns and on the bias), from the layer's :func:`_inner_products`."""
    if delta_public is None:
        return _square(delta) * products[0]
    f_squared, f_dot, public_squared = products
    e = delta - delta_public
    return _square(delta) * f_squared + _square(e) * public_squared + 2.0 * _dot(delta, e) * f_dot


def _squared_norms(layers: list[_Layer | _SplitLayer], output_grads: list[tuple[torch.Tensor, torch.Tensor | None]],
                   batch: PrivateBatch) -> torch.Tensor:
    """``‖∇ℓ_priv‖²`` per example ``[R, K]``, summed over layers; the first layer's inner products come from
    ``batch.input_products`` when the caller has them."""
    decomposed = batch.public is not None
    total = torch.zeros(batch.valid.shape, dtype=batch.x.dtype, device=batch.x.device)
    for i, (layer, deltas) in enumerate(zip(layers, output_grads)):
        if i == 0 and batch.input_products is not None:
            products = tuple(batch.input_products.to(batch.x.dtype).unbind(-1))
        else:
            products = _inner_products(layer, decomposed)
        total += _layer_squared_norms(products, *deltas)
    return total


def _layer_weighted_sum(layer: _Layer | _SplitLayer, delta: torch.Tensor, delta_public: torch.Tensor | None,
                        weights: torch.Tensor) -> torch.Tensor:
    """``Σ_k w_k (δ_k ã_kᵀ − δ'_k ã'_kᵀ)`` (or ``Σ_k w_k δ_k ã_kᵀ``) for one layer, flattened to
    ``[R, out·in + out]`` in the order of ``Model.shapes()`` (weight, then bias)."""
    weighted = delta * weights[..., None]
    if delta_public is None:
        return torch.cat([torch.bmm(weighted.transpose(1, 2), layer.record).flatten(1), weighted.sum(dim=1)], 1)
    weighted_public = delta_public * weights[..., None]
    weighted_difference = weighted - weighted_public
    if isinstance(layer, _Layer):
        assert layer.public is not None
        gradient = torch.baddbmm(torch.bmm(weighted.transpose(1, 2), layer.record),
                                 weighted_public.transpose(1, 2), layer.public, alpha=-1.0)
    elif layer.shared is not None:
        # δ xᵀ − δ' x'ᵀ with x' = [u, c]: full product on x, the public term on the shared columns only.
        gradient = torch.bmm(weighted.transpose(1, 2), layer.record)
        gradient -= weighted_public.sum(dim=1)[..., None] * layer.fill_row
        _add_columns(gradient, layer.shared_runs, torch.bmm(weighted_public.transpose(1, 2), layer.shared), -1.0)
    else:
        # δ xᵀ − δ' (x − Δ)ᵀ = e xᵀ + δ' Δᵀ: the second term lives on the completed columns only.
        assert layer.difference is not None
        gradient = torch.bmm(weighted_difference.transpose(1, 2), layer.record)
        _add_columns(gradient, layer.completed_runs, torch.bmm(weighted_public.transpose(1, 2), layer.difference))
    return torch.cat([gradient.flatten(1), weighted_difference.sum(dim=1)], 1)


def private_norms(model: Model, params: Params, batch: PrivateBatch) -> torch.Tensor:
    """Per-example gradient norms ``‖∇ℓ_priv‖`` ``[R, K]``, never materialising the gradients (the norm identity
    of the module docstring).

    Args:
        model: a stack of linear layers (:func:`supports`).
        params: the stacked parameters by name, ``[R, *shape]``.
        batch: the private batch ``[R, K, ...]`` and its loss.

    Returns:
        The norms ``[R, K]``.
    """
    layers, output_grads = _trace(model, params, batch)
    # Rounding can leave −1e-12 where the terms cancel exactly.
    return _squared_norms(layers, output_grads, batch).clamp_min(0.0).sqrt()


def clipped_private_sum(model: Model, params: Params, batch: PrivateBatch, clip_norm: float | None,
                        override: GradientOverride | None = None) -> torch.Tensor:
    """``Σ_k valid_k · clip_C(∇ℓ_priv,k)`` per model, ``[R, P]`` (no clipping when ``clip_norm`` is None).

    Overridden examples (a gradient canary) have a known gradient, hence a known norm: they get weight 0
    in the re-weighted pass and their clipped vector is added directly.

    Args:
        model: a stack of linear layers (:func:`supports`).
        params: the stacked parameters by name, ``[R, *shape]``.
        batch: the private batch ``[R, K, ...]`` and its loss.
        clip_norm: the clipping norm C, or None for no clipping.
        override: examples whose gradients are fixed vectors, or None.

    Returns:
        The clipped sums ``[R, P]``, flattened in parameter order.
    """
    layers, output_grads = _trace(model, params, batch)
    weights = batch.valid.to(batch.x.dtype)
    computed = weights if override is None else weights * ~override.mask
    if clip_norm is not None:
        squared = _squared_norms(layers, output_grads, batch)
        computed = computed * torch.clamp(clip_norm / squared.clamp_min(1e-24).sqrt(), max=1.0)
    flat = torch.cat([_layer_weighted_sum(layer, *deltas, computed) for layer, deltas in zip(layers, output_grads)],
                     dim=1)
    return add_override(flat, weights, override, clip_norm)


def add_override(flat: torch.Tensor, weights: torch.Tensor, override: GradientOverride | None,
                 clip_norm: float | None) -> torch.Tensor:
    """Add the overridden examples' clipped vectors to a clipped sum ``[R, P]`` that gave them weight 0:
    each valid overridden example b (``weights`` > 0) contributes ``clip_C(vectors[r, ids[r, b]])``.

    Args:
        flat: the clipped sum of the computed examples ``[R, P]``.
        weights: each example's weight ``[R, B]`` (0 for padding).
        override: the overridden examples, or None (``flat`` is returned as is).
        clip_norm: the clipping norm C, or None for no clipping.

    Returns:
        The completed sum ``[R, P]``.
    """
    if override is None:
        return flat
    vectors, ids = override.stacked()
    vectors = vectors.to(flat.dtype)
    count = torch.zeros(vectors.shape[:2], dtype=flat.dtype, device=flat.device)
    count.scatter_add_(1, ids, (weights * override.mask).to(flat.dtype))
    if clip_norm is not None:
        count = count * torch.clamp(clip_norm / vectors.norm(dim=2).clamp_min(1e-12), max=1.0)
    return flat + (count[..., None] * vectors).sum(dim=1)


def gradient_sum(model: Model, params: Params, x: torch.Tensor, y: torch.Tensor, weights: torch.Tensor,
                 label_free: bool = False) -> torch.Tensor:
    """``Σ_k w_k ∇ℓ(x_k)`` per model, ``[R, P]``: the public gradient of docs/training.md step 4 (inputs ``x`` built
    from Ψ, ``label_free`` for label DP) by the same forward and backward passes, without the per-model
    ``torch.func`` transforms.

    Args:
        model: a stack of linear layers (:func:`supports`).
        params: the stacked parameters by name, ``[R, *shape]``.
        x: model inputs ``[R, K, d]``.
        y: labels ``[R, K]``.
        weights: each example's weight ``[R, K]`` (0 leaves it out).
        label_free: whether the loss is label DP's label-free one.

    Returns:
        The weighted gradient sums ``[R, P]``.
    """
    layers, output_grads = _trace(model, params, PrivateBatch(x, y, weights > 0), label_free)
    return torch.cat([_layer_weighted_sum(layer, *deltas, weights.to(x.dtype))
                      for layer, deltas in zip(layers, output_grads)], dim=1)
