"""The host allocator keeps a training step's freed memory for the next step (docs/training.md, Memory)."""

from __future__ import annotations

import resource
import statistics

import pytest
import torch

from fdp_audit.training import memory


def _page_faults() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


@pytest.mark.skipif(memory._glibc() is None, reason="glibc's mallopt is what is tuned")
def test_a_chunk_reuses_its_freed_pages_instead_of_faulting_new_ones():
    """Four 24 MiB tensors freed together exceed glibc's default trim threshold (twice its largest block), so
    without the setting every round faults ~24,000 fresh pages (measured: about half of them, the rest reused);
    inside the context a typical round faults almost none (only rounds that grow the heap do)."""
    rounds, count, elements = 5, 4, 6 << 20

    def one_round() -> None:
        tensors = [torch.ones(elements) for _ in range(count)]
        del tensors

    with memory.kept_host_memory(torch.device("cpu")):
        for _ in range(3):
            one_round()
        faults = []
        for _ in range(rounds):
            before = _page_faults()
            one_round()
            faults.append(_page_faults() - before)
    pages = count * elements * 4 // 4096
    assert statistics.median(faults) < pages // 20, f"page faults per round {faults} for {pages} pages allocated"


class _RecordingLibc:
    def __init__(self) -> None:
        self.calls: list[tuple[int, int]] = []

    def mallopt(self, parameter: int, value: int) -> int:
        self.calls.append((parameter, value))
        return 1

    def trim(self) -> int | None:
        values = [value for parameter, value in self.calls if parameter == memory._M_TRIM_THRESHOLD]
        return values[-1] if values else None


@pytest.fixture
def recording_libc(monkeypatch) -> _RecordingLibc:
    libc = _RecordingLibc()
    monkeypatch.setattr(memory, "_glibc", lambda: libc)
    monkeypatch.setattr(memory, "_HOST_ALLOCATOR", memory._HostAllocator())
    return libc


def test_one_chunk_leaving_keeps_the_setting_for_a_chunk_still_training(recording_libc):
    """Two chunks overlapping as on a Dask worker's threads (first in, first out): the first one's exit must not
    lower the trim threshold under the second; the last exit rests it, and the mmap threshold is set only once."""
    cpu = torch.device("cpu")
    first, second = memory.kept_host_memory(cpu), memory.kept_host_memory(cpu)
    first.__enter__()
    second.__enter__()
    first.__exit__(None, None, None)
    assert recording_libc.trim() == memory._TRAINING_TRIM
    second.__exit__(None, None, None)
    assert recording_libc.trim() == memory._RESTING_TRIM
    with memory.kept_host_memory(cpu):
        assert recording_libc.trim() == memory._TRAINING_TRIM
    assert recording_libc.trim() == memory._RESTING_TRIM
    mmap_settings = [call for call in recording_libc.calls if call[0] == memory._M_MMAP_THRESHOLD]
    assert mmap_settings == [(memory._M_MMAP_THRESHOLD, memory._MMAP_THRESHOLD)]


def test_a_chunk_that_fails_still_rests_the_allocator(recording_libc):
    with pytest.raises(RuntimeError), memory.kept_host_memory(torch.device("cpu")):
        raise RuntimeError("training failed")
    assert recording_libc.trim() == memory._RESTING_TRIM


def test_other_devices_leave_the_allocator_alone(recording_libc):
    with memory.kept_host_memory(torch.device("meta")):
        pass
    assert recording_libc.calls == []
