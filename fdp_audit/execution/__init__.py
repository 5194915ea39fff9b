"""Executors: where an audit's chunks of trials run (in this process by default). Adding one means adding a
module here and one call to :func:`register_executor`; games and the trial runner never name an executor."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fdp_audit.execution.base import ChunkTask, Executor, split_chunks
from fdp_audit.execution.dask import DaskExecutor
from fdp_audit.execution.in_process import InProcessExecutor

if TYPE_CHECKING:  # the config validates its executor against EXECUTORS, importing this package
    from fdp_audit.config import AuditConfig

EXECUTORS: dict[str, type[Executor]] = {}


def register_executor(cls: type[Executor]) -> type[Executor]:
    """Make ``cls`` selectable by its ``name`` (``audit.executor`` in a config); usable as a class decorator."""
    if cls.name in EXECUTORS and EXECUTORS[cls.name] is not cls:
        raise ValueError(f"an executor named {cls.name!r} is already registered")
    EXECUTORS[cls.name] = cls
    return cls


def make_executor(name: str, **options: Any) -> Executor:
    """The registered executor ``name``, built with its options (a scheduler address, a worker count …)."""
    if name not in EXECUTORS:
        raise KeyError(f"unknown executor {name!r} (known: {', '.join(sorted(EXECUTORS))})")
    return EXECUTORS[name](**options)


def executor_for(audit: AuditConfig) -> Executor:
    """The executor an audit config chooses (``audit.executor``), built with the options of it that are set."""
    options = {name: getattr(audit, name) for name in EXECUTORS[audit.executor].options
               if getattr(audit, name) is not None}
    return make_executor(audit.executor, **options)


register_executor(InProcessExecutor)
register_executor(DaskExecutor)  # imports dask only when chosen

__all__ = ["EXECUTORS", "ChunkTask", "DaskExecutor", "Executor", "InProcessExecutor", "executor_for",
           "make_executor", "register_executor", "split_chunks"]
