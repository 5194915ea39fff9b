"""B2 (docs/training.md): batched audit training — R = 256 DP-SGD logistic regressions on Adult trained at once by
``train_models`` against a sequential loop of the same call with one model index each.

Adult with one protected attribute (``marital-status``), expected batch 256, one epoch-equivalent of steps
(T = 1/p). The full sequential loop takes minutes, so each round times a subset of it (``SEQUENTIAL``
models) and scales it linearly to 256 models: the models are independent and every call does the same
work, so the per-model time is what a full loop would repeat. Model k of the batch must equal model k
trained alone (docs/training.md); the record reports the largest parameter difference seen. Two records: one
intra-op thread timed by CPU time (the work done, steady on a shared machine), and torch's default thread
count timed by the wall clock (the time a user waits; :mod:`benchmarks.timing`).

The one-core record also says where a batched step's time goes: CPU milliseconds per step in the
engine's phases, measured by :func:`benchmarks.timing.phase_clock` in one extra batched run. Run
``python -m benchmarks.b2_batched`` to print the records.
"""

from __future__ import annotations

import json
import math

import torch

from benchmarks.timing import (
    CPU_CLOCK,
    WALL_CLOCK,
    Clock,
    Record,
    interleaved,
    phase_clock,
    ratio_record,
    torch_threads,
)
from fdp_audit.config import DataConfig
from fdp_audit.data.prepare import prepare_data
from fdp_audit.mechanisms import MECHANISMS
from fdp_audit.training import engine, glm, streams
from fdp_audit.training.engine import Hyperparameters, TrainingProblem, train_models
from fdp_audit.training.models import Model

MODELS = 256
SEQUENTIAL = 16
BATCH = 256
SEED = 0
DEFAULT_THREADS = torch.get_num_threads()  # torch's own choice for this machine (its physical cores)


def _problem() -> TrainingProblem:
    data = prepare_data(DataConfig(dataset="adult", protected=("marital-status",)), SEED)
    x, y = data.tensors()
    rate = BATCH / x.shape[0]
    hyper = Hyperparameters(noise_multiplier=1.0, sample_rate=rate, steps=math.ceil(1 / rate), clip_norm=1.0)
    model = Model("logistic", x.shape[1], data.train.n_classes)
    return TrainingProblem(model, x, y, data.public_map, None, MECHANISMS["dp_sgd"].recipe, hyper)


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


def _speedup_record(problem: TrainingProblem, name: str, threads: int, clock: Clock, rounds: int,
                    clock_name: str) -> Record:
    """Batched against sequential training on ``threads`` intra-op threads, timed on ``clock``."""
    indices = list(range(MODELS))
    batched: dict[str, torch.Tensor] = {}
    largest_difference = [0.0]

    def train_batched() -> None:
        (chunk,) = train_models(problem, SEED, indices)
        batched.update(chunk.params)

    def train_sequential() -> float:
        start = clock()
        alone = [next(train_models(problem, SEED, [k])).params for k in indices[:SEQUENTIAL]]
        seconds = (clock() - start) * MODELS / SEQUENTIAL
        for k, params in enumerate(alone):
            for parameter, value in params.items():
                difference = float((value[0] - batched[parameter][k]).abs().max())
                largest_difference[0] = max(largest_difference[0], difference)
        return seconds

    with torch_threads(threads):
        samples = interleaved({"batched": train_batched, "sequential": train_sequential}, rounds=rounds,
                              clock=clock)
    record = ratio_record(
        name, samples["batched"], samples["sequential"], unit="s", scale=1.0, target="speedup >= 20",
        note=(f"{MODELS} DP-SGD logistic regressions on Adult (protected marital-status, n={problem.n}, "
              f"expected batch {BATCH}, T={problem.hyper.steps}) in one train_models call / in {MODELS} calls; "
              f"the sequential time is scaled from {SEQUENTIAL} of the {MODELS} calls per round; {threads} "
              f"intra-op thread(s), {clock_name}"),
        threads=threads, max_abs_difference_batched_vs_alone=largest_difference[0])
    record["speedup"] = round(1.0 / record["ratio"], 1)
    return record


def run(rounds: int = 3) -> list[Record]:
    """Two records: one core (CPU time of one intra-op thread: the work each approach does, steady on a
    shared machine) and the whole machine (torch's default thread count, wall clock: what a user waits
    for; a single small model cannot keep several cores busy, a batch of models can). The one-core record
    also says where a batched step's time goes."""
    problem = _problem()
    one_core = _speedup_record(problem, "b2_batched_vs_sequential", 1, CPU_CLOCK, rounds, "CPU time")
    with torch_threads(1):
        one_core["batched_step_ms"] = step_breakdown(problem)
    all_cores = _speedup_record(problem, "b2_batched_vs_sequential_all_cores", DEFAULT_THREADS, WALL_CLOCK,
                                rounds, "wall clock")
    return [one_core, all_cores]


if __name__ == "__main__":
    print(json.dumps(run()))
