"""``final_model``: how tight the membership game's final-model audit is (docs/games.md). DP-SGD (the batched
engine) with z calibrated to ε ∈ {1, 2, 4, 8} at δ = 1e-5, the membership game with its crafted canary and
worst-case initial parameters, ``canary_logit`` only: its success against the Bayes-optimal add/remove success
``½ + δ(0)/2`` that the claim allows, and its ε lower bounds (family and Clopper–Pearson, at level 1 − α)
against the claimed add/remove ε. Full batches (p = 1, as Annamalai & De Cristofaro audit) and Poisson batches
(p = 0.5). Their paper reports ε_emp = 7.21 of 10 on MNIST with 200 models (black box, full batch)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from fdp_audit.auditing.games import MembershipGame, selection_level
from fdp_audit.auditing.games.categorical import judged_rule
from fdp_audit.auditing.games.gradient_canary import bayes_optimal_success
from fdp_audit.auditing.gate import comparison_status, judge
from fdp_audit.auditing.trials import play_game
from fdp_audit.claim import Claim
from fdp_audit.config import Config, config_from_dict
from fdp_audit.data.prepare import prepare_data
from fdp_audit.reproduce import Summary
from fdp_audit.reproduce.files import markdown_table, write_reproduction

EPSILONS = (1.0, 2.0, 4.0, 8.0)
SCHEDULES = ((1.0, 4), (0.5, 8))  # (p, T)
TRIALS = 2_000
QUICK = {"epsilons": (8.0,), "schedules": ((1.0, 4),), "trials": 200}
ALPHA = 0.05
CHUNK = 512


def final_model_config(epsilon: float, sample_rate: float, steps: int, trials: int, device: str = "cpu") -> Config:
    """DP-SGD at (p, T) with z calibrated to ε, the membership game alone with ``canary_logit``.

    Args:
        epsilon: the claimed ε at δ = 1e-5.
        sample_rate: the Poisson sampling rate p.
        steps: the number of steps T.
        trials: the game's trials.
        device: where the models train.

    Returns:
        The configuration (200-row synthetic table, logistic regression, seed 0).
    """
    return config_from_dict({
        "name": f"final_model_eps_{epsilon:g}", "seed": 0, "device": device,
        "data": {"dataset": "synthetic", "protected": ["protected"], "synthetic_rows": 200},
        "model": {"kind": "logistic"},
        "mechanism": {"name": "dp_sgd", "target_epsilon": epsilon, "delta": 1e-5, "sample_rate": sample_rate,
                      "steps": steps, "clip_norm": 1.0, "optimizer": {"name": "sgd", "lr": 1.0}},
        "audit": {"trials": trials, "games": ["membership"], "attacks": ["prior", "canary_logit"]},
    })


def final_model_row(config: Config) -> dict[str, Any]:
    """One claim: play the membership game and compare ``canary_logit`` with the claim.

    Args:
        config: a configuration of :func:`final_model_config`.

    Returns:
        The row: ε, z, p, T, trials, the attack's successes of the evaluated trials and its rate, the Bayes-optimal
        success the claim allows, the comparison's status, and the ε lower bounds (family and Clopper–Pearson) with
        their ratios to ε.
    """
    mech, claim = config.mechanism, Claim.from_config(config)
    data = prepare_data(config.data, config.seed)
    device = torch.device(config.device if config.device != "auto" else "cpu")
    game = MembershipGame()
    record = play_game(game, config, data, device=device, max_chunk=CHUNK)
    _, successes, evaluated = judged_rule(record, "canary_logit")
    rows = [c.row() for c in game.epsilon_comparisons(record, claim, selection_level(config))]
    _, (judged,) = judge(rows, ALPHA)
    return {"epsilon": claim.epsilon, "noise_multiplier": claim.noise_multiplier,
            "sample_rate": mech.sample_rate, "steps": mech.steps, "trials": config.audit.trials,
            "successes": successes, "evaluated": evaluated, "rate": successes / evaluated,
            "optimal_success": bayes_optimal_success(claim.add_remove), "status": comparison_status(judged),
            "epsilon_lower_bound": judged["epsilon_lower_bound"], "epsilon_ratio": judged["epsilon_ratio"],
            "epsilon_lower_bound_cp": judged["epsilon_lower_bound_cp"], "epsilon_ratio_cp": judged["epsilon_ratio_cp"]}


def run(out_dir: Path, quick: bool = False) -> Summary:
    """Play the membership game against DP-SGD at each claim of the module docstring and tabulate how much of the
    claim it certifies; writes ``final_model.md`` and ``final_model.json``.

    Args:
        out_dir: the folder the reproduction writes into.
        quick: the seconds-long version the test suite runs (module docstring).

    Returns:
        The reproduction's summary: ε lower bound over ε (family) of each full-batch claim.
    """
    epsilons, schedules, trials = ((QUICK["epsilons"], QUICK["schedules"], QUICK["trials"]) if quick
                                   else (EPSILONS, SCHEDULES, TRIALS))
    rows = [final_model_row(final_model_config(eps, p, steps, trials)) for p, steps in schedules for eps in epsilons]
    table = markdown_table(
        ["p", "T", "ε (δ = 1e-5)", "z", "success (evaluation trials)", "Bayes optimum", "ε_lb family", "ε_lb CP",
         "ε_lb / ε family (CP)"],
        [[r["sample_rate"], r["steps"], r["epsilon"], r["noise_multiplier"],
          f"{r['successes']}/{r['evaluated']} = {r['rate']:.3f}", r["optimal_success"], r["epsilon_lower_bound"],
          r["epsilon_lower_bound_cp"], f"{r['epsilon_ratio']:.2f} ({r['epsilon_ratio_cp']:.2f})"] for r in rows])
    setup = (f"The membership game (add/remove, final model only; docs/games.md) against DP-SGD, {trials} trials "
             f"per claim, 200-row synthetic table, the `canary_logit` attack. ε lower bounds at level "
             f"1 − {ALPHA:g}: the test is chosen on a quarter of the trials and judged on the other three quarters; "
             "family: the largest claim 'DP-SGD at the same p and T with a smaller z' that the data reject; CP: "
             "the assumption-free Clopper–Pearson ε of the same test."
             + (" QUICK MODE: one claim, 200 trials." if quick else ""))
    full = [r for r in rows if r["sample_rate"] == 1.0]
    summary = "full batch: ε_lb / ε (family) " + ", ".join(f"{r['epsilon_ratio']:.2f} at ε = {r['epsilon']:.3g}"
                                                            for r in full)
    return write_reproduction(out_dir, "final_model", "Tightness of the final-model (membership) audit",
                              [setup, table], {"quick": quick, "rows": rows}, summary)
