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

def test_other_devices_and_other_c_libraries_are_left_alone(monkeypatch):
    monkeypatch.setattr(memory, "_glibc", lambda: pytest.fail("the allocator is tuned for CPU training only"))
    with memory.kept_host_memory(torch.device("meta")):
        pass
    monkeypatch.setattr(memory, "_glibc", lambda: None)
    with memory.kept_host_memory(torch.device("cpu")):
        pass
