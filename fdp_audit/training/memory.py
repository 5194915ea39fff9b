"""The memory a chunk of models may use on a Dask worker (the batched engine sizes its chunks from it), and how the
host's allocator keeps a step's freed memory for the next step. It lives with the engine, not with the Dask
executor, so that training never imports the executors that run it."""

from __future__ import annotations

import contextlib
import ctypes
import sys
from collections.abc import Iterator

import torch

# glibc's mallopt parameters and the values set: blocks up to 32 MiB (glibc's largest mmap threshold) come from the
# heap, and up to 1 GiB of freed heap stays mapped while training; afterwards the trim threshold is glibc's own
# steady state for 32 MiB blocks (twice the mmap threshold).
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_MMAP_THRESHOLD, _TRAINING_TRIM, _RESTING_TRIM = 32 << 20, 1 << 30, 64 << 20


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


def _glibc() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return None
    return libc if hasattr(libc, "mallopt") else None


@contextlib.contextmanager
def kept_host_memory(device: torch.device) -> Iterator[None]:
    """Run a training chunk with the memory each step frees kept mapped for the next step, on a CPU with glibc.

    A step allocates and frees many tensors of a few MiB to tens of MiB (a CNN's activations: 25 MiB for 512
    Fashion-MNIST images at 16 channels). glibc serves blocks above its mmap threshold with fresh pages and returns
    freed memory above its trim threshold to the kernel, so each step touched its working set as new pages:
    about 6,000 page faults per 25 MiB, a quarter of a CNN step's CPU time in the kernel. Raising both thresholds
    while training keeps those pages; the retained memory is at most the step's own peak. When the chunk ends the
    trim threshold drops to glibc's own steady state for such blocks, so the next free returns the surplus to the
    kernel (a Dask worker's resident memory falls back as before). No ``malloc_trim``: it also releases free pages
    inside the heap, and whatever runs next in the process (in a benchmark, the baseline) would fault them back."""
    libc = _glibc() if device.type == "cpu" else None
    if libc is None:
        yield
        return
    libc.mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD)
    libc.mallopt(_M_TRIM_THRESHOLD, _TRAINING_TRIM)
    try:
        yield
    finally:
        libc.mallopt(_M_TRIM_THRESHOLD, _RESTING_TRIM)
