"""Audits whose trials run on Dask clusters on loopback (docs/cluster.md): ``results.json`` is identical in every
number to the in-process run of the same config and seed; a worker killed mid-audit costs only its chunk; a
driver killed mid-audit resumes from its journal with the same results. The clusters are started and stopped
by the tests (or by the audit, with ``--workers``)."""

from __future__ import annotations

import json
import logging
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from fdp_audit.auditing.journal import Journal
from fdp_audit.cli import main
from tests.conftest import sigkill_audit_after_first_chunk

distributed = pytest.importorskip("distributed")

TRIALS, CHUNK = 60, 6  # 10 chunks per game; enough trials for every comparison to be able to fail
GAMES = ("distinguishing", "attribute")
FINISHED = (0, 1)  # pass or violation: a finished audit either way
PER_RUN = ("created", "checksum")  # what differs between two runs of the same audit: when it ran
RUN_SPECIFIC = ("command", "reused_trials")  # how it was started and what it read back from a journal
WHERE = ("executor", "scheduler", "workers")  # where its trials ran, which changes none of its numbers


def numbers(folder: Path) -> dict[str, Any]:
    """An audit's results.json without what legitimately differs between runs of the same audit."""
    results = json.loads((folder / "results.json").read_text())
    out = {k: v for k, v in results.items() if k not in PER_RUN}
    reproducibility = {k: v for k, v in results["reproducibility"].items() if k not in RUN_SPECIFIC}
    config = reproducibility["config"]
    reproducibility["config"] = {**config, "audit": {k: v for k, v in config["audit"].items() if k not in WHERE}}
    out["reproducibility"] = reproducibility
    return out


def journal_rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def chunk_keys_computed(scheduler: str) -> set[str]:
    """The chunk tasks the scheduler has seen finish (its transition log)."""
    def finished(dask_scheduler) -> list[str]:
        return sorted({str(entry[0]) for entry in dask_scheduler.transition_log
                       if str(entry[0]).startswith("fdp-audit-chunk-") and entry[2] == "memory"})

    with distributed.Client(scheduler) as client:
        return set(client.run_on_scheduler(finished))


@pytest.fixture(scope="module")
def config_path(small_config, write_yaml, tmp_path_factory) -> Path:
    raw = small_config("dp_sgd", rows=200, mechanism={"steps": 10, "sample_rate": 0.2},
                       audit={"trials": TRIALS, "max_models_per_chunk": CHUNK, "games": list(GAMES),
                              "attacks": ["prior", "likelihood", "iterates"]})
    return write_yaml(tmp_path_factory.mktemp("dask-audit") / "audit.yaml", raw)


@pytest.fixture(scope="module")
def in_process(config_path: Path, tmp_path_factory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("in-process")
    assert main(["audit", str(config_path), "--out", str(out)]) in FINISHED
    return numbers(out)


@pytest.mark.slow
def test_a_cluster_audit_is_identical_to_the_in_process_one(config_path, in_process, dask_scheduler, tmp_path):
    """Every chunk runs on the cluster (the scheduler computed one task per chunk) and results.json holds the
    same numbers as the in-process run: verdict, comparisons, ROC points, every game's section."""
    out = tmp_path / "dask"
    before = chunk_keys_computed(dask_scheduler)
    assert main(["audit", str(config_path), "--scheduler", dask_scheduler, "--out", str(out)]) in FINISHED
    assert len(chunk_keys_computed(dask_scheduler) - before) == len(GAMES) * TRIALS // CHUNK
    assert numbers(out) == in_process
    rows = journal_rows(out / "journal.jsonl")
    assert sorted(len(row["indices"]) for row in rows) == [CHUNK] * (len(GAMES) * TRIALS // CHUNK)


@pytest.mark.slow
def test_a_worker_killed_mid_audit_costs_only_its_chunk(config_path, in_process, tmp_path, monkeypatch):
    """When the first chunk is journaled, SIGKILL a worker that is running a chunk. The scheduler runs that chunk
    again on a live worker; the audit finishes with every trial journaled once and the in-process numbers."""
    killed: list[int] = []
    record = Journal.record

    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                  dashboard_address=None, silence_logs=logging.ERROR) as cluster:
        observer = distributed.Client(cluster.scheduler_address)

        def record_then_kill(journal, *args, **kwargs):
            record(journal, *args, **kwargs)
            if killed:
                return
            busy = [address for address, keys in observer.processing().items()
                    if any(str(key).startswith("fdp-audit-chunk-") for key in keys)]
            assert busy, "no worker was running a chunk when the first chunk arrived"
            pid = observer.run(os.getpid, workers=busy[:1])[busy[0]]
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)

        monkeypatch.setattr(Journal, "record", record_then_kill)
        out = tmp_path / "killed-worker"
        try:
            assert main(["audit", str(config_path), "--scheduler", cluster.scheduler_address, "--out", str(out)]) \
                in FINISHED
        finally:
            observer.close()
    assert killed
    with pytest.raises(ProcessLookupError):
        os.kill(killed[0], 0)
    indices = [(row["game"], i) for row in journal_rows(out / "journal.jsonl") for i in row["indices"]]
    assert len(indices) == len(set(indices)) == len(GAMES) * TRIALS
    assert numbers(out) == in_process


@pytest.mark.slow
def test_a_driver_killed_mid_audit_resumes_from_its_journal(config_path, in_process, tmp_path):
    """SIGKILL the command-line driver (its own LocalCluster of 2 workers) once a chunk is journaled; the same
    command again trains only the missing trials and writes the in-process numbers."""
    out = tmp_path / "killed-driver"
    journal = out / "journal.jsonl"
    assert sigkill_audit_after_first_chunk([str(config_path), "--workers", "2"], out) == -signal.SIGKILL
    killed_rows = journal_rows(journal)
    done = sum(len(row["indices"]) for row in killed_rows)
    assert 0 < done < len(GAMES) * TRIALS, "the kill must land between the first and the last chunk"
    assert sorted(p.name for p in out.iterdir()) == ["journal.jsonl"]

    assert main(["audit", str(config_path), "--workers", "2", "--out", str(out)]) in FINISHED
    rows = journal_rows(journal)
    assert rows[:len(killed_rows)] == killed_rows
    indices = [(row["game"], i) for row in rows for i in row["indices"]]
    assert len(indices) == len(set(indices)) == len(GAMES) * TRIALS  # each trial trained once over both runs
    assert numbers(out) == in_process
