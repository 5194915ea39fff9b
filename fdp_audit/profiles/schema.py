"""``profile.json`` of an output-perturbation run (docs/profiles.md, docs/files.md): every number the report
shows about a :class:`~fdp_audit.profiles.compute.ProfileRun`, one function per section of the file."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from fdp_audit import __version__
from fdp_audit.json_numbers import json_float, json_floats
from fdp_audit.profiles.compute import SCATTER_SAMPLES, ProfileRun
from fdp_audit.profiles.coverage import gaussian_kl, laplace_mean_loss
from fdp_audit.profiles.logistic import objective
from fdp_audit.profiles.mechanisms import MechanismName
from fdp_audit.profiles.profile import PrivacyProfile

SCHEMA_VERSION = 1
PAPER_WC_CLAIM = 2e-3
CURVE_POINTS = 200  # rank positions kept per profile curve in the JSON


def curve_positions(n: int) -> np.ndarray:
    """At most CURVE_POINTS positions of an n-point profile, denser at both ends where it bends.

    Args:
        n: the profile's length.

    Returns:
        Sorted 0-based positions (every position when n ≤ :data:`CURVE_POINTS`).
    """
    if n <= CURVE_POINTS:
        return np.arange(n)
    half = np.geomspace(1, n, CURVE_POINTS // 2)
    return np.unique(np.concatenate([half - 1, n - half]).round().astype(int).clip(0, n - 1))


def unit_label(name: MechanismName) -> str:
    """How a profile's values are scaled, for the mechanism ``name``: the loss at unit noise scale.

    Args:
        name: ``"laplace"`` or ``"gaussian"``.

    Returns:
        The label, ``|l|/β (Laplace at β = 1)`` or ``|l|·σ² (Gaussian at σ = 1)``.
    """
    return "|l|/β (Laplace at β = 1)" if name == "laplace" else "|l|·σ² (Gaussian at σ = 1)"


def _scale_unit(name: MechanismName) -> str:
    return "β" if name == "laplace" else "1/σ"


def _profile(run: ProfileRun, profile: PrivacyProfile, offset: np.ndarray, top: int = 20) -> dict[str, Any]:
    keep = curve_positions(profile.values.size)
    rows = run.design.row_ids[profile.rows]
    return {
        "point": json_floats(run.base.w + offset),
        "offset_from_base": json_floats(offset),
        "rank": (keep + 1).tolist(),
        "value": json_floats(profile.values[keep]),
        "most_exposed": [
            {"row": int(r), "value": json_float(v)} for r, v in zip(rows[::-1][:top], profile.values[::-1][:top])
        ],
    }


def _setting(run: ProfileRun) -> dict[str, Any]:
    s, design = run.settings, run.design
    replaced = s.neighbour == "replace"
    return {
        "dataset": run.dataset,
        "label": run.label,
        "positive_class": "the lexicographically larger label value is +1",
        "columns": list(s.columns),
        "features": list(design.features),
        "n": design.n,
        "d": design.d,
        "rows": s.rows,
        "regularization": s.regularization,
        "normalisation": "standardise each column, then divide all rows by the largest row norm",
        "mechanism": s.mechanism,
        "delta": s.delta if s.mechanism == "gaussian" else None,
        "neighbour": s.neighbour,
        "protected": list(s.protected if s.protected is not None else run.config.data.protected) if replaced else [],
        "replacement": "protected numeric columns set to their mean, categorical ones to their mode"
        if replaced else None,
        "neighbour_model": s.neighbour_model,
        "samples": s.samples,
        "row_ids": "0-based row index in the source table",
    }


def _neighbours(run: ProfileRun) -> dict[str, Any]:
    norms = run.delta_norms
    return {
        "kind": run.neighbours.kind,
        "count": len(run.neighbours),
        "delta_norm": {
            "min": json_float(norms.min()),
            "median": json_float(np.median(norms)),
            "max": json_float(norms.max()),
            "row_max": int(run.design.row_ids[run.row_max]),
        },
        "unchanged_rows": int((norms == 0).sum()),
        "newton_iterations_max": int(run.exact.iterations.max()),
        "newton_last_step_max": json_float(run.exact.last_step.max()),
    }


def _worst_case_accuracy(run: ProfileRun) -> dict[str, Any]:
    rel = run.relative_wc_error
    compared = np.isfinite(rel)
    worst = int(np.nanargmax(rel)) if compared.any() else None
    sphere_excess = (np.linalg.norm(run.exact.models - run.sphere_centres, axis=1) - run.sphere_radii).max()
    return {
        "statistic": "max over rows of |A_wc(y_i) - A(y_i)| / |A(y_i) - A(D)|, exact A(y_i) by Newton",
        "max_relative_error": json_float(rel[worst]) if worst is not None else None,
        "median_relative_error": json_float(np.nanmedian(rel)) if worst is not None else None,
        "row_of_max": int(run.design.row_ids[worst]) if worst is not None else None,
        "rows_compared": int(compared.sum()),
        "paper_claim": PAPER_WC_CLAIM,
        "within_paper_claim": bool(rel[worst] < PAPER_WC_CLAIM) if worst is not None else None,
        "max_sphere_excess": json_float(sphere_excess),
    }


def _sweep(run: ProfileRun) -> dict[str, Any]:
    s, sweep, n = run.settings, run.sweep, run.design.n
    scale_unit = _scale_unit(s.mechanism)
    return {
        "epsilons": json_floats(sweep.epsilons),
        "scales": json_floats(sweep.scales),
        "scale": scale_unit,
        "samples": sweep.samples,
        "rank_quantiles": list(s.rank_quantiles),
        "ranks": (run.positions + 1).tolist(),
        "curves": json_floats(sweep.at_positions(run.positions)),
        "curve_unit": f"typical |l| / {scale_unit}",
        "typical_profile_ranks": (curve_positions(n) + 1).tolist(),
        "typical_profiles": json_floats(sweep.profiles[:, curve_positions(n)] / sweep.scales[:, None]),
    }


def _transition(run: ProfileRun) -> dict[str, Any]:
    tr, norms = run.transition, run.delta_norms
    per_rank = zip(run.settings.rank_quantiles, run.positions, tr.onset_epsilon, tr.end_epsilon, tr.onset_scale,
                   tr.end_scale, tr.low_plateau_reached, tr.high_plateau_reached)
    return {
        "rule": (
            f"per rank, h = normalised rise of |l|/{_scale_unit(run.settings.mechanism)} between the grid ends; "
            f"onset = first crossing of h = {tr.tau}, end = last crossing of h = {1 - tr.tau} (log-linear "
            "interpolation); ε_low = min onset over ranks, ε_high = max end over ranks; a plateau is reached when "
            "two grid points lie on it"
        ),
        "tau": tr.tau,
        "epsilon_low": json_float(tr.epsilon_low),
        "epsilon_high": json_float(tr.epsilon_high),
        "scale_low": json_float(tr.scale_low),
        "scale_high": json_float(tr.scale_high),
        "low_plateau_reached": bool(tr.low_plateau_reached.all()),
        "high_plateau_reached": bool(tr.high_plateau_reached.all()),
        "per_rank": [
            {"quantile": q, "rank": int(p + 1), "onset_epsilon": json_float(oe), "end_epsilon": json_float(ee),
             "onset_scale": json_float(os_), "end_scale": json_float(es), "low_plateau_reached": bool(lo),
             "high_plateau_reached": bool(hi)}
            for q, p, oe, ee, os_, es, lo, hi in per_rank
        ],
        "beta_star": json_float(run.beta_star),
        "epsilon_star": json_float(run.epsilon_of_scale(run.beta_star)),
        "beta_star_definition": "1 / max_i |A(D) - A(y_i)|",
        "row_max": int(run.design.row_ids[run.row_max]),
        "delta_max": json_float(norms[run.row_max]),
    }


def _neighbour_curves(run: ProfileRun) -> list[dict[str, Any]]:
    sweep, norms, d = run.sweep, run.delta_norms, run.design.d
    kl_reference = (
        laplace_mean_loss(sweep.scales[:, None] * norms[run.curve_positions][None, :], d)
        if run.settings.mechanism == "laplace"
        else gaussian_kl(norms[run.curve_positions][None, :], 1.0 / sweep.scales[:, None])
    )
    return [
        {
            "row": int(run.design.row_ids[p]),
            "delta_norm": json_float(norms[p]),
            "s": json_floats(sweep.scales * norms[p]),
            "mean_loss": json_floats(sweep.mean_loss[:, p]),
            "mean_abs_loss": json_floats(sweep.mean_abs_loss[:, p]),
            "kl_exact": json_floats(kl_reference[:, j]),
        }
        for j, p in enumerate(run.curve_positions)
    ]


def _coverage_check(run: ProfileRun) -> dict[str, Any]:
    mc, row_ids = run.mc_check, run.design.row_ids
    return {
        "label": mc.estimate.label,
        "epsilon": json_float(mc.epsilon),
        "point": json_floats(run.base.w + mc.point),
        "cutoff": json_float(mc.estimate.cutoff),
        "cutoff_rule": "profile.cutoff" if run.settings.cutoff is not None
        else "distance to the ceil(sqrt(K))-th nearest base sample",
        "base_samples": mc.estimate.base_samples,
        "neighbour_samples": mc.estimate.neighbour_samples,
        "base_count": int(mc.estimate.base_counts[0]),
        "rows": [int(row_ids[p]) for p in mc.positions],
        "neighbour_counts": mc.estimate.neighbour_counts[0].tolist(),
        "estimate": json_floats(mc.estimate.loss[0]),
        "standard_error": json_floats(mc.estimate.standard_error[0]),
        "analytic": json_floats(mc.analytic),
    }


def results_dict(run: ProfileRun, figure_names: Sequence[str]) -> dict[str, Any]:
    """Every number the report shows about this run, as a JSON-able dict (schema ``SCHEMA_VERSION``);
    ``figure_names`` are the figures :mod:`.outputs` draws for it.

    Args:
        run: the computed profile run.
        figure_names: the names of the figures drawn (each stored as ``figures/<name>.png``).

    Returns:
        The ``profile.json`` content.
    """
    s, design = run.settings, run.design
    return {
        "schema_version": SCHEMA_VERSION,
        "kind": "privacy_profile",
        "package_version": __version__,
        "name": run.config.name,
        "seed": run.config.seed,
        "setting": _setting(run),
        "base_model": {
            "A_D": json_floats(run.base.w),
            "newton_iterations": run.base.iterations,
            "gradient_norm": json_float(run.base.gradient_norm),
            "objective": json_float(objective(run.base.w, design.X, design.y, s.regularization)),
        },
        "neighbours": _neighbours(run),
        "worst_case_accuracy": _worst_case_accuracy(run),
        "profiles": {
            "unit": unit_label(s.mechanism),
            "centre": _profile(run, run.centre_profile, np.zeros(design.d)),
            "off_centre": _profile(run, run.off_centre_profile, run.off_centre_offset),
        },
        "sweep": _sweep(run),
        "transition": _transition(run),
        "neighbour_curves": _neighbour_curves(run),
        "coverage_check": _coverage_check(run),
        "scatter": {
            "epsilons": sorted(s.epsilons),
            "n": run.scatter_design.n,
            "neighbours_shown": int(run.scatter_positions.size),
            "samples_per_distribution": SCATTER_SAMPLES,
            "rows_shown": [int(run.scatter_design.row_ids[p]) for p in run.scatter_positions],
            "diffprivlib": run.diffprivlib_status,
        },
        "figures": {name: f"figures/{name}.png" for name in figure_names},
        "timings_s": dict(run.timings),
    }
