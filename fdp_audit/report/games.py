"""The game sections of the report (SPEC 2.6, 3, 5.3): attribute inference, reconstruction, and the
distinguishing and simulator games, each a table of stored results plus its plot."""

from __future__ import annotations

from fdp_audit.report import figures, texts
from fdp_audit.report.format import signed
from fdp_audit.report.model import FigureView, Node, Section, Table, num, numbers, scalar, span, status, text

DISTINGUISHING_GAMES = {"distinguishing": "Distinguishing game", "simulator": "Simulator game"}


def game_sections(games: list[Node], accounting: Node | None) -> dict[str, list[Section]]:
    """One section per game, grouped by kind in the report's reading order."""
    by_kind: dict[str, list[Section]] = {"attribute": [], "reconstruction": [], "distinguishing": []}
    seen: dict[str, int] = {}
    for game in games:
        kind = game["game"].text()
        index = seen[kind] = seen.get(kind, -1) + 1
        if kind == "attribute":
            by_kind["attribute"].append(_attribute(game, index))
        elif kind == "reconstruction":
            by_kind["reconstruction"].append(_reconstruction(game, index))
        elif kind in DISTINGUISHING_GAMES:
            by_kind["distinguishing"].append(_distinguishing(game, kind, index, accounting))
        # a game kind this version does not know is left out, like any other section it cannot show
    return by_kind


def _numbered(base: str, index: int) -> str:
    return base if index == 0 else f"{base}-{index + 1}"


def _rate_cells(row: Node) -> list:
    """A judged success rate against Theorem 4: successes, rate, interval, lower bound, Ball, bound, margin."""
    return [num(row["successes"]), num(row["rate"]), span(row["ci_low"], row["ci_high"]), num(row["lower_bound"]),
            num(row["ball"]), num(row["bound"]), num(row["margin"], signed)]


def _attribute(game: Node, index: int) -> Section:
    rows = []
    attacks = game["attacks"]
    for attack in attacks.elements():
        rows.append(
            [
                text(attack["attack"]),
                text(attack["threat_model"]),
                num(attack["trials"]),
                *_rate_cells(attack),
                num(attack["tightness"], nullable=True),
                status(attack["status"]),
            ]
        )
    prior = game.present("prior")
    facts = [("trials", num(game["trials"]))]
    facts += [("prior Pr[v | Ψ(x)]", numbers(prior))] if prior else []
    facts += [("Ball (prior success)", num(game["ball"])), ("bound 1 − f(Ball)", num(game["bound"]))]
    section_id = _numbered("attribute", index)
    return Section(
        section_id,
        "Attribute inference",
        texts.ATTRIBUTE,
        facts=facts,
        tables=[
            Table(
                f"{section_id}-attacks",
                (
                    "Attack",
                    "Threat model",
                    "Trials",
                    "Successes",
                    "Rate",
                    "Interval",
                    "Lower conf. bound",
                    "Ball",
                    "Bound",
                    "Margin",
                    "Tightness",
                    "Status",
                ),
                rows,
            )
        ],
    )


def _reconstruction(game: Node, index: int) -> Section:
    section_id = _numbered("reconstruction", index)
    section = Section(section_id, "Reconstruction", texts.RECONSTRUCTION, facts=[("trials", num(game["trials"]))])
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
                    text(attack["attack"]),
                    text(attack["threat_model"]),
                    num(attack["trials"]),
                    num(point["rho"]),
                    *_rate_cells(point),
                    status(point["status"]),
                ]
            )
        if len(attack["points"].sequence()) > 0:
            figure_id = f"fig-{section_id}-{a}"
            section.figures.append(
                FigureView(
                    figure_id,
                    figures.reconstruction_figure(attack.value, figure_id),
                    f"{attack['attack'].text()}: success within ρ with its interval, the bound 1 − f(Ball(ρ)) and "
                    "the prior Ball(ρ).",
                )
            )
    section.tables.append(
        Table(
            f"{section_id}-attacks",
            (
                "Attack",
                "Threat model",
                "Trials",
                "ρ",
                "Successes",
                "Rate",
                "Interval",
                "Lower conf. bound",
                "Ball(ρ)",
                "Bound",
                "Margin",
                "Status",
            ),
            rows,
        )
    )
    return section


def _distinguishing(game: Node, kind: str, index: int, accounting: Node | None) -> Section:
    section_id = _numbered(kind, index)
    relation = game["relation"].choice("replace", "add_remove")
    section = Section(
        section_id,
        f"{DISTINGUISHING_GAMES[kind]} ({relation.replace('_', '/')})",
        texts.DISTINGUISHING,
        facts=[("trials", num(game["trials"])), ("neighbour relation", text(game["relation"]))],
    )
    rows = []
    for attack in game["attacks"].elements():
        rows.append(
            [
                text(attack["attack"]),
                text(attack["threat_model"]),
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
                caption=f"{attack['attack'].text()}: error rates at each threshold with their upper confidence bounds",
            )
        )
        roc = attack.present("roc")
        if roc:
            if len(roc["fpr"].sequence()) != len(roc["tpr"].sequence()):
                raise roc.bad("fpr and tpr differ in length")
            for item in (*roc["fpr"].elements(), *roc["tpr"].elements()):
                item.number(nullable=True)
    curve = accounting.present("curve") if accounting else None
    claimed_key = "f_replace" if relation == "replace" else "f"
    claimed = (curve.value["alpha"], curve.value[claimed_key]) if curve and curve.present(claimed_key) else None
    figure_id = f"fig-{section_id}"
    section.figures.append(
        FigureView(
            figure_id,
            figures.roc_figure(game["attacks"].value, claimed, relation.replace("_", "/"), figure_id),
            "ROC of each attack (solid), its conservative points from the upper confidence bounds (open squares) "
            "and the best ROC the claimed guarantee allows.",
        )
    )
    return section
