"""Loading the user's code named by a config (docs/files.md): ``package.module:function`` (importable) or
``path/file.py:function``.

A file path in a config is resolved from the config file's folder (:func:`fdp_audit.config.load_config` makes it
absolute), so the same config works from any working folder. The file's folder is put first on ``sys.path``
while the file is imported and stays on it (last) afterwards, so that the file's own imports of sibling modules
work, at import time and inside the functions when they are called.

Whatever the user's module raises at import time (``sys.exit`` included) is bad input naming its error.

**Whose failure.** A call into the user's code can fail in their code, in a library it calls, or in fdp-audit's
code that theirs calls back (the canary wrapper's ``forward``, an optimizer hook). :func:`raise_failure` reads
the traceback: the innermost frame that is fdp-audit's or the user's decides. The user's is bad input
(:class:`fdp_audit.errors.UserCodeError`, exit 2) carrying their traceback with fdp-audit's frames left out;
fdp-audit's is a bug and is raised as it is (exit 3, its traceback with ``FDP_AUDIT_DEBUG=1``). Frames of the
standard library and installed packages (torch, Opacus) decide nothing — except the folders of the user's own
code loaded here, which count as theirs wherever they are installed. fdp-audit's wrappers that only hand the
user's arguments on to a library, or call the user's own module (:func:`passes_through`), count as the user's:
a failure below one of them, with no frame of fdp-audit's further in, is the user's even when fdp-audit's code
called the wrapper (the canary wrapper's ``forward`` calling the user's module on the batch their loop gave it);
their frames are not shown in the user's traceback.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.util
import site
import sys
import sysconfig
import traceback
from collections.abc import Callable
from pathlib import Path
from types import CodeType
from typing import Any, Literal, NoReturn, TypeVar

from fdp_audit.errors import BadInputError, UserCodeError

SHOWN_FRAMES = 40  # the innermost frames of the user's traceback that are printed (a deep recursion has thousands)
_USER_FOLDERS: set[Path] = set()  # folders of the user's code loaded by load_function
_PASSING_THROUGH: set[CodeType] = set()
Function = TypeVar("Function", bound=Callable[..., Any])


def failure(err: BaseException) -> str:
    """The user's code's failure in one line: ``sys.exit(0)`` is a failure too, since it returned nothing.

    Args:
        err: the exception the user's code raised (a :class:`SystemExit` included).

    Returns:
        ``"it called sys.exit(<code>)"``, or ``"<ExceptionType>: <message>"`` with the message's whitespace folded
        and cut to 300 characters.
    """
    if isinstance(err, SystemExit):
        return f"it called sys.exit({err.code!r})"
    return f"{type(err).__name__}: {' '.join(str(err).split())[:300]}"


def raise_failure(err: BaseException, what: str, field: str) -> NoReturn:
    """Raise what the failure ``err`` of a call into the user's code is (module docstring): a
    :class:`UserCodeError` ``"{what}: {failure(err)}"`` with the user's traceback, or ``err`` itself when the
    innermost frame that decides is fdp-audit's. Call it in the ``except`` block around the call.

    Args:
        err: the exception the call raised; its traceback starts at the frame that made the call.
        what: what failed, for the one-line message (``"the training function failed on a trial (seed 3)"``).
        field: the config field naming the user's code.

    Returns:
        Never: it always raises.

    Raises:
        UserCodeError: the failure is the user's code's (or a library's it called).
        BaseException: ``err``, when it is fdp-audit's.
    """
    frames, origins = _frames_and_origins(err)
    deciding = [origin for origin in origins if origin != "library"]  # "through" decides as the user's
    if deciding and deciding[-1] == "ours" and not isinstance(err, SystemExit):
        raise err
    raise UserCodeError(f"{what}: {failure(err)}", field, user_traceback(err, frames, origins)) from err


def user_traceback(err: BaseException, frames: traceback.StackSummary, origins: list[str]) -> str:
    """The traceback of ``err`` as Python prints it, from the first frame of the user's code on, fdp-audit's frames
    left out (at most :data:`SHOWN_FRAMES`, the innermost); empty when no frame is the user's.

    Args:
        err: the exception.
        frames: its traceback's frames below the caller's.
        origins: whose code each frame runs (``ours``, ``user``, ``library`` or ``through``: a
            :func:`passes_through` wrapper, left out like fdp-audit's).

    Returns:
        The traceback's text, without a final newline.
    """
    first = next((i for i, origin in enumerate(origins) if origin == "user"), None)
    if first is None:  # nothing of theirs ran (a module not found): the line says it, or a SyntaxError's place
        return "".join(traceback.format_exception_only(type(err), err)).rstrip("\n") \
            if isinstance(err, SyntaxError) else ""
    kept = [frame for frame, origin in zip(frames[first:], origins[first:], strict=True)
            if origin not in ("ours", "through")]
    hidden = max(0, len(kept) - SHOWN_FRAMES)
    lines = ["Traceback of the user's code (most recent call last; fdp-audit's frames left out):\n"]
    if hidden:
        lines.append(f"  ... {hidden} outer frames left out\n")
    lines += traceback.StackSummary.from_list(kept[hidden:]).format()
    lines += traceback.format_exception_only(type(err), err)
    return "".join(lines).rstrip("\n")


def traceback_of_user_code(err: BaseException) -> str:
    """:func:`user_traceback` of ``err`` raised through a call into the user's code (its traceback starts at the
    frame that made the call).

    Args:
        err: the exception.

    Returns:
        The traceback's text from the user's first frame on, fdp-audit's frames left out.
    """
    return user_traceback(err, *_frames_and_origins(err))


def passes_through(function: Function) -> Function:
    """Mark one of fdp-audit's wrappers that only hands the user's arguments on to a library (a cache around
    Opacus's noise calibration) or calls the user's own module: a failure raised through it, with no frame of
    fdp-audit's further in, is the user's, whoever called the wrapper (module docstring).

    Args:
        function: the wrapper; it must do nothing that can fail but the call it passes on.

    Returns:
        ``function`` itself, marked.
    """
    _PASSING_THROUGH.add(function.__code__)
    return function


def _frames_and_origins(err: BaseException) -> tuple[traceback.StackSummary, list[str]]:
    """The frames of ``err``'s traceback below the caller's (its first), and whose code each one runs."""
    codes, tb = [], err.__traceback__
    while tb is not None:
        codes.append(tb.tb_frame.f_code)
        tb = tb.tb_next
    frames = traceback.extract_tb(err.__traceback__)
    return (traceback.StackSummary.from_list(frames[1:]),
            [_origin(frame.filename, code) for frame, code in zip(frames[1:], codes[1:], strict=True)])


def _origin(filename: str, code: CodeType) -> Literal["ours", "user", "library", "through"]:
    if code in _PASSING_THROUGH:
        return "through"
    return _file_origin(filename)


@functools.lru_cache(maxsize=4096)
def _file_origin(filename: str) -> Literal["ours", "user", "library"]:
    if filename.startswith("<"):  # <frozen importlib._bootstrap>, <string>
        return "library"
    path = Path(filename).resolve()
    ours, libraries = code_roots()
    if any(path.is_relative_to(root) for root in ours):
        return "ours"
    if any(path.is_relative_to(root) for root in _USER_FOLDERS):
        return "user"
    return "library" if any(path.is_relative_to(root) for root in libraries) else "user"


@functools.cache
def code_roots() -> tuple[tuple[Path, ...], tuple[Path, ...]]:
    """The folders of fdp-audit's packages (``fdp_audit``, ``attacks``), and those of the standard library and the
    installed packages: code elsewhere is the user's.

    Returns:
        ``(ours, libraries)``: two tuples of resolved folders (computed once per process).
    """
    ours = [Path(__file__).parent]
    spec = importlib.util.find_spec("attacks")
    ours += [Path(folder) for folder in (spec.submodule_search_locations or [])] if spec is not None else []
    paths = sysconfig.get_paths()
    libraries = {paths[name] for name in ("stdlib", "platstdlib", "purelib", "platlib") if name in paths}
    libraries |= set(site.getsitepackages()) | {site.getusersitepackages()}
    return (tuple(folder.resolve() for folder in ours),
            tuple(Path(folder).resolve() for folder in libraries if folder))


def load_function(spec: str | Callable[..., Any], field: str) -> Callable[..., Any]:
    """Resolve ``module:function`` or ``file.py:function`` to the function (a configuration built in Python may
    hold the function itself, whose module then counts as the user's code).

    Args:
        spec: ``"package.module:function"``, ``"path/file.py:function"``, or a callable.
        field: the config key that names the code, for errors.

    Returns:
        The function (``spec`` itself when it is callable).

    Raises:
        BadInputError: the spec is malformed, the file does not exist, or the module has no such function.
        UserCodeError: importing the user's module failed (``sys.exit`` included), with their traceback.
    """
    if callable(spec):
        module = sys.modules.get(getattr(spec, "__module__", ""))
        if module is not None:
            _remember_user_code(module, module.__name__)
        return spec
    location, _, name = spec.rpartition(":")
    if not location or not name.isidentifier():
        raise BadInputError(f"must be 'module:function' or 'file.py:function', got {spec!r}", field)
    try:
        module = _import_file(Path(location), field) if location.endswith(".py") else importlib.import_module(location)
    except BadInputError:
        raise
    except (Exception, SystemExit) as err:  # any failure of the user's module at import time is bad input
        raise UserCodeError(f"cannot import {location!r}: {failure(err)}", field, traceback_of_user_code(err)) from err
    function = getattr(module, name, None)
    if not callable(function):
        raise BadInputError(f"{location!r} has no function {name!r}", field)
    _remember_user_code(module, location)
    return function


def _remember_user_code(module: Any, location: str) -> None:
    """Count the code of a loaded spec as the user's wherever it lies: a file's folder (its siblings), an
    importable module's top-level package (or the module's file alone)."""
    if location.endswith(".py"):
        root = Path(module.__file__).parent
    else:
        top = sys.modules.get(location.partition(".")[0])
        file = getattr(top, "__file__", None)
        if not isinstance(file, str):
            return
        root = Path(file).parent if Path(file).name == "__init__.py" else Path(file)
    _USER_FOLDERS.add(root.resolve())
    _file_origin.cache_clear()


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


def resolve_file_spec(spec: str | Callable[..., Any] | None, folder: Path) -> str | Callable[..., Any] | None:
    """``file.py:function`` with a relative file made absolute from ``folder`` (the config's); other specs, and
    functions, unchanged.

    Args:
        spec: a code spec as a config holds it, a callable, or None.
        folder: the folder a relative file path is read from (the config file's).

    Returns:
        ``spec`` with its file made absolute and resolved, or ``spec`` unchanged.
    """
    if spec is None or callable(spec):
        return spec
    location, sep, name = spec.rpartition(":")
    if not sep or not location.endswith(".py") or Path(location).is_absolute():
        return spec
    return f"{(folder / location).resolve()}:{name}"
