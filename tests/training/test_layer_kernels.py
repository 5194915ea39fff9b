"""The fused layer kernels (docs/images.md) against the torch operators they replace: values and gradients, on
ordinary and on null inputs."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from fdp_audit.training import layer_kernels


@pytest.mark.parametrize("shape", [(3, 4, 8, 6), (2, 3, 4, 4), (2, 2, 7, 6), (2, 2, 6, 5)], ids=str)
def test_relu_average_pool_equals_torch_in_value_and_gradient(shape):
    """The fast pooling kernel against ``avg_pool2d(relu(y), 2)`` (odd sides fall back to it), with exact zeros
    among the inputs (the ReLU's kink) and on a null input (all zeros: value and gradient zero)."""
    generator = torch.Generator().manual_seed(sum(shape))
    y = torch.randn(shape, generator=generator, dtype=torch.float64)
    y[..., ::3, ::2] = 0.0
    grad = torch.randn(*shape[:2], shape[2] // 2, shape[3] // 2, generator=generator, dtype=torch.float64)
    for value in (y, torch.zeros_like(y)):
        ours_input, torch_input = value.clone().requires_grad_(True), value.clone().requires_grad_(True)
        ours, expected = layer_kernels.relu_average_pool(ours_input), F.avg_pool2d(F.relu(torch_input), 2)
        torch.testing.assert_close(ours, expected, rtol=1e-14, atol=1e-14)
        ours.backward(grad)
        expected.backward(grad)
        torch.testing.assert_close(ours_input.grad, torch_input.grad, rtol=1e-14, atol=1e-14)



@pytest.mark.parametrize(("shape", "groups", "eps"),
                         [((5, 12, 6, 4), 3, 1e-5), ((4, 6, 5), 2, 1e-3), ((3, 8), 4, 1e-5)], ids=str)
def test_group_norm_equals_torch_in_value_and_gradients(shape, groups, eps):
    """The fused GroupNorm against ``F.group_norm`` with scale and shift: output, x̂, and the gradients of the input,
    scale and shift; on a null input (constant per group: x̂ = 0) too."""
    generator = torch.Generator().manual_seed(len(shape))
    z = torch.randn(shape, generator=generator, dtype=torch.float64)
    weight, bias = (torch.randn(shape[1], generator=generator, dtype=torch.float64) for _ in range(2))
    grad = torch.randn(shape, generator=generator, dtype=torch.float64)
    for value in (z, torch.zeros_like(z)):
        ours_inputs = [t.clone().requires_grad_(True) for t in (value, weight, bias)]
        torch_inputs = [t.clone().requires_grad_(True) for t in (value, weight, bias)]
        ours, normalised = layer_kernels.group_norm(ours_inputs[0], groups, *ours_inputs[1:], eps=eps)
        expected = F.group_norm(torch_inputs[0], groups, *torch_inputs[1:], eps=eps)
        torch.testing.assert_close(ours, expected, rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(normalised, F.group_norm(value, groups, eps=eps), rtol=1e-12, atol=1e-12)
        ours.backward(grad)
        expected.backward(grad)
        for got, want in zip(ours_inputs, torch_inputs):
            torch.testing.assert_close(got.grad, want.grad, rtol=1e-12, atol=1e-12)
