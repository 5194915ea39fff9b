"""A one-run audit's verdict: the guesses of each threat model tested against the claimed trade-off curve, and the
empirical ε beside it (:mod:`fdp_audit.auditing.one_run.analysis` states the mathematics, docs/one_run.md the
measurements).

Two tests, each fixed by the claim before anything is seen, judge every threat model's ranked guesses:

* the **count test** (:mod:`fdp_audit.auditing.one_run.analysis`): the right guesses among the ``c`` most
  confident (``c`` from :mod:`fdp_audit.auditing.one_run.design`) against the claimed f with the f-DP one-run
  analysis. Its null is *any mechanism meeting the claimed curve* for every canary, however it correlates them;
* the **conformance test** (:mod:`fdp_audit.auditing.one_run.order_statistics`), for gradient canaries with k = 2:
  the wrong guesses among the ``r`` most confident against the order-statistics tail of the claimed curve. Its
  null is that *the training behaves as the claimed DP-SGD (canaries independent, each within the claimed curve)*:
  a Poisson-subsampled Gaussian mechanism with independent per-coordinate noise releases each gradient canary's
  coordinate on its own (its fixed clipped gradient, its own Bernoulli(p) draws, its own noise), so the canaries'
  channels are independent and each is the one-record composed mechanism the claimed curve bounds. The guesser
  may read anything of the release (the null coordinates' spread, a rate and step fitted over all canaries): the
  tail holds for every function of the release (:mod:`fdp_audit.auditing.one_run.order_statistics`). Input
  canaries share one model, so they get the count test alone.

How they combine: VIOLATION when either test rejects, each at level α/(2 × threat models) (Bonferroni over the
threat models and the two tests). Under the claimed mechanism both nulls hold, so the false-alarm probability of
the verdict is at most α (union bound); a count-test rejection alone says more — the claimed curve itself is
broken, whatever the mechanism — and the section says which test rejected. Splitting α rather than letting
the conformance test alone decide keeps a curve-breaking but conformance-passing release (no such one is known)
a VIOLATION, at the price of the conformance test running at α/2 (docs/one_run.md measures what that costs).
With the count test alone, α is Bonferroni-split over the threat models only. Beside the verdict, at the same
per-comparison level and counts:

* the Steinke et al. ε (family-free: it still assumes (ε, δ)-DP under the game's relation; k = 2 only),
* the largest μ-GDP claim rejected, as ε(δ),
* the largest claim of the claimed mechanism's own family (the same subsampled Gaussian mechanism with a smaller
  noise multiplier) rejected by each test, as ε(δ); the verdict's test's is the headline (``tightness_verdict``).
  Every comparison's bound holds simultaneously with probability >= 1 - α (union bound), so the largest of them
  is still a valid lower bound (the conformance test's under its null).

The family's members are tested on a coarser loss grid (:data:`fdp_audit.claim.FAMILY_DISCRETIZATION`) than the claim: a
coarser pessimistic PLD is still a dominating pair, so it states a weaker claim than the member's exact curve,
and rejecting it rejects the member. That grid's ε(δ) overstates the member's (1.98667 against 1.98650 at
z = 0.971, p = 0.017, T = 300), so the empirical ε reported is the rejected member's ε(δ) on the claim's own,
finer grid — the grid the claimed ε is read on — never more than what was rejected.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import numpy as np

from fdp_audit.accounting.events import Relation, SubsampledGaussianEvent, relation_named
from fdp_audit.auditing.one_run.analysis import (
    Family,
    critical_count,
    family_epsilon,
    gdp_family,
    steinke_epsilon,
)
from fdp_audit.auditing.one_run.design import designed_guess_count
from fdp_audit.auditing.one_run.guesser import RankedGuesses, candidate_pattern, rank_guesses, threat_scores
from fdp_audit.auditing.one_run.order_statistics import critical_errors, designed_release_count, family_parameter
from fdp_audit.auditing.one_run.simulation import simulate_release
from fdp_audit.mechanisms import MECHANISMS

if TYPE_CHECKING:
    from fdp_audit.claim import OneRunCurve

FAMILY_TOLERANCE = 1e-2  # relative, on the family parameter 1/z
NULLS = {"conformance": "the training behaves as the claimed DP-SGD (canaries independent, each within the claimed "
                        "curve)",
         "count": "valid for any mechanism meeting the claimed curve"}
COMBINATION = ("VIOLATION when either test rejects, each at α/(2 × threat models): at most α false alarms under the "
               "claimed mechanism (union bound)")
COUNT_ONLY = "VIOLATION when the count test rejects, at α/(threat models)"


@lru_cache(maxsize=64)
def _release_count(family: Family, m: int, level: float) -> int:
    assert family.error_profile is not None
    return designed_release_count(family.error_profile, family.start, m, level)


def judge_scores(scores_by_threat: Mapping[str, np.ndarray], secrets: np.ndarray, claim: OneRunCurve, alpha: float,
                 family_search: bool = True, independent_canaries: bool = True) -> dict[str, Any]:
    """The one-run section of results.json from the auditor's candidate scores: the entry point of every one-run
    audit (gradient canaries of the built-in engine or of the user's loop, record canaries, generative canaries,
    simulations).

    Args:
        scores_by_threat: per threat model, ``[M, k]`` scores of each canary's k candidate secrets (larger means
            more likely; a function of the release only, never of the secrets).
        secrets: ``[M]`` the true candidate index of each canary.
        claim: what is audited (:meth:`fdp_audit.claim.Claim.one_run_curve`).
        alpha: the level of the verdict (its false-alarm probability on a mechanism that keeps the claim).
        family_search: also compute the empirical ε in the claimed mechanism's family (PLD searches: seconds).
        independent_canaries: whether the canaries' channels are independent under the claimed mechanism
            (gradient canaries: each on its own coordinate, sampled and noised on its own). Only then does the
            conformance test (order statistics) judge beside the count test (module doc); input canaries share
            one model, so their conformance fields are None and the count test alone is the verdict.

    Returns:
        The section: ``status`` (PASS or VIOLATION), ``explanation``, ``tests`` (each test's null in words and
        whether it rejects), ``combination`` (how they make the verdict), ``verdict_test``, one row per threat
        model (each test's counts, the counts that would reject, ``rejects_conformance`` and ``rejects_claim``,
        ε lower bounds), the headline ε lower bounds (``tightness_verdict``: the verdict's test's family ε over
        the claimed ε), ``canaries`` and ``k``.

    Raises:
        ValueError: the threat models' scores are not all ``[M, k]`` arrays of one shape with M = ``len(secrets)``.
    """
    secrets = np.asarray(secrets)
    shapes = {np.shape(scores) for scores in scores_by_threat.values()}
    if len(shapes) != 1 or len(next(iter(shapes))) != 2 or next(iter(shapes))[0] != secrets.shape[0]:
        raise ValueError(f"every threat model needs [M, k] scores for the {secrets.shape[0]} secrets, got {shapes}")
    ranked = {name: rank_guesses(np.asarray(scores, dtype=float), secrets) for name, scores in scores_by_threat.items()}
    return judge_ranked(ranked, claim, alpha, family_search, independent_canaries)


def judge_ranked(ranked_by_threat: Mapping[str, RankedGuesses], claim: OneRunCurve, alpha: float,
                 family_search: bool = True, independent_canaries: bool = True) -> dict[str, Any]:
    """:func:`judge_scores` from guesses already ranked (one :class:`RankedGuesses` per threat model).

    Args:
        ranked_by_threat: the ranked guesses per threat model, all of the same m and k.
        claim: the claimed trade-off curve and its family.
        alpha: the level of the verdict (Bonferroni over the threat models and the tests).
        family_search: also compute the empirical ε in the claimed mechanism's family.
        independent_canaries: whether the order-statistics fields apply (:func:`judge_scores`).

    Returns:
        The section, as :func:`judge_scores` returns it.
    """
    (m, k), = {(g.m, g.k) for g in ranked_by_threat.values()}
    ordered = independent_canaries and k == 2 and claim.family.error_profile is not None
    level = alpha / ((2 if ordered else 1) * max(len(ranked_by_threat), 1))
    count = designed_guess_count(claim.spec, claim.family, m, k, level)
    critical = critical_count(claim.inverse_power, m, count, k, level)
    released = _release_count(claim.family, m, level) if ordered else None
    rows = []
    for threat, ranked in ranked_by_threat.items():
        correct = ranked.correct_among(count)
        rows.append({**_order_statistics_row(ranked, claim, released, level, family_search),
            "threat_model": threat, "guesses": count, "correct": correct, "abstentions": m - count,
            "rejecting_correct": critical, "rejects_claim": correct >= critical,
            "epsilon_steinke": steinke_epsilon(m, count, correct, claim.delta, level) if k == 2 else None,
            "epsilon_gdp": family_epsilon(gdp_family(claim.delta), m, count, correct, k, level),
            "epsilon_family": (family_epsilon(claim.family, m, count, correct, k, level, FAMILY_TOLERANCE)
                               if family_search else None)})
    best = max(rows, key=lambda r: (r["epsilon_family"] or 0.0, r["epsilon_gdp"], r["correct"]), default=None)
    explanation = _explanation(rows, claim, level, count, critical, released)
    empirical = best["epsilon_family"] if best is not None else None
    ordered_epsilon = (max((r["epsilon_order_statistics"] or 0.0 for r in rows), default=0.0)
                       if ordered and family_search else None)
    violated = any(r["rejects_claim"] or r["rejects_conformance"] for r in rows)
    return {
        "status": "VIOLATION" if violated else "PASS", "explanation": explanation, "alpha": alpha,
        "level_per_comparison": level, "comparisons": len(rows) * (2 if ordered else 1),
        "claim": claim.description, "claimed_epsilon": claim.epsilon, "delta": claim.delta, "canaries": m, "k": k,
        "tests": [{"test": test, "null": NULLS[test],
                   "rejects": any(r[key] for r in rows)} for test, key in (
                       (("conformance", "rejects_conformance"),) if ordered else ()) + (("count", "rejects_claim"),)],
        "combination": COMBINATION if ordered else COUNT_ONLY,
        "guesses": count, "rejecting_correct": critical, "rows": rows,
        "best": {key: None if best is None else best[key]
                 for key in ("threat_model", "guesses", "correct", "abstentions")},
        "epsilon_steinke": max((r["epsilon_steinke"] or 0.0 for r in rows), default=0.0),
        "epsilon_gdp": max((r["epsilon_gdp"] for r in rows), default=0.0),
        "empirical_epsilon": empirical, "empirical_epsilon_family": claim.family.name,
        "tightness": _ratio(empirical, claim.epsilon),
        "epsilon_order_statistics": ordered_epsilon,
        "tightness_order_statistics": _ratio(ordered_epsilon, claim.epsilon),
        "verdict_test": "conformance" if ordered else "count",
        "tightness_verdict": _ratio(ordered_epsilon if ordered else empirical, claim.epsilon),
    }


def _explanation(rows: list[dict[str, Any]], claim: OneRunCurve, level: float, count: int, critical: int,
                 released: int | None) -> str:
    """Why the section's status is what it is: the first rejection of each test, or what would have rejected."""
    conformance = [r for r in rows if r["rejects_conformance"]]
    counted = [r for r in rows if r["rejects_claim"]]
    parts = []
    if conformance:
        worst = conformance[0]
        parts.append(f"conformance test: {worst['wrong']} wrong of the {worst['released']} most confident guesses "
                     f"({worst['threat_model']}) reject the null that {NULLS['conformance']} at level {level:.3g} "
                     f"({worst['rejecting_wrong']} or fewer wrong reject it)")
    if counted:
        worst = counted[0]
        parts.append(f"count test ({NULLS['count']}): {worst['correct']} of {worst['guesses']} guesses "
                     f"({worst['threat_model']}) reject the claimed f of {claim.description} at level {level:.3g} "
                     f"({worst['rejecting_correct']} reject it)")
    if parts:
        return "; ".join(parts)
    shown = (f"no threat model's {released} most confident guesses reject the null that {NULLS['conformance']} "
             f"({rows[0]['rejecting_wrong']} or fewer wrong would); " if released is not None and rows else "")
    return (shown + f"no threat model's {count} most confident guesses reject the claimed f of {claim.description} "
            f"by the count test ({NULLS['count']}; level {level:.3g} each; {critical} right guesses would reject it)")


def _ratio(empirical: float | None, claimed: float) -> float | None:
    return None if empirical is None or not math.isfinite(claimed) or claimed <= 0 else empirical / claimed


def _order_statistics_row(ranked: RankedGuesses, claim: OneRunCurve, released: int | None, level: float,
                          family_search: bool) -> dict[str, Any]:
    """A threat model's conformance-test fields (:mod:`fdp_audit.auditing.one_run.order_statistics`): the wrong
    guesses among the ``released`` most confident (a count fixed by the claim), the most wrong ones that would
    reject the claimed DP-SGD, whether they do, and the ε(δ) of the weakest claim of the family they reject —
    valid only if the canaries' channels are independent (None and False for input canaries and k > 2; the ε None
    without the family search)."""
    family = claim.family
    if released is None or family.error_profile is None:
        return {"released": None, "wrong": None, "rejecting_wrong": None, "rejects_conformance": False,
                "epsilon_order_statistics": None}
    wrong = released - ranked.correct_among(released)
    epsilon = None
    if family_search:
        parameter = family_parameter(family.error_profile, family.start, family.limit, ranked.m, released, wrong,
                                     level, FAMILY_TOLERANCE)
        epsilon = family.epsilon(parameter) if parameter > 0 else 0.0
    rejecting = critical_errors(family.error_profile(family.start), ranked.m, released, level)
    return {"released": released, "wrong": wrong, "rejecting_wrong": rejecting,
            "rejects_conformance": wrong <= rejecting, "epsilon_order_statistics": epsilon}


def simulated_audit(rng: np.random.Generator, m: int, game: str, k: int, noise_multiplier: float,
                    sample_rate: float, steps: int, claim: OneRunCurve, alpha: float, updates: bool = True,
                    family_search: bool = False, gradient: float = 1.0) -> dict[str, Any]:
    """Simulate one training (:func:`~fdp_audit.auditing.one_run.simulation.simulate_release`) and judge it against
    ``claim``: the results section of a real one-run audit of that release.

    Args:
        rng: the generator of the simulated training and secrets.
        m: the number of canaries.
        game: ``"inclusion"`` or ``"value"``.
        k: the number of candidate values.
        noise_multiplier: the simulated training's z.
        sample_rate: its sampling rate p.
        steps: its number of steps T.
        claim: the claimed curve the release is judged against.
        alpha: the level of the verdict.
        updates: release the per-step updates (else the final block only).
        family_search: also compute the empirical ε in the claimed family.
        gradient: each sampled canary's gradient in units of the clip norm.

    Returns:
        The section, as :func:`judge_scores` returns it.
    """
    release, secrets = simulate_release(rng, m, game, k, noise_multiplier, sample_rate, steps, updates, gradient)
    return judge_scores(threat_scores(release, candidate_pattern(game, k)), secrets, claim, alpha, family_search)


def summary_lines(section: dict[str, Any]) -> list[str]:
    """Console lines of a one-run section: each test's null and result, the headline guesses and the ε lower bounds
    beside the claim.

    Args:
        section: a one-run section (:func:`judge_scores`).

    Returns:
        The lines (three or four).
    """
    from fdp_audit.auditing.labels import threat_title

    best = section["best"]
    empirical = section["empirical_epsilon"]
    rows = section.get("rows") or []
    lines = []
    if section.get("verdict_test") == "conformance":
        ordered = section["epsilon_order_statistics"]
        lines.append(
            f"conformance test (null: {NULLS['conformance']}): "
            f"{'rejects' if any(r['rejects_conformance'] for r in rows) else 'does not reject'}; "
            f"{rows[0]['wrong']} wrong of the {rows[0]['released']} most confident guesses "
            f"({rows[0]['rejecting_wrong']} or fewer reject)"
            + ("" if ordered is None else f", family ε {ordered:.3f}"))
    lines += [
        f"count test ({NULLS['count']}): "
        f"{'rejects' if any(r['rejects_claim'] for r in rows) else 'does not reject'}; "
        f"{section.get('canaries', '?')} canaries, best of {len(rows) or '?'} threat models: {best['correct']} of "
        f"{best['guesses']} guesses correct (on the {threat_title(best['threat_model'])}, {best['abstentions']} "
        "abstentions)",
        f"claimed ε = {section['claimed_epsilon']:.3f} at δ = {section['delta']:g}; empirical ε of the count test "
        f"(confidence {1 - section['alpha']:.2f}): family {'n/a' if empirical is None else f'{empirical:.3f}'}, "
        f"μ-GDP {section['epsilon_gdp']:.3f}, Steinke et al. {section['epsilon_steinke']:.3f}",
        f"verdict: {section.get('combination', COUNT_ONLY)}"]
    return lines


def section_comparisons(section: dict[str, Any], parameters: dict[str, Any]) -> list[dict[str, Any]]:
    """The gate's comparisons of a one-run section (kind ``one_run``): per threat model, the conformance test's
    (``test: conformance``, its ``guesses`` the released count and ``correct`` the right ones among them) when the
    section has one, and the count test's, with the claim's parameters, so that ``fdp-audit gate`` judges both
    again at another α (its Bonferroni over the comparisons is the section's split).

    Args:
        section: a one-run section (:func:`judge_scores`).
        parameters: the claim's fields the gate reads (``mechanism``, ``noise_multiplier``, ``sample_rate``,
            ``steps``, ``delta``, ``relation``).

    Returns:
        The comparisons: conformance then count, per threat model.
    """
    comparisons = []
    for row in section["rows"]:
        if row.get("released") is not None:
            comparisons.append({"id": f"one-run/{row['threat_model']}/conformance/{row['released']}",
                                "kind": "one_run", "test": "conformance", "canaries": section["canaries"],
                                "k": section["k"], "guesses": row["released"],
                                "correct": row["released"] - row["wrong"], **parameters})
        comparisons.append({"id": f"one-run/{row['threat_model']}/{row['guesses']}", "kind": "one_run",
                            "test": "count", "canaries": section["canaries"], "k": section["k"],
                            "guesses": row["guesses"], "correct": row["correct"], **parameters})
    return comparisons


def _claim_of(row: dict[str, Any], where: str) -> OneRunCurve:
    from fdp_audit.claim import Claim
    from fdp_audit.errors import BadInputError

    name = row.get("mechanism")
    try:  # results files written before the relation had one spelling use the older one
        relation: Relation | None = relation_named(row.get("relation"))
    except BadInputError:
        relation = None
    z, p, steps, delta = (row.get(key) for key in ("noise_multiplier", "sample_rate", "steps", "delta"))
    numbers_ok = all(isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) for v in (z, p, delta))
    gaussian = (isinstance(name, str) and name in MECHANISMS
                and issubclass(MECHANISMS[name].releases, SubsampledGaussianEvent))
    if (not gaussian or relation is None or not numbers_ok
            or not isinstance(steps, int) or isinstance(steps, bool) or not (z > 0 and 0 < p <= 1 and 0 < delta < 1
                                                                             and 1 <= steps <= 10**7)):
        raise BadInputError("the claim (mechanism, noise_multiplier, sample_rate, steps, delta, relation) is "
                            "missing or out of range", where)
    return Claim.stated(name, float(z), float(p), steps, float(delta)).one_run_curve(relation)


def judge_one_run(row: dict[str, Any], level: float, where: str, claim: OneRunCurve | None = None) -> dict[str, Any]:
    """The gate's evaluation of one ``one_run`` comparison at per-comparison ``level``: violated when its test
    rejects — the count test (``test: count``, the default of older results) the claimed curve, the conformance
    test (``test: conformance``, k = 2) the claimed DP-SGD with independent canaries; ``observed`` is the precision
    of the guesses and ``theoretical`` the largest precision its test allows at this level.

    Args:
        row: a ``one_run`` comparison of a results file (untrusted).
        level: the per-comparison level.
        where: how an error names the row.
        claim: the curve of the claim the results state under the comparison's relation
            (:meth:`fdp_audit.claim.Claim.one_run_curve`); None: the one the comparison states.

    Returns:
        ``observed``, ``theoretical``, ``margin``, ``violated``, ``precision``, ``guesses``, ``correct`` and
        ``null`` (the test's null in words).

    Raises:
        BadInputError: a count, the test or the claim is missing or out of range.
    """
    from fdp_audit.errors import BadInputError

    values = {key: row.get(key) for key in ("canaries", "k", "guesses", "correct")}
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in values.values()) or not (
            2 <= values["k"] <= 64 and 0 <= values["correct"] <= values["guesses"] <= values["canaries"]
            and 1 <= values["guesses"] and values["canaries"] <= 10**6):
        raise BadInputError("canaries, k, guesses and correct must be integers with 0 <= correct <= guesses <= "
                            "canaries", where)
    test = row.get("test", "count")
    if test not in NULLS or (test == "conformance" and values["k"] != 2):
        raise BadInputError("test must be 'count', or 'conformance' with k = 2", f"{where}.test")
    claim = claim or _claim_of(row, where)
    m, k, c, w = values["canaries"], values["k"], values["guesses"], values["correct"]
    if test == "conformance":
        assert claim.family.error_profile is not None
        wrong = critical_errors(claim.family.error_profile(claim.family.start), m, c, level)
        low = c - wrong if wrong >= 0 else c + 1  # right guesses that reject: at most ``wrong`` wrong ones
    else:
        low = critical_count(claim.inverse_power, m, c, k, level)
    allowed = (low - 1) / c
    return {"observed": w / c, "theoretical": allowed, "margin": w / c - allowed, "violated": w >= low,
            "precision": w / c, "guesses": c, "correct": w, "null": NULLS[test]}
