"""The continuous image game (docs/images.md): a canary image whose protected part is an isotropic Gaussian on Ψ's
protected subspace, reconstructed by the iterates gradient-matching attack, success within ρ against
1 − f(Ball(ρ)) with Ball(ρ) = F_{χ²_m}(ρ²/s²)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from scipy.stats import binom, chi2, ncx2

from attacks import View
from fdp_audit.accounting.ball import ball_gaussian
from fdp_audit.auditing.games import GAMES, ImageReconstructionGame
from fdp_audit.auditing.games.image_reconstruction import protected_basis
from fdp_audit.auditing.trials import play_game
from fdp_audit.claim import Claim
from fdp_audit.config import config_from_dict
from fdp_audit.data.image_psi import BlurPublicMap, DownsamplePublicMap
from fdp_audit.data.prepare import prepare_data
from fdp_audit.errors import BadInputError
from fdp_audit.mechanisms import MECHANISMS, Mechanism, Recipe, register_mechanism
from fdp_audit.training.engine import Canaries, train_models

SCALE = 0.3


def raw_config(mechanism: str = "dp_sgd", trials: int = 40, **mechanism_fields) -> dict:
    """Digits with the band-limited blur σ = 0.7, τ = 0.05 (m = 4 protected dimensions), full-batch DP-SGD on the
    small CNN from the game's fixed start (T = 4, z = 2)."""
    return {
        "name": "image_reconstruction", "seed": 0, "device": "cpu",
        "data": {"dataset": "digits", "protected": [], "public_map": "blur", "blur_sigma": 0.7,
                 "blur_tolerance": 0.05, "max_rows": 100, "population_fraction": 0.3},
        "model": {"kind": "cnn", "hidden": [4, 8]},
        "mechanism": {"name": mechanism, "faulty": mechanism not in ("dp_sgd", "fdp_sgd"), "sample_rate": 1.0,
                      "steps": 4, "noise_multiplier": 2.0, "clip_norm": 1.0, "public_loss": "public_image",
                      "optimizer": {"name": "sgd", "lr": 0.2, "momentum": 0.9}} | mechanism_fields,
        "audit": {"trials": trials, "games": ["image_reconstruction"],
                  "attacks": ["prior", "gradient_matching_iterates"], "reconstruction_scale": SCALE},
    }


def setting(mechanism: str = "dp_sgd", trials: int = 40, **mechanism_fields):
    config = config_from_dict(raw_config(mechanism, trials, **mechanism_fields))
    return config, prepare_data(config.data, config.seed)


@pytest.fixture
def no_noise():
    """A known fault for this test only: DP-SGD that forgets its noise, claiming DP-SGD's guarantee."""
    register_mechanism(Mechanism("dp_sgd_no_noise", Recipe("full", "none", noise_factor=0.0),
                                 "FAULTY: adds no noise.", claims="dp_sgd"))
    yield
    MECHANISMS.unregister("dp_sgd_no_noise")


@pytest.mark.parametrize("psi", [BlurPublicMap(8, 8, True, 0.7, 0.05), DownsamplePublicMap(8, 8, True, 2)],
                         ids=["blur", "downsample"])
def test_ball_of_the_gaussian_on_the_protected_subspace(psi) -> None:
    """P z with z ~ N(0, s² I_d) is N(0, s² I_m) on the protected subspace: its mass within ρ of the mean is
    F_{χ²_m}(ρ²/s²) (Monte Carlo, 100,000 draws, within the two-sided binomial interval at level 1e-6 per check),
    and a ball centred at v ≠ 0 in the subspace holds the non-central F_{χ²_m(‖v‖²/s²)}(ρ²/s²), less (Anderson's
    inequality: the supremum defining Ball is at the mean)."""
    m = psi.protected_dimension
    basis = protected_basis(psi)
    np.testing.assert_allclose(basis @ basis.T, torch.eye(m, dtype=torch.float64), atol=1e-10)
    np.testing.assert_allclose(basis.T @ basis, psi.protected_part(torch.eye(64, dtype=torch.float64)), atol=1e-10)
    draws = 100_000
    z = psi.protected_part(SCALE * torch.randn(draws, 64, generator=torch.Generator().manual_seed(5),
                                               dtype=torch.float64))
    norms = z.norm(dim=1).numpy()
    shift = (SCALE * basis.sum(dim=0) / basis.sum(dim=0).norm()).numpy()  # ‖v‖ = s
    for level in (0.05, 0.25, 0.5, 0.9):
        rho = SCALE * np.sqrt(chi2.ppf(level, m))
        ball = ball_gaussian(rho, SCALE, m)
        hits = int((norms <= rho).sum())
        assert binom.ppf(5e-7, draws, ball) <= hits <= binom.ppf(1 - 5e-7, draws, ball)
        off_centre = ncx2.cdf(rho ** 2 / SCALE ** 2, m, 1.0)
        shifted = int((np.linalg.norm(z.numpy() - shift, axis=1) <= rho).sum())
        assert binom.ppf(5e-7, draws, off_centre) <= shifted <= binom.ppf(1 - 5e-7, draws, off_centre)
        assert off_centre < ball


def test_canaries_share_the_public_image_and_carry_their_secret() -> None:
    config, data = setting(trials=6)
    game = ImageReconstructionGame()
    setup = game.setup(config, data)
    indices = game.trial_indices(6)
    canaries = game.canaries(config, setup, indices)
    psi = data.public_map
    record = torch.as_tensor(data.population.x[0], dtype=torch.float64)
    public = psi(canaries.x.double(), canaries.y).features
    np.testing.assert_allclose(public, psi(record[None], canaries.y[:1]).features.expand(6, -1), atol=1e-6)
    coordinates = (canaries.x.double() - setup.visible) @ setup.subspace.basis.T
    np.testing.assert_allclose(coordinates, game.values(config, setup, indices), atol=1e-6)
    assert setup.subspace.dimension == 4 and game.score_width(setup) == 4
    assert bool(canaries.in_private.all() and canaries.in_public.all())


@pytest.mark.slow
def test_canary_absent_from_training_is_not_reconstructed_beyond_ball() -> None:
    """Null data: the canary is in neither population, so the model is independent of its secret and no
    reconstruction succeeds with probability above Ball(ρ). Successes above the 0.999 binomial quantile of Ball
    would be invented leakage (3 radii: false alarm ≤ 3e-3)."""
    config, data = setting("dp_sgd", trials=40, noise_multiplier=0.5)
    game = ImageReconstructionGame()
    setup = game.setup(config, data)
    indices = game.trial_indices(40)
    present = game.canaries(config, setup, indices)
    absent = Canaries(present.x, present.y, torch.zeros(40, dtype=torch.bool), torch.zeros(40, dtype=torch.bool))
    attack = game.attacks(("gradient_matching_iterates",))["gradient_matching_iterates"].fit(setup.knowledge)
    (chunk,) = train_models(setup.problem, config.seed, indices, absent, record_iterates=True)
    view = View(chunk.params, chunk.iterates.noisy_private_sums, chunk.iterates.public_gradients)
    estimate = attack.infer(view).estimate
    distance = (estimate - game.values(config, setup, indices)).norm(dim=1).numpy()
    rho = SCALE * np.sqrt(chi2.ppf([0.05, 0.25, 0.5], 4))
    for r, level in zip(rho, (0.05, 0.25, 0.5), strict=True):
        assert int((distance <= r).sum()) <= binom.ppf(0.999, 40, level)


@pytest.mark.slow
def test_the_attack_reconstructs_a_noiseless_release(no_noise) -> None:
    """Without noise the target's gradient is released exactly at every step (p = 1) and the reconstruction lands
    within ρ at Ball 0.05 in most trials (11 of these 12; 78 of 100 in the first 100 trials of this seed), far
    above Ball: deterministic given the seed, and at a success rate of 0.78 fewer than 10 of 12 has probability
    0.3, so the threshold is no statement about the rate, only that the attack reconstructs."""
    config, data = setting("dp_sgd_no_noise", trials=12)
    record = play_game(ImageReconstructionGame(), config, data)
    assert record.successes("gradient_matching_iterates")[0] >= 10
    np.testing.assert_allclose(record.ball, [0.05, 0.25, 0.5], rtol=1e-10)
    claim = Claim.of(config.mechanism)
    np.testing.assert_allclose(record.bounds(claim), claim.add_remove.bound(record.ball))


@pytest.mark.slow
def test_correct_mechanism_stays_at_the_prior_and_passes_the_gate(cli, write_yaml, tmp_path) -> None:
    """``fdp-audit audit`` + ``gate`` on DP-SGD (z = 2, T = 4, p = 1): the prior realises Ball exactly (two-sided
    binomial interval at level 1e-3 per radius) and the attack stays within the 0.999 binomial quantile of the
    bound (measured on 100 trials: 5, 25, 46 against Ball 5, 25, 50 and bounds 26, 63, 84). The gate's false
    alarm is at most α = 0.05 by its guarantee; at these margins it needs 18 or more of 40 at ρ(Ball 0.05),
    probability 1e-8 even at twice Ball."""
    config = write_yaml(tmp_path / "correct.yaml", raw_config("dp_sgd", trials=40))
    assert cli("audit", config, "--out", tmp_path / "out").code == 0
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    assert cli("gate", tmp_path / "out" / "results.json").code == 0
    (section,) = [g for g in results["games"] if g["game"] == "image_reconstruction"]
    attacks = {a["attack"]: a for a in section["attacks"]}
    for point in attacks["prior"]["points"]:
        assert binom.ppf(5e-4, 40, point["ball"]) <= point["successes"] <= binom.ppf(1 - 5e-4, 40, point["ball"])
    for point in attacks["gradient_matching_iterates"]["points"]:
        assert point["successes"] <= binom.ppf(0.999, 40, point["bound"]) and point["status"] == "pass"


@pytest.mark.slow
def test_a_mechanism_without_noise_is_caught(cli, write_yaml, tmp_path, no_noise) -> None:
    """``fdp-audit audit`` + ``gate`` on DP-SGD that adds no noise but claims z = 2: the attack reconstructs far
    above the bound (measured on 100 trials: 78, 93, 98 within ρ at Ball 0.05, 0.25, 0.5 against bounds 0.26,
    0.63, 0.84). A miss needs at most 17 of 40 at ρ(Ball 0.05) (the Clopper–Pearson bound at α/3 crosses 0.26 at
    18): at the measured rate 0.78, probability 1e-6 (3e-4 at 0.7)."""
    config = write_yaml(tmp_path / "faulty.yaml", raw_config("dp_sgd_no_noise", trials=40))
    assert cli("audit", config, "--out", tmp_path / "out").code == 1
    assert cli("gate", tmp_path / "out" / "results.json").code == 1
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    assert any(v.startswith("image_reconstruction/gradient_matching_iterates/rho=")
               for v in results["verdict"]["violations"])


def test_registered_and_refuses_what_it_cannot_play() -> None:
    assert GAMES["image_reconstruction"] is ImageReconstructionGame
    config, data = setting()
    with pytest.raises(BadInputError) as error:  # no attack for a protected subspace
        play_game(ImageReconstructionGame(), config.with_overrides({"audit.attacks": ["prior"], "audit.trials": 2}),
                  data)
    assert error.value.field == "audit.attacks"
    adam = config.with_overrides({"mechanism.optimizer.name": "adam", "audit.trials": 2})
    with pytest.raises(BadInputError) as error:
        play_game(ImageReconstructionGame(), adam, data)
    assert error.value.field == "mechanism.optimizer"
    for spec in ({"mechanism.training": "user_loop:train", "model.kind": "module", "model.factory": "user_loop:model"},
                 {"mechanism.third_party": "their_sgd:train"}):
        outside = config.with_overrides(spec)
        with pytest.raises(BadInputError) as error:  # refused at set-up, before a single model is trained
            ImageReconstructionGame().setup(outside, data)
        assert error.value.field == "audit.games"
    table = config_from_dict({"data": {"dataset": "synthetic", "protected": ["protected"]},
                              "audit": {"games": ["image_reconstruction"], "attacks": ["gradient_matching_iterates"]}})
    with pytest.raises(BadInputError) as error:
        ImageReconstructionGame().setup(table, prepare_data(table.data, table.seed))
    assert error.value.field == "data.public_map"
    with pytest.raises(BadInputError) as error:
        config_from_dict({"audit": {"ball_levels": [0.5, 1.0]}})
    assert error.value.field == "audit.ball_levels"
