"""Reading untrusted files with a size limit (docs/files.md).

Configs, data tables, checkpoints, ``results.json`` and the trial journal may come from anyone. Each is
read through :func:`read_bounded`, which never holds more than ``max_bytes + 1`` bytes: reading one byte
past the limit detects a file that is too large even when it grew after ``stat`` or is not a regular file
(a FIFO, ``/dev/zero``). Every failure is one :class:`~fdp_audit.errors.BadInputError`.
"""

from __future__ import annotations

import os
from pathlib import Path

from fdp_audit.errors import BadInputError


def read_bounded(path: str | os.PathLike, max_bytes: int, what: str = "file", field: str | None = None) -> bytes:
    """The bytes of the regular file ``path``, refused when larger than ``max_bytes``.

    A missing file, a directory, a path the system cannot look up (too long, a NUL byte) and a read error are bad
    input too.

    Args:
        path: the file to read.
        max_bytes: the largest size accepted, in bytes.
        what: names the file in messages (``"config file"``, ``"checkpoint"``).
        field: the config field or flag that named the file, or None.

    Returns:
        The file's content.

    Raises:
        BadInputError: the file is missing, not a regular file, unreadable, or larger than ``max_bytes``.
    """
    path = Path(path)
    try:
        exists, regular = path.exists(), path.is_file()
    except (OSError, ValueError) as err:  # ENAMETOOLONG, ELOOP, an embedded NUL byte
        raise BadInputError(f"cannot look up {what} {str(path)[:200]!r}: {_reason(err)}", field) from None
    if not exists:
        raise BadInputError(f"{what} not found: {path}", field)
    if not regular:
        raise BadInputError(f"{what} not found: {path} is not a regular file", field)
    try:
        with path.open("rb") as handle:
            raw = handle.read(max_bytes + 1)
    except OSError as err:
        raise BadInputError(f"cannot read {what} {path}: {_reason(err)}", field) from None
    if len(raw) > max_bytes:
        raise BadInputError(f"{what} {path} is larger than the limit of {max_bytes} bytes", field)
    return raw


def _reason(err: Exception) -> str:
    return getattr(err, "strerror", None) or str(err) or type(err).__name__


MAX_JSON_DIGITS = 18  # every count or index an input file holds fits; 10**400 trials would overflow a float


def bounded_json_integer(text: str) -> int:
    """``json.loads(..., parse_int=bounded_json_integer)``: an integer of more than :data:`MAX_JSON_DIGITS`
    digits is bad input (one line, exit 2), not a number that overflows later in float arithmetic.

    Args:
        text: the integer's digits as JSON wrote them (a leading minus allowed).

    Returns:
        The integer.

    Raises:
        BadInputError: more than :data:`MAX_JSON_DIGITS` digits.
    """
    if len(text.lstrip("-")) > MAX_JSON_DIGITS:
        raise BadInputError(f"an integer of {len(text.lstrip('-'))} digits is out of range (at most "
                            f"{MAX_JSON_DIGITS})")
    return int(text)
