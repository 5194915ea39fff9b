"""Integrity of what an audit writes: digests of ``results.json`` and of every journaled trial.

Without a key these are plain SHA-256 digests: they catch corruption and naive edits (a changed number, a
swapped column), but anyone can recompute them after editing, so they are not tamper-evidence. With a secret
in the environment variable ``FDP_AUDIT_HMAC_KEY`` they are HMAC-SHA256 under that key: only a holder of
the key can produce them, so a CI job that keeps the key secret can tell its own results and journals from
edited ones.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from typing import Any

HMAC_KEY_VARIABLE = "FDP_AUDIT_HMAC_KEY"


def hmac_key() -> bytes | None:
    """The HMAC key from the environment, or None when the variable is unset or empty.

    Returns:
        The key's UTF-8 bytes, or None.
    """
    value = os.environ.get(HMAC_KEY_VARIABLE)
    return value.encode("utf-8") if value else None


def canonical(value: Any) -> bytes:
    """The one JSON encoding of a value that digests are computed over (sorted keys, no spaces).

    Args:
        value: a JSON-able value.

    Returns:
        The encoding, UTF-8.
    """
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode("utf-8")


def keyed_digest(value: Any) -> str:
    """HMAC-SHA256 of the value's canonical encoding under the environment's key, or its SHA-256 without
    one.

    Args:
        value: a JSON-able value.

    Returns:
        The hex digest.
    """
    key = hmac_key()
    message = canonical(value)
    return hmac.new(key, message, hashlib.sha256).hexdigest() if key else hashlib.sha256(message).hexdigest()


def same_digest(stored: object, expected: str) -> bool:
    """Whether a stored digest equals the expected one (compared in constant time).

    Args:
        stored: the stored digest (any JSON value).
        expected: the digest computed now.

    Returns:
        True when ``stored`` is that string.
    """
    return isinstance(stored, str) and hmac.compare_digest(stored, expected)
