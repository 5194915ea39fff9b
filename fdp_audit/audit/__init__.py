"""Audit engine (docs/accounting.md, docs/statistics.md, docs/games.md): games, statistics, verdicts and results.

The package is also the library's entry point for an audit: ``fdp_audit.audit(config_or_path, ...)`` calls
:func:`fdp_audit.api.audit` (docs/api.md), whether or not a module of the engine has been imported before.
"""

from __future__ import annotations

import inspect
import sys
import types
from typing import Any


class _CallablePackage(types.ModuleType):
    """``fdp_audit.audit``: the engine's package, which runs an audit when called. Its signature and docstring
    are the call's (``inspect.signature``, ``help()`` and a notebook's ``?`` show them), read from
    :mod:`fdp_audit.api` when first asked for, so that importing the package stays light."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from fdp_audit.api import audit

        return audit(*args, **kwargs)

    @property
    def __signature__(self) -> inspect.Signature:
        from fdp_audit.api import audit

        return inspect.signature(audit)

    @property
    def __doc__(self) -> str:  # type: ignore[override]
        from fdp_audit.api import audit

        return (f"audit{inspect.signature(audit)}\n\n{inspect.getdoc(audit)}\n\n"
                f"As a package: {inspect.cleandoc(vars(self)['__doc__'])}")


sys.modules[__name__].__class__ = _CallablePackage
