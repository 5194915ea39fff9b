"""Resource guard (docs/training.md batched training): models are trained in chunks sized to a quarter of the
available memory (:func:`fdp_audit.training.engine.chunk_size_for`); a configuration of which not even one
model fits is refused with a one-line message and exit code 2 rather than killed by the OS. The memory budget is
faked by monkeypatching the engine's probe of available memory, so nothing large is allocated."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from fdp_audit.config import config_from_dict
from fdp_audit.data.prepare import prepare_data
from fdp_audit.errors import BadInputError
from fdp_audit.training import engine
from fdp_audit.training.run import build_problem


@pytest.fixture(scope="module")
def problem(small_config):
    config = config_from_dict(small_config("fdp_sgd", rows=80, mechanism={"steps": 3}))
    return build_problem(config, prepare_data(config.data, config.seed))


def fake_memory(monkeypatch: pytest.MonkeyPatch, available: int) -> None:
    monkeypatch.setattr(engine, "_available_bytes", lambda device: available)


def chunk_sizes(problem, n_models: int) -> tuple[list[int], dict[str, torch.Tensor]]:
    chunks = list(engine.train_models(problem, seed=5, model_indices=range(n_models)))
    params = {name: torch.cat([c.params[name] for c in chunks]) for name in chunks[0].params}
    return [len(c.model_indices) for c in chunks], params


def test_training_is_split_into_chunks_that_fit(problem, monkeypatch: pytest.MonkeyPatch) -> None:
    """A budget of three models: seven models train as 3 + 3 + 1, and equal the models trained in one chunk
    (each model's randomness is keyed by its index, not by its chunk)."""
    per_model = engine.bytes_per_model(problem, record_iterates=False)
    fake_memory(monkeypatch, 4 * (3 * per_model + per_model // 2))
    assert engine.chunk_size_for(problem, False, torch.device("cpu"), 7) == 3
    sizes, split = chunk_sizes(problem, 7)
    assert sizes == [3, 3, 1]
    fake_memory(monkeypatch, 4 * 100 * per_model)
    sizes, whole = chunk_sizes(problem, 7)
    assert sizes == [7]
    for name in whole:
        torch.testing.assert_close(split[name], whole[name], rtol=1e-5, atol=1e-6)


def test_recorded_iterates_count_against_the_budget(problem) -> None:
    """Recording T iterates of P parameters costs 8·T·P more bytes per model (docs/training.md: iterates for the
    attacks)."""
    extra = engine.bytes_per_model(problem, True) - engine.bytes_per_model(problem, False)
    assert extra == 8 * problem.hyper.steps * problem.model.n_parameters


def test_a_model_that_cannot_fit_is_refused(problem, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_memory(monkeypatch, 4 * engine.bytes_per_model(problem, False) - 4)
    with pytest.raises(BadInputError, match="more than a quarter of the available") as caught:
        list(engine.train_models(problem, seed=0, model_indices=range(2)))
    assert "lower the sample rate" in str(caught.value)


def test_the_cli_refuses_with_exit_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli, one_line_error,
                                     small_config, write_yaml, files_under) -> None:
    fake_memory(monkeypatch, 1024)
    config = write_yaml(tmp_path / "c.yaml", small_config(rows=60, mechanism={"steps": 2}, audit={"trials": 14}))
    result = cli("audit", config, "--out", tmp_path / "audit")
    assert result.code == 2 and "available" in one_line_error(result.err)
    # `train` has drawn its progress bar before the guard speaks: the error is the last line
    result = cli("train", config, "--out", tmp_path / "t" / "m.pt")
    assert result.code == 2 and "Traceback" not in result.err
    assert result.err.splitlines()[-1].startswith("fdp-audit: error: mechanism: one model needs about")
    assert files_under(tmp_path) == ["c.yaml"]
