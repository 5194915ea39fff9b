"""The report's banner (docs/files.md, "The report"): the verdict, and on the same first screen what was audited —
the mechanism, the data and its protected attributes, the claimed ε with its relation and δ, the trials judged of
those played, the games — and, per unit, the comparison closest to its limit. Every value shown is a stored one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fdp_audit.accounting.events import Relation
from fdp_audit.auditing.labels import game_title
from fdp_audit.report import texts
from fdp_audit.report.format import number
from fdp_audit.report.model import Cell, Node, num, text
from fdp_audit.report.summary import Summary


@dataclass(frozen=True)
class Verdict:
    """The report's banner (module docstring): the verdict and, on the first screen, what was audited.

    Attributes:
        status: ``PASS``, ``VIOLATION`` or ``INFORMATIONAL``.
        explanation: the verdict's explanation.
        alpha: the gate's significance level α.
        judged: the comparisons judged of those made, e.g. ``10 of 10``.
        closest: per unit, the comparison closest to its limit (furthest over it when violated), as
            (heading, margin · label).
        audited: what was audited, as (heading, value): mechanism, data and protected attributes, claimed ε with its
            relation and δ, trials, games.
        help: the plain-language help shown with it.
    """

    status: str
    explanation: Cell
    alpha: Cell
    judged: Cell  # "10 of 10": the comparisons judged of those made
    closest: list[tuple[str, Cell]]  # ("closest, success rate", margin · label), one per unit
    audited: list[tuple[str, Cell]] = field(default_factory=list)
    help: texts.Help = texts.VERDICT


def verdict_view(root: Node, summary: Summary | None) -> Verdict:
    """The banner of results.json ``root`` (its verdict checked against the contract), with the per-unit closest
    comparisons of ``summary`` (the gate's evaluation).

    Args:
        root: the results.json root node.
        summary: the report's summary of the comparisons, or None (then the stored worst margin is shown).

    Returns:
        The banner's view: status, explanation, α, comparisons judged of those made, the closest comparison per
        unit, and what was audited.

    Raises:
        BadInputError: the verdict, mechanism or reproducibility section breaks the contract.
    """
    node = root["verdict"]
    total, not_judged = node["n_comparisons"], node.present("not_judged")
    counted = total.number()
    missing = len(not_judged.sequence()) if not_judged else 0
    judged = Cell(f"{counted - missing} of {number(counted)}", {total.pointer: total.value}, "num")
    return Verdict(status=node["status"].choice("PASS", "VIOLATION", "INFORMATIONAL"),
                   explanation=text(node["explanation"]), alpha=num(node["alpha"]), judged=judged,
                   closest=_closest(node, summary), audited=_audited(root))


def _closest(node: Node, summary: Summary | None) -> list[tuple[str, Cell]]:
    """Per unit (success rate, ε, one-run guesses), the judged comparison closest to its limit (when violated,
    furthest over it): its margin and label. The stored worst margin is the one of these in its unit; margins of
    different units are never put side by side as one number."""
    worst, where = node["worst_margin"], node["worst_comparison"]
    worst.number(nullable=True)
    if summary is None or not summary.closest:
        shown = "" if worst.value is None else f"{number(worst.value)} · {where.value}"
        words = "furthest over its limit" if node["status"].value == "VIOLATION" else "closest to its limit"
        return [(words, Cell(shown or number(None), {worst.pointer: worst.value,
                                                                      where.pointer: where.value}))]
    found = []
    for closest in summary.closest:
        stored = {worst.pointer: worst.value, where.pointer: where.value} if closest.id == where.value else {}
        words = "furthest over its limit" if closest.violated else "closest to its limit"
        found.append((f"{words} ({closest.unit})",
                      Cell(f"{closest.margin} · {closest.label}", stored, "closest")))
    return found


def _audited(root: Node) -> list[tuple[str, Cell]]:
    """What was audited, in the words of the stored sections; facts whose sections are absent are left out."""
    facts = []
    mechanism = root["mechanism"]
    shown = [mechanism["name"]] + [mechanism[key] for key in ("noise_multiplier", "sample_rate", "steps")
                                   if mechanism.present(key)]
    words = mechanism["name"].text()
    parameters = [f"{symbol} {number(mechanism[key].value)}" for key, symbol in
                  (("noise_multiplier", "z"), ("sample_rate", "p"), ("steps", "T")) if mechanism.present(key)]
    if parameters:
        words += " (" + ", ".join(parameters) + ")"
    facts.append(("mechanism", Cell(words, {n.pointer: n.value for n in shown})))
    reproducibility = root["reproducibility"]
    config = reproducibility.present("config")
    data = config.present("data") if config else None
    dataset = reproducibility.present("dataset") or (data.present("dataset") if data else None)
    if dataset:
        facts.append(("data", text(dataset)))
    if data:
        protected = data.present("protected")
        names = [item.text() for item in protected.elements()] if protected else []
        public_map = data.present("public_map")
        if names:
            facts.append(("protected", Cell(", ".join(names), {protected.pointer: protected.value})))
        elif public_map and public_map.value != "columns":
            facts.append(("protected", Cell(f"what Ψ ({public_map.text()}) does not show of each image",
                                            {public_map.pointer: public_map.value})))
    facts += _claim(root, mechanism)
    trials = _trials(root)
    if trials is not None:
        facts.append(("trials", trials))
    one_run = root.present("one_run")
    canaries = one_run.present("canaries") if one_run else None
    if canaries is not None:
        facts.append(("canaries", Cell(f"{number(canaries.value)} in one training",
                                       {canaries.pointer: canaries.value})))
    comparisons = root.present("comparisons")
    if comparisons:
        games = list(dict.fromkeys(game_title(row.value) for row in comparisons.elements()
                                   if isinstance(row.value, dict)))
        facts.append(("games", Cell("; ".join(games))))
    return facts


def _claim(root: Node, mechanism: Node) -> list[tuple[str, Cell]]:
    """The claimed ε under each relation the games judge, at the mechanism's δ."""
    delta = mechanism.present("delta")
    if delta is None:
        return []
    parts, fields = [], {delta.pointer: delta.value}
    accounting = root.present("accounting")
    key = f"{delta.number():g}"
    for table, relation in (("epsilon", "add/remove"), ("epsilon_replace", "replace-one")):
        values = accounting.present(table) if accounting else None
        value = values.present(key) if values else None
        if value is None and table == "epsilon":
            value = mechanism.present("epsilon")
        if value is not None:
            parts.append(f"ε = {number(value.number())} ({relation})")
            fields[value.pointer] = value.value
    one_run = root.present("one_run")
    claimed = one_run.present("claimed_epsilon") if one_run else None
    relation = one_run.present("claim_parameters") if one_run else None
    relation = relation.present("relation") if relation else None
    if claimed is not None and relation is not None and relation.value == Relation.REPLACE and len(parts) < 2:
        parts.append(f"ε = {number(claimed.number())} (replace-one, the one-run audit's claim)")
        fields |= {claimed.pointer: claimed.value, relation.pointer: relation.value}
    if not parts:
        return []
    return [("claimed", Cell(f"{', '.join(parts)} at δ = {number(delta.number())}", fields))]


def _trials(root: Node) -> Cell | None:
    """``128 of 256 (success rates), 192 of 256 (ε tests)``: each kind of comparison's judged trials beside the
    trials played per game (a success rate is judged on the half its decision rule was not fitted on, an ε test
    on the three quarters its threshold was not chosen on)."""
    reproducibility = root["reproducibility"]
    played = reproducibility.present("trials")
    comparisons = root.present("comparisons")
    if played is None or comparisons is None:
        return None
    judged: dict[str, set[int]] = {}
    for row in comparisons.elements():
        value = row.value if isinstance(row.value, dict) else {}
        if value.get("kind") == "rate" and isinstance(value.get("trials"), int):
            judged.setdefault("success rates", set()).add(value["trials"])
        elif value.get("kind") == "epsilon":
            count = value.get("negatives", 0) + value.get("positives", 0)
            judged.setdefault("ε tests", set()).add(count)
    parts = [f"{'/'.join(str(n) for n in sorted(counts))} of {number(played.value)} judged ({kind})"
             for kind, counts in judged.items()]
    return Cell("; ".join(parts), {played.pointer: played.value}) if parts else None
