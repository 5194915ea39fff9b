"""Where an audit's trials run. A game splits its trial indices into chunks and hands an :class:`Executor` one
picklable task; the executor runs the task once per chunk — in this process, or on other machines — and yields
each chunk's result as it finishes, in any order. Trial ``i``'s secret and model depend on ``i`` and the seed
alone (counter-based streams, docs/design.md), so a chunk gives the same result wherever and whenever it runs,
and the driver, which journals results as they arrive, never needs the chunks back in order."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from typing import ClassVar, TypeVar

import numpy as np

Result = TypeVar("Result")
ChunkTask = Callable[[np.ndarray], Result]


class Executor(ABC):
    """Runs ``task(chunk)`` for every chunk of trial indices. Implementations differ only in where the calls run;
    a task must therefore be a picklable callable whose result depends on its chunk alone."""

    name: ClassVar[str]
    options: ClassVar[tuple[str, ...]] = ()  # the audit settings its constructor takes (audit.scheduler …)

    @abstractmethod
    def map_unordered(self, task: ChunkTask, chunks: Sequence[np.ndarray]) -> Iterator[tuple[int, Result]]:
        """Run the task on every chunk, wherever the executor runs it.

        Args:
            task: a picklable callable whose result depends on its chunk alone.
            chunks: the chunks of trial indices.

        Returns:
            An iterator of ``(position, task(chunks[position]))``, once for every chunk, in the order the chunks
            finish: a chunk lost with its worker is run again, and the caller sees each position exactly once.
        """

    def close(self) -> None:
        """Release what the executor started (worker processes, a cluster); the in-process one has nothing."""
        return None

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def split_chunks(indices: np.ndarray, chunk_size: int) -> list[np.ndarray]:
    """Consecutive chunks of at most ``chunk_size`` trial indices, covering ``indices`` in order.

    Args:
        indices: the trial indices.
        chunk_size: the most indices per chunk (≥ 1).

    Returns:
        The chunks, int64; only the last may be shorter.

    Raises:
        ValueError: ``chunk_size`` is below 1.
    """
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be at least 1, got {chunk_size}")
    indices = np.asarray(indices, dtype=np.int64)
    return [indices[start:start + chunk_size] for start in range(0, len(indices), chunk_size)]
