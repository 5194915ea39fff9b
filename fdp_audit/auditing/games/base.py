"""What every audit game is (docs/games.md, docs/extending.md): a registered :class:`Game` that draws each trial's
secret from a known prior, builds that trial's canary from Ψ and the data, names the attacks it admits, turns
the attacks' scores into typed comparisons for the gate, and lays out its own section of ``results.json``.
The trial runner (:mod:`fdp_audit.auditing.trials`) trains and attacks the trials of any game the same way, on any
executor; the runner (:mod:`fdp_audit.auditing.runner`) loops over the configured games and names none of them.

Trial ``t`` of a game is model ``stream_block · TRIAL_BLOCK + t`` of the audit's seed: its secret (the GAME
stream) and its training streams depend on that index alone, so any subset of trials is reproducible anywhere.
Each registered game owns one block of :data:`TRIAL_BLOCK` indices, larger than the most trials a
configuration allows, so no two games ever share a model.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, Literal, TypeVar, get_args

import numpy as np
import torch

from attacks import ATTACKS, Attack, Knowledge, View
from attacks.base import AttributeKind
from fdp_audit.accounting.events import Relation
from fdp_audit.accounting.mechanism import MechanismAccountant, MechanismSpec
from fdp_audit.auditing.decision import DecisionRule, selection_split
from fdp_audit.auditing.stats import threshold_split
from fdp_audit.claim import Claim
from fdp_audit.config import Config
from fdp_audit.data.prepare import PreparedData
from fdp_audit.errors import BadInputError
from fdp_audit.training import streams
from fdp_audit.training.engine import Canaries, CanaryBlock, TrainingProblem

TRIAL_BLOCK = 10_000_000  # model indices per game: above the 10^6 trials a configuration allows


@dataclass(frozen=True)
class RateComparison:
    """An attack's success against the limit ``bound`` of its game (Theorem 4's ``1 − f(Ball)``, or a binary
    game's smaller limit), counted on ``trials`` trials; ``rule`` is the decision rule fitted on the other trials
    (:mod:`fdp_audit.auditing.decision`), ``rho`` the radius of a reconstruction. ``view`` names what the trials are
    judged as (``attribute``, ``distinguishing-attribute``, …), and with the attack (and ρ) forms the id."""

    kind: ClassVar[str] = "rate"
    game: str
    view: str
    attack: str
    threat_model: str
    trials: int
    successes: int
    ball: float
    bound: float
    rho: float | None = None
    rule: DecisionRule | None = None

    @property
    def id(self) -> str:
        base = f"{self.view}/{self.attack}"
        return base if self.rho is None else f"{base}/rho={self.rho:g}"

    def row(self) -> dict[str, Any]:
        """The comparison as ``results.json`` stores it and the gate judges it (docs/files.md).

        Returns:
            ``id``, ``kind``, ``game``, ``attack``, ``threat_model``, ``rho`` (a reconstruction's), ``trials``,
            ``successes``, the rule's ``orientation`` and ``offsets`` (when fitted), ``ball`` and ``bound``.
        """
        row: dict[str, Any] = {"id": self.id, "kind": self.kind, "game": self.game, "attack": self.attack,
                               "threat_model": self.threat_model}
        if self.rho is not None:
            row["rho"] = float(self.rho)
        row |= {"trials": int(self.trials), "successes": int(self.successes)}
        if self.rule is not None:
            row |= {"orientation": self.rule.orientation, "offsets": self.rule.offsets.tolist()}
        return row | {"ball": float(self.ball), "bound": float(self.bound)}


@dataclass(frozen=True)
class EpsilonComparison:
    """A binary game's threshold test of the attack's score difference (orientation and threshold chosen on a
    selection split), its errors counted on the rest, against the stated claim under ``relation``: the gate
    re-derives f and ε from ``claim`` (docs/statistics.md)."""

    kind: ClassVar[str] = "epsilon"
    game: str
    attack: str
    threat_model: str
    relation: Relation
    orientation: int
    thresholds: tuple[float, ...]
    false_positives: tuple[int, ...]
    false_negatives: tuple[int, ...]
    negatives: int
    positives: int
    delta: float
    claim: dict[str, Any] = field(hash=False)

    @property
    def id(self) -> str:
        return f"{self.game}-epsilon/{self.attack}"

    def row(self) -> dict[str, Any]:
        """The comparison as ``results.json`` stores it and the gate judges it (docs/files.md).

        Returns:
            ``id``, ``kind``, ``game``, ``attack``, ``threat_model``, ``relation``, ``orientation``, per threshold the
            ``thresholds``, ``false_positives`` and ``false_negatives``, the ``negatives`` and ``positives`` counted,
            ``delta`` and the stated ``claim``.
        """
        return {"id": self.id, "kind": self.kind, "game": self.game, "attack": self.attack,
                "threat_model": self.threat_model, "relation": self.relation, "orientation": self.orientation,
                "thresholds": [float(t) for t in self.thresholds],
                "false_positives": [int(v) for v in self.false_positives],
                "false_negatives": [int(v) for v in self.false_negatives], "negatives": int(self.negatives),
                "positives": int(self.positives), "delta": self.delta, "claim": self.claim}


Comparison = RateComparison | EpsilonComparison


@dataclass(frozen=True)
class PlannedComparison:
    """A comparison a game will make, before any trial: its limits and the trials it is judged on, with no
    outcome, so that an audit whose comparisons cannot fail is refused before it trains. ``evaluated`` maps the
    audit's trials to the trials the comparison is judged on (:func:`judged_on_half`, …)."""

    comparison: Comparison
    evaluated: Callable[[int], int]


def judged_on_half(trials: int) -> int:
    """Success rates: judged on the evaluation half of the trials
    (:func:`fdp_audit.auditing.decision.selection_split`).

    Args:
        trials: the audit's trials of the game.

    Returns:
        The number of evaluation trials.
    """
    return len(selection_split(trials)[1])


def judged_on_three_quarters(trials: int) -> int:
    """ε comparisons: judged on the trials their test was not selected on
    (:func:`fdp_audit.auditing.stats.threshold_split`).

    Args:
        trials: the audit's trials of the game.

    Returns:
        The number of evaluation trials (those not a multiple of 4).
    """
    return len(threshold_split(trials)[1])


def judged_on_all(trials: int) -> int:
    """Comparisons without a fitted rule (reconstruction within ρ): judged on every trial.

    Args:
        trials: the audit's trials of the game.

    Returns:
        ``trials``.
    """
    return trials


@dataclass(frozen=True)
class Judged:
    """A comparison with the gate's evaluation of it (:func:`fdp_audit.auditing.gate.judge`) and its report status."""

    comparison: Comparison
    evaluation: dict[str, Any]
    status: str  # "pass", "violation" or "not judged"


class Judgements:
    """The judged comparisons of an audit, found by what they are, not by their ids."""

    def __init__(self, judged: Iterable[Judged]):
        self.judged = list(judged)

    def find(self, kind: str, game: str, attack: str, view: str | None = None,
             rho: float | None = None) -> Judged | None:
        """The judged comparison of a kind, game and attack (and view and radius ρ, when given).

        Args:
            kind: ``"rate"`` or ``"epsilon"``.
            game: the game's name.
            attack: the attack's name.
            view: what the trials are judged as (rate comparisons), or None for any.
            rho: a reconstruction's radius, or None for any.

        Returns:
            The first such comparison with its evaluation, or None.
        """
        for j in self.judged:
            c = j.comparison
            if (c.kind == kind and c.game == game and c.attack == attack and (view is None or c.view == view)
                    and (rho is None or c.rho == rho)):
                return j
        return None


@dataclass(frozen=True)
class Setup:
    """What a game builds once per process from the configuration and the data: the training problem (the
    configured mechanism on the game's data) and what the adversary knows. Games subclass it with what their
    canaries and records need."""

    problem: TrainingProblem
    knowledge: Knowledge


Layout = Literal["attribute", "image", "reconstruction", "distinguishing", "table"]
LAYOUTS: tuple[str, ...] = get_args(Layout)


@dataclass(frozen=True)
class ReportView:
    """How the report shows one section a game writes into ``results.json``'s ``games`` (docs/files.md).

    ``layout`` is the report's drawing of it: ``attribute`` (each attack's success against Theorem 4's
    ``1 − f(Ball)``), ``image`` (the same with the game's example canaries), ``reconstruction`` (success within
    each radius ρ against ``1 − f(Ball(ρ))``), ``distinguishing`` (ROC and ε lower bound, the title followed by
    the section's neighbouring relation) or ``table`` (its scalar facts and one row per attack). ``title`` heads
    the section and names the game wherever the report lists comparisons; ``lead`` is one paragraph under the
    title saying which game it is; ``label`` is a short name for legends (the title when empty)."""

    layout: Layout
    title: str
    lead: str = ""
    label: str = ""

    def __post_init__(self) -> None:
        if self.layout not in LAYOUTS:
            raise ValueError(f"layout must be one of {', '.join(LAYOUTS)}, got {self.layout!r}")
        if not self.title.strip():
            raise ValueError("a report view needs a title")

    @property
    def short(self) -> str:
        """The label, or the title when no shorter label is given."""
        return self.label or self.title


Record = TypeVar("Record")


class Game(ABC, Generic[Record]):
    """One audit game. Subclasses set :attr:`name`, :attr:`stream_block` (unique among registered games), how
    the report shows them (:attr:`report`) and what their attacks need, and implement the methods below;
    :func:`fdp_audit.auditing.games.register_game` makes them configurable in ``audit.games``."""

    name: ClassVar[str]
    stream_block: ClassVar[int]  # the game's trial t is model stream_block · TRIAL_BLOCK + t
    report: ClassVar[ReportView]  # its own section of results.json (``"game": name``)
    # a game whose trials are also judged as attribute inference writes that view as a section of its own,
    # ``"game": "attribute"``, told apart from other games' by ``canary``
    attribute_report: ClassVar[ReportView | None] = None
    canary: ClassVar[str] = "record"  # the canary in words, as its attribute section names it
    attribute_kind: ClassVar[AttributeKind] = "categorical"
    gradient_canary: ClassVar[bool] = False  # whose attacks read the released iterates of a gradient canary
    input_canary: ClassVar[bool] = False  # whose attacks read the membership game's crafted input canary
    needs_attack: ClassVar[bool] = False  # audit.attacks must name one it admits besides the prior
    epsilon_relation: ClassVar[str | None] = None  # the relation its ε comparisons are judged under, if any
    bounds_per_attack: ClassVar[int] = 1  # confidence bounds per attack the gate spreads α over (test selection)

    @property
    def records_iterates(self) -> bool:
        """Whether its trials record the released per-step sums for ``iterates`` attacks (every gradient-canary
        game's do)."""
        return self.gradient_canary

    def trial_indices(self, trials: int) -> np.ndarray:
        """The model indices of the game's first trials (module docstring).

        Args:
            trials: how many.

        Returns:
            ``stream_block · TRIAL_BLOCK + t`` for t = 0 … trials − 1, int64.
        """
        return np.arange(trials, dtype=np.int64) + self.stream_block * TRIAL_BLOCK

    def automatic_attacks(self, config: Config) -> tuple[str, ...]:
        """The attacks the game plays on ``config``'s data when ``audit.attacks`` names none it admits besides the
        prior.

        Args:
            config: the audit's configuration (its data decide what the game's canary allows).

        Returns:
            Attack names; none by default (such a game refuses the list, or plays the prior alone).
        """
        return ()

    def attacks(self, names: tuple[str, ...], config: Config | None = None) -> dict[str, Attack]:
        """The configured attacks this game admits (:func:`game_attacks`), unfitted.

        Args:
            names: ``audit.attacks``.
            config: the audit's configuration; with it, a list that admits none but the prior gets the game's
                :meth:`automatic_attacks`.

        Returns:
            Name → a new instance of each admitted attack, in the configured order.

        Raises:
            BadInputError: a name is unknown, or the game ``needs_attack`` and none besides the prior is admitted
                (the message names the ones it admits).
        """
        canaries = (self.gradient_canary, self.input_canary)
        chosen = game_attacks(names, self.attribute_kind, *canaries)
        if config is not None and len(chosen) <= ("prior" in chosen):
            chosen |= game_attacks(self.automatic_attacks(config), self.attribute_kind, *canaries)
        if self.needs_attack and len(chosen) <= ("prior" in chosen):
            usable = [name for name in game_attacks(tuple(ATTACKS), self.attribute_kind, *canaries) if name != "prior"]
            raise BadInputError(f"the {self.name} game needs one of {', '.join(usable)} in audit.attacks",
                                "audit.attacks")
        return chosen

    @abstractmethod
    def setup(self, config: Config, data: PreparedData) -> Setup:
        """What the game builds once per process (each worker of a distributed executor builds its own).

        Args:
            config: the audit's configuration.
            data: its prepared data and Ψ.

        Returns:
            The training problem, the adversary's knowledge and whatever the canaries need.

        Raises:
            BadInputError: the game cannot be played on these data or with this mechanism.
        """

    @abstractmethod
    def secrets(self, config: Config, setup: Setup, indices: np.ndarray) -> np.ndarray:
        """Each trial's secret from the known prior, drawn from the GAME stream of the trial's index alone.

        Args:
            config: the audit's configuration (its seed).
            setup: what :meth:`setup` built.
            indices: the trials' model indices.

        Returns:
            One integer per trial (what the journal stores and checks; a continuous secret is stored as its
            digest).
        """

    @abstractmethod
    def canaries(self, config: Config, setup: Setup, indices: np.ndarray) -> Canaries | CanaryBlock:
        """The canaries of the given trials, with the secrets :meth:`secrets` draws for them.

        Args:
            config: the audit's configuration.
            setup: what :meth:`setup` built.
            indices: the trials' model indices.

        Returns:
            One canary row per model: canary records, or a block of gradient canaries on parameters the model
            never reads.
        """

    @abstractmethod
    def score(self, attacks: dict[str, Attack], view: View) -> dict[str, np.ndarray]:
        """Every attack's numbers for a chunk of trials.

        Args:
            attacks: the fitted attacks, by name.
            view: what the adversary sees of the chunk's R trained models.

        Returns:
            Name → ``[R, width]`` float64 (:meth:`score_width`).
        """

    def score_width(self, setup: Setup) -> int:
        """How many numbers each attack gives per trial (checked on journaled trials).

        Args:
            setup: what :meth:`setup` built.

        Returns:
            The width; by default the number of candidates.
        """
        return int(setup.knowledge.candidates.shape[-2])

    @abstractmethod
    def record(self, config: Config, setup: Setup, secrets: np.ndarray, scores: dict[str, np.ndarray],
               threat_models: dict[str, str]) -> Record:
        """The played game.

        Args:
            config: the audit's configuration.
            setup: what :meth:`setup` built.
            secrets: every trial's secret, in trial order.
            scores: every attack's scores of every trial, in trial order.
            threat_models: each attack's threat model.

        Returns:
            The game's record, from which :meth:`comparisons` and :meth:`sections` read.
        """

    @abstractmethod
    def comparisons(self, record: Record, claim: Claim, selection_level: float) -> list[Comparison]:
        """What the gate judges, from the played trials.

        Args:
            record: the played game.
            claim: the privacy claim under audit, which the limits come from.
            selection_level: the per-bound level at which a test chosen on a selection split is chosen
                (:func:`fdp_audit.auditing.games.selection_level`; only power depends on it).

        Returns:
            Typed comparisons (:class:`RateComparison`, :class:`EpsilonComparison`).
        """

    @abstractmethod
    def planned(self, config: Config, data: PreparedData, claim: Claim) -> list[PlannedComparison]:
        """The comparisons :meth:`comparisons` will make, without outcomes, so that an audit that cannot fail is
        refused before it trains.

        Args:
            config: the audit's configuration.
            data: its prepared data.
            claim: the privacy claim under audit.

        Returns:
            Each comparison's limits with the trials it is judged on.
        """

    @abstractmethod
    def sections(self, record: Record, judgements: Judgements, claim: Claim, alpha: float) -> list[dict[str, Any]]:
        """The game's sections of ``results.json``'s ``games``, laid out by the report as :attr:`report` (and
        :attr:`attribute_report`) say.

        Args:
            record: the played game.
            judgements: the gate's evaluation of every comparison.
            claim: the privacy claim under audit.
            alpha: the verdict's level.

        Returns:
            JSON-able sections, each with ``"game"`` and each judged comparison's status.
        """

    def tightness_rows(self, record: Record, judgements: Judgements, claim: Claim) -> list[dict[str, Any]]:
        """How close an attack comes to the optimum of this game.

        Args:
            record: the played game.
            judgements: the gate's evaluation of every comparison.
            claim: the privacy claim under audit.

        Returns:
            Rows of the results' ``tightness`` section; none by default.
        """
        return []

    @abstractmethod
    def stated_ball(self, row: dict[str, Any], config: Config, where: str) -> float:
        """The Ball a stored rate comparison of this game must state, from which the gate re-derives its limit.

        Args:
            row: the stored comparison.
            config: the configuration the results state.
            where: the row's place in the results, for errors.

        Returns:
            Ball.

        Raises:
            BadInputError: the row lacks what Ball depends on (naming ``where``).
        """

    @abstractmethod
    def stated_limit(self, ball: float, accountant: Callable[[str], MechanismAccountant]) -> float:
        """The limit of a rate comparison under the stated claim.

        Args:
            ball: the comparison's Ball.
            accountant: the stated claim's accountant of a relation (``Relation.ADD_REMOVE`` or ``Relation.REPLACE``).

        Returns:
            The limit, Theorem 4's ``1 − f(Ball)`` or a binary game's smaller one.
        """

    def limit_source(self) -> str:
        """Where :meth:`stated_limit` comes from, in words, shown beside the limit wherever it appears.

        Returns:
            The source, e.g. ``"Theorem 4: 1 − f(Ball), add/remove"``.
        """
        return "Theorem 4: 1 − f(Ball), add/remove"


def game_attacks(names: tuple[str, ...], kind: AttributeKind, gradient_canary: bool = False,
                 input_canary: bool = False) -> dict[str, Attack]:
    """The configured attacks that can play a game: those supporting its attribute ``kind`` and, except the
    prior, needing a gradient canary, or the membership game's crafted input canary, exactly when the game has
    one. Unknown names are bad input.

    Args:
        names: the configured attack names (``audit.attacks``).
        kind: the game's attribute kind.
        gradient_canary: the game has a gradient canary.
        input_canary: the game has the membership game's crafted input canary.

    Returns:
        Name → a new, unfitted instance of each attack that can play, in the configured order.

    Raises:
        BadInputError: a name is not a registered attack.
    """
    chosen = {}
    for name, cls in zip(names, ATTACKS.lookup(names), strict=True):
        if kind in cls.supports and (name == "prior" or (cls.needs_gradient_canary == gradient_canary
                                                         and cls.needs_input_canary == input_canary)):
            chosen[name] = cls()
    return chosen


def trial_uniforms(seed: int, indices: np.ndarray) -> torch.Tensor:
    """One uniform per trial from the GAME stream, independent of the models' training streams.

    Args:
        seed: the audit's seed.
        indices: the trials' model indices, shape (R,).

    Returns:
        The uniforms on [0, 1), shape (R,).
    """
    return streams.uniform(streams.model_keys(seed, torch.as_tensor(indices)), 0, streams.Stream.GAME, 1)[:, 0]


def prior_secrets(seed: int, indices: np.ndarray, prior: tuple[float, ...]) -> np.ndarray:
    """Each trial's secret, a candidate index drawn from the known ``prior`` by inverting its distribution
    function at the trial's uniform (:func:`trial_uniforms`).

    Args:
        seed: the audit's seed.
        indices: the trials' model indices, shape (R,).
        prior: the candidates' probabilities (summing to 1).

    Returns:
        The candidate indices, int array of shape (R,).
    """
    u = trial_uniforms(seed, indices).numpy()
    return np.minimum(np.searchsorted(np.cumsum(np.asarray(prior, dtype=float)), u, side="right"), len(prior) - 1)


def stated_claim(spec: MechanismSpec) -> dict[str, Any]:
    """The claim an ε comparison states, from which the gate re-derives f and ε.

    Args:
        spec: the claimed mechanism.

    Returns:
        ``mechanism`` and, for a Gaussian mechanism, its ``noise_multiplier``, ``sample_rate`` and ``steps``.
    """
    stated: dict[str, Any] = {"mechanism": spec.name}
    if spec.is_gaussian:
        stated |= {"noise_multiplier": spec.noise_multiplier, "sample_rate": spec.sample_rate, "steps": spec.steps}
    return stated
