"""Numbers for the JSON files the suite writes (docs/files.md): JSON has no inf or NaN, so ``results.json``,
``profile.json`` and every other JSON output turn non-finite numbers into null through this one cleaner."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt


def finite_or_none(value: Any) -> Any:
    """``value`` with every non-finite float replaced by None, recursively through dicts, lists and tuples;
    numpy scalars and arrays become Python numbers and nested lists first.

    Args:
        value: any value bound for a JSON file.

    Returns:
        The cleaned value (tuples become lists); anything else is returned as it is.
    """
    if isinstance(value, np.ndarray):
        value = value.tolist()
    elif isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite_or_none(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite_or_none(v) for v in value]
    return value


def json_float(value: Any) -> float | None:
    """A number as a float, None when it is not finite.

    Args:
        value: anything ``float()`` accepts.

    Returns:
        The float, or None for inf, -inf and NaN.
    """
    return finite_or_none(float(value))


def json_floats(values: npt.ArrayLike) -> list:
    """An array as nested lists of floats, None where not finite.

    Args:
        values: an array of any shape.

    Returns:
        Nested lists of the array's shape (a float for a 0-d array).
    """
    return finite_or_none(np.asarray(values, dtype=np.float64).tolist())
