"""Intra-op threads chosen by the work (fdp_audit/threads.py). Measured on the 2-core development machine under
a load of about 10 (other processes on both cores): a 128-trial, 100-step logistic audit took 32 s and 49 s
with torch's default of 2 threads, 15 s and 20 s with one."""

from __future__ import annotations

import pytest
import torch

from fdp_audit.threads import PARALLEL_WORK, threads_for


@pytest.fixture
def two_threads():
    previous = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(previous)


def test_small_work_runs_on_one_thread_and_restores(two_threads, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FDP_AUDIT_THREADS", raising=False)
    with threads_for(PARALLEL_WORK - 1):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == 2
    with threads_for(PARALLEL_WORK):
        assert torch.get_num_threads() == 2
    monkeypatch.setenv("FDP_AUDIT_THREADS", "3")
    with threads_for(1):
        assert torch.get_num_threads() == 3
    assert torch.get_num_threads() == 2


def test_training_small_models_uses_one_thread(two_threads, monkeypatch: pytest.MonkeyPatch) -> None:
    """The engine trained a 6-parameter model with every core's thread: 2-3× slower under contention."""
    from fdp_audit.training.engine import train_models
    from tests.training.test_engine import _problem

    monkeypatch.delenv("FDP_AUDIT_THREADS", raising=False)
    seen = set()
    list(train_models(_problem(), 0, range(4), on_step=lambda done, params: seen.add(torch.get_num_threads())))
    assert seen == {1} and torch.get_num_threads() == 2
