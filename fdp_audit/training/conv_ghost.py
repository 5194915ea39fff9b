"""Per-example clipping of the private loss for a module with a layer plan (docs/images.md, docs/training.md): the
built-in GroupNorm CNN and any user ``nn.Module`` that :mod:`fdp_audit.training.layer_plan` traces into a chain of
convolutions, linear layers, GroupNorm/LayerNorm, element-wise maps, pooling and reshapes, batched over models,
without ``torch.func`` and without a per-example gradient of the whole model.

Algorithm 1's private loss is ``ℓ_priv(x) = ℓ(x) − ℓ_pub(x')`` with ``x'`` the public loss's input built from
Ψ(x). One forward pass over the records and their public inputs stacked along the batch, and one backward pass
of ``Σ ℓ(x_k) + Σ ℓ_pub(x'_k)``, give every parametrised layer's input and output gradient for both terms
(examples are independent: every planned step acts on each example on its own). Per layer, with ``a`` / ``a'``
the inputs and ``δ`` / ``δ'`` the output gradients of the two terms:

* **Convolution** (weight ``[C_o, C_i, kh, kw]``, any stride, padding and dilation; grouped convolutions take the
  direct route): with ``A`` the unfolded input
  (``[C_i·kh·kw, P]`` over the P output positions) and ``D`` the output gradient ``[C_o, P]``, the per-example
  gradient is ``g = D Aᵀ − D' A'ᵀ`` ``= [D, −D'] [A, A']ᵀ``. Its norm is computed by whichever route costs less
  per example: *ghost* (the Gram form ``‖g‖² = ⟨[D, −D']ᵀ[D, −D'], [A, A']ᵀ[A, A']⟩``, ``(2P)²(C_o + C_i·kh·kw)``
  operations, nothing parameter-sized) or *direct* (``g`` itself, ``C_o·C_i·kh·kw·2P`` operations, one layer at
  a time, as the weight gradient of one convolution whose groups are the examples — no unfolded copy of the
  input); the bias gradient is ``Σ_p D − Σ_p D'``.
* **GroupNorm** scale and shift: ``Σ_p (δ x̂ − δ' x̂')`` and ``Σ_p (δ − δ')`` per channel, ``x̂`` the normalised
  input — a few numbers per example; **LayerNorm** the same with the sums over the dimensions it does not
  normalise.
* **Linear**: the rank-one ghost identity of :mod:`fdp_audit.training.ghost`.

The squared norms add over layers; the clipped sum ``Σ_k w_k g_k`` (``w_k = min(1, C/‖g_k‖)``) is, per layer,
one batched matrix product of the weighted output gradients with the inputs — no second backward pass.
DP-SGD (the full loss ℓ) is the same without the public term.
"""

from __future__ import annotations

import math
from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

from fdp_audit.training import ghost, layer_plan
from fdp_audit.training.layer_kernels import relu_average_pool
from fdp_audit.training.layer_plan import (
    Channelwise,
    Conv,
    Elementwise,
    GroupNorm,
    LayerNorm,
    LayerPlan,
    Linear,
    Planned,
    Record,
)
from fdp_audit.training.models import Model, Params, example_loss, label_free_loss
from fdp_audit.training.modules import ModuleModel

Route = Literal["auto", "ghost", "direct"]


def supports(model: Model) -> bool:
    """Whether the model has a layer plan (the built-in CNN, or a user module made of planned layers).

    Args:
        model: the architecture.

    Returns:
        True for a :class:`ModuleModel` with a plan.
    """
    return isinstance(model, ModuleModel) and model.plan is not None


def _plan(model: Model) -> LayerPlan:
    assert isinstance(model, ModuleModel) and model.plan is not None
    return model.plan


def floats_per_example(model: Model) -> tuple[int, int]:
    """Floats one example holds in a private step (per term of ℓ_priv) and in a plain forward and backward pass: per
    convolution its input unfolded (C_i·kh·kw per output position), its output and gradient, and the layer's
    per-example gradient (C_o·C_i·kh·kw, which only the direct route holds; counted for every convolution, so the
    estimate errs high); per norm x̂, the output and their gradients; per other step its output and gradient.

    Args:
        model: a model with a layer plan (:func:`supports`).

    Returns:
        ``(private step floats per term, forward and backward pass floats)`` per example, the second twice
        :func:`fdp_audit.training.layer_plan.activation_floats` (every activation and its gradient).
    """
    plan = _plan(model)
    private = math.prod(plan.in_shape)
    for planned in plan.steps:
        step, size = planned.step, math.prod(planned.out_shape)
        if isinstance(step, Conv):
            positions = size // step.out_channels
            private += positions * (step.fan_in + 2 * step.out_channels) + step.out_channels * step.fan_in
        elif isinstance(step, (GroupNorm, LayerNorm)):
            private += 4 * size
        else:
            private += 2 * size
    return private, 2 * layer_plan.activation_floats(plan)


def multiply_adds_per_example(model: Model) -> int:
    """Multiply-adds of one example's plain forward pass through the convolutions and linear layers (how much work a
    step is: a convolution's parameters are reused at every output position, so the parameter count understates
    it).

    Args:
        model: a model with a layer plan (:func:`supports`).

    Returns:
        The multiply-adds per example.
    """
    total = 0
    for planned in _plan(model).steps:
        step = planned.step
        if isinstance(step, Conv):
            total += math.prod(planned.out_shape) * step.fan_in
        elif isinstance(step, Linear):
            total += math.prod(planned.out_shape) * step.in_features
    return total


def _is_relu(step: layer_plan.Step) -> bool:
    fn = getattr(step, "fn", None)
    return isinstance(step, Elementwise) and (
        isinstance(fn, nn.ReLU) or (isinstance(fn, layer_plan.Call) and fn.target in (F.relu, torch.relu)
                                    and not fn.args and not fn.kwargs))


def _is_halving_average_pool(step: layer_plan.Step) -> bool:
    fn = getattr(step, "fn", None)
    return (isinstance(step, Channelwise) and isinstance(fn, nn.AvgPool2d) and fn.kernel_size in (2, (2, 2))
            and fn.stride in (2, (2, 2)) and fn.padding in (0, (0, 0)) and not fn.ceil_mode
            and fn.divisor_override is None)


def fused(plan: LayerPlan) -> LayerPlan:
    """The plan with every ReLU followed by a 2×2 average pooling as one :func:`relu_average_pool` step.

    Args:
        plan: a traced layer plan.

    Returns:
        The fused plan (the same computation, fewer passes over the activations).
    """
    steps: list[Planned] = []
    for planned in plan.steps:
        if steps and _is_halving_average_pool(planned.step) and _is_relu(steps[-1].step):
            steps[-1] = Planned(Channelwise(relu_average_pool), steps[-1].in_shape, planned.out_shape)
        else:
            steps.append(planned)
    return LayerPlan(tuple(steps), plan.in_shape)


def forward(model: Model, params: Params, x: torch.Tensor, records: list[Record] | None = None) -> torch.Tensor:
    """Logits ``[R, N, O]`` of R models on their own examples ``x`` ``[R, N, d]`` (grouped convolutions: model
    r's channels are the r-th block of every layer); with ``records``, each parametrised layer's input and output
    (:class:`fdp_audit.training.layer_plan.Record`).

    Args:
        model: a model with a layer plan (:func:`supports`).
        params: the stacked parameters by name, ``[R, *shape]``.
        x: each model's inputs ``[R, N, d]``.
        records: a list to append each parametrised layer's record to, or None.

    Returns:
        Logits ``[R, N, O]``.
    """
    return layer_plan.forward(fused(_plan(model)), params, x, records)


def _trace(model: Model, params: Params, x: torch.Tensor, y: torch.Tensor, public: ghost.PublicTerm | None,
           label_free: bool) -> tuple[list[Record], list[torch.Tensor]]:
    """Forward and backward of ``Σ_k ℓ(x_k) [+ Σ_k ℓ_pub(x'_k)]`` with x' stacked after x: every parametrised
    layer's record and the gradient of its output."""
    params = {name: value.detach() for name, value in params.items() if name != "canary.block"}
    k = x.shape[1]
    inputs = x if public is None else torch.cat([x, public.inputs.to(x.dtype)], dim=1)
    records: list[Record] = []
    with torch.enable_grad():
        logits = forward(model, params, inputs, records)
        losses = label_free_loss(logits[:, :k]) if label_free else example_loss(logits[:, :k], y)
        total = losses.sum()
        if public is not None:
            public_logits = logits[:, k:]
            total = total + (label_free_loss(public_logits) if public.label_free
                             else example_loss(public_logits, y)).sum()
        grads = torch.autograd.grad(total, [record.output for record in records])
    return records, list(grads)


def _halves(t: torch.Tensor, k: int, decomposed: bool) -> torch.Tensor:
    """Records' term minus public term along dim 0 (N = 2K stacked), or the records' term alone."""
    return t[:k] - t[k:] if decomposed else t


def _conv_route(route: Route, positions: int, out_channels: int, in_size: int) -> str:
    if route != "auto":
        return route
    return "ghost" if 2 * positions * (out_channels + in_size) < out_channels * in_size else "direct"


class _Layers:
    """Per-example squared norms ``[K, R]`` and weighted sums ``[R, P]`` of ∇ℓ_priv, layer by layer."""

    def __init__(self, model: Model, records: list[Record], grads: list[torch.Tensor], k: int, decomposed: bool,
                 route: Route, r: int):
        self.model, self.records, self.grads = model, records, grads
        self.k, self.decomposed, self.route, self.r = k, decomposed, route, r
        # per conv layer, computed once per step: the per-example weight gradients ``[K, R, C_o, C_i·kh·kw]`` of the
        # direct route (kept from the norm pass, so the clipped sum is a weighted sum of them), the bias and the
        # norm layers' ones
        self.gradients: dict[int, torch.Tensor] = {}
        self.bias_gradients: dict[int, torch.Tensor] = {}
        self.norm_terms: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}

    def _conv(self, i: int) -> Conv:
        step = self.records[i].layer.step
        assert isinstance(step, Conv)
        return step

    def _route(self, i: int) -> str:
        grad, conv = self.grads[i], self._conv(i)
        if conv.groups > 1:  # the Gram form would need one Gram pair per group: grouped layers go direct
            return "direct"
        positions = grad.shape[-1] * grad.shape[-2] * (2 if self.decomposed else 1)
        return _conv_route(self.route, positions, conv.out_channels, conv.fan_in)

    def _conv_terms(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The ghost route's ``(D, A)``: output gradients ``[K, R, C_o, P']`` and unfolded inputs
        ``[K, R, C_i·kh·kw, P']`` with P' = 2P positions for ℓ_priv (the public term's appended, its gradient
        negated)."""
        h, grad, conv = self.records[i].input, self.grads[i], self._conv(i)
        n = h.shape[0]
        unfolded = F.unfold(h, conv.kernel, conv.dilation, conv.padding, conv.stride)
        unfolded = unfolded.reshape(n, self.r, -1, grad.shape[-2] * grad.shape[-1])
        d = grad.reshape(n, self.r, -1, unfolded.shape[-1])
        if not self.decomposed:
            return d, unfolded
        k = self.k
        return torch.cat([d[:k], -d[k:]], dim=-1), torch.cat([unfolded[:k], unfolded[k:]], dim=-1)

    def _difference_factors(self, d: torch.Tensor, a: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The factors of ∇ℓ_priv in difference form, ``D A'ᵀ`` with ``D = [δ, δ − δ']`` and ``A = [a − a', a']``
        (positions concatenated), from the stacked form ``[δ, −δ'] [a, a']ᵀ`` of :meth:`_conv_terms`. Both give
        ``δaᵀ − δ'a'ᵀ``, but when the public input is close to the record (a nearly block-constant image under
        downsampling) the stacked form's Gram matrices hold large terms that cancel, and in float32 the ghost norm
        came out several times too small — an under-clip; the difference form has no large cancelling terms,
        as the linear layers' difference form (:mod:`fdp_audit.training.ghost`)."""
        if not self.decomposed:
            return d, a
        half = d.shape[-1] // 2
        record_d, public_d = d[..., :half], -d[..., half:]
        record_a, public_a = a[..., :half], a[..., half:]
        return torch.cat([record_d, record_d - public_d], dim=-1), torch.cat([record_a - public_a, public_a], dim=-1)

    def _direct_gradients(self, i: int) -> torch.Tensor:
        """Per-example weight gradients ``[K, R, C_o, C_i·kh·kw]`` of ℓ_priv, each the weight gradient of a
        convolution whose groups are the examples × models (no unfolded copy of the input). For ℓ_priv in the
        difference form ``δ(a − a')ᵀ + (δ − δ')a'ᵀ`` (see :meth:`_difference_factors`): no large terms cancel in
        float32."""
        h, grad = self.records[i].input, self.grads[i]
        if not self.decomposed:
            return self._grouped_weight_gradients(i, h, grad)
        k = self.k
        return (self._grouped_weight_gradients(i, h[:k] - h[k:], grad[:k])
                + self._grouped_weight_gradients(i, h[k:], grad[:k] - grad[k:]))

    def _grouped_weight_gradients(self, i: int, h: torch.Tensor, grad: torch.Tensor) -> torch.Tensor:
        """``Σ_p grad_p unfold(h)_pᵀ`` per example and model, ``[N, R, C_o, C_i·kh·kw]``."""
        conv = self._conv(i)
        n = h.shape[0]
        per_example = torch.nn.grad.conv2d_weight(
            h.reshape(1, -1, *h.shape[-2:]),
            (n * self.r * conv.out_channels, conv.in_channels // conv.groups, *conv.kernel),
            grad.reshape(1, -1, *grad.shape[-2:]), conv.stride, conv.padding, conv.dilation,
            groups=n * self.r * conv.groups)
        return per_example.reshape(n, self.r, conv.out_channels, -1)

    def _bias_gradients(self, i: int) -> torch.Tensor:
        if i not in self.bias_gradients:
            grad = self.grads[i]
            self.bias_gradients[i] = _halves(grad.sum(dim=(-1, -2)).reshape(grad.shape[0], self.r, -1), self.k,
                                             self.decomposed)
        return self.bias_gradients[i]

    def _norm_terms(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-example scale and shift gradients ``[K, R, size]`` of a GroupNorm (per channel: sums over the
        positions) or a LayerNorm (per normalised entry: sums over the leading dimensions it does not normalise),
        computed once per step for both the norms and the clipped sum."""
        if i in self.norm_terms:
            return self.norm_terms[i]
        grad, normalised, step = self.grads[i], self.records[i].input, self.records[i].layer.step
        n = grad.shape[0]
        if isinstance(step, GroupNorm):
            size, summed = step.channels, -1
            grad, normalised = grad.reshape(n, self.r, size, -1), normalised.reshape(n, self.r, size, -1)
        else:
            assert isinstance(step, LayerNorm)
            size, summed = math.prod(step.shape), -2
            grad, normalised = grad.reshape(n, self.r, -1, size), normalised.reshape(n, self.r, -1, size)
        scale = torch.linalg.vecdot(grad, normalised, dim=summed)  # fused: no product the size of the activations
        shift = grad.sum(dim=summed)
        self.norm_terms[i] = _halves(scale, self.k, self.decomposed), _halves(shift, self.k, self.decomposed)
        return self.norm_terms[i]

    def _fc_layer(self, i: int) -> ghost._Layer:
        a, k = self.records[i].input, self.k
        return ghost._Layer(a[:, :k], a[:, k:] if self.decomposed else None)

    def _fc_grads(self, i: int) -> tuple[torch.Tensor, torch.Tensor | None]:
        delta, k = self.grads[i], self.k
        return delta[:, :k], (delta[:, k:] if self.decomposed else None)

    def squared_norms(self) -> torch.Tensor:
        k, dtype, device = self.k, self.grads[0].dtype, self.grads[0].device
        total = torch.zeros(k, self.r, dtype=dtype, device=device)
        for i, record in enumerate(self.records):
            step = record.layer.step
            if isinstance(step, Conv):
                if self._route(i) == "ghost":
                    gd, ga = self._difference_factors(*self._conv_terms(i))
                    total += (gd.transpose(-1, -2) @ gd * (ga.transpose(-1, -2) @ ga)).sum(dim=(-1, -2))
                else:
                    self.gradients[i] = self._direct_gradients(i)
                    # one fused reduction instead of a squared copy and its sum: 2.5× faster on the CPU
                    total += torch.linalg.vector_norm(self.gradients[i], dim=(-1, -2)).square()
                if step.bias:
                    total += self._bias_gradients(i).square().sum(dim=-1)
            elif isinstance(step, Linear):
                products = ghost._inner_products(self._fc_layer(i), self.decomposed, step.bias)
                total += ghost._layer_squared_norms(products, *self._fc_grads(i)).T
            else:
                scale, shift = self._norm_terms(i)
                if step.scale:
                    total += scale.square().sum(dim=-1)
                if step.shift:
                    total += shift.square().sum(dim=-1)
        return total

    def weighted_sum(self, weights: torch.Tensor) -> torch.Tensor:
        """``Σ_k w_k ∇ℓ_priv,k`` per model ``[R, P]`` for weights ``[R, K]``, in ``Model.shapes()`` order."""
        parts: dict[str, torch.Tensor] = {}
        w = weights.T  # [K, R]
        for i, record in enumerate(self.records):
            step = record.layer.step
            if isinstance(step, Conv):
                if self._route(i) == "ghost":  # Σ_k Σ_p w_k D_kp A_kpᵀ: one batched product, examples and positions
                    d, a = self._conv_terms(i)
                    flat_d = (d * w[..., None, None]).permute(1, 2, 0, 3).reshape(self.r, d.shape[2], -1)
                    flat_a = a.permute(1, 0, 3, 2).reshape(self.r, -1, a.shape[2])
                    parts[f"{step.name}.weight"] = torch.bmm(flat_d, flat_a).flatten(1)
                else:
                    gradients = self.gradients[i] if i in self.gradients else self._direct_gradients(i)
                    parts[f"{step.name}.weight"] = torch.einsum("kr,kroi->roi", w, gradients).flatten(1)
                if step.bias:
                    parts[f"{step.name}.bias"] = (self._bias_gradients(i) * w[..., None]).sum(dim=0)
            elif isinstance(step, Linear):
                both = ghost._layer_weighted_sum(self._fc_layer(i), *self._fc_grads(i), weights)
                split = step.out_features * step.in_features
                parts[f"{step.name}.weight"] = both[:, :split]
                if step.bias:
                    parts[f"{step.name}.bias"] = both[:, split:]
            else:
                scale, shift = self._norm_terms(i)
                if step.scale:
                    parts[f"{step.name}.weight"] = (scale * w[..., None]).sum(dim=0)
                if step.shift:
                    parts[f"{step.name}.bias"] = (shift * w[..., None]).sum(dim=0)
        return torch.cat([parts[name] for name in self.model.shapes()], dim=1)


def _layers(model: Model, params: Params, batch: ghost.PrivateBatch, route: Route) -> _Layers:
    records, grads = _trace(model, params, batch.x, batch.y, batch.public, label_free=False)
    return _Layers(model, records, grads, batch.x.shape[1], batch.public is not None, route, batch.x.shape[0])


def private_norms(model: Model, params: Params, batch: ghost.PrivateBatch, route: Route = "auto") -> torch.Tensor:
    """Per-example gradient norms ``‖∇ℓ_priv‖`` (or ``‖∇ℓ‖`` without a public term), ``[R, K]``.

    Args:
        model: a model with a layer plan (:func:`supports`).
        params: the stacked parameters by name, ``[R, *shape]``.
        batch: the private batch ``[R, K, ...]`` and its loss.
        route: the convolutions' norm route: ``"ghost"``, ``"direct"``, or ``"auto"`` (whichever costs less per
            layer, module docstring).

    Returns:
        The norms ``[R, K]``.
    """
    return _layers(model, params, batch, route).squared_norms().clamp_min(0.0).sqrt().T


def clipped_private_sum(model: Model, params: Params, batch: ghost.PrivateBatch, clip_norm: float | None,
                        override: ghost.GradientOverride | None = None, route: Route = "auto") -> torch.Tensor:
    """``Σ_k valid_k · clip_C(∇ℓ_priv,k)`` per model, ``[R, P]`` (no clipping when ``clip_norm`` is None);
    overridden examples (a gradient canary) as in :func:`fdp_audit.training.ghost.clipped_private_sum`.

    Args:
        model: a model with a layer plan (:func:`supports`).
        params: the stacked parameters by name, ``[R, *shape]``.
        batch: the private batch ``[R, K, ...]`` and its loss.
        clip_norm: the clipping norm C, or None for no clipping.
        override: examples whose gradients are fixed vectors, or None.
        route: the convolutions' norm route: ``"ghost"``, ``"direct"`` or ``"auto"``.

    Returns:
        The clipped sums ``[R, P]``, flattened in parameter order.
    """
    layers = _layers(model, params, batch, route)
    weights = batch.valid.to(batch.x.dtype)
    computed = weights if override is None else weights * ~override.mask
    if clip_norm is not None:
        norms = layers.squared_norms().clamp_min(1e-24).sqrt().T
        computed = computed * torch.clamp(clip_norm / norms, max=1.0)
    return ghost.add_override(layers.weighted_sum(computed), weights, override, clip_norm)


def gradient_sum(model: Model, params: Params, x: torch.Tensor, y: torch.Tensor, weights: torch.Tensor,
                 label_free: bool = False) -> torch.Tensor:
    """``Σ_k w_k ∇ℓ(x_k)`` per model ``[R, P]`` (the public gradient): one forward and one backward pass of the
    weighted loss over all models.

    Args:
        model: a model with a layer plan (:func:`supports`).
        params: the stacked parameters by name, ``[R, *shape]``.
        x: model inputs ``[R, K, d]``.
        y: labels ``[R, K]``.
        weights: each example's weight ``[R, K]``.
        label_free: whether the loss is label DP's label-free one.

    Returns:
        The weighted gradient sums ``[R, P]``, flattened in parameter order.
    """
    names = list(model.shapes())
    leaves = {name: params[name].detach().requires_grad_(True) for name in names}
    with torch.enable_grad():
        logits = forward(model, leaves, x.to(leaves[names[0]].dtype))
        losses = label_free_loss(logits) if label_free else example_loss(logits, y)
        grads = torch.autograd.grad((losses * weights.to(losses.dtype)).sum(), [leaves[n] for n in names])
    return torch.cat([g.reshape(g.shape[0], -1) for g in grads], dim=1)
