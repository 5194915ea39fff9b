"""Render results.json into one self-contained ``report.html`` (SPEC 5.2, 5.3).

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
from fdp_audit.errors import BadInputError
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


def render_report(results: dict[str, Any]) -> str:
    """The HTML report of one audit's results (the results.json contract); bad input raises
    :class:`~fdp_audit.errors.BadInputError` naming the field."""
    return _ENV.get_template("report.html.j2").render(view=build_view(results))


def write_report(results: dict[str, Any], path: str | os.PathLike) -> Path:
    """Render, then write ``path`` atomically: a failed render leaves no file, a reader never sees half of one."""
    return atomic_write_text(path, render_report(results))


def _reject_constant(name: str) -> float:
    raise ValueError(f"non-finite number {name}; results.json numbers are finite or null")


def load_results(path: str | os.PathLike) -> dict[str, Any]:
    """Read a results.json; a missing, unreadable or malformed file is bad input naming the file."""
    where = str(path)
    try:
        raw = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise BadInputError("no such file", where) from None
    except UnicodeDecodeError:
        raise BadInputError("not UTF-8 text", where) from None
    except OSError as err:
        raise BadInputError(err.strerror or type(err).__name__, where) from None
    try:
        results = json.loads(raw, parse_constant=_reject_constant)
    except json.JSONDecodeError as err:
        raise BadInputError(f"not valid JSON: {err.msg} at line {err.lineno}, column {err.colno}", where) from None
    except ValueError as err:
        raise BadInputError(str(err), where) from None
    if not isinstance(results, dict):
        raise BadInputError("expected a JSON object at the top level", where)
    return results
