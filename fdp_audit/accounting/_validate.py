"""Parameter checks shared by the accounting modules: the checks of arrays here, the scalar ones (and
:class:`InvalidParameterError`) in :mod:`fdp_audit.accounting.parameters`, which needs no numpy.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from fdp_audit.accounting.parameters import InvalidParameterError, noise_multiplier, positive_finite, rate, step_count

__all__ = ["InvalidParameterError", "deltas", "epsilons", "noise_multiplier", "positive_finite", "rate", "step_count",
           "unit_interval"]


def deltas(values: npt.ArrayLike, field: str = "delta") -> np.ndarray:
    """δ values in the open interval (0, 1).

    Args:
        values: a δ or an array of them.
        field: the parameter's name, for the message.

    Returns:
        ``values`` as a float array of the same shape.

    Raises:
        InvalidParameterError: a value is outside (0, 1) or NaN.
    """
    arr = np.asarray(values, dtype=float)
    _require(arr, (arr > 0) & (arr < 1), "must be in (0, 1)", field)
    return arr


def epsilons(values: npt.ArrayLike, field: str = "epsilon") -> np.ndarray:
    """ε values >= 0 (+inf allowed).

    Args:
        values: an ε or an array of them.
        field: the parameter's name, for the message.

    Returns:
        ``values`` as a float array of the same shape.

    Raises:
        InvalidParameterError: a value is negative or NaN.
    """
    arr = np.asarray(values, dtype=float)
    _require(arr, arr >= 0, "must be >= 0", field)
    return arr


def unit_interval(values: npt.ArrayLike, field: str) -> np.ndarray:
    """Type-I errors α or Ball values in the closed interval [0, 1].

    Args:
        values: a value or an array of them.
        field: the parameter's name, for the message.

    Returns:
        ``values`` as a float array of the same shape.

    Raises:
        InvalidParameterError: a value is outside [0, 1] or NaN.
    """
    arr = np.asarray(values, dtype=float)
    _require(arr, (arr >= 0) & (arr <= 1), "must be in [0, 1]", field)
    return arr


def _require(arr: np.ndarray, ok: np.ndarray, what: str, field: str) -> None:
    """Raise naming the first offending value (NaN fails every comparison, so it is rejected too)."""
    if not np.all(ok):
        first = float(arr[~ok].ravel()[0])
        raise InvalidParameterError(f"{what}, got {first!r}", field=field)
