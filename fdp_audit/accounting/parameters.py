"""Scalar privacy-parameter checks shared by the accounting modules, without numpy (the privacy events and the
command line's parser import them).

Errors are :class:`InvalidParameterError`, which is both a :class:`ValueError` (what library callers
expect) and a :class:`~fdp_audit.errors.BadInputError` (so the command line turns it into a one-line
message and exit code 2, docs/files.md). The ``field`` names the parameter.
"""

from __future__ import annotations

import math

from fdp_audit.errors import BadInputError


class InvalidParameterError(BadInputError, ValueError):
    """A privacy parameter out of range (z <= 0, p outside (0, 1], δ outside (0, 1), ...)."""


def positive_finite(value: float, field: str) -> float:
    value = float(value)
    if not (math.isfinite(value) and value > 0):
        raise InvalidParameterError(f"must be a finite number > 0, got {value!r}", field=field)
    return value


def rate(value: float, field: str) -> float:
    """A Poisson sampling rate p in (0, 1]."""
    value = float(value)
    if not (0 < value <= 1):
        raise InvalidParameterError(f"must be in (0, 1], got {value!r}", field=field)
    return value


def step_count(value: int, field: str, minimum: int = 1) -> int:
    if isinstance(value, bool) or int(value) != value or value < minimum:
        raise InvalidParameterError(f"must be an integer >= {minimum}, got {value!r}", field=field)
    return int(value)
