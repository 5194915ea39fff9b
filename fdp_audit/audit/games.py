"""Audit games (docs/statistics.md, docs/games.md). Each trial is one model trained by the batched engine with its own
canary; the attacks score the canary's candidate values; the trial's secret comes from the GAME stream.

* ``attribute`` (record canary): the canary is a real record whose first protected attribute is drawn
  from the known prior ``audit.target_prior`` over the most frequent categories; final-model attacks
  (prior, black box, white box) guess it. Ball = max prior.
* ``distinguishing`` (gradient canary, replacement): a hidden bit picks x₀ or x₁ with the same Ψ, whose
  private gradients are ∓ along a coordinate no real record touches; ``iterates`` attacks score the
  bit. The same trials are the binary attribute game with a uniform prior (Ball = ½) and give the ROC.
* ``simulator`` (gradient canary, insertion/deletion, Algorithm 2 of the FDP paper): the bit picks the
  mechanism on S ∪ {x} or the simulator, whose public batches are drawn from S ∪ {x'} (same Ψ as x, the
  other private value) and whose private batches come from S only; its optimal ROC is Theorem 5's f.

The canary's coordinates are appended all-zero public columns; further such columns carry only the noise, so
the iterates attacks estimate its scale from the release instead of trusting the claimed noise multiplier
(:mod:`attacks.iterates`). Every attack's decision rule is fitted on a selection split of the trials and
judged on the rest (:mod:`fdp_audit.audit.decision`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace

import numpy as np
import torch

from attacks import ATTACKS, Attack, Knowledge, View
from attacks.base import AttributeKind, ShadowTrainer
from fdp_audit.audit.third_party import load_mechanism, train_third_party
from fdp_audit.config import Config
from fdp_audit.data.encoding import ColumnGroup, EncodedData
from fdp_audit.data.features import FeatureSplit
from fdp_audit.data.prepare import PreparedData
from fdp_audit.errors import BadInputError
from fdp_audit.phases import Phase
from fdp_audit.training import streams
from fdp_audit.training.engine import Canaries, TrainingProblem, train_models
from fdp_audit.training.run import build_problem

GAME_INDEX_OFFSET = {"distinguishing": 0, "attribute": 10_000_000, "simulator": 20_000_000}
NOISE_COLUMNS = 14  # further all-zero columns: their weights show the iterates attacks the release's noise alone
CANARY_COLUMNS = ("audit-canary-private", "audit-canary-public",
                  *(f"audit-noise-{i}" for i in range(NOISE_COLUMNS)))


@dataclass(frozen=True)
class GameRecord:
    """Raw per-trial outcomes: true candidate index and every attack's candidate scores."""

    game: str
    labels: np.ndarray  # [N]
    scores: dict[str, np.ndarray]  # attack -> [N, V]
    prior: np.ndarray  # [V]
    threat_models: dict[str, str]
    candidate_names: tuple[str, ...]

    def head(self, trials: int) -> GameRecord:
        """The first ``trials`` trials: exactly the record of the same game played with that many trials
        (trial i's secret and model depend on its index only)."""
        return replace(self, labels=self.labels[:trials], scores={k: v[:trials] for k, v in self.scores.items()})


def trial_uniforms(seed: int, indices: np.ndarray) -> torch.Tensor:
    """One uniform per trial from the GAME stream, independent of the models' training streams."""
    return streams.uniform(streams.model_keys(seed, torch.as_tensor(indices)), 0, streams.Stream.GAME, 1)[:, 0]


def _with_canary_columns(data: PreparedData) -> PreparedData:
    """Append the all-zero public :data:`CANARY_COLUMNS`: the first-layer weights on them receive no gradient
    from any real record, so a gradient canary placed on the first two is seen against the noise alone, and
    the others carry nothing but the noise (what the iterates attacks estimate its scale from)."""
    d = data.train.n_features
    groups = data.train.groups + tuple(ColumnGroup(name, "numeric", d + i, d + i + 1)
                                       for i, name in enumerate(CANARY_COLUMNS))

    def widen(part: EncodedData) -> EncodedData:
        x = np.concatenate([part.x, np.zeros((part.n_rows, len(CANARY_COLUMNS)), dtype=part.x.dtype)], axis=1)
        return EncodedData(x, part.y, groups, part.classes, part.label, part.fingerprint)

    columns = data.column_split()
    split = FeatureSplit(groups, columns.protected_features, columns.label_public)
    return PreparedData(widen(data.train), widen(data.population), widen(data.test), split, data.table_name)


def game_attacks(names: tuple[str, ...], kind: AttributeKind, gradient_canary: bool = False) -> dict[str, Attack]:
    """The configured attacks that can play a game: those supporting its attribute ``kind`` and, except the
    prior, needing a gradient canary exactly when the game has one. Unknown names are bad input."""
    chosen = {}
    for name in names:
        if name not in ATTACKS:
            raise BadInputError(f"unknown attack {name!r} (known: {', '.join(ATTACKS)})", "audit.attacks")
        cls = ATTACKS[name]
        if kind in cls.supports and (name == "prior" or cls.needs_gradient_canary == gradient_canary):
            chosen[name] = cls()
    return chosen


def trained_views(config: Config, problem: TrainingProblem, indices: torch.Tensor, canaries: Canaries,
                   record_iterates: bool, device: torch.device, max_chunk: int,
                   phase: str = "training") -> Iterator[tuple[torch.Tensor, View]]:
    """Train one model per trial — batched by the engine, or one call per trial of a third-party mechanism —
    and yield each chunk's trial indices with what the attacks see; ``phase`` names the progress shown."""
    if config.mechanism.third_party is not None:
        mechanism = load_mechanism(config.mechanism.third_party)
        with Phase(f"{phase}: {len(indices)} models of {config.mechanism.third_party}", len(indices),
                   "model") as progress:
            for chunk_indices, view in train_third_party(mechanism, problem, config.seed, indices, canaries,
                                                         record_iterates):
                progress.update(len(chunk_indices))
                yield chunk_indices, view
        return
    for chunk in train_models(problem, config.seed, indices, canaries, record_iterates, device, max_chunk=max_chunk,
                              progress=phase):
        it = chunk.iterates
        # final-model attacks score on the CPU beside their knowledge; the iterates attacks take the few
        # coordinates they read off the training device themselves
        params = {name: value.cpu() for name, value in chunk.params.items()}
        yield chunk.model_indices, (View(params) if it is None else View(
            params, it.noisy_private_sums, it.public_gradients, it.canary_public_counts))


def _run_trials(game: str, config: Config, problem: TrainingProblem, indices: np.ndarray, canaries: Canaries,
                labels: np.ndarray, attacks: dict[str, Attack], record_iterates: bool, device: torch.device,
                journal, max_chunk: int) -> dict[str, np.ndarray]:
    finished = journal.finished(game)
    todo = np.array([i for i in range(len(indices)) if int(indices[i]) not in finished], dtype=np.int64)
    if len(todo):
        rows = torch.as_tensor(todo)
        position = {int(v): k for k, v in enumerate(indices)}
        for model_indices, view in trained_views(config, problem, torch.as_tensor(indices[todo]),
                                                  canaries.take(rows), record_iterates, device, max_chunk,
                                                  f"{game} game"):
            with Phase(f"{game} game: {len(attacks)} attacks on {len(model_indices)} models",
                       len(attacks) * len(model_indices), "model-attack") as progress:
                scores = {}
                for name, attack in attacks.items():
                    scores[name] = attack.infer(view).scores.detach().cpu().double().numpy()
                    progress.update(len(model_indices))
            chunk_labels = np.array([labels[position[int(i)]] for i in model_indices])
            journal.record(game, model_indices.numpy(), chunk_labels, scores)
    finished = journal.finished(game)
    return {name: np.array([finished[int(i)][1][name] for i in indices]) for name in attacks}


def _third_party_trainer(config: Config) -> ShadowTrainer | None:
    """How an adversary runs an audited third-party function for its shadow models (None: built-in)."""
    if config.mechanism.third_party is None:
        return None
    mechanism = load_mechanism(config.mechanism.third_party)

    def train(problem: TrainingProblem, seed: int, indices, canaries: Canaries):
        for _, view in train_third_party(mechanism, problem, seed, torch.as_tensor(list(indices)), canaries, False):
            yield view.params

    return train


def gradient_canary_game(game: str, config: Config, data: PreparedData, trials: int, device: torch.device,
                         journal, max_chunk: int) -> GameRecord:
    """``distinguishing`` (±canary, replacement) or ``simulator`` (present or simulated, insertion/deletion)."""
    if config.model.kind in ("cnn", "module"):
        raise BadInputError("gradient-canary games on the built-in engine need a built-in model whose first layer is "
                            "linear", "model.kind")
    widened = _with_canary_columns(data)
    problem = build_problem(config, widened)
    d, hyper = data.train.n_features, problem.hyper
    width = widened.train.n_features
    private_coordinate, public_coordinate = d, d + 1  # row 0 of the first layer's weight comes first
    first_layer_rows = problem.model.shapes()["layer0.weight"][0]
    noise_coordinates = tuple(row * width + column for row in range(first_layer_rows)
                              for column in range(d, width) if (row, column) != (0, private_coordinate))
    seed = config.seed
    indices = np.arange(trials) + GAME_INDEX_OFFSET[game]
    labels = (trial_uniforms(seed, indices) < 0.5).numpy().astype(np.int64)
    p_count = problem.model.n_parameters
    direction = torch.zeros(trials, p_count)
    bit = torch.as_tensor(labels, dtype=torch.float32)
    signs = torch.tensor([-1.0, 1.0]) if game == "distinguishing" else torch.tensor([0.0, 1.0])
    raw_norm = config.audit.canary_norm_factor * hyper.clip_norm
    # the simulator's public batches hold x' (same Ψ, the other private value): only a public loss that reads
    # protected features can tell it from x
    direction[:, private_coordinate] = raw_norm * (2 * bit - 1)
    public_direction = torch.zeros(trials, p_count)
    public_direction[:, public_coordinate] = hyper.clip_norm
    in_private = torch.ones(trials, dtype=torch.bool) if game == "distinguishing" else bit.bool()
    canaries = Canaries(torch.zeros(trials, width), torch.zeros(trials, dtype=torch.long), in_private,
                        torch.ones(trials, dtype=torch.bool), direction, public_direction)
    prior = torch.tensor([0.5, 0.5])
    knowledge = Knowledge(problem.model, torch.zeros(2, width), 0, prior, widened.tensors()[0], widened.tensors()[1],
                          clip_norm=hyper.clip_norm, canary_private_coordinate=private_coordinate,
                          canary_public_coordinate=public_coordinate, candidate_signs=signs,
                          candidate_public_signs=torch.tensor([-1.0, 1.0]), noise_coordinates=noise_coordinates)
    unfitted = game_attacks(config.audit.attacks, "categorical", True)
    journal.check_reusable(game, indices, labels, unfitted, 2)
    attacks = {name: a.fit(knowledge) for name, a in unfitted.items()}
    names = ("x0 (s=-1)", "x1 (s=+1)") if game == "distinguishing" else ("simulator", "real")
    if len(attacks) <= ("prior" in attacks):
        raise BadInputError(f"the {game} game needs an iterates attack in audit.attacks", "audit.attacks")
    scores = _run_trials(game, config, problem, indices, canaries, labels, attacks, True, device, journal, max_chunk)
    return GameRecord(game, labels, scores, prior.numpy(), {n: a.threat_model for n, a in attacks.items()}, names)


def record_canary_game(config: Config, data: PreparedData, trials: int, device: torch.device, journal,
                       max_chunk: int) -> GameRecord:
    """The attribute game with a real canary record (final-model attacks)."""
    split = data.column_split()
    if not split.protected_groups or split.protected_groups[0].kind != "categorical":
        raise BadInputError("the attribute game needs a categorical first protected attribute", "data.protected")
    group = split.protected_groups[0]
    prior = np.asarray(config.audit.target_prior, dtype=float)
    frequency = data.population.x[:, group.start:group.stop].sum(axis=0)
    if len(prior) > len(group.categories):
        raise BadInputError(f"{len(prior)} prior values but {group.feature!r} has {len(group.categories)} categories",
                            "audit.target_prior")
    chosen = np.argsort(-frequency, kind="stable")[:len(prior)]
    base = torch.as_tensor(data.population.x[0])
    candidates = base.repeat(len(prior), 1)
    candidates[:, group.start:group.stop] = 0.0
    candidates[torch.arange(len(prior)), group.start + torch.as_tensor(chosen)] = 1.0
    label = int(data.population.y[0])
    problem = build_problem(config, data)
    seed = config.seed
    indices = np.arange(trials) + GAME_INDEX_OFFSET["attribute"]
    u = trial_uniforms(seed, indices).numpy()
    labels = np.minimum(np.searchsorted(np.cumsum(prior), u, side="right"), len(prior) - 1)
    canaries = Canaries(candidates[torch.as_tensor(labels)], torch.full((trials,), label, dtype=torch.long),
                        torch.ones(trials, dtype=torch.bool), torch.ones(trials, dtype=torch.bool))
    x, y = data.tensors()
    # shadow models are trained on the population split, which the adversary owns (docs/games.md)
    shadow_problem = build_problem(config, replace(data, train=data.population))
    knowledge = Knowledge(problem.model, candidates, label, torch.as_tensor(prior, dtype=torch.float32), x, y,
                          shadow_problem=shadow_problem, shadow_seed=seed + 1,
                          shadow_trainer=_third_party_trainer(config))
    unfitted = game_attacks(config.audit.attacks, "categorical")
    journal.check_reusable("attribute", indices, labels, unfitted, len(prior))
    attacks = {name: a.fit(knowledge) for name, a in unfitted.items()}
    scores = _run_trials("attribute", config, problem, indices, canaries, labels, attacks, False, device, journal,
                         max_chunk)
    names = tuple(f"{group.feature}={group.categories[c]}" for c in chosen)
    return GameRecord("attribute", labels, scores, prior, {n: a.threat_model for n, a in attacks.items()}, names)


def game_config(config: Config, **mechanism_overrides) -> Config:
    return replace(config, mechanism=replace(config.mechanism, **mechanism_overrides))
