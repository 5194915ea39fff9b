"""B8 (docs/cluster.md): what running an audit's trials on Dask costs.

1. *Headline.* One 1,000-trial audit (the distinguishing game of a DP-SGD logistic regression on 3,000 synthetic
   rows, 100 steps) in this process and on a LocalCluster of two worker processes that the audit starts and
   stops, with the default chunk of 128 trials; the target is a wall-time ratio of at most 1.25, and the
   results must be identical in every number. (A step this small runs on one thread in process,
   :mod:`fdp_audit.threads`, so two workers on two idle cores could be faster; on a shared machine they mostly
   are not.)
2. *Per-task overhead against chunk size.* The same game's trials on clusters of 1 and of 16 workers (16
   processes sharing the cores: a cluster simulated on one machine) for several chunk sizes c, against the
   in-process run of the same chunks, once the workers hold the game's workspace: the extra time per task (a
   scheduler round trip, the result's transfer, one journal write, and with 16 workers the contention of 16
   processes for 2 cores) and the extra time as a fraction of the in-process time, whose smallest chunk size
   below 5 % is reported. One worker runs the chunks on one thread as the process does, so its extra time is
   the per-task cost alone.

Times are wall clock (a cluster's cost is the wait); the machine is shared, so each figure is the median of
interleaved rounds (:mod:`benchmarks.timing`). ``python -m benchmarks.b8_dask`` prints the records.
"""

from __future__ import annotations

import json
import logging
import statistics
import sys
from collections.abc import Callable
from dataclasses import replace

from benchmarks.timing import Record, interleaved, quartiles
from fdp_audit.audit.games import GAMES
from fdp_audit.audit.runner import run_audit
from fdp_audit.audit.trials import play_game
from fdp_audit.config import config_from_dict
from fdp_audit.data.prepare import prepare_data
from fdp_audit.execution import DaskExecutor, Executor, InProcessExecutor

HEADLINE_TRIALS = 1000
SWEEP_TRIALS = 128
SWEEP_CHUNKS = (2, 8, 32, 128)
CLUSTER_SIZES = (1, 16)
TARGET_RATIO = 1.25
OVERHEAD_TARGET = 0.05
ROUNDS = 2
WHERE = ("executor", "scheduler", "workers")  # where the trials ran, which changes none of the numbers

CONFIG = {  # a DP-SGD logistic regression on 3,000 synthetic rows, 100 steps: about 30 ms a trial in process
    "name": "b8_dask", "seed": 0, "device": "cpu",
    "data": {"dataset": "synthetic", "protected": ["protected"], "synthetic_rows": 3000},
    "model": {"kind": "logistic"},
    "mechanism": {"name": "dp_sgd", "noise_multiplier": 2.0, "sample_rate": 0.1, "steps": 100, "public_batch_size": 32,
                  "clip_norm": 1.0, "delta": 1.0e-5, "optimizer": {"name": "sgd", "lr": 1.0}},
    "audit": {"trials": HEADLINE_TRIALS, "games": ["distinguishing"],
              "attacks": ["prior", "iterates", "iterates_public_aligned"]},
}


def comparable(results: dict) -> dict:
    """The numbers of a results dictionary: without the time stamp and where the trials ran."""
    kept = {k: v for k, v in results.items() if k != "created"}
    reproducibility = dict(kept["reproducibility"])
    config = reproducibility["config"]
    reproducibility["config"] = {**config, "audit": {k: v for k, v in config["audit"].items() if k not in WHERE}}
    kept["reproducibility"] = reproducibility
    return kept


def headline() -> Record:
    config = config_from_dict(CONFIG)
    # the driver's accounting is cached after its first audit: warm it, so that neither candidate pays it alone
    run_audit(replace(config, audit=replace(config.audit, trials=SWEEP_TRIALS)), None, executor=InProcessExecutor())
    results: dict[str, list[dict]] = {"in_process": [], "dask_2_workers": []}

    def audit_on(name: str, make: Callable[[], Executor]) -> Callable[[], float]:
        def run() -> None:
            with make() as executor:  # the cluster's start, its workers' imports and its stop included
                results[name].append(comparable(run_audit(config, None, executor=executor)))
        return run

    samples = interleaved({"in_process": audit_on("in_process", InProcessExecutor),
                           "dask_2_workers": audit_on("dask_2_workers", lambda: DaskExecutor(workers=2))},
                          rounds=ROUNDS, warmup=0)
    ratios = [d / p for d, p in zip(samples["dask_2_workers"], samples["in_process"])]
    identical = all(r == results["in_process"][0] for runs in results.values() for r in runs)
    low, high = quartiles(ratios)
    return {"name": "b8_dask_1000_trials_2_workers", "ours": round(statistics.median(samples["dask_2_workers"]), 2),
            "baseline": round(statistics.median(samples["in_process"]), 2),
            "ratio": round(statistics.median(ratios), 3), "unit": "s", "n": ROUNDS,
            "spread": [round(low, 3), round(high, 3)], "target_ratio": TARGET_RATIO,
            "identical_results": identical,
            "note": f"{HEADLINE_TRIALS}-trial audit, in-process vs a LocalCluster of 2 workers started and stopped "
                    "by the audit, default chunk, wall time"}


def sweep_times(workers: int) -> dict[int, tuple[float, float]]:
    """Per chunk size: median seconds of the game's trials in process and on ``workers`` workers, once each
    worker holds the game's workspace."""
    config = config_from_dict({**CONFIG, "audit": {**CONFIG["audit"], "trials": SWEEP_TRIALS}})
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
    return times


def overhead_record(workers: int) -> Record:
    times = sweep_times(workers)
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
    return {"name": f"b8_dask_task_overhead_{workers}_workers", "ours": smallest["per_task_s"],
            "baseline": None, "ratio": round(smallest["overhead"] + 1, 3), "unit": "s", "n": ROUNDS,
            "spread": None, "chunk_for_5_percent": below, "by_chunk": by_chunk,
            "note": f"{SWEEP_TRIALS} trials of the distinguishing game on a LocalCluster of {workers} worker(s) "
                    "sharing this machine's cores against the same chunks in process, workers warm; ours: extra "
                    f"seconds per task at chunk {SWEEP_CHUNKS[0]}, ratio: cluster / in-process time there; "
                    "chunk_for_5_percent: the smallest chunk size from which the cluster's extra time stays "
                    "below 5 % (null: none measured)"}


def run() -> list[Record]:
    logging.getLogger("distributed").setLevel(logging.ERROR)
    return [headline(), *(overhead_record(workers) for workers in CLUSTER_SIZES)]


if __name__ == "__main__":
    for record in run():
        print(json.dumps(record), flush=True)
    sys.exit(0)
