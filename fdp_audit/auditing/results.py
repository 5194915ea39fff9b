"""``results.json`` (docs/files.md): every number of a report, schema-versioned and checksummed so that a
corrupt or hand-edited file is refused rather than silently re-judged.

The checksum is an unkeyed SHA-256: it protects against corruption and against an edit that does not
recompute it, nothing more. With ``FDP_AUDIT_HMAC_KEY`` set, results are also written with an HMAC-SHA256
(``mac``) under that key, and read back only when it matches (:mod:`fdp_audit.auditing.integrity`)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from fdp_audit.atomic_io import atomic_write_json
from fdp_audit.auditing.integrity import HMAC_KEY_VARIABLE, canonical, hmac_key, keyed_digest, same_digest
from fdp_audit.bounded_read import bounded_json_integer, read_bounded
from fdp_audit.errors import BadInputError
from fdp_audit.json_numbers import finite_or_none

SCHEMA_VERSION = 1
MAX_RESULTS_BYTES = 64 << 20


def _body(results: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in results.items() if k not in ("checksum", "mac")}


def checksum(results: dict[str, Any]) -> str:
    """SHA-256 of everything but the checksum and the MAC: detects corruption and edits by hand, not an
    editor who recomputes it.

    Args:
        results: the results dictionary.

    Returns:
        The hex digest of its canonical JSON.
    """
    return hashlib.sha256(canonical(_body(results))).hexdigest()


def write_results(path: str | Path, results: dict[str, Any]) -> Path:
    """Write results with their sanity warnings (:mod:`fdp_audit.auditing.sanity`), their checksum and, when
    ``FDP_AUDIT_HMAC_KEY`` is set, their MAC under that key.

    Args:
        path: the file to write (atomically).
        results: the results dictionary (non-finite numbers become null).

    Returns:
        The written path.
    """
    from fdp_audit.auditing.sanity import sanity_warnings

    clean = finite_or_none(_body(results))
    clean["warnings"] = [warning.row() for warning in sanity_warnings(clean)]
    clean["checksum"] = checksum(clean)
    if hmac_key() is not None:
        clean["mac"] = keyed_digest(_body(clean))
    return atomic_write_json(path, clean)


def _non_finite(name: str) -> float:
    raise ValueError(f"non-finite number {name}; results.json numbers are finite or null")


def read_results(path: str | Path) -> dict[str, Any]:
    """Load and verify a results file: JSON, schema version, checksum, required sections.

    Args:
        path: the results file (untrusted).

    Returns:
        The results dictionary.

    Raises:
        BadInputError: the file is too large, not UTF-8 JSON, not an object, of another schema version, its checksum
            or MAC (with ``FDP_AUDIT_HMAC_KEY`` set) does not match, or a required section is missing.
    """
    path = Path(path)
    try:
        text = read_bounded(path, MAX_RESULTS_BYTES, "results file").decode("utf-8")
    except UnicodeDecodeError as err:
        raise BadInputError(f"results file is not UTF-8 text: {path}") from err
    try:
        results = json.loads(text, parse_constant=_non_finite, parse_int=bounded_json_integer)
    except json.JSONDecodeError as err:
        raise BadInputError(f"results file is not valid JSON: {err.msg} at line {err.lineno}, column {err.colno}: "
                            f"{path}") from err
    except ValueError as err:  # a non-finite constant, an integer of too many digits
        raise BadInputError(f"results file is not valid JSON: {err}: {path}") from err
    except RecursionError as err:
        raise BadInputError(f"results file is not valid JSON: nested too deeply: {path}") from err
    if not isinstance(results, dict):
        raise BadInputError("results file is not a JSON object", "results")
    if results.get("schema_version") != SCHEMA_VERSION:
        raise BadInputError(f"unsupported schema version {results.get('schema_version')!r}", "results.schema_version")
    if results.get("checksum") != checksum(results):
        raise BadInputError("checksum mismatch: the file was edited or corrupted after it was written",
                            "results.checksum")
    if hmac_key() is not None:
        if "mac" not in results:
            raise BadInputError(f"no MAC, but {HMAC_KEY_VARIABLE} is set: these results were not written under "
                                "the key", "results.mac")
        if not same_digest(results["mac"], keyed_digest(_body(results))):
            raise BadInputError(f"MAC mismatch: the file was edited after it was written, or under another "
                                f"{HMAC_KEY_VARIABLE}", "results.mac")
    for key in ("kind", "verdict", "mechanism", "reproducibility"):
        if key not in results:
            raise BadInputError("missing section", f"results.{key}")
        if key != "kind" and not isinstance(results[key], dict):
            raise BadInputError("must be a mapping", f"results.{key}")
    return results
