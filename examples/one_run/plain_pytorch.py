"""DP-SGD written by hand in plain PyTorch (Poisson sampling, per-example gradients from torch.func, clipping to C,
Gaussian noise of standard deviation z·C on the sum, averaged over the expected batch), audited in one run: the
lines marked ``# one-run audit`` are all it adds (docs/one_run.md).

    python examples/one_run/plain_pytorch.py examples/one_run/audit.yaml model.safetensors
    fdp-audit audit model.safetensors --config examples/one_run/audit.yaml --canaries model.canaries.json
"""

import sys

import torch
import torch.nn.functional as F
from model import make_model
from torch.func import functional_call, grad, vmap
from torch.utils.data import TensorDataset

import fdp_audit  # one-run audit
from fdp_audit.config import load_config
from fdp_audit.data.prepare import prepare_data

EPOCHS = 2
BATCH_SIZE = 201  # expected: each record is in a step's batch with probability BATCH_SIZE / len(dataset)
LR = 0.5
NOISE_MULTIPLIER = 1.0
CLIP_NORM = 1.0
CANARIES = 1000


def train(model: torch.nn.Module, dataset: TensorDataset, seed: int) -> torch.nn.Module:
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    inputs, labels = dataset[:]
    sample_rate = BATCH_SIZE / len(dataset)
    steps_per_epoch = round(1 / sample_rate)

    def loss(params, x, y):
        return F.cross_entropy(functional_call(model, params, (x[None],)), y[None])

    per_example_grad = vmap(grad(loss), in_dims=(None, 0, 0))
    for _ in range(EPOCHS * steps_per_epoch):
        batch = torch.rand(len(dataset), generator=generator) < sample_rate
        params = {name: p.detach() for name, p in model.named_parameters()}
        grads = per_example_grad(params, inputs[batch], labels[batch])
        norms = torch.stack([g.flatten(1).norm(dim=1) for g in grads.values()]).norm(dim=0)
        factor = (CLIP_NORM / (norms + 1e-12)).clamp(max=1.0)
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=generator) * NOISE_MULTIPLIER * CLIP_NORM
            p.grad = (torch.einsum("b,b...->...", factor, grads[name]) + noise) / (sample_rate * len(dataset))
        optimizer.step()
    return model


def main(config_path: str, out: str) -> None:
    config = load_config(config_path)
    x, y = prepare_data(config.data, config.seed).tensors()
    canaries = fdp_audit.GradientCanaries.from_config(config, CANARIES)  # one-run audit
    dataset = canaries.add_to(TensorDataset(x, y))  # one-run audit
    torch.manual_seed(config.seed)
    model = canaries.wrap(make_model(x.shape[1], int(y.max()) + 1))  # one-run audit
    with canaries.observing():  # one-run audit: train() builds its own optimizer
        train(model, dataset, config.seed)
    canaries.save(model, out)  # one-run audit: weights, release and manifest


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
