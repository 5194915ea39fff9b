"""Figures of docs/profiles.md (paper Figs. 1-8), drawn with matplotlib's object API (no pyplot, no global
backend state; PNG through the Agg canvas). Each ``*_figure`` function returns a
:class:`~matplotlib.figure.Figure`; :func:`figure_png` renders one.

With more than two parameters, parameter-space plots show the first two coordinates (labelled).
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from matplotlib import colormaps, rc_context
from matplotlib.cm import ScalarMappable
from matplotlib.colors import LogNorm
from matplotlib.figure import Figure
from matplotlib.patches import Circle
from matplotlib.ticker import NullFormatter

from fdp_audit.profiles.coverage import laplace_mean_abs_loss, laplace_mean_loss
from fdp_audit.profiles.mechanisms import MechanismName
from fdp_audit.profiles.monte_carlo import MonteCarloLoss
from fdp_audit.profiles.profile import PrivacyProfile
from fdp_audit.profiles.transition import EpsilonSweep, Transition

MAX_POINTS = 4000  # points drawn per cloud; beyond that an evenly spaced subset (all rows stay in the data)


@dataclass(frozen=True)
class ScatterPanel:
    """Model samples at one ε: of 𝒜(D) (K, d) and of each shown neighbour (m, K, d)."""

    epsilon: float
    base: np.ndarray
    neighbours: np.ndarray


def figure_png(fig: Figure, dpi: int = 110) -> bytes:
    """The figure as PNG bytes, without a software/timestamp tag so equal figures give equal bytes.

    Args:
        fig: a matplotlib figure.
        dpi: the resolution.

    Returns:
        The PNG file's bytes.
    """
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi, metadata={"Software": None})
    return buffer.getvalue()


def _labels(features: Sequence[str], prefix: str) -> tuple[str, str]:
    if len(features) == 1:
        return f"{prefix}[{features[0]}]", "(one parameter)"
    note = f"  (2 of {len(features)} coords)" if len(features) > 2 else ""
    return f"{prefix}[{features[0]}]", f"{prefix}[{features[1]}]{note}"


def _xy(points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The first two coordinates (last axis) of parameter vectors; a zero second one when d = 1."""
    points = np.asarray(points)
    second = points[..., 1] if points.shape[-1] > 1 else np.zeros_like(points[..., 0])
    return points[..., 0], second


def _thin(count: int) -> np.ndarray:
    return np.unique(np.linspace(0, count - 1, min(count, MAX_POINTS)).astype(int))


def _scale_name(mechanism: MechanismName) -> str:
    return "β" if mechanism == "laplace" else "1/σ"


def scatter_figure(panels: Sequence[ScatterPanel], features: Sequence[str], title: str) -> Figure:
    """Samples of 𝒜(D) (black ×) and of neighbouring 𝒜(y_i) (circles, one colour per neighbour, ordered
    by ‖A(y_i) - A(D)‖) for each ε (paper Figs. 1 and 8).

    Args:
        panels: the samples at each ε, one panel each.
        features: the feature names (the first two label the axes).
        title: the figure's title.

    Returns:
        The figure.
    """
    cols = min(len(panels), 4)
    rows = math.ceil(len(panels) / cols)
    fig = Figure(figsize=(3.6 * cols, 3.3 * rows + 0.5), layout="constrained")
    # At large ε the clouds span a few 1e-6 around values near 0.02: tick labels need an offset.
    with rc_context({"axes.formatter.offset_threshold": 2}):
        axes = fig.subplots(rows, cols, squeeze=False).ravel()
    xlabel, ylabel = _labels(features, "w")
    turbo = colormaps["turbo"]
    for ax, panel in zip(axes, panels):
        m = panel.neighbours.shape[0]
        for j in range(m):
            ax.scatter(
                *_xy(panel.neighbours[j]), s=9, alpha=0.55, color=turbo(0.05 + 0.9 * j / max(m - 1, 1)), linewidths=0
            )
        ax.scatter(*_xy(panel.base), marker="x", s=28, color="black", zorder=3)
        ax.set_title(f"ε = {panel.epsilon:g}   (log₁₀ ε = {math.log10(panel.epsilon):.2g})", fontsize=9)
        ax.set_xlabel(xlabel, fontsize=8)
        ax.set_ylabel(ylabel, fontsize=8)
        ax.tick_params(labelsize=7)
    for ax in axes[len(panels) :]:
        ax.set_visible(False)
    fig.suptitle(title, fontsize=10)
    return fig


def worst_case_figure(
    w: np.ndarray,
    exact: np.ndarray,
    worst_case: np.ndarray,
    centres: np.ndarray,
    radii: np.ndarray,
    relative_error: np.ndarray,
    features: Sequence[str],
    claim: float,
) -> Figure:
    """A_wc(y_i) against exact A(y_i) (paper Figs. 2-3): (a) all offsets from A(D); (b) the Okumura sphere
    of the row with the largest relative error, with A(D) on it and A_wc across it; (c) the relative
    error |A_wc - A(y)| / |A(y) - A(D)| of every row against |A(y) - A(D)|.

    Args:
        w: the base model A(D), (d,).
        exact: the exact neighbour models A(y_i), (m, d).
        worst_case: the worst-case points A_wc(y_i), (m, d).
        centres: the Okumura spheres' centres, (m, d).
        radii: their radii, (m,).
        relative_error: each row's relative error (NaN where A(y) = A(D)), (m,).
        features: the feature names (the first two label the axes).
        claim: the paper's stated bound on the relative error, drawn for comparison.

    Returns:
        The figure.
    """
    fig = Figure(figsize=(14, 4.4), layout="constrained")
    ax_all, ax_one, ax_err = fig.subplots(1, 3)
    xlabel, ylabel = _labels(features, "Δw")
    keep = _thin(exact.shape[0])
    d_exact, d_wc = exact[keep] - w, worst_case[keep] - w
    ax_all.scatter(*_xy(d_wc), s=30, marker="x", color="tab:red", linewidths=0.8, label="A_wc(y_i) − A(D)")
    ax_all.scatter(*_xy(d_exact), s=5, color="tab:blue", label="exact A(y_i) − A(D)")
    ax_all.scatter([0], [0], marker="*", s=120, color="black", zorder=3, label="A(D)")
    ax_all.set(xlabel=xlabel, ylabel=ylabel, title="(a) neighbour models, offsets from A(D)")
    ax_all.legend(fontsize=7, loc="best")

    finite = np.where(np.isfinite(relative_error), relative_error, -np.inf)
    i = int(np.argmax(finite))
    c, e, a = (np.array(_xy(p)) for p in (centres[i] - w, exact[i] - w, worst_case[i] - w))
    ax_one.add_patch(Circle((c[0], c[1]), radii[i], fill=False, color="0.4", linestyle="--", label="Okumura sphere"))
    ax_one.scatter([0], [0], marker="*", s=140, color="black", zorder=3, label="A(D) (on the sphere)")
    ax_one.scatter([c[0]], [c[1]], marker="+", s=80, color="0.4", label="centre R")
    ax_one.scatter([e[0]], [e[1]], s=45, color="tab:blue", zorder=4, label="exact A(y_i)")
    ax_one.scatter([a[0]], [a[1]], s=90, marker="x", color="tab:red", zorder=5, label="A_wc = 2R − A(D)")
    ax_one.set_aspect("equal", adjustable="datalim")
    ax_one.ticklabel_format(style="sci", scilimits=(-2, 2))
    ax_one.set(xlabel=xlabel, ylabel=ylabel, title=f"(b) largest relative error: {relative_error[i]:.2e}")
    ax_one.legend(fontsize=7, loc="lower right", framealpha=0.9)

    norms = np.linalg.norm(exact - w, axis=1)
    ok = np.isfinite(relative_error) & (norms > 0)
    ax_err.scatter(norms[ok], relative_error[ok], s=3, color="tab:purple", alpha=0.4, rasterized=True)
    ax_err.axhline(
        claim, color="black", linestyle="--", linewidth=1, label=f"paper's claim {claim:g} (6 numeric columns)"
    )
    ax_err.set(
        xscale="log",
        yscale="log",
        xlabel="|A(y_i) − A(D)|",
        ylabel="|A_wc − A(y_i)| / |A(y_i) − A(D)|",
        title=f"(c) max {np.max(relative_error[ok]):.2e}, median {np.median(relative_error[ok]):.2e}",
    )
    for axis in (ax_err.xaxis, ax_err.yaxis):
        axis.set_minor_formatter(NullFormatter())
    ax_err.legend(fontsize=7)
    return fig


def _by_position(profile: PrivacyProfile) -> np.ndarray:
    values = np.empty_like(profile.values)
    values[profile.rows] = profile.values
    return values


def profiles_figure(
    deltas: np.ndarray,
    centre: PrivacyProfile,
    off_offset: np.ndarray,
    off_centre: PrivacyProfile,
    unit: str,
    features: Sequence[str],
    row_ids: np.ndarray,
) -> Figure:
    """Privacy profiles at M = A(D) and at an off-centre M (paper Fig. 4): top, every neighbour model
    A(y_i) coloured by |l(D, y_i, M)| (cool = low loss); bottom, the profiles (sorted |l|) by rank.

    Args:
        deltas: the offsets Δ_i = A(y_i) − A(D), (m, d).
        centre: the profile at M = A(D).
        off_offset: the off-centre point's offset M − A(D), (d,).
        off_centre: the profile at that point.
        unit: how the profile values are scaled (:func:`fdp_audit.profiles.schema.unit_label`).
        features: the feature names (the first two label the axes).
        row_ids: each neighbour position's source row.

    Returns:
        The figure.
    """
    fig = Figure(figsize=(11, 8.6), layout="constrained")
    (ax_c, ax_o), (ax_pc, ax_po) = fig.subplots(2, 2)
    xlabel, ylabel = _labels(features, "Δw")
    keep = _thin(deltas.shape[0])
    size = 70 if keep.size <= 500 else 12
    for ax, profile, offset, title in (
        (ax_c, centre, np.zeros(deltas.shape[1]), "(a) M = A(D)"),
        (ax_o, off_centre, off_offset, "(b) M off-centre"),
    ):
        values = _by_position(profile)[keep]
        order = np.argsort(values)  # draw the most exposed last, on top
        points = ax.scatter(
            *_xy(deltas[keep][order]),
            c=values[order],
            cmap="turbo",
            s=size,
            marker="*",
            linewidths=0,
        )
        ax.scatter([0], [0], marker="s", s=50, facecolor="none", edgecolor="black", linewidths=1.5, label="A(D)")
        ax.scatter(
            *_xy(offset[None, :]), marker="o", s=110, facecolor="none", edgecolor="black", linewidths=2, label="M"
        )
        ax.set(xlabel=xlabel, ylabel=ylabel, title=title)
        ax.set_aspect("equal", adjustable="datalim")
        ax.ticklabel_format(style="sci", scilimits=(-2, 2))
        ax.legend(fontsize=7, loc="upper left")
        fig.colorbar(points, ax=ax, label=unit)
    for ax, profile, title in (
        (ax_pc, centre, "(c) profile at M = A(D)"),
        (ax_po, off_centre, "(d) profile at off-centre M"),
    ):
        ranks = np.arange(1, profile.values.size + 1)
        ax.plot(ranks, profile.values, color="tab:blue")
        ax.set(yscale="log", xlabel="rank (ascending |l|)", ylabel=unit, title=title)
        ax.annotate(
            f"most exposed: row {row_ids[profile.rows[-1]]}",
            (ranks[-1], profile.values[-1]),
            fontsize=7,
            ha="right",
            va="bottom",
        )
    return fig


def typical_profiles_figure(sweep: EpsilonSweep, transition: Transition) -> Figure:
    """Typical (averaged) profiles divided by β across ε (paper Fig. 5): (a) the ε outside the transition,
    whose curves gather in two stable regimes; (b) the ε inside it, between ε_low and ε_high.

    Args:
        sweep: the ε sweep.
        transition: its detected transition (ε_low, ε_high).

    Returns:
        The figure.
    """
    fig = Figure(figsize=(12, 4.6), layout="constrained")
    ax_out, ax_in = fig.subplots(1, 2)
    n = sweep.profiles.shape[1]
    ranks = np.arange(1, n + 1)
    keep = np.unique(np.geomspace(1, n, min(n, 600)).astype(int) - 1)
    norm = LogNorm(sweep.epsilons[0], sweep.epsilons[-1])
    cmap = colormaps["plasma"]
    low, high = transition.epsilon_low, transition.epsilon_high
    inside = (sweep.epsilons > low) & (sweep.epsilons < high)  # NaN bounds: everything counts as outside
    for j, epsilon in enumerate(sweep.epsilons):
        ax = ax_in if inside[j] else ax_out
        ax.plot(ranks[keep], sweep.profiles[j, keep] / sweep.scales[j], color=cmap(norm(epsilon)), linewidth=1)
    name = _scale_name(sweep.mechanism)
    for ax, title in (
        (ax_out, f"(a) stable regimes: ε ≤ {low:.3g} and ε ≥ {high:.3g}"),
        (ax_in, f"(b) transition regime: {low:.3g} < ε < {high:.3g}"),
    ):
        ax.set(yscale="log", xlabel="rank (ascending |l|)", ylabel=f"typical |l| / {name}", title=title)
    fig.colorbar(ScalarMappable(norm=norm, cmap=cmap), ax=[ax_out, ax_in], label="ε")
    return fig


def _epsilon_axis(ax, sweep: EpsilonSweep) -> None:
    """Top axis in ε for an axis in inverse noise scale (monotone map; exact for Laplace)."""
    log_s, log_e = np.log(sweep.scales), np.log(sweep.epsilons)

    def forward(s):
        return np.exp(np.interp(np.log(np.maximum(s, 1e-300)), log_s, log_e))

    def backward(e):
        return np.exp(np.interp(np.log(np.maximum(e, 1e-300)), log_e, log_s))

    top = ax.secondary_xaxis("top", functions=(forward, backward))
    top.set_xscale("log")
    top.set_xlabel("ε")


def transition_figure(
    sweep: EpsilonSweep, positions: np.ndarray, quantiles: Sequence[float], transition: Transition, beta_star: float
) -> Figure:
    """Typical |l|/β at fixed ranks against β (paper Fig. 6): a plateau, a transition, a second plateau;
    dashed: the shared onset β_low, dash-dotted: the end β_high, dotted: β* = 1/max‖Δ_i‖.

    Args:
        sweep: the ε sweep.
        positions: the profile positions drawn.
        quantiles: their rank quantiles, for the legend.
        transition: the detected transition.
        beta_star: β* (not drawn when infinite).

    Returns:
        The figure.
    """
    fig = Figure(figsize=(8, 5.2), layout="constrained")
    ax = fig.subplots()
    curves = sweep.at_positions(positions)
    cmap = colormaps["viridis"]
    name = _scale_name(sweep.mechanism)
    for r, (curve, q, p) in enumerate(zip(curves, quantiles, positions)):
        ax.plot(
            sweep.scales,
            curve,
            marker="o",
            markersize=3,
            color=cmap(r / max(len(positions) - 1, 1)),
            label=f"rank {p + 1} (q = {q:g})",
        )
    for value, style, label in (
        (transition.scale_low, "--", f"onset {name}_low (ε = {transition.epsilon_low:.3g})"),
        (transition.scale_high, "-.", f"end {name}_high (ε = {transition.epsilon_high:.3g})"),
        (beta_star, ":", f"{name}* = 1/max|Δ_i|"),
    ):
        if np.isfinite(value):
            ax.axvline(value, color="black", linestyle=style, linewidth=1, label=label)
    ax.set(xscale="log", yscale="log", xlabel=name, ylabel=f"typical |l| / {name}")
    _epsilon_axis(ax, sweep)
    ax.legend(fontsize=7, loc="best")
    return fig


def neighbour_curves_figure(
    sweep: EpsilonSweep, positions: np.ndarray, delta_norms: np.ndarray, row_ids: np.ndarray, d: int, scale_low: float
) -> Figure:
    """Per-neighbour mean losses (paper Fig. 7) of the neighbours at ``positions`` (all with ‖Δ_i‖ > 0):
    against β (left) and against s = β‖Δ_i‖ (right), where the curves of all neighbours collapse.
    Top: mean |l| (normalised); bottom: the mean signed loss, i.e. KL(𝒜(D) ‖ 𝒜(y_i)), with the exact
    curve (κ_d(s) for Laplace, s²/2 for Gaussian).

    Args:
        sweep: the ε sweep (its per-neighbour mean losses).
        positions: the neighbour positions drawn (empty: a figure saying no neighbour changes the model).
        delta_norms: every neighbour's ‖Δ_i‖.
        row_ids: each neighbour position's source row.
        d: the dimension (of the exact Laplace curve κ_d).
        scale_low: the transition's onset β_low (not drawn when NaN).

    Returns:
        The figure.
    """
    fig = Figure(figsize=(12, 8.4), layout="constrained")
    (ax_abs, ax_abs_s), (ax_kl, ax_kl_s) = fig.subplots(2, 2)
    if len(positions) == 0:
        fig.suptitle("no neighbour changes the model: every privacy loss is 0")
        return fig
    name = _scale_name(sweep.mechanism)
    cmap = colormaps["viridis"]
    for j, p in enumerate(positions):
        colour = cmap(j / max(len(positions) - 1, 1))
        s = sweep.scales * delta_norms[p]
        label = f"row {row_ids[p]}  (|Δ| = {delta_norms[p]:.2e})"
        ax_abs.plot(sweep.scales, sweep.mean_abs_loss[:, p] / sweep.scales, color=colour, label=label)
        ax_abs_s.plot(s, sweep.mean_abs_loss[:, p] / s, color=colour, marker="o", markersize=2.5, linewidth=0.8)
        kl = np.where(sweep.mean_loss[:, p] > 0, sweep.mean_loss[:, p], np.nan)
        ax_kl.plot(sweep.scales, kl, color=colour)
        ax_kl_s.plot(s, kl, color=colour, marker="o", markersize=2.5, linewidth=0, label=label)
    grid = np.geomspace(*_span(sweep.scales[:, None] * delta_norms[positions][None, :]), 120)
    if sweep.mechanism == "laplace":
        ax_abs_s.plot(grid, laplace_mean_abs_loss(grid, d) / grid, color="black", linewidth=1, label="exact")
        ax_abs_s.legend(fontsize=7)
    exact = laplace_mean_loss(grid, d) if sweep.mechanism == "laplace" else grid**2 / 2
    ax_kl_s.plot(
        grid,
        exact,
        color="black",
        linewidth=1.2,
        label="exact KL" + (f" κ_{d}(s)" if sweep.mechanism == "laplace" else " s²/2"),
    )
    ax_kl_s.plot(
        grid,
        grid**2 / (2 * d) if sweep.mechanism == "laplace" else grid**2 / 2,
        color="black",
        linestyle=":",
        linewidth=1,
        label="small s: s²/(2d)",
    )
    if np.isfinite(scale_low):
        for ax in (ax_abs, ax_kl):
            ax.axvline(scale_low, color="black", linestyle="--", linewidth=1, label=f"{name}_low (Fig. 6)")
    ax_abs.set(
        xscale="log",
        yscale="log",
        xlabel=name,
        ylabel=f"mean |l| / {name}",
        title="(a) mean |l| against the noise scale",
    )
    ax_abs_s.set(
        xscale="log", xlabel=f"s = {name}·|Δ_i|", ylabel="mean |l| / s", title="(b) the same against s: one curve"
    )
    ax_kl.set(
        xscale="log",
        yscale="log",
        xlabel=name,
        ylabel=r"mean l = KL($\mathcal{A}(D)\,\|\,\mathcal{A}(y_i)$)",
        title="(c) mean signed loss (KL)",
    )
    ax_kl_s.set(
        xscale="log",
        yscale="log",
        xlabel=f"s = {name}·|Δ_i|",
        ylabel="mean l = KL",
        title="(d) KL against s, with the exact curve",
    )
    ax_abs.legend(fontsize=7)
    ax_kl_s.legend(fontsize=7)
    return fig


def _span(values: np.ndarray) -> tuple[float, float]:
    positive = values[values > 0]
    return float(positive.min()), float(positive.max())


def estimate_scatter_figure(
    base: np.ndarray, neighbours: np.ndarray, rows: np.ndarray, names: Sequence[str], title: str
) -> Figure:
    """Trained models of 𝒜(D) (black ×) and of each studied neighbour 𝒜(y_i) (one colour each, ordered by
    the non-private offset) in the first two parameters: the clouds a Monte Carlo coverage counts.

    Args:
        base: trained models of 𝒜(D), (K, P).
        neighbours: trained models of each 𝒜(y_i), (m, K, P).
        rows: each neighbour's source row.
        names: the parameter names (the first two label the axes).
        title: the figure's title.

    Returns:
        The figure.
    """
    fig = Figure(figsize=(6.4, 5.4), layout="constrained")
    ax = fig.subplots()
    turbo = colormaps["turbo"]
    m = neighbours.shape[0]
    keep = _thin(base.shape[0])[:: max(1, base.shape[0] // 1000)]
    for j in range(m):
        ax.scatter(*_xy(neighbours[j][keep]), s=6, alpha=0.35, linewidths=0,
                   color=turbo(0.05 + 0.9 * j / max(m - 1, 1)), label=f"$\\mathcal{{A}}(y_i)$, row {rows[j]}")
    ax.scatter(*_xy(base[keep]), marker="x", s=14, linewidths=0.7, color="black", label="$\\mathcal{A}(D)$")
    xlabel, ylabel = _labels(names, "θ")
    ax.set(xlabel=xlabel, ylabel=ylabel)
    ax.legend(fontsize=6, loc="best", markerscale=2)
    fig.suptitle(title, fontsize=9)
    return fig


def estimate_profile_figure(
    centre: MonteCarloLoss, typical: np.ndarray, rows: np.ndarray, claimed_epsilon: float, title: str
) -> Figure:
    """Estimated privacy profiles of a trained mechanism: (a) |l̂| at the centre M̄ of the samples of 𝒜(D),
    each studied neighbour with its ±1 standard error; (b) the estimated typical profile (sorted |l̂| averaged
    over held-out model points). The claimed ε (an (ε, δ) guarantee, so not a hard ceiling) is a dashed
    line when it is on the scale of the estimates, and written otherwise.

    Args:
        centre: the Monte Carlo estimate at the centre M̄.
        typical: the estimated typical profile, one value per rank.
        rows: each neighbour's source row.
        claimed_epsilon: the mechanism's claimed ε.
        title: the figure's title.

    Returns:
        The figure.
    """
    fig = Figure(figsize=(11, 4.4), layout="constrained")
    ax_c, ax_t = fig.subplots(1, 2)
    loss, error = np.abs(centre.loss[0]), centre.standard_error[0]
    order = np.argsort(loss, kind="stable")
    ranks = np.arange(1, loss.size + 1)
    finite = np.isfinite(loss[order])
    ax_c.errorbar(ranks[finite], loss[order][finite], yerr=np.where(np.isfinite(error), error, 0)[order][finite],
                  fmt="o", color="tab:blue", capsize=3, label="|l̂| ± 1 s.e.")
    for r, j in zip(ranks, order):
        ax_c.annotate(f"row {rows[j]}", (r, loss[j] if np.isfinite(loss[j]) else 0), fontsize=6,
                      xytext=(3, 3), textcoords="offset points")
    if (~finite).any():
        ax_c.set_title(f"{int((~finite).sum())} unresolved (infinite) not drawn", fontsize=8, loc="right")
    ax_c.set(xlabel="rank (ascending |l̂|)", ylabel="|l̂(D, y_i, M̄)|", title=f"(a) at M̄, cutoff c = {centre.cutoff:.3g}")
    ax_t.plot(ranks, typical, marker="o", color="tab:purple", label="typical |l̂| (mean over points)")
    ax_t.set(xlabel="rank (ascending |l̂|)", ylabel="typical |l̂|", title="(b) estimated typical profile")
    top = max(float(np.nanmax(np.where(np.isfinite(loss), loss + np.nan_to_num(error), 0))),
              float(np.nanmax(np.where(np.isfinite(typical), typical, 0))), 1e-3)
    for ax in (ax_c, ax_t):
        # The claimed ε is drawn only when it is on the scale of the estimates; otherwise it is written.
        if np.isfinite(claimed_epsilon) and claimed_epsilon <= 1.5 * top:
            ax.axhline(claimed_epsilon, color="black", linestyle="--", linewidth=1,
                       label=f"claimed ε = {claimed_epsilon:.3g}")
        elif np.isfinite(claimed_epsilon):
            ax.text(0.02, 0.97, f"claimed ε = {claimed_epsilon:.3g}: {claimed_epsilon / top:.0f}× the top of this axis",
                    transform=ax.transAxes, fontsize=7, va="top")
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=7, loc="center left")
    fig.suptitle(title, fontsize=9)
    return fig
