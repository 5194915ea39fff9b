"""The memory a chunk of models may use on a Dask worker (the batched engine sizes its chunks from it). It lives
with the engine, not with the Dask executor, so that training never imports the executors that run it."""

from __future__ import annotations

import sys


def worker_memory_headroom() -> int | None:
    """Bytes one task may still use when this process is a Dask worker with a memory limit: the limit less
    what the worker process holds now, shared among the worker's threads (each may run a task); None when
    this process is not a Dask worker or its worker has no limit. The nanny restarts a worker at 95 % of its
    limit, so a task sized from the host's free memory instead could kill its worker over and over."""
    distributed = sys.modules.get("distributed")  # a worker has imported it; never import it here
    if distributed is None:
        return None
    try:
        worker = distributed.get_worker()
    except ValueError:  # not in a worker's task
        return None
    limit = worker.memory_manager.memory_limit
    if not limit:
        return None
    import psutil  # a dependency of distributed

    held = psutil.Process().memory_info().rss
    return max(int(limit) - held, 0) // max(worker.state.nthreads, 1)
