"""A one-run audit's verdict: the guesses of each threat model tested against the claimed trade-off curve, and the
empirical ε beside it (:mod:`fdp_audit.audit.one_run.analysis` states the mathematics).

Every (threat model, guess count) pair of the fixed grid is one comparison; the level α is Bonferroni-split over
all of them, so the verdict's false-alarm probability on a correct mechanism is at most α whatever the grid
point that rejects. VIOLATION: some comparison rejects the claimed f (the f-DP test, with the curve of the
accountant in the relation the game needs). Beside it, at the same per-comparison level:

* the Steinke et al. ε (family-free: it still assumes (ε, δ)-DP under the game's relation; k = 2 only),
* the largest μ-GDP claim rejected, as ε(δ),
* the largest claim of the claimed mechanism's own family (the same subsampled Gaussian mechanism with a smaller
  noise multiplier) rejected, as ε(δ) — computed at the grid point whose μ-GDP bound is largest; every grid
  point's bound holds simultaneously with probability >= 1 - α, by the union bound, so reading off one of them
  is still a valid lower bound.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from fdp_audit.accounting.events import SubsampledGaussianEvent
from fdp_audit.accounting.mechanism import MechanismAccountant, MechanismSpec, accountant_for
from fdp_audit.audit.one_run.analysis import (
    Family,
    InversePower,
    curve_inverse_power,
    family_epsilon,
    fdp_rejects,
    gdp_family,
    steinke_epsilon,
)
from fdp_audit.audit.one_run.guesser import Guesses, score_guesses
from fdp_audit.mechanisms import MECHANISMS

MIN_FAMILY_NOISE = 0.25  # the family search stops at z = 0.25 (PLDs of smaller z are slow and ε there is huge)


@dataclass(frozen=True)
class ClaimedCurve:
    """The claimed trade-off curve a one-run audit tests: its f̄⁻¹, ε at δ, and the family the empirical ε is read
    in."""

    description: str
    inverse_power: InversePower
    epsilon: float
    delta: float
    family: Family | None = None


def _mechanism_accountant(name: str, noise_multiplier: float, sample_rate: float, steps: int,
                          relation: str) -> MechanismAccountant:
    event = SubsampledGaussianEvent.claimed(noise_multiplier, sample_rate, steps)
    return accountant_for(MechanismSpec(name, event, relation))


def _inverse_at(name: str, sample_rate: float, steps: int, relation: str, inverse_z: float) -> InversePower:
    if inverse_z == 0.0:  # infinite noise: perfect privacy, f̄(α) = α
        return lambda y: y
    return curve_inverse_power(_mechanism_accountant(name, 1.0 / inverse_z, sample_rate, steps, relation).curve())


def mechanism_claim(name: str, noise_multiplier: float, sample_rate: float, steps: int, delta: float,
                    relation: str) -> ClaimedCurve:
    """The claim of a subsampled Gaussian mechanism (PLD accountant, symmetric curve) and its family, indexed by
    ``1/z`` so that larger means weaker."""
    accountant = _mechanism_accountant(name, noise_multiplier, sample_rate, steps, relation)
    family = Family(f"{name} with the same p and T and a smaller noise multiplier ({relation})",
                    lambda t: _inverse_at(name, sample_rate, steps, relation, t),
                    lambda t: float(_mechanism_accountant(name, 1.0 / t, sample_rate, steps, relation).epsilon(delta)),
                    start=1.0 / noise_multiplier, limit=MIN_FAMILY_NOISE ** -1)
    return ClaimedCurve(f"{name} z={noise_multiplier:.4g} p={sample_rate:g} T={steps} ({relation})",
                 curve_inverse_power(accountant.curve()), float(accountant.epsilon(delta)), delta, family)


def judge_scores(scores_by_threat: Mapping[str, np.ndarray], secrets: np.ndarray, claim: ClaimedCurve, alpha: float,
                 family_search: bool = True) -> dict[str, Any]:
    """The one-run section of results.json from the auditor's candidate scores: the entry point of every one-run
    audit (gradient canaries of the built-in engine or of the user's loop, record canaries, generative canaries).

    Args:
        scores_by_threat: per threat model, ``[M, k]`` scores of each canary's k candidate secrets (larger means
            more likely; a function of the release only, never of the secrets).
        secrets: ``[M]`` the true candidate index of each canary.
        claim: what is audited (:func:`mechanism_claim`).
        alpha: the level of the verdict (its false-alarm probability on a mechanism that keeps the claim).
        family_search: also compute the empirical ε in the claimed mechanism's family (PLD searches: seconds).

    Returns:
        The section: ``status`` (PASS or VIOLATION), ``explanation``, the rows of comparisons, the ε lower bounds,
        ``canaries`` and ``k``.
    """
    secrets = np.asarray(secrets)
    guesses = {name: score_guesses(np.asarray(scores, dtype=float), secrets)
               for name, scores in scores_by_threat.items()}
    section = judge_guesses(guesses, claim, alpha, family_search)
    shapes = {np.shape(scores) for scores in scores_by_threat.values()}
    (m, k), = shapes
    section.update({"canaries": int(m), "k": int(k)})
    return section


def judge_guesses(guesses_by_threat: dict[str, Guesses], claim: ClaimedCurve, alpha: float,
                  family_search: bool = True) -> dict[str, Any]:
    """The one-run section of results.json: per threat model and guess count the counts, whether the claim is
    rejected, and the ε lower bounds; the verdict and the headline numbers."""
    comparisons = sum(len(g.counts) for g in guesses_by_threat.values())
    level = alpha / max(comparisons, 1)
    rows, best = [], None
    for threat, guesses in guesses_by_threat.items():
        for count, correct in zip(guesses.counts, guesses.correct):
            row = {"threat_model": threat, "guesses": count, "correct": correct,
                   "abstentions": guesses.m - count,
                   "rejects_claim": fdp_rejects(claim.inverse_power, guesses.m, count, correct, guesses.k, level),
                   "epsilon_steinke": (steinke_epsilon(guesses.m, count, correct, claim.delta, level)
                                       if guesses.k == 2 else None),
                   "epsilon_gdp": family_epsilon(gdp_family(claim.delta), guesses.m, count, correct, guesses.k,
                                                 level)}
            rows.append(row)
            if best is None or (row["epsilon_gdp"], row["correct"] / count) > (
                    best[0]["epsilon_gdp"], best[0]["correct"] / best[0]["guesses"]):
                best = (row, guesses)
    empirical = None
    if best is not None and claim.family is not None and family_search:
        row, guesses = best
        empirical = family_epsilon(claim.family, guesses.m, row["guesses"], row["correct"], guesses.k, level, 1e-2)
    violated = [r for r in rows if r["rejects_claim"]]
    status = "VIOLATION" if violated else "PASS"
    headline = best[0] if best is not None else {}
    steinke = max((r["epsilon_steinke"] or 0.0 for r in rows), default=0.0)
    if violated:
        worst = violated[0]
        explanation = (f"{worst['correct']} of {worst['guesses']} guesses ({worst['threat_model']}) reject the claimed "
                       f"f of {claim.description} at level {level:.3g}")
    else:
        explanation = f"no guess count rejects the claimed f of {claim.description} (level {level:.3g} each)"
    return {
        "status": status, "explanation": explanation, "alpha": alpha, "level_per_comparison": level,
        "comparisons": comparisons, "claim": claim.description, "claimed_epsilon": claim.epsilon,
        "delta": claim.delta, "rows": rows,
        "best": {k: headline.get(k) for k in ("threat_model", "guesses", "correct", "abstentions")},
        "epsilon_steinke": steinke, "epsilon_gdp": max((r["epsilon_gdp"] for r in rows), default=0.0),
        "empirical_epsilon": empirical,
        "empirical_epsilon_family": None if claim.family is None else claim.family.name,
        "tightness": (None if empirical is None or not math.isfinite(claim.epsilon) or claim.epsilon <= 0
                      else empirical / claim.epsilon),
    }


def summary_lines(section: dict[str, Any]) -> list[str]:
    """Console lines of a one-run section: the headline guesses and the ε lower bounds beside the claim."""
    best = section["best"]
    empirical = section["empirical_epsilon"]
    return [
        f"one-run audit: {section.get('canaries', '?')} canaries, best of {section['comparisons']} comparisons: "
        f"{best['correct']} of {best['guesses']} guesses correct ({best['threat_model']}, {best['abstentions']} "
        f"abstentions)",
        f"claimed ε = {section['claimed_epsilon']:.3f} at δ = {section['delta']:g}; empirical ε (confidence "
        f"{1 - section['alpha']:.2f}): family {'n/a' if empirical is None else f'{empirical:.3f}'}, "
        f"μ-GDP {section['epsilon_gdp']:.3f}, Steinke et al. {section['epsilon_steinke']:.3f}",
    ]


def section_comparisons(section: dict[str, Any], parameters: dict[str, Any]) -> list[dict[str, Any]]:
    """The gate's comparisons of a one-run section (kind ``one_run``): one per (threat model, guess count), with
    the claim's parameters, so that ``fdp-audit gate`` can judge them again at another α."""
    return [{"id": f"one-run/{row['threat_model']}/{row['guesses']}", "kind": "one_run",
             "canaries": section["canaries"], "k": section["k"], "guesses": row["guesses"], "correct": row["correct"],
             **parameters} for row in section["rows"]]


def _claim_of(row: dict[str, Any], where: str) -> ClaimedCurve:
    from fdp_audit.errors import BadInputError

    name, relation = row.get("mechanism"), row.get("relation")
    z, p, steps, delta = (row.get(key) for key in ("noise_multiplier", "sample_rate", "steps", "delta"))
    numbers_ok = all(isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) for v in (z, p, delta))
    gaussian = (isinstance(name, str) and name in MECHANISMS
                and issubclass(MECHANISMS[name].releases, SubsampledGaussianEvent))
    if (not gaussian or relation not in ("add-remove", "replace") or not numbers_ok
            or not isinstance(steps, int) or isinstance(steps, bool) or not (z > 0 and 0 < p <= 1 and 0 < delta < 1
                                                                             and 1 <= steps <= 10**7)):
        raise BadInputError("the claim (mechanism, noise_multiplier, sample_rate, steps, delta, relation) is "
                            "missing or out of range", where)
    return mechanism_claim(name, float(z), float(p), steps, float(delta), relation)


def judge_one_run(row: dict[str, Any], level: float, where: str) -> dict[str, Any]:
    """The gate's evaluation of one ``one_run`` comparison at per-comparison ``level``: violated when the f-DP
    test rejects the claimed curve; ``observed`` is the precision of the guesses and ``theoretical`` the
    largest precision the claim allows at this level (the count below the smallest rejected one)."""
    from fdp_audit.errors import BadInputError

    values = {key: row.get(key) for key in ("canaries", "k", "guesses", "correct")}
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in values.values()) or not (
            2 <= values["k"] <= 64 and 0 <= values["correct"] <= values["guesses"] <= values["canaries"]
            and 1 <= values["guesses"] and values["canaries"] <= 10**6):
        raise BadInputError("canaries, k, guesses and correct must be integers with 0 <= correct <= guesses <= "
                            "canaries", where)
    claim = _claim_of(row, where)
    m, k, c, w = values["canaries"], values["k"], values["guesses"], values["correct"]
    low, high = 0, c + 1  # smallest rejected count in [low, high]; c + 1 stands for "none"
    while low < high:
        middle = (low + high) // 2
        if fdp_rejects(claim.inverse_power, m, c, middle, k, level):
            high = middle
        else:
            low = middle + 1
    allowed = (low - 1) / c
    return {"observed": w / c, "theoretical": allowed, "margin": w / c - allowed, "violated": w >= low,
            "precision": w / c, "guesses": c, "correct": w}
