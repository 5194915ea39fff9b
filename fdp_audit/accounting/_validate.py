"""Parameter checks shared by the accounting modules.

Errors are :class:`InvalidParameterError`, which is both a :class:`ValueError` (what library callers
expect) and a :class:`~fdp_audit.errors.BadInputError` (so the command line turns it into a one-line
message and exit code 2, docs/files.md). The ``field`` names the parameter.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

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


def deltas(values: npt.ArrayLike, field: str = "delta") -> np.ndarray:
    """δ values in the open interval (0, 1)."""
    arr = np.asarray(values, dtype=float)
    _require(arr, (arr > 0) & (arr < 1), "must be in (0, 1)", field)
    return arr


def epsilons(values: npt.ArrayLike, field: str = "epsilon") -> np.ndarray:
    """ε values >= 0 (+inf allowed)."""
    arr = np.asarray(values, dtype=float)
    _require(arr, arr >= 0, "must be >= 0", field)
    return arr


def unit_interval(values: npt.ArrayLike, field: str) -> np.ndarray:
    """Type-I errors α or Ball values in the closed interval [0, 1]."""
    arr = np.asarray(values, dtype=float)
    _require(arr, (arr >= 0) & (arr <= 1), "must be in [0, 1]", field)
    return arr


def _require(arr: np.ndarray, ok: np.ndarray, what: str, field: str) -> None:
    """Raise naming the first offending value (NaN fails every comparison, so it is rejected too)."""
    if not np.all(ok):
        first = float(arr[~ok].ravel()[0])
        raise InvalidParameterError(f"{what}, got {first!r}", field=field)
