"""The report's plots (docs/files.md), drawn with matplotlib and returned as inline SVG.

Only curves that results.json gives as arrays are transformed for plotting (``1 - f(α)``, ``TPR =
1 - FNR``); every plotted point and line is a stored value. The ``Figure`` object API is used rather
than pyplot: no global figure registry, no backend selection, safe to call from any thread.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any

import matplotlib
import numpy as np
from markupsafe import Markup
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from fdp_audit.auditing.labels import attack_words
from fdp_audit.report.format import number
from fdp_audit.report.svg import inline_svg

# text stays text (small, selectable, printed sharply); a fixed hash salt makes the SVG ids, and so
# the report, identical from run to run
# The sizes are small and the text large for them: a figure is drawn at most at its own size, shrunk to a phone's
# width (about 360 px, two thirds of the widest) without scrolling, so its text must stay legible at two thirds.
_STYLE = {
    "svg.fonttype": "none",
    "svg.hashsalt": "fdp-audit-report",
    "font.size": 12,
    "legend.fontsize": 11,
    "axes.grid": True,
    "grid.alpha": 0.3,
}
_WIDE = (5.6, 3.6)
_TALL = (5.6, 4.4)
_SQUARE = (4.6, 4.0)
_COLOURS = ("#1f5fa8", "#c2410c", "#15803d", "#7e22ce", "#b45309", "#0e7490", "#be123c")
_BOUND, _PRIOR, _COMPARISON = "#111827", "#6b7280", "#9ca3af"


def _array(values: Sequence[Any] | None) -> np.ndarray:
    """A results.json list as floats, null as NaN (matplotlib leaves NaN points out)."""
    return np.array([np.nan if v is None else v for v in values or ()], dtype=float)


def _positive(values: np.ndarray) -> np.ndarray:
    """Values that cannot be drawn on a log axis become NaN instead of breaking the axis."""
    return np.where(values > 0, values, np.nan)


def _svg(fig: Figure, prefix: str, label: str) -> Markup:
    buffer = io.StringIO()
    # the saved area grows to hold every artist, so that no legend or label is ever cut off
    fig.savefig(buffer, format="svg", metadata={"Date": None}, bbox_inches="tight", pad_inches=0.06)
    return inline_svg(buffer.getvalue(), prefix, label)


def _figure(size: tuple[float, float]) -> tuple[Figure, Axes]:
    # fixed margins, not a layout engine (which draws every figure twice); the saved area is trimmed or grown
    # to what is drawn
    fig = Figure(figsize=size)
    fig.subplots_adjust(left=0.1, right=0.97, top=0.97, bottom=0.11)
    return fig, fig.add_subplot()


def _legend_below(ax: Axes) -> None:
    """The legend under the axes in one column, clear of the x label: it never hides a curve, the tight bounding
    box of the saved figure takes it in whole, and no entry is cut at a phone's width."""
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncols=1)


def _errorbar(ax: Axes, x: float, y: float, low: float | None, high: float | None, **style: Any) -> None:
    """One success rate with its interval; a missing bound is drawn as no whisker on that side."""
    below = 0.0 if low is None else max(y - low, 0.0)
    above = 0.0 if high is None else max(high - y, 0.0)
    ax.errorbar([x], [y], yerr=[[below], [above]], capsize=3, linestyle="none", **style)


def tradeoff_figure(
    curve: dict[str, list[float | None]],
    gdp_mu: float | None,
    attribute_points: Sequence[tuple[str, dict[str, Any]]],
    game_points: Sequence[tuple[str, str, Sequence[dict[str, Any]]]],
    prefix: str,
) -> Markup:
    """``1 - f(α)`` against α on log axes, with the attribute-inference successes at α = Ball and the
    distinguishing games' (FPR, 1 - FNR) points; the GDP approximation is drawn as a labelled comparison.

    Args:
        curve: results.json's ``accounting.curve``: ``alpha`` and the curves ``f``, ``f_replace``, ``f_optimistic``
            and ``f_gdp_approx`` on it (each optional but ``alpha``).
        gdp_mu: the GDP approximation's μ for its legend, or None.
        attribute_points: (label, attack row) per attribute game; the row's ``ball``, ``rate`` and interval are
            drawn.
        game_points: (label, relation, points) per attack of a distinguishing or simulator game; each point's
            ``fpr``, ``fnr`` and their upper bounds are drawn.
        prefix: the figure's id prefix in the page.

    Returns:
        The figure as inline SVG.
    """
    with matplotlib.rc_context(_STYLE):
        fig, ax = _figure(_TALL)
        alpha = _positive(_array(curve.get("alpha")))
        lines = (
            ("f", "add/remove, PLD (used for the bound)", {"color": _BOUND, "linewidth": 1.8}),
            ("f_replace", "replacement, PLD", {"color": _COLOURS[0], "linewidth": 1.4, "linestyle": "--"}),
            ("f_optimistic", "add/remove, optimistic PLD", {"color": _COLOURS[2], "linewidth": 1.0, "linestyle": ":"}),
        )
        for key, label, style in lines:
            if curve.get(key) is not None:
                ax.plot(alpha, _positive(1 - _array(curve[key])), label=label, **style)
        if curve.get("f_gdp_approx") is not None:
            mu = f" μ = {number(gdp_mu)}" if gdp_mu is not None else ""
            ax.plot(
                alpha,
                _positive(1 - _array(curve["f_gdp_approx"])),
                label=f"GDP approximation{mu} (comparison only)",
                color=_COMPARISON,
                linewidth=1.2,
                linestyle="-.",
            )
        ax.plot(alpha, alpha, color=_PRIOR, linewidth=0.8, linestyle=(0, (1, 3)), label="no leakage: 1 − f(α) = α")
        for i, (label, point) in enumerate(attribute_points):
            _errorbar(
                ax,
                point["ball"],
                point["rate"],
                point.get("ci_low"),
                point.get("ci_high"),
                marker="o",
                color=_COLOURS[(i + 3) % len(_COLOURS)],
                label=label,
            )
        for i, (label, relation, points) in enumerate(game_points):
            colour = _COLOURS[(i + 1) % len(_COLOURS)]
            fpr, fnr = _array([p["fpr"] for p in points]), _array([p["fnr"] for p in points])
            fpr_ub, fnr_ub = _array([p["fpr_ub"] for p in points]), _array([p["fnr_ub"] for p in points])
            # whiskers reach the conservative corner (FPR upper bound, 1 - FNR upper bound) the ε bound uses
            ax.errorbar(
                _positive(fpr),
                _positive(1 - fnr),
                xerr=[np.zeros_like(fpr), np.maximum(fpr_ub - fpr, 0)],
                yerr=[np.maximum(fnr_ub - fnr, 0), np.zeros_like(fnr)],
                marker="s",
                markersize=4,
                capsize=2,
                linestyle="none",
                color=colour,
                label=f"{label} ({relation})",
            )
        ax.set_xscale("log")
        ax.set_yscale("log")
        zoom = _data_limits(attribute_points, game_points)
        if zoom is not None:
            ax.set_xlim(zoom[0], 1.05)
            ax.set_ylim(zoom[1], 1.05)
        ax.set_xlabel("α (false-positive rate; for attribute inference, Ball)")
        ax.set_ylabel("1 − f(α) (best true-positive rate)")
        # many series: below the plot, so that no legend box hides the small-α region the audit cares about
        _legend_below(ax)
        return _svg(fig, prefix, "Trade-off curve 1 − f(α) against α with the empirical points")


def _data_limits(attribute_points: Sequence[tuple[str, dict[str, Any]]],
                 game_points: Sequence[tuple[str, str, Sequence[dict[str, Any]]]]) -> tuple[float, float] | None:
    """The lower ends (x, y) of log axes that hold every empirical point and whisker with a margin of a factor 3
    (1.5 on y), so that the plot shows where the points lie rather than 1e-6 … 1; None without points. Since
    1 − f(α) ≥ α, the y range also holds every curve at the x range's lower end."""
    xs = [p["ball"] for _, p in attribute_points]
    ys = [value for _, p in attribute_points for value in (p["rate"], p.get("ci_low"))]
    for _, _, points in game_points:
        for p in points:
            xs += [p["fpr"], p["fpr_ub"]]
            ys += [1 - p["fnr"], 1 - p["fnr_ub"]]
    xs = [x for x in xs if x is not None and x > 0]
    if not xs:
        return None
    x_low = min(xs) / 3
    y_low = min([y for y in ys if y is not None and y > 0] + [x_low]) / 1.5
    return x_low, y_low


def sweep_figure(sweep: dict[str, Any], prefix: str) -> Markup:
    """Attribute-inference success against ε, with the Theorem 4 bound and the prior (Ball) line.

    Args:
        sweep: results.json's sweep: ``epsilon``, ``rate``, ``bound``, and optionally ``ci_low``/``ci_high`` (one
            per ε) and ``ball``.
        prefix: the figure's id prefix in the page.

    Returns:
        The figure as inline SVG.
    """
    with matplotlib.rc_context(_STYLE):
        fig, ax = _figure(_WIDE)
        eps, rate = _positive(_array(sweep["epsilon"])), _array(sweep["rate"])
        low, high = _array(sweep.get("ci_low")), _array(sweep.get("ci_high"))
        has_interval = low.size == rate.size and high.size == rate.size
        ax.errorbar(
            eps,
            rate,
            yerr=[np.maximum(rate - low, 0), np.maximum(high - rate, 0)] if has_interval else None,
            marker="o",
            capsize=3,
            color=_COLOURS[0],
            label="empirical success (interval)",
        )
        ax.plot(eps, _array(sweep["bound"]), color=_BOUND, marker="_", label="Theorem 4 bound 1 − f(Ball)")
        if sweep.get("ball") is not None:
            ax.axhline(sweep["ball"], color=_PRIOR, linestyle="--", label="prior: Ball (no model)")
        ax.set_xscale("log")
        ticks = [e for e in sweep["epsilon"] if e is not None and e > 0]
        ax.set_xticks(ticks, [number(e) for e in ticks])
        ax.minorticks_off()
        ax.set_xlabel("ε (at the mechanism's δ)")
        ax.set_ylabel("attribute-inference success")
        _legend_below(ax)
        return _svg(fig, prefix, "Attribute-inference success against ε with bound and prior lines")


def reconstruction_figure(attack: dict[str, Any], prefix: str) -> Markup:
    """Reconstruction success against the radius ρ, against 1 - f(Ball(ρ)) and Ball(ρ).

    Args:
        attack: a reconstruction attack's row: its name and ``points`` with ``rho``, ``rate``, ``bound``, ``ball``
            and optionally ``ci_low``/``ci_high``.
        prefix: the figure's id prefix in the page.

    Returns:
        The figure as inline SVG.
    """
    with matplotlib.rc_context(_STYLE):
        fig, ax = _figure(_WIDE)
        points = sorted(attack["points"], key=lambda p: p["rho"])
        rho = _array([p["rho"] for p in points])
        rate = _array([p["rate"] for p in points])
        low, high = _array([p.get("ci_low") for p in points]), _array([p.get("ci_high") for p in points])
        ax.errorbar(
            rho,
            rate,
            yerr=[np.nan_to_num(np.maximum(rate - low, 0)), np.nan_to_num(np.maximum(high - rate, 0))],
            marker="o",
            capsize=3,
            color=_COLOURS[1],
            label=f"{attack_words(attack)} success (interval)",
        )
        ax.plot(rho, _array([p["bound"] for p in points]), color=_BOUND, marker="_", label="bound 1 − f(Ball(ρ))")
        ax.plot(rho, _array([p["ball"] for p in points]), color=_PRIOR, linestyle="--", label="prior: Ball(ρ)")
        ax.set_xlabel("ρ (success radius, L2 distance)")
        ax.set_ylabel("Pr[‖x̂ − x‖ ≤ ρ]")
        ax.set_ylim(0, 1.02)
        _legend_below(ax)
        return _svg(fig, prefix, f"Reconstruction success against ρ for {attack_words(attack)}")


def roc_figure(
    attacks: Sequence[dict[str, Any]],
    claimed: tuple[list[float | None], list[float | None]] | None,
    relation: str,
    prefix: str,
    log: bool = False,
) -> Markup:
    """ROC curves of a distinguishing or simulator game, with the claimed trade-off ``TPR = 1 - f(FPR)``
    (``claimed`` is the accounting curve's (α, f) for the game's relation, when accounting was run). With ``log``
    both axes are logarithmic, from half the smallest non-zero rate the trials can show, and each attack's stored
    TPR at its low false-positive rates is drawn with its interval: the regime a confident attack lives in.

    Args:
        attacks: the game's attack rows, each with ``roc`` (``fpr``, ``tpr``) and, drawn on linear axes, its
            conservative ``points``; on log axes its ``tpr_at_fpr`` rows.
        claimed: ``(alpha, f)`` of the claimed curve, or None.
        relation: the game's neighbouring relation, in words, for the legend.
        prefix: the figure's id prefix in the page.
        log: draw both axes logarithmic.

    Returns:
        The figure as inline SVG.
    """
    with matplotlib.rc_context(_STYLE):
        fig, ax = _figure(_SQUARE)
        scale = _positive if log else (lambda values: values)
        if claimed is not None:
            ax.plot(scale(_array(claimed[0])), scale(1 - _array(claimed[1])), color=_BOUND, linewidth=1.6,
                    label=f"claimed f ({relation})")
        floor = 0.5  # half the smallest rate drawn: the log axes start there
        for i, attack in enumerate(attacks):
            colour = _COLOURS[(i + 1) % len(_COLOURS)]
            roc = attack.get("roc") or {}
            rates = _positive(np.concatenate([_array(roc.get("fpr")), _array(roc.get("tpr"))]))
            if np.isfinite(rates).any():
                floor = min(floor, float(np.nanmin(rates)) / 2)
            ax.plot(scale(_array(roc.get("fpr"))), scale(_array(roc.get("tpr"))), color=colour,
                    label=f"{attack_words(attack)} ROC",
                    drawstyle="steps-post" if log else "default")
            low_rates = (attack.get("tpr_at_fpr") or ()) if log else ()
            for row in low_rates:
                floor = min(floor, 0.5 / max(row["negatives"], 1), 0.5 / max(row["positives"], 1))
                ax.errorbar([row["fpr"]], [max(row["tpr"], 0.5 / max(row["positives"], 1))],
                            yerr=[[max(row["tpr"] - row["ci_low"], 0)], [max(row["ci_high"] - row["tpr"], 0)]],
                            marker="D", markersize=5, capsize=3, color=colour, linestyle="none",
                            label=f"{attack_words(attack)} TPR at FPR {number(100 * row['fpr'])} % (interval)")
            if not log:
                points = attack.get("points") or ()
                ax.plot(
                    _array([p["fpr_ub"] for p in points]),
                    1 - _array([p["fnr_ub"] for p in points]),
                    marker="s",
                    markersize=4,
                    linestyle="none",
                    color=colour,
                    markerfacecolor="none",
                    label=f"{attack_words(attack)} conservative points (upper bounds)",
                )
        if log:
            grid = np.geomspace(floor, 1.0, 50)
            ax.plot(grid, grid, color=_PRIOR, linewidth=0.8, linestyle=":", label="chance")
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlim(floor, 1)
            ax.set_ylim(floor, 1.05)
        else:
            ax.plot([0, 1], [0, 1], color=_PRIOR, linewidth=0.8, linestyle=":", label="chance")
            ax.set_xlim(0, 1)
            ax.set_ylim(0, 1)
        ax.set_xlabel("false-positive rate" + (" (log)" if log else ""))
        ax.set_ylabel("true-positive rate" + (" (log)" if log else ""))
        _legend_below(ax)
        kind = "log-log ROC curves" if log else "ROC curves"
        return _svg(fig, prefix, f"{kind} of the distinguishing game against the claimed trade-off")
