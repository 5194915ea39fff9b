"""Atomic output (docs/files.md): write to a temporary file in the target's folder, then rename it over the target,
so a reader never sees a half-written file even if the process is killed mid-write.

What the target is decides how it is written:

- a regular file or a new name: a temporary file beside it, synced, renamed into place; an existing file keeps its
  permission bits, a new one gets ``0666`` less the umask (``0644`` usually), as ``open`` would give it;
- a symbolic link: the file it points to is replaced as above, in that file's folder; the link stays a link;
- a character device or a FIFO (``/dev/stdout``, ``/dev/null``, a pipe from ``>(…)``): written through, since
  renaming over it would replace the device node with a regular file;
- anything else (a block device, a socket, a folder): refused with an :class:`OSError` naming the path.

Inside :func:`all_or_nothing`, renames and write-throughs wait until the block ends without an error, so the
outputs of one command (``results.json`` and ``report.html``) are all replaced or none is: a full disk, a failed
render or a refused value while writing any of them leaves every previous file as it was.
"""

from __future__ import annotations

import contextlib
import contextvars
import errno
import io
import json
import os
import stat
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO


@dataclass
class _Staged:
    """One output waiting for the end of an :func:`all_or_nothing` block: a temporary file to rename over
    ``target``, or (``temporary`` None) bytes to write through to a device or FIFO."""

    target: Path
    temporary: Path | None
    data: bytes = b""


_STAGED: contextvars.ContextVar[list[_Staged] | None] = contextvars.ContextVar("fdp_audit_staged", default=None)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _kind(path: Path) -> int | None:
    """The file type bits of what ``path`` resolves to (links followed), None when nothing is there."""
    try:
        return stat.S_IFMT(os.stat(path).st_mode)
    except FileNotFoundError:
        return None
    except NotADirectoryError:  # a parent is a file: the write below fails naming the path
        return None


@contextlib.contextmanager
def naming(path: str | os.PathLike) -> Iterator[None]:
    """Give an ``OSError`` raised in the block without a file name (a full disk: ``ENOSPC`` from a write, a flush or
    an ``fsync``) the name of ``path``, which the command line reports as bad input naming it (exit 2) rather
    than as an internal error.

    Args:
        path: the file the block writes.

    Yields:
        Nothing; the block runs once.

    Raises:
        OSError: the block's, with ``path`` as its file name when it had none.
    """
    try:
        yield
    except OSError as err:
        if err.filename is not None:
            raise
        raise OSError(err.errno, err.strerror or str(err), str(path)) from err


def _write_through(target: Path, data: bytes) -> None:
    with naming(target), open(target, "ab") as handle:  # "a": never truncates; a device or FIFO keeps nothing
        handle.write(data)
        handle.flush()


def atomic_write(path: str | os.PathLike, write: Callable[[BinaryIO], None]) -> Path:
    """Call ``write(fileobj)`` and put what it wrote at ``path`` atomically (see the module docstring).

    Inside :func:`all_or_nothing` the rename (or the write-through to a device or FIFO) waits for the block's end.

    Args:
        path: the target file.
        write: writes the content to the binary file object it is given.

    Returns:
        ``path`` as a :class:`~pathlib.Path`.

    Raises:
        OSError: the target is neither a regular file, a new name, a character device nor a FIFO, or writing
            failed (named after ``path``); the temporary file is removed.
    """
    target = Path(path)
    kind = _kind(target)
    staged = _STAGED.get()
    if kind in (stat.S_IFCHR, stat.S_IFIFO):
        buffer = io.BytesIO()
        write(buffer)
        if staged is None:
            _write_through(target, buffer.getvalue())
        else:
            staged.append(_Staged(target, None, buffer.getvalue()))
        return target
    if kind not in (None, stat.S_IFREG):
        raise OSError(errno.EINVAL if kind != stat.S_IFDIR else errno.EISDIR,
                      "not a regular file, character device or FIFO", str(target))
    real = Path(os.path.realpath(target))  # a link's target is replaced, in its own folder; the link stays
    mode = stat.S_IMODE(os.stat(real).st_mode) if kind == stat.S_IFREG else 0o666 & ~_umask()
    real.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{real.name}.", suffix=".tmp", dir=real.parent)
    try:
        with naming(target), os.fdopen(fd, "wb") as handle:
            os.fchmod(handle.fileno(), mode)
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        if staged is None:
            os.replace(tmp, real)
        else:
            staged.append(_Staged(real, Path(tmp)))
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


@contextlib.contextmanager
def all_or_nothing() -> Iterator[None]:
    """Stage every atomic write made in the block; replace the targets together when it ends without an error,
    else delete the temporary files and leave every target untouched. Renames need no space, so once every
    file is written and synced, a full disk can no longer leave some outputs new and others old.

    Yields:
        Nothing; the block runs once.
    """
    staged: list[_Staged] = []
    token = _STAGED.set(staged)
    try:
        yield
    except BaseException:
        for item in staged:
            if item.temporary is not None:
                item.temporary.unlink(missing_ok=True)
        raise
    finally:
        _STAGED.reset(token)
    for item in staged:
        if item.temporary is not None:
            os.replace(item.temporary, item.target)
    for item in staged:
        if item.temporary is None:
            _write_through(item.target, item.data)


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically (:func:`atomic_write`).

    Args:
        path: the target file.
        data: the whole content.

    Returns:
        ``path`` as a :class:`~pathlib.Path`.
    """
    return atomic_write(path, lambda handle: handle.write(data))


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    """Write ``text`` to ``path`` atomically, UTF-8 encoded (:func:`atomic_write`).

    Args:
        path: the target file.
        text: the whole content.

    Returns:
        ``path`` as a :class:`~pathlib.Path`.
    """
    return atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | os.PathLike, obj: Any) -> Path:
    """Write ``obj`` to ``path`` atomically as JSON: indented by 2, keys sorted, a final newline.

    Args:
        path: the target file.
        obj: a JSON-serialisable value without inf or NaN (clean it with :func:`fdp_audit.json_numbers.finite_or_none`).

    Returns:
        ``path`` as a :class:`~pathlib.Path`.

    Raises:
        ValueError: ``obj`` holds inf or NaN; nothing is written.
        TypeError: ``obj`` holds a value JSON cannot represent; nothing is written.
    """
    return atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True, allow_nan=False) + "\n")
