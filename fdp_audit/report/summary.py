"""The report's summary (docs/files.md, "The report"): every comparison the gate judged, closest to its
limit first, in one chart, then what the audit tested and what its verdict does and does not show.

The rows are the gate's own evaluation (:func:`fdp_audit.auditing.gate.judge`) of the stored comparisons at the
verdict's α, so the chart shows exactly the numbers the verdict was decided on, for every comparison
kind the gate knows, including those no section of this report lays out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from matplotlib.ticker import MaxNLocator

from attacks.base import FINAL_MODEL  # threat models that see only the final model: the weakest evidence
from fdp_audit.auditing.gate import judge
from fdp_audit.auditing.labels import UNITS, attack_name, comparison_label, game_title, limit_source
from fdp_audit.errors import BadInputError
from fdp_audit.report.format import number, signed
from fdp_audit.report.model import Node

# the gate's assumption-free ε beside the family ε of an epsilon comparison
EPSILON_ASSUMPTION_FREE = "epsilon_lower_bound_cp"


@dataclass(frozen=True)
class Mark:
    """One drawn element of a chart row: a position (percent of the track) and what it stands for."""

    css: str
    left: float
    width: float = 0.0
    title: str = ""


@dataclass(frozen=True)
class ChartRow:
    """One comparison as a row of the summary chart.

    Attributes:
        id: the comparison's id in ``results.json``.
        game: the game's title.
        attack: the attack's name.
        status: ``violation``, ``pass`` or ``not judged``.
        margin: the margin in words (lower confidence bound minus the limit, or ε lower bound against the claimed ε).
        numbers: the row's numbers in words: what the marks show.
        meaning: what the row's outcome means, at confidence 1 − α/m.
        note: why a PASS whose point estimate is above its bound is still a PASS; empty otherwise.
        marks: the drawn elements (points, intervals, the limit) on the row's track.
    """

    id: str
    game: str
    attack: str
    status: str  # "violation", "pass" or "not judged"
    margin: str
    numbers: str  # the row's numbers in words: what the marks show
    meaning: str
    note: str  # why a PASS whose point estimate is above its bound is still a PASS
    marks: list[Mark]


@dataclass(frozen=True)
class Panel:
    """One panel of the summary chart: the comparisons of one unit on one scale.

    Attributes:
        id: the panel's HTML id.
        title: its heading.
        unit: what its rows measure: ``success rate``, ``ε`` or ``observed value``.
        rows: its rows.
        ticks: the axis ticks as (percent of the track, label).
    """

    id: str
    title: str
    unit: str
    rows: list[ChartRow]
    ticks: list[tuple[float, str]]  # (percent of the track, label)


@dataclass(frozen=True)
class Closest:
    """The judged comparison closest to its limit among those of one unit: margins in different units are never
    compared with each other."""

    unit: str
    margin: str
    label: str
    id: str
    violated: bool = False  # then it is the furthest over its limit


@dataclass
class Summary:
    """The report's summary (module docstring): every comparison against its limit, then what the audit tested and
    what its verdict does and does not show.

    Attributes:
        panels: the chart's panels, one per unit.
        failing: the rows that are violations.
        tested: what the audit tested, in words.
        shows: what the verdict shows, in words.
        caveats: what it does not show.
        assumption_free: some ε row also shows the Clopper–Pearson ε (a hollow point).
        closest: per unit, in the order of ``UNITS``, the judged comparison closest to its limit.
    """

    panels: list[Panel]
    failing: list[ChartRow]
    tested: str
    shows: str
    caveats: list[str] = field(default_factory=list)
    assumption_free: bool = False  # some ε row also shows the Clopper–Pearson ε (a hollow point)
    closest: list[Closest] = field(default_factory=list)  # per unit, in the order of UNITS


def _scale(values: list[float], floor: float | None = None) -> tuple[float, float]:
    lo, hi = min(values), max(values)
    pad = max((hi - lo) * 0.06, 1e-3)
    lo, hi = lo - pad, hi + pad
    if floor is not None:
        lo = max(lo, floor)
    return lo, hi


def _position(value: float, lo: float, hi: float) -> float:
    return round(100 * min(max((value - lo) / (hi - lo), 0.0), 1.0), 2)


def _ticks(lo: float, hi: float) -> list[tuple[float, str]]:
    return [(_position(t, lo, hi), number(float(t))) for t in MaxNLocator(nbins=5).tick_values(lo, hi) if lo <= t <= hi]


def _status(row: dict[str, Any]) -> str:
    violated = row.get("violated")
    if violated is None or row.get("judged") is False:
        return "not judged"
    return "violation" if violated else "pass"


def _judged_of(row: dict[str, Any], total: int | None) -> str:
    """``72 of 128 judged trials, 256 played``: a rate's successes over the trials it was judged on, and the
    game's trials beside them when the judged ones are fewer."""
    played = f", {total} played" if isinstance(total, int) and total != row.get("trials") else ""
    return f"{row.get('successes', '?')} of {row.get('trials', '?')} judged trials{played}"


def _rate_row(row: dict[str, Any], lo: float, hi: float, alpha: float, m: int, total: int | None) -> ChartRow:
    rate, low, high, lower, bound = row["rate"], row["ci_low"], row["ci_high"], row["lower_bound"], row["bound"]
    status = _status(row)
    label = "within ρ = " + number(row["rho"]) if row.get("rho") is not None else "success"
    numbers = (f"{label} {number(rate)} ({_judged_of(row, total)}), interval [{number(low)}, {number(high)}], lower "
               f"confidence bound {number(lower)} against its limit {number(bound)} ({limit_source(row)}; prior Ball "
               f"{number(row.get('ball'))})")
    note = _not_judged_note(row) if status == "not judged" else ""
    if status == "pass" and rate > bound:
        note = (f"PASS although the rate {number(rate)} is above its limit {number(bound)}: its lower confidence "
                f"bound {number(lower)} is not, so at level α/m = {number(alpha / m)} the excess can be chance.")
    what = ("reconstructions land within ρ of the true protected features" if row.get("rho") is not None
            else "the attack guesses the protected attribute correctly")
    meaning = (f"At confidence 1 − α/m, {what} more often than the claimed guarantee allows: the training leaks more "
               "than its privacy accounting says.")
    marks = [Mark("interval", _position(low, lo, hi), _position(high, lo, hi) - _position(low, lo, hi),
                  f"interval [{number(low)}, {number(high)}]"),
             Mark("lower", _position(lower, lo, hi), title=f"lower confidence bound {number(lower)}"),
             Mark("point", _position(rate, lo, hi), title=f"rate {number(rate)}"),
             Mark("bound", _position(bound, lo, hi), title=f"limit {number(bound)} ({limit_source(row)})")]
    if row.get("ball") is not None:
        marks.insert(0, Mark("prior", _position(row["ball"], lo, hi), title=f"prior Ball {number(row['ball'])}"))
    return ChartRow(row["id"], game_title(row), attack_name(row), status, signed(row["margin"]), numbers, meaning,
                    note, marks)


def _not_judged_note(row: dict[str, Any]) -> str:
    needed = row.get("trials_needed")
    return ("not judged: even a perfect attack could not fail this comparison at these trials"
            + (f" (it needs at least {needed})" if isinstance(needed, int) else ""))


def _epsilon_row(row: dict[str, Any], lo: float, hi: float) -> ChartRow:
    """An ε comparison: the ε lower bound the gate reports (in the claimed mechanism's family when the gate
    gives one) as the point, the assumption-free Clopper–Pearson ε (when given beside it) as a hollow point."""
    found, claimed = row["epsilon_lower_bound"], row.get("theoretical")
    limit = claimed if claimed is not None and math.isfinite(claimed) else None
    status = _status(row)
    family = row.get("epsilon_family")
    numbers = (f"ε lower bound {number(found)}" + (f" (assuming the mechanism's family: {family})" if family else "")
               + f" against the claimed ε {number(limit)} ({limit_source(row)}), from the errors of "
               f"{row.get('negatives', 0) + row.get('positives', 0)} judged trials")
    marks = [Mark("point", _position(found, lo, hi), title=f"ε lower bound {number(found)}")]
    clopper_pearson = row.get(EPSILON_ASSUMPTION_FREE)
    if clopper_pearson is not None:
        numbers += f", assumption-free (Clopper–Pearson) ε {number(clopper_pearson)}"
        marks.append(Mark("point-alt", _position(clopper_pearson, lo, hi),
                          title=f"Clopper–Pearson ε {number(clopper_pearson)}"))
    if row.get("curve_p_value") is not None:
        numbers += f"; joint test of the claimed curve p = {number(row['curve_p_value'])}"
        meaning = ("At confidence 1 − α/m the attack's error rates lie below the claimed trade-off curve f: no "
                   "mechanism with the claimed guarantee could produce them, so the training leaks more than its "
                   "privacy accounting says.")
    else:
        meaning = (f"The attack's error rates prove, at confidence 1 − α/m, a privacy loss of at least ε = "
                   f"{number(found)} at the mechanism's δ, more than the claimed ε = {number(limit)}.")
    if limit is not None:
        marks.append(Mark("bound", _position(limit, lo, hi), title=f"claimed ε {number(limit)}"))
    margin = signed(row["margin"]) if row.get("margin") is not None and math.isfinite(row["margin"]) else number(None)
    note = _not_judged_note(row) if status == "not judged" else ""
    return ChartRow(row["id"], game_title(row), attack_name(row), status, margin, numbers, meaning, note, marks)


def _margin_words(row: dict[str, Any]) -> str:
    """A margin as the banner shows it: an ε test's as its lower bound against the claimed ε (a negative margin
    read as a negative ε), any other's signed."""
    if row.get("kind") == "epsilon" and row.get("epsilon_lower_bound") is not None:
        return f"ε lower bound {number(row['epsilon_lower_bound'])} vs claimed {number(row.get('theoretical'))}"
    return signed(row["margin"])


def judged_comparisons(results: dict[str, Any]) -> tuple[float, list[dict[str, Any]]]:
    """The gate's evaluation of every stored comparison at the verdict's α, each merged with its stored
    description (game, attack, threat model, trials); bad input names its field.

    Args:
        results: the parsed results.json.

    Returns:
        ``(alpha, rows)``: the verdict's α and one merged dict per stored comparison, in stored order (the
        evaluation's values override stored ones; stored lists and objects are left out).

    Raises:
        BadInputError: the verdict's α or a comparison breaks the contract.
    """
    alpha = Node(results)["verdict"]["alpha"].number()
    comparisons = results.get("comparisons") or []
    _, judged = judge(comparisons, float(alpha))
    merged = []
    for stored, evaluation in zip(comparisons, judged, strict=True):
        described = {key: value for key, value in stored.items() if not isinstance(value, list | dict)}
        merged.append(described | {key: value for key, value in evaluation.items() if key != "points"})
    return float(alpha), merged


def margin_key(row: dict[str, Any]) -> float:
    """Sort key: a comparison's margin, with a missing or infinite one (nothing to reach) last.

    Args:
        row: a comparison row (its ``margin``).

    Returns:
        The margin, or -inf when it is missing, not a number or not finite.
    """
    margin = row.get("margin")
    return margin if isinstance(margin, int | float) and math.isfinite(margin) else -math.inf


def _observed_row(row: dict[str, Any], lo: float, hi: float) -> ChartRow:
    """A comparison of another kind (a one-run audit's guess count, or a kind newer than this report): the
    gate's observed value against its limit, and what a violation of that kind means."""
    observed, limit = row.get("observed"), row.get("theoretical")
    status = _status(row)
    game, attack = game_title(row), attack_name(row)
    if row.get("kind") == "one_run":
        numbers = (f"{row.get('correct')} correct of {row.get('guesses')} guesses among {row.get('canaries', '?')} "
                   f"canaries: precision {number(observed)} against the {number(limit)} the claimed curve allows")
        meaning = ("At confidence 1 − α/m these guesses are more accurate than the claimed trade-off curve f allows: "
                   "the training leaks more than its privacy accounting says.")
    else:
        numbers = f"observed {number(observed)} against the limit {number(limit)}"
        meaning = "The observed value exceeds what the claimed guarantee allows at confidence 1 − α/m."
    marks = [Mark("point", _position(observed, lo, hi), title=f"observed {number(observed)}")]
    if isinstance(limit, int | float) and math.isfinite(limit):
        marks.append(Mark("bound", _position(limit, lo, hi), title=f"limit {number(limit)}"))
    margin = signed(row["margin"]) if isinstance(row.get("margin"), int | float) and math.isfinite(row["margin"]) \
        else number(None)
    note = _not_judged_note(row) if status == "not judged" else ""
    return ChartRow(row["id"], game, attack, status, margin, numbers, meaning, note, marks)


def build_summary(results: dict[str, Any]) -> Summary | None:
    """The summary chart and text; None when results.json holds no comparisons to chart.

    Args:
        results: the parsed results.json.

    Returns:
        The summary: one panel per unit (success rate, ε, other), the failing rows, the plain-words account and
        the closest comparison per unit; or None.

    Raises:
        BadInputError: a comparison breaks the contract (the field is named, or ``comparisons``).
    """
    if not results.get("comparisons"):
        return None
    try:
        alpha, rows = judged_comparisons(results)
    except BadInputError as err:  # the contract error names its field; the report names the section too
        raise BadInputError(str(err), err.field or "comparisons") from None
    m = len(rows)
    rows.sort(key=margin_key, reverse=True)
    rate = [r for r in rows if r.get("kind") == "rate"]
    epsilon = [r for r in rows if r.get("kind") == "epsilon"]
    reproducibility = results.get("reproducibility")
    total = reproducibility.get("trials") if isinstance(reproducibility, dict) else None
    panels = []
    if rate:
        lo, hi = _scale([v for r in rate for v in (r["ci_low"], r["ci_high"], r["bound"], r.get("ball") or r["bound"])])
        panels.append(Panel("summary-rate", "Success rate against its limit", "success rate",
                            [_rate_row(r, lo, hi, alpha, m, total) for r in rate], _ticks(lo, hi)))
    if epsilon:
        values = [v for r in epsilon for v in (r["epsilon_lower_bound"], r.get("theoretical"),
                                              r.get(EPSILON_ASSUMPTION_FREE))
                  if isinstance(v, int | float) and math.isfinite(v)]
        lo, hi = _scale(values + [0.0], floor=0.0)
        panels.append(Panel("summary-epsilon", "ε lower bound against the claimed ε", "ε",
                            [_epsilon_row(r, lo, hi) for r in epsilon], _ticks(lo, hi)))
    other = [r for r in rows if r.get("kind") not in ("rate", "epsilon")
             and isinstance(r.get("observed"), int | float) and math.isfinite(r["observed"])]
    if other:
        values = [v for r in other for v in (r["observed"], r.get("theoretical"))
                  if isinstance(v, int | float) and math.isfinite(v)]
        lo, hi = _scale(values)
        title = ("Precision of the one-run guesses against what the claim allows"
                 if all(r.get("kind") == "one_run" for r in other) else "Other comparisons against their limits")
        panels.append(Panel("summary-other", title, "observed value", [_observed_row(r, lo, hi) for r in other],
                            _ticks(lo, hi)))
    # the panel holding a violation comes first (within a panel, rows are closest to their limit first)
    panels.sort(key=lambda panel: not any(row.status == "violation" for row in panel.rows))
    failing = [row for panel in panels for row in panel.rows if row.status == "violation"]
    tested, shows, caveats = _plain_words(results, rows, alpha, bool(failing))
    assumption_free = any(r.get(EPSILON_ASSUMPTION_FREE) is not None for r in epsilon)
    closest = [Closest(UNITS[kind], _margin_words(row), comparison_label(row), row["id"],
                       bool(row.get("violated"))) for kind in UNITS
               for row in [next((r for r in rows if r.get("kind") == kind and _status(r) != "not judged"
                                 and math.isfinite(margin_key(r))), None)] if row is not None]
    return Summary(panels, failing, tested, shows, caveats, assumption_free, closest)


def _trial_words(rows: list[dict[str, Any]], played: int) -> str:
    """``64 trials played per game: success rates 32 judged (the other 32 choose the attack)``: the trials a kind
    of comparison is judged on, named once beside those played, as the tables count them (a success rate is judged
    on the trials its decision rule was not fitted on, an ε test on those its threshold was not chosen on).

    Args:
        rows: The judged comparisons.
        played: The trials each game played.

    Returns:
        The words, without brackets.
    """
    judged: dict[str, set[int]] = {}
    for row in rows:
        if row.get("kind") == "rate" and isinstance(row.get("trials"), int):
            judged.setdefault("success rates", set()).add(row["trials"])
        elif row.get("kind") == "epsilon":
            judged.setdefault("ε tests", set()).add(row.get("negatives", 0) + row.get("positives", 0))
    chooses = {"success rates": "the attack", "ε tests": "the threshold"}
    parts = []
    for kind, counts in judged.items():
        if len(counts) == 1 and 0 < played - min(counts) < played:
            (count,) = counts
            parts.append(f"{kind} {count} judged (the other {played - count} choose {chooses[kind]})")
        else:
            parts.append(f"{kind} {'/'.join(str(n) for n in sorted(counts))} judged")
    return f"{played} trials played per game" + (": " + ", ".join(parts) if parts else "")


def _plain_words(results: dict[str, Any], rows: list[dict[str, Any]], alpha: float,
                 violated: bool) -> tuple[str, str, list[str]]:
    games: list[str] = []
    for row in rows:
        name = game_title(row)
        if name not in games:
            games.append(name)
    reproducibility = results.get("reproducibility")
    total = reproducibility.get("trials") if isinstance(reproducibility, dict) else None
    played = isinstance(total, int) and any(row.get("kind") != "one_run" for row in rows)
    listed = "; ".join(games) + (f" ({_trial_words(rows, total)})" if played else "")
    threat = {str(r.get("threat_model")) for r in rows if r.get("threat_model")}
    tested = (f"{len(rows)} comparisons of an attack against what the claimed privacy allows, from: {listed}. "
              f"Each is judged at confidence 1 − α/m with α = {number(alpha)} and m = {len(rows)} "
              "(Bonferroni), so the chance of a false VIOLATION anywhere on this page is at most α.")
    if violated:
        shows = ("VIOLATION: at least one attack beats its limit by more than chance explains, so the mechanism, its "
                 "implementation or its privacy accounting leaks more than claimed (or the claimed parameters are not "
                 "those of the training run). It does not say that the other comparisons are safe, nor how much more "
                 "an optimal attacker would learn.")
    else:
        shows = ("PASS: no attack here beats its limit by more than chance explains. This is evidence, not proof, of "
                 "privacy: an audit can find leakage but never show its absence, and a stronger attack, other "
                 "canaries or another threat model may still beat the bound.")
    caveats = []
    if threat and threat <= FINAL_MODEL | {"prior"}:
        caveats.append("Every attack here sees only the final model; such attacks usually stay far below the bound "
                       "even for a broken mechanism, so a PASS from them alone is weak evidence.")
    elif "iterates" in threat:
        caveats.append("The strongest evidence here comes from the attacks that observe every noisy update "
                       "(threat model: iterates), which is the adversary the accounting assumes.")
    one_run = results.get("one_run")
    # a one-run audit of weights is the verdict (its comparisons are judged in it); beside the games it is not
    judged_here = any(isinstance(c, dict) and c.get("kind") == "one_run" for c in results.get("comparisons") or ())
    if isinstance(one_run, dict) and one_run.get("status") and not judged_here:
        caveats.append(f"The one-run audit below is judged on its own, not in this verdict: {one_run['status']} "
                       f"({one_run.get('explanation', '')}).")
    epsilon_found = [r["epsilon_lower_bound"] for r in rows if r.get("kind") == "epsilon"]
    if epsilon_found and not any(epsilon_found):
        caveats.append("Every ε lower bound is 0: with this many trials the distinguishing attacks' error rates "
                       "cannot rule out ε = 0, so those comparisons say little either way.")
    return tested, shows, caveats
