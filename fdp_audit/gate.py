"""The CI gate (SPEC 2.6, 5.1): one function judges every comparison of an audit, at the audit's end and
when ``fdp-audit gate`` re-judges saved results at another α.

A comparison is *violated* when the empirical evidence, at confidence 1 − α/m (Bonferroni over the m
comparisons), exceeds what the accounted mechanism allows:

* ``rate``: the one-sided Clopper–Pearson lower bound of an attack's success rate exceeds the Theorem 4
  bound ``1 − f(Ball)``;
* ``epsilon``: a joint confidence region of the error rates of a distinguishing game's threshold test (chosen
  on a selection split, counted on the rest) lies strictly below the claimed trade-off curve f, re-derived here
  from the stated mechanism (:func:`fdp_audit.audit.stats.curve_rejected`). Beside the verdict it reports the
  family ε (the largest claim of the claimed mechanism's family the data reject) and the assumption-free
  Clopper–Pearson ε;
* ``one_run``: a one-run audit's correct guesses reject the claimed trade-off curve
  (:func:`fdp_audit.audit.one_run.evaluation.judge_one_run`).
"""

from __future__ import annotations

import math
from typing import Any
from xml.sax.saxutils import quoteattr

import numpy as np

from fdp_audit.accounting.mechanism import MECHANISMS, MechanismAccountant, MechanismSpec
from fdp_audit.audit.stats import (
    RocCounts,
    clopper_pearson,
    curve_p_value,
    curve_rejected,
    epsilon_lower_bound,
    family_epsilon,
    lower_confidence_bound,
    tightness,
)
from fdp_audit.errors import BadInputError


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


def judge_comparison(row: dict[str, Any], level: float, where: str) -> dict[str, Any]:
    """Evaluate one comparison at per-comparison level ``level`` (already Bonferroni-divided)."""
    kind = row.get("kind")
    if kind == "rate":
        n = _int(row, "trials", where)
        k = _int(row, "successes", where)
        if n == 0 or k > n:
            raise BadInputError("successes must be between 0 and trials > 0", where)
        bound = _number(row, "bound", where, 0, 1)
        ball = _number(row, "ball", where, 0, 1)
        rate = k / n
        lower = lower_confidence_bound(k, n, level)
        ci = clopper_pearson(k, n, 2 * level)
        return {"observed": lower, "theoretical": bound, "margin": lower - bound, "violated": lower > bound,
                "rate": rate, "ci_low": ci[0], "ci_high": ci[1], "lower_bound": lower,
                "tightness": tightness(rate, ball, bound)}
    if kind == "epsilon":
        return _judge_epsilon(row, level, where)
    if kind == "one_run":
        from fdp_audit.audit.one_run.evaluation import judge_one_run

        return judge_one_run(row, level, where)
    raise BadInputError(f"unknown comparison kind {kind!r}", f"{where}.kind")


RELATIONS = {"replace": "replace", "add_remove": "add-remove"}


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


def claimed_accountant(row: dict, where: str) -> MechanismAccountant:
    """The accountant of the claim a comparison states (mechanism, z, p, T and the game's relation): the gate
    re-derives f and ε from it rather than trusting any stored bound."""
    claim, relation = row.get("claim"), row.get("relation")
    if relation not in RELATIONS:
        raise BadInputError(f"must be one of {', '.join(RELATIONS)}", f"{where}.relation")
    if not isinstance(claim, dict) or claim.get("mechanism") not in MECHANISMS:
        raise BadInputError(f"must name the claimed mechanism, one of {', '.join(MECHANISMS)}",
                            f"{where}.claim.mechanism")
    name = claim["mechanism"]
    if name not in ("nonprivate", "public_only"):
        _number(claim, "noise_multiplier", f"{where}.claim", 0)
        _number(claim, "sample_rate", f"{where}.claim", 0, 1)
        _int(claim, "steps", f"{where}.claim")
    spec = MechanismSpec(name, claim.get("noise_multiplier"), claim.get("sample_rate"), claim.get("steps", 0),
                         relation=RELATIONS[relation])
    return MechanismAccountant(spec)


def _judge_epsilon(row: dict[str, Any], level: float, where: str) -> dict[str, Any]:
    counts = _roc_counts(row, where)
    delta = _number(row, "delta", where, 0, 1)
    claimed = claimed_accountant(row, where)
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


def can_fail(row: dict[str, Any], level: float) -> bool:
    """Whether an ``epsilon`` comparison could be violated at all at its trial counts and per-comparison level:
    the most extreme evidence, no error at any threshold, gives the smallest p-values P0(α) = Pr_α[K0 ≤ 0] and
    P1(β) = Pr_β[K1 ≤ 0] at every point of the curve (binomial cdfs grow with k), hence the smallest curve
    p-value; so the comparison can fail iff that evidence is rejected."""
    if row.get("kind") != "epsilon":
        raise BadInputError(f"can_fail here judges epsilon comparisons, not {row.get('kind')!r}", "kind")
    counts = _roc_counts(row, "comparison")
    zero = np.zeros_like(counts.false_positives)
    best = RocCounts(counts.thresholds, zero, zero, counts.negatives, counts.positives)
    return curve_rejected(best, claimed_accountant(row, "comparison").curve(), level)


def judge(comparisons: list[dict[str, Any]], alpha: float) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The verdict and every comparison's evaluation, Bonferroni-corrected over all of them."""
    if not isinstance(alpha, int | float) or isinstance(alpha, bool) or not 0 < alpha < 1:
        raise BadInputError(f"must be in (0, 1), got {alpha!r}", "alpha")
    if not isinstance(comparisons, list):
        raise BadInputError("must be a list", "results.comparisons")
    m = max(len(comparisons), 1)
    judged = []
    for i, row in enumerate(comparisons):
        if not isinstance(row, dict) or not isinstance(row.get("id"), str):
            raise BadInputError("each comparison needs an id", f"results.comparisons[{i}]")
        judged.append({"id": row["id"], "kind": row.get("kind"),
                       **judge_comparison(row, alpha / m, f"results.comparisons[{i}]")})
    violations = [j for j in judged if j["violated"]]
    worst = max(judged, key=lambda j: j["margin"] if math.isfinite(j["margin"]) else -math.inf, default=None)
    if violations:
        worst = max(violations, key=lambda j: j["margin"])
        if worst["kind"] == "one_run":
            explanation = (f"{worst['id']}: {worst['observed']:.4g} of the guesses were correct, more than the "
                           f"{worst['theoretical']:.4g} the claimed trade-off curve allows at this level, so the "
                           "mechanism leaks more than it claims.")
        else:
            unit = "success rate" if worst["kind"] == "rate" else "ε"
            explanation = (f"{worst['id']}: the {unit} lower confidence bound {worst['observed']:.4g} exceeds the "
                           f"accounted limit {worst['theoretical']:.4g}, so the mechanism leaks more than it claims.")
    elif worst is not None:
        explanation = (f"No attack's lower confidence bound exceeds its theoretical limit; the closest is "
                       f"{worst['id']} ({worst['observed']:.4g} against {worst['theoretical']:.4g}).")
    else:
        explanation = "No comparisons were made."
    verdict = {
        "status": "VIOLATION" if violations else "PASS",
        "worst_margin": None if worst is None or not math.isfinite(worst["margin"]) else worst["margin"],
        "worst_comparison": None if worst is None else worst["id"],
        "explanation": explanation, "alpha": alpha, "n_comparisons": len(comparisons),
        "violations": [j["id"] for j in violations],
    }
    return verdict, judged


def junit_xml(verdict: dict[str, Any], judged: list[dict[str, Any]]) -> str:
    """JUnit XML with one test case per comparison, failed when violated."""
    cases = []
    for j in judged:
        body = ""
        if j["violated"]:
            message = f"observed {j['observed']:.6g} > limit {j['theoretical']:.6g}"
            body = f"<failure message={quoteattr(message)}/>"
        cases.append(f'  <testcase classname="fdp-audit" name={quoteattr(j["id"])}>{body}</testcase>')
    failures = sum(j["violated"] for j in judged)
    return (f'<?xml version="1.0" encoding="UTF-8"?>\n<testsuite name="fdp-audit" tests="{len(judged)}" '
            f'failures="{failures}">\n' + "\n".join(cases) + "\n</testsuite>\n")
