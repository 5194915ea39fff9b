"""What a person reads for a comparison (docs/files.md, "Labels"): one human label per stored comparison, and the
source of its limit, used identically by the report, the commands' output, JUnit XML and the Markdown summary.
The comparison's ``id`` stays what results.json and the journal key on. An audit's title, unless the config
gives one, says what was audited.

The words come from the registries' entries: a game's report view (its title), an attack's title, and the game's
own account of its limit (:meth:`fdp_audit.auditing.games.Game.limit_source`); a comparison of a game or attack not
registered here (a newer results.json) is labelled by its stored names.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from attacks import ATTACKS
from fdp_audit.auditing.games import GAMES, Game, comparison_view

if TYPE_CHECKING:
    from fdp_audit.config import Config

# what the margin of each kind of comparison is measured in (another kind's is a "value")
UNITS = {"rate": "success rate", "epsilon": "ε", "one_run": "share of correct guesses", "promise": "ε spent"}


def game_title(row: dict[str, Any]) -> str:
    """The game of a stored comparison as the report titles its section (with the neighbouring relation of an ε
    comparison, as the game's section title has it).

    Args:
        row: a comparison as results.json stores it (or merged with the gate's evaluation of it).

    Returns:
        The title, e.g. ``Distinguishing game (replace)``; an unregistered game by its stored name.
    """
    kind = str(row.get("kind"))
    if kind == "one_run":
        return "One-run audit"
    if kind == "promise":
        return "Training's promise"
    game = str(row.get("game", ""))
    view = comparison_view(game, kind)
    if view is None:
        return game.replace("_", " ").capitalize() or "Comparison"
    relation = row.get("relation")
    if view.layout == "distinguishing" and isinstance(relation, str):
        return f"{view.title} ({relation.replace('_', '/')})"
    return view.title


# What the adversary sees, by the threat model's id in results.json: the games' (attacks.base.THREAT_MODELS,
# README's table) and the one-run audit's.
THREAT_MODELS = {"prior": "prior only", "black_box": "black box (predictions)",
                 "white_box": "white box (final weights)", "iterates": "every noisy update",
                 "updates": "released updates",
                 "updates_public_aligned": "released updates at the canaries' public steps",
                 "final_model": "final model", "final": "final weights"}


def threat_title(threat: str) -> str:
    """A threat model's id in words, a game's (``white_box`` is ``white box (final weights)``) or a one-run
    audit's (``updates`` is ``released updates``); an unknown one by its id.

    Args:
        threat: the threat model's id.

    Returns:
        The words.
    """
    return THREAT_MODELS.get(threat, threat.replace("_", " "))


def attack_name(row: dict[str, Any]) -> str:
    """The attack of a stored comparison in words (:func:`attack_words`), with the radius of a reconstruction; for
    a one-run comparison, the guesses it counts.

    Args:
        row: a comparison as results.json stores it (or merged with the gate's evaluation of it).

    Returns:
        E.g. ``informed closed-form reconstruction within ρ = 0.5``, or ``40 most confident guesses on the
        released updates``.
    """
    if row.get("kind") == "one_run":
        parts = str(row.get("id", "")).split("/")
        threat = threat_title(parts[1]) if len(parts) >= 3 else "?"
        if row.get("test") == "conformance":
            return (f"conformance test: wrong guesses among the {row.get('guesses', '?')} most confident on the "
                    f"{threat}")
        return f"{row.get('guesses', '?')} most confident guesses on the {threat}"
    return attack_words(row) + (f" within ρ = {row['rho']:g}" if row.get("rho") is not None else "")


def attack_title(row: dict[str, Any]) -> str:
    """What the attack of a stored comparison does, in a few words (its registered title), or "" when unknown.

    Args:
        row: a comparison as results.json stores it (or merged with the gate's evaluation of it).

    Returns:
        The title, or "".
    """
    entry = ATTACKS.get(str(row.get("attack", "")))
    return entry.title if entry is not None and row.get("kind") != "one_run" else ""


def attack_words(row: dict[str, Any]) -> str:
    """The attack of a stored row (a comparison, or an attack of a game's section) as a person reads it: its
    registered title, e.g. ``likelihood ratio of the canary on the released updates`` for ``iterates``, or its
    stored name when no registered attack has it (a newer results.json). The name stays in results.json.

    Args:
        row: a stored row with an ``attack`` name.

    Returns:
        The words.
    """
    return attack_title(row) or str(row.get("attack", row.get("id", "")))


def comparison_label(row: dict[str, Any]) -> str:
    """``game · attack``: the one human label of a stored comparison (module docstring).

    Args:
        row: a comparison as results.json stores it (or merged with the gate's evaluation of it).

    Returns:
        The label, e.g. ``Distinguishing game (replace) · likelihood ratio of the canary on the released updates``
        for the id ``distinguishing-epsilon/iterates``.
    """
    return f"{game_title(row)} · {attack_name(row)}"


def limit_source(row: dict[str, Any]) -> str:
    """Where a comparison's limit comes from, in words.

    Args:
        row: a stored comparison.

    Returns:
        E.g. ``Theorem 4: 1 − f(Ball), add/remove`` for an attribute game's success rate, ``claimed ε, replace,
        at δ = 1e-05`` for an ε comparison.
    """
    kind = row.get("kind")
    if kind == "epsilon":
        relation = str(row.get("relation", "")).replace("_", "/")
        delta = row.get("delta")
        return f"claimed ε, {relation}" + (f", at δ = {delta:g}" if isinstance(delta, int | float) else "")
    if kind == "one_run" and row.get("test") == "conformance":
        return "claimed DP-SGD, canaries independent, order statistics"
    if kind == "one_run":
        return "claimed f, one-run analysis, any mechanism meeting it"
    if kind == "promise" and row.get("claimed") is not None:
        return "the ε promised to the library at its δ, and the configuration's claimed ε at the claim's δ"
    if kind == "promise":
        return "the ε promised to the library: the plan, at the same δ"
    return _source(GAMES.get(str(row.get("game", ""))))


def limit_words(row: dict[str, Any]) -> str:
    """``limit 0.6343 (source)``: a comparison's limit with where it comes from, for one line of text.

    Args:
        row: a comparison as results.json stores it (or merged with the gate's evaluation of it).

    Returns:
        The words (``—`` for a limit that is not a number).
    """
    limit = row.get("theoretical", row.get("bound"))
    shown = f"{limit:.4g}" if isinstance(limit, int | float) else "—"
    return f"limit {shown} ({limit_source(row)})"


def section_limit_source(section: dict[str, Any]) -> str:
    """Where the limit of a stored game section (results.json ``games``) comes from: the section of an attribute
    view names its game by its canary, as :func:`fdp_audit.auditing.games.report_view` finds it.

    Args:
        section: a section of results.json's ``games``.

    Returns:
        The source in words (Theorem 4's form for most games).
    """
    name, canary = section.get("game"), section.get("canary") or "record"
    game = None
    if name == "attribute":
        game = next((g for g in GAMES.values() if g.attribute_report is not None and g.canary == canary), None)
    return _source(game or GAMES.get(str(name)))


def _source(game: type[Game] | None) -> str:
    return game().limit_source() if game is not None else "the stored bound of an unregistered game"


def audit_title(config: Config, kind: str = "") -> str:
    """The title of an audit's results and report: ``report.title`` if the config gives one, else its name and what
    was audited, e.g. ``adult_fdp: fdp_sgd on adult (protected: marital-status, relationship)``.

    Args:
        config: the audited configuration.
        kind: what kind of audit, in words (``"one-run audit"``), shown after the name; "" for the games.

    Returns:
        The title.
    """
    if config.report.title:
        return config.report.title
    protected = list(config.data.protected)
    what = f"{config.mechanism.name} on {config.data.dataset}"
    if len(protected) > 3:
        what += f" ({len(protected)} attributes protected)"
    elif protected:
        what += f" (protected: {', '.join(protected)})"
    return f"{config.name}{f' ({kind})' if kind else ''}: {what}"
