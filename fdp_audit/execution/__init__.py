"""Executors: where an audit's chunks of trials run (in this process by default). Adding one means adding a
module here and one :func:`register_executor` line below (docs/extending.md); games and the trial runner never
name an executor."""

from __future__ import annotations

from typing import Any

from fdp_audit.config import EXECUTION_FIELDS, AuditConfig
from fdp_audit.errors import BadInputError
from fdp_audit.execution.base import ChunkTask, Executor, split_chunks
from fdp_audit.execution.dask import DaskExecutor
from fdp_audit.execution.in_process import InProcessExecutor
from fdp_audit.registry import Registry, Rule

EXECUTORS: Registry[type[Executor]] = Registry("executor", "audit.executor", (
    Rule(lambda cls, _: set(cls.options) <= set(EXECUTION_FIELDS[1:]),
         f"options must be audit settings among {', '.join(EXECUTION_FIELDS[1:])}"),
))


def register_executor(cls: type[Executor]) -> type[Executor]:
    """Make an executor selectable by its ``name`` (``audit.executor`` in a config); usable as a class decorator.

    Args:
        cls: an :class:`Executor` subclass; its ``options`` name the audit settings its constructor takes.

    Returns:
        ``cls`` itself.

    Raises:
        ValueError: the name is taken, or an option is not an audit setting.
    """
    return EXECUTORS.register(cls)


def make_executor(name: str, **options: Any) -> Executor:
    """The registered executor ``name``, built with its options.

    Args:
        name: a registered executor's name.
        **options: its constructor's options (a scheduler address, a worker count …).

    Returns:
        The executor; close it (or use it as a context manager) when done.

    Raises:
        BadInputError: ``name`` is not registered (field ``audit.executor``).
    """
    return EXECUTORS[name](**options)


def executor_for(audit: AuditConfig) -> Executor:
    """The executor an audit config chooses, built with the options of it that are set.

    Args:
        audit: the ``audit`` section of a config (``executor``, ``scheduler``, ``workers``).

    Returns:
        The executor.

    Raises:
        BadInputError: the executor is not registered, or a set option does not apply to it (a scheduler
            address in-process).
    """
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
