"""The ``reconstruction`` game (docs/accounting.md, docs/games.md): Theorem 4 for continuous protected features.

Each trial inserts one canary into S: a fixed population record (its public part u = Ψ(x) and label are
known to the adversary) whose k continuous protected coordinates are drawn, per trial from the GAME stream,
from a known prior centred at 0 (the training mean of the standardised columns) in model-input units:

* ``gaussian``: ``v ~ N(0, s² I_k)``, so ``Ball(ρ) = F_{χ²_k}(ρ²/s²)`` exactly;
* ``box``: ``v ~ U[−s, s]^k``, Ball the covered fraction of the box (exact for k ≤ 2, otherwise a Monte Carlo
  upper confidence bound, conservative);

with s = ``audit.reconstruction_scale``. Every configured attack that supports continuous features (the prior's
centre, the informed white-box closed form and gradient matching) reconstructs v on every trial, and a trial
succeeds for radius ρ when the L2 distance is at most ρ (:func:`attacks.success.reconstruction_success`), for
every ρ of ``audit.rho_grid``. Theorem 4 bounds each success rate by ``1 − f(Ball(ρ))``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch

from attacks import Attack, Knowledge, View
from attacks.success import reconstruction_success
from fdp_audit.accounting.ball import ball_gaussian, ball_uniform_box
from fdp_audit.accounting.events import Relation
from fdp_audit.accounting.mechanism import MechanismAccountant
from fdp_audit.auditing.games import base
from fdp_audit.auditing.journal import secret_digests
from fdp_audit.auditing.stats import clopper_pearson, lower_confidence_bound
from fdp_audit.claim import Claim
from fdp_audit.config import Config
from fdp_audit.data.features import ContinuousCanary, ContinuousCanaryMap
from fdp_audit.data.prepare import PreparedData
from fdp_audit.errors import BadInputError
from fdp_audit.training import streams
from fdp_audit.training.engine import Canaries
from fdp_audit.training.run import build_problem

METRIC = "l2"


@dataclass(frozen=True)
class ReconstructionRecord:
    """Per-trial truths and every attack's reconstruction, with Ball per radius (the claim's Theorem 4 bound at it,
    ``1 − f(Ball(ρ))``, is :meth:`bounds`)."""

    game: str
    truth: np.ndarray  # [N, k]
    estimates: dict[str, np.ndarray]  # attack -> [N, k]
    rho: np.ndarray  # [G]
    ball: np.ndarray  # [G]
    threat_models: dict[str, str]
    prior: str  # "gaussian" or "box"
    scale: float
    metric: str
    protected_features: tuple[str, ...]

    @property
    def trials(self) -> int:
        return int(self.truth.shape[0])

    def head(self, trials: int) -> ReconstructionRecord:
        """The first ``trials`` trials: the record of the same game played with that many trials.

        Args:
            trials: how many of the first trials to keep.

        Returns:
            The shortened record.
        """
        return replace(self, truth=self.truth[:trials], estimates={k: v[:trials] for k, v in self.estimates.items()})

    def bounds(self, claim: Claim) -> np.ndarray:
        """``1 − f(Ball(ρ))`` per radius under the claim's add/remove curve: ``[G]``.

        Args:
            claim: the privacy claim under audit.

        Returns:
            The bounds, shape (G,).
        """
        return np.asarray(claim.add_remove.bound(self.ball), dtype=float)

    def successes(self, attack: str) -> np.ndarray:
        """Trials with ``d(x̂, x) <= ρ``, per radius: ``[G]`` integers.

        Args:
            attack: the attack's name.

        Returns:
            The success counts per radius of ``rho``.
        """
        hits = reconstruction_success(torch.as_tensor(self.estimates[attack]), torch.as_tensor(self.truth),
                                      self.rho.tolist(), self.metric)
        return hits.sum(dim=0).numpy().astype(np.int64)


def secret_values(seed: int, indices: np.ndarray, prior: str, scale: float, dims: int) -> torch.Tensor:
    """The protected values of the given trials, ``[N, k]`` float64, from the GAME stream (independent of
    the models' training streams).

    Args:
        seed: the audit's seed.
        indices: the trials' model indices, shape (N,).
        prior: ``"gaussian"`` (N(0, s² I_k)) or ``"box"`` (U[−s, s]^k).
        scale: s, in model-input units.
        dims: k, the number of protected coordinates.

    Returns:
        The values, float64 tensor of shape (N, k).
    """
    keys = streams.model_keys(seed, torch.as_tensor(indices))
    if prior == "gaussian":
        return scale * streams.normal(keys, 0, streams.Stream.GAME, dims, dtype=torch.float64)
    return scale * (2.0 * streams.uniform(keys, 0, streams.Stream.GAME, dims).double() - 1.0)


def ball_per_radius(prior: str, scale: float, dims: int, rho: np.ndarray) -> np.ndarray:
    """Ball(ρ) of the canary's prior under the L2 metric (docs/accounting.md); the box's Monte Carlo case uses the
    upper confidence bound.

    Args:
        prior: ``"gaussian"`` or ``"box"``.
        scale: the prior's scale s.
        dims: k, the number of protected coordinates.
        rho: the radii ρ, shape (G,).

    Returns:
        Ball(ρ) per radius, shape (G,): ``F_{χ²_k}(ρ²/s²)`` for the Gaussian prior, the box's covered fraction.
    """
    if prior == "gaussian":
        return np.asarray(ball_gaussian(rho, scale, dims), dtype=float)
    return np.array([ball_uniform_box(float(r), [2.0 * scale] * dims, metric=METRIC).upper for r in rho])


@dataclass(frozen=True)
class ReconstructionSetup(base.Setup):
    """The reconstruction game's setup: the training problem and the adversary's knowledge (:class:`base.Setup`) and
    the canary.

    Attributes:
        canary: the canary record (float64 template with its k continuous protected coordinates at the prior's
            centre 0, the indices of those coordinates and the protected features' names).
        label: the canary's label (a class index).
    """

    canary: ContinuousCanary  # float64, the prior's centre in its protected coordinates
    label: int


def _continuous_canary(data: PreparedData) -> ContinuousCanary:
    """Ψ's canary record (the population's first record) with continuous protected coordinates."""
    psi = data.public_map
    if not isinstance(psi, ContinuousCanaryMap):
        raise BadInputError(f"the reconstruction game needs a Ψ whose protected part is continuous coordinates "
                            f"(continuous_canary); {psi.spec()['kind']!r} is not", "data.public_map")
    return psi.continuous_canary(torch.as_tensor(data.population.x[0]).double())


class ReconstructionGame(base.Game[ReconstructionRecord]):
    """The ``reconstruction`` game (docs/accounting.md, docs/games.md; module docstring): each trial draws the canary's
    k continuous protected coordinates from the ``audit.reconstruction_prior`` of scale ``audit.reconstruction_scale``,
    the attacks that support continuous features reconstruct them, and a trial succeeds at radius ρ when the L2
    distance is at most ρ. Each ρ of ``audit.rho_grid``'s success rate is judged against Theorem 4's
    ``1 − f(Ball(ρ))``."""

    name = "reconstruction"
    stream_block = 3
    report = base.ReportView(
        "reconstruction", "Reconstruction",
        "Each trial draws the canary's continuous protected features from the prior; the attack reconstructs them "
        "from the model and succeeds when it lands within ρ.")
    attribute_kind = "continuous"
    needs_attack = True

    def setup(self, config: Config, data: PreparedData) -> ReconstructionSetup:
        """The canary (Ψ's record with continuous protected coordinates, from the population's first record) and the
        training problem.

        Args:
            config: the audit's configuration.
            data: its prepared data and Ψ.

        Returns:
            The setup with the canary and its label.

        Raises:
            BadInputError: Ψ's protected part is not continuous coordinates.
        """
        canary = _continuous_canary(data)
        problem = build_problem(config, data)
        label = int(data.population.y[0])
        x, y = data.tensors()
        knowledge = Knowledge(problem.model, canary.template[None, :], label, torch.ones(1), x, y,
                              protected_coordinates=canary.coordinates)
        return ReconstructionSetup(problem, knowledge, canary, label)

    def values(self, config: Config, setup: ReconstructionSetup, indices: np.ndarray) -> torch.Tensor:
        """The trials' protected values ``[N, k]`` (:func:`secret_values`).

        Args:
            config: the audit's configuration (its seed and ``audit.reconstruction_prior`` and ``_scale``).
            setup: what :meth:`setup` built.
            indices: the trials' model indices, shape (N,).

        Returns:
            Float64 tensor of shape (N, k).
        """
        audit = config.audit
        return secret_values(config.seed, indices, audit.reconstruction_prior, audit.reconstruction_scale,
                             len(setup.canary.coordinates))

    def secrets(self, config: Config, setup: ReconstructionSetup, indices: np.ndarray) -> np.ndarray:
        """Each trial's secret as an integer: the digest of its protected values (:meth:`values`).

        Args:
            config: the audit's configuration (its seed).
            setup: what :meth:`setup` built.
            indices: the trials' model indices, shape (R,).

        Returns:
            Integer digests, shape (R,).
        """
        return secret_digests(self.values(config, setup, indices).numpy())

    def canaries(self, config: Config, setup: ReconstructionSetup, indices: np.ndarray) -> Canaries:
        """Each trial's canary, the record with its protected values, in both populations.

        Args:
            config: the audit's configuration.
            setup: what :meth:`setup` built.
            indices: the trials' model indices, shape (R,).

        Returns:
            One canary per trial.
        """
        n = len(indices)
        canary_x = setup.canary.with_values(self.values(config, setup, indices))
        dtype = setup.knowledge.rest_x.dtype
        return Canaries(canary_x.to(dtype), torch.full((n,), setup.label, dtype=torch.long),
                        torch.ones(n, dtype=torch.bool), torch.ones(n, dtype=torch.bool))

    def score(self, attacks: dict[str, Attack], view: View) -> dict[str, np.ndarray]:
        """Every attack's reconstruction of the protected values.

        Args:
            attacks: the fitted attacks, by name.
            view: what the adversary sees of the chunk's R trained models.

        Returns:
            Name → float64 array of shape (R, k).
        """
        params = {name: value.detach().cpu() for name, value in view.params.items()}
        return {name: attack.infer(View(params)).estimate.detach().double().numpy()
                for name, attack in attacks.items()}

    def score_width(self, setup: ReconstructionSetup) -> int:
        """The number k of protected coordinates each attack reconstructs.

        Args:
            setup: what :meth:`setup` built.

        Returns:
            k.
        """
        return len(setup.canary.coordinates)

    def record(self, config: Config, setup: ReconstructionSetup, secrets: np.ndarray, scores: dict[str, np.ndarray],
               threat_models: dict[str, str]) -> ReconstructionRecord:
        """The played game: the trials' true values, the reconstructions and Ball at every radius of ``audit.rho_grid``.

        Args:
            config: the audit's configuration.
            setup: what :meth:`setup` built.
            secrets: every trial's secret, in trial order.
            scores: every attack's scores of every trial, in trial order.
            threat_models: each attack's threat model.

        Returns:
            The game's record.
        """
        audit = config.audit
        rho = np.asarray(audit.rho_grid, dtype=float)
        trials = self.trial_indices(len(secrets))
        ball = ball_per_radius(audit.reconstruction_prior, audit.reconstruction_scale, len(setup.canary.coordinates),
                               rho)
        return ReconstructionRecord(self.name, self.values(config, setup, trials).numpy(),
                                    {name: np.asarray(value, dtype=float) for name, value in scores.items()}, rho,
                                    ball, threat_models, audit.reconstruction_prior,
                                    audit.reconstruction_scale, METRIC, setup.canary.names)

    def comparisons(self, record: ReconstructionRecord, claim: Claim,
                    selection_level: float) -> list[base.RateComparison]:
        """One rate comparison per (attack, ρ), the prior (which realises Ball) excepted.

        Args:
            record: the played game.
            claim: the privacy claim under audit (the limits ``1 − f(Ball(ρ))``).
            selection_level: unused (nothing is selected).

        Returns:
            The comparisons, judged on every trial.
        """
        rows, bounds = [], record.bounds(claim)
        for attack in record.estimates:
            if attack == "prior":
                continue
            for rho, successes, ball, bound in zip(record.rho, record.successes(attack), record.ball, bounds,
                                                   strict=True):
                rows.append(base.RateComparison(record.game, record.game, attack, record.threat_models[attack],
                                                record.trials, int(successes), float(ball), float(bound),
                                                rho=float(rho)))
        return rows

    def planned(self, config: Config, data: PreparedData, claim: Claim) -> list[base.PlannedComparison]:
        """One comparison per configured attack besides the prior and per radius, judged on every trial; none when Ψ
        does not give a continuous canary (the game refuses the data itself).

        Args:
            config: the audit's configuration.
            data: its prepared data.
            claim: the privacy claim under audit.

        Returns:
            The planned comparisons.
        """
        try:
            canary = _continuous_canary(data)
        except BadInputError:
            return []  # the game itself refuses such data, with its own message
        audit = config.audit
        rho = np.asarray(audit.rho_grid, dtype=float)
        balls = ball_per_radius(audit.reconstruction_prior, audit.reconstruction_scale, len(canary.coordinates), rho)
        return [base.PlannedComparison(base.RateComparison(self.name, self.name, name, attack.threat_model,
                                                           audit.trials, 0, float(ball),
                                                           float(claim.add_remove.bound(ball)), rho=float(r)),
                                       base.judged_on_all)
                for name, attack in self.attacks(audit.attacks).items() if name != "prior"
                for r, ball in zip(rho, balls, strict=True)]

    def sections(self, record: ReconstructionRecord, judgements: base.Judgements, claim: Claim,
                 alpha: float) -> list[dict[str, Any]]:
        """Success within each radius ρ against Ball(ρ) and 1 − f(Ball(ρ)); the prior attack is shown for
        reference and not judged.

        Args:
            record: the played game.
            judgements: the gate's evaluation of every comparison.
            claim: the privacy claim under audit.
            alpha: the level of the Clopper–Pearson intervals of unjudged points.

        Returns:
            One section: the prior, the metric, the protected features and, per attack, one point per radius.
        """
        attacks, bounds = [], record.bounds(claim)
        for attack in record.estimates:
            points = []
            for rho, successes, ball, bound in zip(record.rho, record.successes(attack), record.ball, bounds,
                                                   strict=True):
                successes, trials = int(successes), record.trials
                ci = clopper_pearson(successes, trials, alpha)
                lower = lower_confidence_bound(successes, trials, alpha)
                point = {"rho": float(rho), "ball": float(ball), "bound": float(bound), "successes": successes,
                         "rate": successes / trials, "ci_low": ci[0], "ci_high": ci[1], "lower_bound": lower,
                         "margin": lower - float(bound), "status": "info"}
                judged = judgements.find("rate", record.game, attack, rho=float(rho))
                if judged is not None:
                    j = judged.evaluation
                    point |= {"ci_low": j["ci_low"], "ci_high": j["ci_high"], "lower_bound": j["lower_bound"],
                              "margin": j["margin"], "status": judged.status}
                points.append(point)
            attacks.append({"attack": attack, "threat_model": record.threat_models[attack], "trials": record.trials,
                            "points": points})
        return [{"game": self.name, "trials": record.trials,
                 "prior": {"kind": record.prior, "scale": record.scale, "dim": int(record.truth.shape[1])},
                 "metric": record.metric, "protected_features": list(record.protected_features), "attacks": attacks}]

    def stated_ball(self, row: dict[str, Any], config: Config, where: str) -> float:
        """Ball(ρ) of the stated configuration at the row's radius.

        Args:
            row: the stored comparison.
            config: the configuration the results state.
            where: the row's place in the results, for errors.

        Returns:
            Ball(ρ).

        Raises:
            BadInputError: the row's ``rho`` is not a non-negative number.
        """
        rho = row.get("rho")
        if not isinstance(rho, int | float) or isinstance(rho, bool) or not rho >= 0:
            raise BadInputError("must be a number in [0, inf]", f"{where}.rho")
        audit = config.audit
        return float(ball_per_radius(audit.reconstruction_prior, audit.reconstruction_scale, len(config.data.protected),
                                     np.array([float(rho)]))[0])

    def stated_limit(self, ball: float, accountant: Callable[[str], MechanismAccountant]) -> float:
        """Theorem 4's ``1 − f(Ball(ρ))`` under add/remove neighbours.

        Args:
            ball: the comparison's Ball.
            accountant: the stated claim's accountant of a relation (``Relation.ADD_REMOVE`` or ``Relation.REPLACE``).

        Returns:
            The limit.
        """
        return float(accountant(Relation.ADD_REMOVE).bound(ball))

    def limit_source(self) -> str:
        """Where :meth:`stated_limit` comes from, in words.

        Returns:
            ``"Theorem 4: 1 − f(Ball(ρ)), add/remove"``.
        """
        return "Theorem 4: 1 − f(Ball(ρ)), add/remove"
