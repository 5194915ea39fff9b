"""The files a reproduction writes: ``<name>.md`` (markdown sections and tables) and ``<name>.json`` (its
numbers)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fdp_audit.atomic_io import atomic_write_json, atomic_write_text
from fdp_audit.reproduce import Summary


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A markdown table; floats are shown to 4 significant digits, infinity as ∞.

    Args:
        headers: the column headers.
        rows: the rows, one value per header.

    Returns:
        The table's lines joined by newlines (no final newline).
    """
    def text(value: Any) -> str:
        if isinstance(value, float):
            return "∞" if math.isinf(value) else f"{value:.4g}"
        return str(value)

    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(text(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def write_reproduction(out_dir: Path, name: str, title: str, sections: Sequence[str], payload: dict[str, Any],
                       summary: str) -> Summary:
    """Write ``<name>.md`` (title, then the markdown sections) and ``<name>.json`` (``payload``), atomically.

    Args:
        out_dir: the folder both files go into.
        name: the reproduction's name (the files' stem).
        title: the markdown's heading and the JSON's ``title``.
        sections: the markdown sections, in order.
        payload: the numbers, stored in the JSON beside ``name``, ``title`` and ``summary``.
        summary: the one-line summary.

    Returns:
        The reproduction's summary: ``name``, ``summary`` and the paths of ``markdown`` and ``json``.
    """
    out_dir = Path(out_dir)
    markdown = "\n\n".join([f"# {title}", *sections]) + "\n"
    md_path = atomic_write_text(out_dir / f"{name}.md", markdown)
    json_path = atomic_write_json(out_dir / f"{name}.json", {"name": name, "title": title, "summary": summary,
                                                             **payload})
    return {"name": name, "summary": summary, "markdown": str(md_path), "json": str(json_path)}
