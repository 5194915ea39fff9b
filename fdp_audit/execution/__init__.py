"""Executors: where an audit's chunks of trials run (in this process by default). Adding one means adding a
module here and one call to :func:`register_executor`; games and the trial runner never name an executor."""

from __future__ import annotations

from typing import Any

from fdp_audit.config import EXECUTION_FIELDS, AuditConfig
from fdp_audit.errors import BadInputError
from fdp_audit.execution.base import ChunkTask, Executor, split_chunks
from fdp_audit.execution.dask import DaskExecutor
from fdp_audit.execution.in_process import InProcessExecutor

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
    """The executor an audit config chooses (``audit.executor``), built with the options of it that are set; an
    unknown executor, or an option it does not take (a scheduler address in-process), is bad input."""
    if audit.executor not in EXECUTORS:
        raise BadInputError(f"unknown executor {audit.executor!r} (known: {', '.join(sorted(EXECUTORS))})",
                            "audit.executor")
    cls = EXECUTORS[audit.executor]
    for name in EXECUTION_FIELDS[1:]:
        if getattr(audit, name) is not None and name not in cls.options:
            raise BadInputError(f"does not apply to audit.executor {audit.executor!r}", f"audit.{name}")
    return make_executor(audit.executor, **{name: getattr(audit, name) for name in cls.options
                                            if getattr(audit, name) is not None})


register_executor(InProcessExecutor)
register_executor(DaskExecutor)  # imports dask only when chosen

__all__ = ["EXECUTORS", "ChunkTask", "DaskExecutor", "Executor", "InProcessExecutor", "executor_for",
           "make_executor", "register_executor", "split_chunks"]
