"""The trial runner's task (fdp_audit/auditing/trials.py): a process that rebuilds a game's workspace from the task
takes the driver's noise-multiplier calibration instead of spending seconds of accounting on the same number."""

from __future__ import annotations

import numpy as np
import pytest

from fdp_audit import claim as run
from fdp_audit.auditing import trials
from fdp_audit.auditing.games import GAMES
from fdp_audit.config import config_from_dict
from fdp_audit.data.prepare import prepare_data
from fdp_audit.errors import BadInputError
from tests.conftest import small_config


def test_a_rebuilt_workspace_takes_the_drivers_calibration(monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker's fresh process (empty calibration cache, calibration forbidden) rebuilds the workspace with the
    driver's z and plays a chunk to the same numbers as a process that calibrated z itself."""
    config = config_from_dict(small_config("dp_sgd", rows=200, mechanism={"noise_multiplier": None,
                                                                            "target_epsilon": 3.0}))
    data = prepare_data(config.data, config.seed)
    driver_z = run.noise_multiplier(config.mechanism)
    chunk = np.arange(4)
    calibrating = trials.TrialTask(GAMES["distinguishing"], config, "cpu", 4, data.fingerprint)
    expected = calibrating(chunk)

    def no_accounting(*args: object) -> float:
        raise AssertionError("the worker calibrated the noise multiplier again")

    monkeypatch.setattr(run, "_CALIBRATED", {})
    monkeypatch.setattr(run, "calibrate_noise_multiplier", no_accounting)
    monkeypatch.setattr(trials, "_WORKSPACES", type(trials._WORKSPACES)())
    shipped = trials.TrialTask(GAMES["distinguishing"], config, "cpu", 4, data.fingerprint, driver_z)
    outcome = shipped(chunk)
    assert shipped.workspace().setup.problem.hyper.noise_multiplier == driver_z
    np.testing.assert_array_equal(outcome.secrets, expected.secrets)
    for name, scores in expected.scores.items():
        np.testing.assert_array_equal(outcome.scores[name], scores)


def test_without_a_target_epsilon_there_is_no_calibration_to_take(monkeypatch: pytest.MonkeyPatch) -> None:
    config = config_from_dict(small_config("dp_sgd", rows=200))
    monkeypatch.setattr(run, "_CALIBRATED", {})
    run.adopt_noise_multiplier(config.mechanism, 7.0)
    assert run._CALIBRATED == {}
    assert run.noise_multiplier(config.mechanism) == config.mechanism.noise_multiplier


def test_a_process_prepares_an_audits_data_once_for_all_its_games(monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker serving chunks of two games of one audit reads the data once; a task of other data settings, or
    one for which the driver saw other rows, prepares its own (and the fingerprint check still runs)."""
    raw = small_config("dp_sgd", rows=200)
    config = config_from_dict(raw)
    fingerprint = prepare_data(config.data, config.seed).fingerprint
    prepared: list[object] = []

    def counting_prepare(data_config, seed):
        prepared.append(data_config)
        return prepare_data(data_config, seed)

    monkeypatch.setattr(trials, "prepare_data", counting_prepare)
    monkeypatch.setattr(trials, "_WORKSPACES", type(trials._WORKSPACES)())
    first = trials.TrialTask(GAMES["distinguishing"], config, "cpu", 4, fingerprint).workspace()
    second = trials.TrialTask(GAMES["attribute"], config, "cpu", 4, fingerprint).workspace()
    assert len(prepared) == 1 and second.data is first.data

    other_rows = config_from_dict(small_config("dp_sgd", rows=240))
    trials.TrialTask(GAMES["distinguishing"], other_rows, "cpu", 4,
                     prepare_data(other_rows.data, other_rows.seed).fingerprint).workspace()
    assert len(prepared) == 2
    with pytest.raises(BadInputError, match="differ from the driver's"):
        trials.TrialTask(GAMES["attribute"], config, "cpu", 4, "0" * 64).workspace()
    assert len(prepared) == 3
