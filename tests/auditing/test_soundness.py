"""Soundness of the gate against mechanisms that leak more than they claim (README "Known-faulty mechanisms").

* Regression tests: leaks that used to PASS — a mechanism with less noise than it claims, a public loss that
  reads protected features, a third-party DP-SGD with 0.3 of its claimed noise — each in the simulator game
  alone, where the attacks used to score with the claimed z and p and the rate comparison used Theorem 4's
  loose bound instead of the simulator game's own optimum; and a third-party DP-SGD that adds one noise draw
  to every coordinate, in each gradient-canary game, which the iterates attack scored as independent noise.
* The soundness matrix: every known-faulty mechanism is caught by every game that can see its fault, each
  game on its own; the correct mechanisms pass in the same games. Cells a game cannot see are listed in
  ``NOT_VISIBLE`` with the reason. (The membership game's third-party faults: tests/auditing/games/test_membership.py.)
* The same matrix on the user-loop path: DP-SGD loops written by hand (tests/auditing/user_loops.py) with a tenth of
  the noise, no clipping, or a normalisation by the data set's size or the realised batch, against the
  gradient-canary games, the attribute game and the add/remove (membership) game.

Each cell is one seeded audit; its docstring-level numbers (success, bound) were measured on seed 0, and the
trial counts are chosen so that a miss needs the success to fall at least 3.5 standard errors below what was
measured (probability below 3e-4 per cell, by the normal approximation of the binomial)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from fdp_audit.config import Config, config_from_dict, load_config
from tests.auditing.user_loops import LOW_NOISE, ONE_EPOCH, QUIET, SMALL, SPARSE

pytestmark = pytest.mark.slow

CONFIGS = Path(__file__).parent / "configs"
EXAMPLES = Path(__file__).parent / "third_party_mechanisms.py"
ITERATES = ("prior", "iterates", "iterates_public_aligned")
FINAL_MODEL = ("prior", "likelihood", "gradient")
MEMBERSHIP = ("prior", "canary_logit")


def game_config(name: str, game: str, trials: int, attacks: tuple[str, ...] = ITERATES) -> Config:
    """The gate-proof config of ``name`` (tests/auditing/configs) with one game and its own trial count."""
    config = load_config(CONFIGS / f"{name}.yaml")
    return config.with_overrides({"audit.games": (game,), "audit.attacks": attacks, "audit.trials": trials})


def violations(results: dict[str, Any]) -> list[str]:
    assert results["verdict"]["status"] in ("PASS", "VIOLATION")
    return results["verdict"]["violations"]


def test_half_noise_is_caught_by_the_simulator_game(verdict_only_audit, small_config) -> None:
    """Regression. dp_sgd_half_noise (z = 1.5 claimed, 0.75 real; p = 0.5, T = 4), simulator game alone,
    1,000 trials. Before: PASS (723 of 1,000 against Theorem 4's 1 − f(½) = 0.752, which is not what the
    simulator game can reach: its optimum under the claim is 0.630). Now: 360 of the 500 evaluation trials
    (0.72) against 0.630."""
    config = config_from_dict(small_config(
        "dp_sgd_half_noise", rows=200, mechanism={"noise_multiplier": 1.5, "sample_rate": 0.5, "steps": 4},
        audit={"trials": 1000, "games": ["simulator"], "attacks": ["prior", "iterates"]}))
    assert "simulator-attribute/iterates" in violations(verdict_only_audit(config))


def test_leaky_public_loss_is_caught_by_the_simulator_game(verdict_only_audit) -> None:
    """Regression. fdp_sgd_leaky_public in the simulator game alone: the simulator's public record x' used to
    carry the same private value as x, so a public loss reading it could not tell the worlds apart (PASS). x'
    now has the other value (it only has to share Ψ): 98 of the 100 evaluation trials against 0.603."""
    config = game_config("leaky_public", "simulator", 200, ("prior", "iterates"))
    assert "simulator-attribute/iterates" in violations(verdict_only_audit(config))


def test_quiet_third_party_dp_sgd_is_caught_by_the_simulator_game(verdict_only_audit, small_config) -> None:
    """Regression. A third-party DP-SGD with 0.3 of the claimed noise (z = 1.5, p = 0.5, T = 4), simulator
    game, 400 trials. Before: PASS (313 of 400 against 0.752). Now: 162 of the 200 evaluation trials (0.81)
    against 0.630."""
    config = config_from_dict(small_config(
        "dp_sgd", rows=200,
        mechanism={"third_party": f"{EXAMPLES}:quiet_dp_sgd", "noise_multiplier": 1.5, "sample_rate": 0.5,
                   "steps": 4},
        audit={"trials": 400, "games": ["simulator"], "attacks": ["prior", "iterates"]}))
    assert "simulator-attribute/iterates" in violations(verdict_only_audit(config))


@pytest.mark.parametrize("game", ["simulator", "distinguishing"])
def test_shared_noise_third_party_dp_sgd_is_caught(verdict_only_audit, small_config, game: str) -> None:
    """Regression. A third-party DP-SGD that adds one Gaussian draw per step to every coordinate (``randn(1)``
    for ``randn(width)``; z = 2, p = 0.2, T = 40), 200 trials: any coordinate minus another is un-noised, yet
    the noise coordinates' scale looked right, so the iterates attack scored the canary as if its noise were
    independent. Before: PASS (simulator 56 of 100 evaluation trials against 0.627, distinguishing 73 of 100
    against 0.733). Now the attack projects out the noise the canary shares with the noise coordinates: 100 of
    100 in both. A miss needs more than 15 of the 100 evaluation trials lost, while a trial is lost essentially
    only when its canary is never sampled (0.8⁴⁰ ≈ 1e-4): probability far below 1e-6."""
    config = config_from_dict(small_config(
        "dp_sgd", rows=200,
        mechanism={"third_party": f"{EXAMPLES}:shared_noise_dp_sgd", "noise_multiplier": 2.0, "sample_rate": 0.2,
                   "steps": 40},
        audit={"trials": 200, "games": [game], "attacks": ["prior", "iterates"]}))
    assert f"{game}-attribute/iterates" in violations(verdict_only_audit(config))


def leaky_attribute_config(name: str) -> Config:
    """The attribute game can see a public loss that reads protected features when the private part barely
    moves the model (private weight 0.01): the leaky public gradient imprints the canary's value un-noised.
    Measured: 147 of 150 against 1 − f(½) = 0.672 (leaky), 94 of 150 (fdp_sgd)."""
    return config_from_dict({
        "name": "attribute_leaky", "seed": 0, "device": "cpu",
        "data": {"dataset": "synthetic", "protected": ["protected"], "synthetic_rows": 16},
        "model": {"kind": "logistic"},
        "mechanism": {"name": name, "faulty": name != "fdp_sgd", "noise_multiplier": 4.0, "sample_rate": 0.25,
                      "steps": 50, "public_batch_size": 16, "private_weight": 0.01, "clip_norm": 1.0,
                      "optimizer": {"name": "sgd", "lr": 1.0}},
        "audit": {"trials": 300, "games": ["attribute"], "attacks": list(FINAL_MODEL)},
    })


def unclipped_attribute_config(name: str) -> Config:
    """The attribute game can see missing clipping when a record's gradient is far above the clip norm
    (C = 0.05): the canary's unclipped gradient moves the final model ~20 times more than claimed.
    Measured: 147 of 150 against 1 − f(½) = 0.599 (no clip), 91 of 150 (dp_sgd)."""
    return config_from_dict({
        "name": "attribute_no_clip", "seed": 0, "device": "cpu",
        "data": {"dataset": "synthetic", "protected": ["protected"], "synthetic_rows": 16},
        "model": {"kind": "logistic"},
        "mechanism": {"name": name, "faulty": name != "dp_sgd", "noise_multiplier": 8.0, "sample_rate": 1.0,
                      "steps": 4, "clip_norm": 0.05, "optimizer": {"name": "sgd", "lr": 1.0}},
        "audit": {"trials": 300, "games": ["attribute"], "attacks": list(FINAL_MODEL)},
    })


# (mechanism, game) -> config; measured successes / evaluation trials against the bound on seed 0 in comments
CAUGHT = {
    ("half_noise", "distinguishing"): lambda: game_config("half_noise", "distinguishing", 600),  # ~0.9 vs .760
    ("half_noise", "simulator"): lambda: game_config("half_noise", "simulator", 1000),  # ~0.76 vs .638
    ("no_clip", "distinguishing"): lambda: game_config("no_clip", "distinguishing", 300),  # 150/150 vs .760
    ("no_clip", "simulator"): lambda: game_config("no_clip", "simulator", 300),  # 149/150 vs .638
    ("no_clip", "attribute"): lambda: unclipped_attribute_config("dp_sgd_no_clip"),  # 147/150 vs .599
    ("wrong_rate", "distinguishing"): lambda: game_config("wrong_rate", "distinguishing", 200),  # 95/100 vs .676
    ("wrong_rate", "simulator"): lambda: game_config("wrong_rate", "simulator", 300),  # ~0.83 vs .603
    ("leaky_public", "distinguishing"): lambda: game_config("leaky_public", "distinguishing", 200),  # 98/100 vs .676
    ("leaky_public", "simulator"): lambda: game_config("leaky_public", "simulator", 200),  # 98/100 vs .603
    ("leaky_public", "attribute"): lambda: leaky_attribute_config("fdp_sgd_leaky_public"),  # 147/150 vs .672
    ("shared_batch", "distinguishing"): lambda: game_config("shared_batch", "distinguishing", 400),  # 150/200 vs .564
    ("shared_batch", "simulator"): lambda: game_config("shared_batch", "simulator", 400),  # 153/200 vs .538
    # the membership game (final model, crafted canary): each cell's own audit calibrated once offline on seed 11
    # with 2,000 trials (python -m calibrations.matrix_cells config tests/auditing/configs/NAME.yaml --games
    # membership --attacks prior canary_logit); trials: the fewest at which the success's Clopper–Pearson lower bound
    # (confidence 1 − 1e-4) is caught with probability ≥ 1 − 1e-3 at α/2 (evaluation_trials_for_power). Direct check
    # (--seeds, the test's own audit): half noise caught on seeds 1–6 of 6, wrong rate on 1–20 of 20 (at 316 trials,
    # before its own bound raised them). "Own": the test's own rule's miss bound (python -m
    # calibrations.own_rule_bound config tests/auditing/configs/NAME.yaml --games membership --attacks prior
    # canary_logit --pool P --fits 100000 --test-trials N, as for the user loops below), where a count was raised
    # the fewest in steps of 8 at ≤ 1e-3; "resampled": the whole test's misses in 100,000 draws from the pool.
    # 739/1,000 (.685 vs .638); own (pool 16,000: success median .753, lower bounds .734) ≤ 1.4e-4, resampled 0 misses
    ("half_noise", "membership"): lambda: game_config("half_noise", "membership", 5266, MEMBERSHIP),
    # 1,000/1,000 (.991 vs .638); own (pool 4,000) ≤ 4.0e-4, resampled 0 misses
    ("no_clip", "membership"): lambda: game_config("no_clip", "membership", 36, MEMBERSHIP),
    # 834/1,000 (.787 vs .603); own (pool 6,000: success median .826, lower bounds .798) ≤ 7.9e-4 at 372 (316:
    # 1.8e-3, 364: 1.002e-3), resampled 1 miss (at 316: 9)
    ("wrong_rate", "membership"): lambda: game_config("wrong_rate", "membership", 372, MEMBERSHIP),
}

# (mechanism, game) a game cannot catch, and why (the README's table says the same)
NOT_VISIBLE = {
    ("shared_batch", "attribute"): "the fault reveals when the canary was sampled, which only per-step updates "
                                   "show; the final model depends on the canary's value exactly as under "
                                   "Algorithm 1",
    ("half_noise", "attribute"): "a real record's candidates differ by far less than the worst case 2C that the "
                                 "bound allows, so halving the noise stays below the claimed bound",
    ("wrong_rate", "attribute"): "as for half noise: a real record is far from the worst case the bound allows",
    ("shared_batch", "membership"): "the canary's public part Ψ(x) leaves out its crafted (protected) column, so the "
                                    "public batch shows when it was sampled only through the bias, which every "
                                    "record moves",
    ("leaky_public", "membership"): "the canary has no protected value for a public loss to read: its secret is "
                                    "membership",
}

PASSING = {
    ("fdp_sgd", "distinguishing"): lambda: game_config("fdp_sgd", "distinguishing", 200),  # 57/100 vs .564
    ("dp_sgd", "distinguishing"): lambda: game_config("dp_sgd", "distinguishing", 300),  # 111/150 vs .760
    ("fdp_sgd", "simulator"): lambda: game_config("fdp_sgd", "simulator", 200),  # 49/100 vs .538
    ("dp_sgd", "simulator"): lambda: game_config("dp_sgd", "simulator", 300),  # 96/150 vs .638
    ("fdp_sgd", "attribute"): lambda: leaky_attribute_config("fdp_sgd"),
    ("dp_sgd", "attribute"): lambda: unclipped_attribute_config("dp_sgd"),
    ("fdp_sgd", "membership"): lambda: game_config("fdp_sgd", "membership", 300, MEMBERSHIP),  # 75/150 vs .538
    # the half-noise cell's audit (5,266 trials), so that this PASS could have failed had the mechanism held a fault
    # the membership column catches: 1,687/2,633 vs .638 (the bound is tight for the correct mechanism)
    ("dp_sgd", "membership"): lambda: game_config("dp_sgd", "membership", 5266, MEMBERSHIP),
}


def test_the_matrix_covers_every_faulty_mechanism_and_game() -> None:
    faults = {load_config(CONFIGS / f"{name}.yaml").mechanism.name for name, _ in CAUGHT}
    assert faults == {"dp_sgd_half_noise", "dp_sgd_no_clip", "dp_sgd_wrong_rate", "fdp_sgd_leaky_public",
                      "fdp_sgd_shared_batch"}
    for name, _ in CAUGHT:
        for game in ("distinguishing", "simulator", "attribute", "membership"):
            assert ((name, game) in CAUGHT) != ((name, game) in NOT_VISIBLE), (name, game)


@pytest.mark.parametrize(("name", "game"), list(CAUGHT))
def test_every_game_that_can_see_a_fault_catches_it(verdict_only_audit, name: str, game: str) -> None:
    results = verdict_only_audit(CAUGHT[name, game]())
    assert results["mechanism"]["faulty"] is True
    # a rate comparison (success against the bound) is violated, whatever the ε comparisons say
    assert [v for v in violations(results) if "-attribute/" in v or v.startswith("attribute/")], \
        results["verdict"]["explanation"]


@pytest.mark.parametrize(("name", "game"), list(PASSING))
def test_correct_mechanisms_pass_in_the_same_games(verdict_only_audit, name: str, game: str) -> None:
    """A false VIOLATION has probability ≤ α = 0.05 by the gate's guarantee; on these seeds each sits well
    inside its bound."""
    results = verdict_only_audit(PASSING[name, game]())
    assert results["mechanism"]["faulty"] is False
    assert results["verdict"]["status"] == "PASS", results["verdict"]["explanation"]


# The user-loop path (mechanism.training on model.factory's module; tests/auditing/user_loops.py): the same soundness
# matrix for DP-SGD loops written by hand, each fault in one audit of every game that can see it, with one attack
# per game (a violation there at the audit's level α/m implies one in the game alone, at a level no smaller). The
# membership game is the add/remove game of a user's loop (it is among its default games). Each cell's success was
# calibrated once offline on another seed than the test's (seed 11, the test's own audit with more trials, `python -m
# calibrations.matrix_cells user-loop FAULT --trials N`; successes of the evaluation trials in the comments). The
# test fits its rule on its own selection half, so its trials are the fewest (scanned in steps of 8; the miss is not
# monotone in the trials) at which the test's own rule misses with probability ≤ 1e-3 at α/m ("own" in the
# comments; a test playing three games misses at most the sum of its cells'): `python -m calibrations.own_rule_bound
# user-loop FAULT --pool P --fits 100000 --test-trials N` fits the test's rule on 100,000 selection halves drawn from
# a P-trial pool (seed 11) with the test's own secrets, bounds each rule's success on the pool's other half
# (Clopper–Pearson at 1 − 1e-4) and the miss from their spread; "resampled": the whole test drawn from the pool
# 100,000 times, its misses.
USER_LOOPS = Path(__file__).parent / "user_loops.py"
USER_LOOP_GAMES = ("distinguishing", "simulator", "attribute", "membership")
ALL_ATTACKS = ("prior", "likelihood", "gradient", "iterates", "canary_logit", "noise_scale")
GRADIENT_AND_MEMBERSHIP = {"distinguishing": "iterates", "simulator": "iterates", "membership": "canary_logit"}
# Half the noise is the weakest fault caught on this path: a calibration run once offline (seed 11, the distinguishing
# game alone with the iterates attack, 2,000 trials) measured 860 of 1,000 evaluation trials, whose Clopper–Pearson
# lower bound at confidence 1 − 1e-4 is 0.815, against the claim's bound 0.736. The audit judges its rate at α/2 (a
# rate and an ε comparison); N = 1,406 trials is the fewest at which P[Bin(N/2, 0.815) < k_N] ≤ 1e-3 (k_N the
# fewest successes whose lower bound at α/2 exceeds the bound; 518 at the measured 0.86). The test's own rule
# (own_rule_bound user-loop half_noise --pool 10000 --test-trials 1406: success median 0.860, lower bounds 0.840)
# misses with probability ≤ 1.8e-4; the whole test resampled from the pool 100,000 times missed 0 times. The
# honest loop at the same settings passes (USER_LOOP_PASSING; at 1,406 trials on seed 0 too: 499 of 703, offline).
HALF_NOISE_TRIALS = 1406
USER_LOOP_CAUGHT = {
    # 1,933, 1,955 and 1,900 of 2,000 (lower bounds .949, .962, .929 against .736, .630, .630) at α/6; own (pool
    # 3,000) ≤ 2.1e-4 + 1.4e-4 + 1.4e-4, resampled 0 misses
    "quiet": (QUIET, 100, 232, GRADIENT_AND_MEMBERSHIP),
    # 1,936, 1,932 and 1,910 of 2,000 (.951, .948, .935); own (pool 3,000) ≤ 3.0e-4 + 1.4e-4 + 1.4e-4, resampled 0
    "no_clip": (QUIET, 100, 232, GRADIENT_AND_MEMBERSHIP),
    # 4,851 of 5,000 (.960 against .630) at α/2; own (pool 4,000; the rule fitted on 49 trials, success median .968,
    # 1 % below .91) ≤ 8.2e-4 at 98 (64: 1.0e-2, 96: 1.9e-3), resampled 6 misses (at 64: 183)
    "dataset_size": (SMALL, 8, 98, {"membership": "noise_scale"}),
    # 2,949 of 4,000 (.711 against .545) at α/2; own (pool 16,000: success median .729, lower bounds .710) ≤ 7.2e-4
    # at 552 (440: 3.6e-3, 544: 1.05e-3), resampled 1 miss (at 440: 33)
    "realised_batch": (SPARSE, 5, 552, {"membership": "noise_scale"}),
    # sampling at 2p = 1 where p = ½ is claimed: 4,528 of 5,000 (.889 against .736) at α/2; own (pool 4,000: success
    # median .902, lower bounds .874) ≤ 9.9e-4 at 480 (364: 6.1e-3, 472: 1.2e-3), resampled 0 misses (at 364: 5)
    "double_rate": (QUIET, 100, 480, {"distinguishing": "iterates"}),
    # half the noise: HALF_NOISE_TRIALS
    "half_noise": (QUIET, 100, HALF_NOISE_TRIALS, {"distinguishing": "iterates"}),
    # shuffled batches over one epoch of two at z = 0.15 (the canary in exactly one of the two steps; Poisson sampling
    # skips it with probability ¼): membership 1,976 of 2,000 (4,000 trials; lower bound .976 against .875),
    # distinguishing 1,000 and simulator 999 of 1,000 (2,000 trials; .991 and .988 against .875) at α/6: 338 trials
    # suffice for the weakest, a miss ≤ 8.7e-6 at 490 (≤ 7.8e-4 at a success 0.01 below the lower bound); own (pool
    # 4,000) ≤ 1.3e-4 + 1.3e-4 + 4.7e-4, resampled 0 misses
    "shuffled_one_epoch": (ONE_EPOCH, 100, 490, GRADIENT_AND_MEMBERSHIP),
}
_SIZE_ONLY = "the normalisation is the same in both worlds of a replace-one game (n + 1 records each)"
_SCALE_FREE = ("the iterates attacks estimate the noise scale from each trial's release and score the canary in "
               "its units: a normalisation common to the canary's update and the noise cancels")
def _beyond_budget(successes: int, lower: float, needed: int) -> str:
    """A cell measured once offline (seed 11, the simulator and membership games, 2,000 trials each: 1,000
    evaluation trials), whose catch at a miss probability ≤ 1e-3 — at the success's Clopper–Pearson lower bound
    at confidence 1 − 1e-4, judged at α/6 (evaluation_trials_for_power) — needs ``needed`` trials."""
    return (f"visible but too weak to catch within the suite's time: {successes} of 1,000 evaluation trials against "
            f".630 (seed 11, 2,000 trials, offline; lower bound {lower:.3f}); a miss probability ≤ 1e-3 needs about "
            f"{needed:,} trials")


USER_LOOP_NOT_VISIBLE = {
    # measured once offline (seed 11, the attribute game alone, 4,000 trials): at the honest loop's level
    ("quiet", "attribute"): "not seen: likelihood 1,032 and gradient 1,039 of 2,000 evaluation trials against .752 "
                            "(the honest loop 1,035 and 1,020), a success below the bound, which no trial count "
                            "catches; " + NOT_VISIBLE["half_noise", "attribute"],
    # measured once offline (seed 11, the attribute game alone, 4,000 trials: calibrations.matrix_cells)
    ("no_clip", "attribute"): "not seen: likelihood 1,110 and gradient 1,075 of 2,000 evaluation trials against .752 "
                              "(the honest loop 1,035 and 1,020), a success below the bound, which no trial count "
                              "catches; where records' gradients far exceed C the attribute game catches it (the "
                              "built-in path at C = 0.05)",
    ("dataset_size", "distinguishing"): _SIZE_ONLY, ("dataset_size", "attribute"): _SIZE_ONLY,
    ("dataset_size", "simulator"): _SCALE_FREE,
    ("realised_batch", "distinguishing"): _SIZE_ONLY, ("realised_batch", "attribute"): _SIZE_ONLY,
    ("realised_batch", "simulator"): _SCALE_FREE,
    ("double_rate", "attribute"): "the final model of 4 steps at p = 1 with z = 1.5 holds too little of one record "
                                  "for the final-model attacks (46 and 48 of 100 against .752)",
    ("double_rate", "simulator"): _beyond_budget(731, 0.676, 2 * 3192),  # iterates
    ("double_rate", "membership"): _beyond_budget(744, 0.690, 2 * 1883),  # canary_logit
    ("half_noise", "attribute"): NOT_VISIBLE["half_noise", "attribute"],
    ("half_noise", "simulator"): _beyond_budget(726, 0.671, 2 * 4080),  # iterates
    ("half_noise", "membership"): _beyond_budget(738, 0.684, 2 * 2370),  # canary_logit
    ("shuffled_one_epoch", "attribute"): "not judged at any trial count: at z = 0.15 the claim allows any success "
                                         "in the attribute game (Theorem 4's bound is 1), so the audit refuses it",
}
# Faults no game catches within the suite's time on the user-loop path, each cell with its reason. Shuffled batches:
# the best test between each game's two worlds along the canary's coordinate (Neyman–Pearson; the iterates exact to
# 1e-5 by quadrature, the final model in closed form), against the Poisson claim's bound, and the trials a catch at a
# miss ≤ 1e-3 would need for that optimal test at α/2 (one game, one attack), from `python -m
# calibrations.shuffled_batches [--low-noise]`; the same computation gives the Poisson loop's optimum equal to the
# bounds. At z = 0.5 (shuffled_low_noise) the optimal distinguishing test would be caught in 734 trials, but the
# iterates attack reaches less of it (calibrated offline, `python -m calibrations.matrix_cells user-loop
# shuffled_low_noise --games distinguishing --attacks prior iterates`: seed 11, 2,000 trials in 326 s): at its
# Clopper–Pearson lower bound a miss ≤ 1e-3 needs about 9,100 trials, ≈ 1,200 even at the measured success, beyond
# the ≈ 90 s of CI time a cell may take.
_SHUFFLED = ("the canary is in exactly two of the four steps (one batch of each epoch's two) instead of Bin(4, ½): "
             "the best test between this game's two worlds {}; seen on seed 0 at the honest loop's level ({})")
_SHUFFLED_WEAK = "succeeds {} against the claim's bound {}: visible but too weak, a catch needs about {} trials"
_SHUFFLED_LOW_NOISE = ("the canary is in exactly two of the four steps instead of Bin(4, ½), at z = 0.5: the best "
                       "test between this game's two worlds {}")
USER_LOOP_NOT_CAUGHT = {  # fault: (its settings, a reason per game)
    "shuffled": (QUIET, {
        "distinguishing": _SHUFFLED.format(_SHUFFLED_WEAK.format("0.7475", "0.7363", "78,000") + " (the shuffled "
                                           "release's replace-one curve falls up to 0.027 below the claim's)",
                                           "70/100 against .736, honest 67/100"),
        "simulator": _SHUFFLED.format(_SHUFFLED_WEAK.format("0.6361", "0.6301", "330,000"),
                                      "57/100 against .63, honest 61/100"),
        "membership": _SHUFFLED.format("on the final model (the canary column's sum, N(2C, 4z²C²) against "
                                       "N(0, 4z²C²)) " + _SHUFFLED_WEAK.format("Φ(1/3) = 0.6306", "0.6301",
                                                                              "62 million"),
                                       "canary_logit 58/100 against .63, honest 52/100"),
        "attribute": _SHUFFLED.format("on the final model, at a record's worst case ±C, succeeds Φ(2/3) = 0.7475, "
                                      "below Theorem 4's bound 0.7518: not seen at these settings, at any trial count",
                                      "likelihood 52/100 and gradient 49/100 against .752, honest 46/100"),
    }),
    "shuffled_low_noise": (LOW_NOISE, {
        "distinguishing": _SHUFFLED_LOW_NOISE.format(
            "succeeds 0.9773 against the claim's bound 0.9234 (a catch needs 734 trials), but the iterates attack "
            "measured 968 of 1,000 evaluation trials (seed 11, 2,000 trials, offline; lower bound 0.942): a miss "
            "probability ≤ 1e-3 at α/2 needs about 9,100 trials (1,228 at the measured 0.968), beyond the suite's "
            "time"),
        "simulator": _SHUFFLED_LOW_NOISE.format(_SHUFFLED_WEAK.format("0.8833", "0.8319", "2,300") + " for the "
                                                "optimal test, more for an attack (not measured)"),
        "membership": _SHUFFLED_LOW_NOISE.format("on the final model (N(2C, 4z²C²) against N(0, 4z²C²)) "
                                                 + _SHUFFLED_WEAK.format("Φ(1) = 0.8413", "0.8319", "78,000")),
        "attribute": _SHUFFLED_LOW_NOISE.format("on the final model, at a record's worst case ±C, succeeds Φ(2) = "
                                                "0.9773, below Theorem 4's bound 0.9888: not seen at any trial count"),
    }),
}
# Each honest run plays a catching cell's audit (its settings, trials, games and attacks, or more games), so that its
# PASS could have failed had the loop held that fault: the four games at 232 trials (quiet, no_clip; 67/100 vs .736,
# 61/100 vs .63, 46/100 vs .752 likelihood and gradient, 61/100 and 52/100 vs .63 at 200 trials), the
# distinguishing game at HALF_NOISE_TRIALS (half_noise, double_rate; 499 of 703 evaluation trials vs .736 on seed 0),
# membership at 98 (dataset_size) and at 552 (realised_batch), and the three gradient and membership games at 490
# (shuffled_one_epoch).
USER_LOOP_PASSING = {
    "honest": [(QUIET, 100, 232, USER_LOOP_GAMES, ALL_ATTACKS),
               (QUIET, 100, HALF_NOISE_TRIALS, ("distinguishing",), ("prior", "iterates"))],
    "honest_small": [(SMALL, 8, 98, ("membership",), ("prior", "noise_scale"))],
    "honest_sparse": [(SPARSE, 5, 552, ("membership",), ("prior", "noise_scale"))],
    "honest_one_epoch": [(ONE_EPOCH, 100, 490, tuple(GRADIENT_AND_MEMBERSHIP),
                          ("prior", *dict.fromkeys(GRADIENT_AND_MEMBERSHIP.values())))],
}


def user_loop_config(loop: str, settings: dict[str, Any], rows: int, trials: int, games: tuple[str, ...],
                     attacks: tuple[str, ...]) -> Config:
    """``user_loops.py:loop`` training a linear module on ``rows`` records of the synthetic table, claimed as the
    DP-SGD of ``settings`` (C = 1)."""
    claim = {key: value for key, value in settings.items() if key != "planned_rows"}
    return config_from_dict({
        "name": f"user_loop_{loop}", "seed": 0, "device": "cpu",
        "data": {"dataset": "synthetic", "protected": ["protected"], "synthetic_rows": 2 * rows},
        "model": {"factory": f"{USER_LOOPS}:linear"},
        "mechanism": {"name": "dp_sgd", "training": f"{USER_LOOPS}:{loop}", "clip_norm": 1.0, **claim},
        "audit": {"trials": trials, "games": list(games), "attacks": list(attacks)},
    })


def test_the_user_loop_matrix_covers_every_fault_and_game() -> None:
    """Every cell of a fault caught in some game is caught or declared invisible; a fault no game catches within
    the suite's time has a reason for every game; and every fault loop of user_loops.py is in the matrix."""
    from tests.auditing import user_loops

    for fault, (_, _, _, caught) in USER_LOOP_CAUGHT.items():
        for game in USER_LOOP_GAMES:
            assert (game in caught) != ((fault, game) in USER_LOOP_NOT_VISIBLE), (fault, game)
    for fault, (_, reasons) in USER_LOOP_NOT_CAUGHT.items():
        assert fault not in USER_LOOP_CAUGHT and set(reasons) == set(USER_LOOP_GAMES), fault
    loops = {name for name, value in vars(user_loops).items() if name != "linear" and not name.startswith("_")
             and getattr(value, "__module__", None) == user_loops.__name__}
    assert loops == set(USER_LOOP_CAUGHT) | set(USER_LOOP_NOT_CAUGHT) | set(USER_LOOP_PASSING)


@pytest.mark.parametrize("fault", list(USER_LOOP_CAUGHT))
def test_every_game_that_can_see_a_user_loops_fault_catches_it(verdict_only_audit, fault: str) -> None:
    """Miss probability ≤ 1e-3 per test for the test's own decision rule, fitted on its own selection half
    (USER_LOOP_CAUGHT's comments; ``python -m calibrations.own_rule_bound``): bounded from 100,000 such rules fitted
    on draws from a seed-11 pool of the cell's audit, each rule's success at its Clopper–Pearson lower bound
    (confidence 1 − 1e-4) on the pool's held-out half. The bound takes on trust that the seed-11 pool stands for one
    trial's law at the test's seed 0 (another draw of data, canary and initial model), that draws from a finite pool
    spread the fits as the law would, and each rule's lower bound on its own, not jointly."""
    settings, rows, trials, caught = USER_LOOP_CAUGHT[fault]
    config = user_loop_config(fault, settings, rows, trials, tuple(caught), ("prior", *dict.fromkeys(caught.values())))
    found = violations(verdict_only_audit(config))
    for game, attack in caught.items():
        assert f"{game}-attribute/{attack}" in found, (game, found)


@pytest.mark.parametrize(("loop", "run"), [(loop, run) for loop, runs in USER_LOOP_PASSING.items()
                                           for run in range(len(runs))])
def test_the_honest_user_loop_passes_in_the_same_games(verdict_only_audit, loop: str, run: int) -> None:
    """A false VIOLATION has probability ≤ α = 0.05 by the gate's guarantee; on this seed each sits inside."""
    settings, rows, trials, games, attacks = USER_LOOP_PASSING[loop][run]
    results = verdict_only_audit(user_loop_config(loop, settings, rows, trials, games, attacks))
    assert results["verdict"]["status"] == "PASS", results["verdict"]["explanation"]
