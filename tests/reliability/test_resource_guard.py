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


def _image_game_config(small_config, game: str, k: int) -> dict:
    """An image game of K candidates on digits (8×8, Ψ the 2× block means), the tiny CNN."""
    attacks = ["prior", "iterates"] if game == "image_gradient_canary" else ["prior", "likelihood"]
    return small_config("fdp_sgd", data={"dataset": "digits", "protected": [], "public_map": "downsample",
                                         "downsample_factor": 2, "max_rows": 80},
                        model={"kind": "cnn", "hidden": [2, 2]},
                        mechanism={"public_loss": "public_image", "steps": 2, "public_batch_size": 16},
                        audit={"trials": 20, "games": [game], "attacks": attacks, "target_prior": [1 / k] * k})


@pytest.mark.parametrize("game", ["image_record_canary", "image_gradient_canary"])
def test_image_games_count_their_candidates_before_training(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli,
                                                            one_line_error, small_config, write_yaml,
                                                            game: str) -> None:
    """An image game's memory grew with K (K = 1,000: 3.1 GB, 5,000: 13.5 GB) while the guard counted none of it:
    K = 10,000 (about 27 GB) was not refused. The record game's attacks run the model on K candidates per trial,
    the gradient game's K block canaries join every Poisson batch. Here the memory is faked so that one trial of
    K = 4 fits and one of K = 2,000 does not: refused before anything is trained, the estimate in the message."""
    from fdp_audit.auditing.games import GAMES
    from fdp_audit.auditing.trials import scored_candidates
    from fdp_audit.config import config_from_dict
    from fdp_audit.data.prepare import prepare_data

    def need(k: int) -> int:
        config = config_from_dict(_image_game_config(small_config, game, k))
        played = GAMES[game]()
        setup = played.setup(config, prepare_data(config.data, config.seed))
        canaries = played.canaries(config, setup, played.trial_indices(config.audit.trials)[:1])
        block = canaries if isinstance(canaries, engine.CanaryBlock) else None
        return engine.bytes_per_model(setup.problem, played.records_iterates, block,
                                      0 if block is not None else canaries.count,
                                      scored_candidates(played, setup, played.attacks(config.audit.attacks)))

    small, large = need(4), need(2000)
    assert large > 8 * small
    fake_memory(monkeypatch, 4 * 2 * small)  # two trials of K = 4 fit

    def trained(*args, **kwargs):
        raise AssertionError("a model was trained before the game was refused")

    monkeypatch.setattr(engine, "_train_chunks", trained)
    config = write_yaml(tmp_path / "c.yaml", _image_game_config(small_config, game, 2000))
    result = cli("audit", config, "--out", tmp_path / "out")
    line = one_line_error(result.err)
    assert result.code == 2 and "one model needs about" in line and "GiB" in line, line
    assert ("2000 candidates scored per trial" if game == "image_record_canary" else "2000 block canaries") in line
    assert not (tmp_path / "out").exists()


def test_the_bayes_optimal_success_of_many_candidates_is_drawn_in_bounded_blocks(monkeypatch: pytest.MonkeyPatch
                                                                                 ) -> None:
    """The gradient-canary image game's Bayes-optimal success (a Monte Carlo of 20,000 releases at a time, each
    T × K draws) held 20,000·T·K·8 bytes an array: 3.2 GB at T = 20, K = 1,000. Now at most MONTE_CARLO_BYTES over
    every array of a block (lowered here to 16 MiB), measured by tracemalloc (numpy reports its allocations to it):
    T = 10, K = 50 held about 240 MB before. The result does not change."""
    import tracemalloc

    from fdp_audit.auditing import image_games

    whole = image_games.bayes_optimal_success(0.25, 1.0, 10, 50, draws=20_000)
    monkeypatch.setattr(image_games, "MONTE_CARLO_BYTES", 16 << 20, raising=False)
    tracemalloc.start()
    try:
        split = image_games.bayes_optimal_success(0.25, 1.0, 10, 50, draws=20_000)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 24 << 20, peak
    assert split == whole and 0.02 < split[0] < 1  # the same draws, whatever the split
