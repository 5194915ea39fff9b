"""The Dask executor on loopback clusters: lost workers cost only their chunk, a chunk that keeps killing its
workers stops the audit, workers size their chunks from their own memory limit, the user's modules reach
workers that cannot import them, and a missing extra, an unreachable scheduler or a worker running other
code are one-line errors."""

from __future__ import annotations

import logging
import os
import re
import signal
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import torch

from fdp_audit.errors import BadInputError
from fdp_audit.execution import DaskExecutor, split_chunks
from fdp_audit.execution import dask as dask_executor
from fdp_audit.training import engine
from fdp_audit.training.memory import worker_memory_headroom
from tests.conftest import module_from_file

distributed = pytest.importorskip("distributed")


@dataclass(frozen=True)
class KillsItsWorker:
    """Squares a chunk, but first kills the worker process it runs on: on the first attempt at the chunk
    starting with ``victim`` (a marker file records that it happened), or on every attempt if ``always``."""

    marker: str
    victim: int
    always: bool = False

    def __call__(self, chunk: np.ndarray) -> np.ndarray:
        if int(chunk[0]) == self.victim and (self.always or not os.path.exists(self.marker)):
            Path(self.marker).write_text(str(os.getpid()))
            os.kill(os.getpid(), signal.SIGKILL)  # mid-task, as a crash or the kernel's OOM killer would
        return chunk * chunk


def memory_seen_by_a_task(chunk: np.ndarray) -> tuple[int, int | None, int]:
    return engine._available_bytes(torch.device("cpu")), worker_memory_headroom(), os.getpid()


@pytest.mark.slow
def test_a_worker_killed_mid_task_costs_only_its_chunk(tmp_path: Path) -> None:
    """Two workers, eight chunks; the first attempt at chunk 3 SIGKILLs its worker mid-task. The scheduler runs
    that chunk again on a live worker: every chunk comes back exactly once with its own result."""
    marker = tmp_path / "killed"
    chunks = split_chunks(np.arange(40), 5)
    with DaskExecutor(workers=2) as executor:
        results = list(executor.map_unordered(KillsItsWorker(str(marker), victim=15), chunks))
    assert marker.exists(), "the worker was not killed"
    assert sorted(position for position, _ in results) == list(range(len(chunks)))
    for position, result in results:
        np.testing.assert_array_equal(result, chunks[position] ** 2)


@pytest.mark.slow
def test_a_chunk_that_keeps_killing_its_workers_stops_the_run(tmp_path: Path) -> None:
    """Retries are bounded: with max_worker_losses=1 the chunk's second lost worker ends the run with a
    ClusterError naming the chunk, instead of restarting workers forever. (One chunk: a chunk queued on a
    dying worker counts its death too.)"""
    task = KillsItsWorker(str(tmp_path / "killed"), victim=0, always=True)
    with DaskExecutor(workers=1, max_worker_losses=1) as executor:
        with pytest.raises(dask_executor.ClusterError, match=r"trials 0\.\.4 was on 2 workers that died"):
            list(executor.map_unordered(task, [np.arange(5)]))


@pytest.mark.slow
def test_a_task_on_a_worker_sizes_its_chunks_from_the_workers_memory_limit() -> None:
    """A 600 MiB worker on a host with more free memory: the engine's budget on the worker is below the limit
    (less what the worker process already holds), while the driver, no worker, sees the host's memory."""
    limit = 600 * 2**20
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True, host="127.0.0.1",
                                  dashboard_address=None, memory_limit=limit, silence_logs=logging.ERROR) as cluster:
        with DaskExecutor(scheduler=cluster.scheduler_address) as executor:
            [(_, (available, headroom, pid))] = list(executor.map_unordered(memory_seen_by_a_task, [np.arange(1)]))
    host = engine._available_bytes(torch.device("cpu"))
    assert pid != os.getpid()
    assert headroom is not None and 0 < available == min(headroom, available) < limit
    assert worker_memory_headroom() is None and host > limit  # this machine has more than 600 MiB


def test_the_users_module_reaches_workers_that_cannot_import_it(tmp_path: Path, dask_scheduler: str) -> None:
    """A task from a module loaded by path (as ``file.py:function`` specs are), under a name no worker can
    import: it travels by value with the task."""
    source = "OFFSET = 7\n\ndef shifted(chunk):\n    return chunk + OFFSET\n"
    with (module_from_file(tmp_path / "user_mechanism.py", source, "fdp_audit_test_user_module") as module,
          DaskExecutor(scheduler=dask_scheduler) as executor):
        results = dict(executor.map_unordered(module.shifted, split_chunks(np.arange(6), 3)))
    np.testing.assert_array_equal(results[1], np.arange(3, 6) + 7)


def test_closing_a_local_cluster_ends_its_worker_processes() -> None:
    """The executor ends its workers' processes at close (killing a worker still tearing down after its graceful
    close), so nothing outlives the audit."""
    with DaskExecutor(workers=2) as executor:
        pids = set(executor.client.run(os.getpid).values())
    assert len(pids) == 2 and os.getpid() not in pids
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_a_worker_running_other_code_refuses_its_chunk() -> None:
    """What a worker runs before each chunk: another fdp-audit source tree or library version than the
    driver's would journal other numbers under the driver's key."""
    driver = dask_executor.run_environment()
    assert dask_executor._run_chunk(np.negative, np.arange(3), driver).tolist() == [0, -1, -2]
    with pytest.raises(BadInputError, match=r"other code than the driver \(sources: driver edited, worker [0-9a-f]+"):
        dask_executor._run_chunk(np.negative, np.arange(3), {**driver, "sources": "edited"})
    with pytest.raises(BadInputError, match=r"torch: driver 0\.0, worker"):
        dask_executor._run_chunk(np.negative, np.arange(3), {**driver, "torch": "0.0"})


def test_without_the_extra_the_executor_is_bad_input(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "distributed", None)  # import distributed now raises ImportError
    with pytest.raises(BadInputError, match=r"audit.executor: .*pip install fdp-audit\[dask\]"):
        DaskExecutor()


def test_an_unreachable_scheduler_or_both_settings_are_bad_input(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dask_executor, "CONNECT_TIMEOUT_S", 1)
    with pytest.raises(BadInputError, match=r"audit.scheduler: cannot reach the Dask scheduler at 'tcp://127.0.0.1:1'"):
        list(DaskExecutor(scheduler="tcp://127.0.0.1:1").map_unordered(np.negative, [np.arange(2)]))
    # started in the background on entry: the error comes where the cluster is first needed, and an audit with
    # nothing to run never needed it
    with DaskExecutor(scheduler="tcp://127.0.0.1:1") as executor:
        with pytest.raises(BadInputError, match=r"audit.scheduler: cannot reach the Dask scheduler"):
            list(executor.map_unordered(np.negative, [np.arange(2)]))
    with DaskExecutor(scheduler="tcp://127.0.0.1:1") as executor:
        assert list(executor.map_unordered(np.negative, [])) == []
    with pytest.raises(BadInputError, match="audit.workers: give a scheduler address or a number of local workers"):
        DaskExecutor(scheduler="tcp://127.0.0.1:1", workers=2)
    with pytest.raises(BadInputError, match="audit.workers: must be at least 1"):
        DaskExecutor(workers=0)


@pytest.mark.parametrize(("flags", "message"), [
    (["--workers", "2"], r"audit.executor: the dask executor needs dask.distributed, which is not installed "
                         r"\(pip install fdp-audit\[dask\]\)"),
    (["--workers", "2", "--scheduler", "tcp://127.0.0.1:8786"], "--workers: give a scheduler address"),
    (["--workers", "0"], "--workers: must be >= 1"),
])
def test_the_command_line_refuses_a_cluster_it_cannot_use(flags, message, cli, one_line_error, small_config,
                                                          write_yaml, tmp_path, monkeypatch) -> None:
    """Exit 2 with one line and nothing written: without the extra, with both a scheduler and local workers,
    with no workers."""
    monkeypatch.setitem(sys.modules, "distributed", None)
    config = write_yaml(tmp_path / "audit.yaml", small_config())
    result = cli("audit", config, "--out", tmp_path / "out", *flags)
    assert result.code == 2
    assert re.search(message, one_line_error(result.err))
    assert not (tmp_path / "out").exists()
