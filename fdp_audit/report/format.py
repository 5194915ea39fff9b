"""How numbers from results.json are shown in the report (docs/files.md).

The report never recomputes a number it shows: every figure in a table is a value of results.json,
only rounded for display. These functions are the one place that rounding happens, so the browser
test can compare what a reader sees with the stored value through the same function.
"""

from __future__ import annotations

import re

MISSING = "—"  # shown where results.json holds null


def number(value: object) -> str:
    """Display text of one results.json value: four significant digits for floats, integers in full
    (without digit grouping, which would misprint seeds and record ids).

    Args:
        value: a stored value (null, a bool, a number or a string).

    Returns:
        ``—`` for None, ``yes``/``no`` for a bool, the int in full, the float to 4 significant digits (exponent
        written ``1e-5``), anything else as ``str``.
    """
    if value is None:
        return MISSING
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        # '.4g' keeps small probabilities such as 1 - f(1e-3) = 0.00407 readable; tidy '1e-05' to '1e-5'
        return re.sub(r"e([+-])0*(\d)", lambda m: f"e{m.group(1).replace('+', '')}{m.group(2)}", f"{value:.4g}")
    return str(value)


def signed(value: object) -> str:
    """A margin: the sign is the message (negative margin = violation), so it is always written.

    Args:
        value: a stored value.

    Returns:
        :func:`number`'s text, with a ``+`` before a positive number.
    """
    text = number(value)
    if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
        return "+" + text
    return text


def interval(low: object, high: object) -> str:
    """An interval as ``[low, high]``.

    Args:
        low: the stored lower end (None shows a dash).
        high: the stored upper end (None shows a dash).

    Returns:
        The text, each end rounded by :func:`number`.
    """
    return f"[{number(low)}, {number(high)}]"
