"""The game audit (docs/games.md): play the configured games, judge every comparison with the
gate, and assemble ``results.json``."""

from __future__ import annotations

import datetime
import platform
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from fdp_audit import __version__
from fdp_audit.accounting.mechanism import MechanismSpec
from fdp_audit.accounting.tradeoff import gaussian_tradeoff
from fdp_audit.audit.claim import mechanism_section
from fdp_audit.audit.decision import DecisionRule, fit_decision_rule, selection_split
from fdp_audit.audit.games import GameRecord, game_attacks, gradient_canary_game, record_canary_game
from fdp_audit.audit.gate import NOT_JUDGED, comparison_status, judge, powerless, unjudgeable
from fdp_audit.audit.journal import Journal
from fdp_audit.audit.provenance import journal_key, user_source_digests
from fdp_audit.audit.reconstruction_game import ReconstructionRecord, ball_per_radius, reconstruction_game
from fdp_audit.audit.results import finite_or_none
from fdp_audit.audit.stats import (
    clopper_pearson,
    lower_confidence_bound,
    roc_counts,
    select_test,
    threshold_split,
    tightness,
)
from fdp_audit.audit.third_party import load_mechanism, train_third_party
from fdp_audit.audit.tightness import bayes_optimal_success
from fdp_audit.config import Config
from fdp_audit.data.prepare import PreparedData, prepare_data
from fdp_audit.errors import BadInputError
from fdp_audit.training.engine import Canaries, accuracy, train_models
from fdp_audit.training.mechanisms import MECHANISMS
from fdp_audit.training.run import accountant, build_problem, noise_multiplier, resolve_device, with_mechanism

DELTAS = (1e-3, 1e-5, 1e-6)
DEFAULT_CHUNK = 128
# The per-bound level at which ε comparisons select their test when the audit's is not given: α = 0.05 over
# about 20 bounds, a typical audit. It affects power only.
DEFAULT_SELECTION_LEVEL = 0.05 / 20


def rdp_epsilon(z: float, p: float, steps: int, delta: float) -> float:
    """ε from the RDP accountant, for comparison only (looser than the PLD)."""
    import dp_accounting

    acct = dp_accounting.rdp.RdpAccountant()
    acct.compose(dp_accounting.PoissonSampledDpEvent(p, dp_accounting.GaussianDpEvent(z)), steps)
    return float(acct.get_epsilon(delta))


def accounting_section(config: Config) -> dict[str, Any]:
    mech = config.mechanism
    add_remove, replace_one = accountant(mech), accountant(mech, "replace")
    alpha = np.unique(np.concatenate([np.geomspace(1e-6, 1.0, 120), np.linspace(0.0, 1.0, 41)]))
    section: dict[str, Any] = {
        "epsilon": {f"{d:g}": float(add_remove.epsilon(d)) for d in DELTAS},
        "epsilon_replace": {f"{d:g}": float(replace_one.epsilon(d)) for d in DELTAS},
        "curve": {"alpha": alpha.tolist(), "f": np.asarray(add_remove.f(alpha)).tolist(),
                  "f_replace": np.asarray(replace_one.f(alpha)).tolist(),
                  "f_optimistic": np.asarray(add_remove.tightness_band(alpha)[1]).tolist()},
    }
    mu = add_remove.gdp_clt_mu()
    if mu is not None:
        z = noise_multiplier(mech)
        section["gdp_mu_approx"] = mu
        section["curve"]["f_gdp_approx"] = np.asarray(gaussian_tradeoff(alpha, mu)).tolist()
        section["epsilon_rdp"] = {f"{d:g}": rdp_epsilon(z, mech.sample_rate, mech.steps, d) for d in DELTAS}
    return section


def utility_section(config: Config, data: PreparedData, models: int = 3) -> dict[str, Any]:
    """Test accuracy of the configured mechanism beside public-only and non-private training."""
    device = resolve_device(config.device)
    x_test, y_test = torch.as_tensor(data.test.x, device=device), torch.as_tensor(data.test.y, device=device)
    rows = []
    third_party = config.mechanism.third_party
    names = ((f"third-party {third_party}",) if third_party else ()) + (config.mechanism.name, "dp_sgd",
                                                                        "public_only", "nonprivate")
    for name in dict.fromkeys(names):
        cfg = config if name in (config.mechanism.name, names[0]) else with_mechanism(config, name)
        problem = build_problem(cfg, data)
        if third_party and name == names[0]:  # the user's function, each model without a canary
            absent = torch.zeros(models, dtype=torch.bool)
            canaries = Canaries(torch.zeros(models, data.train.n_features), torch.zeros(models, dtype=torch.long),
                                absent, absent)
            trained = train_third_party(load_mechanism(third_party), problem, config.seed + 1, torch.arange(models),
                                        canaries, record_iterates=False)
            params = [view.params for _, view in trained]
        else:
            params = [chunk.params for chunk in train_models(problem, config.seed + 1, range(models), device=device,
                                                             progress=f"utility baseline {name}")]
        acc = torch.cat([accuracy(problem.model, {k: v.to(device) for k, v in p.items()}, x_test, y_test)
                         for p in params])
        eps = accountant(cfg.mechanism).epsilon(cfg.mechanism.delta)
        rows.append({"mechanism": name, "accuracy": float(acc.mean()), "std": float(acc.std()) if models > 1 else None,
                     "epsilon": float(eps), "faulty": MECHANISMS[cfg.mechanism.name].faulty})
    return {"metric": "test accuracy", "models_per_mechanism": models, "rows": rows}


def binary_game_bound(add_remove, relation) -> float:
    """The most a claim allows in a binary game with a uniform prior (Ball = ½) whose two worlds are neighbours
    under ``relation``: Theorem 4's ``1 − f(½)`` and the Bayes-optimal success ``½ + δ_relation(0)/2`` of any
    test between two outputs whose trade-off is at least the relation's curve — the smaller of two valid
    bounds. For the replacement (±C canary) game they agree at p = 1; for the simulator game (insertion or
    deletion, Theorem 5 of the FDP paper) the second is the tight one (Φ(μ/2) against Φ(μ) for μ-GDP)."""
    return min(float(add_remove.bound(0.5)), bayes_optimal_success(relation))


def judged_rule(record: GameRecord, attack: str) -> tuple[DecisionRule, int, int]:
    """An attack's decision rule (orientation and offsets, :mod:`fdp_audit.audit.decision`) fitted on the
    selection trials, with its successes and the number of evaluation trials it is judged on. The prior attack
    keeps its own argmax (it realises Ball and is not judged)."""
    selection, evaluation = selection_split(len(record.labels))
    if not len(evaluation):
        raise BadInputError("a game needs at least 2 trials: half fit each attack's decision rule, half judge it",
                            "audit.trials")
    scores = record.scores[attack]
    rule = (DecisionRule(1, np.zeros(scores.shape[1])) if attack == "prior"
            else fit_decision_rule(scores[selection], record.labels[selection]))
    return rule, rule.successes(scores[evaluation], record.labels[evaluation]), int(len(evaluation))


def _rate_comparisons(record: GameRecord, bound: float, prefix: str) -> list[dict[str, Any]]:
    """Success against ``1 − f(Ball)`` of each attack's decision rule, counted on the evaluation trials."""
    ball = float(record.prior.max())
    rows = []
    for attack in record.scores:
        if attack == "prior":
            continue
        rule, successes, trials = judged_rule(record, attack)
        rows.append({"id": f"{prefix}/{attack}", "kind": "rate", "game": record.game, "attack": attack,
                     "threat_model": record.threat_models[attack], "trials": trials, "successes": successes,
                     "orientation": rule.orientation, "offsets": rule.offsets.tolist(), "ball": ball,
                     "bound": bound})
    return rows


def epsilon_comparisons(record: GameRecord, delta: float, claim: MechanismSpec, relation: str,
                        selection_level: float = DEFAULT_SELECTION_LEVEL) -> list[dict[str, Any]]:
    """One ``epsilon`` comparison per attack: the orientation and threshold of the score difference are chosen
    on every fourth trial (:func:`~fdp_audit.audit.stats.select_test`, with Clopper–Pearson bounds at
    ``selection_level``), the test's errors are counted on the other three quarters, and the row states the
    claim it is judged against (the gate re-derives f and ε from it)."""
    rows = []
    selection, evaluation = threshold_split(len(record.labels))
    labels = record.labels.astype(bool)
    stated = stated_claim(claim)
    for attack, scores in record.scores.items():
        if attack == "prior":
            continue
        score = scores[:, 1] - scores[:, 0]
        test = select_test(score[selection], labels[selection], selection_level)
        counts = roc_counts(test.orientation * score[evaluation], labels[evaluation], np.array([test.threshold]))
        rows.append({"id": f"{record.game}-epsilon/{attack}", "kind": "epsilon", "game": record.game,
                     "attack": attack, "threat_model": record.threat_models[attack], "relation": relation,
                     "orientation": test.orientation, "thresholds": counts.thresholds.tolist(),
                     "false_positives": counts.false_positives.tolist(),
                     "false_negatives": counts.false_negatives.tolist(), "negatives": counts.negatives,
                     "positives": counts.positives, "delta": delta, "claim": stated})
    return rows


def selection_level(config: Config) -> float:
    """The per-bound level at which thresholds are selected: the audit's α spread over about as many bounds as
    the gate will spread it (two per ε comparison, one per success-rate comparison). Only power depends on it."""
    attacks = sum(a != "prior" for a in config.audit.attacks)
    comparisons = sum(attacks * (1 if game in ("attribute", "reconstruction") else 2) for game in config.audit.games)
    return config.audit.alpha / max(2 * comparisons, 1)


def _full_roc(record: GameRecord, attack: str) -> dict[str, list[float]]:
    score = record.scores[attack][:, 1] - record.scores[attack][:, 0]
    labels = record.labels.astype(bool)
    order = np.unique(score)[::-1]
    tpr = [(score[labels] >= t).mean() if labels.any() else 0.0 for t in order]
    fpr = [(score[~labels] >= t).mean() if (~labels).any() else 0.0 for t in order]
    step = max(1, len(order) // 200)
    return {"fpr": [0.0, *fpr[::step], 1.0], "tpr": [0.0, *tpr[::step], 1.0]}


def stated_claim(claim: MechanismSpec) -> dict[str, Any]:
    """The claim an ε comparison states, from which the gate re-derives f and ε."""
    stated: dict[str, Any] = {"mechanism": claim.claimed_as}
    if claim.is_gaussian:
        stated |= {"noise_multiplier": claim.noise_multiplier, "sample_rate": claim.sample_rate,
                   "steps": claim.steps}
    return stated


# per comparison of each game, how many of the audit's trials it is judged on
EVALUATED_TRIALS = {"rate": lambda trials: len(selection_split(trials)[1]),
                    "epsilon": lambda trials: len(threshold_split(trials)[1]),
                    "reconstruction": lambda trials: trials}


def planned_comparisons(config: Config, data: PreparedData, add_remove, replace_one) -> list[dict[str, Any]]:
    """The comparisons the configured games will judge, with what their power depends on (trials judged,
    bounds, claims) and no outcomes, so that an audit whose comparisons cannot fail is refused before it
    trains (``split`` names how many of the audit's trials each is judged on, :data:`EVALUATED_TRIALS`). An ε
    comparison's evaluation trials are assumed split evenly: the favourable case; the judge re-checks each
    comparison's power on the real counts."""
    audit, mech = config.audit, config.mechanism
    rows: list[dict[str, Any]] = []
    rate_trials = EVALUATED_TRIALS["rate"](audit.trials)

    def rates(prefix: str, attacks: dict, bound: float) -> list[dict[str, Any]]:
        return [{"id": f"{prefix}/{name}", "kind": "rate", "split": "rate", "trials": rate_trials, "bound": bound}
                for name in attacks if name != "prior"]

    for game in audit.games:
        if game == "attribute":
            rows += rates("attribute", game_attacks(audit.attacks, "categorical"),
                          float(add_remove.bound(max(audit.target_prior))))
        elif game == "reconstruction":
            split = data.column_split()
            if not split.protected_groups or any(g.kind != "numeric" for g in split.protected_groups):
                continue  # the game itself refuses such data, with its own message
            rho = np.asarray(audit.rho_grid, dtype=float)
            balls = ball_per_radius(audit.reconstruction_prior, audit.reconstruction_scale,
                                    len(split.protected_columns), rho)
            for name in game_attacks(audit.attacks, "continuous"):
                if name != "prior":
                    rows += [{"id": f"reconstruction/{name}/rho={r:g}", "kind": "rate", "split": "reconstruction",
                              "trials": audit.trials, "bound": float(add_remove.bound(ball))}
                             for r, ball in zip(rho, balls, strict=True)]
        else:
            attacks = game_attacks(audit.attacks, "categorical", True)
            name = "replace" if game == "distinguishing" else "add_remove"
            relation = replace_one if name == "replace" else add_remove
            rows += rates(f"{game}-attribute", attacks, binary_game_bound(add_remove, relation))
            evaluated = EVALUATED_TRIALS["epsilon"](audit.trials)
            rows += [{"id": f"{game}-epsilon/{attack}", "kind": "epsilon", "split": "epsilon", "relation": name,
                      "orientation": 1, "thresholds": [0.0], "false_positives": [0], "false_negatives": [0],
                      "negatives": evaluated // 2, "positives": evaluated - evaluated // 2, "delta": mech.delta,
                      "claim": stated_claim(relation.spec)} for attack in attacks if attack != "prior"]
    return rows


def audit_trials_needed(row: dict[str, Any], judged_trials: int) -> int:
    """The fewest audit trials at which a planned comparison is judged on ``judged_trials``."""
    evaluated = EVALUATED_TRIALS[row["split"]]
    trials = judged_trials
    while evaluated(trials) < judged_trials:
        trials += 1
    return trials


def play_game(game: str, config: Config, data: PreparedData, device: torch.device, journal: Journal,
              chunk: int) -> GameRecord | ReconstructionRecord:
    """Play one configured game for ``config.audit.trials`` trials (journaled trials are reused)."""
    trials = config.audit.trials
    if game == "reconstruction":
        return reconstruction_game(config, data, trials, device, journal, chunk)
    if game == "attribute":
        return record_canary_game(config, data, trials, device, journal, chunk)
    return gradient_canary_game(game, config, data, trials, device, journal, chunk)


def game_comparisons(record: GameRecord | ReconstructionRecord, delta: float, add_remove,
                     replace_one, level: float = DEFAULT_SELECTION_LEVEL) -> list[dict[str, Any]]:
    """The comparisons one played game contributes to the verdict (``level``: the per-bound level at which
    the ε comparisons' tests are selected, :func:`selection_level`)."""
    if isinstance(record, ReconstructionRecord):
        return record.comparisons()
    if record.game == "attribute":
        return _rate_comparisons(record, float(add_remove.bound(record.prior.max())), "attribute")
    name = "replace" if record.game == "distinguishing" else "add_remove"
    relation = replace_one if name == "replace" else add_remove
    return (_rate_comparisons(record, binary_game_bound(add_remove, relation), f"{record.game}-attribute")
            + epsilon_comparisons(record, delta, relation.spec, name, level))


def run_audit(config: Config, out_dir: Path | None, command: str = "") -> dict[str, Any]:
    """Play the configured games and return the results dictionary (verdict included), as results.json holds
    it: non-finite numbers (the ε of a non-private baseline) are null, so the report renders the same numbers
    from this dictionary as from the file."""
    mech, audit = config.mechanism, config.audit
    data = prepare_data(config.data, config.seed)
    device = resolve_device(config.device)
    sources = user_source_digests if mech.third_party is not None else None
    journal = (Journal(None, "") if out_dir is None
               else Journal(out_dir / "journal.jsonl", journal_key(config, versions(), data), sources))
    chunk = audit.max_models_per_chunk or DEFAULT_CHUNK
    add_remove, replace_one = accountant(mech), accountant(mech, "replace")
    planned = {row["id"]: row for row in planned_comparisons(config, data, add_remove, replace_one)}
    found = [replace(p, trials_needed=None if p.trials_needed is None
                     else audit_trials_needed(planned[p.id], p.trials_needed))
             for p in powerless(list(planned.values()), audit.alpha)]
    refusal = unjudgeable(found, audit.alpha, len(planned)) if planned else None
    if refusal is not None:  # before anything is trained
        raise BadInputError(refusal, "audit.trials")
    records = [play_game(game, config, data, device, journal, chunk) for game in audit.games]
    comparisons = [row for record in records
                   for row in game_comparisons(record, mech.delta, add_remove, replace_one, selection_level(config))]
    if not comparisons:  # the games refuse their own misconfigurations first
        raise BadInputError("no configured attack can be judged in the configured games (only the prior?)",
                            "audit.attacks")
    verdict, judged = judge(comparisons, audit.alpha)
    if verdict["status"] == NOT_JUDGED:  # the plan is the favourable case; the real counts decide
        raise BadInputError(verdict["explanation"], "audit.trials")
    if journal.reused:
        counts = ", ".join(f"{game} {count}" for game, count in journal.reused.items())
        print(f"fdp-audit: reused {sum(journal.reused.values())} trials from {journal.path} ({counts})",
              file=sys.stderr)
    by_id = {j["id"]: j for j in judged}
    return finite_or_none({
        "schema_version": 1, "kind": "audit", "title": config.report.title or config.name,
        "created": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "verdict": verdict,
        "mechanism": mechanism_section(config),
        "accounting": accounting_section(config),
        "games": [section for r in records
                  for section in (reconstruction_sections(r, by_id, audit.alpha) if isinstance(r, ReconstructionRecord)
                                  else game_sections(r, by_id, add_remove, replace_one, audit.alpha))],
        "tightness": tightness_section(records, by_id, replace_one, add_remove, mech.delta),
        "utility": utility_section(config, data),
        "comparisons": comparisons,
        "reproducibility": {
            "versions": versions(), "seed": config.seed, "config": config.to_dict(),
            "dataset": config.data.dataset, "dataset_fingerprint": data.fingerprint, "command": command,
            "device": str(device), "trials": audit.trials, "reused_trials": dict(journal.reused),
        },
    })


def game_sections(record: GameRecord, by_id, add_remove, replace_one, alpha: float) -> list[dict[str, Any]]:
    """Report sections of one game: the attribute view (success against Theorem 4) of every game, and for the
    gradient-canary games the distinguishing view (ROC and ε lower bound) of the same trials."""
    ball = float(record.prior.max())
    prefix = "attribute" if record.game == "attribute" else f"{record.game}-attribute"
    judged = [by_id[f"{prefix}/{attack}"] for attack in record.scores if f"{prefix}/{attack}" in by_id]
    bound = judged[0]["theoretical"] if judged else float(add_remove.bound(ball))  # the game's bound
    attacks = []
    for attack in record.scores:
        _, successes, trials = judged_rule(record, attack)
        ci = clopper_pearson(successes, trials, alpha)
        lower = lower_confidence_bound(successes, trials, alpha)
        j = by_id.get(f"{prefix}/{attack}")
        entry = {"attack": attack, "threat_model": record.threat_models[attack], "trials": trials,
                 "successes": successes, "rate": successes / trials, "ball": ball, "bound": bound,
                 "ci_low": ci[0], "ci_high": ci[1], "lower_bound": lower,
                 "margin": lower - bound, "tightness": None, "status": "info"}
        if j is not None:
            entry |= {"ci_low": j["ci_low"], "ci_high": j["ci_high"], "lower_bound": j["lower_bound"],
                      "margin": j["margin"], "tightness": j["tightness"],
                      "status": comparison_status(j)}
        attacks.append(entry)
    canary = "record" if record.game == "attribute" else f"gradient ({record.game} trials)"
    sections = [{"game": "attribute", "canary": canary, "trials": int(len(record.labels)),
                 "prior": record.prior.tolist(), "candidates": list(record.candidate_names), "ball": ball,
                 "bound": bound, "attacks": attacks}]
    if record.game == "attribute":
        return sections
    relation = "replace" if record.game == "distinguishing" else "add_remove"
    optimum = bayes_optimal_success(replace_one if relation == "replace" else add_remove)
    distinguishers = []
    for attack in record.scores:
        if attack == "prior":
            continue
        j = by_id[f"{record.game}-epsilon/{attack}"]
        successes = int((record.scores[attack].argmax(axis=1) == record.labels).sum())
        distinguishers.append({
            "attack": attack, "threat_model": record.threat_models[attack], "trials": int(len(record.labels)),
            "success": successes / len(record.labels), "optimal_success": optimum,
            "roc": _full_roc(record, attack), "points": j["points"], "orientation": j["orientation"],
            "epsilon_lower_bound": j["epsilon_lower_bound"], "epsilon_claimed": j["theoretical"],
            "epsilon_ratio": j["epsilon_ratio"], "epsilon_family": j["epsilon_family"],
            "epsilon_lower_bound_cp": j["epsilon_lower_bound_cp"], "epsilon_ratio_cp": j["epsilon_ratio_cp"],
            "status": comparison_status(j)})
    sections.append({"game": record.game, "trials": int(len(record.labels)), "relation": relation,
                     "attacks": distinguishers})
    return sections


def reconstruction_sections(record: ReconstructionRecord, by_id, alpha: float) -> list[dict[str, Any]]:
    """The reconstruction game's report section: success within each radius ρ against Ball(ρ) and
    1 − f(Ball(ρ)); the prior attack is shown for reference and not judged."""
    attacks = []
    for attack in record.estimates:
        points = []
        for rho, successes, ball, bound in zip(record.rho, record.successes(attack), record.ball, record.bound,
                                               strict=True):
            successes, trials = int(successes), record.trials
            ci = clopper_pearson(successes, trials, alpha)
            lower = lower_confidence_bound(successes, trials, alpha)
            point = {"rho": float(rho), "ball": float(ball), "bound": float(bound), "successes": successes,
                     "rate": successes / trials, "ci_low": ci[0], "ci_high": ci[1], "lower_bound": lower,
                     "margin": lower - float(bound), "status": "info"}
            j = by_id.get(f"{record.game}/{attack}/rho={rho:g}")
            if j is not None:
                point |= {"ci_low": j["ci_low"], "ci_high": j["ci_high"], "lower_bound": j["lower_bound"],
                          "margin": j["margin"], "status": comparison_status(j)}
            points.append(point)
        attacks.append({"attack": attack, "threat_model": record.threat_models[attack], "trials": record.trials,
                        "points": points})
    return [{"game": "reconstruction", "trials": record.trials,
             "prior": {"kind": record.prior, "scale": record.scale, "dim": int(record.truth.shape[1])},
             "metric": record.metric, "protected_features": list(record.protected_features), "attacks": attacks}]


def tightness_section(records: list[GameRecord], by_id, replace_one, add_remove, delta: float) -> dict[str, Any]:
    """How close the iterates attack comes to the Bayes-optimal adversary of the same game, and how tight
    Theorem 4 itself is: optimum = ½ + δ_replace(0)/2 for the ±C canary with a uniform binary prior."""
    rows = []
    optimum = bayes_optimal_success(replace_one)
    bound = float(add_remove.bound(0.5))
    for record in records:
        key = f"{record.game}-attribute/iterates"
        if record.game != "distinguishing" or key not in by_id:
            continue
        j = by_id[key]
        share = tightness(j["rate"], 0.5, optimum)
        ci = None if share is None else [tightness(j["ci_low"], 0.5, optimum), tightness(j["ci_high"], 0.5, optimum)]
        sim = by_id.get("simulator-epsilon/iterates")
        rows.append({"epsilon": float(add_remove.epsilon(delta)), "attack_rate": j["rate"], "optimal_success": optimum,
                     "bound": bound, "attack_advantage_share": share, "ci": ci,
                     "theorem4_tightness": tightness(optimum, 0.5, bound),
                     "simulator_epsilon_ratio": None if sim is None else sim["epsilon_ratio"]})
    return {"rows": rows}


def versions() -> dict[str, str]:
    import dp_accounting
    import scipy
    import sklearn

    return {"fdp_audit": __version__, "python": platform.python_version(), "torch": torch.__version__,
            "numpy": np.__version__, "scipy": scipy.__version__, "scikit-learn": sklearn.__version__,
            "dp_accounting": getattr(dp_accounting, "__version__", "unknown")}
