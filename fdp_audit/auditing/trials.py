"""The one trial runner under every game (docs/design.md, docs/games.md): split a game's unfinished trials into
chunks, hand them to an executor (:mod:`fdp_audit.execution`, in this process by default), and journal each
chunk's secrets and scores as it arrives, in any order.

The executor runs a :class:`TrialTask` per chunk: a small picklable object (the game's class, the configuration,
the device, the data's fingerprint) that rebuilds the data, the game's problem and its fitted attacks on first
use in a process and keeps them for the process's next chunks. Trial ``i``'s secret and model depend on ``i`` and
the seed alone (counter-based streams), so a chunk's outcome is the same on whichever worker, in whichever order
it runs.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from attacks import Attack, View
from fdp_audit.auditing.games import TRIAL_BLOCK, Game, Setup
from fdp_audit.auditing.journal import Journal
from fdp_audit.auditing.promise import mark_promise_broken
from fdp_audit.auditing.third_party import load_mechanism, mechanism_calls, train_third_party
from fdp_audit.auditing.user_training import train_user_trials
from fdp_audit.claim import adopt_noise_multiplier, noise_multiplier
from fdp_audit.config import Config
from fdp_audit.data.prepare import PreparedData, prepare_data
from fdp_audit.errors import BadInputError
from fdp_audit.execution import Executor, InProcessExecutor, split_chunks
from fdp_audit.integrations import checked_user_trainer, library_caches
from fdp_audit.phases import Phase
from fdp_audit.training.engine import Canaries, CanaryBlock, TrainingProblem, chunk_size_for, train_models

DEFAULT_CHUNK = 128  # trials per chunk handed to the executor, unless audit.max_models_per_chunk says otherwise
CACHED_WORKSPACES = 2  # per process: a worker serving chunks of a few games keeps each game's problem


def trained_views(config: Config, problem: TrainingProblem, indices: torch.Tensor, canaries: Canaries | CanaryBlock,
                  record_iterates: bool, device: torch.device, max_chunk: int,
                  phase: str = "training", scored: int = 0) -> Iterator[tuple[torch.Tensor, View]]:
    """Train one model per trial — batched by the engine, or one call per trial of a third-party mechanism or of
    the user's training function, inside the caches of the libraries it loaded
    (:func:`fdp_audit.integrations.library_caches`) — with the trial's canary records or its canary block, and
    yield each chunk's trial indices with what the attacks see; ``phase`` names the progress shown, ``scored`` the
    candidates the attacks will score on each model (the engine sizes its chunks for them too).

    Args:
        config: the audit's configuration.
        problem: the training problem (the game's setup's).
        indices: the trials' model indices, shape (R,).
        canaries: one canary row per trial, or the trials' canary block.
        record_iterates: record the released per-step sums for the iterates attacks.
        device: the training device.
        max_chunk: the most models trained at once.
        phase: the progress's name.
        scored: the candidates scored per model.

    Yields:
        ``(indices, view)`` per chunk: the chunk's trial indices and the trained models as the attacks see them.

    Raises:
        BadInputError: a canary block with a third-party mechanism or the user's training, or a failure of their
            code.
    """
    user_code = config.mechanism.third_party is not None or config.mechanism.training is not None
    if user_code and isinstance(canaries, CanaryBlock):
        raise BadInputError("a canary block (parameters the model never reads) needs the built-in engine; a "
                            "third-party mechanism or the user's training takes canary records only", "audit.games")
    if config.mechanism.third_party is not None:
        mechanism = load_mechanism(config.mechanism.third_party)
        with Phase(f"{phase}: {len(indices)} models of {config.mechanism.third_party}", len(indices),
                   "model") as progress, library_caches():
            calls = mechanism_calls(len(indices), config.audit.trial_timeout, progress.update)
            yield from train_third_party(mechanism, problem, config.seed, indices, canaries, record_iterates, calls)
        return
    if config.mechanism.training is not None:
        trainer = checked_user_trainer(config, problem)
        with Phase(f"{phase}: {len(indices)} models of {config.mechanism.training}", len(indices),
                   "model") as progress, library_caches():
            yield from train_user_trials(trainer, config.seed, indices, canaries, record_iterates, progress.update)
        return
    records, block = (None, canaries) if isinstance(canaries, CanaryBlock) else (canaries, None)
    for chunk in train_models(problem, config.seed, indices, records, record_iterates, device, max_chunk=max_chunk,
                              progress=phase, canary_block=block, scored=scored):
        it = chunk.iterates
        # final-model attacks score on the CPU beside their knowledge; the iterates attacks take the few
        # coordinates they read off the training device themselves
        params = {name: value.cpu() for name, value in chunk.params.items()}
        yield chunk.model_indices, (View(params) if it is None else View(
            params, it.noisy_private_sums, it.public_gradients, it.canary_public_counts))


@dataclass(frozen=True)
class ChunkOutcome:
    """One chunk of trials played: their model indices, secrets (as the journal stores them) and every attack's
    numbers, ``[R, width]`` each."""

    indices: np.ndarray
    secrets: np.ndarray
    scores: dict[str, np.ndarray]


@dataclass
class Workspace:
    """A game's data and setup in one process, and its attacks once fitted (fitting can train shadow models)."""

    data: PreparedData
    setup: Setup
    attacks: dict[str, Attack] | None = field(default=None)


_WORKSPACES: OrderedDict[TrialTask, Workspace] = OrderedDict()


@dataclass(frozen=True)
class TrialTask:
    """Play a chunk of one game's trials: train a model per trial with its canary and run the game's attacks.
    Picklable, so an executor can run it in another process or on another machine, where it rebuilds the
    workspace from the config: the data, read again and checked against the driver's fingerprint, and the game's
    setup, whose noise multiplier calibrated to ``target_epsilon`` (seconds of accounting) comes from the driver
    instead of being computed again."""

    game: type[Game]
    config: Config
    device: str
    max_chunk: int
    data_fingerprint: str
    noise_multiplier: float | None = None  # the driver's calibration of config.mechanism, if it has a target ε
    # the audit compares a trial's broken promise (fdp_audit.auditing.promise): the trainings are not checked against
    # the probe's any more
    promise_broken: bool = False

    def workspace(self) -> Workspace:
        """This process's workspace for the task: kept from an earlier chunk, or rebuilt from the config.

        Returns:
            The data and the game's setup.

        Raises:
            BadInputError: the data prepared here differ from the driver's.
        """
        if self in _WORKSPACES:
            _WORKSPACES.move_to_end(self)
            return _WORKSPACES[self]
        if self.noise_multiplier is not None:
            adopt_noise_multiplier(self.config.mechanism, self.noise_multiplier)
        # the audit's other games read the same data: prepared once per process, not once per game
        data = next((kept.data for task, kept in _WORKSPACES.items() if task.reads_same_data(self)), None)
        if data is None:
            data = prepare_data(self.config.data, self.config.seed)
            if data.fingerprint != self.data_fingerprint:
                raise BadInputError(f"this worker's data (fingerprint {data.fingerprint[:12]}) differ from the "
                                    f"driver's ({self.data_fingerprint[:12]}): every worker must read the same "
                                    "data", "data")
        workspace = Workspace(data, self.game().setup(self.config, data))
        remember(self, workspace)
        return workspace

    def reads_same_data(self, other: TrialTask) -> bool:
        """Whether ``other`` prepares the data this task prepared (same data settings and seed) and the driver
        saw the same rows in both (fingerprint).

        Args:
            other: another task.

        Returns:
            True when their data settings, seed and fingerprint agree.
        """
        return (self.config.data, self.config.seed, self.data_fingerprint) == \
            (other.config.data, other.config.seed, other.data_fingerprint)

    def __call__(self, chunk: np.ndarray) -> ChunkOutcome:
        game, config = self.game(), self.config
        if self.promise_broken:
            mark_promise_broken(config)
        workspace = self.workspace()
        if workspace.attacks is None:
            workspace.attacks = {name: attack.fit(workspace.setup.knowledge)
                                 for name, attack in game.attacks(config.audit.attacks, config).items()}
        attacks = workspace.attacks
        chunk = np.asarray(chunk, dtype=np.int64)
        canaries = game.canaries(config, workspace.setup, chunk)
        parts: list[dict[str, np.ndarray]] = []
        trials = chunk - game.stream_block * TRIAL_BLOCK
        phase = f"{game.name} game, trials {trials.min() + 1}–{trials.max() + 1} of {config.audit.trials}"
        scored = scored_candidates(game, workspace.setup, attacks)
        for model_indices, view in trained_views(config, workspace.setup.problem, torch.as_tensor(chunk), canaries,
                                                 game.records_iterates, torch.device(self.device), self.max_chunk,
                                                 phase, scored):
            part = {}
            with Phase(f"{phase}: {len(attacks)} attacks on {len(model_indices)} models",
                       len(attacks) * len(model_indices), "model-attack") as progress:
                for name, attack in attacks.items():
                    part |= game.score({name: attack}, view)
                    progress.update(len(model_indices))
            parts.append(part)
        scores = {name: np.concatenate([part[name] for part in parts]) for name in attacks}
        return ChunkOutcome(chunk, game.secrets(config, workspace.setup, chunk), scores)


def scored_candidates(game: Game, setup: Setup, attacks: dict[str, Attack]) -> int:
    """The candidates each trial's final-model attacks run the trained model on (a K-candidate image game's K);
    none when every attack reads only the release.

    Args:
        game: the game.
        setup: its setup.
        attacks: the attacks that score its trials.

    Returns:
        The candidates scored per trial.
    """
    reads_model = any(attack.threat_model in ("black_box", "white_box") for attack in attacks.values())
    return game.score_width(setup) if reads_model else 0


def refuse_what_cannot_fit(game: Game, config: Config, setup: Setup, device: torch.device | str) -> None:
    """Refuse, before anything is trained, a game of which not even one trial fits a quarter of the available
    memory: its model with its canaries, and the scoring of its candidates
    (:func:`fdp_audit.training.engine.chunk_size_for`, whose message gives the estimate). Code that trains outside
    the engine (a third-party mechanism, the user's training) is not estimated.

    Args:
        game: the game.
        config: the audit's configuration.
        setup: the game's setup.
        device: where it trains.

    Raises:
        BadInputError: one trial does not fit.
    """
    if config.mechanism.third_party is not None or config.mechanism.training is not None:
        return
    canaries = game.canaries(config, setup, game.trial_indices(config.audit.trials)[:1])
    block = canaries if isinstance(canaries, CanaryBlock) else None
    chunk_size_for(setup.problem, game.records_iterates, torch.device(device), 1, None, block,
                   0 if block is not None else canaries.count,
                   scored_candidates(game, setup, game.attacks(config.audit.attacks)))


def remember(task: TrialTask, workspace: Workspace) -> None:
    """Keep ``workspace`` for ``task``'s chunks in this process (the driver's own, so that in-process chunks
    reuse it), forgetting the least recently used beyond :data:`CACHED_WORKSPACES`.

    Args:
        task: the task.
        workspace: its data and setup.
    """
    _WORKSPACES[task] = workspace
    _WORKSPACES.move_to_end(task)
    while len(_WORKSPACES) > CACHED_WORKSPACES:
        _WORKSPACES.popitem(last=False)


def play_game(game: Game, config: Config, data: PreparedData, journal: Journal | None = None,
              executor: Executor | None = None, device: torch.device | str = "cpu",
              max_chunk: int = DEFAULT_CHUNK, setup: Setup | None = None, promise_broken: bool = False) -> Any:
    """Play ``config.audit.trials`` trials of ``game``: journaled trials are reused (after checking they hold
    this run's secrets), the others run on ``executor`` in chunks of at most ``max_chunk`` and are journaled as
    they arrive. ``setup``: the game's, if already made. Returns the game's record, in trial order.

    Args:
        game: the game.
        config: the validated configuration.
        data: its prepared data.
        journal: the trial journal (None: none kept).
        executor: where chunks run (None: in this process).
        device: the training device.
        max_chunk: the most trials per chunk.
        setup: the game's setup, or None to build it.
        promise_broken: the audit compares a trial's broken promise
            (:func:`fdp_audit.auditing.promise.mark_promise_broken`): the trainings are no longer checked against
            the probe's.

    Returns:
        The game's record.

    Raises:
        BadInputError: the game refuses the config or data, a trial does not fit in memory, or the journal holds
            other secrets or scores.
    """
    journal = Journal(None, "") if journal is None else journal
    executor = InProcessExecutor() if executor is None else executor
    calibrated = noise_multiplier(config.mechanism) if config.mechanism.target_epsilon is not None else None
    task = TrialTask(type(game), config, str(device), max_chunk, data.fingerprint, calibrated, promise_broken)
    setup = setup or game.setup(config, data)
    refuse_what_cannot_fit(game, config, setup, device)
    remember(task, Workspace(data, setup))
    try:
        indices = game.trial_indices(config.audit.trials)
        secrets = game.secrets(config, setup, indices)
        attacks = game.attacks(config.audit.attacks, config)
        journal.check_reusable(game.name, indices, secrets, attacks, game.score_width(setup))
        finished = journal.finished(game.name)
        todo = np.array([i for i in indices.tolist() if i not in finished], dtype=np.int64)
        for _, outcome in executor.map_unordered(task, split_chunks(todo, max_chunk)):
            journal.record(game.name, outcome.indices, outcome.secrets, outcome.scores)
    finally:
        _WORKSPACES.pop(task, None)  # the data may change on disk before the next audit with this config
    finished = journal.finished(game.name)
    scores = {name: np.array([finished[int(i)][1][name] for i in indices], dtype=float) for name in attacks}
    return game.record(config, setup, secrets, scores, {name: attack.threat_model for name, attack in attacks.items()})
