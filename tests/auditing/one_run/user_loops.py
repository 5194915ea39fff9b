"""Training loops as users write them, correct and with the faults a one-run audit must catch (configs name them as
``mechanism.training``). Each trains for EPOCHS epochs sampling each record at Opacus's rate for loader batches of
BATCH_SIZE, 1 / ⌈n / BATCH_SIZE⌉; the configs of tests/auditing/one_run/test_user_loop_audits.py state that claim."""

import math

import torch
import torch.nn.functional as F
from opacus import PrivacyEngine
from torch import nn
from torch.func import functional_call, grad, vmap
from torch.utils.data import DataLoader

EPOCHS = 2
BATCH_SIZE = 211  # 10 batches for 1,900 to 2,110 records: configs/opacus_one_run.yaml
LR = 0.5
NOISE_MULTIPLIER = 1.0
CLIP_NORM = 1.0


def _opacus(module, dataset, seed, epochs=EPOCHS, noise_scale_after=1.0, plain_epoch=False, pass_by_hand=False):
    loader = DataLoader(dataset, batch_size=BATCH_SIZE, generator=torch.Generator().manual_seed(seed))
    optimizer = torch.optim.SGD(module.parameters(), lr=LR)
    engine = PrivacyEngine()
    model, optimizer, private_loader = engine.make_private(
        module=module, optimizer=optimizer, data_loader=loader, noise_multiplier=NOISE_MULTIPLIER,
        max_grad_norm=CLIP_NORM, noise_generator=torch.Generator().manual_seed(seed + 1))
    optimizer.noise_multiplier *= noise_scale_after
    for _ in range(epochs):
        for x, y in private_loader:
            optimizer.zero_grad()
            F.cross_entropy(model(x), y).backward()
            optimizer.step()
    if plain_epoch:  # a last pass "to polish the model", without the privacy engine
        model.disable_hooks()
        plain = torch.optim.SGD(model.parameters(), lr=LR)
        for x, y in loader:
            plain.zero_grad()
            F.cross_entropy(model(x), y).backward()
            plain.step()
    if pass_by_hand:  # the same polish written by hand: no optimizer step at all
        for x, y in loader:
            model.zero_grad()
            F.cross_entropy(model(x), y).backward()
            with torch.no_grad():
                for p in model.parameters():
                    p -= LR * p.grad
    return model


def opacus_correct(module, dataset, seed):
    return _opacus(module, dataset, seed)


def opacus_less_noise(module, dataset, seed):
    """make_private, then the noise multiplier overwritten with 0.3 of itself."""
    return _opacus(module, dataset, seed, noise_scale_after=0.3)


def opacus_plain_epoch(module, dataset, seed):
    return _opacus(module, dataset, seed, plain_epoch=True)


def opacus_pass_by_hand(module, dataset, seed):
    """The Opacus loop, then one non-private pass that updates the parameters by hand (``p -= lr·p.grad``)."""
    return _opacus(module, dataset, seed, pass_by_hand=True)


def opacus_twice_the_epochs(module, dataset, seed):
    return _opacus(module, dataset, seed, epochs=2 * EPOCHS)


def _by_hand(module, dataset, seed, noise=NOISE_MULTIPLIER, clip=True, epochs=EPOCHS, lr=LR, rate=None):
    """DP-SGD by hand: Poisson sampling, torch.func per-example gradients, clipping, noise z·C on the sum."""
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.SGD(module.parameters(), lr=lr)
    inputs, labels = dataset[:]
    rate = rate or 1 / math.ceil(len(dataset) / BATCH_SIZE)  # by default Opacus's rate for the same batch size

    def loss(params, x, y):
        return F.cross_entropy(functional_call(module, params, (x[None],)), y[None])

    per_example = vmap(grad(loss), in_dims=(None, 0, 0))
    for _ in range(epochs * round(1 / rate)):
        batch = torch.rand(len(dataset), generator=generator) < rate
        grads = per_example({k: p.detach() for k, p in module.named_parameters()}, inputs[batch], labels[batch])
        norms = torch.stack([g.flatten(1).norm(dim=1) for g in grads.values()]).norm(dim=0)
        factor = (CLIP_NORM / (norms + 1e-12)).clamp(max=1.0) if clip else torch.ones_like(norms)
        for name, p in module.named_parameters():
            p.grad = (torch.einsum("b,b...->...", factor, grads[name])
                      + torch.randn(p.shape, generator=generator) * noise * CLIP_NORM) / (rate * len(dataset))
        optimizer.step()
    return module


def by_hand_correct(module, dataset, seed):
    return _by_hand(module, dataset, seed)


def by_hand_no_noise(module, dataset, seed):
    return _by_hand(module, dataset, seed, noise=0.0)


SMALL_BATCH_RATE = 0.02  # expected batches of about 40 of the 2,000 records: 50 steps an epoch
SMALL_BATCH_EPOCHS = 40  # T = 2,000


def by_hand_small_batches_no_noise(module, dataset, seed):
    """DP-SGD by hand, clipped (C = 1) without noise, at sample rate 0.02 for 40 epochs (2,000 steps), learning
    rate 4."""
    return _by_hand(module, dataset, seed, noise=0.0, epochs=SMALL_BATCH_EPOCHS, lr=8 * LR, rate=SMALL_BATCH_RATE)


def by_hand_no_clipping(module, dataset, seed):
    return _by_hand(module, dataset, seed, clip=False)


def non_private(module, dataset, seed, epochs=10):
    """What a training without privacy does: shuffled batches of 64, Adam, no clipping, no noise."""
    optimizer = torch.optim.Adam(module.parameters(), lr=1e-2)
    for epoch in range(epochs):
        for x, y in DataLoader(dataset, batch_size=64, shuffle=True,
                               generator=torch.Generator().manual_seed(seed + epoch)):
            optimizer.zero_grad()
            F.cross_entropy(module(x), y).backward()
            optimizer.step()
    return module


def drops_canaries(module, dataset, seed):
    """Standardises its inputs before the module sees them: the canaries never reach it unchanged."""
    x, y = dataset[:]
    optimizer = torch.optim.SGD(module.parameters(), lr=LR)
    for _ in range(3):
        optimizer.zero_grad()
        F.cross_entropy(module((x - x.mean(0)) / (x.std(0) + 1)), y).backward()
        optimizer.step()
    return module


def never_steps(module, dataset, seed):
    x, y = dataset[:]
    F.cross_entropy(module(x), y).backward()
    return module


def make_model(n_inputs, n_classes):
    return nn.Sequential(nn.Linear(n_inputs, 32), nn.ReLU(), nn.Linear(32, n_classes))
