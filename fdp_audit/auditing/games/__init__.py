"""Audit games (docs/games.md). Adding a game means adding a module with a :class:`Game` subclass and one call to
:func:`register_game` (docs/extending.md); the runner, the trial runner, the journal, the gate and the report
handle it without further edits."""

from __future__ import annotations

from fdp_audit.auditing.games.attribute import AttributeGame
from fdp_audit.auditing.games.base import (
    TRIAL_BLOCK,
    Comparison,
    EpsilonComparison,
    Game,
    Judged,
    Judgements,
    PlannedComparison,
    RateComparison,
    ReportView,
    Setup,
    game_attacks,
)
from fdp_audit.auditing.games.categorical import GameRecord
from fdp_audit.auditing.games.gradient_canary import DistinguishingGame, SimulatorGame
from fdp_audit.auditing.games.image_reconstruction import ImageReconstructionGame
from fdp_audit.auditing.games.images import ImageGradientCanaryGame, ImageRecordCanaryGame
from fdp_audit.auditing.games.membership import MembershipGame
from fdp_audit.auditing.games.reconstruction import ReconstructionGame, ReconstructionRecord
from fdp_audit.config import Config
from fdp_audit.registry import Has, Registry, Rule, Unique

GAMES: Registry[type[Game]] = Registry("game", "audit.games", (
    Has("stream_block", int, low=0, high=(1 << 62) // TRIAL_BLOCK),  # model indices are 64-bit integers
    Unique("stream_block"),  # no two games share a trial's model
    Has("report", ReportView),
    Has("attribute_report", ReportView, optional=True),
    Has("canary", str),
    Rule(lambda game, others: game.attribute_report is None or all(
        other.attribute_report is None or other.canary != game.canary for other in others.values()),
         "its canary must tell its attribute section apart from every other game's"),
))


def register_game(cls: type[Game]) -> type[Game]:
    """Make a game configurable by its ``name`` in ``audit.games``; usable as a class decorator.

    Args:
        cls: a :class:`Game` subclass with a ``stream_block`` no other registered game uses (so that no two
            games share a trial's model) and a :class:`ReportView` saying how the report shows it.

    Returns:
        ``cls`` itself.

    Raises:
        ValueError: the name or stream block is taken, or its metadata is missing or malformed.
    """
    return GAMES.register(cls)


def unregister_game(name: str) -> None:
    """Remove a registered game (a game defined for one test).

    Args:
        name: the game's ``name``; an unknown name is ignored.
    """
    GAMES.unregister(name)


def configured_games(config: Config) -> list[Game]:
    """The games ``audit.games`` names, in its order.

    Args:
        config: the audit's configuration.

    Returns:
        One instance of each named game.

    Raises:
        BadInputError: a name is not a registered game (field ``audit.games``).
    """
    return [cls() for cls in GAMES.lookup(config.audit.games)]


def report_view(section: str, canary: str | None = None) -> ReportView | None:
    """How the report shows a section of ``results.json``'s ``games``.

    Args:
        section: the section's ``game``: a registered game's name, or ``attribute`` for the attribute view of
            any game's trials.
        canary: the section's ``canary``, which tells the attribute views of different games apart (``record``
            when absent).

    Returns:
        The view of the game that writes such a section, or None for a game not registered here (a newer
        results.json): the report then shows its facts and attack rows as a table.
    """
    if section == "attribute":
        for game in GAMES.values():
            if game.attribute_report is not None and game.canary == (canary or "record"):
                return game.attribute_report
    game = GAMES.get(section)
    return None if game is None else game.report


def comparison_view(game: str, kind: str) -> ReportView | None:
    """The view of the section that shows a comparison of ``results.json``.

    Args:
        game: the comparison's ``game``.
        kind: its ``kind``: a ``rate`` comparison of a game with an attribute view is shown there, any other
            in the game's own section.

    Returns:
        The view, or None when ``game`` is not a registered game.
    """
    entry = GAMES.get(game)
    if entry is None:
        return None
    return entry.attribute_report if kind == "rate" and entry.attribute_report is not None else entry.report


def selection_level(config: Config) -> float:
    """The per-bound level at which thresholds are selected: the audit's α spread over about as many bounds as
    the gate will spread it (:attr:`Game.bounds_per_attack` per configured attack and game). Only power depends
    on it.

    Args:
        config: the audit's configuration.

    Returns:
        ``audit.alpha / max(2 · Σ_games attacks · bounds_per_attack, 1)``.
    """
    attacks = sum(a != "prior" for a in config.audit.attacks)
    comparisons = sum(attacks * game.bounds_per_attack for game in configured_games(config))
    return config.audit.alpha / max(2 * comparisons, 1)


register_game(DistinguishingGame)
register_game(AttributeGame)
register_game(SimulatorGame)
register_game(ReconstructionGame)
register_game(MembershipGame)
register_game(ImageGradientCanaryGame)
register_game(ImageRecordCanaryGame)
register_game(ImageReconstructionGame)

__all__ = ["GAMES", "TRIAL_BLOCK", "AttributeGame", "Comparison", "DistinguishingGame", "EpsilonComparison",
           "Game", "GameRecord", "ImageGradientCanaryGame", "ImageReconstructionGame", "ImageRecordCanaryGame",
           "Judged", "Judgements", "MembershipGame", "PlannedComparison", "RateComparison", "ReconstructionGame",
           "ReconstructionRecord", "ReportView", "Setup", "SimulatorGame", "comparison_view", "configured_games",
           "game_attacks", "register_game", "report_view", "selection_level", "unregister_game"]
