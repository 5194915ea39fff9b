"""The memory a chunk of models may use on a Dask worker (the batched engine sizes its chunks from it), and how the
host's allocator keeps a step's freed memory for the next step. It lives with the engine, not with the Dask
executor, so that training never imports the executors that run it."""

from __future__ import annotations

import contextlib
import ctypes
import sys
import threading
from collections.abc import Iterator

import torch

# glibc's mallopt parameters (malloc.h) and the values set. 32 MiB is glibc's largest dynamic mmap threshold on
# 64-bit hosts (DEFAULT_MMAP_THRESHOLD_MAX); when glibc raises the threshold itself it sets the trim threshold to
# twice it, hence the resting trim threshold of 64 MiB. While any chunk trains, up to 1 GiB of freed heap stays mapped.
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_MMAP_THRESHOLD, _TRAINING_TRIM, _RESTING_TRIM = 32 << 20, 1 << 30, 64 << 20

def worker_memory_headroom() -> int | None:
    """Bytes one task may still use when this process is a Dask worker with a memory limit: the limit less
    what the worker process holds now, shared among the worker's threads (each may run a task); None when
    this process is not a Dask worker or its worker has no limit. The nanny restarts a worker at 95 % of its
    limit, so a task sized from the host's free memory instead could kill its worker over and over.

    Returns:
        The bytes per task, or None.
    """
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


class _HostAllocator:
    """glibc's thresholds, shared by every chunk training in this process (a Dask worker runs one per thread).

    The mmap threshold is set once per process and never undone: glibc has no call that turns its dynamic mmap
    threshold back on once a threshold has been set, and setting back its documented default (128 KiB) would pin it
    at 128 KiB, so that everything after training (a benchmark's baseline) would get fresh pages for every block
    above 128 KiB, slower than before. glibc's dynamic threshold rises by itself to the size of each mmapped block
    up to 32 MiB that the program frees and never falls, so 32 MiB is its steady state in any program that has freed
    a block that large (a CNN step frees blocks of tens of MiB), and code run after training sees that steady state.
    The trim threshold is counted: the first chunk to enter raises it, the last to leave sets it to glibc's steady
    state for that mmap threshold (twice it), so one chunk's end never lowers it under another that is still
    training, and nesting is safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._training = 0
        self._threshold_set = False

    def enter(self, libc: ctypes.CDLL) -> None:
        with self._lock:
            if not self._threshold_set:
                libc.mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD)
                self._threshold_set = True
            if self._training == 0:
                libc.mallopt(_M_TRIM_THRESHOLD, _TRAINING_TRIM)
            self._training += 1

    def leave(self, libc: ctypes.CDLL) -> None:
        with self._lock:
            self._training -= 1
            if self._training == 0:
                libc.mallopt(_M_TRIM_THRESHOLD, _RESTING_TRIM)


_HOST_ALLOCATOR = _HostAllocator()


@contextlib.contextmanager
def kept_host_memory(device: torch.device) -> Iterator[None]:
    """Run a training chunk with the memory each step frees kept mapped for the next step, on a CPU with glibc
    (elsewhere, and on other devices, nothing changes).

    A step allocates and frees many tensors of a few MiB to tens of MiB (a CNN's activations: 25 MiB for 512
    Fashion-MNIST images at 16 channels). glibc serves blocks above its mmap threshold with fresh pages and returns
    freed memory above its trim threshold to the kernel, so each step touched its working set as new pages:
    about 6,000 page faults per 25 MiB, a third of a CNN step's CPU time in the kernel (B1 for images: 140 → 97 ms
    per step). Inside the context glibc's mmap threshold is 32 MiB (set once for the whole process, see
    ``_HostAllocator``) and its trim threshold 1 GiB, so those pages are kept; the retained memory is at most the
    steps' own peak. When the last chunk in the process leaves, the trim threshold drops to 64 MiB, so the next
    free returns the surplus to the kernel (a Dask worker's resident memory falls back). No ``malloc_trim``: it
    also releases free pages inside the heap, and whatever runs next (in a benchmark, the baseline) would fault
    them back.

    Args:
        device: the device the chunk trains on.

    Yields:
        Nothing; the thresholds hold while the context is open.
    """
    libc = _glibc() if device.type == "cpu" else None
    if libc is None:
        yield
        return
    _HOST_ALLOCATOR.enter(libc)
    try:
        yield
    finally:
        _HOST_ALLOCATOR.leave(libc)
