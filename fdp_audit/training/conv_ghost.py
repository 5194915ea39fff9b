"""Per-example clipping of the private loss for the GroupNorm CNN (docs/images.md, docs/training.md), batched
over models, without ``torch.func`` and without a per-example gradient of the whole model.

Algorithm 1's private loss is ``ℓ_priv(x) = ℓ(x) − ℓ_pub(x')`` with ``x'`` the public loss's input built from
Ψ(x). One forward pass over the records and their public inputs stacked along the batch, and one backward pass
of ``Σ ℓ(x_k) + Σ ℓ_pub(x'_k)``, give every layer's input and output gradient for both terms (examples are
independent: GroupNorm normalises each example on its own). Per layer, with ``a`` / ``a'`` the inputs and
``δ`` / ``δ'`` the output gradients of the two terms:

* **Convolution** (weight ``[C_o, C_i, 3, 3]``): with ``A`` the unfolded input (``[C_i·9, P]`` over the P output
  positions) and ``D`` the output gradient ``[C_o, P]``, the per-example gradient is ``g = D Aᵀ − D' A'ᵀ``
  ``= [D, −D'] [A, A']ᵀ``. Its norm is computed by whichever route costs less per example:
  *ghost* (the Gram form ``‖g‖² = ⟨[D, −D']ᵀ[D, −D'], [A, A']ᵀ[A, A']⟩``, ``(2P)²(C_o + C_i·9)`` operations,
  nothing parameter-sized) or *direct* (``g`` itself, ``C_o·C_i·9·2P`` operations, one layer at a time, as
  the weight gradient of one convolution whose groups are the examples — no unfolded copy of the input);
  the bias gradient is ``Σ_p D − Σ_p D'``.
* **GroupNorm** scale and shift: ``Σ_p (δ x̂ − δ' x̂')`` and ``Σ_p (δ − δ')`` per channel, ``x̂`` the normalised
  input — a few numbers per example.
* **Linear** (the classifier): the rank-one ghost identity of :mod:`fdp_audit.training.ghost`.

The squared norms add over layers; the clipped sum ``Σ_k w_k g_k`` (``w_k = min(1, C/‖g_k‖)``) is, per layer,
one batched matrix product of the weighted output gradients with the inputs — no second backward pass.
DP-SGD (the full loss ℓ) is the same without the public term.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F

from fdp_audit.training import ghost
from fdp_audit.training.models import Model, Params, example_loss, label_free_loss, norm_groups

Route = Literal["auto", "ghost", "direct"]


def supports(model: Model) -> bool:
    return model.kind == "cnn"


def floats_per_example(model: Model) -> tuple[int, int]:
    """Floats one example holds in a private step (per term of ℓ_priv) and in a plain forward pass: per block the
    convolution's input unfolded (9·C_i per position), its output, x̂, the GroupNorm output and their gradients
    (6·C_o per position) and, on the direct route, the layer's gradient (C_o·C_i·9)."""
    side, previous, private, plain = model.image_side, 1, 0, 0
    for width in model.channels:
        positions = side * side
        private += positions * (9 * previous + 6 * width) + width * previous * 9
        plain += 4 * positions * width
        previous, side = width, side // 2
    return private + model.n_outputs * 4, plain + model.n_outputs


@dataclass
class _Trace:
    """Per layer: inputs and output gradients on the N stacked examples (records, then public inputs)."""

    conv_inputs: list[torch.Tensor]  # [N, R·C_i, H, W]
    conv_grads: list[torch.Tensor]  # [N, R·C_o, H, W]
    normalised: list[torch.Tensor]  # x̂ [N, R·C, H, W]
    norm_grads: list[torch.Tensor]  # ∂/∂(GroupNorm output) [N, R·C, H, W]
    fc_input: torch.Tensor  # [R, N, F]
    fc_grad: torch.Tensor  # [R, N, O]


class _ReluAveragePool(torch.autograd.Function):
    """``avg_pool2d(relu(y), 2)`` for even sides, with the same value and gradient as the two torch operators but
    about three times faster on the CPU, where ``avg_pool2d`` over NCHW and its backward pass are slow: the forward
    adds row pairs then column pairs of contiguous views; the backward spreads ``g / 4`` over each 2×2 block with
    one ``index_select`` per image and masks it by ``relu(y) > 0``."""

    @staticmethod
    def forward(ctx, y: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        n, c, h, w = y.shape
        rectified = F.relu(y)
        rows = rectified.view(n, c, h // 2, 2, w)
        pairs = (rows[:, :, :, 0] + rows[:, :, :, 1]).view(n, c, h // 2, w // 2, 2)
        ctx.save_for_backward(rectified)
        return (pairs[..., 0] + pairs[..., 1]).mul_(0.25)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        (rectified,) = ctx.saved_tensors
        h, w = rectified.shape[-2:]
        block = (torch.arange(h, device=grad.device)[:, None] // 2 * (w // 2)
                 + torch.arange(w, device=grad.device)[None, :] // 2)
        spread = (grad * 0.25).reshape(-1, grad.shape[-2] * grad.shape[-1]).index_select(1, block.flatten())
        return torch.ops.aten.threshold_backward(spread.view(rectified.shape), rectified, 0.0)


def relu_average_pool(y: torch.Tensor) -> torch.Tensor:
    """``avg_pool2d(relu(y), 2)`` of ``y`` ``[N, C, H, W]`` (odd sides drop their last row or column)."""
    if y.shape[-1] % 2 or y.shape[-2] % 2:
        return F.avg_pool2d(F.relu(y), 2)
    return _ReluAveragePool.apply(y)


def forward(model: Model, params: Params, x: torch.Tensor, keep: bool = False
            ) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """Logits ``[R, N, O]`` of R models on their own examples ``x`` ``[R, N, H·W]`` (grouped convolutions: model
    r's channels are the r-th block of every layer). With ``keep``, also the intermediate tensors the trace
    differentiates: per block the convolution's input and output, x̂ and the GroupNorm output, then the
    classifier's input."""
    r, n = x.shape[:2]
    side = model.image_side
    h = x.transpose(0, 1).reshape(n, r, side, side)
    saved: list[torch.Tensor] = []
    for i, width in enumerate(model.channels, start=1):
        weight = params[f"conv{i}.weight"]
        z = F.conv2d(h, weight.reshape(r * width, *weight.shape[2:]), params[f"conv{i}.bias"].reshape(-1),
                     padding=1, groups=r)
        if keep:
            z = z.detach().requires_grad_(True) if i == 1 else z
            saved += [h, z]
        normalised = F.group_norm(z, r * norm_groups(width))
        y = normalised * params[f"norm{i}.weight"].reshape(1, -1, 1, 1) + params[f"norm{i}.bias"].reshape(1, -1, 1, 1)
        if keep:
            saved += [normalised, y]
        h = relu_average_pool(y)
    features = h.reshape(n, r, -1).transpose(0, 1)
    if keep:
        saved.append(features)
    return torch.baddbmm(params["fc.bias"][:, None, :], features, params["fc.weight"].transpose(1, 2)), saved


def _trace(model: Model, params: Params, x: torch.Tensor, y: torch.Tensor, public: ghost.PublicTerm | None,
           label_free: bool) -> _Trace:
    """Forward and backward of ``Σ_k ℓ(x_k) [+ Σ_k ℓ_pub(x'_k)]`` with x' stacked after x."""
    params = {name: value.detach() for name, value in params.items() if name != "canary.block"}
    k = x.shape[1]
    inputs = x if public is None else torch.cat([x, public.inputs.to(x.dtype)], dim=1)
    with torch.enable_grad():
        logits, saved = forward(model, params, inputs, keep=True)
        losses = label_free_loss(logits[:, :k]) if label_free else example_loss(logits[:, :k], y)
        total = losses.sum()
        if public is not None:
            public_logits = logits[:, k:]
            total = total + (label_free_loss(public_logits) if public.label_free
                             else example_loss(public_logits, y)).sum()
        blocks = len(model.channels)
        wanted = [saved[4 * i + 1] for i in range(blocks)] + [saved[4 * i + 3] for i in range(blocks)]
        grads = torch.autograd.grad(total, [*wanted, logits])
    fc_input = saved[-1].detach()
    return _Trace([saved[4 * i].detach() for i in range(blocks)], list(grads[:blocks]),
                  [saved[4 * i + 2].detach() for i in range(blocks)], list(grads[blocks:2 * blocks]),
                  fc_input, grads[-1])


def _halves(t: torch.Tensor, k: int, decomposed: bool) -> torch.Tensor:
    """Records' term minus public term along dim 0 (N = 2K stacked), or the records' term alone."""
    return t[:k] - t[k:] if decomposed else t


def _conv_route(route: Route, positions: int, out_channels: int, in_size: int) -> str:
    if route != "auto":
        return route
    return "ghost" if 2 * positions * (out_channels + in_size) < out_channels * in_size else "direct"


class _Layers:
    """Per-example squared norms ``[K, R]`` and weighted sums ``[R, P]`` of ∇ℓ_priv, layer by layer."""

    def __init__(self, model: Model, trace: _Trace, k: int, decomposed: bool, route: Route):
        self.model, self.trace, self.k, self.decomposed, self.route = model, trace, k, decomposed, route
        self.r = trace.fc_input.shape[0]
        # per conv layer, computed once per step: the per-example weight gradients ``[K, R, C_o, C_i·9]`` of the
        # direct route (kept from the norm pass, so the clipped sum is a weighted sum of them) and the bias ones
        self.gradients: dict[int, torch.Tensor] = {}
        self.bias_gradients: dict[int, torch.Tensor] = {}

    def _route(self, i: int) -> str:
        grad, width = self.trace.conv_grads[i], self.model.channels[i]
        previous = 1 if i == 0 else self.model.channels[i - 1]
        positions = grad.shape[-1] * grad.shape[-2] * (2 if self.decomposed else 1)
        return _conv_route(self.route, positions, width, 9 * previous)

    def _conv_terms(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The ghost route's ``(D, A)``: output gradients ``[K, R, C_o, P']`` and unfolded inputs
        ``[K, R, C_i·9, P']`` with P' = 2P positions for ℓ_priv (the public term's appended, its gradient
        negated)."""
        h, grad = self.trace.conv_inputs[i], self.trace.conv_grads[i]
        n = h.shape[0]
        unfolded = F.unfold(h, 3, padding=1).reshape(n, self.r, -1, grad.shape[-2] * grad.shape[-1])
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
        """Per-example weight gradients ``[K, R, C_o, C_i·9]`` of ℓ_priv, each the weight gradient of a convolution
        whose groups are the examples × models (no unfolded copy of the input). For ℓ_priv in the difference form
        ``δ(a − a')ᵀ + (δ − δ')a'ᵀ`` (see :meth:`_difference_factors`): no large terms cancel in float32."""
        h, grad = self.trace.conv_inputs[i], self.trace.conv_grads[i]
        if not self.decomposed:
            return self._grouped_weight_gradients(h, grad)
        k = self.k
        return (self._grouped_weight_gradients(h[:k] - h[k:], grad[:k])
                + self._grouped_weight_gradients(h[k:], grad[:k] - grad[k:]))

    def _grouped_weight_gradients(self, h: torch.Tensor, grad: torch.Tensor) -> torch.Tensor:
        """``Σ_p grad_p unfold(h)_pᵀ`` per example and model, ``[N, R, C_o, C_i·9]``."""
        n, in_channels, width = h.shape[0], h.shape[1] // self.r, grad.shape[1] // self.r
        per_example = torch.nn.grad.conv2d_weight(
            h.reshape(1, -1, *h.shape[-2:]), (n * self.r * width, in_channels, 3, 3),
            grad.reshape(1, -1, *grad.shape[-2:]), padding=1, groups=n * self.r)
        return per_example.reshape(n, self.r, width, -1)

    def _bias_gradients(self, i: int) -> torch.Tensor:
        if i not in self.bias_gradients:
            grad = self.trace.conv_grads[i]
            self.bias_gradients[i] = _halves(grad.sum(dim=(-1, -2)).reshape(grad.shape[0], self.r, -1), self.k,
                                             self.decomposed)
        return self.bias_gradients[i]

    def squared_norms(self) -> torch.Tensor:
        k, t = self.k, self.trace
        total = torch.zeros(k, self.r, dtype=t.fc_input.dtype, device=t.fc_input.device)
        for i in range(len(self.model.channels)):
            if self._route(i) == "ghost":
                gd, ga = self._difference_factors(*self._conv_terms(i))
                total += (gd.transpose(-1, -2) @ gd * (ga.transpose(-1, -2) @ ga)).sum(dim=(-1, -2))
            else:
                self.gradients[i] = self._direct_gradients(i)
                total += self.gradients[i].square().sum(dim=(-1, -2))
            total += self._bias_gradients(i).square().sum(dim=-1)
            scale, shift = self._norm_terms(i)
            total += scale.square().sum(dim=-1) + shift.square().sum(dim=-1)
        products = ghost._inner_products(self._fc_layer(), self.decomposed)
        fc_delta, fc_delta_public = self._fc_grads()
        return total + ghost._layer_squared_norms(products, fc_delta, fc_delta_public).T

    def _norm_terms(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-example GroupNorm scale and shift gradients ``[K, R, C]``."""
        grad, normalised = self.trace.norm_grads[i], self.trace.normalised[i]
        n = grad.shape[0]
        scale = (grad * normalised).sum(dim=(-1, -2)).reshape(n, self.r, -1)
        shift = grad.sum(dim=(-1, -2)).reshape(n, self.r, -1)
        return _halves(scale, self.k, self.decomposed), _halves(shift, self.k, self.decomposed)

    def _fc_layer(self) -> ghost._Layer:
        a, k = self.trace.fc_input, self.k
        return ghost._Layer(a[:, :k], a[:, k:] if self.decomposed else None)

    def _fc_grads(self) -> tuple[torch.Tensor, torch.Tensor | None]:
        delta, k = self.trace.fc_grad, self.k
        return delta[:, :k], (delta[:, k:] if self.decomposed else None)

    def weighted_sum(self, weights: torch.Tensor) -> torch.Tensor:
        """``Σ_k w_k ∇ℓ_priv,k`` per model ``[R, P]`` for weights ``[R, K]``, in ``Model.shapes()`` order."""
        parts = []
        w = weights.T  # [K, R]
        for i in range(len(self.model.channels)):
            if self._route(i) == "ghost":  # Σ_k Σ_p w_k D_kp A_kpᵀ: one batched product, examples and positions
                d, a = self._conv_terms(i)
                flat_d = (d * w[..., None, None]).permute(1, 2, 0, 3).reshape(self.r, d.shape[2], -1)
                flat_a = a.permute(1, 0, 3, 2).reshape(self.r, -1, a.shape[2])
                parts.append(torch.bmm(flat_d, flat_a).flatten(1))
            else:
                gradients = self.gradients[i] if i in self.gradients else self._direct_gradients(i)
                parts.append(torch.einsum("kr,kroi->roi", w, gradients).flatten(1))
            parts.append((self._bias_gradients(i) * w[..., None]).sum(dim=0))
            scale, shift = self._norm_terms(i)
            parts += [(scale * w[..., None]).sum(dim=0), (shift * w[..., None]).sum(dim=0)]
        parts.append(ghost._layer_weighted_sum(self._fc_layer(), *self._fc_grads(), weights))
        return torch.cat(parts, dim=1)


def _layers(model: Model, params: Params, batch: ghost.PrivateBatch, route: Route) -> _Layers:
    trace = _trace(model, params, batch.x, batch.y, batch.public, label_free=False)
    return _Layers(model, trace, batch.x.shape[1], batch.public is not None, route)


def private_norms(model: Model, params: Params, batch: ghost.PrivateBatch, route: Route = "auto") -> torch.Tensor:
    """Per-example gradient norms ``‖∇ℓ_priv‖`` (or ``‖∇ℓ‖`` without a public term), ``[R, K]``."""
    return _layers(model, params, batch, route).squared_norms().clamp_min(0.0).sqrt().T


def clipped_private_sum(model: Model, params: Params, batch: ghost.PrivateBatch, clip_norm: float | None,
                        override: ghost.GradientOverride | None = None, route: Route = "auto") -> torch.Tensor:
    """``Σ_k valid_k · clip_C(∇ℓ_priv,k)`` per model, ``[R, P]`` (no clipping when ``clip_norm`` is None);
    overridden examples (a gradient canary) as in :func:`fdp_audit.training.ghost.clipped_private_sum`."""
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
    weighted loss over all models."""
    names = list(model.shapes())
    leaves = {name: params[name].detach().requires_grad_(True) for name in names}
    with torch.enable_grad():
        logits, _ = forward(model, leaves, x.to(leaves[names[0]].dtype))
        losses = label_free_loss(logits) if label_free else example_loss(logits, y)
        grads = torch.autograd.grad((losses * weights.to(losses.dtype)).sum(), [leaves[n] for n in names])
    return torch.cat([g.reshape(g.shape[0], -1) for g in grads], dim=1)
