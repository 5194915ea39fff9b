"""The user's code runs on the thread count the engine chooses (fdp_audit/threads.py, docs/games.md "Running the
user's code"): one intra-op thread for a step below 2²⁴ multiply-adds, ``FDP_AUDIT_THREADS=N`` instead when set.
Observed from inside the user's functions — the model factory, the training function, a third-party mechanism —
as they run in a game's trials (:func:`fdp_audit.auditing.trials.trained_views`)."""

from __future__ import annotations

import pytest
import torch

from fdp_audit.auditing.trials import trained_views
from fdp_audit.config import Config, config_from_dict
from fdp_audit.data.prepare import prepare_data
from fdp_audit.threads import threads_for
from fdp_audit.training.engine import Canaries, TrainingProblem, step_work
from fdp_audit.training.run import build_problem

OBSERVED: list[tuple[str, int]] = []  # (which function, torch.get_num_threads() inside it)
OUTSIDE = 2  # the caller's thread count: torch's default on a 2-core machine, set so that a choice of 1 shows


def factory(n_inputs: int, n_classes: int) -> torch.nn.Module:
    OBSERVED.append(("factory", torch.get_num_threads()))
    return torch.nn.Linear(n_inputs, n_classes)


def training(module: torch.nn.Module, dataset, seed: int) -> torch.nn.Module:
    OBSERVED.append(("training", torch.get_num_threads()))
    return module


def third_party(problem: TrainingProblem, seed: int, canary: Canaries):
    OBSERVED.append(("third_party", torch.get_num_threads()))
    return {name: torch.zeros(shape) for name, shape in problem.model.shapes().items()}


def config(user: str) -> Config:
    mechanism = {"name": "dp_sgd", "noise_multiplier": 1.0, "sample_rate": 0.1, "steps": 2, "clip_norm": 1.0}
    mechanism |= {"training": training} if user == "training" else {"third_party": third_party}
    return config_from_dict({
        "name": "threads", "seed": 0, "device": "cpu",
        "data": {"dataset": "synthetic", "protected": ["protected"], "synthetic_rows": 40},
        "model": {"factory": factory} if user == "training" else {"kind": "logistic"},
        "mechanism": mechanism, "audit": {"games": ["attribute"], "attacks": ["prior", "likelihood"]}})


def play_two_trials(config: Config) -> TrainingProblem:
    """Build the problem (the factory's first call) and train two trials, one with its canary record."""
    problem = build_problem(config, prepare_data(config.data, config.seed))
    canaries = Canaries(problem.x[:2].clone(), problem.y[:2].clone(), torch.tensor([True, False]),
                        torch.tensor([False, False]))
    assert len(list(trained_views(config, problem, torch.arange(2), canaries, False, torch.device("cpu"), 8))) == 1
    return problem


@pytest.fixture
def outside_threads():
    previous = torch.get_num_threads()
    torch.set_num_threads(OUTSIDE)
    OBSERVED.clear()
    yield
    torch.set_num_threads(previous)


@pytest.mark.parametrize("override", [None, 3])
def test_the_training_function_and_factory_run_on_the_chosen_threads(monkeypatch, outside_threads, override):
    """Default: a linear module's step is far below 2²⁴ multiply-adds, so the engine chooses one thread, and the
    factory (at the model's first build and in every trial) and the training function see one; with
    FDP_AUDIT_THREADS=3 they see 3. The caller's count is restored afterwards."""
    if override is None:
        monkeypatch.delenv("FDP_AUDIT_THREADS", raising=False)
    else:
        monkeypatch.setenv("FDP_AUDIT_THREADS", str(override))
    play_two_trials(config("training"))
    expected = 1 if override is None else override
    assert OBSERVED == [("factory", expected)] + [("factory", expected), ("training", expected)] * 2
    assert torch.get_num_threads() == OUTSIDE


@pytest.mark.parametrize("override", [None, 3])
def test_a_third_party_mechanism_runs_on_the_chosen_threads(monkeypatch, outside_threads, override):
    """The thread count threads_for chooses for the engine's one-model step of the same problem (one here), or the
    override."""
    if override is None:
        monkeypatch.delenv("FDP_AUDIT_THREADS", raising=False)
    else:
        monkeypatch.setenv("FDP_AUDIT_THREADS", str(override))
    problem = play_two_trials(config("third_party"))
    with threads_for(step_work(problem)):
        chosen = torch.get_num_threads()
    assert chosen == (1 if override is None else override)
    assert OBSERVED == [("third_party", chosen)] * 2
    assert torch.get_num_threads() == OUTSIDE
