"""The membership game (fdp_audit/auditing/games/membership.py): add/remove worlds, final model only.

* Soundness: third-party DP-SGDs that leak more than they claim are caught by a final-model attack, each with
  the trials at which the test's own decision rule catches it with probability at least 1 − 1e-3 (``python -m
  calibrations.own_rule_bound membership FAULT``: the test's rule fitted on selection halves drawn from a seed-11
  pool of the cell's audit, each rule's success at its Clopper–Pearson lower bound at confidence 1 − 1e-4 on the
  pool's other half, judged at the gate's level α/2 for the game's comparisons):
  0.3 of the claimed noise (``canary_logit``); the update divided by p·|D| with |D| the data set trained on, or
  by the realised batch size (``noise_scale``); fixed-size shuffled batches claimed as Poisson sampling
  (``canary_logit``: the canary is trained on exactly once an epoch, while Poisson sampling skips it with
  probability (1 − p)^T, which is all the privacy a small noise multiplier leaves).
* Null: the honest DP-SGD passes at the same trials (a false VIOLATION has probability at most α = 0.05 by the
  gate's guarantee), and a mechanism whose output does not depend on the private data passes a claim of ε = 0.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from fdp_audit.auditing.games import GAMES, MembershipGame
from fdp_audit.auditing.games.membership import CANARY_LABEL, MEMBERSHIP_COLUMNS, canary_value
from fdp_audit.auditing.trials import play_game
from fdp_audit.config import Config, config_from_dict
from fdp_audit.data.prepare import prepare_data
from fdp_audit.errors import BadInputError

EXAMPLES = Path(__file__).parents[1] / "third_party_mechanisms.py"
FINAL_MODEL = ("prior", "canary_logit", "noise_scale")


def membership_config(small_config, mechanism: str | None, rows: int, trials: int, claim: dict[str, float],
                      attacks: tuple[str, ...] = FINAL_MODEL, name: str = "dp_sgd") -> Config:
    """The membership game alone on the synthetic table's first ``rows`` rows (half of them train)."""
    third_party = {} if mechanism is None else {"third_party": f"{EXAMPLES}:{mechanism}"}
    return config_from_dict(small_config(name, rows=rows, mechanism={**claim, **third_party},
                                         audit={"trials": trials, "games": ["membership"], "attacks": list(attacks)}))


def verdict(verdict_only_audit, config: Config) -> dict[str, Any]:
    results = verdict_only_audit(config)
    assert results["verdict"]["status"] in ("PASS", "VIOLATION")
    return results["verdict"]


# fault -> (rows, claim, trials, the attack that must catch it). Calibration (comment): successes of 1,000
# evaluation trials on seed 11 (2,000 trials) and their Clopper–Pearson lower bound at confidence 1 − 1e-4 against
# the bound. Trials: the fewest at which the test's own rule, fitted on its own selection half, misses with
# probability ≤ 1e-3 at the gate's level α/2 (the attack and its ε comparison): `python -m
# calibrations.own_rule_bound membership FAULT --pool 6000 --fits 100000 --test-trials N` fits the test's rule on
# 100,000 selection halves drawn from a 6,000-trial pool (seed 11) with the test's own secrets, bounds each rule's
# success on the pool's other half (Clopper–Pearson at 1 − 1e-4) and the miss from their spread ("own" below;
# counts scanned in steps of 8, the miss not being monotone in the trials); "resampled": the whole test drawn from
# the pool 100,000 times, its misses. The bound takes on trust that the seed-11 pool stands for one trial's law at
# the test's own seed, that draws from a finite pool spread the fits as the law would, and each rule's lower bound
# on its own, not jointly.
QUIET = {"noise_multiplier": 1.5, "sample_rate": 0.5, "steps": 4}
REALISED = {"noise_multiplier": 10.0, "sample_rate": 0.5, "steps": 50}
SHUFFLED = {"noise_multiplier": 0.15, "sample_rate": 0.5, "steps": 2}
CAUGHT = {
    # 824/1,000 (.776 vs .630); own ≤ 7.9e-4 at 576 (494: 2.4e-3, 560: 1.1e-3), resampled 0 misses
    "quiet_dp_sgd": (200, QUIET, 576, "canary_logit"),
    # 894/1,000 (.854 vs .630); own ≤ 7.3e-4, resampled 3 misses
    "dataset_size_dp_sgd": (16, QUIET, 188, "noise_scale"),
    # 828/1,000 (.780 vs .570); own ≤ 9.7e-4 at 272 (248: 1.3e-3, 264: 1.3e-3), resampled 2 misses
    "realised_batch_dp_sgd": (10, REALISED, 272, "noise_scale"),
    # 992/1,000 (.976 vs .875); own ≤ 9.6e-4 at 352 (286: 3.8e-3, 344: 1.8e-3), resampled 2 misses (at 286: 10)
    "shuffled_dp_sgd": (22, SHUFFLED, 352, "canary_logit"),
}


@pytest.mark.slow
@pytest.mark.parametrize("fault", list(CAUGHT))
def test_each_fault_is_caught_by_a_final_model_attack(verdict_only_audit, small_config, fault: str) -> None:
    rows, claim, trials, attack = CAUGHT[fault]
    config = membership_config(small_config, fault, rows, trials, claim, ("prior", attack))
    result = verdict(verdict_only_audit, config)
    assert f"membership-attribute/{attack}" in result["violations"], result["explanation"]


@pytest.mark.slow
@pytest.mark.parametrize("fault", list(CAUGHT))
def test_the_honest_dp_sgd_passes_at_the_same_trials(verdict_only_audit, small_config, fault: str) -> None:
    rows, claim, trials, attack = CAUGHT[fault]
    config = membership_config(small_config, "honest_dp_sgd", rows, trials, claim, ("prior", attack))
    result = verdict(verdict_only_audit, config)
    assert result["status"] == "PASS", result["explanation"]


@pytest.mark.slow
def test_normalising_the_noisy_update_by_its_own_norm_passes(verdict_only_audit, small_config) -> None:
    """Data-dependent but post-processing: the step is a function of the released noisy sum alone, so no attack
    can exceed the claim (a false VIOLATION has probability at most α)."""
    rows, claim, trials, _ = CAUGHT["quiet_dp_sgd"]
    config = membership_config(small_config, "self_normalised_dp_sgd", rows, trials, claim)  # both attacks
    assert verdict(verdict_only_audit, config)["status"] == "PASS"


def test_no_leak_passes_a_claim_of_no_leak(verdict_only_audit, small_config) -> None:
    """public_only trains on Ψ alone (the canary is in the public population in both worlds), so both worlds
    give the same models and the claim (ε = 0, bound ½) can only be violated by chance (probability ≤ α)."""
    config = membership_config(small_config, None, 200, 60, {}, name="public_only")
    assert verdict(verdict_only_audit, config)["status"] == "PASS"


def test_every_step_adds_the_canarys_full_clipped_norm_in_one_world_only(small_config) -> None:
    """Known answer: full batches (p = 1) and almost no noise. No other record touches the canary column and the
    canary starts (and stays) far from its label, so each of the T steps adds its clipped gradient, of norm C and
    direction (M, 1)/√(M² + 1) on (canary column, bias), divided by p·n: the two worlds' canary_logit scores
    differ by M · T · lr · C · M/√(M² + 1) / n. Its public membership is the same in both worlds."""
    config = membership_config(small_config, None, 200, 16, {"noise_multiplier": 1e-4, "sample_rate": 1.0,
                                                             "steps": 4})
    data = prepare_data(config.data, config.seed)
    record = play_game(MembershipGame(), config, data)
    assert record.candidate_names == ("absent", "present") and set(np.unique(record.labels)) == {0, 1}
    score = record.scores["canary_logit"][:, 1]
    value, n = canary_value(config), data.train.n_rows
    expected = value * 4 * 1.0 * 1.0 * value / np.sqrt(value ** 2 + 1) / n
    gap = score[record.labels == 1][:, None] - score[record.labels == 0][None, :]
    assert np.allclose(gap, expected, rtol=1e-3), (gap.min(), gap.max(), expected)
    assert len(MEMBERSHIP_COLUMNS) > 2 and CANARY_LABEL == 1


def test_the_game_is_registered_and_refuses_what_it_cannot_play(small_config) -> None:
    assert GAMES["membership"] is MembershipGame
    config = membership_config(small_config, None, 200, 4, QUIET)
    data = prepare_data(config.data, config.seed)
    with pytest.raises(BadInputError, match="membership game"):
        MembershipGame().setup(replace(config, model=replace(config.model, kind="cnn")), data)
    with pytest.raises(BadInputError, match="one of canary_logit, noise_scale"):
        MembershipGame().attacks(("prior", "likelihood", "iterates"))


USER_LOOPS = Path(__file__).parents[1] / "user_loops.py"


def test_a_users_module_on_a_table_takes_the_appended_columns(small_config) -> None:
    """model.factory's module is built on the widened width; every trial starts from one fixed initialisation
    (the factory's at a key no trial uses), which the user's training starts from too."""
    from fdp_audit.auditing.user_training import user_trainer

    raw = small_config("dp_sgd", rows=40, model={"kind": "module", "factory": f"{USER_LOOPS}:linear"},
                       mechanism={"training": f"{USER_LOOPS}:honest"}, audit={"games": ["membership"]})
    config = config_from_dict(raw)
    data = prepare_data(config.data, config.seed)
    setup = MembershipGame().setup(config, data)
    d = data.train.n_features
    assert setup.width == d + len(MEMBERSHIP_COLUMNS) and setup.problem.model.n_inputs == setup.width
    assert setup.knowledge.noise_inputs == tuple(range(d + 1, setup.width))
    trainer = user_trainer(config, setup.problem)
    for seed in (1, 2):
        start = dict(trainer.fresh_module(seed).named_parameters())
        for name, value in setup.problem.initial_params.items():
            assert torch.equal(start[name].detach(), value)


def test_a_module_on_images_gets_a_crafted_image(small_config) -> None:
    """No column can be appended to an image: the canary is a checkerboard of norm M = K·C on the image's own
    pixels, negative where no image is, and only canary_logit is chosen for it."""
    raw = small_config("dp_sgd", data={"dataset": "digits", "protected": [], "public_map": "downsample",
                                       "downsample_factor": 2, "max_rows": 40},
                       model={"kind": "cnn", "hidden": [2]}, audit={"games": ["membership"]})
    config = config_from_dict(raw)
    data = prepare_data(config.data, config.seed)
    setup = MembershipGame().setup(config, data)
    canary = setup.knowledge.candidates[1]
    assert setup.width == data.train.n_features == 64 and setup.knowledge.noise_inputs is None
    assert float(canary.norm()) == pytest.approx(canary_value(config)) and float(canary.min()) < 0
    assert torch.equal(setup.knowledge.candidates[0], torch.zeros(64)) and setup.problem.initial_params is not None
    assert list(MembershipGame().attacks(config.audit.attacks, config)) == ["prior", "canary_logit"]


def test_its_attacks_are_chosen_when_the_list_names_none_of_them(small_config) -> None:
    """audit.attacks of the other games (the default list) plays both final-model attacks on a table; a list that
    names one of them keeps it alone."""
    config = config_from_dict(small_config("dp_sgd", audit={"games": ["membership"],
                                                            "attacks": ["prior", "likelihood", "iterates"]}))
    assert list(MembershipGame().attacks(config.audit.attacks, config)) == ["prior", "canary_logit", "noise_scale"]
    assert list(MembershipGame().attacks(("prior", "noise_scale"), config)) == ["prior", "noise_scale"]
