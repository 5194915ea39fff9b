"""``tightness``: slot for the tightness table of :mod:`fdp_audit.audit.tightness` (``tightness_table``),
which the lead wires in once that module lands. Until then the entry reports itself unavailable."""

from __future__ import annotations

from pathlib import Path

from fdp_audit.reproduce.common import ReproductionUnavailable, Summary


def run(out_dir: Path, quick: bool = False) -> Summary:
    raise ReproductionUnavailable("the tightness reproduction is not wired yet (fdp_audit.audit.tightness)",
                                  "tightness")
