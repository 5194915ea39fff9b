"""The game registry (docs/extending.md): the recipe's game, registered with one line, is played by the runner on
any executor (the executor recipe's included), journaled, judged by ``fdp-audit gate`` and rendered by
``fdp-audit report`` with no edit anywhere else."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fdp_audit.auditing.games import GAMES, Game, register_game, unregister_game
from fdp_audit.auditing.runner import run_audit
from fdp_audit.config import config_from_dict
from fdp_audit.execution import EXECUTORS, Executor, InProcessExecutor
from tests.conftest import recipe


@pytest.fixture
def coin_game(tmp_path: Path) -> Iterator[type[Game]]:
    """docs/extending.md's game recipe, registered by importing it as written."""
    with recipe("game", tmp_path) as module:
        try:
            yield module.CoinGame
        finally:
            unregister_game(module.CoinGame.name)


@pytest.fixture
def last_first(tmp_path: Path) -> Iterator[Executor]:
    """docs/extending.md's executor recipe: every chunk on a pickled copy of the task, the last chunk first."""
    with recipe("executor", tmp_path) as module:
        try:
            yield module.LastFirstExecutor()
        finally:
            EXECUTORS.unregister(module.LastFirstExecutor.name)


def coin_config(small_config, trials: int = 40) -> dict[str, Any]:
    return small_config("dp_sgd", rows=60, mechanism={"steps": 4, "sample_rate": 1.0, "noise_multiplier": 4.0},
                        audit={"games": ["coin"], "attacks": ["prior", "likelihood"], "trials": trials,
                               "max_models_per_chunk": 8})


def test_a_new_game_runs_through_audit_gate_and_report(coin_game, small_config, write_yaml, cli,
                                                       tmp_path: Path) -> None:
    """The whole product path with the test's game: ``fdp-audit audit`` → results.json → ``gate`` → ``report``.
    DP-SGD at μ = 0.5 on 60 rows: the verdict is PASS or VIOLATION (both judged; exit 0 or 1), never bad
    input."""
    config = write_yaml(tmp_path / "coin.yaml", coin_config(small_config))
    audited = cli("audit", config, "--out", tmp_path / "out")
    assert audited.code in (0, 1), audited.err
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    assert [c["id"] for c in results["comparisons"]] == ["coin/likelihood"]
    (section,) = results["games"]
    assert section["game"] == "coin" and {a["attack"] for a in section["attacks"]} == {"prior", "likelihood"}
    gated = cli("gate", tmp_path / "out" / "results.json")
    assert gated.code == audited.code, gated.err
    rendered = cli("report", tmp_path / "out" / "results.json", "-o", tmp_path / "report.html")
    assert rendered.code == 0, rendered.err
    html = (tmp_path / "report.html").read_text()
    assert "Coin" in html and "likelihood" in html


def test_a_new_game_is_journaled_and_resumed(coin_game, small_config, tmp_path: Path) -> None:
    """Every trial of the first run is read back by the second, which trains nothing and gives the same
    results."""
    config = config_from_dict(coin_config(small_config, trials=24))
    first = run_audit(config, tmp_path)
    rows = [json.loads(line) for line in (tmp_path / "journal.jsonl").read_text().splitlines()]
    assert {row["game"] for row in rows} == {"coin"} and sum(len(row["indices"]) for row in rows) == 24
    assert min(i for row in rows for i in row["indices"]) == coin_game.stream_block * 10_000_000
    again = run_audit(config, tmp_path)
    assert again["reproducibility"]["reused_trials"] == {"coin": 24}
    assert again["comparisons"] == first["comparisons"] and again["games"] == first["games"]


def test_trials_give_the_same_results_on_any_executor(coin_game, last_first, small_config) -> None:
    """Chunks run on pickled tasks, in reverse order, give exactly the in-process results: each trial depends
    on its index and the seed alone."""
    raw = coin_config(small_config, trials=24)
    raw["audit"] |= {"games": ["coin", "distinguishing"], "attacks": ["prior", "likelihood", "iterates"],
                     "max_models_per_chunk": 5}
    config = config_from_dict(raw)
    here = run_audit(config, None, executor=InProcessExecutor())
    there = run_audit(config, None, executor=last_first)
    assert there["comparisons"] == here["comparisons"] and there["games"] == here["games"]


def test_registry_refuses_a_taken_name_or_stream_block(coin_game) -> None:
    class Impostor(coin_game):
        stream_block = 91

    class SameStreams(coin_game):
        name = "coin-again"

    with pytest.raises(ValueError, match="already registered"):
        register_game(Impostor)
    with pytest.raises(ValueError, match="stream_block 90"):
        register_game(SameStreams)
    assert GAMES["coin"] is coin_game


def test_an_unknown_game_is_bad_input(small_config) -> None:
    from fdp_audit.errors import BadInputError

    with pytest.raises(BadInputError) as error:  # when the config is built, before anything is read or trained
        config_from_dict(small_config(audit={"games": ["telepathy"]}))
    assert error.value.field == "audit.games" and "telepathy" in str(error.value)


@pytest.mark.parametrize("game", ["image_gradient_canary", "image_record_canary"])
def test_image_games_give_the_same_results_on_any_executor(game: str, last_first: Executor) -> None:
    """The image games by the same contract: chunks of 5 on pickled tasks, last first, give exactly the
    in-process trials — the gradient game's canary block is rebuilt for each chunk from its trial indices."""
    import yaml

    from fdp_audit.auditing.journal import Journal
    from fdp_audit.auditing.runner import play_games
    from fdp_audit.data.prepare import prepare_data
    from fdp_audit.reproduce import CONFIGS
    from tests.auditing.games.test_images import SMALL_TRAINING

    raw = yaml.safe_load((CONFIGS / "images_games.yaml").read_text(encoding="utf-8"))
    raw["device"] = "cpu"
    raw["data"] |= SMALL_TRAINING["data"]  # the games' small training: the contract holds whatever is trained
    raw["mechanism"] |= SMALL_TRAINING["mechanism"]
    raw["audit"] |= {"games": [game], "trials": 12, "max_models_per_chunk": 5,
                     "attacks": ["prior", "iterates", "iterates_public_aligned", "likelihood"]}
    config = config_from_dict(raw)
    data = prepare_data(config.data, config.seed)
    here = play_games(config, data, Journal(None, ""), InProcessExecutor())
    there = play_games(config, data, Journal(None, ""), last_first)
    assert [c.row() for c in there.comparisons] == [c.row() for c in here.comparisons]
    assert there.sections(0.05) == here.sections(0.05)
