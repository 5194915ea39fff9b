"""The attack interface (SPEC 3): ``fit`` on what the adversary knows, ``infer`` on what it sees.

Attacks score every candidate value of the target's protected attribute (higher is more likely), for all
trials at once (a leading trial/model dimension), so guesses, success rates and ROC curves all come from
the same scores.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar, Literal

import torch

from fdp_audit.training.models import Model, Params

ThreatModel = Literal["prior", "black_box", "white_box", "iterates"]
AttributeKind = Literal["categorical", "continuous"]


@dataclass(frozen=True)
class Knowledge:
    """What the adversary knows before seeing the mechanism's output.

    ``candidates[v]`` is the target record completed with protected value v (its public part u = Ψ(x) is
    known); ``prior[v] = Pr[v | u]``. Informed adversaries also know the rest of the data set S \\ {x} and
    the accounted mechanism parameters. A gradient canary (the audit hook) is described by the parameter
    coordinates of its private and public directions and by the sign each candidate gives the private one.
    """

    model: Model
    candidates: torch.Tensor  # [V, d]
    label: int
    prior: torch.Tensor  # [V]
    rest_x: torch.Tensor | None = None
    rest_y: torch.Tensor | None = None
    noise_multiplier: float | None = None
    sample_rate: float | None = None
    clip_norm: float | None = None
    canary_private_coordinate: int | None = None
    canary_public_coordinate: int | None = None
    candidate_signs: torch.Tensor | None = None  # [V] ±1 for a gradient canary


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
    scores: torch.Tensor  # [R, V]

    @property
    def guess(self) -> torch.Tensor:
        return self.scores.argmax(dim=1)


class Attack(ABC):
    """Base class: subclasses set ``name``, ``threat_model`` and ``supports`` and implement ``infer``."""

    name: ClassVar[str]
    threat_model: ClassVar[ThreatModel]
    supports: ClassVar[frozenset[AttributeKind]] = frozenset({"categorical"})
    needs_gradient_canary: ClassVar[bool] = False

    def fit(self, knowledge: Knowledge) -> Attack:
        self.knowledge = knowledge
        return self

    @abstractmethod
    def infer(self, view: View) -> AttackOutput: ...
