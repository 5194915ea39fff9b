"""The gate's Markdown summary for a CI job page (GitHub's ``$GITHUB_STEP_SUMMARY``, GitLab's job notes),
written beside the JUnit file: the verdict, every comparison closest to its limit first, and, with a
baseline, how each moved (docs/files.md, "The gate's outputs")."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fdp_audit.auditing.labels import UNITS, comparison_label, limit_source
from fdp_audit.auditing.regression import Change, Regression
from fdp_audit.auditing.sanity import SanityWarning, weak_pass
from fdp_audit.report.format import number, signed
from fdp_audit.report.summary import margin_key
from fdp_audit.report.terminal import judged_count


def _cell(text: str) -> str:
    """Table cell text: a pipe or a line break would end the cell or the row."""
    return text.replace("|", "\\|").replace("\n", " ")


def _status(row: dict[str, Any]) -> str:
    if row.get("violated") is None:
        return "not judged"
    return "**VIOLATION**" if row["violated"] else "pass"


def _signed(value: float | None) -> str:
    return number(None) if value is None else signed(value)


def gate_summary(verdict: dict[str, Any], judged: list[dict[str, Any]], comparisons: list[dict[str, Any]],
                 regression: Regression | None = None, warnings: Sequence[SanityWarning] = ()) -> str:
    """Markdown of one gate run; ``judged`` and ``comparisons`` are the gate's evaluations and their stored rows,
    in the same order; ``warnings`` the results' sanity warnings.

    Args:
        verdict: the gate's verdict (``status``, ``explanation``, ``alpha``, ``n_comparisons``).
        judged: the gate's evaluation of each comparison (its limit, margin, status).
        comparisons: the stored comparison rows, in the same order as ``judged``.
        regression: the comparison with a baseline, or None.
        warnings: the results' sanity warnings (a PASS with any is weak evidence).

    Returns:
        The markdown: heading with the verdict, explanation, warnings, one table row per comparison (largest
        margin first) and the baseline part; ends with a newline.
    """
    mark = "❌" if verdict["status"] == "VIOLATION" else "⚠️" if warnings and verdict["status"] == "PASS" else "✅"
    lines = [f"## fdp-audit gate: {weak_pass(verdict['status'], list(warnings))} {mark}", "",
             _cell(verdict["explanation"]), ""]
    if warnings:
        lines += ["**Sanity warnings** (a PASS with any of them is weak evidence):", "",
                  *(f"- {_cell(w.message)}" for w in warnings), ""]
    lines += [f"α = {number(verdict['alpha'])}, Bonferroni over {verdict['n_comparisons']} comparisons, "
              f"{judged_count(verdict)}; the margin is the lower confidence bound minus the limit, in the unit of its "
              "row (positive is a violation).", "",
              "| Comparison | Lower confidence bound | Limit (where it comes from) | Margin | Status |",
              "|---|---:|---|---:|---|"]
    rows = [stored | j for stored, j in zip(comparisons, judged, strict=True)]
    for row in sorted(rows, key=margin_key, reverse=True):
        unit = UNITS.get(str(row.get("kind")), "")
        lines.append(f"| {_cell(comparison_label(row))} | {unit} {number(row.get('observed'))} | "
                     f"{number(row.get('theoretical'))} ({_cell(limit_source(row))}) | {_signed(row.get('margin'))} | "
                     f"{_status(row)} |")
    if regression is not None:
        lines += ["", *regression_summary(regression)]
    return "\n".join(lines) + "\n"


def rise_words(change: Change, confidence: float) -> str:
    """A success rate's change since the baseline in words: the rates, their difference, and what the confidence
    bound on the rise shows (a rise not above 0 is not significant, whatever the difference of the rates).

    Args:
        change: one matched comparison's change.
        confidence: the confidence level of the rise's lower bound, 1 − α.

    Returns:
        One line of text.
    """
    measured = f"{change.label or change.id} {number(change.rate_before)} → {number(change.rate_now)}"
    if change.rate_before is not None and change.rate_now is not None:
        measured += f" ({signed(change.rate_now - change.rate_before)})"
    rise = change.rise_lower_bound
    if rise is None:
        return measured
    if rise > 0:
        return f"{measured}, a rise of at least {number(rise)} at confidence {number(confidence)}"
    return (f"{measured}, not a significant rise: at confidence {number(confidence)} the rise is only known to be "
            f"above {number(rise)}")


def regression_summary(regression: Regression) -> list[str]:
    """The baseline part: one row per matched comparison, worst change first.

    Args:
        regression: the comparison with the baseline.

    Returns:
        Markdown lines: a heading with the number regressed, the rule, the table, and notes on changed settings,
        new and gone comparisons.
    """
    if regression.tolerance is None:
        rule = "reported only (no `--max-regression` given)"
    else:
        rule = (f"a success rate that rose by more than {number(regression.tolerance)} at confidence "
                f"1 − α = {number(1 - regression.alpha)} fails the gate")
    worse = len(regression.regressed)
    lines = [f"### Since the baseline: {worse} regressed of {len(regression.changes)} matched", "",
             f"Rise = lower confidence bound of (rate now − rate before); {rule}.", "",
             "| Comparison | Margin before → now | Change | Rate before → now | Rise | ε lower bound before → now | |",
             "|---|---:|---:|---:|---:|---:|---|"]
    ordered = sorted(regression.changes, key=lambda c: margin_key({"margin": c.margin_change}), reverse=True)
    for c in ordered:
        rates = f"{number(c.rate_before)} → {number(c.rate_now)}" if c.rate_now is not None else ""
        eps = f"{number(c.epsilon_before)} → {number(c.epsilon_now)}" if c.kind == "epsilon" else ""
        rise = _signed(c.rise_lower_bound) if c.rise_lower_bound is not None else ""
        flag = "**REGRESSED**" if c.regressed else ""
        lines.append(f"| {_cell(c.label or c.id)} | {_signed(c.margin_before)} → {_signed(c.margin_now)} | "
                     f"{_signed(c.margin_change)} | {rates} | {rise} | {eps} | {flag} |")
    if regression.config_changes:
        lines += ["", "The baseline audited other settings (compared anyway, --allow-config-change): "
                  + "; ".join(_cell(change) for change in regression.config_changes)]
    if regression.mechanism_changes:
        lines += ["", "The accounted mechanism changed, so the bounds moved too: "
                  + "; ".join(_cell(change) for change in regression.mechanism_changes)]
    for label, ids in (("New since the baseline", regression.new), ("No longer compared", regression.gone)):
        if ids:
            lines += ["", f"{label} (ids): " + ", ".join(f"`{_cell(i)}`" for i in ids)]
    return lines
