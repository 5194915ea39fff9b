"""The game registry (docs/extending.md): a game defined only here, registered with one line, is played by the
runner on any executor, journaled, judged by ``fdp-audit gate`` and rendered by ``fdp-audit report`` with no edit
anywhere else."""

from __future__ import annotations

import json
import pickle
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from attacks import Attack, Knowledge, View
from fdp_audit.accounting.mechanism import MechanismAccountant
from fdp_audit.audit.games import (
    GAMES,
    Claim,
    Game,
    GameRecord,
    Judgements,
    PlannedComparison,
    RateComparison,
    ReportView,
    Setup,
    register_game,
    unregister_game,
)
from fdp_audit.audit.games.base import judged_on_half, trial_uniforms
from fdp_audit.audit.games.categorical import candidate_scores, judged_rule, rate_comparisons
from fdp_audit.audit.runner import run_audit
from fdp_audit.config import Config, config_from_dict
from fdp_audit.data.prepare import PreparedData
from fdp_audit.execution import Executor, InProcessExecutor
from fdp_audit.training.engine import Canaries
from fdp_audit.training.run import build_problem


@dataclass(frozen=True)
class CoinSetup(Setup):
    candidates: torch.Tensor
    label: int


class CoinGame(Game[GameRecord]):
    """A record canary that is one of two records Ψ gives with a population record's public image, picked by a
    fair coin (Ball ½), guessed by final-model attacks and judged against Theorem 4's 1 − f(½)."""

    name = "coin"
    stream_block = 90
    report = ReportView("table", "Coin game", "A fair coin picks which of two records is the canary.")

    def setup(self, config: Config, data: PreparedData) -> CoinSetup:
        record = torch.as_tensor(data.population.x[0])
        candidates = data.feature_split.canary_candidates(record, data.population, 2).records
        problem = build_problem(config, data)
        x, y = data.tensors()
        label = int(data.population.y[0])
        knowledge = Knowledge(problem.model, candidates, label, torch.tensor([0.5, 0.5]), x, y)
        return CoinSetup(problem, knowledge, candidates, label)

    def secrets(self, config: Config, setup: Setup, indices: np.ndarray) -> np.ndarray:
        return (trial_uniforms(config.seed, indices) < 0.5).numpy().astype(np.int64)

    def canaries(self, config: Config, setup: CoinSetup, indices: np.ndarray) -> Canaries:
        n, bit = len(indices), torch.as_tensor(self.secrets(config, setup, indices))
        present = torch.ones(n, dtype=torch.bool)
        return Canaries(setup.candidates[bit], torch.full((n,), setup.label), present, present)

    def score(self, attacks: dict[str, Attack], view: View) -> dict[str, np.ndarray]:
        return candidate_scores(attacks, view)

    def record(self, config: Config, setup: Setup, secrets: np.ndarray, scores: dict[str, np.ndarray],
               threat_models: dict[str, str]) -> GameRecord:
        return GameRecord(self.name, secrets, scores, np.array([0.5, 0.5]), threat_models, ("heads", "tails"))

    def comparisons(self, record: GameRecord, claim: Claim) -> list[RateComparison]:
        return rate_comparisons(record, float(claim.add_remove.bound(0.5)), self.name)

    def planned(self, config: Config, data: PreparedData, claim: Claim) -> list[PlannedComparison]:
        trials = judged_on_half(config.audit.trials)
        return [PlannedComparison(RateComparison(self.name, self.name, name, attack.threat_model, trials, 0, 0.5,
                                                 float(claim.add_remove.bound(0.5))), judged_on_half)
                for name, attack in self.attacks(config.audit.attacks).items() if name != "prior"]

    def sections(self, record: GameRecord, judgements: Judgements, claim: Claim, alpha: float) -> list[dict[str, Any]]:
        rows = []
        for attack in record.scores:
            _, successes, trials = judged_rule(record, attack)
            judged = judgements.find("rate", self.name, attack)
            rows.append({"attack": attack, "successes": successes, "trials": trials,
                         "status": "info" if judged is None else judged.status})
        return [{"game": self.name, "trials": int(len(record.labels)), "attacks": rows}]

    def stated_ball(self, row: dict[str, Any], config: Config, where: str) -> float:
        return 0.5

    def stated_limit(self, ball: float, accountant: Callable[[str], MechanismAccountant]) -> float:
        return float(accountant("add-remove").bound(ball))


class ReversedPickledExecutor(Executor):
    """Runs every chunk on a pickled copy of the task, last chunk first: what a remote executor does."""

    name = "reversed-pickled"

    def map_unordered(self, task, chunks: Sequence[np.ndarray]) -> Iterator[tuple[int, Any]]:
        for position in reversed(range(len(chunks))):
            yield position, pickle.loads(pickle.dumps(task))(chunks[position])


@pytest.fixture
def coin_game() -> Iterator[type[CoinGame]]:
    register_game(CoinGame)
    yield CoinGame
    unregister_game(CoinGame.name)


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
    assert min(i for row in rows for i in row["indices"]) == CoinGame.stream_block * 10_000_000
    again = run_audit(config, tmp_path)
    assert again["reproducibility"]["reused_trials"] == {"coin": 24}
    assert again["comparisons"] == first["comparisons"] and again["games"] == first["games"]


def test_trials_give_the_same_results_on_any_executor(coin_game, small_config) -> None:
    """Chunks run on pickled tasks, in reverse order, give exactly the in-process results: each trial depends
    on its index and the seed alone."""
    raw = coin_config(small_config, trials=24)
    raw["audit"] |= {"games": ["coin", "distinguishing"], "attacks": ["prior", "likelihood", "iterates"],
                     "max_models_per_chunk": 5}
    config = config_from_dict(raw)
    here = run_audit(config, None, executor=InProcessExecutor())
    there = run_audit(config, None, executor=ReversedPickledExecutor())
    assert there["comparisons"] == here["comparisons"] and there["games"] == here["games"]


def test_registry_refuses_a_taken_name_or_stream_block(coin_game) -> None:
    class Impostor(CoinGame):
        stream_block = 91

    class SameStreams(CoinGame):
        name = "coin-again"

    with pytest.raises(ValueError, match="already registered"):
        register_game(Impostor)
    with pytest.raises(ValueError, match="stream_block 90"):
        register_game(SameStreams)
    assert GAMES["coin"] is CoinGame


def test_an_unknown_game_is_bad_input(small_config) -> None:
    from fdp_audit.errors import BadInputError

    config = config_from_dict(small_config(audit={"games": ["telepathy"]}))
    with pytest.raises(BadInputError) as error:
        run_audit(config, None)
    assert error.value.field == "audit.games" and "telepathy" in str(error.value)


@pytest.mark.parametrize("game", ["image_gradient_canary", "image_record_canary"])
def test_image_games_give_the_same_results_on_any_executor(game: str) -> None:
    """The image games by the same contract: chunks of 5 on pickled tasks, last first, give exactly the
    in-process trials — the gradient game's canary block is rebuilt for each chunk from its trial indices."""
    import yaml

    from fdp_audit.audit.journal import Journal
    from fdp_audit.audit.runner import play_games
    from fdp_audit.data.prepare import prepare_data
    from fdp_audit.reproduce import CONFIGS

    raw = yaml.safe_load((CONFIGS / "images_games.yaml").read_text(encoding="utf-8"))
    raw["device"] = "cpu"
    raw["audit"] |= {"games": [game], "trials": 12, "max_models_per_chunk": 5,
                     "attacks": ["prior", "iterates", "iterates_public_aligned", "likelihood"]}
    config = config_from_dict(raw)
    data = prepare_data(config.data, config.seed)
    here = play_games(config, data, Journal(None, ""), InProcessExecutor())
    there = play_games(config, data, Journal(None, ""), ReversedPickledExecutor())
    assert [c.row() for c in there.comparisons] == [c.row() for c in here.comparisons]
    assert there.sections(0.05) == here.sections(0.05)
