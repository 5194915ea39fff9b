"""B1 (docs/training.md): one FDP-SGD step against one Opacus DP-SGD step, CPU, MLP 600-300-100, expected batch 256.

FDP-SGD (Algorithm 1, docs/training.md): private Poisson batch at rate 256/n with per-example clipping of
ℓ_priv = ℓ − ℓ_pub∘Ψ (the ``mask`` public loss; 100 public, 500 protected input columns), Gaussian noise,
plus an independent public batch of 256. Baselines on the same architecture and batch size: Opacus
DP-SGD in its default ``hooks`` mode (per-example gradients materialised) and in ``ghost`` mode (ghost
clipping, two backward passes), and a plain non-private PyTorch step. One more line compares the engine's
fast path (:mod:`fdp_audit.training.ghost`) with its materialised ``torch.func`` fallback.

Our step is timed through the public engine: ``train_models`` with 1 + k steps minus ``train_models`` with
1 step, divided by k, so the per-run set-up (Ψ of the data set, initialisation) is excluded. Opacus
batches are drawn from its Poisson data loader beforehand, so its data loading is excluded too. All
candidates run with one intra-op thread, interleaved round by round, timed by CPU time
(:mod:`benchmarks.timing`).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from benchmarks.timing import (
    CPU_CLOCK,
    Record,
    interleaved,
    marginal_step_seconds,
    nonprivate_steps,
    opacus_private,
    optimizer_steps,
    ratio_record,
    torch_threads,
)
from fdp_audit.config import OptimizerConfig
from fdp_audit.data.encoding import ColumnGroup
from fdp_audit.data.features import ColumnSplit
from fdp_audit.mechanisms import MECHANISMS
from fdp_audit.training import ghost
from fdp_audit.training.engine import Hyperparameters, TrainingProblem
from fdp_audit.training.models import Model
from fdp_audit.training.public_losses import build_public_loss

N_INPUTS, N_HIDDEN, N_CLASSES, N_PUBLIC = 600, 300, 100, 100
BATCH = 256
N_RECORDS = BATCH * 40  # sample rate 1/40: Opacus derives its rate from the loader length
NOISE, CLIP, LR = 1.0, 1.0, 0.1
STEPS_PER_ROUND = 8
HOOKS_STEPS_PER_ROUND = 2  # an Opacus hooks step is ~30x slower


def _data(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(N_RECORDS, N_INPUTS, generator=generator)
    return x, torch.randint(0, N_CLASSES, (N_RECORDS,), generator=generator)


def _fdp_problem(x: torch.Tensor, y: torch.Tensor, steps: int) -> TrainingProblem:
    groups = tuple(ColumnGroup(f"f{i}", "numeric", i, i + 1) for i in range(N_INPUTS))
    split = ColumnSplit(groups, tuple(f"f{i}" for i in range(N_PUBLIC, N_INPUTS)))
    hyper = Hyperparameters(noise_multiplier=NOISE, sample_rate=BATCH / N_RECORDS, steps=steps, clip_norm=CLIP,
                            public_batch_size=BATCH, optimizer=OptimizerConfig(lr=LR))
    return TrainingProblem(Model("mlp", N_INPUTS, N_CLASSES, (N_HIDDEN,)), x, y, split,
                           build_public_loss("mask", split), MECHANISMS["fdp_sgd"].recipe, hyper)


def _fdp_step_seconds(x: torch.Tensor, y: torch.Tensor, steps: int) -> Callable[[], float]:
    return marginal_step_seconds(lambda count: _fdp_problem(x, y, count), steps)


def _mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(N_INPUTS, N_HIDDEN), nn.ReLU(), nn.Linear(N_HIDDEN, N_CLASSES))


def _opacus_step(x: torch.Tensor, y: torch.Tensor, mode: str, steps: int) -> Callable[[], None]:
    module, optimizer, criterion, loader = opacus_private(_mlp(), x, y, mode, BATCH, LR, NOISE, CLIP)
    batches = [batch for batch, _ in zip(loader, range(steps))]
    return optimizer_steps(module, optimizer, criterion, batches)


def _per_step(run: Callable[[], None], steps: int) -> Callable[[], float]:
    def timed() -> float:
        start = CPU_CLOCK()
        run()
        return (CPU_CLOCK() - start) / steps

    return timed


def _materialised_step(x: torch.Tensor, y: torch.Tensor, steps: int) -> Callable[[], float]:
    """The engine with the fast path switched off: per-example gradients from vmap(vmap(grad))."""
    fast = _fdp_step_seconds(x, y, steps)

    def run() -> float:
        supports, ghost.supports = ghost.supports, (lambda model: False)
        try:
            return fast()
        finally:
            ghost.supports = supports

    return run


def run(rounds: int = 15) -> list[Record]:
    with torch_threads(1):
        x, y = _data()
        k, k_hooks = STEPS_PER_ROUND, HOOKS_STEPS_PER_ROUND
        samples = interleaved({
            "fdp": _fdp_step_seconds(x, y, k),
            "hooks": _per_step(_opacus_step(x, y, "hooks", k_hooks), k_hooks),
            "ghost": _per_step(_opacus_step(x, y, "ghost", k), k),
            "nonprivate": _per_step(nonprivate_steps(_mlp(), x, y, LR, BATCH, k), k),
        }, rounds=rounds, clock=CPU_CLOCK)
        fallback = interleaved({"fast": _fdp_step_seconds(x, y, 2), "materialised": _materialised_step(x, y, 2)},
                               rounds=3, clock=CPU_CLOCK)
    shape = f"MLP {N_INPUTS}-{N_HIDDEN}-{N_CLASSES}, expected batch {BATCH}, 1 thread, CPU time per step"
    return [
        ratio_record("b1_fdp_step_vs_opacus_hooks", samples["fdp"], samples["hooks"], target="<= 1.0",
                     note=f"FDP-SGD step (private + public batch) / Opacus hooks DP-SGD step; {shape}"),
        ratio_record("b1_fdp_step_vs_opacus_ghost", samples["fdp"], samples["ghost"], target="<= 1.5",
                     note=f"FDP-SGD step / Opacus ghost-clipping DP-SGD step; {shape}"),
        ratio_record("b1_fdp_step_vs_nonprivate", samples["fdp"], samples["nonprivate"],
                     note=f"FDP-SGD step / plain PyTorch SGD step; {shape}"),
        ratio_record("b1_fast_path_vs_materialised", fallback["fast"], fallback["materialised"],
                     note="engine step with ghost clipping / with materialised torch.func per-example gradients"),
    ]
