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
    """A finite number > 0.

    Args:
        value: the number to check.
        field: the field or flag that gave it, for the message.

    Returns:
        ``value`` as a float.

    Raises:
        InvalidParameterError: it is not finite or not positive.
    """
    value = float(value)
    if not (math.isfinite(value) and value > 0):
        raise InvalidParameterError(f"must be a finite number > 0, got {value!r}", field=field)
    return value


# The largest noise multiplier accounted: one full-batch step at z = 1e6 has the privacy-loss scale 1/z = 1e-6, ten
# of the accountant's finest grid steps (docs/accounting.md), and ε(1e-5) below 5e-6; a larger z says nothing more
# than "no leakage", and beyond about z = 1e150 the loss 1/(2z²) underflows dp_accounting's arithmetic (1e200 was a
# "math domain error", 1e160 an OverflowError).
MAX_NOISE_MULTIPLIER = 1e6


def noise_multiplier(value: float, field: str = "noise_multiplier") -> float:
    """A noise multiplier z in (0, :data:`MAX_NOISE_MULTIPLIER`].

    Args:
        value: the noise multiplier (noise standard deviation over the clip norm).
        field: the field or flag that gave it, for the message.

    Returns:
        ``value`` as a float.

    Raises:
        InvalidParameterError: it is not finite, not positive, or above the limit.
    """
    z = positive_finite(value, field)
    if z > MAX_NOISE_MULTIPLIER:
        raise InvalidParameterError(f"must be at most {MAX_NOISE_MULTIPLIER:g} (a larger one cannot be accounted "
                                    f"apart from infinite noise), got {z!r}", field=field)
    return z


def rate(value: float, field: str) -> float:
    """A Poisson sampling rate p in (0, 1].

    Args:
        value: the sampling rate (the probability that each record joins a step's batch).
        field: the field or flag that gave it, for the message.

    Returns:
        ``value`` as a float.

    Raises:
        InvalidParameterError: it is outside (0, 1] or NaN.
    """
    value = float(value)
    if not (0 < value <= 1):
        raise InvalidParameterError(f"must be in (0, 1], got {value!r}", field=field)
    return value


def step_count(value: int, field: str, minimum: int = 1) -> int:
    """A whole number of steps (or other count) of at least ``minimum``.

    Args:
        value: the count; an integral float is accepted, a bool is not.
        field: the field or flag that gave it, for the message.
        minimum: the smallest allowed count.

    Returns:
        ``value`` as an int.

    Raises:
        InvalidParameterError: it is a bool, not integral, or below ``minimum``.
    """
    if isinstance(value, bool) or int(value) != value or value < minimum:
        raise InvalidParameterError(f"must be an integer >= {minimum}, got {value!r}", field=field)
    return int(value)
