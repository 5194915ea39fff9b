"""The files of ``fdp-audit profile`` (docs/profiles.md, docs/files.md): the figures of a run, its arrays
(``profiles.npz``), ``report_section.json`` and ``profile.json``, written atomically."""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from fdp_audit.atomic_io import atomic_write_bytes, atomic_write_json
from fdp_audit.profiles import trained
from fdp_audit.profiles.compute import ProfileRun
from fdp_audit.profiles.figures import (
    figure_png,
    neighbour_curves_figure,
    profiles_figure,
    scatter_figure,
    transition_figure,
    typical_profiles_figure,
    worst_case_figure,
)
from fdp_audit.profiles.schema import PAPER_WC_CLAIM, results_dict, unit_label
from fdp_audit.profiles.section import report_section
from fdp_audit.profiles.trained import TrainedProfileRun

OPTIONAL_FIGURES = ("scatter_diffprivlib",)


def _figure_makers(run: ProfileRun) -> dict[str, Callable[[], Figure]]:
    s, design = run.settings, run.design
    what = (
        f"{s.mechanism} output perturbation"
        if s.mechanism == "laplace"
        else f"Gaussian output perturbation (δ = {s.delta:g})"
    )
    makers: dict[str, Callable[[], Figure]] = {
        "scatter": lambda: scatter_figure(
            run.scatter,
            design.features,
            f"{what}: samples of $\\mathcal{{A}}(D)$ (×) and of {run.scatter_positions.size} "
            f"neighbours (○), n = {run.scatter_design.n}",
        ),
    }
    if run.diffprivlib_scatter is not None:
        makers["scatter_diffprivlib"] = lambda: scatter_figure(
            run.diffprivlib_scatter,
            design.features,
            f"diffprivlib LogisticRegression (objective perturbation), n = {run.scatter_design.n}",
        )
    makers.update(
        {
            "worst_case": lambda: worst_case_figure(
                run.base.w,
                run.exact.models,
                run.worst_case,
                run.sphere_centres,
                run.sphere_radii,
                run.relative_wc_error,
                design.features,
                PAPER_WC_CLAIM,
            ),
            "profiles": lambda: profiles_figure(
                run.deltas,
                run.centre_profile,
                run.off_centre_offset,
                run.off_centre_profile,
                unit_label(s.mechanism),
                design.features,
                design.row_ids,
            ),
            "typical_profiles": lambda: typical_profiles_figure(run.sweep, run.transition),
            "transition": lambda: transition_figure(
                run.sweep, run.positions, s.rank_quantiles, run.transition, run.beta_star
            ),
            "neighbour_curves": lambda: neighbour_curves_figure(
                run.sweep, run.curve_positions, run.delta_norms, design.row_ids, design.d, run.transition.scale_low
            ),
        }
    )
    return makers


def make_figures(run: ProfileRun) -> dict[str, Figure]:
    """Every figure of docs/profiles.md for this run, by name.

    Args:
        run: the output-perturbation profile run.

    Returns:
        The figures by name (optional ones only when their data exist).
    """
    return {name: make() for name, make in _figure_makers(run).items()}


def _arrays_npz(run: ProfileRun) -> bytes:
    buffer = io.BytesIO()
    np.savez_compressed(
        buffer,
        row_ids=run.design.row_ids,
        base_model=run.base.w,
        exact_models=run.exact.models,
        worst_case_models=run.worst_case,
        deltas=run.deltas,
        centre_profile_values=run.centre_profile.values,
        centre_profile_rows=run.design.row_ids[run.centre_profile.rows],
        off_centre_profile_values=run.off_centre_profile.values,
        off_centre_profile_rows=run.design.row_ids[run.off_centre_profile.rows],
        sweep_epsilons=run.sweep.epsilons,
        sweep_scales=run.sweep.scales,
        typical_profiles=run.sweep.profiles.astype(np.float32),
        mean_loss=run.sweep.mean_loss.astype(np.float32),
        mean_abs_loss=run.sweep.mean_abs_loss.astype(np.float32),
    )
    return buffer.getvalue()


def write_outputs(run: ProfileRun | TrainedProfileRun, out_dir: str | Path) -> dict[str, Any]:
    """Write ``figures/*.png``, ``profiles.npz``, ``report_section.json`` and ``profile.json`` (last) into
    ``out_dir``, each atomically; returns the results dict. Everything is rendered in memory first, so a
    failure leaves no partial file behind.

    Args:
        run: the profile run (output perturbation, or a trained mechanism's estimate).
        out_dir: the output folder (created if needed).

    Returns:
        The ``profile.json`` content.
    """
    out = Path(out_dir)
    if isinstance(run, TrainedProfileRun):
        figures, arrays, results = trained.make_figures(run), trained.arrays_npz(run), trained.results_dict(run)
    else:
        figures, arrays = make_figures(run), _arrays_npz(run)
        results = results_dict(run, list(figures))
    rendered = {name: figure_png(fig) for name, fig in figures.items()}
    section = report_section(results, figures)
    for name, png in rendered.items():
        atomic_write_bytes(out / "figures" / f"{name}.png", png)
    # An optional figure from an earlier run into the same folder would otherwise look current.
    for stale in set(OPTIONAL_FIGURES) - set(rendered):
        (out / "figures" / f"{stale}.png").unlink(missing_ok=True)
    atomic_write_bytes(out / "profiles.npz", arrays)
    atomic_write_json(out / "report_section.json", section)
    atomic_write_json(out / "profile.json", results)
    return results
