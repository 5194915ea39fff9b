"""The Dask executor (docs/cluster.md): chunks of trials run as tasks on a ``dask.distributed`` cluster — the one
behind an existing scheduler's address, or a LocalCluster of worker processes on this machine's loopback that
the executor starts and stops — and each chunk's result comes back as soon as it finishes.

* *One copy of the task.* The task (the game's problem, canaries and fitted attacks) is serialised once with
  cloudpickle and becomes a Dask task of its own, on which every chunk's task depends: workers fetch it from
  each other, and if every worker holding it dies the scheduler rebuilds it from the bytes it keeps. The
  user's own modules (a third-party mechanism, a model factory, and whatever they import from outside the
  installed packages) are pickled by value, so workers need the same installed packages, not the user's files.
* *Keys are content addresses*: the digest of the serialised task and of the chunk's trial indices. A driver
  restarted on the same journal resubmits the same keys, which join a computation the scheduler still runs
  instead of duplicating it; two different computations never share a key.
* *Lost workers.* A worker that dies costs the chunk it was running, which the scheduler runs again on
  another worker (with the chunks queued on it); a chunk that has been on ``max_worker_losses + 1`` workers
  that died (Dask's ``allowed-failures``; a chunk that exhausts its workers' memory kills every worker it is
  given) stops the audit with :class:`ClusterError` instead of being retried forever.
* *Same code everywhere.* The journal keys a trial by the driver's sources and library versions
  (:func:`fdp_audit.auditing.provenance.journal_key`); a worker running other fdp-audit sources or versions
  would journal other numbers under that key, so each worker compares its own with the driver's before its
  first chunk and refuses to run otherwise.

``dask[distributed]`` is an optional dependency (``pip install fdp-audit[dask]``), imported only when this
executor is built; :func:`fdp_audit.training.memory.worker_memory_headroom` reads a worker's memory limit
without importing it.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import logging
import os
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np

from fdp_audit.errors import BadInputError
from fdp_audit.execution.base import ChunkTask, Executor, Result

INSTALL_HINT = "pip install fdp-audit[dask]"
DEFAULT_MAX_WORKER_LOSSES = 3  # Dask's own default for allowed-failures
CONNECT_TIMEOUT_S = 30
# a LocalCluster's worker closes its connections in well under a second, then spends seconds tearing down torch's
# interpreter state; past this grace its nanny kills it (what it computed is with the driver by then)
STOP_GRACE_S = 1.0


class ClusterError(RuntimeError):
    """The cluster could not finish a chunk (it kept killing the workers that ran it)."""


class DaskExecutor(Executor):
    """Runs the chunks on a Dask cluster: ``scheduler`` is an existing scheduler's address (``tcp://host:8786``);
    without one, a LocalCluster of ``workers`` single-threaded worker processes on 127.0.0.1 (default: one per
    CPU core) is started on first use and stopped by :meth:`close`."""

    name = "dask"
    options = ("scheduler", "workers")

    def __init__(self, scheduler: str | None = None, workers: int | None = None,
                 max_worker_losses: int = DEFAULT_MAX_WORKER_LOSSES):
        try:
            import distributed  # noqa: F401 - fail here, when the executor is chosen, not at the first chunk
        except ImportError as err:
            raise BadInputError(f"the dask executor needs dask.distributed, which is not installed "
                                f"({INSTALL_HINT})", "audit.executor") from err
        if scheduler is not None and workers is not None:
            raise BadInputError("give a scheduler address or a number of local workers, not both: an existing "
                                "cluster has its own workers", "audit.workers")
        if workers is not None and workers < 1:
            raise BadInputError(f"must be at least 1, got {workers}", "audit.workers")
        self.scheduler, self.workers, self.max_worker_losses = scheduler, workers, max_worker_losses
        self._client: Any = None
        self._cluster: Any = None
        self._warm_ups: list[Any] = []
        self._starting: Future[None] | None = None

    def _connect(self) -> Any:
        if self._client is not None:
            return self._client
        import dask
        from distributed import Client, LocalCluster

        if self.scheduler is not None:
            try:
                self._client = Client(self.scheduler, timeout=CONNECT_TIMEOUT_S)
            except (OSError, TimeoutError, ValueError) as err:
                raise BadInputError(f"cannot reach the Dask scheduler at {self.scheduler!r}: "
                                    f"{' '.join(str(err).split())[:200]}", "audit.scheduler") from err
            return self._client
        workers = self.workers or os.cpu_count() or 1
        with dask.config.set({"distributed.scheduler.allowed-failures": self.max_worker_losses}):
            # the scheduler runs in this process and reads allowed-failures when it starts
            self._cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                         host="127.0.0.1", dashboard_address=None, silence_logs=logging.ERROR)
        self._client = Client(self._cluster)
        return self._client

    @property
    def client(self) -> Any:
        """The cluster's ``distributed.Client``, once the cluster is up (started or reached here if need be)."""
        return self._ready()

    def __enter__(self) -> DaskExecutor:
        """Start (or reach) the cluster in the background, and have every worker import what a chunk needs, while
        the driver prepares the data and plans the audit: the start and the imports take seconds that would
        otherwise come before the audit or delay its first chunk. An error of the start is raised where the
        cluster is first needed."""
        if self._client is None and self._starting is None:
            starter = ThreadPoolExecutor(max_workers=1, thread_name_prefix="fdp-audit-cluster-start")
            self._starting = starter.submit(self._start)
            starter.shutdown(wait=False)
        return self

    def _start(self) -> None:
        client = self._connect()
        self._warm_ups = [client.submit(_local_environment, workers=[address], allow_other_workers=False, pure=False,
                                        key=f"fdp-audit-warm-up-{address}")
                          for address in client.scheduler_info()["workers"]]  # held: a released task may not run

    def _ready(self) -> Any:
        if self._starting is not None:
            starting, self._starting = self._starting, None
            starting.result()
        return self._connect()

    def map_unordered(self, task: ChunkTask, chunks: Sequence[np.ndarray]) -> Iterator[tuple[int, Result]]:
        """Run the task on every chunk on the cluster's workers (the task shipped once, each chunk a task keyed by the
        code, the task and the chunk), yielding results as the chunks finish.

        Args:
            task: a picklable callable whose result depends on its chunk alone.
            chunks: the chunks of trial indices (equal chunks run once and are yielded under each position).

        Yields:
            ``(position, task(chunks[position]))`` once for every position, in the order the chunks finish; chunks
            still pending when the caller stops are cancelled.

        Raises:
            ClusterError: a chunk's workers kept dying, or the cluster cancelled it.
            BadInputError: a worker runs other code or library versions than the driver.
        """
        if not len(chunks):
            return
        from distributed import as_completed
        from distributed.client import FutureCancelledError
        from distributed.scheduler import KilledWorker

        client = self._ready()
        payload = serialise(task)
        environment = run_environment()
        # the key names the code as well as the task: two drivers of different sources sharing a scheduler must
        # not join each other's chunks (the worker's check of the environment runs only where a chunk runs)
        task_key = hashlib.sha256(payload + repr(sorted(environment.items())).encode()).hexdigest()[:32]
        shared = client.submit(_load_task, payload, key=f"fdp-audit-task-{task_key}", pure=False)
        positions: dict[Any, list[int]] = {}  # a future per distinct chunk, yielded under each of its positions
        for position, chunk in enumerate(chunks):
            chunk = np.ascontiguousarray(chunk, dtype=np.int64)
            key = f"fdp-audit-chunk-{task_key}-{hashlib.sha256(chunk.tobytes()).hexdigest()[:32]}"
            future = client.submit(_run_chunk, shared, chunk, environment, key=key, pure=False)
            positions.setdefault(future, []).append(position)
        pending = set(positions)
        try:
            for future in as_completed(list(positions)):
                chunk = chunks[positions[future][0]]
                try:
                    result = future.result()
                except KilledWorker as err:
                    raise ClusterError(f"the chunk of trials {int(chunk[0])}..{int(chunk[-1])} was on "
                                       f"{self.max_worker_losses + 1} workers that died (out of memory? see the "
                                       "workers' logs); the journal keeps every finished chunk") from err
                except FutureCancelledError as err:
                    raise ClusterError(f"the cluster cancelled the chunk of trials {int(chunk[0])}..{int(chunk[-1])} "
                                       "(the scheduler restarted or lost its workers?)") from err
                pending.discard(future)
                future.release()  # the driver holds the result now: let the cluster forget it
                for position in positions[future]:
                    yield position, result
        finally:
            if pending:  # the caller stopped early (an error, an interrupt): nothing more is wanted
                client.cancel(list(pending))
            shared.release()

    def close(self) -> None:
        if self._starting is not None:
            starting, self._starting = self._starting, None
            # a start no chunk waited for: the cluster is closed all the same, and its error, if any, yields to the
            # audit's own (or to nothing, if the audit had no trial left to run)
            with contextlib.suppress(Exception):
                starting.result()
        self._warm_ups = []
        if self._client is not None:
            self._client.close()
            self._client = None
        if self._cluster is not None:
            try:
                self._cluster.sync(_stop_workers, self._cluster, STOP_GRACE_S)
            finally:
                self._cluster.close()
                self._cluster = None


async def _stop_workers(cluster: Any, grace_s: float) -> None:
    """Close every worker of a LocalCluster, each given ``0.8 * grace_s`` to exit before its nanny kills it."""
    await asyncio.gather(*(nanny.close(timeout=grace_s) for nanny in list(cluster.workers.values())))


def serialise(task: ChunkTask) -> bytes:
    """The task as cloudpickle bytes, with every loaded module of the user's own (a module file outside the
    standard library, the installed packages and fdp-audit's packages) pickled by value.

    Args:
        task: the chunk task.

    Returns:
        The pickle (protocol 5), which a worker without the user's files can load.
    """
    import cloudpickle

    from fdp_audit.auditing.provenance import user_modules

    # __main__ is pickled by value already; a compiled extension cannot be
    by_value = [module for module in user_modules()
                if module.__name__ != "__main__" and module.__file__.endswith(".py")]
    for module in by_value:
        cloudpickle.register_pickle_by_value(module)
    try:
        return cloudpickle.dumps(task, protocol=5)
    finally:
        for module in by_value:
            cloudpickle.unregister_pickle_by_value(module)


def _load_task(payload: bytes) -> ChunkTask:
    import cloudpickle

    return cloudpickle.loads(payload)


def run_environment() -> dict[str, str]:
    """What a trial's numbers depend on besides its configuration: fdp-audit's sources and library versions.

    Returns:
        ``sources`` (the digest of fdp-audit's sources) and each library's version, by name.
    """
    from fdp_audit.auditing.provenance import source_digest, versions

    return {"sources": source_digest(), **versions()}


@functools.cache
def _local_environment() -> tuple[tuple[str, str], ...]:
    return tuple(sorted(run_environment().items()))


def _run_chunk(task: ChunkTask, chunk: np.ndarray, environment: dict[str, str]) -> Result:
    local = dict(_local_environment())
    if local != environment:
        differ = "; ".join(f"{name}: driver {environment.get(name)}, worker {local.get(name)}"
                           for name in sorted(set(local) | set(environment))
                           if local.get(name) != environment.get(name))
        raise BadInputError(f"a Dask worker runs other code than the driver ({differ}): install the driver's "
                            "fdp-audit and library versions on every worker", "audit.scheduler")
    return task(chunk)
