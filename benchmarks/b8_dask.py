"""B8 (docs/cluster.md): what running an audit's trials on Dask costs.

1. *Headline: a representative audit.* The demo's audit (``fdp-audit demo``: FDP-SGD at ε = 2 on the bundled
   Adult data, 300 steps, its three games and five attacks) at 1,000 trials, in this process and on a
   LocalCluster of two worker processes that the audit starts and stops, with the default chunk of 128 trials.
   It is the audit one would consider sending to a cluster: about 100 s of training in process on this 2-core
   machine at load 3–4, with per-trial work (a model of the demo's size trained 300 steps, three games of it) that a
   longer or larger audit only multiplies. The target is a wall-time ratio of at most 1.25, with results
   identical in every number.
2. *The fixed cost in view.* The same comparison for a small audit (the distinguishing game of a DP-SGD logistic
   regression on 3,000 synthetic rows, 100 steps, about 2 ms a trial batched; 1,000 trials take about 2 s in
   process), whose time is mostly the cluster's fixed cost; its ratio is reported, not targeted.
   Each comparison also breaks the cluster's fixed cost down, phase after phase on a cluster of its own: its
   start, the workers' imports (torch, fdp-audit; ``fixed_start_s`` is the two together), the game
   workspaces each worker builds from the config (data read once per worker, the noise multiplier taken from
   the driver), and its stop.
3. *Per-task overhead against chunk size.* The small audit's game on clusters of 1 and of 16 workers (16
   processes sharing the cores: a cluster simulated on one machine) for several chunk sizes c, against the
   in-process run of the same chunks, once the workers hold the game's workspace: the extra time per task (a
   scheduler round trip, the result's transfer, one journal write, and with 16 workers the contention of 16
   processes for 2 cores) and the extra time as a fraction of the in-process time, whose smallest chunk size
   below 5 % is reported. One worker runs the chunks on one thread as the process does, so its extra time is
   the per-task cost alone. The difference of two timings of training is noisy on a shared machine, so the
   per-task cost is also timed directly, on tasks that do nothing, and turned into the chunk size whose
   training takes 20 times as long.

In process a step runs on one thread when it is small (:mod:`fdp_audit.threads`) and on both cores otherwise;
a worker runs on one thread. Times are wall clock (a cluster's cost is the wait) and include everything the
user waits for, the cluster's start and stop too; the machine is shared, so each figure is the median of
interleaved rounds (:mod:`benchmarks.timing`) and every record carries the 1-minute load average before and
after it. ``python -m benchmarks.b8_dask`` prints the records.
"""

from __future__ import annotations

import json
import logging
import math
import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import replace

import numpy as np

from benchmarks.timing import Record, interleaved, quartiles
from fdp_audit.api import demo_config
from fdp_audit.auditing.games import GAMES
from fdp_audit.auditing.runner import run_audit
from fdp_audit.auditing.trials import DEFAULT_CHUNK, TrialTask, play_game
from fdp_audit.claim import noise_multiplier
from fdp_audit.config import Config, config_from_dict
from fdp_audit.data.prepare import prepare_data
from fdp_audit.execution import DaskExecutor, Executor, InProcessExecutor, split_chunks
from fdp_audit.execution.dask import run_environment

HEADLINE_TRIALS = 1000
WORKERS = 2
SWEEP_TRIALS = 128
WARM_TRIALS = 32
EMPTY_TASKS = 64
SWEEP_CHUNKS = (2, 8, 32, 128)
CLUSTER_SIZES = (1, 16)
TARGET_RATIO = 1.25
OVERHEAD_TARGET = 0.05
ROUNDS = 2
SMALL_ROUNDS = 3
WHERE = ("executor", "scheduler", "workers")  # where the trials ran, which changes none of the numbers

SMALL = {  # a DP-SGD logistic regression on 3,000 synthetic rows, 100 steps: about 2 ms a trial batched
    "name": "b8_dask", "seed": 0, "device": "cpu",
    "data": {"dataset": "synthetic", "protected": ["protected"], "synthetic_rows": 3000},
    "model": {"kind": "logistic"},
    "mechanism": {"name": "dp_sgd", "noise_multiplier": 2.0, "sample_rate": 0.1, "steps": 100, "public_batch_size": 32,
                  "clip_norm": 1.0, "delta": 1.0e-5, "optimizer": {"name": "sgd", "lr": 1.0}},
    "audit": {"trials": HEADLINE_TRIALS, "games": ["distinguishing"],
              "attacks": ["prior", "iterates", "iterates_public_aligned"]},
}


def demo_audit() -> Config:
    """The demo's config (``fdp-audit demo``) with 1,000 trials per game."""
    return demo_config(quick=False).with_overrides({"audit.trials": HEADLINE_TRIALS})


def comparable(results: dict) -> dict:
    """The numbers of a results dictionary: without the time stamp and where the trials ran."""
    kept = {k: v for k, v in results.items() if k != "created"}
    reproducibility = dict(kept["reproducibility"])
    config = reproducibility["config"]
    reproducibility["config"] = {**config, "audit": {k: v for k, v in config["audit"].items() if k not in WHERE}}
    kept["reproducibility"] = reproducibility
    return kept


def _build_workspaces(tasks: list[TrialTask]) -> None:
    """On a worker: what its first chunk of each game does before training, build the game's workspace."""
    for task in tasks:
        task.workspace()


def fixed_costs(config: Config) -> dict[str, float]:
    """Seconds of each fixed cost of a LocalCluster of :data:`WORKERS` for ``config``'s audit, one phase after
    another on a fresh cluster (in an audit the imports overlap the driver's own preparation): its start, the
    workers' imports, the slowest worker's workspaces for every game, and its stop."""
    data = prepare_data(config.data, config.seed)
    calibrated = noise_multiplier(config.mechanism) if config.mechanism.target_epsilon is not None else None
    tasks = [TrialTask(GAMES[name], config, "cpu", config.audit.max_models_per_chunk or DEFAULT_CHUNK,
                       data.fingerprint, calibrated) for name in config.audit.games]
    clock = time.perf_counter
    begin = clock()
    with DaskExecutor(workers=WORKERS) as executor:
        client = executor.client  # started in the background by the executor: waited for here
        started = clock()
        client.run(run_environment)
        imported = clock()
        client.run(_build_workspaces, tasks)
        prepared = clock()
    stopped = clock()
    return {"cluster_start_s": round(started - begin, 2), "worker_imports_s": round(imported - started, 2),
            "fixed_start_s": round(imported - begin, 2), "workspaces_s": round(prepared - imported, 2),
            "stop_s": round(stopped - prepared, 2)}


def audit_record(name: str, config: Config, rounds: int, target: float | None, note: str) -> Record:
    """In-process against a LocalCluster of :data:`WORKERS` started and stopped by the audit, on ``config``."""
    load_before = os.getloadavg()[0]
    # the driver's accounting is cached after its first audit: warm it, so that neither candidate pays it alone
    run_audit(replace(config, audit=replace(config.audit, trials=WARM_TRIALS)), None, executor=InProcessExecutor())
    results: dict[str, list[dict]] = {"in_process": [], "dask": []}

    def audit_on(candidate: str, make: Callable[[], Executor]) -> Callable[[], None]:
        def run() -> None:
            with make() as executor:  # the cluster's start, its workers' imports and its stop included
                results[candidate].append(comparable(run_audit(config, None, executor=executor)))
        return run

    samples = interleaved({"in_process": audit_on("in_process", InProcessExecutor),
                           "dask": audit_on("dask", lambda: DaskExecutor(workers=WORKERS))},
                          rounds=rounds, warmup=0)
    costs = fixed_costs(config)
    ratios = [d / p for d, p in zip(samples["dask"], samples["in_process"])]
    identical = all(r == results["in_process"][0] for runs in results.values() for r in runs)
    low, high = quartiles(ratios)
    chunk = config.audit.max_models_per_chunk or DEFAULT_CHUNK
    return {"name": name, "ours": round(statistics.median(samples["dask"]), 2),
            "baseline": round(statistics.median(samples["in_process"]), 2),
            "ratio": round(statistics.median(ratios), 3), "unit": "s", "n": rounds,
            "spread": [round(low, 3), round(high, 3)], "target_ratio": target, "identical_results": identical,
            "tasks": len(config.audit.games) * -(-config.audit.trials // chunk), **costs,
            "load_average": [round(load_before, 2), round(os.getloadavg()[0], 2)],
            "note": f"{note}; {config.audit.trials} trials, in-process vs a LocalCluster of {WORKERS} workers "
                    "started and stopped by the audit, default chunk, wall time; the *_s fields: the cluster's "
                    "fixed costs, phase after phase on a cluster of their own"}


def headline() -> Record:
    return audit_record(f"b8_dask_demo_audit_{HEADLINE_TRIALS}_trials_{WORKERS}_workers", demo_audit(), ROUNDS,
                        TARGET_RATIO, "the demo's audit (FDP-SGD on Adult, three games, five attacks)")


def small_audit() -> Record:
    return audit_record(f"b8_dask_small_audit_{HEADLINE_TRIALS}_trials_{WORKERS}_workers", config_from_dict(SMALL),
                        SMALL_ROUNDS, None, "a small audit (DP-SGD logistic regression, 3,000 synthetic rows, "
                        "distinguishing game): mostly fixed cost, ratio reported, not targeted")


def sweep_times(workers: int) -> tuple[dict[int, tuple[float, float]], float]:
    """Per chunk size: median seconds of the game's trials in process and on ``workers`` workers, once each
    worker holds the game's workspace; and the seconds per task of :data:`EMPTY_TASKS` tasks that do nothing
    (the executor's own cost: a scheduler round trip and the result's transfer)."""
    config = config_from_dict({**SMALL, "audit": {**SMALL["audit"], "trials": SWEEP_TRIALS}})
    data = prepare_data(config.data, config.seed)
    game = GAMES["distinguishing"]()
    times: dict[int, tuple[float, float]] = {}
    with DaskExecutor(workers=workers) as cluster:
        for chunk in SWEEP_CHUNKS:
            chunked = replace(config, audit=replace(config.audit, max_models_per_chunk=chunk))

            def play(executor: Executor, chunked=chunked, chunk=chunk) -> None:
                play_game(game, chunked, data, None, executor, "cpu", chunk)

            # after the warm-up round every worker holds the game's workspace: what remains is the per-task cost
            samples = interleaved({"local": lambda: play(InProcessExecutor()), "dask": lambda: play(cluster)},
                                  rounds=ROUNDS, warmup=1)
            times[chunk] = (statistics.median(samples["local"]), statistics.median(samples["dask"]))
        empty = split_chunks(np.arange(EMPTY_TASKS), 1)  # distinct chunks: equal ones would share one task key
        start = time.perf_counter()
        for _ in cluster.map_unordered(np.negative, empty):
            pass
        per_task = (time.perf_counter() - start) / EMPTY_TASKS
    return times, per_task


def overhead_record(workers: int) -> Record:
    load_before = os.getloadavg()[0]
    times, per_task = sweep_times(workers)
    by_chunk = {}
    for chunk in SWEEP_CHUNKS:
        local, dask = times[chunk]
        tasks = -(-SWEEP_TRIALS // chunk)
        by_chunk[chunk] = {"tasks": tasks, "in_process_s": round(local, 2), "dask_s": round(dask, 2),
                           "per_task_s": round((dask - local) / tasks, 4), "overhead": round(dask / local - 1, 3)}
    # the smallest chunk from which every larger one stays below the target
    below = next((c for i, c in enumerate(SWEEP_CHUNKS)
                  if all(by_chunk[d]["overhead"] < OVERHEAD_TARGET for d in SWEEP_CHUNKS[i:])), None)
    smallest = by_chunk[SWEEP_CHUNKS[0]]
    # the same from the empty tasks: the chunk whose own time (trials of the largest chunk's in-process rate) is
    # 20 times the per-task cost
    trial_s = times[SWEEP_CHUNKS[-1]][0] / SWEEP_TRIALS
    return {"name": f"b8_dask_task_overhead_{workers}_workers", "ours": round(per_task, 4),
            "baseline": None, "ratio": round(smallest["overhead"] + 1, 3), "unit": "s", "n": ROUNDS,
            "spread": None, "chunk_for_5_percent": below,
            "chunk_for_5_percent_from_empty_tasks": max(1, math.ceil(per_task / (OVERHEAD_TARGET * trial_s))),
            "trial_s": round(trial_s, 5), "by_chunk": by_chunk,
            "load_average": [round(load_before, 2), round(os.getloadavg()[0], 2)],
            "note": f"{SWEEP_TRIALS} trials of the distinguishing game on a LocalCluster of {workers} worker(s) "
                    "sharing this machine's cores against the same chunks in process, workers warm; ours: seconds "
                    f"per task of {EMPTY_TASKS} tasks that do nothing; by_chunk per_task_s: the extra seconds per "
                    f"task of the game's chunks; ratio: cluster / in-process time at chunk {SWEEP_CHUNKS[0]}; "
                    "chunk_for_5_percent: the smallest chunk size from which the cluster's extra time stays "
                    "below 5 % (null: none measured); chunk_for_5_percent_from_empty_tasks: the chunk of trials "
                    "of trial_s seconds (in process, largest chunk) whose time is 20 times ours"}


def run() -> list[Record]:
    logging.getLogger("distributed").setLevel(logging.ERROR)
    return [headline(), small_audit(), *(overhead_record(workers) for workers in CLUSTER_SIZES)]


if __name__ == "__main__":
    for record in run():
        print(json.dumps(record), flush=True)
    sys.exit(0)
