"""The registered image games (docs/images.md) through the product path: ``fdp-audit audit`` plays them on the one
trial runner (the gradient game's canary block travels with each chunk), journals and resumes their trials, and
``fdp-audit gate`` re-derives their limits; the known-faulty mechanisms each give exit 1 in the image game that
can see them, the correct ones exit 0.

The settings are configs/images_games.yaml's (digits under 2× downsampling, the GroupNorm CNN, K = 4, Ball = ¼)
with the mechanism and claim a row of :data:`CAUGHT` names. Each row's successes were measured on seed 0; its trial
count makes a miss need the success to fall at least 4.5 binomial standard errors below the measured rate
(probability below 1e-5 per row, by the normal approximation), since the gate's one-sided Clopper–Pearson bound
at α/2 = 0.025 lies about 2 standard errors below the rate."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from fdp_audit.audit.games import GAMES, ImageGradientCanaryGame, ImageRecordCanaryGame
from fdp_audit.config import config_from_dict
from fdp_audit.data.prepare import prepare_data
from fdp_audit.errors import BadInputError
from fdp_audit.reproduce import CONFIGS

IMAGE_GAMES = CONFIGS / "images_games.yaml"
GRADIENT = ("prior", "iterates", "iterates_public_aligned")


def image_config(mechanism: str, game: str, trials: int, **claim: Any) -> dict[str, Any]:
    """configs/images_games.yaml with one game, ``mechanism`` trained and ``claim`` (ε, p, T …) overriding it."""
    from fdp_audit.training.mechanisms import faulty_mechanisms

    raw = yaml.safe_load(IMAGE_GAMES.read_text(encoding="utf-8"))
    raw["device"] = "cpu"
    raw["mechanism"] |= {"name": mechanism, "faulty": mechanism in faulty_mechanisms(), **claim}
    raw["audit"] |= {"games": [game], "trials": trials}
    if game == ImageGradientCanaryGame.name:
        raw["audit"]["attacks"] = list(GRADIENT)
    return raw


def test_both_image_games_are_registered() -> None:
    assert GAMES["image_gradient_canary"] is ImageGradientCanaryGame
    assert GAMES["image_record_canary"] is ImageRecordCanaryGame


@pytest.mark.parametrize("game", [ImageGradientCanaryGame, ImageRecordCanaryGame])
def test_the_image_games_refuse_data_without_an_image_map(small_config, game) -> None:
    config = config_from_dict(small_config(audit={"games": [game.name], "target_prior": [0.5, 0.5]}))
    with pytest.raises(BadInputError) as error:
        game().setup(config, prepare_data(config.data, config.seed))
    assert error.value.field == "data.public_map"


def test_the_gradient_game_needs_an_iterates_attack() -> None:
    with pytest.raises(BadInputError) as error:
        ImageGradientCanaryGame().attacks(("prior", "likelihood"))
    assert error.value.field == "audit.attacks"


@pytest.mark.slow
def test_image_games_run_through_audit_gate_report_and_resume(cli, write_yaml, tmp_path: Path) -> None:
    """Algorithm 1 claimed at ε = 2, both games, 24 trials each: PASS (the measured successes sit far below the
    limit 0.410 at this count), the gate agrees, the report draws the record game's example canaries as inline
    SVG, and a second audit into the same folder reuses every journaled trial and gives the same comparisons."""
    raw = image_config("fdp_sgd", ImageGradientCanaryGame.name, 24)
    raw["audit"] |= {"games": [ImageGradientCanaryGame.name, ImageRecordCanaryGame.name],
                     "attacks": [*GRADIENT, "likelihood", "informed_gradient"], "max_models_per_chunk": 8}
    config = write_yaml(tmp_path / "images.yaml", raw)
    out = tmp_path / "out"
    assert cli("audit", config, "--out", out).code == 0
    results = json.loads((out / "results.json").read_text())
    assert [c["id"] for c in results["comparisons"]] == [
        "image_gradient_canary/iterates", "image_gradient_canary/iterates_public_aligned",
        "image_record_canary/likelihood", "image_record_canary/informed_gradient"]
    assert all(c["trials"] == 24 and c["ball"] == 0.25 for c in results["comparisons"])
    gradient, record = results["games"]
    assert gradient["game"] == "image_gradient_canary" and 0.3 < gradient["optimal_success"] < 0.45
    examples = record["examples"]
    assert examples["image_shape"] == [8, 8] and len(examples["candidates"]) == 4
    assert len(examples["trials"]) == 3 and set(examples["trials"][0]["picks"]) == {"likelihood", "informed_gradient"}
    assert cli("gate", out / "results.json").code == 0
    assert cli("report", out / "results.json", "-o", tmp_path / "report.html").code == 0
    html = (tmp_path / "report.html").read_text()
    assert "Image game" in html and html.count("<svg") >= 2 and "<img" not in html

    again = cli("audit", config, "--out", out)
    assert again.code == 0 and "reused 48 trials" in again.err
    resumed = json.loads((out / "results.json").read_text())
    assert resumed["reproducibility"]["reused_trials"] == {"image_gradient_canary": 24, "image_record_canary": 24}
    assert resumed["comparisons"] == results["comparisons"]


# (mechanism, claim overrides, trials) -> the attack that must catch it; measured successes on seed 0 in comments
HALF_NOISE_CLAIM = {"target_epsilon": 4.0, "sample_rate": 1.0, "steps": 10}  # p = 1: halving z shows in full
CAUGHT = {
    "dp_sgd_half_noise": (HALF_NOISE_CLAIM, 200, "iterates"),  # 156/200 against 0.599
    "dp_sgd_no_clip": ({}, 100, "iterates"),  # 97/100 against 0.410
    "dp_sgd_wrong_rate": ({}, 100, "iterates"),  # 76/100 against 0.410
    "fdp_sgd_leaky_public": ({}, 100, "iterates"),  # 100/100 against 0.410
    "fdp_sgd_shared_batch": ({}, 200, "iterates_public_aligned"),  # 71/100 against 0.410
}
PASSING = {  # a false VIOLATION has probability ≤ α = 0.05 by the gate's guarantee; seeded, each sits far inside
    "fdp_sgd": ({}, 200),  # iterates 31/100 against 0.410
    "dp_sgd": (HALF_NOISE_CLAIM, 200),  # iterates 108/200 against 0.599
}


def audit_and_gate(cli, write_yaml, tmp_path: Path, raw: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """``fdp-audit audit`` then ``fdp-audit gate`` on its results: the gate's exit code (checked equal to the
    audit's) and the results."""
    config = write_yaml(tmp_path / "audit.yaml", raw)
    audited = cli("audit", config, "--out", tmp_path / "out")
    gated = cli("gate", tmp_path / "out" / "results.json")
    assert gated.code == audited.code, (audited.err, gated.err)
    return gated.code, json.loads((tmp_path / "out" / "results.json").read_text())


@pytest.mark.slow
@pytest.mark.parametrize("mechanism", list(CAUGHT))
def test_the_gradient_game_catches_every_known_faulty_mechanism(cli, write_yaml, tmp_path: Path,
                                                                mechanism: str) -> None:
    claim, trials, attack = CAUGHT[mechanism]
    code, results = audit_and_gate(cli, write_yaml, tmp_path,
                                   image_config(mechanism, ImageGradientCanaryGame.name, trials, **claim))
    assert code == 1 and f"image_gradient_canary/{attack}" in results["verdict"]["violations"]


@pytest.mark.slow
@pytest.mark.parametrize("mechanism", list(PASSING))
def test_correct_mechanisms_pass_the_gradient_game(cli, write_yaml, tmp_path: Path, mechanism: str) -> None:
    claim, trials = PASSING[mechanism]
    code, results = audit_and_gate(cli, write_yaml, tmp_path,
                                   image_config(mechanism, ImageGradientCanaryGame.name, trials, **claim))
    assert code == 0, results["verdict"]["explanation"]

