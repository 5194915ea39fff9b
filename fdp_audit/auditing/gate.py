"""The CI gate (docs/statistics.md, docs/files.md): one function judges every comparison of an audit, at the audit's
end and when ``fdp-audit gate`` re-judges saved results at another α.

A comparison is *violated* when the empirical evidence, at confidence 1 − α/m (Bonferroni over the m
comparisons), exceeds what the accounted mechanism allows:

* ``rate``: the one-sided Clopper–Pearson lower bound of an attack's success rate exceeds the Theorem 4
  bound ``1 − f(Ball)``;
* ``epsilon``: a joint confidence region of the error rates of a distinguishing game's threshold test (chosen
  on a selection split, counted on the rest) lies strictly below the claimed trade-off curve f, re-derived here
  from the stated mechanism (:func:`fdp_audit.auditing.stats.curve_rejected`). Beside the verdict it reports the
  family ε (the largest claim of the claimed mechanism's family the data reject) and the assumption-free
  Clopper–Pearson ε;
* ``one_run``: a one-run audit's correct guesses reject the claimed trade-off curve (``test: count``, valid for
  any mechanism meeting the curve) or the claimed DP-SGD with independent canaries (``test: conformance``,
  gradient canaries; :func:`fdp_audit.auditing.one_run.evaluation.judge_one_run`);
* ``released_steps``: a user's training released more optimizer steps than the claim accounts for, or updated
  the model outside the optimizer steps it released (counts read from the training, not estimates: no level
  applies).

A comparison is *judged* only when it has power: some outcome of its trials (a perfect attack) would be a
violation at that level. A comparison that cannot fail says nothing about the mechanism, so the verdict is
PASS only over judged comparisons, at least one and all of them; otherwise it is NOT JUDGED. Each kind of
comparison supplies its own evaluation and power check (:data:`KINDS`). Comparisons marked ``informational``
(a one-run audit with canaries that cannot test the mechanism) make a VIOLATION when violated and an
INFORMATIONAL verdict otherwise, never a PASS. Comparisons marked ``final_weights_only`` (crafted input canaries,
which test the final weights alone) make a PASS that says what it does not test (:data:`FINAL_WEIGHTS_ONLY`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from xml.sax.saxutils import quoteattr

import numpy as np

from fdp_audit.accounting.events import Relation, relation_named
from fdp_audit.accounting.mechanism import MechanismAccountant, MechanismSpec, accountant_for
from fdp_audit.auditing.games import GAMES
from fdp_audit.auditing.labels import UNITS, comparison_label, limit_source, limit_words
from fdp_audit.auditing.promise import KIND as PROMISE
from fdp_audit.auditing.promise import (
    claimed_schedule,
    judge_promise,
    promise_kept_words,
    promise_section,
    promise_violation,
)
from fdp_audit.auditing.stats import (
    RocCounts,
    clopper_pearson,
    curve_p_value,
    curve_rejected,
    epsilon_lower_bound,
    family_epsilon,
    lower_confidence_bound,
    tightness,
)
from fdp_audit.claim import Claim
from fdp_audit.config import Config
from fdp_audit.errors import BadInputError
from fdp_audit.json_numbers import finite_or_none
from fdp_audit.mechanisms import MECHANISMS
from fdp_audit.phases import Phase

NOT_JUDGED = "NOT JUDGED"  # comparisons without power, or none: never a pass
INFORMATIONAL = "INFORMATIONAL"  # an audit that gates nothing (a checkpoint audit's estimated bounds)
# what a PASS of crafted input canaries, judged on the final weights alone, does and does not test
FINAL_WEIGHTS_ONLY = ("Final weights only: crafted input canaries test what the final model keeps of each canary "
                      "record, noise included; they cannot see a clipping or sampling fault that the noise hides "
                      "(a loop that does not clip, under noise), nor the steps that sampled no canary, so this PASS "
                      "says nothing about those: gradient canaries, which read every step's update, test them.")


def _int(row: dict, key: str, where: str) -> int:
    value = row.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise BadInputError("must be a non-negative integer", f"{where}.{key}")
    return value


def _number(row: dict, key: str, where: str, lo: float = -math.inf, hi: float = math.inf) -> float:
    value = row.get(key)
    if not isinstance(value, int | float) or isinstance(value, bool) or not lo <= value <= hi:
        raise BadInputError(f"must be a number in [{lo}, {hi}]", f"{where}.{key}")
    return float(value)


def _rate_counts(row: dict[str, Any], where: str) -> tuple[int, int, float, float]:
    n = _int(row, "trials", where)
    k = _int(row, "successes", where)
    if n == 0 or k > n:
        raise BadInputError("successes must be between 0 and trials > 0", where)
    return n, k, _number(row, "bound", where, 0, 1), _number(row, "ball", where, 0, 1)


def _evaluate_rate(row: dict[str, Any], level: float, where: str, claim: Claim | None) -> dict[str, Any]:
    n, k, bound, ball = _rate_counts(row, where)
    rate = k / n
    lower = lower_confidence_bound(k, n, level)
    ci = clopper_pearson(k, n, 2 * level)
    return {"observed": lower, "theoretical": bound, "margin": lower - bound, "violated": lower > bound,
            "rate": rate, "ci_low": ci[0], "ci_high": ci[1], "lower_bound": lower,
            "tightness": tightness(rate, ball, bound)}


def _rate_trials_needed(row: dict[str, Any], level: float, where: str, claim: Claim | None) -> int | None:
    """The fewest trials at which a perfect attack (k = N) violates the bound. Its one-sided Clopper–Pearson
    lower bound is level^(1/N), which exceeds the bound b < 1 exactly when N > ln(level) / ln(b). No number
    of trials is enough when b = 1 (a claim of no privacy)."""
    bound = _number(row, "bound", where, 0, 1)
    if bound >= 1:
        return None
    if bound <= 0:
        return 1
    trials = max(1, math.floor(math.log(level) / math.log(bound)) + 1)
    while lower_confidence_bound(trials, trials, level) <= bound:  # float rounding at the crossing
        trials += 1
    return trials


def _rate_can_fail(row: dict[str, Any], level: float, where: str, claim: Claim | None) -> bool:
    n = _int(row, "trials", where)
    needed = _rate_trials_needed(row, level, where, claim)
    return needed is not None and n >= needed


def _roc_counts(row: dict, where: str) -> RocCounts:
    negatives, positives = _int(row, "negatives", where), _int(row, "positives", where)
    thresholds = row.get("thresholds")
    fp, fn = row.get("false_positives"), row.get("false_negatives")
    if not (isinstance(thresholds, list) and isinstance(fp, list) and isinstance(fn, list)
            and len(thresholds) == len(fp) == len(fn) and thresholds):
        raise BadInputError("thresholds and error counts must be non-empty lists of equal length", where)
    if any(not isinstance(t, int | float) or isinstance(t, bool) or not math.isfinite(t) for t in thresholds):
        raise BadInputError("thresholds must be finite numbers", f"{where}.thresholds")
    if any(not isinstance(c, int) or isinstance(c, bool) or c < 0 or c > negatives for c in fp) or any(
            not isinstance(c, int) or isinstance(c, bool) or c < 0 or c > positives for c in fn):
        raise BadInputError("error counts out of range", where)
    if row.get("orientation") not in (1, -1) or isinstance(row.get("orientation"), bool):
        raise BadInputError("must be 1 (score) or -1 (minus the score)", f"{where}.orientation")
    return RocCounts(np.asarray(thresholds, float), np.asarray(fp), np.asarray(fn), negatives, positives)


def _relation(row: dict, where: str) -> Relation:
    try:
        return relation_named(row.get("relation"))
    except BadInputError as err:
        raise BadInputError(err.detail, f"{where}.relation") from None


def claimed_accountant(row: dict, where: str, claim: Claim | None = None) -> MechanismAccountant:
    """The accountant a comparison is judged against, under the game's relation: the gate re-derives f and ε from
    it rather than trusting any stored bound.

    Args:
        row: a stored ``epsilon`` comparison (untrusted).
        where: the row's place in the results, for errors.
        claim: the claim the results state, which their comparisons state (:func:`restate_limits` checks that),
            or None for a comparison judged on its own: the claim it states (mechanism, z, p, T).

    Returns:
        ``claim``'s accountant under the row's relation, or the one of the mechanism the row states.

    Raises:
        BadInputError: the relation, the mechanism or its z, p or T is missing or out of range (naming the field).
    """
    relation = _relation(row, where)
    if claim is not None:
        return claim.accountant(relation)
    stated = row.get("claim")
    if not isinstance(stated, dict) or stated.get("mechanism") not in tuple(MECHANISMS):  # an unhashable name too
        raise BadInputError(f"must name the claimed mechanism, one of {', '.join(MECHANISMS)}",
                            f"{where}.claim.mechanism")
    row = MECHANISMS[stated["mechanism"]]
    if row.releases.needs_noise_multiplier:
        _number(stated, "noise_multiplier", f"{where}.claim", 0)
        _number(stated, "sample_rate", f"{where}.claim", 0, 1)
        _int(stated, "steps", f"{where}.claim")
    event = row.claimed_event(stated.get("noise_multiplier"), stated.get("sample_rate"), stated.get("steps", 0))
    return accountant_for(MechanismSpec(row.claimed_as, event, relation))


def _judge_epsilon(row: dict[str, Any], level: float, where: str, claim: Claim | None) -> dict[str, Any]:
    counts = _roc_counts(row, where)
    delta = _number(row, "delta", where, 0, 1)
    claimed = claimed_accountant(row, where, claim)
    curve = claimed.curve()
    p_values = curve_p_value(counts, curve)  # per threshold; the comparison's is Bonferroni-adjusted over them
    violated = curve_rejected(counts, curve, level)
    limit = float(curve.epsilon(delta))
    family = family_epsilon(claimed.spec, counts, level, delta)
    eps_cp, points = epsilon_lower_bound(counts, delta, level)
    for point, p_value in zip(points, p_values, strict=True):
        point["f_claimed"] = float(curve(point["fpr_ub"]))
        point["curve_p_value"] = float(p_value)

    def ratio(value: float) -> float | None:
        return None if not limit or math.isinf(limit) else value / limit

    return {"observed": family.epsilon, "theoretical": limit, "margin": family.epsilon - limit, "violated": violated,
            "epsilon_lower_bound": family.epsilon, "epsilon_ratio": ratio(family.epsilon),
            "epsilon_family": family.family, "family_parameter": family.parameter,
            "family_capped": family.capped, "epsilon_lower_bound_cp": eps_cp, "epsilon_ratio_cp": ratio(eps_cp),
            "curve_p_value": min(1.0, float(np.min(p_values)) * len(p_values)), "orientation": row["orientation"],
            "points": points}


def can_fail(row: dict[str, Any], level: float, claim: Claim | None = None) -> bool:
    """Whether an ``epsilon`` comparison could be violated at all at its trial counts and per-comparison level:
    the most extreme evidence, no error at any threshold, gives the smallest p-values P0(α) = Pr_α[K0 ≤ 0] and
    P1(β) = Pr_β[K1 ≤ 0] at every point of the curve (binomial cdfs grow with k), hence the smallest curve
    p-value; so the comparison can fail iff that evidence is rejected.

    Args:
        row: a stored ``epsilon`` comparison.
        level: the per-comparison level.
        claim: the claim it is judged against (:func:`claimed_accountant`); None: the one it states.

    Returns:
        True when the comparison has power.

    Raises:
        BadInputError: the row is not an ``epsilon`` comparison, or its counts or claim are invalid.
    """
    if row.get("kind") != "epsilon":
        raise BadInputError(f"can_fail here judges epsilon comparisons, not {row.get('kind')!r}", "kind")
    counts = _roc_counts(row, "comparison")
    zero = np.zeros_like(counts.false_positives)
    best = RocCounts(counts.thresholds, zero, zero, counts.negatives, counts.positives)
    return curve_rejected(best, claimed_accountant(row, "comparison", claim).curve(), level)


def _epsilon_can_fail(row: dict[str, Any], level: float, where: str, claim: Claim | None) -> bool:
    return can_fail(row, level, claim)


def _epsilon_trials_needed(row: dict[str, Any], level: float, where: str, claim: Claim | None) -> int | None:
    """The fewest evaluation trials (split evenly into negatives and positives) at which the most extreme
    evidence (:func:`can_fail`) would reject the claim; None when no number up to 2^24 would (a claim of no
    privacy)."""
    zeros = [0] * len(_roc_counts(row, where).thresholds)

    def enough(n: int) -> bool:
        return can_fail({**row, "negatives": n // 2, "positives": n - n // 2, "false_positives": zeros,
                         "false_negatives": zeros}, level, claim)

    if not enough(1 << 24):
        return None
    low, high = 1, 1 << 24
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if enough(middle) else (middle, high)
    return high


@dataclass(frozen=True)
class RateLimit:
    """How a game's rate comparisons are limited: the Ball the configuration fixes (None: estimated from data
    the results do not hold, so taken as stated) and the limit at that Ball; ``exact`` when the stored bound
    must equal it, otherwise it may only be lower."""

    ball: Callable[[dict[str, Any], Config, str], float] | None
    limit: Callable[[float, Claim], float]
    exact: bool = True


# comparisons that no registered game makes (a game states its own: rate_limit)
RATE_LIMITS: dict[str, RateLimit] = {
    # the mean of per-record bounds at estimated Balls: at most 1 − f(mean Ball), since 1 − f is concave
    "checkpoint": RateLimit(None, lambda ball, claim: float(claim.accountant().bound(ball)), exact=False),
}


def rate_limit(game: Any) -> RateLimit | None:
    """How the rate comparisons of ``game`` are limited: as the registered game states
    (:meth:`fdp_audit.auditing.games.Game.stated_ball`, :meth:`~fdp_audit.auditing.games.Game.stated_limit`), or by
    :data:`RATE_LIMITS`; None for an unknown game.

    Args:
        game: the comparison's ``game`` (any JSON value).

    Returns:
        The game's rate limit, or None.
    """
    if not isinstance(game, str):
        return None
    if game in GAMES:
        played = GAMES[game]()
        return RateLimit(played.stated_ball, lambda ball, claim: played.stated_limit(ball, claim.accountant))
    return RATE_LIMITS.get(game)
RESTATE_TOLERANCE = 1e-7  # absolute for probabilities, relative above 1: below any statistical resolution


def _restate_rate(row: dict[str, Any], claim: Claim, config: Config, where: str) -> None:
    """The bound must be the one the stated mechanism gives at the Ball the game's configuration fixes
    (:data:`RATE_LIMITS`)."""
    game = row.get("game")
    rule = rate_limit(game)
    if rule is None:
        raise BadInputError(f"cannot re-derive the bound of game {game!r} from the stated mechanism", f"{where}.game")
    stated_ball, bound = _number(row, "ball", where, 0, 1), _number(row, "bound", where, 0, 1)
    if rule.ball is not None:
        ball = rule.ball(row, config, where)
        if abs(ball - stated_ball) > RESTATE_TOLERANCE:
            raise BadInputError(f"Ball {stated_ball:.6g} is not the {ball:.6g} of the stated configuration",
                                f"{where}.ball")
    limit = rule.limit(stated_ball, claim)
    if bound > limit + RESTATE_TOLERANCE or (rule.exact and bound < limit - RESTATE_TOLERANCE):
        raise BadInputError(f"bound {bound:.6g} is not the {limit:.6g} that the stated mechanism gives at Ball "
                            f"{stated_ball:.6g}", f"{where}.bound")


def _restate_epsilon(row: dict[str, Any], claim: Claim, config: Config, where: str) -> None:
    """The claim an ε comparison states (which the judge re-derives f and ε from) must be the stated
    mechanism's, at its δ, under the game's neighbouring relation."""
    delta = _number(row, "delta", where, 0, 1)
    if abs(delta - claim.delta) > RESTATE_TOLERANCE * delta:
        raise BadInputError(f"δ {delta:g} is not the stated mechanism's {claim.delta:g}",
                            f"{where}.delta")
    game = row.get("game")
    relation = GAMES[game].epsilon_relation if isinstance(game, str) and game in GAMES else None
    if relation is not None and row.get("relation") != relation:
        raise BadInputError(f"the {game} game's relation is '{relation}'", f"{where}.relation")
    spec = claim.add_remove.spec
    stated = row.get("claim")
    if not isinstance(stated, dict) or stated.get("mechanism") != spec.name:
        raise BadInputError(f"must claim the stated mechanism {spec.name!r}", f"{where}.claim.mechanism")
    if spec.is_gaussian:
        for key, value in (("noise_multiplier", spec.noise_multiplier), ("sample_rate", spec.sample_rate),
                           ("steps", spec.steps)):
            got = _number(stated, key, f"{where}.claim")
            if abs(got - value) > RESTATE_TOLERANCE * max(1.0, abs(value)):
                raise BadInputError(f"{got:g} is not the stated mechanism's {value:g}", f"{where}.claim.{key}")


def _evaluate_one_run(row: dict[str, Any], level: float, where: str, claim: Claim | None) -> dict[str, Any]:
    from fdp_audit.auditing.one_run.evaluation import judge_one_run

    return judge_one_run(row, level, where, None if claim is None else claim.one_run_curve(_relation(row, where)))


def _one_run_can_fail(row: dict[str, Any], level: float, where: str, claim: Claim | None) -> bool:
    """Whether the guesses, all correct, would reject the claim."""
    return _evaluate_one_run({**row, "correct": row.get("guesses")}, level, where, claim)["violated"]


def _restate_one_run(row: dict[str, Any], claim: Claim, config: Config, where: str) -> None:
    """The claim a one-run comparison is tested against must be the stated mechanism's (a faulty mechanism
    claims the correct one it imitates)."""
    if row.get("mechanism") != claim.claimed_as:
        raise BadInputError(f"claim {row.get('mechanism')!r} is not the stated mechanism's", f"{where}.mechanism")
    for key, value in (("noise_multiplier", claim.noise_multiplier), ("sample_rate", claim.sample_rate),
                       ("steps", claim.steps), ("delta", claim.delta)):
        stated = _number(row, key, where)
        if abs(stated - value) > RESTATE_TOLERANCE * max(1.0, abs(value)):
            raise BadInputError(f"{stated:g} is not the stated mechanism's {value:g}", f"{where}.{key}")


def _evaluate_released_steps(row: dict[str, Any], level: float, where: str, claim: Claim | None) -> dict[str, Any]:
    released, claimed = _int(row, "released_steps", where), _int(row, "steps", where)
    unobserved = _int(row, "unobserved_updates", where) if "unobserved_updates" in row else 0
    violated = released > claimed or unobserved > 0
    return {"observed": released, "theoretical": claimed, "violated": violated,
            "margin": max(released - claimed, unobserved) / max(claimed, 1) if violated else -math.inf}


def _restate_released_steps(row: dict[str, Any], claim: Claim, config: Config, where: str) -> None:
    steps = claim.steps
    if _int(row, "steps", where) != steps:
        raise BadInputError(f"{row['steps']} is not the stated mechanism's {steps}", f"{where}.steps")


def release_beyond_claim(released: int, unobserved: int, claimed: int) -> str:
    """Why a user loop's release is not what its claim describes, in words, or "" when it is: more optimizer steps
    than the claim accounts for, or updates of the canary head outside the optimizer steps read (by hand, or
    before the optimizer was attached), which released the module's updates without the claimed mechanism.

    Args:
        released: the optimizer steps read.
        unobserved: the gaps before, between or after them in which the canary head changed.
        claimed: the steps T the claim accounts for.

    Returns:
        The reasons, joined, ending in what they mean for the claim; "" when there are none."""
    reasons = []
    if unobserved:
        reasons.append(f"the model was updated outside the {released} optimizer steps the audit read (the canary "
                       f"head changed in {unobserved} gap{'s' * (unobserved != 1)} before, between or after them: an "
                       "update without the optimizer's step, or steps before it was attached), so the final "
                       "weights hold updates the claimed mechanism did not make")
    if released > claimed:
        reasons.append(f"the training released {released} optimizer steps, more than the {claimed} the claim "
                       "accounts for")
    return "; ".join(reasons) + (": the claim does not cover what was released" if reasons else "")


def _released_steps_violation(j: dict[str, Any]) -> str:
    return f"{j['id']}: {release_beyond_claim(j['observed'], j.get('unobserved_updates', 0), j['theoretical'])}."


def _rate_violation(j: dict[str, Any]) -> str:
    return (f"{comparison_label(j)}: the lower confidence bound {j['observed']:.4g} of its success rate exceeds its "
            f"{limit_words(j)}, so the mechanism leaks more than it claims.")


def _epsilon_violation(j: dict[str, Any]) -> str:
    return (f"{comparison_label(j)}: its error rates reject the claimed trade-off curve, an ε lower bound of "
            f"{epsilon_found(j)}{_family_words(j)} against its {limit_words(j)}, so the mechanism leaks more than "
            f"it claims.")


def epsilon_found(j: dict[str, Any], digits: int = 4) -> str:
    """An ε comparison's lower bound as a sentence shows it: the family's value, said to be at the family's cap
    when the evidence rejects every member the search reaches (the bound is then only "at least", whatever the
    number), with the assumption-free Clopper–Pearson ε beside it.

    Args:
        j: an ε comparison's judgement (``observed``, ``family_capped``, ``epsilon_lower_bound_cp``).
        digits: significant digits.

    Returns:
        The words.
    """
    shown = f"{j['observed']:.{digits}g}"
    if not j.get("family_capped"):
        return shown
    cp = j.get("epsilon_lower_bound_cp")
    return (f"{shown} (at the cap of the family's search: at least that much"
            + (f"; Clopper–Pearson ε {cp:.{digits}g}" if isinstance(cp, int | float) else "") + ")")


def _family_words(j: dict[str, Any]) -> str:
    """The assumption an ε lower bound found in the claimed mechanism's family rests on, with the assumption-free
    (Clopper–Pearson) bound beside it when given (and not already beside a capped bound)."""
    if not j.get("epsilon_family"):
        return ""
    free = j.get("epsilon_lower_bound_cp")
    return (f" (assuming the mechanism's family: {j['epsilon_family']}"
            + (f"; assumption-free ε {free:.4g}" if isinstance(free, int | float) and not j.get("family_capped")
               else "") + ")")


def _closest_words(j: dict[str, Any], unit: str) -> str:
    """What a passing comparison closest to its limit measured, in the words its kind's ``observed`` needs: a
    success rate's is a lower confidence bound, an ε test's an ε lower bound, a one-run audit's the observed share
    of right guesses (no bound: the test itself allows for chance, and a count fixes where it rejects)."""
    if j.get("kind") == "one_run" and isinstance(j.get("guesses"), int):
        rejecting = round(j["theoretical"] * j["guesses"]) + 1
        return (f"observed share of correct guesses {j['observed']:.4g} ({j.get('correct')} of {j['guesses']} "
                f"right); the claim is rejected only at {rejecting} or more right, a share above its "
                f"{limit_words(j)}")
    if j.get("kind") == "epsilon":
        return f"ε lower bound {epsilon_found(j)}{_family_words(j)} against its {limit_words(j)}"
    return f"its {unit} at least {j['observed']:.4g} (lower confidence bound) against its {limit_words(j)}"


def _one_run_violation(j: dict[str, Any]) -> str:
    counted = (f"{j['correct']} of {j['guesses']} guesses were right (a share of {j['observed']:.4g})"
               if isinstance(j.get("guesses"), int) and isinstance(j.get("correct"), int)
               else f"a share of {j['observed']:.4g} of the guesses was right")
    if j.get("test") == "conformance":
        return (f"{comparison_label(j)}: {counted}, more than its {limit_words(j)} at this level, so the training "
                "does not behave as the claimed DP-SGD (canaries independent, each within the claimed curve).")
    return (f"{comparison_label(j)}: {counted}, more than its {limit_words(j)} at this level, so the mechanism "
            "leaks more than it claims.")


def _promise_violation(j: dict[str, Any]) -> str:
    return f"{comparison_label(j)}: {promise_violation(j)}"


def _restate_promise(row: dict[str, Any], claim: Claim, config: Config, where: str) -> None:
    """The plan a promise states is the claim the games were judged against: its sample rate and steps are the
    stated mechanism's (its noise multiplier too, unless the configuration claims another, which ``claimed`` must
    then state: the training is judged against it too, docs/games.md "The promise")."""
    mech = config.mechanism
    plan = row.get("planned")
    if not isinstance(plan, dict):
        raise BadInputError("must be a mapping of noise_multiplier, sample_rate and steps", f"{where}.planned")
    for key, value in (("sample_rate", mech.sample_rate), ("steps", mech.steps)):
        stated = _number(plan, key, f"{where}.planned")
        if not _restated(stated, value):
            raise BadInputError(f"{stated:g} is not the stated mechanism's {value:g}", f"{where}.planned.{key}")
    expected, claimed = claimed_schedule(claim), row.get("claimed")
    if claimed is None:  # null, or absent in results written before the claim was compared: the claim is the plan
        planned_z = _number(plan, "noise_multiplier", f"{where}.planned")
        if not _restated(planned_z, expected["noise_multiplier"]):
            raise BadInputError(
                f"missing: the stated configuration claims noise multiplier {expected['noise_multiplier']:.6g} where "
                f"the plan's is {planned_z:.6g}, and the training must be judged against that claim too (results "
                "written before fdp-audit compared it: re-run the audit)", f"{where}.claimed")
        # null, or absent in older results, states the plan at the claim's δ: a promise read at another δ would let
        # a training spending more than the claim at the claim's δ pass unseen
        delta = row.get("delta")
        if not (isinstance(delta, int | float) and _restated_delta(delta, expected["delta"])):
            raise BadInputError(
                f"missing: the promise is read at δ = {row.get('delta')!r}, not the stated configuration's "
                f"δ = {expected['delta']:g}, and the training must be judged against the claim at the claim's δ",
                f"{where}.claimed")
        return
    if not isinstance(claimed, dict):
        raise BadInputError("must be a mapping of noise_multiplier, sample_rate, steps, target_epsilon and delta, "
                            "or null", f"{where}.claimed")
    for key, value in expected.items():
        stated = claimed.get(key)
        same = (stated is None and value is None) or (
            value is not None and isinstance(stated, int | float) and not isinstance(stated, bool)
            and (_restated_delta if key == "delta" else _restated)(stated, value))
        if not same:
            raise BadInputError(f"{stated!r} is not the stated configuration's claim {value!r}",
                                f"{where}.claimed.{key}")


def _restated(stated: float, value: float) -> bool:
    return abs(stated - value) <= RESTATE_TOLERANCE * max(1.0, abs(value))


def _restated_delta(stated: float, value: float) -> bool:
    # relative: δ of 1e-9 and 1e-5 differ by less than the absolute tolerance, and their ε do not
    return abs(stated - value) <= RESTATE_TOLERANCE * abs(value)


@dataclass(frozen=True)
class ComparisonKind:
    """How the gate judges one kind of comparison at a per-comparison level (already Bonferroni-divided):
    ``evaluate`` the evidence, and its power: whether any outcome of the comparison's trials ``can_fail``,
    and how many trials it would need (``trials_needed``, None when no number is enough, ``no_power`` saying
    why). When
    ``power_required``, one comparison of the kind that cannot fail makes the whole verdict NOT JUDGED;
    otherwise such a comparison is only reported as not judged (the success rate of the same binary game's
    trials is judged beside an ε comparison; small one-run guess counts cannot reject any claim).
    ``restate`` checks the comparison's limit against the one the stated claim (and the configuration that
    states it) gives, raising
    :class:`BadInputError` when they differ."""

    # each called with the comparison, the per-comparison level, its place in the results and the claim it is
    # judged against (None: the one it states)
    evaluate: Callable[[dict[str, Any], float, str, Claim | None], dict[str, Any]]
    can_fail: Callable[[dict[str, Any], float, str, Claim | None], bool]
    trials_needed: Callable[[dict[str, Any], float, str, Claim | None], int | None]
    no_power: str  # why, when no number of trials is enough
    power_required: bool
    restate: Callable[[dict[str, Any], Claim, Config, str], None]
    violation: Callable[[dict[str, Any]], str]  # the verdict's explanation when this comparison is the worst
    # judged with error probability α/m (counted in the Bonferroni m); a kind judged without error is not, and
    # its violation explains the verdict before any statistical one
    statistical: bool = True


KINDS: dict[str, ComparisonKind] = {
    "rate": ComparisonKind(_evaluate_rate, _rate_can_fail, _rate_trials_needed,
                           "no number of trials: the claim allows any success", True, _restate_rate, _rate_violation),
    "epsilon": ComparisonKind(_judge_epsilon, _epsilon_can_fail, _epsilon_trials_needed,
                              "no number of trials: the claim allows any ε", False, _restate_epsilon,
                              _epsilon_violation),
    "one_run": ComparisonKind(_evaluate_one_run, _one_run_can_fail, lambda row, level, where, claim: None,
                              "even all guesses correct would not reject the claim at this level", False,
                              _restate_one_run, _one_run_violation),
    PROMISE: ComparisonKind(lambda row, level, where, claim: judge_promise(row, level, where),
                            lambda row, level, where, claim: True, lambda row, level, where, claim: None,
                            "", False, _restate_promise, _promise_violation, statistical=False),
    "released_steps": ComparisonKind(_evaluate_released_steps, lambda row, level, where, claim: True,
                                     lambda row, level, where, claim: None, "", False, _restate_released_steps,
                                     _released_steps_violation, statistical=False),
}


def statistical_count(comparisons: list[Any]) -> int:
    """How many of the comparisons are judged with error (the Bonferroni m): every one but the kinds that are
    not statistical (a training's promise).

    Args:
        comparisons: the stored comparisons (untrusted rows).

    Returns:
        m.
    """
    return sum(not (isinstance(row, dict) and isinstance(row.get("kind"), str) and row["kind"] in KINDS
                    and not KINDS[row["kind"]].statistical) for row in comparisons)


def comparison_kind(row: dict[str, Any], where: str) -> ComparisonKind:
    """The kind of a stored comparison (:data:`KINDS`): its evaluation, power check and words.

    Args:
        row: the stored comparison.
        where: the row's place in the results, for errors.

    Returns:
        The kind.

    Raises:
        BadInputError: an unknown ``kind``.
    """
    name = row.get("kind")
    kind = KINDS.get(name) if isinstance(name, str) else None  # a list or mapping would not even hash
    if kind is None:
        raise BadInputError(f"unknown comparison kind {row.get('kind')!r}", f"{where}.kind")
    return kind


def judge_comparison(row: dict[str, Any], level: float, where: str, claim: Claim | None = None) -> dict[str, Any]:
    """Evaluate one comparison at per-comparison level ``level`` (already Bonferroni-divided). ``judged`` says
    whether it could fail at all: a comparison without power is never violated and never makes a PASS.

    Args:
        row: the stored comparison.
        level: the per-comparison level.
        where: the row's place in the results, for errors.
        claim: the claim it is judged against (the audit's, or the one its results state); None: the one the
            comparison states.

    Returns:
        The kind's evaluation (``observed``, ``theoretical``, ``margin``, ``violated``, …) with ``judged`` and, when
        not judged, ``trials_needed`` (None when no number of trials is enough).

    Raises:
        BadInputError: the row is invalid (naming the field).
    """
    kind = comparison_kind(row, where)
    evaluation = kind.evaluate(row, level, where, claim)
    judged = kind.can_fail(row, level, where, claim)
    return {**evaluation, "judged": judged,
            "trials_needed": None if judged else kind.trials_needed(row, level, where, claim)}


def level_per_comparison(alpha: float, count: int) -> float:
    """The Bonferroni level α/m over the m comparisons of one audit.

    Args:
        alpha: the audit's α, in (0, 1).
        count: m, the number of statistical comparisons.

    Returns:
        α/m (α when m = 0).

    Raises:
        BadInputError: α is not a number in (0, 1).
    """
    if not isinstance(alpha, int | float) or isinstance(alpha, bool) or not 0 < alpha < 1:
        raise BadInputError(f"must be in (0, 1), got {alpha!r}", "alpha")
    return alpha / max(count, 1)


@dataclass(frozen=True)
class Powerless:
    """A comparison that no outcome of its trials could make a violation."""

    id: str
    trials_needed: int | None  # None: no number of trials is enough (the kind's no_power says why)
    required: bool  # its kind's power_required
    no_power: str
    label: str = ""  # its human label (:func:`fdp_audit.auditing.labels.comparison_label`)


def powerless(comparisons: list[dict[str, Any]], alpha: float, claim: Claim | None = None) -> list[Powerless]:
    """The comparisons that cannot fail at ``alpha`` (Bonferroni over all of them). Rows need only what the
    power check reads (trials and bound; or negatives, positives, thresholds with error-count lists of their
    length, orientation, relation and the stated claim), not outcomes, so that an audit can ask before it trains
    anything.

    Args:
        comparisons: the stored or planned comparisons.
        alpha: the audit's α.
        claim: the claim they are judged against (the audit's); None: the one each states.

    Returns:
        The powerless comparisons, in order, each with the trials it would need.

    Raises:
        BadInputError: α is not in (0, 1), or a row is invalid (naming ``results.comparisons[i]``).
    """
    level = level_per_comparison(alpha, statistical_count(comparisons))
    found = []
    for i, row in enumerate(comparisons):
        where = f"results.comparisons[{i}]"
        kind = comparison_kind(row, where)
        if not kind.can_fail(row, level, where, claim):
            found.append(Powerless(row["id"], kind.trials_needed(row, level, where, claim), kind.power_required,
                                   kind.no_power, comparison_label(row)))
    return found


def unjudgeable(found: list[Powerless], alpha: float, count: int) -> str | None:
    """Why comparisons with these powerless ones cannot give a verdict, or None when they can: no
    comparisons, none with power, or one of a kind that requires power.

    Args:
        found: the powerless comparisons (:func:`powerless`).
        alpha: the audit's α.
        count: m, the number of statistical comparisons.

    Returns:
        The reason in one sentence, or None.
    """
    if count == 0:
        return "No comparisons were made, so nothing was judged: this is not a pass."
    if len(found) < count and not any(p.required for p in found):
        return None
    # every one counted is listed (those that block a verdict first), so the count and the list agree
    shown = sorted(found, key=lambda p: not p.required)
    parts = [f"{p.label or p.id} (" + (p.no_power if p.trials_needed is None
                                       else f"needs at least {p.trials_needed} trials") + ")" for p in shown]
    return (f"{len(found)} of {count} comparisons cannot fail at α={alpha:g} (Bonferroni over {count}): even a "
            f"perfect attack would not exceed the bound, so a pass would mean nothing: {'; '.join(parts)}")


def judge(comparisons: list[dict[str, Any]], alpha: float,
          claim: Claim | None = None) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The verdict and every comparison's evaluation, Bonferroni-corrected over all of them.

    VIOLATION when a comparison is violated; otherwise NOT JUDGED when :func:`unjudgeable` says so (no
    comparisons, none that can fail, or a powerless one of a kind that requires power); otherwise INFORMATIONAL
    when every comparison is marked ``informational`` (not a pass), else PASS. A comparison without power is
    listed in ``not_judged`` and never counts towards a PASS.

    Args:
        comparisons: the stored comparisons (untrusted rows of ``results.json``).
        alpha: the audit's α.
        claim: the claim every comparison is judged against: the audit's, or the one its results state
            (:func:`restate_limits`), so that each relation's accountant is the claim's; None: each comparison is
            judged against the claim it states.

    Returns:
        ``(verdict, judged)``: the verdict (``status``, ``worst_margin``, ``worst_comparison``, ``explanation``,
        ``alpha``, ``n_comparisons``, ``violations``, ``not_judged``) and each comparison's evaluation with its id
        and kind, in order.

    Raises:
        BadInputError: α is not in (0, 1), ``comparisons`` is not a list, a row has no id, or a row is invalid.
    """
    if not isinstance(comparisons, list):
        raise BadInputError("must be a list", "results.comparisons")
    level = level_per_comparison(alpha, statistical_count(comparisons))
    judged, described = [], {}
    with Phase(f"judging {len(comparisons)} comparisons", len(comparisons), "comparison") as progress:
        for i, row in enumerate(comparisons):
            if not isinstance(row, dict) or not isinstance(row.get("id"), str):
                raise BadInputError("each comparison needs an id", f"results.comparisons[{i}]")
            judged.append({"id": row["id"], "kind": row.get("kind"),
                           **judge_comparison(row, level, f"results.comparisons[{i}]", claim)})
            # what a sentence about it needs: the stored description (game, attack, relation) and the evaluation
            described[row["id"]] = {k: v for k, v in row.items() if not isinstance(v, list | dict)} | judged[-1]
            progress.update()
    violations = [j for j in judged if j["violated"]]
    unjudged = [Powerless(j["id"], j["trials_needed"], KINDS[j["kind"]].power_required, KINDS[j["kind"]].no_power,
                          comparison_label(described[j["id"]])) for j in judged if not j["judged"]]
    counted = [j for j in judged if j["judged"] and KINDS[j["kind"]].statistical]
    kept = [j for j in judged if j["kind"] == PROMISE and not j["violated"]]
    worst = max(counted, key=lambda j: j["margin"] if math.isfinite(j["margin"]) else -math.inf, default=None)
    reason = unjudgeable(unjudged, alpha, statistical_count(comparisons))
    if violations:
        status = "VIOLATION"
        worst = max(violations, key=lambda j: (not KINDS[j["kind"]].statistical, j["margin"]))
        explanation = KINDS[worst["kind"]].violation(described[worst["id"]])
    elif reason is not None:
        status, explanation = NOT_JUDGED, reason
    elif all(row.get("informational") is True for row in comparisons):
        status = INFORMATIONAL
        explanation = (f"No comparison is violated, but these comparisons cannot test the mechanism (the canaries "
                       f"carry no signal about noise, clipping or sampling), so this is not a pass; the closest is "
                       f"{worst['id']} ({worst['observed']:.4g} against {worst['theoretical']:.4g}).")
    else:
        status = "PASS"
        closest = described[worst["id"]]
        unit = UNITS.get(worst["kind"], "value")
        explanation = ((f"{FINAL_WEIGHTS_ONLY} " if any(row.get("final_weights_only") is True for row in comparisons)
                        else "")
                       + f"No attack beats its limit by more than chance explains; the closest is "
                       f"{comparison_label(closest)}: {_closest_words(closest, unit)}."
                       + "".join(f" {comparison_label(described[j['id']])}: {promise_kept_words(j)}." for j in kept)
                       + (f" Not judged (they cannot fail at these trials): {', '.join(p.label for p in unjudged)}."
                          if unjudged else ""))
    verdict = {
        "status": status,
        "worst_margin": None if worst is None or not math.isfinite(worst["margin"]) else worst["margin"],
        "worst_comparison": None if worst is None else worst["id"],
        "explanation": explanation, "alpha": alpha, "n_comparisons": statistical_count(comparisons),
        "violations": [j["id"] for j in violations], "not_judged": [p.id for p in unjudged],
    }
    return verdict, judged


def stated_claim(results: dict[str, Any]) -> tuple[Config, Claim]:
    """The configuration a results file states and its claim, from which the gate re-derives every limit.

    Args:
        results: a results dictionary (as :func:`fdp_audit.auditing.results.read_results` returns it).

    Returns:
        The validated configuration and its claim.

    Raises:
        BadInputError: the results state no configuration, or an invalid one.
    """
    from fdp_audit.config import config_from_dict

    stated = results["reproducibility"].get("config")
    if not isinstance(stated, dict):
        raise BadInputError("missing: the gate re-derives every bound from it", "results.reproducibility.config")
    try:
        config = config_from_dict(stated)
    except BadInputError as err:
        raise BadInputError(f"not a valid configuration: {err}", "results.reproducibility.config") from err
    return config, Claim.from_config(config)


def restate_limits(results: dict[str, Any]) -> Claim:
    """Re-derive every comparison's limit (and the mechanism section a report shows) from the configuration
    the results state, refusing results whose stored numbers differ: ``gate`` never judges against a stored
    bound. What this cannot catch — an edit of the configuration itself, or of the raw counts — is what the
    checksum and, with a key, the MAC are for (:mod:`fdp_audit.auditing.results`).

    Args:
        results: a results dictionary.

    Returns:
        The claim the results state (:func:`stated_claim`).

    Raises:
        BadInputError: a stored number differs from the one the stated claim gives.
    """
    config, claim = stated_claim(results)
    with Phase("re-deriving every limit from the stated configuration"):
        _restate(results, config, claim)
    return claim


def _restate(results: dict[str, Any], config: Config, claim: Claim) -> None:
    _check_section(results["mechanism"], finite_or_none(claim.section()), "results.mechanism",
                   "of the stated configuration")
    comparisons = results.get("comparisons", [])
    if not isinstance(comparisons, list):
        raise BadInputError("must be a list", "results.comparisons")
    for i, row in enumerate(comparisons):
        where = f"results.comparisons[{i}]"
        if not isinstance(row, dict):
            raise BadInputError("must be a mapping", where)
        comparison_kind(row, where).restate(row, claim, config, where)
    _restate_promise_section(results, comparisons, config)


def _restate_promise_section(results: dict[str, Any], comparisons: list[dict[str, Any]], config: Config) -> None:
    """A promise is there exactly when the stated configuration's integration promises one, and the ``promise``
    section (what a report's banner shows) is what its comparison re-derives."""
    from fdp_audit.integrations import INTEGRATIONS

    rows = [(i, row) for i, row in enumerate(comparisons) if row.get("kind") == PROMISE]
    section = results.get(PROMISE)
    name = config.mechanism.integration
    promised = name != "none" and INTEGRATIONS[name].promises
    if promised != bool(rows or section is not None):
        raise BadInputError(f"missing: the stated mechanism.integration {name} promises what each training spends, "
                            "and the results must judge it" if promised else
                            f"present, but the stated mechanism.integration {name} promises nothing",
                            f"results.{PROMISE}")
    if not promised:
        return
    if len(rows) != 1 or not isinstance(section, dict):
        raise BadInputError("a promise section goes with exactly one promise comparison", f"results.{PROMISE}")
    (i, row), = rows
    expected = finite_or_none(promise_section(row, judge_promise(row, 0.0, f"results.comparisons[{i}]")))
    _check_section(section, expected, f"results.{PROMISE}", "its comparison gives")


def _check_section(shown: dict[str, Any], expected: dict[str, Any], where: str, source: str) -> None:
    """Every value of ``expected`` as ``shown`` holds it (floats within :data:`RESTATE_TOLERANCE`)."""
    for key, value in expected.items():
        got = shown.get(key)
        same = (got == value if not isinstance(value, float) or not isinstance(got, int | float)
                else abs(got - value) <= RESTATE_TOLERANCE * max(1.0, abs(value)))
        if not same:
            raise BadInputError(f"{got!r} is not the {value!r} {source}", f"{where}.{key}")


def verified_results(path: str | Path, flag: str | None = None) -> dict[str, Any]:
    """A results file as ``gate`` and ``report`` both take it (:func:`verified_claim`, without its claim).

    Args:
        path: the results file.
        flag: the command-line flag that named it (``"--baseline"``), if not the positional argument.

    Returns:
        The results.

    Raises:
        BadInputError: the file is refused; the message names it.
    """
    return verified_claim(path, flag)[0]


def verified_claim(path: str | Path, flag: str | None = None) -> tuple[dict[str, Any], Claim]:
    """A results file as ``gate`` and ``report`` both take it, or one line of bad input naming the file (and the
    command-line ``flag`` that named it, if not the positional argument): its
    integrity (the checksum, and the MAC under ``FDP_AUDIT_HMAC_KEY``: :func:`fdp_audit.auditing.results.read_results`),
    every stored limit re-derived from the stated configuration (:func:`restate_limits`), and its verdict the one
    that judging its comparisons at its α gives (never NOT JUDGED) — or INFORMATIONAL for an audit that compares
    nothing. Nothing else
    reads a results file to show or judge it, so no reader trusts what another refuses.

    Args:
        path: the results file.
        flag: the command-line flag that named it (``"--baseline"``), if not the positional argument.

    Returns:
        The results, and the claim they state, which every comparison was judged against.

    Raises:
        BadInputError: the file is refused; the message names it.
    """
    from fdp_audit.auditing.results import read_results

    try:
        results = read_results(path)
        claim = restate_limits(results)
        stated = results["verdict"].get("status")
        comparisons = results.get("comparisons", [])
        if comparisons or stated != INFORMATIONAL:
            verdict, _ = judge(comparisons, results["verdict"].get("alpha"), claim)
            if verdict["status"] == NOT_JUDGED:  # no comparisons, or none that can fail: nothing to show as a verdict
                raise BadInputError(verdict["explanation"], "results.comparisons")
            if verdict["status"] != stated:
                raise BadInputError(f"{stated!r} is not the {verdict['status']!r} that its comparisons give at "
                                    f"α={verdict['alpha']:g}", "results.verdict.status")
    except BadInputError as err:
        raise BadInputError(str(err), f"{flag} {path}" if flag else str(path)) from None
    return results, claim


def comparison_status(judged: dict[str, Any]) -> str:
    """A judged comparison's status in a report: violation, pass, or not judged (it could not fail).

    Args:
        judged: a comparison's evaluation (:func:`judge_comparison`).

    Returns:
        ``"violation"``, ``"pass"`` or ``"not judged"``.
    """
    if judged["violated"]:
        return "violation"
    return "pass" if judged["judged"] else "not judged"


def junit_xml(verdict: dict[str, Any], rows: list[dict[str, Any]], warnings: Sequence[Any] = ()) -> str:
    """JUnit XML with one test case per comparison (``rows``: each stored comparison merged with the gate's
    evaluation of it, or a row with its own ``label``), named by its human label and failed when violated, the
    message saying what exceeded which limit and where that limit comes from; each sanity warning
    (:class:`fdp_audit.auditing.sanity.SanityWarning`) is a ``warning`` property of the suite.

    Args:
        verdict: the verdict (:func:`judge`).
        rows: the comparisons with their evaluations.
        warnings: the sanity warnings.

    Returns:
        The XML document.
    """
    cases = []
    for row in rows:
        body = ""
        if row["violated"]:
            body = f"<failure message={quoteattr(_failure_message(row))}/>"
        game = "regression" if row.get("label") else str(row.get("game") or row.get("kind"))
        cases.append(f'  <testcase classname={quoteattr(f"fdp-audit.{game}")} '
                     f'name={quoteattr(row.get("label") or comparison_label(row))}>{body}</testcase>')
    failures = sum(row["violated"] for row in rows)
    properties = [f'    <property name="warning" value={quoteattr(w.message)}/>' for w in warnings]
    head = ["  <properties>", *properties, "  </properties>"] if properties else []
    return (f'<?xml version="1.0" encoding="UTF-8"?>\n<testsuite name="fdp-audit" tests="{len(rows)}" '
            f'failures="{failures}">\n' + "\n".join([*head, *cases]) + "\n</testsuite>\n")


def _failure_message(row: dict[str, Any]) -> str:
    observed, limit = f"{row['observed']:.6g}", f"{row['theoretical']:.6g}"
    if row.get("label"):  # a rise since the baseline
        return f"the success rate rose by at least {observed} since the baseline, more than the tolerated {limit}"
    if row.get("kind") == "rate":
        return (f"lower confidence bound of the success rate {observed} > limit {limit} ({limit_source(row)}); "
                f"measured rate {row.get('rate', float('nan')):.4g} over {row.get('trials')} judged trials")
    if row.get("kind") == "epsilon":
        return f"the error rates reject the claimed curve: ε lower bound {epsilon_found(row, 6)} > claimed ε {limit} " \
               f"({limit_source(row)})"
    return f"share of correct guesses {observed} > {limit} ({limit_source(row)})"
