"""The reconstruction game (docs/accounting.md, docs/games.md): canaries with continuous protected values from a known
prior, reconstructed by the white-box attacks, success against Ball(ρ) and the Theorem 4 bound."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from scipy.stats import binom, chi2

from fdp_audit.accounting.ball import ball_uniform_box
from fdp_audit.auditing.games import ReconstructionGame
from fdp_audit.auditing.games.reconstruction import secret_values
from fdp_audit.auditing.journal import Journal
from fdp_audit.auditing.trials import play_game
from fdp_audit.claim import Claim
from fdp_audit.config import config_from_dict
from fdp_audit.data.features import LabelOnlyPublicMap
from fdp_audit.data.prepare import prepare_data
from fdp_audit.errors import BadInputError

TRIALS = 120
RHO = (0.5, 1.0, 2.0)


def setting(mechanism: str, prior: str = "gaussian", attacks=("prior", "reconstruction", "gradient_matching"),
            protected=("protected-0", "protected-1")):
    config = config_from_dict({
        "seed": 3, "device": "cpu",
        "data": {"dataset": "synthetic", "protected": list(protected), "synthetic_rows": 200,
                 "synthetic_prior_kind": "gaussian" if "protected-0" in protected else "categorical"},
        "mechanism": {"name": mechanism, "sample_rate": 1.0, "steps": 200, "noise_multiplier": 1.0,
                      "optimizer": {"name": "sgd", "lr": 2.0}},
        "audit": {"trials": TRIALS, "games": ["reconstruction"], "attacks": list(attacks),
                  "reconstruction_prior": prior, "reconstruction_scale": 1.0, "rho_grid": list(RHO)},
    })
    return config, prepare_data(config.data, config.seed)


def play(config, data, trials: int = TRIALS, journal: Journal | None = None):
    config = config.with_overrides({"audit.trials": trials})
    return play_game(ReconstructionGame(), config, data, journal, max_chunk=64)


@pytest.fixture(scope="module")
def nonprivate():
    config, data = setting("nonprivate")
    return config, data, play(config, data)


def within_binomial(successes: int, trials: int, p: float, level: float = 1e-3) -> bool:
    return binom.ppf(level / 2, trials, p) <= successes <= binom.ppf(1 - level / 2, trials, p)


def test_record_ball_and_bound(nonprivate) -> None:
    config, _, record = nonprivate
    assert record.truth.shape == (TRIALS, 2) and set(record.estimates) == {"prior", "reconstruction",
                                                                          "gradient_matching"}
    np.testing.assert_allclose(record.ball, chi2.cdf(np.square(RHO), 2), rtol=1e-12)  # F_{χ²_2}(ρ²/s²)
    claim = Claim.of(config.mechanism)
    np.testing.assert_allclose(record.bounds(claim), claim.add_remove.bound(record.ball))
    assert np.all(record.bounds(claim) == 1.0)  # non-private: f ≡ 0
    rows = [c.row() for c in ReconstructionGame().comparisons(record, claim, 0.05)]
    assert len(rows) == 2 * len(RHO) and {r["kind"] for r in rows} == {"rate"}
    assert rows[0]["id"] == "reconstruction/reconstruction/rho=0.5"


def test_prior_realises_ball(nonprivate) -> None:
    """The prior's guess (the centre) succeeds with probability exactly Ball(ρ): two-sided binomial interval at
    level 1e-3 per radius (failure probability ≤ 3e-3 in all)."""
    _, _, record = nonprivate
    for successes, ball in zip(record.successes("prior"), record.ball, strict=True):
        assert within_binomial(int(successes), TRIALS, float(ball))


def test_white_box_attacks_reconstruct_a_nonprivate_model(nonprivate) -> None:
    """Full-batch gradient descent near its optimum: the residual is close to the canary's gradient, so the
    informed attacks land within ρ = 0.5 in nearly every trial, far above Ball(0.5) = 0.12."""
    _, _, record = nonprivate
    for attack in ("reconstruction", "gradient_matching"):
        assert record.successes(attack)[0] >= 0.9 * TRIALS


def test_public_only_training_leaks_nothing() -> None:
    """public_only never reads protected values, so the model is independent of v and no attack beats Ball:
    successes above the 0.999 binomial quantile would be a leak (6 checks, false alarm ≤ 6e-3)."""
    config, data = setting("public_only")
    record = play(config, data, trials=80)
    for attack in ("reconstruction", "gradient_matching"):
        for successes, ball in zip(record.successes(attack), record.ball, strict=True):
            assert successes <= binom.ppf(0.999, 80, float(ball))


def test_box_prior_and_resume_from_the_journal() -> None:
    config, data = setting("nonprivate", prior="box", attacks=("prior", "reconstruction"))
    journal = Journal(None, "test")
    first = play(config, data, trials=8, journal=journal)
    truth = secret_values(config.seed, ReconstructionGame().trial_indices(8), "box", 1.0, 2)
    assert float(truth.abs().max()) <= 1.0
    np.testing.assert_allclose(first.ball, [ball_uniform_box(r, [2.0, 2.0]).estimate for r in RHO])
    again = play(config, data, trials=8, journal=journal)  # every trial read back, none retrained
    np.testing.assert_array_equal(again.estimates["reconstruction"], first.estimates["reconstruction"])


@pytest.mark.parametrize(("kwargs", "field"), [({"attacks": ("prior", "likelihood")}, "audit.attacks"),
                                               ({"protected": ("protected",)}, "data.protected")])
def test_bad_input(kwargs: dict, field: str) -> None:
    config, data = setting("nonprivate", **kwargs)
    with pytest.raises(BadInputError) as error:
        play(config, data, trials=2)
    assert error.value.field == field


def test_a_psi_without_continuous_canaries_is_refused_by_name() -> None:
    """The game asks Ψ for its canary (continuous_canary); label DP's Ψ, whose protected part is the label, has
    none, and the game refuses it naming the public map, before any training."""
    config, data = setting("nonprivate")
    with pytest.raises(BadInputError) as error:
        play(config, replace(data, public_map=LabelOnlyPublicMap()), trials=2)
    assert error.value.field == "data.public_map" and "continuous_canary" in str(error.value)
