"""Render results.json into one self-contained ``report.html`` (docs/files.md).

The page carries its stylesheet and its figures (inline SVG) and a Content-Security-Policy that forbids
every fetch, so it opens offline in any browser and cannot reach the network even by mistake.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined

from fdp_audit.atomic_io import atomic_write_text
from fdp_audit.auditing.results import MAX_RESULTS_BYTES
from fdp_audit.bounded_read import bounded_json_integer, read_bounded
from fdp_audit.errors import BadInputError
from fdp_audit.phases import Phase
from fdp_audit.report.baseline import baseline_section
from fdp_audit.report.sections import build_view

# autoescape on: attack names, titles and config values are data, never markup; StrictUndefined makes a
# template typo fail the tests instead of silently printing nothing
_ENV = Environment(
    loader=PackageLoader("fdp_audit.report", "templates"),
    autoescape=True,
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)


def render_report(results: dict[str, Any], baseline: dict[str, Any] | None = None) -> str:
    """The HTML report of one audit's results (the results.json contract, docs/files.md), with a section comparing it
    with ``baseline`` (an earlier audit's results) when given.

    Args:
        results: the parsed results.json.
        baseline: an earlier audit's parsed results.json, or None.

    Returns:
        The self-contained HTML page.

    Raises:
        BadInputError: the results (or the baseline) break the contract; the message names the field.
    """
    with Phase("drawing the report"):
        extra = [baseline_section(results, baseline)] if baseline is not None else []
        return _ENV.get_template("report.html.j2").render(view=build_view(results, extra))


def write_report(results: dict[str, Any], path: str | os.PathLike, baseline: dict[str, Any] | None = None) -> Path:
    """Render, then write ``path`` atomically: a failed render leaves no file, a reader never sees half of one.

    Args:
        results: the parsed results.json.
        path: where the HTML goes.
        baseline: an earlier audit's parsed results.json, or None.

    Returns:
        ``path`` as a :class:`~pathlib.Path`.

    Raises:
        BadInputError: the results break the contract; nothing is written.
    """
    return atomic_write_text(path, render_report(results, baseline))


def _reject_constant(name: str) -> float:
    raise ValueError(f"non-finite number {name}; results.json numbers are finite or null")


def load_results(path: str | os.PathLike) -> dict[str, Any]:
    """Read a results.json; a missing, unreadable or malformed file is bad input naming the file.

    Args:
        path: the results file.

    Returns:
        The top-level JSON object.

    Raises:
        BadInputError: the file is missing, unreadable, too large, not UTF-8, not JSON, holds NaN or infinity, an
            integer of too many digits or JSON nested too deeply, or is not an object at the top level.
    """
    where = str(path)
    if not os.path.lexists(where):  # never raises, unlike Path.exists on a name that is too long
        raise BadInputError("no such file", where)
    try:
        raw = read_bounded(path, MAX_RESULTS_BYTES, "results file", where).decode("utf-8")
    except UnicodeDecodeError:
        raise BadInputError("not UTF-8 text", where) from None
    try:
        results = json.loads(raw, parse_constant=_reject_constant, parse_int=bounded_json_integer)
    except json.JSONDecodeError as err:
        raise BadInputError(f"not valid JSON: {err.msg} at line {err.lineno}, column {err.colno}", where) from None
    except ValueError as err:
        raise BadInputError(str(err), where) from None
    except RecursionError:
        raise BadInputError("not valid JSON: nested too deeply", where) from None
    if not isinstance(results, dict):
        raise BadInputError("expected a JSON object at the top level", where)
    return results
