"""From results.json to the report's sections, verdict first (docs/files.md).

Only schema_version, kind, verdict, mechanism and reproducibility are required; every other section is
shown when present and simply left out when not. Nothing shown is recomputed: cells carry stored values.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from markupsafe import Markup

from fdp_audit.auditing.labels import attack_words
from fdp_audit.auditing.sanity import SanityWarning, sanity_warnings
from fdp_audit.errors import BadInputError
from fdp_audit.report import figures, texts
from fdp_audit.report.banner import Verdict, verdict_view
from fdp_audit.report.format import number
from fdp_audit.report.games import attack_cell, game_sections, section_view
from fdp_audit.report.generative import generative_section
from fdp_audit.report.model import Cell, FigureView, Node, Section, Table, num, scalar, span, status, text, threat_cell
from fdp_audit.report.one_run import one_run_section
from fdp_audit.report.promise import promise_section
from fdp_audit.report.summary import Summary, build_summary
from fdp_audit.report.svg import UnsafeSvgError, inline_svg

SCHEMA_VERSION = 1
CURVE_KEYS = ("f", "f_replace", "f_optimistic", "f_gdp_approx")
MECHANISM_FIELDS = {
    "name": "mechanism",
    "description": "description",
    "noise_multiplier": "noise multiplier z",
    "sample_rate": "sample rate p",
    "steps": "noisy steps T",
    "clip_norm": "clip norm C",
    "delta": "δ",
    "epsilon": "ε at δ (PLD, add/remove)",
    "public_batch_size": "public batch size m′",
    "private_weight": "private weight",
    "public_pretrain_steps": "public pre-training steps",
    "public_loss": "public loss",
    "faulty": "known-faulty test mechanism",
}


@dataclass(frozen=True)
class Faulty:
    """The report's notice that a known-faulty test mechanism was audited.

    Attributes:
        mechanism: the faulty mechanism's name.
        caught: whether the audit caught it (a VIOLATION); a faulty mechanism that PASSES is said loudly.
        note: the notice's text.
    """

    mechanism: Cell
    caught: bool  # a faulty mechanism that PASSES means the audit missed it: said loudly
    note: str = texts.FAULTY


@dataclass(frozen=True)
class ReportView:
    """The whole report page laid out from ``results.json`` (:func:`build_view`), in reading order.

    Attributes:
        title: the page's title.
        created: when the results were created; None when they do not say.
        verdict: the banner.
        faulty: the known-faulty notice; None for a mechanism that is not known-faulty.
        summary: the chart of every comparison against its limit; None without comparisons.
        sections: the sections in reading order (the mechanism and its accounting, the games, any extra such as the
            comparison with a baseline, reproducibility).
        warnings: the sanity warnings; a PASS with any of them is weak.
    """

    title: str
    created: Cell | None
    verdict: Verdict
    faulty: Faulty | None
    summary: Summary | None
    sections: list[Section]
    warnings: list[SanityWarning] = field(default_factory=list)  # a PASS with any of them is weak

    @property
    def weak(self) -> bool:
        return self.verdict.status == "PASS" and bool(self.warnings)


def build_view(results: dict[str, Any], extra: list[Section] | None = None) -> ReportView:
    """Check the results.json contract and lay out the report; bad input names its field. ``extra``
    sections (the comparison with a baseline) come right after the games.

    Args:
        results: the parsed results.json.
        extra: sections to add after the games, or None.

    Returns:
        The page's view: title, creation time, verdict banner, summary, sections in reading order, sanity
        warnings.

    Raises:
        BadInputError: an unsupported ``schema_version``, or any section breaking the contract.
    """
    root = Node(results)
    root.mapping()
    version = root["schema_version"]
    if version.value != SCHEMA_VERSION:
        raise version.bad(f"unsupported version {version.value!r}; this fdp-audit reads {SCHEMA_VERSION}")
    root["kind"].choice("audit")
    summary = build_summary(results)
    verdict = verdict_view(root, summary)
    mechanism = root["mechanism"]
    faulty = mechanism["faulty"]
    if not isinstance(faulty.value, bool):
        raise faulty.bad("expected true or false")
    reproducibility = _reproducibility(root, root["reproducibility"])
    accounting = root.present("accounting")
    curve = accounting.present("curve") if accounting else None
    if curve:  # checked before the games, whose ROC plots draw the claimed curve too
        _check_curve(curve)

    games = list(root.present("games").elements()) if root.present("games") else []
    by_kind = game_sections(games, accounting)

    optional: dict[str, Callable[[Node], Section]] = {
        "sweep": _sweep,
        "tightness": _tightness,
        "checkpoint_audit": _checkpoint,
        "one_run": one_run_section,
        "profile": lambda node: _free_form(node, "profile", "Privacy profiles and the ε transition", texts.PROFILE),
        "corrdp": lambda node: _free_form(node, "corrdp", "CorrDP (correlation-aware DP)", texts.CORRDP),
        "utility": _utility,
        "generative": generative_section,
        "promise": promise_section,
    }
    built = {key: build(root[key]) for key, build in optional.items() if root.present(key)}
    sections = [_mechanism(mechanism)]
    if "promise" in built:  # the claim the games are judged against is the promise: right after the mechanism
        sections.append(built.pop("promise"))
    if accounting:
        sections.append(_accounting(accounting, games))
    sections += by_kind["attribute"]
    if "sweep" in built:  # success against ε belongs right after the attribute game it repeats
        sections.append(built.pop("sweep"))
    sections += by_kind["reconstruction"] + by_kind["distinguishing"] + by_kind["other"]
    sections += (extra or []) + list(built.values())
    sections.append(reproducibility)
    _explain_once(sections)

    title = root.present("title")
    created = root.present("created")
    return ReportView(
        title=title.text() if title else f"fdp-audit report: {mechanism['name'].text()}",
        created=text(created) if created else None,
        verdict=verdict,
        faulty=Faulty(text(mechanism["name"]), verdict.status == "VIOLATION") if faulty.value else None,
        summary=summary,
        sections=sections,
        warnings=sanity_warnings(results),
    )


def _explain_once(sections: list[Section]) -> None:
    """The explanation of a kind of section is shown on its first section only, later ones refer back; and
    no two sections share a title (a reader, and the table of contents, must tell them apart)."""
    first: dict[int, Section] = {}
    titles: dict[str, int] = {}
    for section in sections:
        explained = first.setdefault(id(section.help), section)
        if explained is not section:
            section.help_ref = explained
        count = titles[section.title] = titles.get(section.title, 0) + 1
        if count > 1:
            section.title = f"{section.title} ({count})"


def _mechanism(node: Node) -> Section:
    # the known parameters in a fixed order, then whatever else the mechanism recorded
    keys = [key for key in MECHANISM_FIELDS if key in node.mapping()]
    keys += [key for key in node.mapping() if key not in MECHANISM_FIELDS]
    facts = []
    for key in keys:
        cell = scalar(node[key])
        if cell is not None:
            facts.append((MECHANISM_FIELDS.get(key, key.replace("_", " ")), cell))
    return Section("mechanism", "Mechanism", texts.MECHANISM, facts=facts)


def _accounting(node: Node, games: list[Node]) -> Section:
    epsilon = node["epsilon"]
    other = {key: node.present(key) for key in ("epsilon_replace", "epsilon_rdp")}
    rows = []
    # δ is a key, not a value: the ε cells' pointers name it
    for delta in sorted(epsilon.mapping(), key=_delta_value, reverse=True):
        row = [Cell(number(_delta_value(delta)), {}, "num"), num(epsilon[delta])]
        row += [_optional_num(table, delta) for table in other.values()]
        rows.append(row)
    section = Section(
        "accounting",
        "Privacy accounting",
        texts.ACCOUNTING,
        tables=[
            Table(
                "accounting-epsilon",
                ("δ", "ε add/remove (PLD)", "ε replacement (PLD)", "ε add/remove (RDP, comparison)"),
                rows,
            )
        ],
    )
    mu = node.present("gdp_mu_approx")
    if mu:
        section.facts.append(("GDP approximation μ (comparison only)", num(mu)))
    curve = node.present("curve")
    if curve:
        attribute = [_strongest(game) for game in games
                     if (view := section_view(game)) is not None and view.layout == "attribute"]
        trade_points = [
            (f"{g['game'].value}: {attack_words(a)}", g["relation"].value.replace("_", "/"), a["points"])
            for g in games
            if (view := section_view(g)) is not None and view.layout == "distinguishing"
            for a in g["attacks"].sequence()
            if a.get("points")
        ]
        svg = figures.tradeoff_figure(curve.value, mu.value if mu else None, attribute, trade_points, "fig-tradeoff")
        section.figures.append(FigureView("fig-tradeoff", svg, _tradeoff_caption(bool(attribute), bool(trade_points))))
    return section


def _tradeoff_caption(circles: bool, squares: bool) -> str:
    """The trade-off plot's caption, naming only the marks it draws and the curve each is judged against: an
    attribute-inference success against the add/remove curve (Theorem 4's bound), a distinguishing game's error
    rates against the curve of the game's own neighbour relation."""
    words = ["Trade-off curve as 1 − f(α) on log axes."]
    if circles:
        words.append("Circles: attribute-inference success at α = Ball with its interval, judged against the "
                     "add/remove PLD curve.")
    if squares:
        words.append("Squares: distinguishing-game error rates, whiskers reaching the upper confidence bounds that "
                     "the ε lower bound uses; each is judged against the PLD curve of its game's neighbour relation "
                     "(named in its legend entry), not against the other relation's curve.")
    return " ".join(words)


def _strongest(game: Node) -> tuple[str, dict[str, Any]]:
    """An attribute game's judged attack with the highest lower confidence bound, labelled with its game: one
    point per game keeps the trade-off plot's legend short."""
    attacks = [a for a in game["attacks"].sequence() if a.get("status") != "info"] or game["attacks"].sequence()
    best = max(attacks, key=lambda a: a.get("lower_bound") or 0.0)
    view = section_view(game)
    return f"{view.short if view is not None else 'attribute'}: {attack_words(best)}", best


def _delta_value(key: str) -> float:
    try:
        return float(key)
    except ValueError:
        raise BadInputError(f"δ key {key!r} is not a number", "accounting/epsilon") from None


def _optional_num(node: Node | None, key: str) -> Cell:
    """A nullable number that may also be absent (an optional column)."""
    child = node.get(key) if node is not None else None
    return num(child, nullable=True) if child is not None else Cell(number(None))


def _check_curve(curve: Node) -> None:
    size = len(curve["alpha"].sequence())
    for key in ("alpha", *CURVE_KEYS):
        child = curve.present(key)
        if child is None:
            continue
        values = child.sequence()
        if len(values) != size:
            raise child.bad(f"has {len(values)} values but alpha has {size}")
        for item in child.elements():
            item.number(nullable=True)


def _sweep(node: Node) -> Section:
    size = len(node["epsilon"].sequence())
    for key in ("rate", "ci_low", "ci_high", "bound"):
        child = node.present(key)
        if child is not None and len(child.sequence()) != size:
            raise child.bad(f"has {len(child.sequence())} values but epsilon has {size}")
    rows = []
    for i in range(size):
        interval = span(node["ci_low"][i], node["ci_high"][i]) if node.present("ci_low") else Cell(number(None))
        rows.append([num(node["epsilon"][i]), num(node["rate"][i]), interval, num(node["bound"][i])])
    section = Section(
        "sweep",
        "Attribute-inference success against ε",
        texts.SWEEP,
        tables=[Table("sweep-table", ("ε", "Rate", "Interval", "Bound 1 − f(Ball)"), rows)],
    )
    ball = node.present("ball")
    if ball:
        section.facts.append(("Ball (prior success)", num(ball)))
    if size > 1:
        section.figures.append(
            FigureView(
                "fig-sweep",
                figures.sweep_figure(node.value, "fig-sweep"),
                "Success with its interval at each ε, the Theorem 4 bound and the prior line.",
            )
        )
    return section


def _tightness(node: Node) -> Section:
    rows = [
        [
            num(row["epsilon"]),
            num(row["attack_advantage_share"]),
            span(row["ci"][0], row["ci"][1]),
            num(row["theorem4_tightness"], nullable=True),
            num(row["simulator_epsilon_ratio"], nullable=True),
        ]
        for row in node["rows"].elements()
    ]
    columns = ("ε", "Attack advantage share", "Interval", "Theorem 4 tightness (optimum)", "Simulator ε ratio")
    return Section("tightness", "Tightness", texts.TIGHTNESS, tables=[Table("tightness-table", columns, rows)])


def _checkpoint(node: Node) -> Section:
    rows = [
        [
            attack_cell(a),
            threat_cell(a["threat_model"]),
            num(a["rate"]),
            span(a["ci_low"], a["ci_high"]) if a.present("ci_low") else Cell(number(None)),
            _optional_num(a, "advantage_over_prior"),
            num(a["estimated_ball"], nullable=True),
            num(a["estimated_bound"], nullable=True),
            status(a["status"]),
        ]
        for a in node["attacks"].elements()
    ]
    columns = ("Attack", "Threat model", "Rate", "Interval", "Over prior", "Estimated Ball (mean)",
               "Estimated bound (mean)", "Status")
    gated = node.present("gated")
    mode = "gated on estimates" if gated and gated.value is True else "informational"
    title = f"Checkpoint audit ({mode})"
    section = Section("checkpoint", title, texts.CHECKPOINT)
    for key, label in (("records", "records attacked"), ("attribute", "secret attribute"),
                       ("allowed_advantage", "advantage allowed by the estimated bound")):
        child = node.present(key)
        if child:
            section.facts.append((label, scalar(child) or _json_cell(child)))
    prior_model = node.present("prior_model")
    for key, label in (("temperature", "prior model temperature"),
                       ("calibration_error", "prior model calibration error (ECE)")):
        child = prior_model.present(key) if prior_model else None
        if child:
            section.facts.append((label, num(child)))
    section.tables.append(Table("checkpoint-table", columns, rows))
    return section


def _free_form(node: Node, section_id: str, title: str, help_text: texts.Help) -> Section:
    """Profile and CorrDP results: scalars as facts, ``tables`` as tables, ``figures`` as inline SVG."""
    section = Section(section_id, title, help_text)
    for key, child in node.items():
        cell = scalar(child) if key not in ("tables", "figures") else None
        if cell is not None:
            section.facts.append((key.replace("_", " "), cell))
    tables = node.present("tables")
    for t, table in enumerate(tables.elements() if tables else ()):
        columns = tuple(c.text() for c in table["columns"].elements())
        rows = [[scalar(value) or _json_cell(value) for value in row.elements()] for row in table["rows"].elements()]
        caption = table.present("title")
        section.tables.append(
            Table(f"{section_id}-table-{t}", columns, rows, caption=caption.text() if caption else "")
        )
    svgs = node.present("figures")
    for f, (name, svg) in enumerate(svgs.items() if svgs else ()):
        figure_id = f"fig-{section_id}-{f}"
        label = name.replace("_", " ")
        try:
            markup: Markup | None = inline_svg(svg.text(), figure_id, label)
            omitted = ""
        except UnsafeSvgError as err:
            markup, omitted = None, f"Figure “{label}” left out: {err}."
        section.figures.append(FigureView(figure_id, markup, label, omitted))
    return section


def _json_cell(node: Node) -> Cell:
    return Cell(json.dumps(node.value, ensure_ascii=False), {node.pointer: node.value})


def _utility(node: Node) -> Section:
    metric = node["metric"].text()
    rows = [
        [
            text(row["mechanism"]),
            num(row["accuracy"]),
            _optional_num(row, "std"),
            _optional_num(row, "epsilon"),
        ]
        for row in node["rows"].elements()
    ]
    columns = ("Mechanism", metric[:1].upper() + metric[1:], "Std", "ε")
    section = Section("utility", "Model utility", texts.UTILITY, tables=[Table("utility-table", columns, rows)])
    chance = node.present("chance")
    if chance:
        section.facts.append(("chance (the most frequent test label)", num(chance)))
    return section


def _reproducibility(root: Node, node: Node) -> Section:
    section = Section("reproducibility", "Reproducibility", texts.REPRODUCIBILITY)
    seed = node.present("seed")
    if seed:
        section.facts.append(("seed", scalar(seed) or _json_cell(seed)))
    for label, child in (
        ("dataset fingerprint", node.present("dataset_fingerprint")),
        ("results checksum", root.present("checksum")),
    ):
        if child:
            section.facts.append((label, Cell(child.text(), {child.pointer: child.value}, "mono")))
    section.facts.append(("results schema version", num(root["schema_version"])))
    shown = {"seed", "dataset_fingerprint", "versions", "command", "config"}
    for key, child in node.items():
        cell = scalar(child) if key not in shown else None
        if cell is not None:
            section.facts.append((key.replace("_", " "), cell))
    versions = node.present("versions")
    if versions:
        rows = [[Cell(name), scalar(version) or _json_cell(version)] for name, version in versions.items()]
        section.tables.append(Table("versions-table", ("Package", "Version"), rows))
    command = node.present("command")
    if command:
        section.blocks.append(("Command line", text(command)))
    config = node.present("config")
    if config:
        shown = json.dumps(config.value, indent=2, ensure_ascii=False)
        section.blocks.append(("Configuration", Cell(shown, {config.pointer: config.value})))
    return section
