"""How tight the audit is: at each ε the ``iterates`` attack on Algorithm 1 (``fdp_sgd``, or ``dp_sgd``) against
the Bayes-optimal adversary of the same game, Theorem 4's own tightness, and the ε lower bounds of the
distinguishing and simulator games.

* The game is the binary attribute game with a uniform prior played with the ±C gradient canary (the
  ``distinguishing`` trials): x₀ and x₁ share Ψ and their private gradients are −C and +C. Its Bayes-optimal
  success is exactly ``½ + TV/2`` with TV the total variation between the two output distributions, i.e.
  ``½ + δ_replace(0)/2`` from the replace-one PLD (δ(ε) at ε = 0 is the total variation).
* The attack realises the share ``(rate − ½)/(optimum − ½)`` of the achievable advantage (target ≥ 0.9),
  reported with the Clopper–Pearson interval of the rate mapped through the same affine map. Unless the number
  of trials is given, it is chosen from the exact optimum so that the interval is ±``half_width`` or narrower.
* Theorem 4's tightness ``(optimum − ½)/(bound − ½)`` with ``bound = 1 − f(½)`` (add/remove curve): 1 at p = 1,
  below 1 under Poisson sampling, where the bound is loose.
* The distinguishing game (replace-one) and the simulator game (insertion/deletion, Algorithm 2 of the FDP
  paper) each give two ε lower bounds at δ (:mod:`fdp_audit.auditing.stats`), as shares of the claimed ε of
  their relation: the family bound (the largest claim "same mechanism, smaller noise multiplier" that the
  data reject) and the assumption-free Clopper–Pearson bound.

Data: the canary's coordinates are two appended all-zero public columns (see
:mod:`fdp_audit.auditing.games.gradient_canary`), so no real record contributes to them and the attack's
observations — the noisy private sums along the canary's coordinate — have exactly the same law whatever the
data set. The data set therefore only costs time, and a 200-row synthetic table with a logistic model is used;
the privacy parameters (p = 1/16, T = 100, z calibrated to each ε at δ = 1e-5) are what matter.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch
from scipy.stats import norm

from fdp_audit.auditing.games import DistinguishingGame, SimulatorGame, selection_level
from fdp_audit.auditing.games.gradient_canary import bayes_optimal_success
from fdp_audit.auditing.gate import judge
from fdp_audit.auditing.stats import clopper_pearson, tightness
from fdp_audit.auditing.trials import play_game
from fdp_audit.claim import Claim
from fdp_audit.config import Config, config_from_dict
from fdp_audit.data.prepare import prepare_data
from fdp_audit.errors import BadInputError

EPSILONS = (1.0, 2.0, 4.0, 8.0)
TARGET_SHARE = 0.9
CHUNK = 512


def tightness_config(epsilon: float, sample_rate: float = 1 / 16, steps: int = 100, delta: float = 1e-5,
                     seed: int = 0, device: str = "cpu", mechanism: str = "fdp_sgd") -> Config:
    """``mechanism`` (fdp_sgd or dp_sgd) at (p, T) with z calibrated to ε at δ, on the small synthetic table
    (module docstring).

    Args:
        epsilon: the target ε the noise multiplier is calibrated to.
        sample_rate: the Poisson sampling rate p.
        steps: the number of steps T.
        delta: the δ of the target ε.
        seed: the audit's seed.
        device: the training device.
        mechanism: ``"fdp_sgd"`` or ``"dp_sgd"``.

    Returns:
        The validated configuration (distinguishing and simulator games, prior and iterates attacks).
    """
    return config_from_dict({
        "name": f"tightness_{mechanism}_eps_{epsilon:g}", "seed": seed, "device": device,
        "data": {"dataset": "synthetic", "protected": ["protected"], "synthetic_rows": 200},
        "model": {"kind": "logistic"},
        "mechanism": {"name": mechanism, "target_epsilon": epsilon, "delta": delta, "sample_rate": sample_rate,
                      "steps": steps, "public_batch_size": 8, "clip_norm": 1.0,
                      "optimizer": {"name": "sgd", "lr": 1.0}},
        "audit": {"games": ["distinguishing", "simulator"], "attacks": ["prior", "iterates"]},
    })


def trials_for_half_width(optimum: float, half_width: float, confidence: float = 0.95) -> int:
    """Trials for a ±``half_width`` interval on the advantage share: the Wald width of the rate at the optimum,
    over the advantage, with 15% to spare for the exact (wider) Clopper–Pearson interval; rounded up to an even
    number.

    Args:
        optimum: the Bayes-optimal success ½ + δ_replace(0)/2.
        half_width: the wanted half-width of the share's interval.
        confidence: the interval's confidence.

    Returns:
        An even number of trials.

    Raises:
        BadInputError: the optimum is ½ (nothing to measure).
    """
    if optimum <= 0.5:
        raise BadInputError("the mechanism leaks nothing measurable (Bayes-optimal success 1/2): no advantage to share",
                            "mechanism")
    z = norm.ppf(0.5 + confidence / 2)
    n = (z * math.sqrt(optimum * (1 - optimum)) / (half_width * (optimum - 0.5))) ** 2 * 1.15
    return 2 * math.ceil(n / 2)


def tightness_row(config: Config, trials: int | None = None, half_width: float = 0.1, confidence: float = 0.95,
                  alpha: float = 0.05) -> dict[str, Any]:
    """One ε: play the distinguishing and simulator games and compare the iterates attack with the optimum.

    Args:
        config: a configuration from :func:`tightness_config`.
        trials: the trials per game, or None to choose them by :func:`trials_for_half_width`.
        half_width: the wanted half-width of the advantage share's interval.
        confidence: the confidence of the Clopper–Pearson interval of the rate.
        alpha: the level of the ε comparisons.

    Returns:
        The row: the claim, the trials, the attack's rate and advantage share with its interval, the optimum,
        Theorem 4's bound and tightness, and both games' ε lower bounds and their shares of the claimed ε.
    """
    mech, claim = config.mechanism, Claim.from_config(config)
    add_remove, replace_one = claim.add_remove, claim.replace_one
    optimum, bound = bayes_optimal_success(replace_one), float(add_remove.bound(0.5))
    trials = trials_for_half_width(optimum, half_width, confidence) if trials is None else trials
    data = prepare_data(config.data, config.seed)
    config = config.with_overrides({"audit.trials": trials})
    device = torch.device(config.device if config.device != "auto" else "cpu")
    played = [(game, play_game(game, config, data, device=device, max_chunk=CHUNK))
              for game in (DistinguishingGame(), SimulatorGame())]
    level = selection_level(config)
    comparisons = [c.row() for game, record in played for c in game.epsilon_comparisons(record, claim, level)
                   if c.attack == "iterates"]
    distinguishing = played[0][1]
    successes = int((distinguishing.scores["iterates"].argmax(axis=1) == distinguishing.labels).sum())
    low, high = clopper_pearson(successes, trials, 1 - confidence)
    _, (replace_game, simulator_game) = judge(comparisons, alpha)
    return {
        "mechanism": mech.name, "epsilon": claim.epsilon, "delta": mech.delta,
        "noise_multiplier": claim.noise_multiplier,
        "sample_rate": mech.sample_rate, "steps": mech.steps, "trials": trials, "successes": successes,
        "attack_rate": successes / trials, "optimal_success": optimum, "bound": bound,
        "attack_advantage_share": tightness(successes / trials, 0.5, optimum),
        "ci": [tightness(low, 0.5, optimum), tightness(high, 0.5, optimum)], "confidence": confidence,
        "theorem4_tightness": tightness(optimum, 0.5, bound),
        "alpha": alpha, "epsilon_family": replace_game["epsilon_family"],
        "epsilon_replace": replace_game["theoretical"],
        "epsilon_lower_bound": replace_game["epsilon_lower_bound"],
        "epsilon_lower_bound_ratio": replace_game["epsilon_ratio"],
        "epsilon_lower_bound_cp": replace_game["epsilon_lower_bound_cp"],
        "epsilon_lower_bound_ratio_cp": replace_game["epsilon_ratio_cp"],
        "simulator_epsilon_lower_bound": simulator_game["epsilon_lower_bound"],
        "simulator_epsilon_ratio": simulator_game["epsilon_ratio"],
        "simulator_epsilon_lower_bound_cp": simulator_game["epsilon_lower_bound_cp"],
        "simulator_epsilon_ratio_cp": simulator_game["epsilon_ratio_cp"],
    }


def tightness_table(epsilons: Sequence[float] = EPSILONS, trials: int | None = None, seed: int = 0,
                    sample_rate: float = 1 / 16, steps: int = 100, half_width: float = 0.1,
                    device: str = "cpu", mechanisms: Sequence[str] = ("fdp_sgd",)) -> list[dict[str, Any]]:
    """The tightness table: one :func:`tightness_row` per mechanism and ε (trials chosen per ε unless given).

    Args:
        epsilons: the target ε values.
        trials: the trials per game, or None to choose them per ε.
        seed: the audit's seed.
        sample_rate: the Poisson sampling rate p.
        steps: the number of steps T.
        half_width: the wanted half-width of the advantage share's interval.
        device: the training device.
        mechanisms: the mechanisms.

    Returns:
        The rows, by mechanism then ε.
    """
    return [tightness_row(tightness_config(eps, sample_rate, steps, seed=seed, device=device, mechanism=name),
                          trials, half_width)
            for name in mechanisms for eps in epsilons]


def tightness_markdown(rows: list[dict[str, Any]]) -> str:
    """The table as Markdown (for notes and the ``reproduce`` command).

    Args:
        rows: the rows of :func:`tightness_table`.

    Returns:
        The Markdown table with a note on p, T and the intervals.
    """
    lines = ["| mechanism | ε (δ) | z | trials | attack success | optimum | bound 1 − f(½) "
             "| attack / optimum advantage | Theorem 4 tightness | distinguishing ε_lb / ε: family (CP) "
             "| simulator ε_lb / ε: family (CP) |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        share = f"{r['attack_advantage_share']:.3f} [{r['ci'][0]:.3f}, {r['ci'][1]:.3f}]"
        lines.append(f"| {r['mechanism']} | {r['epsilon']:.3g} ({r['delta']:g}) | {r['noise_multiplier']:.3f} "
                     f"| {r['trials']} | {r['attack_rate']:.4f} | {r['optimal_success']:.4f} | {r['bound']:.4f} "
                     f"| {share} | {r['theorem4_tightness']:.3f} "
                     f"| {r['epsilon_lower_bound_ratio']:.3f} ({r['epsilon_lower_bound_ratio_cp']:.3f}) "
                     f"| {r['simulator_epsilon_ratio']:.3f} ({r['simulator_epsilon_ratio_cp']:.3f}) |")
    if rows:
        lines.append(f"\np = {rows[0]['sample_rate']:g}, T = {rows[0]['steps']}; the intervals are "
                     f"{rows[0]['confidence']:.0%} Clopper–Pearson intervals of the attack's success. The ε lower "
                     f"bounds hold at level 1 − {rows[0]['alpha']:g} (each game's test chosen on a quarter of the "
                     f"trials, judged on the other three quarters); ε_lb / ε is against the claimed ε of the "
                     f"game's relation (replace-one for the distinguishing game). Family: the largest claim of the "
                     f"form 'same mechanism, p and T, smaller noise multiplier' that the data reject; CP: the "
                     f"assumption-free Clopper–Pearson ε of the same test.")
    return "\n".join(lines)
