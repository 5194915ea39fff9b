"""The attack interface (docs/games.md): ``fit`` on what the adversary knows, ``infer`` on what it sees.

Attacks on a categorical protected attribute score every candidate value of the target's protected attribute
(higher is more likely), for all trials at once (a leading trial/model dimension), so guesses, success rates
and ROC curves all come from the same scores. Attacks on continuous protected features (reconstruction,
docs/accounting.md) return an estimate of the protected coordinates instead, judged by
:func:`attacks.success.reconstruction_success`.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import ClassVar, Literal, get_args

import torch

from fdp_audit.errors import BadInputError
from fdp_audit.training.interface import Canaries, Model, Params, TrainingProblem

ThreatModel = Literal["prior", "black_box", "white_box", "iterates"]
THREAT_MODELS: tuple[str, ...] = get_args(ThreatModel)
FINAL_MODEL: frozenset[str] = frozenset({"black_box", "white_box"})  # the threat models that see only the model
AttributeKind = Literal["categorical", "continuous", "subspace"]
ATTRIBUTE_KINDS: tuple[str, ...] = get_args(AttributeKind)


# (problem, seed, model indices, canaries) -> the trained models' parameters, chunk by chunk
ShadowTrainer = Callable[[TrainingProblem, int, Sequence[int], Canaries], Iterator[Params]]


@dataclass(frozen=True)
class ProtectedSubspace:
    """The protected part of a target image (docs/images.md): ``basis`` ``[m, d]`` is an orthonormal basis of the
    Ψ map's protected subspace, and the prior draws the target's coordinates in it from ``N(0, scale² I_m)``,
    so the target is ``x = t + aᵀ basis`` with t the known visible part. Estimates are coordinates ``[R, m]``
    in this basis, so their L2 distance to the truth is ``‖P(x̂ − x)‖``."""

    basis: torch.Tensor  # [m, d]
    scale: float

    @property
    def dimension(self) -> int:
        return int(self.basis.shape[0])


@dataclass(frozen=True)
class Knowledge:
    """What the adversary knows before seeing the mechanism's output.

    ``candidates[v]`` is the target record completed with protected value v (its public part u = Ψ(x) is
    known); ``prior[v] = Pr[v | u]``. One target may be shared by all trials (candidates ``[V, d]``, an int
    label, prior ``[V]``) or each trial may have its own (candidates ``[R, V, d]``, labels ``[R]``, prior
    ``[R, V]``), as when the real records of one checkpoint are attacked at once. Informed adversaries also
    know the rest of the data set S \\ {x}. They are *not* told the privacy parameters claimed for the mechanism
    (noise multiplier, sampling rate): an audit tests that claim, so an attack estimates what it needs from the
    release or from held-out trials. A gradient canary (the audit hook) is described by the parameter
    coordinates of its private and public directions, by the sign each candidate gives the private one
    (0: the candidate's canary is absent from the private population), by the sign of the private direction of
    the record each candidate puts in the public population (what a public loss that wrongly reads protected
    features would show), by the clip norm C the canary was built against (its raw norm exceeds C, so a
    clipping mechanism releases it with norm C: the unit of the signal), and by the coordinates that no
    record's private gradient touches, along which a release holds nothing but its noise.
    A canary block (:class:`~fdp_audit.training.engine.CanaryBlock`: one gradient canary per candidate, only the
    secret's in the private population, every one in the public population) is described instead by each
    candidate's own private and public coordinates (``candidate_coordinates``, ``candidate_public_coordinates``),
    with candidate signs of +1; a single canary is the case of every candidate on ``canary_private_coordinate``.

    The membership game's crafted input canary (:mod:`attacks.input_canary`) is described by ``candidates``
    ``[2, d]``: the canary without its crafted coordinate (the reference input) and the canary itself, by its
    ``label``, and by ``noise_inputs``, input columns in which no record has a value.

    A target image whose protected part is a subspace (``subspace`` games) has one candidate row, its visible
    part (the prior's mean), and ``protected_subspace``. ``procedure`` is the training procedure an informed
    adversary knows: the other records, Ψ, the public loss, the recipe, the optimiser and its starting point.
    It is held with the noise multiplier and sampling rate set to NaN (:meth:`__post_init__`): those are the
    claim under test, which an attack estimates from the release and never reads.

    Continuous protected features: ``protected_coordinates`` are their indices in the model input, and
    ``candidates`` has one row, the target completed with the prior's centre (the Ball-maximising guess of
    docs/accounting.md), so its other coordinates are the known public part u.

    Informed white-box attacks assume the trainer minimised ``Σ_{x∈S} ℓ(θ; x) + (λ/2)‖θ‖²`` with
    ``λ = l2_regularization`` (a mean objective with strength Λ, as in docs/profiles.md, has λ = nΛ).

    The shadow-model attack trains ``shadow_models`` models of ``shadow_problem`` -- the target's mechanism
    and settings run on data the adversary owns (the population split) -- from the streams of
    ``shadow_seed``, each with the target inserted with a known candidate value. ``shadow_trainer``, when
    given, is how the mechanism is run (an audited third-party function: its own code, not the recipe it
    claims); otherwise the batched engine runs ``shadow_problem``'s recipe.
    """

    model: Model
    candidates: torch.Tensor  # [V, d] or [R, V, d]
    label: int | torch.Tensor  # or [R]
    prior: torch.Tensor  # [V] or [R, V]
    rest_x: torch.Tensor | None = None
    rest_y: torch.Tensor | None = None
    clip_norm: float | None = None
    canary_private_coordinate: int | None = None
    canary_public_coordinate: int | None = None
    candidate_signs: torch.Tensor | None = None  # [V] in {−1, 0, +1} for a gradient canary
    candidate_public_signs: torch.Tensor | None = None  # [V] ±1; the private signs when not given
    candidate_coordinates: tuple[int, ...] | None = None  # [V]: each candidate's private coordinate (a block)
    candidate_public_coordinates: tuple[int, ...] | None = None  # [V]: each candidate's public coordinate
    noise_coordinates: tuple[int, ...] | None = None
    noise_inputs: tuple[int, ...] | None = None
    protected_coordinates: tuple[int, ...] | None = None
    protected_subspace: ProtectedSubspace | None = None
    procedure: TrainingProblem | None = None
    l2_regularization: float = 0.0
    shadow_problem: TrainingProblem | None = None
    shadow_models: int = 64
    shadow_seed: int = 0
    shadow_trainer: ShadowTrainer | None = None

    def __post_init__(self) -> None:
        if self.procedure is not None:
            hyper = replace(self.procedure.hyper, noise_multiplier=math.nan, sample_rate=math.nan)
            object.__setattr__(self, "procedure", replace(self.procedure, hyper=hyper))

    def require(self, attack: str, *fields: str) -> None:
        """Refuse, as bad input, an attack whose knowledge lacks what it needs.

        Args:
            attack: the attack's name, for the message.
            *fields: the fields it needs.

        Raises:
            BadInputError: a field is None (field ``audit.attacks``).
        """
        missing = [name for name in fields if getattr(self, name) is None]
        if missing:
            raise BadInputError(f"attack {attack!r} needs {', '.join(missing)} in its knowledge", "audit.attacks")

    def protected_index(self) -> torch.Tensor:
        """The protected coordinates of a continuous target, checked.

        Returns:
            An index tensor ``[k]`` of distinct coordinates of the model input.

        Raises:
            BadInputError: none are given, or they repeat or fall outside the input.
        """
        self.require("reconstruction", "protected_coordinates")
        index = torch.as_tensor(self.protected_coordinates, dtype=torch.long)
        d = self.candidates.shape[-1]
        if index.numel() == 0 or len(set(index.tolist())) != index.numel() or not bool(
                torch.all((index >= 0) & (index < d))):
            raise BadInputError(f"protected coordinates must be distinct indices below {d}", "protected_coordinates")
        return index

    def templates(self, trials: int) -> torch.Tensor:
        """The continuous target's template row (the prior's centre in the protected coordinates) in every trial.

        Args:
            trials: R.

        Returns:
            ``[R, d]`` float64.
        """
        return self.candidates[..., 0, :].double().expand(trials, -1)

    def prior_centre(self, trials: int) -> torch.Tensor:
        """The prior's centre of the protected coordinates in every trial.

        Args:
            trials: R.

        Returns:
            ``[R, k]`` float64.
        """
        return self.templates(trials)[:, self.protected_index()]

    @property
    def per_trial(self) -> bool:
        """Each trial has its own target (candidates ``[R, V, d]``)."""
        return self.candidates.dim() == 3

    def labels(self, trials: int) -> torch.Tensor:
        """The target's label in every trial.

        Args:
            trials: R.

        Returns:
            ``[R]`` int64.
        """
        return torch.as_tensor(self.label, dtype=torch.long).expand(trials)


@dataclass(frozen=True)
class View:
    """What the adversary sees: final parameters (white box; a black-box attack only evaluates the model
    on inputs of its choice) and, under the ``iterates`` threat model, the released per-step updates."""

    params: Params | None = None  # [R, ...]
    noisy_private_sums: torch.Tensor | None = None  # [R, T, P]
    public_gradients: torch.Tensor | None = None  # [R, T, P]
    canary_public_counts: torch.Tensor | None = None  # [R, T]


@dataclass(frozen=True)
class AttackOutput:
    """Candidate scores (categorical attacks) or the reconstruction of the k protected coordinates
    (continuous attacks)."""

    scores: torch.Tensor | None = None  # [R, V]
    estimate: torch.Tensor | None = None  # [R, k]

    @property
    def guess(self) -> torch.Tensor:
        assert self.scores is not None, "a reconstruction has an estimate, not candidate scores"
        return self.scores.argmax(dim=1)


class Attack(ABC):
    """Base class of every attack (docs/extending.md): subclasses set ``name``, ``title``, ``threat_model`` and
    ``supports`` (the protected-attribute kinds they attack), declare what they need, and implement ``infer``;
    :func:`attacks.register_attack` makes them configurable in ``audit.attacks``.

    What an attack declares decides where it plays: a game admits it when the game's attribute kind is in
    ``supports`` and their canaries agree (:func:`fdp_audit.auditing.games.game_attacks`); the checkpoint audit
    attacks a checkpoint's real records with every categorical attack under the prior or a final-model threat
    model that needs no canary and nothing of :class:`Knowledge` beyond the target and accepts a target per
    trial."""

    name: ClassVar[str]
    title: ClassVar[str]  # what the attack does, in a few words, for the report
    threat_model: ClassVar[ThreatModel]
    supports: ClassVar[frozenset[AttributeKind]] = frozenset({"categorical"})
    needs_gradient_canary: ClassVar[bool] = False
    needs_input_canary: ClassVar[bool] = False  # plays the membership game's crafted input canary only
    needs: ClassVar[tuple[str, ...]] = ()  # the Knowledge fields it needs besides the target and its prior
    per_trial: ClassVar[bool] = True  # it accepts knowledge with one target per trial

    def fit(self, knowledge: Knowledge) -> Attack:
        """Learn what the attack needs from what the adversary knows.

        Args:
            knowledge: the target, its prior and whatever else the threat model gives the adversary.

        Returns:
            The attack itself, fitted.

        Raises:
            BadInputError: ``knowledge`` lacks a field the attack ``needs``.
        """
        knowledge.require(self.name, *self.needs)
        self.knowledge = knowledge
        return self

    @abstractmethod
    def infer(self, view: View) -> AttackOutput:
        """Score every trial at once.

        Args:
            view: what the adversary sees of each trial's run (``[R, ...]``): final parameters and, under the
                ``iterates`` threat model, the released updates.

        Returns:
            Candidate scores ``[R, V]`` (categorical attacks) or estimates ``[R, k]`` of the protected
            coordinates (continuous attacks).
        """
