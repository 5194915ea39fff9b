"""Paper reproductions behind ``fdp-audit reproduce`` and ``make reproduce`` (docs/files.md).

Each reproduction is one module exposing ``run(out_dir, quick) -> Summary`` and one :func:`register_reproduction`
line below: it writes ``<name>.md`` and ``<name>.json`` into ``out_dir`` and returns a short summary. ``quick``
shrinks data, steps and grids so that the whole registry runs in tests; the full runs regenerate the tables quoted
in the docs.
"""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fdp_audit.registry import Has, Registry, Rule

# The shipped configs: the repository's configs/, which the wheel carries as package data in fdp_audit/configs
# (a link to configs/ in a checkout), so that every reproduction also runs from an installed package.
CONFIGS = Path(__file__).resolve().parents[1] / "configs"

Summary = dict[str, Any]


@dataclass(frozen=True)
class Reproduction:
    """A paper reproduction ``fdp-audit reproduce NAME`` runs: ``runner`` is ``package.module:function``, a
    ``function(out_dir, quick) -> Summary`` imported only when it runs (the command line starts without torch);
    ``description`` says what it reproduces."""

    name: str
    runner: str
    description: str

    def run(self, out_dir: Path, quick: bool = False) -> Summary:
        """Run the reproduction.

        Args:
            out_dir: where it writes ``<name>.md`` and ``<name>.json``.
            quick: small data, few steps and seeds (seconds), as the test suite runs it.

        Returns:
            Its summary: ``summary`` (one line) and ``markdown`` (the written table's path).
        """
        module, function = self.runner.split(":")
        return getattr(importlib.import_module(module), function)(out_dir, quick)


REPRODUCTIONS: Registry[Reproduction] = Registry("reproduction", "NAME", (
    Has("description", str),
    Rule(lambda entry, _: re.fullmatch(r"\w+(\.\w+)*:\w+", entry.runner) is not None,
         "runner must be package.module:function"),
))


def register_reproduction(entry: Reproduction) -> Reproduction:
    """Make a reproduction runnable by ``fdp-audit reproduce NAME`` (and by ``make reproduce``, which runs all).

    Args:
        entry: the reproduction; its quick run must take seconds, since the test suite runs every entry.

    Returns:
        ``entry`` itself.

    Raises:
        ValueError: the name is taken or the runner is not ``module:function``.
    """
    return REPRODUCTIONS.register(entry)


def run_reproduction(name: str, out_dir: Path, quick: bool = False) -> Summary:
    """Run one reproduction by name.

    Args:
        name: a registered reproduction.
        out_dir: where it writes its table and numbers.
        quick: the seconds-long version.

    Returns:
        Its summary.

    Raises:
        BadInputError: ``name`` is not registered.
    """
    return REPRODUCTIONS[name].run(out_dir, quick)


# ordered cheapest first
register_reproduction(Reproduction("label_dp", f"{__name__}.label_dp:run",
                                   "the label-DP case study of the FDP paper (Sec. 5)"))
register_reproduction(Reproduction("utility", f"{__name__}.utility:run",
                                   "FDP-SGD against DP-SGD and the baselines on Adult (FDP paper Sec. 6.2)"))
register_reproduction(Reproduction("images", f"{__name__}.images:run",
                                   "image FDP end to end: the CNN's utility under a downsampling Ψ and the image "
                                   "games (FDP paper Sec. 6.3)"))
register_reproduction(Reproduction("weak_public", f"{__name__}.weak_public:run",
                                   "numeric features public, categorical ones protected: the FDP paper's Criteo "
                                   "setting on Adult (Sec. 6.2)"))
register_reproduction(Reproduction("purchase_like", f"{__name__}.purchase_like:run",
                                   "FDP-SGD against DP-SGD on a Purchase100-shaped table (FDP paper Sec. 6.2, Figure "
                                   "4)"))
register_reproduction(Reproduction("prop3", f"{__name__}.prop3:run",
                                   "Proposition 3: the shared-batch variant loses amplification, and the audit finds "
                                   "it"))
register_reproduction(Reproduction("gate_proof", f"{__name__}.gate_proof:run",
                                   "every known-faulty mechanism audited, each expected to be a VIOLATION"))
register_reproduction(Reproduction("corrdp", f"{__name__}.pipelines:run_corrdp",
                                   "CorrDP: Table 2's total variations and the ridge utility curves (Fig. 1a)"))
register_reproduction(Reproduction("profile", f"{__name__}.pipelines:run_profile",
                                   "privacy profiles and the ε transition of output perturbation on Adult"))
register_reproduction(Reproduction("tightness", f"{__name__}.tightness:run",
                                   "the tightness table: how much of the allowed advantage the iterates attack "
                                   "realises"))
register_reproduction(Reproduction("diffusion", f"{__name__}.diffusion:run",
                                   "the FDP paper's diffusion experiment (Sec. 6.3, Figure 7) at laptop scale"))
register_reproduction(Reproduction("final_model", f"{__name__}.final_model:run",
                                   "how tight the membership game's final-model audit is"))
register_reproduction(Reproduction("one_run_tightness", f"{__name__}.one_run_tightness:run",
                                   "how much of the claimed ε a one-run audit of DP-SGD certifies: simulated "
                                   "releases, trainings, the count ceiling, and false alarms on null data"))
