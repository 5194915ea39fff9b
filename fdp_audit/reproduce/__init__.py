"""Paper reproductions behind ``fdp-audit reproduce`` and ``make reproduce`` (docs/files.md).

Each reproduction is one module exposing ``run(out_dir, quick) -> Summary``: it writes ``<name>.md`` and
``<name>.json`` into ``out_dir`` and returns a short summary. ``quick`` shrinks data, steps and grids so
that the whole registry runs in tests; the full runs regenerate the tables quoted in the README.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from fdp_audit.errors import BadInputError

# The shipped configs: the repository's configs/, which the wheel carries as package data in fdp_audit/configs
# (a link to configs/ in a checkout), so that every reproduction also runs from an installed package.
CONFIGS = Path(__file__).resolve().parents[1] / "configs"

# name → module of fdp_audit.reproduce (function ``run_<name>`` if the module holds several, else ``run``);
# ordered cheapest first. Modules are imported on use: the command line starts without torch.
REPRODUCTIONS: dict[str, str] = {
    "label_dp": "label_dp",
    "utility": "utility",
    "images": "images",
    "weak_public": "weak_public",
    "purchase_like": "purchase_like",
    "prop3": "prop3",
    "gate_proof": "gate_proof",
    "corrdp": "pipelines",
    "profile": "pipelines",
    "tightness": "tightness",
    "diffusion": "diffusion",
    "final_model": "final_model",
}


def run_reproduction(name: str, out_dir: Path, quick: bool = False) -> dict[str, Any]:
    """Run one reproduction by name and return its summary."""
    if name not in REPRODUCTIONS:
        raise BadInputError(f"unknown reproduction {name!r} (known: {', '.join(REPRODUCTIONS)})", "NAME")
    module = importlib.import_module(f"fdp_audit.reproduce.{REPRODUCTIONS[name]}")
    runner = getattr(module, f"run_{name}", None) or module.run
    return runner(out_dir, quick)
