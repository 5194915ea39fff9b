"""Intra-op threads chosen by the size of the work (docs/training.md): below :data:`PARALLEL_WORK` multiply-adds
per step, torch's intra-op threads cost more in hand-offs than they save — by an order of magnitude on a machine
whose cores other processes are using, where a thread waiting for a busy core stalls every step — so such steps
run on one thread. ``FDP_AUDIT_THREADS=N`` fixes the count instead."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import torch

PARALLEL_WORK = 1 << 24


@contextlib.contextmanager
def threads_for(work: int) -> Iterator[None]:
    """Run the block with one intra-op thread when ``work`` (multiply-adds per step) is small, else torch's
    default; ``FDP_AUDIT_THREADS`` overrides both. The previous thread count is restored after the block.

    Args:
        work: multiply-adds per step of the block's computation; below :data:`PARALLEL_WORK` means one thread.

    Yields:
        Nothing; the block runs once.
    """
    chosen = os.environ.get("FDP_AUDIT_THREADS", "").strip()
    count = int(chosen) if chosen.isdigit() and int(chosen) > 0 else (1 if work < PARALLEL_WORK else None)
    previous = torch.get_num_threads()
    if count is None or count == previous:
        yield
        return
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(previous)
