"""The CI gate (SPEC 2.6, 5.1): one function judges every comparison of an audit, at the audit's end and
when ``fdp-audit gate`` re-judges saved results at another α.

A comparison is *violated* when the empirical evidence, at confidence 1 − α/m (Bonferroni over the m
comparisons), exceeds what the accounted mechanism allows:

* ``rate``: the one-sided Clopper–Pearson lower bound of an attack's success rate exceeds the Theorem 4
  bound ``1 − f(Ball)``;
* ``epsilon``: the distinguishing game's ε lower bound exceeds the claimed ε at the same δ;
* ``one_run``: a one-run audit's correct guesses reject the claimed trade-off curve
  (:func:`fdp_audit.audit.one_run.evaluation.judge_one_run`).
"""

from __future__ import annotations

import math
from typing import Any
from xml.sax.saxutils import quoteattr

import numpy as np

from fdp_audit.audit.stats import RocCounts, clopper_pearson, epsilon_lower_bound, lower_confidence_bound, tightness
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
        negatives, positives = _int(row, "negatives", where), _int(row, "positives", where)
        thresholds = row.get("thresholds")
        fp, fn = row.get("false_positives"), row.get("false_negatives")
        if not (isinstance(thresholds, list) and isinstance(fp, list) and isinstance(fn, list)
                and len(thresholds) == len(fp) == len(fn)):
            raise BadInputError("thresholds and error counts must be lists of equal length", where)
        if any(not isinstance(t, int | float) or isinstance(t, bool) for t in thresholds):
            raise BadInputError("thresholds must be numbers", f"{where}.thresholds")
        if any(not isinstance(c, int) or c < 0 or c > negatives for c in fp) or any(
                not isinstance(c, int) or c < 0 or c > positives for c in fn):
            raise BadInputError("error counts out of range", where)
        delta = _number(row, "delta", where, 0, 1)
        claimed = row.get("epsilon_claimed")
        counts = RocCounts(np.asarray(thresholds, float), np.asarray(fp), np.asarray(fn), negatives, positives)
        eps_lb, points = epsilon_lower_bound(counts, delta, level)
        limit = math.inf if claimed is None else _number(row, "epsilon_claimed", where, 0)
        return {"observed": eps_lb, "theoretical": limit, "margin": eps_lb - limit, "violated": eps_lb > limit,
                "epsilon_lower_bound": eps_lb, "points": points,
                "epsilon_ratio": None if not limit or math.isinf(limit) else eps_lb / limit}
    if kind == "one_run":
        from fdp_audit.audit.one_run.evaluation import judge_one_run

        return judge_one_run(row, level, where)
    raise BadInputError(f"unknown comparison kind {kind!r}", f"{where}.kind")


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
