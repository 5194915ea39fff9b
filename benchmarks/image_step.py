"""B1 for images (docs/images.md): one FDP-SGD step of the GroupNorm CNN against Opacus's fastest DP-SGD step
on the same CNN, CPU, 28×28 grey-scale images (Fashion-MNIST's shape), expected batch 256.

FDP-SGD (Algorithm 1): Poisson batch at rate 256/n with per-example clipping of ℓ_priv = ℓ − ℓ_pub∘Ψ, Ψ the
4× block-average downsampling and ℓ_pub the loss on the upsampled public image (``public_image``), Gaussian
noise, plus an independent public batch of 256 (:mod:`fdp_audit.training.conv_ghost`). Opacus runs the same
``nn.Module`` (:class:`fdp_audit.training.cnn.GroupNormCNN`: 3×3 convolutions 1→16→32, GroupNorm with 4 groups,
ReLU, 2×2 average pooling, a linear classifier) in ``ghost`` mode (ghost clipping where Opacus has a norm
sampler — the linear layer — per-layer per-example gradients for the convolutions and GroupNorm, two backward
passes), its fastest; its default ``hooks`` mode and a plain non-private step are reported beside it.

Timing as in :mod:`benchmarks.b1_step`: our step through the public engine (``train_models`` with 1 + k steps
minus 1 step, over k), Opacus batches drawn beforehand, one intra-op thread, timing.interleaved rounds, CPU time.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from benchmarks import timing
from benchmarks.b1_step import _per_step
from fdp_audit.config import OptimizerConfig
from fdp_audit.data.image_psi import DownsamplePublicMap
from fdp_audit.mechanisms import MECHANISMS
from fdp_audit.training.cnn import GroupNormCNN, cnn_model
from fdp_audit.training.engine import Hyperparameters, TrainingProblem
from fdp_audit.training.public_losses import build_public_loss

SIDE, CHANNELS, N_CLASSES, FACTOR = 28, (16, 32), 10, 4
BATCH = 256
N_RECORDS = BATCH * 40
NOISE, CLIP, LR = 1.0, 1.0, 0.1
STEPS_PER_ROUND = 4


def _data(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    x = torch.rand(N_RECORDS, SIDE * SIDE, generator=generator)
    return x, torch.randint(0, N_CLASSES, (N_RECORDS,), generator=generator)


def _fdp_problem(x: torch.Tensor, y: torch.Tensor, steps: int) -> TrainingProblem:
    psi = DownsamplePublicMap(SIDE, SIDE, factor=FACTOR)
    hyper = Hyperparameters(noise_multiplier=NOISE, sample_rate=BATCH / x.shape[0], steps=steps, clip_norm=CLIP,
                            public_batch_size=BATCH, optimizer=OptimizerConfig(lr=LR))
    return TrainingProblem(cnn_model(SIDE * SIDE, N_CLASSES, CHANNELS), x, y, psi,
                           build_public_loss("public_image", psi), MECHANISMS["fdp_sgd"].recipe, hyper)


def _fdp_step_seconds(x: torch.Tensor, y: torch.Tensor, steps: int) -> Callable[[], float]:
    return timing.marginal_step_seconds(lambda count: _fdp_problem(x, y, count), steps)


def opacus_training(x: torch.Tensor, y: torch.Tensor, mode: str, batch: int, lr: float = LR, side: int = SIDE,
                    channels: tuple[int, ...] = CHANNELS
                    ) -> tuple[nn.Module, torch.optim.Optimizer, Callable, torch.utils.data.DataLoader]:
    """An Opacus-private CNN, optimizer, criterion and Poisson loader in ``mode`` (hooks or ghost)."""
    return timing.opacus_private(GroupNormCNN(side, channels, N_CLASSES), x, y, mode, batch, lr, NOISE, CLIP)


def _opacus_step(x: torch.Tensor, y: torch.Tensor, mode: str, steps: int) -> Callable[[], None]:
    module, optimizer, criterion, loader = opacus_training(x, y, mode, BATCH)
    batches = [batch for batch, _ in zip(loader, range(steps))]
    return timing.optimizer_steps(module, optimizer, criterion, batches)


def run(rounds: int = 7) -> list[timing.Record]:
    with timing.torch_threads(1):
        x, y = _data()
        k = STEPS_PER_ROUND
        samples = timing.interleaved({
            "fdp": _fdp_step_seconds(x, y, k),
            "ghost": _per_step(_opacus_step(x, y, "ghost", k), k),
            "hooks": _per_step(_opacus_step(x, y, "hooks", k), k),
            "nonprivate": _per_step(timing.nonprivate_steps(GroupNormCNN(SIDE, CHANNELS, N_CLASSES), x, y, LR, BATCH,
                                                            k), k),
        }, rounds=rounds, clock=timing.CPU_CLOCK)
    shape = (f"CNN {SIDE}×{SIDE} conv {CHANNELS} GroupNorm, Ψ = {FACTOR}× downsampling, expected batch {BATCH}, "
             "1 thread, CPU time per step")
    return [
        timing.ratio_record("image_fdp_step_vs_opacus_ghost", samples["fdp"], samples["ghost"], target="<= 1.6",
                     note=f"FDP-SGD step (private + public batch) / Opacus ghost-clipping DP-SGD step; {shape}"),
        timing.ratio_record("image_fdp_step_vs_opacus_hooks", samples["fdp"], samples["hooks"],
                     note=f"FDP-SGD step / Opacus hooks DP-SGD step; {shape}"),
        timing.ratio_record("image_fdp_step_vs_nonprivate", samples["fdp"], samples["nonprivate"],
                     note=f"FDP-SGD step / plain PyTorch SGD step; {shape}"),
    ]


if __name__ == "__main__":
    import json

    for record in run():
        print(json.dumps(record))
