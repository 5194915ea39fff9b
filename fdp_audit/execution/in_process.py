"""The default executor: every chunk runs in the calling process, one after the other."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

from fdp_audit.execution.base import ChunkTask, Executor, Result


class InProcessExecutor(Executor):
    """Runs the chunks here, in order; results are yielded as soon as each chunk is done, so a journal written
    by the caller survives an interruption with every finished chunk."""

    name = "local"

    def map_unordered(self, task: ChunkTask, chunks: Sequence[np.ndarray]) -> Iterator[tuple[int, Result]]:
        """Run the task on every chunk here, one after the other.

        Args:
            task: a callable whose result depends on its chunk alone.
            chunks: the chunks of trial indices.

        Yields:
            ``(position, task(chunks[position]))`` for each chunk in order, as soon as it is done.
        """
        for position, chunk in enumerate(chunks):
            yield position, task(chunk)
