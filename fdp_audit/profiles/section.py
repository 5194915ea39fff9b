"""The privacy-profile section of the HTML report (docs/files.md: "privacy profile and ε transition when run").

``fdp-audit profile`` writes ``report_section.json``; ``fdp-audit report RESULTS --profile FILE`` puts
it under the ``profile`` key of the results it renders. The section uses the report's free-form layout
(:func:`fdp_audit.report.sections._free_form`): scalars become facts, ``tables`` (``title``, ``columns``,
``rows``) become tables, ``figures`` (name → SVG text) become inline figures. Every value is copied from
``profile.json`` — nothing is recomputed — and only figures that stay small as vector graphics are
inlined (the PNGs of all figures are in the profile folder).
"""

from __future__ import annotations

import io
from typing import Any

from matplotlib.figure import Figure

# Figures inlined in the report, by results kind: line plots only. The scatter plots hold thousands of
# points, which as SVG would make the page megabytes long, and matplotlib draws colorbars as embedded
# raster images, which the report's SVG check refuses (it admits no <image>).
REPORT_FIGURES = {
    "privacy_profile": ("transition", "neighbour_curves"),
    "privacy_profile_estimate": ("estimate_profile",),
}


def figure_svg(fig: Figure) -> str:
    """The figure as SVG text, without the date stamp so that equal figures give equal text.

    Args:
        fig: a matplotlib figure.

    Returns:
        The SVG document.
    """
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg", metadata={"Date": None})
    return buffer.getvalue()


def report_section(results: dict[str, Any], figures: dict[str, Figure]) -> dict[str, Any]:
    """The report section of one ``profile.json`` (either kind) with its figures as SVG.

    Args:
        results: the ``profile.json`` content (``privacy_profile`` or ``privacy_profile_estimate``).
        figures: the run's figures by name; those of :data:`REPORT_FIGURES` for the kind are inlined.

    Returns:
        The section: facts, ``tables`` and ``figures`` (name → SVG text), every value copied from ``results``.
    """
    build = _density_section if results["kind"] == "privacy_profile" else _estimate_section
    section = build(results)
    section["figures"] = {
        name: figure_svg(figures[name]) for name in REPORT_FIGURES[results["kind"]] if name in figures
    }
    return section


def _setting(results: dict[str, Any]) -> dict[str, Any]:
    s = results["setting"]
    return {
        "mechanism": s["mechanism"],
        "dataset": s["dataset"],
        "columns": ", ".join(s["columns"]),
        "rows n": s["n"],
        "parameters d": s["d"],
        "neighbours": s["neighbour"],
    }


def _density_section(results: dict[str, Any]) -> dict[str, Any]:
    tr, wc, mc = results["transition"], results["worst_case_accuracy"], results["coverage_check"]
    exposed = results["profiles"]["centre"]["most_exposed"][:10]
    return {
        **_setting(results),
        "epsilon_low": tr["epsilon_low"],
        "epsilon_high": tr["epsilon_high"],
        "epsilon_star": tr["epsilon_star"],
        "transition_rule": tr["rule"],
        "A_wc_max_relative_error": wc["max_relative_error"],
        "A_wc_paper_claim": wc["paper_claim"],
        "profile_unit": results["profiles"]["unit"],
        "tables": [
            {
                "title": "Transition per rank (typical |l| divided by the inverse noise scale)",
                "columns": ["quantile", "rank", "onset ε", "end ε", "low plateau reached", "high plateau reached"],
                "rows": [
                    [r["quantile"], r["rank"], r["onset_epsilon"], r["end_epsilon"], r["low_plateau_reached"],
                     r["high_plateau_reached"]]
                    for r in tr["per_rank"]
                ],
            },
            {
                "title": f"Most exposed rows at M = A(D), {results['profiles']['unit']}",
                "columns": ["row", "value"],
                "rows": [[e["row"], e["value"]] for e in exposed],
            },
            {
                "title": f"{mc['label']} of l beside the exact value at ε = {mc['epsilon']:.4g} "
                f"(K = {mc['base_samples']}, cutoff c = {mc['cutoff']:.4g})",
                "columns": ["row", "estimate", "standard error", "exact"],
                "rows": [list(v) for v in zip(mc["rows"], mc["estimate"], mc["standard_error"], mc["analytic"])],
            },
        ],
    }


def _estimate_section(results: dict[str, Any]) -> dict[str, Any]:
    t, e, c, typical = results["training"], results["estimate"], results["centre"], results["typical"]
    return {
        "estimate": results["label"],
        **_setting(results),
        "noise_multiplier z": t["noise_multiplier"],
        "sample_rate p": t["sample_rate"],
        "steps T": t["steps"],
        "clip_norm C": t["clip_norm"],
        "claimed_epsilon": t["claimed_epsilon"],
        "claimed_epsilon_source": t["claimed_epsilon_source"],
        "samples K per distribution": e["base_samples"],
        "model points": e["points"],
        "cutoff_rule": e["cutoff_rule"],
        "cutoff at the centre": c["cutoff"],
        "unresolved pairs over the points": typical["unresolved_pairs"],
        "tables": [
            {
                "title": f"{results['label']}: privacy loss of each studied neighbour at the centre M̄ (cutoff "
                f"c = {c['cutoff']:.4g}) and averaged over {typical['points']} model points M ~ 𝒜(D)",
                "columns": ["row", "ERM |Δ|", "l̂ at M̄", "s.e.", "KL estimate", "mean |l̂|", "mean shift", "shift s.e."],
                "rows": [
                    [n["row"], n["erm_delta_norm"], est, se, n["kl_estimate"], n["mean_abs_loss_estimate"],
                     n["mean_shift"], n["mean_shift_standard_error"]]
                    for n, est, se in zip(results["neighbours"], c["estimate"], c["standard_error"])
                ],
            },
        ],
    }
