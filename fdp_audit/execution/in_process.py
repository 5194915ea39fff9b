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
        for position, chunk in enumerate(chunks):
            yield position, task(chunk)
