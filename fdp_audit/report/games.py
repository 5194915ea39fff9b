"""The game sections of the report (docs/statistics.md, docs/games.md, docs/files.md): attribute inference on record
and on gradient canaries, reconstruction, and the distinguishing and simulator games, each a table of stored results
plus its plot. Which layout draws a section, and its title and lead, come from the registered game that writes it
(:func:`fdp_audit.auditing.games.report_view`); the explanation of a kind is shown once.

A game that is not registered (a newer results.json), or whose layout is ``table``, is shown by :func:`_other_game`:
its scalar facts and one row per attack, so nothing judged disappears from the page.
"""

from __future__ import annotations

import re

from markupsafe import Markup

from fdp_audit.accounting.events import RELATIONS, Relation
from fdp_audit.auditing.games import ReportView, report_view
from fdp_audit.auditing.labels import attack_words, section_limit_source
from fdp_audit.report import figures, texts
from fdp_audit.report.format import interval, number, signed
from fdp_audit.report.generative import panels_svg
from fdp_audit.report.model import (
    Cell,
    FigureView,
    Node,
    Section,
    Table,
    num,
    numbers,
    scalar,
    span,
    status,
    text,
    threat_cell,
    worded,
)
from fdp_audit.report.svg import inline_svg

SECRET, RIGHT, WRONG = "#c2410c", "#15803d", "#b91c1c"  # frames of the example canaries
PANEL_PIXELS = 104  # an example canary's panel in the report: at least 96 px on any screen
# more rows than this are detail: folded into <details>, the figure carries the picture
_LONG_TABLE = 8


def section_view(game: Node) -> ReportView | None:
    """The registered view of a stored game section (None: no game registered here writes it).

    Args:
        game: a game section of results.json (its ``game`` and optional ``canary``).

    Returns:
        The game's report view (title, lead, layout), or None.

    Raises:
        BadInputError: ``game`` is missing or not a string.
    """
    canary = game.present("canary")
    return report_view(game["game"].text(), canary.text() if canary else None)


def game_sections(games: list[Node], accounting: Node | None) -> dict[str, list[Section]]:
    """One section per game, grouped by kind in the report's reading order (``other``: games laid out as a
    table of their facts).

    Args:
        games: the game sections of results.json, in stored order.
        accounting: results.json's ``accounting`` section (the claimed curves of the ROC figures), or None.

    Returns:
        ``attribute``, ``reconstruction``, ``distinguishing`` and ``other`` → their sections, each numbered by its
        game's occurrence.

    Raises:
        BadInputError: a game section breaks the results.json contract.
    """
    by_kind: dict[str, list[Section]] = {"attribute": [], "reconstruction": [], "distinguishing": [], "other": []}
    seen: dict[str, int] = {}
    for game in games:
        kind = game["game"].text()
        index = seen[kind] = seen.get(kind, -1) + 1
        view = section_view(game)
        section_id = _numbered(kind.replace("_", "-"), index)
        if view is None or view.layout == "table":
            by_kind["other"].append(_other_game(game, kind, index, view))
        elif view.layout == "attribute":
            by_kind["attribute"].append(_attribute_section(game, section_id, view.title, view.lead))
        elif view.layout == "image":
            by_kind["attribute"].append(_image_game(game, section_id, view))
        elif view.layout == "reconstruction":
            by_kind["reconstruction"].append(_reconstruction(game, section_id, view))
        else:
            by_kind["distinguishing"].append(_distinguishing(game, section_id, view, accounting))
    return by_kind


def _numbered(base: str, index: int) -> str:
    return base if index == 0 else f"{base}-{index + 1}"


def _rate_cells(row: Node) -> list:
    """A judged success rate against Theorem 4: successes, rate, interval, lower bound, Ball, bound, margin."""
    return [num(row["successes"]), num(row["rate"]), span(row["ci_low"], row["ci_high"]), num(row["lower_bound"]),
            num(row["ball"]), num(row["bound"]), num(row["margin"], signed)]


def _rate_status(row: Node) -> Cell:
    """The status cell; a PASS whose point estimate is above its bound says, in the row, why it passes."""
    cell = status(row["status"])
    rate, bound, lower = row["rate"].number(), row["bound"].number(), row["lower_bound"].number()
    if cell.text == "pass" and rate > bound:
        note = (f"rate above the limit, but its lower confidence bound {number(lower)} is not: "
                "the excess is within chance")
        cell = Cell(cell.text, cell.fields, cell.css, note)
    return cell


def attack_cell(attack: Node) -> Cell:
    """An attack of a stored game section shown by its registered title
    (:func:`~fdp_audit.auditing.labels.attack_words`), its name kept in the cell's fields.

    Args:
        attack: the stored attack row (its ``attack`` name).

    Returns:
        The cell.
    """
    return worded(attack["attack"], attack_words(attack.value))



def _attribute_section(game: Node, section_id: str, title: str, lead: str) -> Section:
    """A categorical game's success table: each attack's rate against Theorem 4's bound at the prior's Ball."""
    rows = []
    attacks = game["attacks"]
    for attack in attacks.elements():
        rows.append(
            [
                attack_cell(attack),
                threat_cell(attack["threat_model"]),
                num(attack["trials"]),
                *_rate_cells(attack),
                num(attack["tightness"], nullable=True),
                _rate_status(attack),
            ]
        )
    prior = game.present("prior")
    facts = [("trials played", num(game["trials"]))]
    facts += [("prior Pr[v | Ψ(x)]", numbers(prior))] if prior else []
    facts += [("Ball (prior success)", num(game["ball"])),
              (f"limit ({section_limit_source(game.value)})", num(game["bound"]))]
    return Section(
        section_id,
        title,
        texts.ATTRIBUTE,
        lead=lead,
        facts=facts,
        tables=[
            Table(
                f"{section_id}-attacks",
                (
                    "Attack",
                    "Threat model",
                    "Judged trials",
                    "Successes",
                    "Rate",
                    "Interval",
                    "Lower conf. bound",
                    "Ball",
                    "Limit",
                    "Margin",
                    "Tightness",
                    "Status",
                ),
                rows,
            )
        ],
    )


def _image_game(game: Node, section_id: str, view: ReportView) -> Section:
    """An image game: the attribute layout (argmax successes over every trial against 1 − f(Ball)), the
    Bayes-optimal success where the game states it, and its example canaries drawn as inline SVG."""
    section = _attribute_section(game, section_id, view.title, view.lead)
    optimal = game.present("optimal_success")
    if optimal is not None:
        section.facts.append(("Bayes-optimal success (known p and σ)", num(optimal)))
    examples = game.present("examples")
    if examples is not None:
        figure_id = f"fig-{section.id}"
        first = examples["trials"].get(0)
        attacks = ", ".join(name for name, _ in first["picks"].items()) if first is not None else "none"
        section.figures.append(FigureView(figure_id, examples_view(examples, figure_id),
                                          texts.IMAGE_EXAMPLES_CAPTION.format(attacks=attacks)))
    return section


def examples_view(examples: Node, figure_id: str) -> Markup:
    """An image game's example canaries for the report: per example trial, a row of labelled panels (the public
    image, each candidate with the secret framed, each attack's pick framed by whether it is right), each panel
    its own inline SVG shown at :data:`PANEL_PIXELS` or more, so that a row wraps on a narrow screen instead of
    shrinking its images.

    Args:
        examples: the game section's ``examples`` (image shape, ``public``, ``candidates``, ``trials``).
        figure_id: the id prefix of the panels in the page.

    Returns:
        The examples' HTML.

    Raises:
        BadInputError: the examples break the contract (a pixel list of the wrong size, a candidate index out of
            range).
    """
    shape = _image_shape(examples)
    candidates = list(examples["candidates"].elements())

    def panel(pixels: Node, caption: str, colour: str | None, where: str) -> Markup:
        label = f"{caption} ({where})"
        svg = panels_svg([[pixels]], shape[0], shape[1], label, {(0, 0): colour} if colour else None,
                         target_width=PANEL_PIXELS)
        return Markup('<div class="canary-panel">{}<p>{}</p></div>').format(
            inline_svg(svg, f"{figure_id}-{where}", label), caption)

    trials = []
    for r, trial in enumerate(examples["trials"].elements()):
        secret = _candidate(trial["secret"], len(candidates))
        number_shown = trial.present("trial")
        name = f"Trial {number_shown.value + 1}" if number_shown is not None else f"Example {r + 1}"
        panels = [panel(examples["public"], "public image Ψ(x)", None, f"{r}-public")]
        panels += [panel(candidate, f"candidate {k + 1}" + (" · the secret" if k == secret else ""),
                         SECRET if k == secret else None, f"{r}-candidate-{k}")
                   for k, candidate in enumerate(candidates)]
        for a, (attack, pick) in enumerate(trial["picks"].items()):
            chosen = _candidate(pick, len(candidates))
            right = chosen == secret
            panels.append(panel(candidates[chosen], f"{attack} picks {chosen + 1}: {'right' if right else 'wrong'}",
                                RIGHT if right else WRONG, f"{r}-pick-{a}"))
        trials.append(Markup('<div class="canary-trial"><p class="canary-trial-name">{}: the secret is candidate {}'
                             '</p><div class="canary-panels">{}</div></div>').format(name, secret + 1,
                                                                                   Markup("").join(panels)))
    return Markup('<div class="canary-examples">{}</div>').format(Markup("").join(trials))


def _image_shape(examples: Node) -> list[int]:
    shape = examples["image_shape"].sequence()
    if len(shape) != 2 or not all(isinstance(v, int) and v > 0 for v in shape):
        raise examples["image_shape"].bad("expected [height, width]")
    return shape


def examples_svg(examples: Node, label: str) -> str:
    """An image game's example canaries (its section's ``examples``) as SVG: one row per example trial, the
    public image, the candidates (the secret framed), each attack's pick (framed by whether it is right).

    Args:
        examples: the game section's ``examples``.
        label: the figure's title.

    Returns:
        A standalone SVG document, about 480 pixels wide.

    Raises:
        BadInputError: the examples break the contract.
    """
    shape = _image_shape(examples)
    candidates = list(examples["candidates"].elements())
    rows, frames = [], {}
    for r, trial in enumerate(examples["trials"].elements()):
        secret = _candidate(trial["secret"], len(candidates))
        row = [examples["public"], *candidates]
        frames[r, 1 + secret] = SECRET
        for _, pick in trial["picks"].items():
            chosen = _candidate(pick, len(candidates))
            frames[r, len(row)] = RIGHT if chosen == secret else WRONG
            row.append(candidates[chosen])
        rows.append(row)
    return panels_svg(rows, shape[0], shape[1], label, frames, target_width=480)


def _candidate(node: Node, count: int) -> int:
    value = node.value
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < count:
        raise node.bad(f"expected a candidate index below {count}")
    return value


def _reconstruction(game: Node, section_id: str, view: ReportView) -> Section:
    section = Section(section_id, view.title, texts.RECONSTRUCTION, lead=view.lead,
                      facts=[("trials played", num(game["trials"])),
                             ("limit at each ρ", Cell(section_limit_source(game.value)))])
    prior = game.present("prior")
    if prior:
        for key, child in prior.items():
            cell = scalar(child)
            if cell is not None:
                section.facts.append((f"prior {key}", cell))
    rows = []
    for a, attack in enumerate(game["attacks"].elements()):
        for point in attack["points"].elements():
            rows.append(
                [
                    attack_cell(attack),
                    threat_cell(attack["threat_model"]),
                    num(attack["trials"]),
                    num(point["rho"]),
                    *_rate_cells(point),
                    _rate_status(point),
                ]
            )
        if len(attack["points"].sequence()) > 0:
            figure_id = f"fig-{section_id}-{a}"
            section.figures.append(
                FigureView(
                    figure_id,
                    figures.reconstruction_figure(attack.value, figure_id),
                    f"{attack_words(attack.value)}: success within ρ with its interval, the bound 1 − f(Ball(ρ)) and "
                    "the prior Ball(ρ).",
                )
            )
    section.tables.append(
        Table(
            f"{section_id}-attacks",
            (
                "Attack",
                "Threat model",
                "Judged trials",
                "ρ",
                "Successes",
                "Rate",
                "Interval",
                "Lower conf. bound",
                "Ball(ρ)",
                "Limit",
                "Margin",
                "Status",
            ),
            rows,
            caption="Success within each radius ρ: one row per attack and ρ",
            collapsed=len(rows) > _LONG_TABLE,
        )
    )
    return section


def _distinguishing(game: Node, section_id: str, view: ReportView, accounting: Node | None) -> Section:
    relation = game["relation"].choice(*RELATIONS)
    section = Section(
        section_id,
        f"{view.title} ({relation.replace('_', '/')})",
        texts.DISTINGUISHING,
        lead=view.lead,
        facts=[
            ("trials played", num(game["trials"])),
            ("neighbour relation", worded(game["relation"], relation.replace("_", "/"))),
        ],
    )
    rows = []
    for attack in game["attacks"].elements():
        rows.append(
            [
                attack_cell(attack),
                threat_cell(attack["threat_model"]),
                num(attack["trials"]),
                num(attack["success"]),
                num(attack["optimal_success"], nullable=True),
                num(attack["epsilon_lower_bound"]),
                num(attack["epsilon_claimed"]),
                num(attack["epsilon_ratio"], nullable=True),
                status(attack["status"]),
            ]
        )
    section.tables.append(
        Table(
            f"{section_id}-attacks",
            (
                "Attack",
                "Threat model",
                "Trials",
                "Success",
                "Optimal success",
                "ε lower bound",
                "Claimed ε",
                "Ratio",
                "Status",
            ),
            rows,
        )
    )
    bounds = [
        [
            attack_cell(attack),
            num(attack["orientation"]),
            num(attack["epsilon_lower_bound"]),
            text(attack["epsilon_family"]),
            num(attack["epsilon_lower_bound_cp"]),
            num(attack["epsilon_ratio_cp"], nullable=True),
        ]
        for attack in game["attacks"].elements()
        if attack.present("epsilon_lower_bound_cp") is not None
    ]
    if bounds:
        section.tables.append(
            Table(
                f"{section_id}-bounds",
                ("Attack", "Orientation", "ε lower bound (family)", "Family assumed", "Clopper–Pearson ε", "CP ratio"),
                bounds,
                caption="Each attack's test (orientation: 1 for the score, −1 for minus the score) is chosen on a "
                "quarter of the trials and judged on the other three quarters. The family ε is the largest claim "
                "of the stated family that the data reject at the audit's level; the Clopper–Pearson ε assumes "
                "nothing about the mechanism.",
            )
        )
    for a, attack in enumerate(game["attacks"].elements()):
        points = attack.present("points")
        if points is None:
            continue
        point_rows = [
            [num(p["threshold"]), num(p["fpr"]), num(p["fnr"]), num(p["fpr_ub"]), num(p["fnr_ub"])]
            for p in points.elements()
        ]
        section.tables.append(
            Table(
                f"{section_id}-points-{a}",
                ("Threshold", "FPR", "FNR", "FPR upper bound", "FNR upper bound"),
                point_rows,
                caption=f"{attack_words(attack.value)}: error rates at each threshold "
                "with their upper confidence bounds",
                collapsed=True,
            )
        )
        roc = attack.present("roc")
        if roc:
            if len(roc["fpr"].sequence()) != len(roc["tpr"].sequence()):
                raise roc.bad("fpr and tpr differ in length")
            for item in (*roc["fpr"].elements(), *roc["tpr"].elements()):
                item.number(nullable=True)
    summaries = [_roc_summary_row(attack) for attack in game["attacks"].elements() if attack.present("auc")]
    if summaries:
        confidence = next(a for a in game["attacks"].elements() if a.present("auc"))["confidence"].number()
        section.tables.insert(1, Table(
            f"{section_id}-roc", ("Attack", "AUC", "TPR at FPR ≤ 0.1 %", "TPR at FPR ≤ 1 %"), summaries,
            caption=f"What the field reads off each attack's ROC over all {number(game['trials'].number())} trials, "
            f"with {number(100 * confidence)} % intervals (AUC: DeLong; TPR: Clopper–Pearson at the threshold). "
            "Descriptive: the gate judges the selected test above, not these."))
    curve = accounting.present("curve") if accounting else None
    claimed_key = "f_replace" if relation == Relation.REPLACE else "f"
    claimed = (curve.value["alpha"], curve.value[claimed_key]) if curve and curve.present(claimed_key) else None
    for log, suffix, caption in (
            (False, "", "ROC of each attack (solid), its conservative points from the upper confidence bounds (open "
             "squares) and the best ROC the claimed guarantee allows."),
            (True, "-log", "The same ROC on log-log axes, where low false-positive rates are visible, with each "
             "attack's TPR at FPR 0.1 % and 1 % and its interval (diamonds).")):
        figure_id = f"fig-{section_id}{suffix}"
        svg = figures.roc_figure(game["attacks"].value, claimed, relation.replace("_", "/"), figure_id, log)
        section.figures.append(FigureView(figure_id, svg, caption))
    return section


def _roc_summary_row(attack: Node) -> list[Cell]:
    """An attack's AUC and its TPR at each stored low false-positive rate, each with its interval; a rate the trials
    cannot resolve (fewer than 1/FPR negatives: no false positive allowed) says so."""
    auc, ci = attack["auc"], attack["auc_ci"]
    cells = [attack_cell(attack),
             Cell(f"{number(auc.number())} {interval(ci[0].number(), ci[1].number())}",
                  {auc.pointer: auc.value, ci[0].pointer: ci[0].value, ci[1].pointer: ci[1].value}, "num")]
    rows = {row["fpr"].number(): row for row in attack["tpr_at_fpr"].elements()}
    for target in (0.001, 0.01):
        row = rows.get(target)
        if row is None:
            cells.append(Cell(number(None), {}, "num"))
            continue
        shown = [row[key] for key in ("tpr", "ci_low", "ci_high")]
        note = "" if row["resolved"].value else (
            f"at 0 of {row['negatives'].number()} false positives: {number(100 * target)} % needs "
            f"≥ {round(1 / target)} negatives")
        cells.append(Cell(f"{number(shown[0].number())} {interval(shown[1].number(), shown[2].number())}",
                          {node.pointer: node.value for node in shown}, "num", note))
    return cells


def _other_game(game: Node, kind: str, index: int, view: ReportView | None) -> Section:
    """A game laid out as a table, or not registered here: its scalar facts and one row per attack of scalar
    values."""
    section_id = _numbered(re.sub(r"[^a-z0-9-]+", "-", kind.lower()).strip("-") or "game", index)
    title = view.title if view is not None else kind.replace("_", " ").replace("-", " ").capitalize()
    section = Section(section_id, title, texts.OTHER_GAME, lead=view.lead if view is not None else "")
    for key, child in game.items():
        cell = scalar(child) if key != "game" else None
        if cell is not None:
            section.facts.append((key.replace("_", " "), cell))
    attacks = game.present("attacks")
    if attacks is None or not attacks.sequence():
        return section
    columns = list(dict.fromkeys(key for attack in attacks.elements() for key, child in attack.items()
                                 if scalar(child) is not None))
    rows = []
    for attack in attacks.elements():
        row = []
        for key in columns:
            child = attack.get(key)
            cell = scalar(child) if child is not None else None
            row.append(status(child) if key == "status" and cell is not None else cell or Cell(number(None)))
        rows.append(row)
    section.tables.append(Table(f"{section_id}-attacks", tuple(c.replace("_", " ") for c in columns), rows))
    return section
