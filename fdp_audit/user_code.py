"""Loading the user's code named by a config (docs/files.md): ``package.module:function`` (importable) or
``path/file.py:function``.

A file path in a config is resolved from the config file's folder (:func:`fdp_audit.config.load_config` makes it
absolute), so the same config works from any working folder. The file's folder is put first on ``sys.path``
while the file is imported and stays on it (last) afterwards, so that the file's own imports of sibling modules
work, at import time and inside the functions when they are called.

Whatever the user's module raises at import time (``sys.exit`` included) is bad input naming its error.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fdp_audit.errors import BadInputError


def failure(err: BaseException) -> str:
    """The user's code's failure in one line: ``sys.exit(0)`` is a failure too, since it returned nothing."""
    if isinstance(err, SystemExit):
        return f"it called sys.exit({err.code!r})"
    return f"{type(err).__name__}: {' '.join(str(err).split())[:300]}"


def load_function(spec: str, field: str) -> Callable[..., Any]:
    """Resolve ``module:function`` or ``file.py:function`` to the function; ``field`` names the config key in
    errors."""
    location, _, name = spec.rpartition(":")
    if not location or not name.isidentifier():
        raise BadInputError(f"must be 'module:function' or 'file.py:function', got {spec!r}", field)
    try:
        module = _import_file(Path(location), field) if location.endswith(".py") else importlib.import_module(location)
    except BadInputError:
        raise
    except (Exception, SystemExit) as err:  # any failure of the user's module at import time is bad input
        raise BadInputError(f"cannot import {location!r}: {failure(err)}", field) from err
    function = getattr(module, name, None)
    if not callable(function):
        raise BadInputError(f"{location!r} has no function {name!r}", field)
    return function


def _import_file(location: Path, field: str):
    path = location.resolve()
    if not path.is_file():
        raise BadInputError(f"no such file {str(location)!r}", field)
    # one module per file (two files of the same name in different folders stay apart)
    module_name = f"fdp_audit_user_{path.stem}_{hashlib.sha256(str(path).encode()).hexdigest()[:8]}"
    folder = str(path.parent)
    module_spec = importlib.util.spec_from_file_location(module_name, path)
    assert module_spec is not None and module_spec.loader is not None
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[module_name] = module  # dataclasses and pickling look modules up by name
    sys.path.insert(0, folder)
    try:
        module_spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[module_name]
        raise
    finally:
        sys.path.remove(folder)
        if folder not in sys.path:
            sys.path.append(folder)  # lazy sibling imports inside the user's functions
    return module


def resolve_file_spec(spec: str | None, folder: Path) -> str | None:
    """``file.py:function`` with a relative file made absolute from ``folder`` (the config's); other specs
    unchanged."""
    if spec is None:
        return None
    location, sep, name = spec.rpartition(":")
    if not sep or not location.endswith(".py") or Path(location).is_absolute():
        return spec
    return f"{(folder / location).resolve()}:{name}"
