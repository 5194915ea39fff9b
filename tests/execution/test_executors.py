"""Contract tests run over every registered executor: each chunk's result comes back exactly once, under its own
position, whatever order the chunks finish in."""

from __future__ import annotations

import numpy as np
import pytest

from fdp_audit.config import config_from_dict
from fdp_audit.errors import BadInputError
from fdp_audit.execution import (
    EXECUTORS,
    Executor,
    InProcessExecutor,
    executor_for,
    make_executor,
    register_executor,
    split_chunks,
)


def squares(chunk: np.ndarray) -> np.ndarray:
    return chunk * chunk


def test_split_chunks_covers_the_indices_in_order():
    indices = np.arange(10, 33)
    chunks = split_chunks(indices, 7)
    assert [len(c) for c in chunks] == [7, 7, 7, 2]
    np.testing.assert_array_equal(np.concatenate(chunks), indices)
    with pytest.raises(ValueError):
        split_chunks(indices, 0)


@pytest.fixture
def executor_options(request: pytest.FixtureRequest, name: str) -> dict:
    """Options that point an executor at what the test machine offers: Dask at the shared loopback cluster."""
    return {"scheduler": request.getfixturevalue("dask_scheduler")} if name == "dask" else {}


@pytest.mark.parametrize("name", sorted(EXECUTORS))
def test_every_chunk_comes_back_once_under_its_position(name, executor_options):
    chunks = split_chunks(np.arange(50), 8)
    with make_executor(name, **executor_options) as executor:
        results = list(executor.map_unordered(squares, chunks))
    assert sorted(position for position, _ in results) == list(range(len(chunks)))
    for position, result in results:
        np.testing.assert_array_equal(result, chunks[position] ** 2)


def test_registry_refuses_a_second_executor_under_a_taken_name_and_unknown_names():
    class Other(Executor):
        name = "local"

        def map_unordered(self, task, chunks):
            yield from ()

    with pytest.raises(ValueError):
        register_executor(Other)
    assert EXECUTORS["local"] is not Other
    with pytest.raises(BadInputError, match="unknown executor 'no-such-executor' .known: local, dask."):
        make_executor("no-such-executor")


@pytest.mark.parametrize(("audit", "message"), [
    ({"executor": "spark"}, "audit.executor: unknown executor 'spark' (known: local, dask)"),
    ({"scheduler": "tcp://host:8786"}, "audit.scheduler: does not apply to audit.executor 'local'"),
    ({"workers": 4}, "audit.workers: does not apply to audit.executor 'local'"),
])
def test_an_audit_config_chooses_a_registered_executor_with_only_its_options(audit, message, small_config):
    """Checked when the audit starts, before anything is trained (the CLI exits 2 with the message)."""
    with pytest.raises(BadInputError) as info:
        executor_for(config_from_dict(small_config(audit=audit)).audit)
    assert str(info.value) == message
    assert isinstance(executor_for(config_from_dict(small_config()).audit), InProcessExecutor)
