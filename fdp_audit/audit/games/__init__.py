"""Audit games (docs/games.md). Adding a game means adding a module with a :class:`Game` subclass and one call to
:func:`register_game` (docs/extending.md); the runner, the trial runner, the journal, the gate and the report
handle it without further edits."""

from __future__ import annotations

from fdp_audit.audit.games.attribute import AttributeGame
from fdp_audit.audit.games.base import (
    TRIAL_BLOCK,
    Claim,
    Comparison,
    EpsilonComparison,
    Game,
    Judged,
    Judgements,
    PlannedComparison,
    RateComparison,
    Setup,
    game_attacks,
)
from fdp_audit.audit.games.categorical import GameRecord
from fdp_audit.audit.games.gradient_canary import DistinguishingGame, SimulatorGame
from fdp_audit.audit.games.image_reconstruction import ImageReconstructionGame
from fdp_audit.audit.games.images import ImageGradientCanaryGame, ImageRecordCanaryGame
from fdp_audit.audit.games.membership import MembershipGame
from fdp_audit.audit.games.reconstruction import ReconstructionGame, ReconstructionRecord
from fdp_audit.config import Config
from fdp_audit.errors import BadInputError

GAMES: dict[str, type[Game]] = {}


def register_game(cls: type[Game]) -> type[Game]:
    """Make ``cls`` configurable by its ``name`` in ``audit.games``; usable as a class decorator. Its
    ``stream_block`` must be one no other registered game uses, so that no two games share a trial's model."""
    if cls.name in GAMES and GAMES[cls.name] is not cls:
        raise ValueError(f"a game named {cls.name!r} is already registered")
    taken = {game.stream_block: name for name, game in GAMES.items() if name != cls.name}
    if cls.stream_block in taken:
        raise ValueError(f"game {cls.name!r}: stream block {cls.stream_block} is {taken[cls.stream_block]!r}'s")
    if not 0 <= cls.stream_block < (1 << 62) // TRIAL_BLOCK:  # model indices are 64-bit integers
        raise ValueError(f"game {cls.name!r}: stream block {cls.stream_block} is out of range")
    GAMES[cls.name] = cls
    return cls


def unregister_game(name: str) -> None:
    """Remove a registered game (a game defined for one test)."""
    GAMES.pop(name, None)


def configured_games(config: Config) -> list[Game]:
    """The games ``audit.games`` names, in its order; an unknown name is bad input."""
    unknown = [name for name in config.audit.games if name not in GAMES]
    if unknown:
        raise BadInputError(f"unknown game(s) {', '.join(map(repr, unknown))} (known: {', '.join(GAMES)})",
                            "audit.games")
    return [GAMES[name]() for name in config.audit.games]


def selection_level(config: Config) -> float:
    """The per-bound level at which thresholds are selected: the audit's α spread over about as many bounds as
    the gate will spread it (:attr:`Game.bounds_per_attack` per configured attack and game). Only power depends
    on it."""
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

__all__ = ["GAMES", "TRIAL_BLOCK", "AttributeGame", "Claim", "Comparison", "DistinguishingGame", "EpsilonComparison",
           "Game", "GameRecord", "ImageGradientCanaryGame", "ImageReconstructionGame", "ImageRecordCanaryGame",
           "Judged", "Judgements", "MembershipGame", "PlannedComparison", "RateComparison", "ReconstructionGame",
           "ReconstructionRecord", "Setup", "SimulatorGame", "configured_games", "game_attacks", "register_game",
           "selection_level", "unregister_game"]
