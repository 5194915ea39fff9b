"""The gradient-canary games (docs/games.md): binary games whose hidden bit is seen through a canary gradient.

* ``distinguishing`` (replacement): the bit picks x₀ or x₁ with the same Ψ, whose private gradients are ∓ along a
  coordinate no real record touches; ``iterates`` attacks score the bit. The same trials are the binary
  attribute game with a uniform prior (Ball = ½) and give the ROC.
* ``simulator`` (insertion/deletion, Algorithm 2 of the FDP paper): the bit picks the mechanism on S ∪ {x} or the
  simulator, whose public batches are drawn from S ∪ {x'} (same Ψ as x, the other private value) and whose
  private batches come from S only; its optimal ROC is Theorem 5's f.

The canary's coordinates are appended all-zero public columns; further such columns carry only the noise, so
the iterates attacks estimate its scale from the release instead of trusting the claimed noise multiplier
(:mod:`attacks.iterates`). Every attack's decision rule is fitted on a selection split of the trials and judged
on the rest (:mod:`fdp_audit.auditing.decision`); the ε comparisons select their test on a quarter of the trials
(:func:`fdp_audit.auditing.stats.select_test`).
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch

from attacks import Attack, Knowledge, View
from fdp_audit.accounting.events import Relation
from fdp_audit.accounting.mechanism import MechanismAccountant
from fdp_audit.auditing import user_training
from fdp_audit.auditing.games import base
from fdp_audit.auditing.games.categorical import GameRecord, attribute_section, candidate_scores, rate_comparisons
from fdp_audit.auditing.roc import roc_summary
from fdp_audit.auditing.stats import roc_counts, select_test, threshold_split, tightness
from fdp_audit.claim import Claim
from fdp_audit.config import Config
from fdp_audit.data.encoding import ColumnGroup, EncodedData
from fdp_audit.data.features import WidenableMap
from fdp_audit.data.prepare import PreparedData
from fdp_audit.errors import BadInputError
from fdp_audit.training.engine import Canaries
from fdp_audit.training.run import build_problem

NOISE_COLUMNS = 14  # further all-zero columns: their weights show the iterates attacks the release's noise alone
CANARY_COLUMNS = ("audit-canary-private", "audit-canary-public",
                  *(f"audit-noise-{i}" for i in range(NOISE_COLUMNS)))


def with_canary_columns(data: PreparedData) -> PreparedData:
    """Append the all-zero public :data:`CANARY_COLUMNS`: the first-layer weights on them receive no gradient
    from any real record, so a gradient canary placed on the first two is seen against the noise alone, and
    the others carry nothing but the noise (what the iterates attacks estimate its scale from).

    Args:
        data: the prepared data; its Ψ must extend to appended public columns (a ``WidenableMap``).

    Returns:
        The data with the columns appended to every split and to Ψ.

    Raises:
        BadInputError: Ψ does not extend to appended public columns.
    """
    d = data.train.n_features
    added = tuple(ColumnGroup(name, "numeric", d + i, d + i + 1) for i, name in enumerate(CANARY_COLUMNS))
    groups = data.train.groups + added

    def widen(part: EncodedData) -> EncodedData:
        x = np.concatenate([part.x, np.zeros((part.n_rows, len(CANARY_COLUMNS)), dtype=part.x.dtype)], axis=1)
        return EncodedData(x, part.y, groups, part.classes, part.label, part.fingerprint)

    psi = data.public_map
    if not isinstance(psi, WidenableMap):
        raise BadInputError(f"the gradient-canary games need a Ψ that extends to appended public columns "
                            f"(with_public_columns); {psi.spec()['kind']!r} does not", "data.public_map")
    widened = psi.with_public_columns(added)
    return PreparedData(widen(data.train), widen(data.population), widen(data.test), widened, data.table_name)


def bayes_optimal_success(relation: MechanismAccountant) -> float:
    """Best success of any adversary in the binary canary game of the accountant's relation with a uniform prior:
    ½ + δ(0)/2, δ(0) being the total-variation distance of the two worlds (½ + δ_replace(0)/2 for the ±C
    canary). The pessimistic PLD makes δ(0) an upper estimate, which can only lower the attack's reported share of
    the optimum.

    Args:
        relation: the claim's accountant of the game's neighbouring relation.

    Returns:
        ½ + δ(0)/2.
    """
    return 0.5 + 0.5 * float(relation.delta(0.0))


def binary_game_bound(add_remove: MechanismAccountant, relation: MechanismAccountant) -> float:
    """The most a claim allows in a binary game with a uniform prior (Ball = ½) whose two worlds are neighbours
    under ``relation``: Theorem 4's ``1 − f(½)`` and the Bayes-optimal success ``½ + δ_relation(0)/2`` of any
    test between two outputs whose trade-off is at least the relation's curve — the smaller of two valid
    bounds. For the replacement (±C canary) game they agree at p = 1; for the simulator game (insertion or
    deletion, Theorem 5 of the FDP paper) the second is the tight one (Φ(μ/2) against Φ(μ) for μ-GDP).

    Args:
        add_remove: the claim's accountant under add/remove neighbours (Theorem 4's f).
        relation: the claim's accountant of the game's relation.

    Returns:
        ``min(1 − f(½), ½ + δ_relation(0)/2)``.
    """
    return min(float(add_remove.bound(0.5)), bayes_optimal_success(relation))


LOW_FPR = 0.05  # the ROC's points up to this false-positive rate are all kept: the log-log plot magnifies them


def full_roc(record: GameRecord, attack: str) -> dict[str, list[float]]:
    """The attack's empirical ROC over every trial, for the report's plots: every point at a false-positive rate up
    to :data:`LOW_FPR`, and about 200 above it.

    Args:
        record: the played binary game.
        attack: the attack's name; its score is the difference of its two candidates' scores.

    Returns:
        ``fpr`` and ``tpr``, lists of one length from (0, 0) to (1, 1), thresholds descending.
    """
    score = record.scores[attack][:, 1] - record.scores[attack][:, 0]
    labels = record.labels.astype(bool)
    order = np.unique(score)[::-1]
    tpr = np.array([(score[labels] >= t).mean() if labels.any() else 0.0 for t in order])
    fpr = np.array([(score[~labels] >= t).mean() if (~labels).any() else 0.0 for t in order])
    step = max(1, len(order) // 200)
    kept = (fpr <= LOW_FPR) | (np.arange(len(order)) % step == 0)
    return {"fpr": [0.0, *fpr[kept].tolist(), 1.0], "tpr": [0.0, *tpr[kept].tolist(), 1.0]}


@dataclass(frozen=True)
class GradientCanarySetup(base.Setup):
    """The gradient-canary games' setup: the training problem and the adversary's knowledge (:class:`base.Setup`) and
    where the canary lies.

    Attributes:
        width: the model's inputs, the appended canary and noise-only columns included.
        n_parameters: the model's parameters (the length of a flattened update).
        private_coordinate: the parameter index the canary's private gradient lies along.
        public_coordinate: the parameter index its public gradient lies along.
        raw_norm: the canary's private gradient norm before clipping, K·C (K = ``audit.canary_norm_factor``).
        clip_norm: the clipping norm C.
    """

    width: int  # model inputs, canary columns included
    n_parameters: int
    private_coordinate: int
    public_coordinate: int
    raw_norm: float  # K·C: the canary's private gradient norm before clipping
    clip_norm: float


class GradientCanaryGame(base.Game[GameRecord]):
    """A binary game on a gradient canary; subclasses say what the bit changes (:attr:`candidate_signs`,
    :meth:`in_private`) and under which neighbouring relation the two worlds are judged."""

    gradient_canary = True
    needs_attack = True
    bounds_per_attack = 2
    candidate_names: ClassVar[tuple[str, str]]
    candidate_signs: ClassVar[tuple[float, float]]  # the private gradient's sign of each world's canary

    @abstractmethod
    def in_private(self, bit: torch.Tensor) -> torch.Tensor:
        """Whether each trial's canary is in the private population.

        Args:
            bit: each trial's secret bit, float tensor of shape (R,).

        Returns:
            Bool tensor of shape (R,).
        """

    def relation(self, claim: Claim) -> MechanismAccountant:
        """The claim's accountant of the game's neighbouring relation (:attr:`epsilon_relation`).

        Args:
            claim: the privacy claim under audit.

        Returns:
            The accountant.
        """
        return claim.accountant(self.epsilon_relation)

    def setup(self, config: Config, data: PreparedData) -> GradientCanarySetup:
        """The problem with the gradient canary: on the built-in engine, the data with :data:`CANARY_COLUMNS` appended
        and the canary on row 0 of the first layer's weight (the other appended columns' weights carry noise alone); on
        the user's own training, the coordinates of the canary head.

        Args:
            config: the audit's configuration.
            data: its prepared data and Ψ.

        Returns:
            The setup, with the canary's coordinates, its raw norm ``K·C`` (``audit.canary_norm_factor`` times the clip
            norm) and the clip norm.

        Raises:
            BadInputError: a built-in ``cnn`` or ``module`` model (the first layer must be linear), or a Ψ that does not
                extend to appended columns.
        """
        if config.mechanism.training is not None:
            return self._user_training_setup(config, data)
        if config.model.kind in ("cnn", "module"):
            raise BadInputError("gradient-canary games on the built-in engine need a built-in model whose first layer "
                                "is linear", "model.kind")
        widened = with_canary_columns(data)
        problem = build_problem(config, widened)
        d, width = data.train.n_features, widened.train.n_features
        private_coordinate, public_coordinate = d, d + 1  # row 0 of the first layer's weight comes first
        first_layer_rows = problem.model.shapes()["layer0.weight"][0]
        noise_coordinates = tuple(row * width + column for row in range(first_layer_rows)
                                  for column in range(d, width) if (row, column) != (0, private_coordinate))
        clip_norm = problem.hyper.clip_norm
        x, y = widened.tensors()
        knowledge = Knowledge(problem.model, torch.zeros(2, width), 0, torch.tensor([0.5, 0.5]), x, y,
                              clip_norm=clip_norm, canary_private_coordinate=private_coordinate,
                              canary_public_coordinate=public_coordinate,
                              candidate_signs=torch.tensor(self.candidate_signs),
                              candidate_public_signs=torch.tensor([-1.0, 1.0]), noise_coordinates=noise_coordinates)
        return GradientCanarySetup(problem, knowledge, width, problem.model.n_parameters, private_coordinate,
                                   public_coordinate, config.audit.canary_norm_factor * clip_norm, clip_norm)

    def _user_training_setup(self, config: Config, data: PreparedData) -> GradientCanarySetup:
        """The user's own training (:mod:`fdp_audit.auditing.user_training`): the canary is a marked record whose
        gradient lies on the first coordinate of the canary head that wraps the user's module; the head's other
        coordinates carry the noise alone, and the release holds the head's coordinates only. There is no public
        part in DP-SGD: in the simulator game the bit takes the record out of the data set (whose size changes)."""
        problem = build_problem(config, data)
        width, clip_norm = data.train.n_features, config.mechanism.clip_norm
        coordinates = 1 + user_training.NOISE_COORDINATES
        knowledge = Knowledge(problem.model, torch.zeros(2, width), 0, torch.tensor([0.5, 0.5]), clip_norm=clip_norm,
                              canary_private_coordinate=0, candidate_signs=torch.tensor(self.candidate_signs),
                              noise_coordinates=tuple(range(1, coordinates)))
        return GradientCanarySetup(problem, knowledge, width, coordinates, 0, 1,
                                   config.audit.canary_norm_factor * clip_norm, clip_norm)

    def secrets(self, config: Config, setup: base.Setup, indices: np.ndarray) -> np.ndarray:
        """Each trial's bit, 1 with probability ½ from the trial's GAME-stream uniform.

        Args:
            config: the audit's configuration (its seed).
            setup: what :meth:`setup` built.
            indices: the trials' model indices, shape (R,).

        Returns:
            Int64 bits, shape (R,).
        """
        return (base.trial_uniforms(config.seed, indices) < 0.5).numpy().astype(np.int64)

    def canaries(self, config: Config, setup: GradientCanarySetup, indices: np.ndarray) -> Canaries:
        """The trials' gradient canaries: a private gradient ``±K·C`` on the private coordinate (the bit's sign), a
        public gradient ``C`` on the public coordinate, in the private population as :meth:`in_private` says.

        Args:
            config: the audit's configuration.
            setup: what :meth:`setup` built.
            indices: the trials' model indices, shape (R,).

        Returns:
            One canary per trial.
        """
        n = len(indices)
        bit = torch.as_tensor(self.secrets(config, setup, indices), dtype=torch.float32)
        # the simulator's public batches hold x' (same Ψ, the other private value): only a public loss that reads
        # protected features can tell it from x
        direction = torch.zeros(n, setup.n_parameters)
        direction[:, setup.private_coordinate] = setup.raw_norm * (2 * bit - 1)
        public_direction = torch.zeros(n, setup.n_parameters)
        public_direction[:, setup.public_coordinate] = setup.clip_norm
        return Canaries(torch.zeros(n, setup.width), torch.zeros(n, dtype=torch.long), self.in_private(bit),
                        torch.ones(n, dtype=torch.bool), direction, public_direction)

    def score(self, attacks: dict[str, Attack], view: View) -> dict[str, np.ndarray]:
        """Every attack's score of each of the two candidates.

        Args:
            attacks: the fitted attacks, by name.
            view: what the adversary sees of the chunk's R trained models.

        Returns:
            Name → float64 array of shape (R, 2).
        """
        return candidate_scores(attacks, view)

    def record(self, config: Config, setup: base.Setup, secrets: np.ndarray, scores: dict[str, np.ndarray],
               threat_models: dict[str, str]) -> GameRecord:
        """The played game with a uniform prior over the two candidates.

        Args:
            config: the audit's configuration.
            setup: what :meth:`setup` built.
            secrets: every trial's secret, in trial order.
            scores: every attack's scores of every trial, in trial order.
            threat_models: each attack's threat model.

        Returns:
            The game's record.
        """
        return GameRecord(self.name, secrets, scores, np.array([0.5, 0.5]), threat_models, self.candidate_names)

    def epsilon_comparisons(self, record: GameRecord, claim: Claim,
                            selection_level: float) -> list[base.EpsilonComparison]:
        """One ε comparison per attack: the orientation and threshold of the score difference are chosen on
        every fourth trial (:func:`~fdp_audit.auditing.stats.select_test`, with Clopper–Pearson bounds at the
        per-bound ``selection_level``), the test's errors are counted on the other three quarters, and the
        comparison states the claim it is judged against (the gate re-derives f and ε from it).

        Args:
            record: the played game.
            claim: the privacy claim under audit.
            selection_level: the per-bound level of the test selection.

        Returns:
            The ε comparisons, none for the prior.
        """
        rows = []
        selection, evaluation = threshold_split(len(record.labels))
        labels = record.labels.astype(bool)
        stated = base.stated_claim(self.relation(claim).spec)
        for attack, scores in record.scores.items():
            if attack == "prior":
                continue
            score = scores[:, 1] - scores[:, 0]
            test = select_test(score[selection], labels[selection], selection_level)
            counts = roc_counts(test.orientation * score[evaluation], labels[evaluation], np.array([test.threshold]))
            rows.append(base.EpsilonComparison(record.game, attack, record.threat_models[attack],
                                               self.epsilon_relation, test.orientation,
                                               tuple(counts.thresholds.tolist()),
                                               tuple(counts.false_positives.tolist()),
                                               tuple(counts.false_negatives.tolist()), counts.negatives,
                                               counts.positives, claim.delta, stated))
        return rows

    def comparisons(self, record: GameRecord, claim: Claim,
                    selection_level: float) -> list[base.RateComparison | base.EpsilonComparison]:
        """Each attack's success rate against the binary game's limit (:func:`binary_game_bound`) and its ε
        comparison (:meth:`epsilon_comparisons`).

        Args:
            record: the played game.
            claim: the privacy claim under audit.
            selection_level: the per-bound level at which a test chosen on a selection split is chosen.

        Returns:
            The rate comparisons, then the ε comparisons.
        """
        bound = binary_game_bound(claim.add_remove, self.relation(claim))
        return (rate_comparisons(record, bound, f"{self.name}-attribute")
                + self.epsilon_comparisons(record, claim, selection_level))

    def planned(self, config: Config, data: PreparedData, claim: Claim) -> list[base.PlannedComparison]:
        """A rate comparison (judged on half the trials) and an ε comparison (judged on three quarters) per
        configured attack besides the prior.

        Args:
            config: the audit's configuration.
            data: its prepared data.
            claim: the privacy claim under audit.

        Returns:
            The planned comparisons.
        """
        trials = config.audit.trials
        attacks = {name: attack for name, attack in self.attacks(config.audit.attacks, config).items()
                   if name != "prior"}
        bound = binary_game_bound(claim.add_remove, self.relation(claim))
        evaluated = base.judged_on_three_quarters(trials)
        stated = base.stated_claim(self.relation(claim).spec)
        return ([base.PlannedComparison(base.RateComparison(self.name, f"{self.name}-attribute", name,
                                                            attack.threat_model, base.judged_on_half(trials), 0, 0.5,
                                                            bound), base.judged_on_half)
                 for name, attack in attacks.items()]
                + [base.PlannedComparison(base.EpsilonComparison(self.name, name, attack.threat_model,
                                                                 self.epsilon_relation, 1, (0.0,), (0,), (0,),
                                                                 evaluated // 2, evaluated - evaluated // 2,
                                                                 claim.delta, stated), base.judged_on_three_quarters)
                   for name, attack in attacks.items()])

    def sections(self, record: GameRecord, judgements: base.Judgements, claim: Claim,
                 alpha: float) -> list[dict[str, Any]]:
        """The attribute view (success against the binary game's limit) and the distinguishing view (ROC and ε
        lower bound) of the same trials.

        Args:
            record: the played game.
            judgements: the gate's evaluation of every comparison.
            claim: the privacy claim under audit.
            alpha: the verdict's level.

        Returns:
            The attribute section, then the game's own section with, per attack, its success, ROC and ε bounds.
        """
        fallback = float(claim.add_remove.bound(float(record.prior.max())))
        sections = [attribute_section(record, judgements, f"{self.name}-attribute",
                                      self.canary, fallback, alpha)]
        optimum = bayes_optimal_success(self.relation(claim))
        distinguishers = []
        for attack in record.scores:
            if attack == "prior":
                continue
            judged = judgements.find("epsilon", self.name, attack)
            j = judged.evaluation
            successes = int((record.scores[attack].argmax(axis=1) == record.labels).sum())
            distinguishers.append({
                "attack": attack, "threat_model": record.threat_models[attack], "trials": int(len(record.labels)),
                "success": successes / len(record.labels), "optimal_success": optimum,
                "roc": full_roc(record, attack),
                **roc_summary(record.scores[attack][:, 1] - record.scores[attack][:, 0], record.labels.astype(bool)),
                "points": j["points"], "orientation": j["orientation"],
                "epsilon_lower_bound": j["epsilon_lower_bound"], "epsilon_claimed": j["theoretical"],
                "epsilon_ratio": j["epsilon_ratio"], "epsilon_family": j["epsilon_family"],
                "epsilon_lower_bound_cp": j["epsilon_lower_bound_cp"], "epsilon_ratio_cp": j["epsilon_ratio_cp"],
                "status": judged.status})
        sections.append({"game": self.name, "trials": int(len(record.labels)), "relation": self.epsilon_relation,
                         "attacks": distinguishers})
        return sections

    def stated_ball(self, row: dict[str, Any], config: Config, where: str) -> float:
        """The uniform binary prior's Ball.

        Args:
            row: the stored comparison.
            config: the configuration the results state.
            where: the row's place in the results, for errors.

        Returns:
            ½.
        """
        return 0.5

    def stated_limit(self, ball: float, accountant: Callable[[str], MechanismAccountant]) -> float:
        """The binary game's limit under the stated claim (:func:`binary_game_bound`).

        Args:
            ball: the comparison's Ball.
            accountant: the stated claim's accountant of a relation (``Relation.ADD_REMOVE`` or ``Relation.REPLACE``).

        Returns:
            ``min(1 − f(½), ½ + δ_relation(0)/2)``.
        """
        return binary_game_bound(accountant(Relation.ADD_REMOVE),
                                 accountant(self.epsilon_relation))

    def limit_source(self) -> str:
        """Theorem 4 at Ball = ½, or the best any test of two neighbours under the game's relation achieves.

        Returns:
            The source in words.
        """
        return f"binary game: min(1 − f(½), ½ + δ(0)/2 of {self.epsilon_relation.replace('_', '/')} neighbours)"


def _gradient_canary_view(game: str) -> base.ReportView:
    """The attribute view of a gradient-canary game's trials."""
    return base.ReportView(
        "attribute", f"Attribute inference · gradient canaries ({game} game)",
        f"Canaries are crafted gradients inserted into the noisy updates of the {game} game's trials, the secret "
        "choosing their sign; the attacks observe every update (threat model: iterates), the adversary the "
        f"accounting assumes. The same trials give the {game} game's ε lower bound below.",
        label=f"attribute, gradient canaries ({game} game)")


class DistinguishingGame(GradientCanaryGame):
    """The ``distinguishing`` game (docs/games.md, "Games"; replace-one): a hidden bit picks the canary x₀ or x₁, with
    the same Ψ(x) and private gradients ∓ along a coordinate no real record touches, and the iterates attacks score
    the bit from every noisy update. Judged against the claimed curve f of the replace relation (ε lower bound) and,
    as a binary game with a uniform prior, against ``min(1 − f(½), ½ + δ_replace(0)/2)`` (:func:`binary_game_bound`):
    Theorem 4's bound or the Bayes-optimal success, whichever is smaller."""

    name = "distinguishing"
    stream_block = 0
    epsilon_relation = Relation.REPLACE
    canary = "gradient (distinguishing trials)"
    report = base.ReportView(
        "distinguishing", "Distinguishing game",
        "A hidden bit chooses the canary x₀ or its neighbour x₁, with the same Ψ(x) and opposite private gradients; "
        "the attacks observe every update. Judged against the claimed curve f of the replace relation.")
    attribute_report = _gradient_canary_view(name)
    candidate_names = ("x0 (s=-1)", "x1 (s=+1)")
    candidate_signs = (-1.0, 1.0)

    def in_private(self, bit: torch.Tensor) -> torch.Tensor:
        """Every trial's canary (x₀ or x₁) is in the private population.

        Args:
            bit: each trial's secret bit, shape (R,).

        Returns:
            All True, shape (R,).
        """
        return torch.ones(len(bit), dtype=torch.bool)

    def tightness_rows(self, record: GameRecord, judgements: base.Judgements,
                       claim: Claim) -> list[dict[str, Any]]:
        """How close the iterates attack comes to the Bayes-optimal adversary of this game, and how tight
        Theorem 4 itself is: optimum = ½ + δ_replace(0)/2 for the ±C canary with a uniform binary prior.

        Args:
            record: the played game.
            judgements: the gate's evaluation of every comparison.
            claim: the privacy claim under audit.

        Returns:
            One row (none without an ``iterates`` attack): the claimed ε, the attack's rate, the optimum, Theorem 4's
            bound, the attack's share of the optimum's advantage with its interval, Theorem 4's tightness and the
            simulator game's ε ratio.
        """
        judged = judgements.find("rate", self.name, "iterates", f"{self.name}-attribute")
        if judged is None:
            return []
        j = judged.evaluation
        optimum = bayes_optimal_success(claim.replace_one)
        bound = float(claim.add_remove.bound(0.5))
        share = tightness(j["rate"], 0.5, optimum)
        ci = None if share is None else [tightness(j["ci_low"], 0.5, optimum), tightness(j["ci_high"], 0.5, optimum)]
        simulator = judgements.find("epsilon", SimulatorGame.name, "iterates")
        return [{"epsilon": float(claim.add_remove.epsilon(claim.delta)), "attack_rate": j["rate"],
                 "optimal_success": optimum, "bound": bound, "attack_advantage_share": share, "ci": ci,
                 "theorem4_tightness": tightness(optimum, 0.5, bound),
                 "simulator_epsilon_ratio": None if simulator is None else simulator.evaluation["epsilon_ratio"]}]


class SimulatorGame(GradientCanaryGame):
    """The ``simulator`` game (docs/games.md, "Games"; insertion/deletion): a hidden bit picks the mechanism on
    S ∪ {x} or the simulator of Algorithm 2 of the FDP paper, whose public batches are drawn from S ∪ {x'} (same Ψ,
    the other private value) and whose private batches from S only; the iterates attacks score the bit. Its optimal
    ROC is Theorem 5's f: judged against the claimed curve f of the add/remove relation."""

    name = "simulator"
    stream_block = 2
    epsilon_relation = Relation.ADD_REMOVE
    canary = "gradient (simulator trials)"
    report = base.ReportView(
        "distinguishing", "Simulator game",
        "A hidden bit chooses the mechanism trained with the canary, or the simulator of Algorithm 2 (FDP paper), "
        "whose public batches see a neighbour with the same Ψ(x) and whose private batches omit the canary; the "
        "attacks observe every update. Judged against the claimed curve f of the add/remove relation.")
    attribute_report = _gradient_canary_view(name)
    candidate_names = ("simulator", "real")
    candidate_signs = (0.0, 1.0)

    def in_private(self, bit: torch.Tensor) -> torch.Tensor:
        """The canary is in the private population in the real world (bit 1) only.

        Args:
            bit: each trial's secret bit, shape (R,).

        Returns:
            The bits as bool, shape (R,).
        """
        return bit.bool()
