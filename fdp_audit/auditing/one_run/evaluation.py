"""A one-run audit's verdict: the guesses of each threat model tested against the claimed trade-off curve, and the
empirical ε beside it (:mod:`fdp_audit.auditing.one_run.analysis` states the mathematics, docs/one_run.md the
measurements).

Each threat model is one comparison: its guesses are ranked by confidence, and the right ones among the ``c``
most confident are tested against the claimed f with the f-DP one-run analysis, where ``c`` is fixed by the claim
before looking (:mod:`fdp_audit.auditing.one_run.design`), so no level is spent on choosing it. The level α is
Bonferroni-split over the threat models only. VIOLATION: some comparison rejects the claimed f (the curve of the
accountant in the relation the game needs). Beside it, at the same per-comparison level and count:

* the Steinke et al. ε (family-free: it still assumes (ε, δ)-DP under the game's relation; k = 2 only),
* the largest μ-GDP claim rejected, as ε(δ),
* the largest claim of the claimed mechanism's own family (the same subsampled Gaussian mechanism with a smaller
  noise multiplier) rejected, as ε(δ), the headline. Every comparison's bound holds simultaneously with
  probability >= 1 - α (union bound), so the largest of them is still a valid lower bound.

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
            (gradient canaries: each on its own coordinate, sampled and noised on its own). Only then are the
            order-statistics fields computed, a bound valid for independent canaries alone; input canaries share
            one model, so theirs are None.

    Returns:
        The section: ``status`` (PASS or VIOLATION), ``explanation``, one row per threat model (guesses, right
        ones, the smallest rejecting count, ε lower bounds), the headline ε lower bounds, ``canaries`` and ``k``.

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
        alpha: the level of the verdict (Bonferroni over the threat models).
        family_search: also compute the empirical ε in the claimed mechanism's family.
        independent_canaries: whether the order-statistics fields apply (:func:`judge_scores`).

    Returns:
        The section, as :func:`judge_scores` returns it.
    """
    (m, k), = {(g.m, g.k) for g in ranked_by_threat.values()}
    level = alpha / max(len(ranked_by_threat), 1)
    count = designed_guess_count(claim.spec, claim.family, m, k, level)
    critical = critical_count(claim.inverse_power, m, count, k, level)
    ordered = independent_canaries and k == 2 and claim.family.error_profile is not None
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
    violated = [r for r in rows if r["rejects_claim"]]
    if violated:
        worst = violated[0]
        explanation = (f"{worst['correct']} of {worst['guesses']} guesses ({worst['threat_model']}) reject the claimed "
                       f"f of {claim.description} at level {level:.3g} ({worst['rejecting_correct']} reject it)")
    else:
        explanation = (f"no threat model's {count} most confident guesses reject the claimed f of "
                       f"{claim.description} (level {level:.3g} each; {critical} right guesses would reject it)")
    empirical = best["epsilon_family"] if best is not None else None
    ordered_epsilon = (max((r["epsilon_order_statistics"] or 0.0 for r in rows), default=0.0)
                       if ordered and family_search else None)
    return {
        "status": "VIOLATION" if violated else "PASS", "explanation": explanation, "alpha": alpha,
        "level_per_comparison": level, "comparisons": len(rows), "claim": claim.description,
        "claimed_epsilon": claim.epsilon, "delta": claim.delta, "canaries": m, "k": k, "guesses": count,
        "rejecting_correct": critical, "rows": rows,
        "best": {key: None if best is None else best[key]
                 for key in ("threat_model", "guesses", "correct", "abstentions")},
        "epsilon_steinke": max((r["epsilon_steinke"] or 0.0 for r in rows), default=0.0),
        "epsilon_gdp": max((r["epsilon_gdp"] for r in rows), default=0.0),
        "empirical_epsilon": empirical, "empirical_epsilon_family": claim.family.name,
        "tightness": _ratio(empirical, claim.epsilon),
        "epsilon_order_statistics": ordered_epsilon,
        "tightness_order_statistics": _ratio(ordered_epsilon, claim.epsilon),
    }


def _ratio(empirical: float | None, claimed: float) -> float | None:
    return None if empirical is None or not math.isfinite(claimed) or claimed <= 0 else empirical / claimed


def _order_statistics_row(ranked: RankedGuesses, claim: OneRunCurve, released: int | None, level: float,
                          family_search: bool) -> dict[str, Any]:
    """A threat model's order-statistics fields (:mod:`fdp_audit.auditing.one_run.order_statistics`): the wrong
    guesses among the ``released`` most confident (a count fixed by the claim), the most wrong ones that would
    reject the claim, and the ε(δ) of the weakest claim of the family they reject — valid only if the canaries'
    channels are independent (all None for k > 2; the ε None without the family search)."""
    family = claim.family
    if released is None or family.error_profile is None:
        return {"released": None, "wrong": None, "rejecting_wrong": None, "epsilon_order_statistics": None}
    wrong = released - ranked.correct_among(released)
    epsilon = None
    if family_search:
        parameter = family_parameter(family.error_profile, family.start, family.limit, ranked.m, released, wrong,
                                     level, FAMILY_TOLERANCE)
        epsilon = family.epsilon(parameter) if parameter > 0 else 0.0
    return {"released": released, "wrong": wrong,
            "rejecting_wrong": critical_errors(family.error_profile(family.start), ranked.m, released, level),
            "epsilon_order_statistics": epsilon}


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
    """Console lines of a one-run section: the headline guesses and the ε lower bounds beside the claim.

    Args:
        section: a one-run section (:func:`judge_scores`).

    Returns:
        Two lines.
    """
    from fdp_audit.auditing.labels import threat_title

    best = section["best"]
    empirical = section["empirical_epsilon"]
    return [
        f"one-run audit: {section.get('canaries', '?')} canaries, best of {section['comparisons']} comparisons: "
        f"{best['correct']} of {best['guesses']} guesses correct (on the {threat_title(best['threat_model'])}, "
        f"{best['abstentions']} abstentions)",
        f"claimed ε = {section['claimed_epsilon']:.3f} at δ = {section['delta']:g}; empirical ε (confidence "
        f"{1 - section['alpha']:.2f}): family {'n/a' if empirical is None else f'{empirical:.3f}'}, "
        f"μ-GDP {section['epsilon_gdp']:.3f}, Steinke et al. {section['epsilon_steinke']:.3f}",
    ] + ([] if section.get("epsilon_order_statistics") is None else [
        f"order statistics of the {section['rows'][0]['released']} most confident guesses, assuming independent "
        f"canaries (not the verdict's test): family ε {section['epsilon_order_statistics']:.3f}"])


def section_comparisons(section: dict[str, Any], parameters: dict[str, Any]) -> list[dict[str, Any]]:
    """The gate's comparisons of a one-run section (kind ``one_run``): one per threat model, with
    the claim's parameters, so that ``fdp-audit gate`` can judge them again at another α.

    Args:
        section: a one-run section (:func:`judge_scores`).
        parameters: the claim's fields the gate reads (``mechanism``, ``noise_multiplier``, ``sample_rate``,
            ``steps``, ``delta``, ``relation``).

    Returns:
        The comparisons, one per threat model.
    """
    return [{"id": f"one-run/{row['threat_model']}/{row['guesses']}", "kind": "one_run",
             "canaries": section["canaries"], "k": section["k"], "guesses": row["guesses"], "correct": row["correct"],
             **parameters} for row in section["rows"]]


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
    """The gate's evaluation of one ``one_run`` comparison at per-comparison ``level``: violated when the f-DP
    test rejects the claimed curve; ``observed`` is the precision of the guesses and ``theoretical`` the
    largest precision the claim allows at this level (the count below the smallest rejected one).

    Args:
        row: a ``one_run`` comparison of a results file (untrusted).
        level: the per-comparison level.
        where: how an error names the row.
        claim: the curve of the claim the results state under the comparison's relation
            (:meth:`fdp_audit.claim.Claim.one_run_curve`); None: the one the comparison states.

    Returns:
        ``observed``, ``theoretical``, ``margin``, ``violated``, ``precision``, ``guesses`` and ``correct``.

    Raises:
        BadInputError: a count or the claim is missing or out of range.
    """
    from fdp_audit.errors import BadInputError

    values = {key: row.get(key) for key in ("canaries", "k", "guesses", "correct")}
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in values.values()) or not (
            2 <= values["k"] <= 64 and 0 <= values["correct"] <= values["guesses"] <= values["canaries"]
            and 1 <= values["guesses"] and values["canaries"] <= 10**6):
        raise BadInputError("canaries, k, guesses and correct must be integers with 0 <= correct <= guesses <= "
                            "canaries", where)
    claim = claim or _claim_of(row, where)
    m, k, c, w = values["canaries"], values["k"], values["guesses"], values["correct"]
    low = critical_count(claim.inverse_power, m, c, k, level)
    allowed = (low - 1) / c
    return {"observed": w / c, "theoretical": allowed, "margin": w / c - allowed, "violated": w >= low,
            "precision": w / c, "guesses": c, "correct": w}
