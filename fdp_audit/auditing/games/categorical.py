"""Games whose secret is one of V candidate values (docs/games.md): the record of their trials, the success of each
attack's decision rule against the game's limit (:mod:`fdp_audit.auditing.decision`), and the attribute section of
the report that every such game shows."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from attacks import Attack, View
from fdp_audit.auditing.decision import DecisionRule, fit_decision_rule, selection_split
from fdp_audit.auditing.games.base import Judgements, RateComparison
from fdp_audit.auditing.stats import clopper_pearson, lower_confidence_bound
from fdp_audit.errors import BadInputError


@dataclass(frozen=True)
class GameRecord:
    """Raw per-trial outcomes: true candidate index and every attack's candidate scores."""

    game: str
    labels: np.ndarray  # [N]
    scores: dict[str, np.ndarray]  # attack -> [N, V]
    prior: np.ndarray  # [V]
    threat_models: dict[str, str]
    candidate_names: tuple[str, ...]

    def head(self, trials: int) -> GameRecord:
        """The first ``trials`` trials: exactly the record of the same game played with that many trials
        (trial i's secret and model depend on its index only).

        Args:
            trials: how many of the first trials to keep.

        Returns:
            The shortened record.
        """
        return replace(self, labels=self.labels[:trials], scores={k: v[:trials] for k, v in self.scores.items()})


def candidate_scores(attacks: dict[str, Attack], view: View) -> dict[str, np.ndarray]:
    """Every attack's candidate scores for a chunk of trials, ``[R, V]`` float64.

    Args:
        attacks: the fitted attacks, by name.
        view: what the adversary sees of the chunk's R trained models.

    Returns:
        Name → scores of shape (R, V).
    """
    return {name: attack.infer(view).scores.detach().cpu().double().numpy() for name, attack in attacks.items()}


def judged_rule(record: GameRecord, attack: str) -> tuple[DecisionRule, int, int]:
    """An attack's decision rule (orientation and offsets, :mod:`fdp_audit.auditing.decision`) fitted on the
    selection trials, with its successes and the number of evaluation trials it is judged on. The prior attack
    keeps its own argmax (it realises Ball and is not judged).

    Args:
        record: the played game.
        attack: the attack's name.

    Returns:
        ``(rule, successes, evaluation_trials)``.

    Raises:
        BadInputError: fewer than 2 trials.
    """
    selection, evaluation = selection_split(len(record.labels))
    if not len(evaluation):
        raise BadInputError("a game needs at least 2 trials: half fit each attack's decision rule, half judge it",
                            "audit.trials")
    scores = record.scores[attack]
    rule = (DecisionRule(1, np.zeros(scores.shape[1])) if attack == "prior"
            else fit_decision_rule(scores[selection], record.labels[selection]))
    return rule, rule.successes(scores[evaluation], record.labels[evaluation]), int(len(evaluation))


def rule_counts(record: GameRecord, attack: str) -> tuple[int, int]:
    """An attack's successes and trials as its fitted decision rule is judged (:func:`judged_rule`).

    Args:
        record: the played game.
        attack: the attack's name.

    Returns:
        ``(successes, trials)`` on the evaluation trials.

    Raises:
        BadInputError: fewer than 2 trials.
    """
    _, successes, trials = judged_rule(record, attack)
    return successes, trials


def argmax_counts(record: GameRecord, attack: str) -> tuple[int, int]:
    """An attack's successes when its guess is the argmax of its scores, over every trial (nothing is fitted).

    Args:
        record: the played game.
        attack: the attack's name.

    Returns:
        ``(successes, trials)``.
    """
    return int((record.scores[attack].argmax(axis=1) == record.labels).sum()), int(len(record.labels))


def rate_comparisons(record: GameRecord, bound: float, view: str) -> list[RateComparison]:
    """Success against ``bound`` of each attack's decision rule, counted on the evaluation trials; Ball is the
    prior's largest probability.

    Args:
        record: the played game.
        bound: the game's limit (Theorem 4's ``1 − f(Ball)`` or a smaller one).
        view: what the trials are judged as (the comparisons' view, part of their ids).

    Returns:
        One comparison per attack besides the prior.

    Raises:
        BadInputError: fewer than 2 trials.
    """
    ball = float(record.prior.max())
    rows = []
    for attack in record.scores:
        if attack == "prior":
            continue
        rule, successes, trials = judged_rule(record, attack)
        rows.append(RateComparison(record.game, view, attack, record.threat_models[attack], trials, successes, ball,
                                   bound, rule=rule))
    return rows


def attribute_section(record: GameRecord, judgements: Judgements, view: str, canary: str, fallback_bound: float,
                      alpha: float, counts: Callable[[GameRecord, str], tuple[int, int]] = rule_counts
                      ) -> dict[str, Any]:
    """The attribute view of a categorical game: each attack's success (``counts``: successes and trials) against
    the game's bound (the judged comparisons' limit, ``fallback_bound`` when none is judged), the prior shown for
    reference.

    Args:
        record: the played game.
        judgements: the gate's evaluation of every comparison.
        view: the view the rate comparisons were judged as.
        canary: the canary in words.
        fallback_bound: the bound shown when no comparison is judged.
        alpha: the level of the Clopper–Pearson intervals of unjudged rows.
        counts: how an attack's successes and trials are counted.

    Returns:
        The section (``"game": "attribute"``): trials, prior, candidates, Ball, bound and one entry per attack with
        its rate, interval, lower bound, margin, tightness and status (``info`` when not judged).
    """
    ball = float(record.prior.max())
    found = {attack: judgements.find("rate", record.game, attack, view) for attack in record.scores}
    judged = [j for j in found.values() if j is not None]
    bound = judged[0].evaluation["theoretical"] if judged else fallback_bound
    attacks = []
    for attack in record.scores:
        successes, trials = counts(record, attack)
        ci = clopper_pearson(successes, trials, alpha)
        lower = lower_confidence_bound(successes, trials, alpha)
        entry = {"attack": attack, "threat_model": record.threat_models[attack], "trials": trials,
                 "successes": successes, "rate": successes / trials, "ball": ball, "bound": bound,
                 "ci_low": ci[0], "ci_high": ci[1], "lower_bound": lower,
                 "margin": lower - bound, "tightness": None, "status": "info"}
        j = found[attack]
        if j is not None:
            e = j.evaluation
            entry |= {"ci_low": e["ci_low"], "ci_high": e["ci_high"], "lower_bound": e["lower_bound"],
                      "margin": e["margin"], "tightness": e["tightness"], "status": j.status}
        attacks.append(entry)
    return {"game": "attribute", "canary": canary, "trials": int(len(record.labels)), "prior": record.prior.tolist(),
            "candidates": list(record.candidate_names), "ball": ball, "bound": bound, "attacks": attacks}
