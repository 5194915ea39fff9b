"""B2 for images (docs/images.md): 64 small-CNN audit trainings batched against a loop of Opacus trainings of the
same CNN and settings, CPU.

The audit's shape: digits as 8×8 images (1,257 training images), the GroupNorm CNN with convolutions 1→8→16,
DP-SGD with Poisson sampling at expected batch 64, clip 1, noise multiplier 1, T = 20 steps of SGD. Ours: one
``train_models`` call training the 64 models at once (grouped convolutions, per-example norms from one forward
and backward pass, :mod:`fdp_audit.training.conv_ghost`). Baseline: Opacus 1.6 in its fastest mode for this
model (``ghost``), one ``make_private`` and T steps from its Poisson loader per model, in a loop; each round
times ``SEQUENTIAL`` of the 64 and scales linearly (the trainings are independent and alike). One intra-op
thread, CPU time, interleaved rounds (:mod:`benchmarks.timing`).
"""

from __future__ import annotations

import json

from benchmarks.image_step import opacus_training
from benchmarks.timing import CPU_CLOCK, Record, interleaved, ratio_record, torch_threads
from fdp_audit.config import DataConfig, OptimizerConfig
from fdp_audit.data.prepare import prepare_data
from fdp_audit.mechanisms import MECHANISMS
from fdp_audit.training.cnn import cnn_model
from fdp_audit.training.engine import Hyperparameters, TrainingProblem, train_models

MODELS, SEQUENTIAL = 64, 8
CHANNELS, BATCH, STEPS, LR = (8, 16), 64, 20, 0.1


def _problem() -> TrainingProblem:
    data = prepare_data(DataConfig(dataset="digits", protected=(), public_map="downsample", downsample_factor=2,
                                   population_fraction=0.3), 0)
    x, y = data.tensors()
    hyper = Hyperparameters(noise_multiplier=1.0, sample_rate=BATCH / x.shape[0], steps=STEPS, clip_norm=1.0,
                            optimizer=OptimizerConfig(lr=LR))
    return TrainingProblem(cnn_model(64, 10, CHANNELS), x, y, data.public_map, None,
                           MECHANISMS["dp_sgd"].recipe, hyper)


def _opacus_trainings(problem: TrainingProblem, count: int) -> None:
    for _ in range(count):
        module, optimizer, criterion, loader = opacus_training(problem.x, problem.y, "ghost", BATCH, LR, side=8,
                                                               channels=CHANNELS)
        for (xb, yb), _ in zip(loader, range(STEPS)):
            optimizer.zero_grad(set_to_none=True)
            criterion(module(xb), yb).backward()
            optimizer.step()


def run(rounds: int = 3) -> list[Record]:
    problem = _problem()

    def batched() -> None:
        list(train_models(problem, 0, range(MODELS)))

    def sequential() -> float:
        start = CPU_CLOCK()
        _opacus_trainings(problem, SEQUENTIAL)
        return (CPU_CLOCK() - start) * MODELS / SEQUENTIAL

    with torch_threads(1):
        samples = interleaved({"batched": batched, "opacus": sequential}, rounds=rounds, clock=CPU_CLOCK)
    record = ratio_record(
        "image_batched_vs_opacus_loop", samples["batched"], samples["opacus"], unit="s", scale=1.0,
        target="speedup >= 10",
        note=(f"{MODELS} DP-SGD trainings of the GroupNorm CNN {CHANNELS} on 8×8 digits (n={problem.n}, expected "
              f"batch {BATCH}, T={STEPS}) in one train_models call / a loop of Opacus ghost-clipping trainings, "
              f"scaled from {SEQUENTIAL} per round; 1 intra-op thread, CPU time"))
    record["speedup"] = round(1.0 / record["ratio"], 1)
    return [record]


if __name__ == "__main__":
    print(json.dumps(run()))
