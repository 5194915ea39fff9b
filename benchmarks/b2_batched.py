"""B2 (SPEC 6): batched audit training — R = 256 DP-SGD logistic regressions on Adult trained at once by
``train_models`` against a sequential loop of the same call with one model index each.

Adult with one protected attribute (``marital-status``), expected batch 256, one epoch-equivalent of steps
(T = 1/p). The full sequential loop takes minutes, so each round times a subset of it (``SEQUENTIAL``
models) and scales it linearly to 256 models: the models are independent and every call does the same
work, so the per-model time is what a full loop would repeat. Model k of the batch must equal model k
trained alone (SPEC 6); the record reports the largest parameter difference seen. One intra-op thread,
CPU time (:mod:`benchmarks.timing`).

The record also says where a batched step's time goes (issue 12): CPU milliseconds per step in the
engine's phases, measured by :func:`benchmarks.timing.phase_clock` in one extra batched run. Run
``python -m benchmarks.b2_batched`` to print the record.
"""

from __future__ import annotations

import json
import math

import torch

from benchmarks.timing import CPU_CLOCK, Record, interleaved, phase_clock, ratio_record, torch_threads
from fdp_audit.config import DataConfig
from fdp_audit.data.prepare import prepare_data
from fdp_audit.training import engine, glm, streams
from fdp_audit.training.engine import Hyperparameters, TrainingProblem, train_models
from fdp_audit.training.mechanisms import MECHANISMS
from fdp_audit.training.models import Model

MODELS = 256
SEQUENTIAL = 16
BATCH = 256
SEED = 0


def _problem() -> TrainingProblem:
    data = prepare_data(DataConfig(dataset="adult", protected=("marital-status",)), SEED)
    x, y = data.tensors()
    rate = BATCH / x.shape[0]
    hyper = Hyperparameters(noise_multiplier=1.0, sample_rate=rate, steps=math.ceil(1 / rate), clip_norm=1.0)
    model = Model("logistic", x.shape[1], data.train.n_classes)
    return TrainingProblem(model, x, y, data.feature_split, None, MECHANISMS["dp_sgd"].recipe, hyper)


# The phases of a batched DP-SGD step on the GLM path (fdp_audit.training.glm); none calls another.
PHASES = {
    "poisson_sampling": (streams, "poisson_sample"),
    "noise": (streams, "normal"),
    "logits_gather_and_product": (glm, "logits"),
    "clipped_sum_embedding_bag": (glm, "weighted_rows"),
    "optimizer_step": (engine, "_apply"),
}


def step_breakdown(problem: TrainingProblem, models: int = MODELS) -> dict[str, float]:
    """CPU milliseconds per step of one batched run, by phase; ``other`` is the rest of the step (label
    gathers, the logit gradients, norms and clipping weights, recording, Python)."""
    with phase_clock(PHASES) as seconds:
        start = CPU_CLOCK()
        next(train_models(problem, SEED, range(models)))
        total = CPU_CLOCK() - start
    per_step = {label: 1e3 * value / problem.hyper.steps for label, value in seconds.items()}
    per_step["other"] = 1e3 * total / problem.hyper.steps - sum(per_step.values())
    per_step["total"] = 1e3 * total / problem.hyper.steps
    return {label: round(value, 3) for label, value in per_step.items()}


def run(rounds: int = 3) -> list[Record]:
    problem = _problem()
    indices = list(range(MODELS))
    batched: dict[str, torch.Tensor] = {}
    largest_difference = [0.0]

    def train_batched() -> None:
        (chunk,) = train_models(problem, SEED, indices)
        batched.update(chunk.params)

    def train_sequential() -> float:
        start = CPU_CLOCK()
        alone = [next(train_models(problem, SEED, [k])).params for k in indices[:SEQUENTIAL]]
        seconds = (CPU_CLOCK() - start) * MODELS / SEQUENTIAL
        for k, params in enumerate(alone):
            for name, value in params.items():
                difference = float((value[0] - batched[name][k]).abs().max())
                largest_difference[0] = max(largest_difference[0], difference)
        return seconds

    with torch_threads(1):
        samples = interleaved({"batched": train_batched, "sequential": train_sequential}, rounds=rounds,
                              clock=CPU_CLOCK)
        breakdown = step_breakdown(problem)
    record = ratio_record(
        "b2_batched_vs_sequential", samples["batched"], samples["sequential"], unit="s", scale=1.0,
        target="speedup >= 20",
        note=(f"{MODELS} DP-SGD logistic regressions on Adult (protected marital-status, n={problem.n}, "
              f"expected batch {BATCH}, T={problem.hyper.steps}) in one train_models call / in {MODELS} calls; "
              f"the sequential time is scaled from {SEQUENTIAL} of the {MODELS} calls per round; 1 thread, "
              "CPU time"),
        max_abs_difference_batched_vs_alone=largest_difference[0], batched_step_ms=breakdown)
    record["speedup"] = round(1.0 / record["ratio"], 1)
    return [record]


if __name__ == "__main__":
    print(json.dumps(run()))
