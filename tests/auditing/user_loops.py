"""DP-SGD loops written by hand in plain PyTorch, as a user writes them (``mechanism.training:
user_loops.py:NAME``, ``train(module, dataset, seed) -> module``), and the same loop with the faults the soundness
matrix of the user-loop path must catch (tests/auditing/test_soundness.py). Each loop has its settings (z, p, T, C)
baked in as a user's constants are; the test configs state the same claim.

* ``honest``: Poisson sampling at p, torch.func per-example gradients clipped to C, Gaussian noise N(0, (zC)²) on
  the sum, divided by the planned expected batch (a constant), one SGD step;
* ``quiet``: a tenth of the noise;
* ``no_clip``: no clipping;
* ``dataset_size``: divided by p·len(dataset) (an expected batch computed from the data set it is given);
* ``realised_batch``: divided by the realised batch size (a mean over the batch);
* ``half_noise``: half the noise;
* ``double_rate``: Poisson sampling at twice the claimed rate;
* ``shuffled``: batches of the expected size ``p·len(dataset)`` cut from a fresh shuffle each epoch (every record
  in exactly one batch of an epoch), not Poisson samples; ``shuffled_low_noise``: the same at z = 0.5;
  ``shuffled_one_epoch``: the same over one epoch of two batches at z = 0.15 (every record in exactly one of the
  two steps, where Poisson sampling skips it in both with probability ¼);
* ``honest_small``, ``honest_sparse`` and ``honest_one_epoch``: the honest loop at those faults' settings.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.func import functional_call, grad, vmap

PLANNED_ROWS = 100  # the data set the honest loop plans its expected batch for


def _loop(noise_multiplier: float, sample_rate: float, steps: int, noise_factor: float = 1.0, clip: bool = True,
          normaliser: str = "planned", planned_rows: int = PLANNED_ROWS, clip_norm: float = 1.0, lr: float = 1.0,
          rate_factor: float = 1.0, shuffled: bool = False):
    def train(module, dataset, seed):
        generator = torch.Generator().manual_seed(seed)
        optimizer = torch.optim.SGD(module.parameters(), lr=lr)
        inputs, labels = dataset[:]
        params = dict(module.named_parameters())

        def loss(p, x, y):
            return F.cross_entropy(functional_call(module, p, (x[None],)), y[None])

        per_example = vmap(grad(loss), in_dims=(None, 0, 0))
        per_epoch = round(1 / sample_rate)
        for step in range(steps):
            if shuffled:  # an epoch's batches partition a fresh permutation
                if step % per_epoch == 0:
                    order = torch.randperm(len(dataset), generator=generator)
                batch = torch.zeros(len(dataset), dtype=torch.bool)
                batch[order[step % per_epoch::per_epoch]] = True
            else:
                batch = torch.rand(len(dataset), generator=generator) < sample_rate * rate_factor
            grads = per_example({k: v.detach() for k, v in params.items()}, inputs[batch], labels[batch])
            norms = torch.stack([g.flatten(1).norm(dim=1) for g in grads.values()]).norm(dim=0)
            factor = (clip_norm / (norms + 1e-12)).clamp(max=1.0) if clip else torch.ones_like(norms)
            divisor = {"planned": sample_rate * planned_rows, "dataset": sample_rate * len(dataset),
                       "realised": max(int(batch.sum()), 1)}[normaliser]
            for name, p in params.items():
                summed = (grads[name] * factor.view(-1, *[1] * (grads[name].dim() - 1))).sum(dim=0)
                noise = torch.randn(p.shape, generator=generator) * noise_multiplier * clip_norm * noise_factor
                p.grad = (summed + noise) / divisor
            optimizer.step()
        return module

    return train


QUIET = {"noise_multiplier": 1.5, "sample_rate": 0.5, "steps": 4}
SMALL = {"noise_multiplier": 1.5, "sample_rate": 0.5, "steps": 4, "planned_rows": 8}
SPARSE = {"noise_multiplier": 10.0, "sample_rate": 0.5, "steps": 20, "planned_rows": 5}
LOW_NOISE = {"noise_multiplier": 0.5, "sample_rate": 0.5, "steps": 4}
ONE_EPOCH = {"noise_multiplier": 0.15, "sample_rate": 0.5, "steps": 2}

honest = _loop(**QUIET)
quiet = _loop(**QUIET, noise_factor=0.1)
no_clip = _loop(**QUIET, clip=False)
half_noise = _loop(**QUIET, noise_factor=0.5)
double_rate = _loop(**QUIET, rate_factor=2.0)
shuffled = _loop(**QUIET, shuffled=True)
shuffled_low_noise = _loop(**LOW_NOISE, shuffled=True)
shuffled_one_epoch = _loop(**ONE_EPOCH, shuffled=True)
honest_one_epoch = _loop(**ONE_EPOCH)
honest_small = _loop(**SMALL)
dataset_size = _loop(**SMALL, normaliser="dataset")
honest_sparse = _loop(**SPARSE)
realised_batch = _loop(**SPARSE, normaliser="realised")


def linear(n_inputs: int, n_classes: int) -> torch.nn.Module:
    """Logistic regression as a module: one logit per class."""
    return torch.nn.Linear(n_inputs, n_classes)
