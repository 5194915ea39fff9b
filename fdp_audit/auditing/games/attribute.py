"""The ``attribute`` game (docs/games.md): the canary is a real record whose first protected attribute is drawn from
the known prior ``audit.target_prior`` over the most frequent categories; final-model attacks (prior, black box,
white box) guess it. Ball = max prior; the limit is Theorem 4's ``1 − f(Ball)``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch

from attacks import Attack, Knowledge, View
from attacks.base import ShadowTrainer
from fdp_audit.accounting.events import Relation
from fdp_audit.accounting.mechanism import MechanismAccountant
from fdp_audit.auditing.games import base
from fdp_audit.auditing.games.categorical import GameRecord, attribute_section, candidate_scores, rate_comparisons
from fdp_audit.auditing.third_party import load_mechanism, mechanism_calls, train_third_party
from fdp_audit.auditing.user_training import train_user_trials
from fdp_audit.claim import Claim
from fdp_audit.config import Config
from fdp_audit.data.features import CandidateMap
from fdp_audit.data.prepare import PreparedData
from fdp_audit.errors import BadInputError
from fdp_audit.integrations import checked_user_trainer
from fdp_audit.training.engine import Canaries, TrainingProblem
from fdp_audit.training.run import build_problem


@dataclass(frozen=True)
class AttributeSetup(base.Setup):
    """The attribute game's setup: the training problem and the adversary's knowledge (:class:`base.Setup`) and the
    canary record in each of its candidate forms.

    Attributes:
        candidates: the canary record with each candidate protected value, shape (V, d) in model-input units.
        label: the canary's label (a class index).
        candidate_names: the V candidate values as the data name them, in the order of ``candidates``.
    """

    candidates: torch.Tensor  # [V, d]: the canary record with each candidate value
    label: int
    candidate_names: tuple[str, ...]


def third_party_trainer(config: Config) -> ShadowTrainer | None:
    """How an adversary runs an audited third-party function, or the user's training, for its shadow models
    (None: built-in).

    Args:
        config: the audit's configuration.

    Returns:
        A function ``(problem, seed, indices, canaries)`` yielding each shadow model's parameters, or None.
    """
    if config.mechanism.training is not None:
        def train_user(problem: TrainingProblem, seed: int, indices, canaries: Canaries):
            trainer = checked_user_trainer(config, problem)
            for _, view in train_user_trials(trainer, seed, torch.as_tensor(list(indices)), canaries, False):
                yield view.params

        return train_user
    if config.mechanism.third_party is None:
        return None
    mechanism = load_mechanism(config.mechanism.third_party)

    def train(problem: TrainingProblem, seed: int, indices, canaries: Canaries):
        calls = mechanism_calls(len(indices), config.audit.trial_timeout)
        for _, view in train_third_party(mechanism, problem, seed, torch.as_tensor(list(indices)), canaries, False,
                                         calls):
            yield view.params

    return train


def record_canaries(setup: AttributeSetup, secrets: np.ndarray) -> Canaries:
    """Each trial's canary: the candidate record its secret names, in the private and the public population.

    Args:
        setup: the game's setup (its candidate records and the canary's label).
        secrets: each trial's candidate index, shape (R,).

    Returns:
        One canary per trial.
    """
    n = len(secrets)
    present = torch.ones(n, dtype=torch.bool)
    return Canaries(setup.candidates[torch.as_tensor(secrets)], torch.full((n,), setup.label, dtype=torch.long),
                    present, present)


class PriorBallLimit:
    """The stated limit of a game whose secret is drawn from ``audit.target_prior`` (the attribute and image games):
    Ball is the prior's largest probability, the limit Theorem 4's ``1 − f(Ball)`` under add/remove neighbours."""

    def stated_ball(self, row: dict[str, Any], config: Config, where: str) -> float:
        """Ball of the stated configuration: its prior's largest probability.

        Args:
            row: the stored comparison.
            config: the configuration the results state.
            where: the row's place in the results, for errors.

        Returns:
            ``max(audit.target_prior)``.
        """
        return max(config.audit.target_prior)

    def stated_limit(self, ball: float, accountant: Callable[[str], MechanismAccountant]) -> float:
        """Theorem 4's ``1 − f(Ball)`` under add/remove neighbours.

        Args:
            ball: the comparison's Ball.
            accountant: the stated claim's accountant of a relation (``Relation.ADD_REMOVE`` or ``Relation.REPLACE``).

        Returns:
            The limit.
        """
        return float(accountant(Relation.ADD_REMOVE).bound(ball))


class AttributeGame(PriorBallLimit, base.Game[GameRecord]):
    """The ``attribute`` game (docs/games.md, "Games"): each trial trains with one record canary whose first protected
    attribute is drawn from ``audit.target_prior``, and the final-model attacks (prior, black box, white box) guess
    it. Their success rate is judged against Theorem 4's ``1 − f(Ball)`` with Ball the largest prior probability."""

    name = "attribute"
    stream_block = 1
    report = base.ReportView(
        "attribute", "Attribute inference · record canaries",
        "Canaries are ordinary training records whose protected value is drawn from the prior; each trial trains a "
        "model with one canary, and the attacks see only the trained model (black-box or white-box).",
        label="attribute, record canaries")

    def setup(self, config: Config, data: PreparedData) -> AttributeSetup:
        """The canary's candidates (records with the public image Ψ(x) and label of the population's first record x
        and different protected parts, as Ψ gives them), the training problem, and shadow models trained on the
        population split, which the adversary owns.

        Args:
            config: the audit's configuration.
            data: its prepared data and Ψ.

        Returns:
            The setup with the candidate records, the canary's label and the candidates' names.

        Raises:
            BadInputError: Ψ gives no candidate records (not a ``CandidateMap``), or fewer than ``audit.target_prior``
                has values.
        """
        psi = data.public_map
        if not isinstance(psi, CandidateMap):
            raise BadInputError(f"the attribute game needs a Ψ that gives records with one public image and "
                                f"different protected parts (canary_candidates); {psi.spec()['kind']!r} does not",
                                "data.public_map")
        prior = np.asarray(config.audit.target_prior, dtype=float)
        found = psi.canary_candidates(torch.as_tensor(data.population.x[0]), data.population, len(prior))
        if len(found.names) < len(prior):
            raise BadInputError(f"{len(prior)} prior values but Ψ gives only {len(found.names)} records with the "
                                f"canary's public image ({', '.join(found.names)})", "audit.target_prior")
        label = int(data.population.y[0])
        problem = build_problem(config, data)
        x, y = data.tensors()
        # shadow models are trained on the population split, which the adversary owns (docs/games.md)
        shadow_problem = build_problem(config, replace(data, train=data.population))
        knowledge = Knowledge(problem.model, found.records, label, torch.as_tensor(prior, dtype=torch.float32), x, y,
                              shadow_problem=shadow_problem, shadow_seed=config.seed + 1,
                              shadow_trainer=third_party_trainer(config))
        return AttributeSetup(problem, knowledge, found.records, label, found.names)

    def secrets(self, config: Config, setup: base.Setup, indices: np.ndarray) -> np.ndarray:
        """Each trial's candidate index drawn from ``audit.target_prior``.

        Args:
            config: the audit's configuration (its seed).
            setup: what :meth:`setup` built.
            indices: the trials' model indices, shape (R,).

        Returns:
            Candidate indices, shape (R,).
        """
        return base.prior_secrets(config.seed, indices, config.audit.target_prior)

    def canaries(self, config: Config, setup: AttributeSetup, indices: np.ndarray) -> Canaries:
        """Each trial's canary record (:func:`record_canaries`).

        Args:
            config: the audit's configuration.
            setup: what :meth:`setup` built.
            indices: the trials' model indices, shape (R,).

        Returns:
            One canary per trial.
        """
        return record_canaries(setup, self.secrets(config, setup, indices))

    def score(self, attacks: dict[str, Attack], view: View) -> dict[str, np.ndarray]:
        """Every attack's score of each candidate value.

        Args:
            attacks: the fitted attacks, by name.
            view: what the adversary sees of the chunk's R trained models.

        Returns:
            Name → float64 array of shape (R, V).
        """
        return candidate_scores(attacks, view)

    def record(self, config: Config, setup: AttributeSetup, secrets: np.ndarray, scores: dict[str, np.ndarray],
               threat_models: dict[str, str]) -> GameRecord:
        """The played game with the prior ``audit.target_prior``.

        Args:
            config: the audit's configuration.
            setup: what :meth:`setup` built.
            secrets: every trial's secret, in trial order.
            scores: every attack's scores of every trial, in trial order.
            threat_models: each attack's threat model.

        Returns:
            The game's record.
        """
        return GameRecord(self.name, secrets, scores, np.asarray(config.audit.target_prior, dtype=float),
                          threat_models, setup.candidate_names)

    def comparisons(self, record: GameRecord, claim: Claim, selection_level: float) -> list[base.RateComparison]:
        """Each attack's success against Theorem 4's ``1 − f(Ball)``, Ball the prior's largest probability.

        Args:
            record: the played game.
            claim: the privacy claim under audit.
            selection_level: the per-bound level at which a test chosen on a selection split is chosen.

        Returns:
            One rate comparison per attack besides the prior.
        """
        return rate_comparisons(record, float(claim.add_remove.bound(record.prior.max())), self.name)

    def planned(self, config: Config, data: PreparedData, claim: Claim) -> list[base.PlannedComparison]:
        """A rate comparison per configured attack besides the prior, judged on half the trials.

        Args:
            config: the audit's configuration.
            data: its prepared data.
            claim: the privacy claim under audit.

        Returns:
            The planned comparisons.
        """
        ball = max(config.audit.target_prior)
        trials = base.judged_on_half(config.audit.trials)
        return [base.PlannedComparison(base.RateComparison(self.name, self.name, name, attack.threat_model, trials, 0,
                                                           ball, float(claim.add_remove.bound(ball))),
                                       base.judged_on_half)
                for name, attack in self.attacks(config.audit.attacks).items() if name != "prior"]

    def sections(self, record: GameRecord, judgements: base.Judgements, claim: Claim,
                 alpha: float) -> list[dict[str, Any]]:
        """The attribute section (:func:`~fdp_audit.auditing.games.categorical.attribute_section`).

        Args:
            record: the played game.
            judgements: the gate's evaluation of every comparison.
            claim: the privacy claim under audit.
            alpha: the verdict's level.

        Returns:
            One section.
        """
        fallback = float(claim.add_remove.bound(float(record.prior.max())))
        return [attribute_section(record, judgements, self.name, self.canary, fallback, alpha)]
