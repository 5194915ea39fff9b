"""Audit engine (docs/accounting.md, docs/statistics.md, docs/games.md): games, statistics, verdicts and results.

The package is also the library's entry point for an audit: ``fdp_audit.audit(config_or_path, ...)`` calls
:func:`fdp_audit.api.audit` (docs/api.md), whether or not a module of the engine has been imported before.
"""

from __future__ import annotations

import sys
import types
from typing import Any


class _CallablePackage(types.ModuleType):
    """``fdp_audit.audit``: the engine's package, which runs an audit when called."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from fdp_audit.api import audit

        return audit(*args, **kwargs)


sys.modules[__name__].__class__ = _CallablePackage
