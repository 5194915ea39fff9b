"""Audit games (docs/statistics.md, docs/games.md): secrets from the GAME stream, canaries, and known answers at p = 1,
where the released canary coordinate is a pure Gaussian mechanism."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
import torch
from scipy.stats import binom, norm

from attacks.shadow import ShadowModelAttack
from fdp_audit.auditing.games import GAMES, AttributeGame, DistinguishingGame
from fdp_audit.auditing.games.base import trial_uniforms
from fdp_audit.auditing.games.gradient_canary import CANARY_COLUMNS, with_canary_columns
from fdp_audit.auditing.runner import run_audit
from fdp_audit.auditing.trials import play_game
from fdp_audit.config import config_from_dict
from fdp_audit.data.prepare import prepare_data
from fdp_audit.errors import BadInputError


def within_binomial(successes: int, trials: int, p: float, level: float = 1e-3) -> bool:
    return binom.ppf(level / 2, trials, p) <= successes <= binom.ppf(1 - level / 2, trials, p)


def play(game: str, raw: dict, trials: int):
    config = config_from_dict({**raw, "audit": {**raw["audit"], "trials": trials}})
    data = prepare_data(config.data, config.seed)
    return play_game(GAMES[game](), config, data, max_chunk=trials)


def successes(record, attack: str) -> int:
    return int((record.scores[attack].argmax(axis=1) == record.labels).sum())


def test_trial_uniforms_are_deterministic_and_keyed_by_seed() -> None:
    indices = DistinguishingGame().trial_indices(100)
    first, again = trial_uniforms(0, indices), trial_uniforms(0, indices)
    assert torch.equal(first, again)
    assert ((first >= 0) & (first < 1)).all()
    assert not torch.equal(first, trial_uniforms(1, indices))
    assert not torch.equal(first, trial_uniforms(0, AttributeGame().trial_indices(100)))
    assert torch.equal(trial_uniforms(0, indices[40:60]), first[40:60])  # one uniform per trial, not per call


def test_canary_columns_are_zero_and_public(small_config) -> None:
    data = prepare_data(config_from_dict(small_config(rows=100)).data, 0)
    widened = with_canary_columns(data)
    d = data.train.n_features
    added = set(range(d, d + len(CANARY_COLUMNS)))
    assert widened.train.n_features == d + len(CANARY_COLUMNS) and len(CANARY_COLUMNS) > 2
    assert np.array_equal(widened.train.x[:, :d], data.train.x) and not widened.train.x[:, d:].any()
    public = set(widened.public_map.public_columns.tolist())
    assert added <= public and not added & set(widened.public_map.protected_columns.tolist())


@pytest.mark.parametrize(("z", "steps"), [(2.0, 2), (1.0, 4)])
def test_distinguishing_game_at_full_batch_is_a_gaussian_mechanism(small_config, z: float, steps: int) -> None:
    """p = 1: the ±C canary is seen as N(±1, z²) at every step; the optimal (and the iterates attack's)
    success is Φ(√T/z). 200 trials; the two-sided binomial interval at level 1e-3 fails with probability
    ≤ 1e-3 for an optimal attack."""
    raw = small_config("dp_sgd", rows=100, mechanism={"noise_multiplier": z, "sample_rate": 1.0, "steps": steps})
    record = play("distinguishing", raw, 200)
    assert 60 < record.labels.sum() < 140
    assert set(record.scores) == {"prior", "iterates"}
    assert record.candidate_names == ("x0 (s=-1)", "x1 (s=+1)") and record.prior.tolist() == [0.5, 0.5]
    assert within_binomial(successes(record, "iterates"), 200, norm.cdf(math.sqrt(steps) / z))


def test_simulator_game_at_full_batch(small_config) -> None:
    """The simulator game (insertion/deletion): N(1, z²)^T against N(0, z²)^T, optimum Φ(√T/(2z)) = Φ(1).
    200 trials; the two-sided binomial interval at level 1e-3 fails with probability ≤ 1e-3."""
    raw = small_config("fdp_sgd", rows=100, mechanism={"noise_multiplier": 1.0, "sample_rate": 1.0, "steps": 4},
                       audit={"games": ["simulator"]})
    record = play("simulator", raw, 200)
    assert record.candidate_names == ("simulator", "real")
    assert within_binomial(successes(record, "iterates"), 200, norm.cdf(1.0))


def test_attribute_game_draws_secrets_from_the_prior(small_config) -> None:
    """The record canary's value follows audit.target_prior: Bin(300, 0.7) at level 1e-3."""
    raw = small_config("fdp_sgd", rows=200, mechanism={"steps": 5},
                       audit={"games": ["attribute"], "attacks": ["prior", "likelihood", "gradient", "iterates"],
                              "target_prior": [0.7, 0.3]})
    record = play("attribute", raw, 300)
    assert set(record.scores) == {"prior", "likelihood", "gradient"}  # iterates needs a gradient canary
    assert record.threat_models == {"prior": "prior", "likelihood": "black_box", "gradient": "white_box"}
    assert record.prior.tolist() == [0.7, 0.3]
    assert within_binomial(int((record.labels == 0).sum()), 300, 0.7)
    assert successes(record, "prior") == int((record.labels == 0).sum())  # the prior always guesses value 0
    assert all(re.fullmatch(r"protected=\d", name) for name in record.candidate_names)


@pytest.mark.parametrize(("audit", "field"), [
    ({"attacks": ["prior", "telepathy"]}, "audit.attacks"),
    ({"attacks": ["prior", "likelihood"]}, "audit.attacks"),  # a distinguishing game without an iterates attack
    ({"games": ["attribute"], "target_prior": [0.2, 0.2, 0.2, 0.2, 0.2], "trials": 100}, "audit.target_prior"),
    ({"games": ["reconstruction"]}, "data.protected"),  # its protected feature is categorical, not continuous
])
def test_bad_game_setup_is_bad_input(small_config, audit: dict, field: str) -> None:
    with pytest.raises(BadInputError, match=re.escape(field)):  # an unknown name already when the config is built
        run_audit(config_from_dict(small_config(rows=100, audit=audit)), None)


def test_shadow_attack_plays_the_attribute_game(small_config, monkeypatch) -> None:
    """Wiring: the meta-classifier's shadow models are trained on the population split (what the adversary
    owns), under their own seed, and it scores every trial with a posterior plus the log prior. Its power is
    tested on known answers in tests/attacks/test_shadow.py: in a 16-row game the other rows, not the
    canary, decide how a final model ranks the candidates (seeded 200-trial games: the likelihood and
    shadow attacks guess one value in every trial)."""
    raw = small_config("nonprivate", rows=16, mechanism={"steps": 300, "sample_rate": 1.0},
                       audit={"games": ["attribute"], "attacks": ["prior", "shadow"]})
    fitted = []
    fit = ShadowModelAttack.fit
    monkeypatch.setattr(ShadowModelAttack, "fit",
                        lambda self, knowledge: fitted.append(knowledge) or fit(self, knowledge))
    record = play("attribute", raw, 40)
    assert set(record.scores) == {"prior", "shadow"} and record.threat_models["shadow"] == "black_box"
    (knowledge,) = fitted
    population = prepare_data(config_from_dict(raw).data, raw["seed"]).population
    shadow_x = knowledge.shadow_problem.x
    assert torch.equal(shadow_x, torch.as_tensor(population.x, dtype=shadow_x.dtype))
    assert knowledge.shadow_seed == raw["seed"] + 1
    assert record.scores["shadow"].shape == (40, 2)
    posterior = np.exp(record.scores["shadow"] - np.log(record.prior))
    np.testing.assert_allclose(posterior.sum(axis=1), 1.0, rtol=1e-9)
