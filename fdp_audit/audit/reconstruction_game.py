"""The reconstruction game (docs/accounting.md, docs/games.md): Theorem 4 for continuous protected features.

Each trial inserts one canary into S: a fixed population record (its public part u = Ψ(x) and label are
known to the adversary) whose k continuous protected coordinates are drawn, per trial from the GAME stream,
from a known prior centred at 0 (the training mean of the standardised columns) in model-input units:

* ``gaussian``: ``v ~ N(0, s² I_k)``, so ``Ball(ρ) = F_{χ²_k}(ρ²/s²)`` exactly;
* ``box``: ``v ~ U[−s, s]^k``, Ball the covered fraction of the box (exact for k ≤ 2, otherwise a Monte Carlo
  upper confidence bound, conservative);

with s = ``audit.reconstruction_scale``. The trials are trained by the batched engine with per-model
canaries; every configured attack that supports continuous features (the prior's centre, the informed
white-box closed form and gradient matching) reconstructs v on every trial, and a trial succeeds for radius
ρ when the L2 distance is at most ρ (:func:`attacks.success.reconstruction_success`), for every ρ of
``audit.rho_grid``. Theorem 4 bounds each success rate by ``1 − f(Ball(ρ))``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from attacks import ATTACKS, Attack, Knowledge, View
from attacks.success import reconstruction_success
from fdp_audit.accounting.ball import ball_gaussian, ball_uniform_box
from fdp_audit.audit.games import game_attacks, trained_views
from fdp_audit.audit.journal import secret_digests
from fdp_audit.config import Config
from fdp_audit.data.prepare import PreparedData
from fdp_audit.errors import BadInputError
from fdp_audit.training import streams
from fdp_audit.training.engine import Canaries
from fdp_audit.training.run import accountant, build_problem

GAME = "reconstruction"
INDEX_OFFSET = 30_000_000  # model indices disjoint from the other games' (games.GAME_INDEX_OFFSET)
METRIC = "l2"


@dataclass(frozen=True)
class ReconstructionRecord:
    """Per-trial truths and every attack's reconstruction, with Ball and the Theorem 4 bound per radius."""

    game: str
    truth: np.ndarray  # [N, k]
    estimates: dict[str, np.ndarray]  # attack -> [N, k]
    rho: np.ndarray  # [G]
    ball: np.ndarray  # [G]
    bound: np.ndarray  # [G] 1 − f(Ball(ρ))
    threat_models: dict[str, str]
    prior: str  # "gaussian" or "box"
    scale: float
    metric: str
    protected_features: tuple[str, ...]

    @property
    def trials(self) -> int:
        return int(self.truth.shape[0])

    def successes(self, attack: str) -> np.ndarray:
        """Trials with ``d(x̂, x) <= ρ``, per radius: ``[G]`` integers."""
        hits = reconstruction_success(torch.as_tensor(self.estimates[attack]), torch.as_tensor(self.truth),
                                      self.rho.tolist(), self.metric)
        return hits.sum(dim=0).numpy().astype(np.int64)

    def comparisons(self) -> list[dict[str, Any]]:
        """One ``rate`` comparison per (attack, ρ) for the gate, the prior (which realises Ball) excepted."""
        rows = []
        for attack in self.estimates:
            if attack == "prior":
                continue
            for rho, successes, ball, bound in zip(self.rho, self.successes(attack), self.ball, self.bound,
                                                   strict=True):
                rows.append({"id": f"{self.game}/{attack}/rho={rho:g}", "kind": "rate", "game": self.game,
                             "attack": attack, "threat_model": self.threat_models[attack], "rho": float(rho),
                             "trials": self.trials, "successes": int(successes), "ball": float(ball),
                             "bound": float(bound)})
        return rows


def secret_values(seed: int, indices: np.ndarray, prior: str, scale: float, dims: int) -> torch.Tensor:
    """The protected values of the given trials, ``[N, k]`` float64, from the GAME stream (independent of
    the models' training streams)."""
    keys = streams.model_keys(seed, torch.as_tensor(indices))
    if prior == "gaussian":
        return scale * streams.normal(keys, 0, streams.Stream.GAME, dims, dtype=torch.float64)
    return scale * (2.0 * streams.uniform(keys, 0, streams.Stream.GAME, dims).double() - 1.0)


def ball_per_radius(prior: str, scale: float, dims: int, rho: np.ndarray) -> np.ndarray:
    """Ball(ρ) of the canary's prior under the L2 metric (docs/accounting.md); the box's Monte Carlo case uses the
    upper confidence bound."""
    if prior == "gaussian":
        return np.asarray(ball_gaussian(rho, scale, dims), dtype=float)
    return np.array([ball_uniform_box(float(r), [2.0 * scale] * dims, metric=METRIC).upper for r in rho])


def _continuous_attacks(names: tuple[str, ...]) -> dict[str, Attack]:
    chosen = game_attacks(names, "continuous")
    if len(chosen) <= ("prior" in chosen):
        continuous = [n for n, cls in ATTACKS.items() if "continuous" in cls.supports and n != "prior"]
        raise BadInputError(f"the reconstruction game needs one of {', '.join(continuous)} in audit.attacks",
                            "audit.attacks")
    return chosen


def reconstruction_game(config: Config, data: PreparedData, trials: int, device: torch.device, journal,
                        max_chunk: int) -> ReconstructionRecord:
    """Play ``trials`` reconstruction trials (finished ones are read back from ``journal``)."""
    split = data.column_split()
    groups = split.protected_groups
    if not groups or any(g.kind != "numeric" for g in groups):
        raise BadInputError("the reconstruction game needs continuous (numeric) protected features",
                            "data.protected")
    audit = config.audit
    protected = tuple(int(j) for j in split.protected_columns.tolist())
    rho = np.asarray(audit.rho_grid, dtype=float)
    attacks = _continuous_attacks(audit.attacks)

    problem = build_problem(config, data)
    template = torch.as_tensor(data.population.x[0]).double().clone()
    template[list(protected)] = 0.0  # the prior's centre
    label = int(data.population.y[0])
    x, y = data.tensors()
    knowledge = Knowledge(problem.model, template[None, :], label, torch.ones(1), x, y,
                          protected_coordinates=protected)
    indices = np.arange(trials) + INDEX_OFFSET
    truth = secret_values(config.seed, indices, audit.reconstruction_prior, audit.reconstruction_scale,
                          len(protected))
    digests = secret_digests(truth.numpy())
    journal.check_reusable(GAME, indices, digests, attacks, len(protected))
    attacks = {name: attack.fit(knowledge) for name, attack in attacks.items()}
    finished = journal.finished(GAME)
    todo = np.array([i for i in range(trials) if int(indices[i]) not in finished], dtype=np.int64)
    if len(todo):
        canary_x = template.repeat(len(todo), 1)
        canary_x[:, list(protected)] = truth[todo]
        canaries = Canaries(canary_x.to(x.dtype), torch.full((len(todo),), label, dtype=torch.long),
                            torch.ones(len(todo), dtype=torch.bool), torch.ones(len(todo), dtype=torch.bool))
        for model_indices, view in trained_views(config, problem, torch.as_tensor(indices[todo]), canaries, False,
                                                 device, max_chunk):
            params = {name: value.detach().cpu() for name, value in view.params.items()}
            estimates = {name: attack.infer(View(params)).estimate.detach().double().numpy()
                         for name, attack in attacks.items()}
            position = model_indices.numpy() - INDEX_OFFSET
            journal.record(GAME, model_indices.numpy(), digests[position], estimates)
    finished = journal.finished(GAME)
    estimates = {name: np.array([finished[int(i)][1][name] for i in indices], dtype=float) for name in attacks}
    ball = ball_per_radius(audit.reconstruction_prior, audit.reconstruction_scale, len(protected), rho)
    return ReconstructionRecord(
        GAME, truth.numpy(), estimates, rho, ball, np.asarray(accountant(config.mechanism).bound(ball), dtype=float),
        {name: attack.threat_model for name, attack in attacks.items()}, audit.reconstruction_prior,
        audit.reconstruction_scale, METRIC, tuple(g.feature for g in groups))
