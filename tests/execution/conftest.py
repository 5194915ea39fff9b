"""A Dask cluster on loopback shared by the tests that only need somewhere to run tasks (starting one costs
seconds of worker start-up on a busy machine); tests that kill workers start their own."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest


@pytest.fixture(scope="session")
def dask_scheduler() -> Iterator[str]:
    """The address of a LocalCluster of two single-threaded worker processes on 127.0.0.1."""
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                  dashboard_address=None, silence_logs=logging.ERROR) as cluster:
        yield cluster.scheduler_address
