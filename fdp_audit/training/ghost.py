"""Ghost clipping of the private loss for stacks of linear layers (SPEC 6, issue 12).

For a linear layer ``z = W a + b`` and a per-example loss ℓ, the per-example gradient is rank one:
``∇_W ℓ = δ aᵀ`` and ``∇_b ℓ = δ`` with ``a`` the layer's input and ``δ = ∂ℓ/∂z``. Algorithm 1's private
loss ``ℓ_priv(x) = ℓ(x) − ℓ_pub(Ψ(x))`` (SPEC 2.3) is a difference of two such losses, one on the record
``x`` and one on the completed public input ``x'`` built from Ψ(x), so its per-example gradient is
``δ aᵀ − δ' a'ᵀ`` (and ``δ − δ'`` for the bias). With the bias folded in as an input constant 1
(``ã = [a, 1]``) its squared norm is, summed over layers,

    ‖g‖² = ‖δ‖²‖ã‖² + ‖δ'‖²‖ã'‖² − 2 (δ·δ')(ã·ã'),

a few inner products per example and layer; DP-SGD (the full loss ℓ) keeps only the first term. No
per-example gradient is materialised. The clipped sum ``Σ_k w_k ∇ℓ_priv,k`` with ``w_k = min(1, C/‖g_k‖)``
is the gradient of the re-weighted loss ``Σ_k w_k ℓ_priv,k``; since the δ of every layer are already known
from the norm pass, its weight part is one batched matrix product per layer, ``Σ_k w_k δ_k ã_kᵀ``.

Everything carries the engine's leading model dimension: parameters ``[R, ...]`` and examples
``[R, K, ...]`` (matrix products are ``bmm`` over models). Padding of the Poisson batch enters as zero
weights. The inner products are accumulated in float64: ‖g‖² is a difference of terms that can be much
larger than it (a small protected part of a large full-loss gradient), and rounding there would misstate the
norm that clipping relies on.

Layers other than linear (and ReLU between them) fall back to the materialised ``torch.func`` path of
:mod:`fdp_audit.training.engine`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from fdp_audit.training.models import Model, Params


def supports(model: Model) -> bool:
    """Whether the model is a stack of linear layers with ReLU between them (logistic regression, MLP)."""
    return model.kind in ("logistic", "mlp")


@dataclass(frozen=True)
class GradientOverride:
    """Per-example gradients fixed to given vectors (the gradient canary of the audit games): where
    ``mask[r, k]`` holds, example k of model r has gradient ``vectors[r]`` instead of the computed one."""

    mask: torch.Tensor  # [R, K] bool
    vectors: torch.Tensor  # [R, P]


@dataclass(frozen=True)
class _Trace:
    """Per-layer inputs ``a`` ``[R, N, in]`` and output gradients ``δ`` ``[R, N, out]`` of N per-example
    losses. For the decomposed private loss the rows are the K records followed by their K completed public
    inputs, entering ℓ_priv with sign +1 and −1 (``paired``)."""

    inputs: tuple[torch.Tensor, ...]
    output_grads: tuple[torch.Tensor, ...]
    paired: bool


def _logit_gradients(logits: torch.Tensor, y: torch.Tensor, label_free: bool) -> torch.Tensor:
    """``∂ℓ/∂logits`` per example for the losses of :mod:`fdp_audit.training.models`: logistic loss
    ``σ(z) − y``, cross-entropy ``softmax(z) − onehot(y)``, and the label-free ``softplus`` /
    ``logsumexp`` of label DP, whose gradients are ``σ(z)`` / ``softmax(z)``."""
    if logits.shape[-1] == 1:
        probabilities = torch.sigmoid(logits)
        return probabilities if label_free else probabilities - y[..., None].to(logits.dtype)
    probabilities = torch.softmax(logits, dim=-1)
    if label_free:
        return probabilities
    return probabilities.scatter_add(-1, y[..., None], -torch.ones_like(probabilities[..., :1]))


def _private_trace(model: Model, params: Params, x: torch.Tensor, y: torch.Tensor,
                   public_inputs: torch.Tensor | None, label_free_public: bool) -> _Trace:
    """Forward pass of ``Model.forward`` (linear layers, ReLU between) and backward pass of the per-example
    losses down to every layer's output. The completed public inputs, if any, are stacked behind the
    records so that both terms of ℓ_priv share each layer's matrix product."""
    k = x.shape[1]
    h = x if public_inputs is None else torch.cat([x, public_inputs.to(x.dtype)], dim=1)
    n_layers = len(model.hidden) + 1
    inputs, pre_activations = [], []
    for i in range(n_layers):
        inputs.append(h)
        z = torch.baddbmm(params[f"layer{i}.bias"][:, None, :], h, params[f"layer{i}.weight"].transpose(1, 2))
        pre_activations.append(z)
        h = torch.relu(z) if i < n_layers - 1 else z
    delta = _logit_gradients(h[:, :k], y, False)
    if public_inputs is not None:
        delta = torch.cat([delta, _logit_gradients(h[:, k:], y, label_free_public)], dim=1)
    output_grads = [delta]
    for i in range(n_layers - 1, 0, -1):
        # ReLU passes the gradient where its input was positive (torch's convention at 0 too).
        delta = torch.bmm(delta, params[f"layer{i}.weight"]) * (pre_activations[i - 1] > 0)
        output_grads.append(delta)
    return _Trace(tuple(inputs), tuple(reversed(output_grads)), public_inputs is not None)


def _squared_norms(trace: _Trace) -> torch.Tensor:
    """``‖∇ℓ_priv‖²`` per example ``[R, K]`` (float64) from the inner products of the module docstring;
    the bias is the input constant 1, hence the ``+ 1`` on the activation products."""
    total = torch.zeros((), dtype=torch.float64)
    for a, delta in zip(trace.inputs, trace.output_grads):
        a, delta = a.double(), delta.double()
        if not trace.paired:
            total = total + delta.square().sum(-1) * (a.square().sum(-1) + 1.0)
            continue
        k = a.shape[1] // 2
        a1, a2, d1, d2 = a[:, :k], a[:, k:], delta[:, :k], delta[:, k:]
        total = total + (d1.square().sum(-1) * (a1.square().sum(-1) + 1.0)
                         + d2.square().sum(-1) * (a2.square().sum(-1) + 1.0)
                         - 2.0 * (d1 * d2).sum(-1) * ((a1 * a2).sum(-1) + 1.0))
    return total.clamp_min(0.0)  # rounding can leave -1e-20 where the two terms cancel exactly


def _weighted_sum(trace: _Trace, weights: torch.Tensor) -> torch.Tensor:
    """``Σ_k w_k ∇ℓ_priv,k`` flattened to ``[R, P]`` in ``Model.shapes()`` order: per layer one ``bmm``
    of the weighted output gradients with the inputs (the weight part of a re-weighted backward pass)."""
    coefficients = torch.cat([weights, -weights], dim=1) if trace.paired else weights
    parts = []
    for a, delta in zip(trace.inputs, trace.output_grads):
        weighted = delta * coefficients[..., None].to(delta.dtype)
        parts += [torch.bmm(weighted.transpose(1, 2), a).flatten(1), weighted.sum(dim=1)]
    return torch.cat(parts, dim=-1)


def private_norms(model: Model, params: Params, x: torch.Tensor, y: torch.Tensor,
                  public_inputs: torch.Tensor | None = None, label_free_public: bool = False) -> torch.Tensor:
    """Per-example gradient norms ``[R, K]`` (float64) of ℓ_priv, never materialising the gradients.

    ``x`` ``[R, K, d]`` and ``y`` ``[R, K]`` are the records; ``public_inputs`` ``[R, K, d]`` the completed
    public inputs of the decomposed loss ℓ − ℓ_pub∘Ψ (None: the full loss ℓ, DP-SGD), whose public term is
    the label-free loss of label DP when ``label_free_public``.
    """
    return _squared_norms(_private_trace(model, params, x, y, public_inputs, label_free_public)).sqrt()


def clipped_private_sum(model: Model, params: Params, x: torch.Tensor, y: torch.Tensor,
                        public_inputs: torch.Tensor | None, label_free_public: bool, valid: torch.Tensor,
                        clip_norm: float | None, override: GradientOverride | None = None) -> torch.Tensor:
    """``Σ_k valid_k · clip_C(∇ℓ_priv,k)`` per model, ``[R, P]`` (no clipping when ``clip_norm`` is None).

    Overridden examples (a gradient canary) have a known gradient, hence a known norm: they get weight 0
    in the re-weighted pass and their clipped vector is added directly.
    """
    trace = _private_trace(model, params, x, y, public_inputs, label_free_public)
    weights = valid.to(x.dtype)
    computed = weights if override is None else weights * ~override.mask
    if clip_norm is not None:
        norms = _squared_norms(trace).sqrt()
        computed = computed * torch.clamp(clip_norm / norms.clamp_min(1e-12), max=1.0).to(x.dtype)
    flat = _weighted_sum(trace, computed)
    if override is not None:
        vectors = override.vectors.to(flat.dtype)
        count = (weights * override.mask).sum(dim=1)
        if clip_norm is not None:
            norms = vectors.double().norm(dim=1)
            count = count * torch.clamp(clip_norm / norms.clamp_min(1e-12), max=1.0).to(flat.dtype)
        flat = flat + count[:, None] * vectors
    return flat
