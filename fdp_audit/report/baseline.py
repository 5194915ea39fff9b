"""The report's section on how leakage moved since a baseline audit (docs/statistics.md, "Regression against
a baseline"): per comparison, the margin and the ε lower bound before and now, and the lower confidence
bound of each success rate's rise."""

from __future__ import annotations

from typing import Any

from fdp_audit.auditing.regression import compare
from fdp_audit.report import texts
from fdp_audit.report.format import number, signed
from fdp_audit.report.model import Cell, Node, Section, Table
from fdp_audit.report.summary import margin_key


def _num(value: float | None, sign: bool = False) -> Cell:
    return Cell(number(None) if value is None else signed(value) if sign else number(value), {}, "num")


def baseline_section(results: dict[str, Any], baseline: dict[str, Any]) -> Section:
    """Both audits judged at the current verdict's α; rises reported, never judged here (the gate judges
    them with ``--max-regression``).

    Args:
        results: this audit's parsed results.json.
        baseline: the baseline audit's parsed results.json.

    Returns:
        The "Change since the baseline" section: facts on what changed between the audits, and one row per
        matched comparison (margins, rates, the rise's lower confidence bound, ε lower bounds), largest change of
        margin first.

    Raises:
        BadInputError: either file breaks the results.json contract.
    """
    alpha = Node(results)["verdict"]["alpha"].number()
    regression = compare(results, baseline, float(alpha))
    rows = []
    for change in sorted(regression.changes, key=lambda c: margin_key({"margin": c.margin_change}), reverse=True):
        rows.append([
            Cell(change.label or change.id),
            _num(change.margin_before, sign=True),
            _num(change.margin_now, sign=True),
            _num(change.margin_change, sign=True),
            Cell(f"{number(change.rate_before)} → {number(change.rate_now)}" if change.kind == "rate"
                 else number(None), {}, "num"),
            _num(change.rise_lower_bound, sign=True),
            Cell(f"{number(change.epsilon_before)} → {number(change.epsilon_now)}" if change.kind == "epsilon"
                 else number(None), {}, "num"),
        ])
    created = Node(baseline).present("created")
    section = Section("baseline", "Change since the baseline", texts.BASELINE)
    section.facts.append(("baseline audit created", Cell(created.text() if created else number(None))))
    section.facts.append(("comparisons matched", Cell(str(len(regression.changes)), {}, "num")))
    if regression.config_changes:
        section.facts.append(("baseline audited other settings (its rates measure something else)",
                              Cell("; ".join(regression.config_changes))))
    if regression.mechanism_changes:
        section.facts.append(("accounted mechanism changed (bounds moved too)",
                              Cell("; ".join(regression.mechanism_changes))))
    for label, ids in (("new since the baseline", regression.new), ("no longer compared", regression.gone)):
        if ids:
            section.facts.append((label, Cell(", ".join(ids))))
    columns = ("Comparison", "Margin before", "Margin now", "Change", "Rate before → now",
               "Rise (lower conf. bound)", "ε lower bound before → now")
    section.tables.append(Table("baseline-table", columns, rows, caption="Largest change of margin first"))
    return section
