"""DP-SGD written by hand in plain PyTorch: Poisson sampling, per-example gradients from torch.func, clipping to
C, Gaussian noise of standard deviation z·C on the sum, averaged over the expected batch, one SGD step."""

import torch
import torch.nn.functional as F
from torch.func import functional_call, grad, vmap

NOISE_MULTIPLIER = 1.0
SAMPLE_RATE = 0.2
STEPS = 10
CLIP_NORM = 1.0
LR = 0.5


def train(model, dataset, seed):
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    inputs, labels = dataset[:]

    def loss(params, x, y):
        return F.cross_entropy(functional_call(model, params, (x[None],)), y[None])

    per_example_grad = vmap(grad(loss), in_dims=(None, 0, 0))
    for _ in range(STEPS):
        batch = torch.rand(len(dataset), generator=generator) < SAMPLE_RATE
        params = {name: p.detach() for name, p in model.named_parameters()}
        grads = per_example_grad(params, inputs[batch], labels[batch])
        norms = torch.stack([g.flatten(1).norm(dim=1) for g in grads.values()]).norm(dim=0)
        factor = (CLIP_NORM / (norms + 1e-12)).clamp(max=1.0)
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=generator) * NOISE_MULTIPLIER * CLIP_NORM
            p.grad = (torch.einsum("b,b...->...", factor, grads[name]) + noise) / (SAMPLE_RATE * len(dataset))
        optimizer.step()
    return model
