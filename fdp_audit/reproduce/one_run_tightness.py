"""``one_run_tightness``: how much of the claimed ε a one-run audit certifies (docs/one_run.md, "Analysis").

For DP-SGD on Adult's setting (p = 0.017, T = 300, δ = 1e-5, z calibrated to ε ∈ {2, 4, 8}) and M ∈ {1,000,
10,000} gradient canaries in the inclusion game, at α = 0.05:

* ``ratio_simulated``: the median over :data:`SIMULATED_SEEDS` exact simulated releases of the empirical ε in the
  claimed family of the verdict's test over the claimed ε (the guesser and analysis of a real audit, no training;
  for gradient canaries the verdict's test is the conformance test,
  :mod:`~fdp_audit.auditing.one_run.evaluation`), with each release's in ``simulated``;
* ``ratio_trained``: the median over :data:`TRAININGS` trainings of the built-in engine
  (:func:`~fdp_audit.auditing.one_run.canaries.train_with_canaries`, logistic model on Adult) of the same;
* ``ratio_simulated_count`` and ``ratio_trained_count``: the same medians for the count test (valid for any
  mechanism meeting the claimed curve, judged beside the conformance test);
* ``steinke_simulated`` and ``steinke_trained``: the same medians of the Steinke et al. ε (family-free, at the
  count test's guess count and level) over the claimed ε;
* ``ceiling``: the count ceiling of :mod:`fdp_audit.auditing.one_run.ceiling`: the weakest claim of the family whose
  flagged critical count the Neyman–Pearson guesser's median counts (knowing p and 1/z, over
  :data:`CEILING_RELEASES` releases) reach at the best guess count; the median of :data:`CEILING_SEEDS` such
  ceilings, each seed's in ``ceilings`` — what no test of one count fixed in advance,
  valid for every mechanism satisfying the claim, can beat at the median;
* at M = 1,000, ``ratio_sampling_informed``: the median over :data:`SIMULATED_SEEDS` releases of what a valid
  analysis certifies from guesses told which steps sampled each canary (conditioned on those masks, per stratum
  of inclusion counts; :func:`_sampling_informed_ratio`) — not a ceiling of an audit of the release: it is below
  what the release's own analysis certifies.

The same rows at p = 0.08, T = 2,500, M = 5,000 (the setting of published CIFAR-10 one-run audits; the same model
on Adult), without the ceiling's sampling-informed figure and the null calibration.
Rows with ``loop: "opacus"``: :data:`TRAININGS` trainings of a tutorial-style Opacus loop (``make_private`` on a
``DataLoader``, the same logistic model) run as a user's loop with M gradient canaries
(:func:`~fdp_audit.auditing.one_run.loop.run_user_loop`), each saved as a user's script saves it (weights,
manifest, release); Opacus samples at ``1 / len(loader)``, so the loader has :data:`OPACUS_BATCHES` batches
(p = 1/59 ≈ 0.01695 instead of 0.017, 1/13 ≈ 0.0769 instead of 0.08; z calibrated to ε at that rate) and the loop
stops after T steps. Their ``ratio_simulated`` is the built-in row's.

Calibration on null data, at p = 0.017, T = 300: :data:`NULL_SEEDS` simulated correct mechanisms at each ε
(M = 1,000) and the trainings above at that setting, built-in and Opacus, per M (each a correct mechanism),
judged against its claim — the verdict, and each of its two tests — with the binomial probability that a test
whose false-alarm rate is α would raise that many alarms or more; and known faults (half the noise, no clipping)
rejected in one training each, at the middle ε's z of that setting.
"""

from __future__ import annotations

import math
from pathlib import Path
from statistics import median
from typing import Any

import numpy as np
from scipy import stats

from fdp_audit.accounting.calibration import calibrate_noise_multiplier
from fdp_audit.accounting.events import Relation
from fdp_audit.accounting.mechanism import MechanismSpec, accountant_for
from fdp_audit.auditing.one_run.analysis import gdp_mu_lower_bound
from fdp_audit.auditing.one_run.canaries import audit_with_canaries, train_with_canaries
from fdp_audit.auditing.one_run.ceiling import count_ceiling
from fdp_audit.auditing.one_run.design import candidate_counts
from fdp_audit.auditing.one_run.evaluation import judge_scores, simulated_audit
from fdp_audit.auditing.one_run.guesser import candidate_pattern, rank_guesses, threat_scores
from fdp_audit.auditing.one_run.loop import run_user_loop
from fdp_audit.auditing.one_run.simulation import oracle_correct
from fdp_audit.claim import FAMILY_DISCRETIZATION, Claim
from fdp_audit.config import load_config
from fdp_audit.data.prepare import prepare_data
from fdp_audit.mechanisms import MECHANISMS
from fdp_audit.reproduce import CONFIGS, Summary
from fdp_audit.reproduce.files import write_reproduction
from fdp_audit.training.run import with_mechanism

ALPHA = 0.05
DELTA = 1e-5
EPSILONS = (2.0, 4.0, 8.0)
ADULT = {"sample_rate": 0.017, "steps": 300, "canaries": (1_000, 10_000)}
PUBLISHED = {"sample_rate": 0.08, "steps": 2_500, "canaries": (5_000,)}
SIMULATED_SEEDS = 15
TRAININGS = 3
NULL_SEEDS = 200
CEILING_RELEASES = 50
CEILING_SIMS = 400
CEILING_SEEDS = 3
CEILING_STREAM = 97
INFORMED_STRATA = (6, 8, 10)  # inclusion counts (p·T ≈ 5 at the Adult settings), fixed before any release
CEILING_POINTS = 24
FAULTS = ("dp_sgd_half_noise", "dp_sgd_no_clip")
TESTS = ("conformance", "count")
OPACUS_BATCHES = {0.017: 59, 0.05: 20, 0.08: 13}  # Opacus's Poisson rate is 1 / len(loader): the nearest whole count
OPACUS_LR = 0.5
QUICK = {"epsilons": (None,), "noise_multiplier": 0.7, "adult": {"sample_rate": 0.05, "steps": 40, "canaries": (200,)},
         "published": None, "simulated_seeds": 1, "trainings": 1, "null_seeds": 10, "ceiling_releases": 3,
         "ceiling_sims": 20, "ceiling_seeds": 1, "faults": ("dp_sgd_no_clip",)}


def _claim(epsilon: float | None, rate: float, steps: int, settings: dict[str, Any]):
    """z calibrated to ε (or the quick run's fixed z, which skips the calibration's dozen PLDs) and its claim."""
    z = settings["noise_multiplier"] if epsilon is None else calibrate_noise_multiplier(epsilon, DELTA, rate, steps)
    return z, Claim.stated("dp_sgd", z, rate, steps, DELTA).one_run_curve(Relation.ADD_REMOVE)


def _sampling_informed_ratio(rng: np.random.Generator, claim, z: float, rate: float, steps: int, m: int) -> float:
    """A valid analysis of guesses told which steps sampled each canary. The masks do not depend on the secrets,
    so the test may condition on them; given them, canary i drawn in n steps releases ``N(n s_i, n z²)``, the
    Gaussian mechanism of μ = √n/z exactly. In each stratum of :data:`INFORMED_STRATA` (inclusion counts fixed
    before any release), the likelihood-ratio guesses of its first third by confidence give the largest μ-GDP
    claim rejected at level α/(number of strata) (Bonferroni); that rejects every member of the family with
    ``1/z' <= μ/√n``. The largest family ε so certified over the claimed ε: valid only if the mechanism is the
    claimed family's with those masks."""
    secrets = rng.integers(0, 2, size=m)
    sampled = rng.random((steps, m)) < rate
    observed = sampled * secrets[None, :] + z * rng.standard_normal((steps, m))
    inclusions = sampled.sum(axis=0)
    level = ALPHA / len(INFORMED_STRATA)
    inverse_z = 0.0
    for n in INFORMED_STRATA:
        members = np.flatnonzero(inclusions == n)
        count = members.size // 3
        if count == 0:
            continue
        log_ratio = (observed[:, members] * sampled[:, members]).sum(axis=0) / z ** 2 - n / (2 * z ** 2)
        ranked = rank_guesses(np.stack([np.zeros(members.size), log_ratio], axis=1), secrets[members])
        mu = gdp_mu_lower_bound(members.size, count, ranked.correct_among(count), 2, level)
        inverse_z = max(inverse_z, mu / math.sqrt(n))
    if inverse_z == 0.0:
        return 0.0
    return claim.family.epsilon(min(inverse_z, claim.family.limit)) / claim.epsilon


def _ceiling(rng: np.random.Generator, claim, z: float, rate: float, steps: int, m: int, releases: int,
             sims: int) -> float:
    truth = np.median(oracle_correct(rng, m, "inclusion", 2, z, rate, steps, releases), axis=0)
    parameters = np.geomspace(claim.family.start / 3, claim.family.start, CEILING_POINTS)

    def curve(t: float):
        return accountant_for(MechanismSpec.gaussian("dp_sgd", 1 / t, rate, steps), FAMILY_DISCRETIZATION).curve()

    index, _ = count_ceiling(truth, curve, parameters, m, candidate_counts(m), ALPHA, sims, rng)
    return 0.0 if index < 0 else claim.family.epsilon(float(parameters[index])) / claim.epsilon


def _logistic(n_inputs: int, n_classes: int):
    from torch import nn

    return nn.Linear(n_inputs, n_classes)


_OPACUS_CONSTANTS: dict[str, Any] = {}  # the loop's z, C, batches and steps, as a script's constants: set per claim


def _opacus_loop(module, dataset, seed: int):
    """A training loop as an Opacus tutorial writes it: ``make_private`` on a ``DataLoader`` of ``batches`` batches
    (Poisson sampling at 1/batches), cross-entropy, SGD; stopped after ``steps`` steps."""
    import torch
    import torch.nn.functional as F
    from opacus import PrivacyEngine
    from torch.utils.data import DataLoader

    batches, steps = _OPACUS_CONSTANTS["batches"], _OPACUS_CONSTANTS["steps"]
    loader = DataLoader(dataset, batch_size=math.ceil(len(dataset) / batches),
                        generator=torch.Generator().manual_seed(seed))
    if len(loader) != batches:
        raise RuntimeError(f"{len(dataset)} records do not split into {batches} batches")
    model, optimizer, loader = PrivacyEngine().make_private(
        module=module, optimizer=torch.optim.SGD(module.parameters(), lr=OPACUS_LR), data_loader=loader,
        noise_multiplier=_OPACUS_CONSTANTS["noise_multiplier"], max_grad_norm=_OPACUS_CONSTANTS["clip_norm"],
        noise_generator=torch.Generator().manual_seed(seed + 1))
    taken = 0
    while taken < steps:
        for x, y in loader:
            optimizer.zero_grad()
            F.cross_entropy(model(x), y).backward()
            optimizer.step()
            taken += 1
            if taken == steps:
                break
    return model


def _opacus_trainings(out: Path, base, data, epsilon: float | None, rate: float, steps: int, m: int, seeds: int,
                      settings: dict[str, Any]) -> tuple[float, list[dict[str, Any]]]:
    """``seeds`` trainings of the Opacus loop with m gradient canaries at Opacus's rate nearest ``rate``, each
    judged against its claim (z calibrated to ε at that rate) and its weights, manifest and release written under
    ``out``, as a user's script saves them; the rate and the rows."""
    batches = OPACUS_BATCHES[rate]
    z, claim = _claim(epsilon, 1 / batches, steps, settings)
    _OPACUS_CONSTANTS.update(noise_multiplier=z, clip_norm=base.mechanism.clip_norm, batches=batches, steps=steps)
    config = with_mechanism(base, "dp_sgd").with_overrides(
        {"model.kind": "module", "model.factory": _logistic, "mechanism.training": _opacus_loop,
         "mechanism.target_epsilon": None, "mechanism.noise_multiplier": z, "mechanism.sample_rate": 1 / batches,
         "mechanism.steps": steps, "mechanism.public_pretrain_steps": 0})
    rows = []
    for seed in range(seeds):
        canaries, trained = run_user_loop(config, data, m, seed)
        canaries.save(trained, out / f"opacus-{claim.epsilon:.2f}-{m}-{steps}-{seed}" / "model.safetensors")
        section = judge_scores(threat_scores(canaries.guesser_release(), candidate_pattern("inclusion", 2)),
                               np.asarray(canaries.secrets), claim, ALPHA)
        rows.append({"mechanism": "dp_sgd", "loop": "opacus", "epsilon": round(claim.epsilon, 2), "canaries": m,
                     "sample_rate": 1 / batches, "steps": steps, "seed": seed, "status": section["status"],
                     "steinke": section["epsilon_steinke"] / claim.epsilon, **_test_fields(section),
                     "guesses": section["guesses"],
                     "correct": section["rows"][0]["correct"], "rejecting_correct": section["rejecting_correct"]})
    return 1 / batches, rows


def _trainings(out: Path, base, data, name: str, epsilon: float, z: float, m: int, seeds: int
               ) -> list[dict[str, Any]]:
    """``seeds`` trainings of ``name`` with noise multiplier z (calibrated to ε) and m gradient canaries, each
    audited against its claim."""
    config = with_mechanism(base, "dp_sgd").with_overrides(
        {"mechanism.name": name, "mechanism.faulty": MECHANISMS[name].faulty, "mechanism.target_epsilon": None,
         "mechanism.noise_multiplier": z, "mechanism.public_pretrain_steps": 0})
    rows = []
    rate, steps = config.mechanism.sample_rate, config.mechanism.steps
    for seed in range(seeds):
        trained = train_with_canaries(config, data, m, out / f"{name}-{epsilon:g}-{m}-{steps}-{seed}" / "model.pt",
                                      seed=seed)
        section = audit_with_canaries(trained.checkpoint, trained.manifest, ALPHA)
        rows.append({"mechanism": name, "loop": "built-in", "epsilon": epsilon, "canaries": m,
                     "sample_rate": rate, "steps": steps, "seed": seed,
                     "status": section["status"],
                     "steinke": section["epsilon_steinke"] / section["claimed_epsilon"],
                     **_test_fields(section),
                     "guesses": section["guesses"], "correct": section["rows"][0]["correct"],
                     "rejecting_correct": section["rejecting_correct"]})
    return rows


def run(out_dir: Path, quick: bool = False) -> Summary:
    """How much of the claimed ε a one-run audit certifies, its false alarms on null data, its ceiling and the
    faults it catches (module docstring); writes ``one_run_tightness.md``, ``one_run_tightness.json`` and the
    trainings' files under ``one_run_tightness/``.

    Args:
        out_dir: the folder the reproduction writes into.
        quick: the seconds-long version the test suite runs (module docstring).

    Returns:
        The reproduction's summary: the certified share of the claimed ε and the false alarms.
    """
    settings = QUICK if quick else {"epsilons": EPSILONS, "adult": ADULT, "published": PUBLISHED,
                                    "simulated_seeds": SIMULATED_SEEDS, "trainings": TRAININGS,
                                    "null_seeds": NULL_SEEDS, "ceiling_releases": CEILING_RELEASES,
                                    "ceiling_sims": CEILING_SIMS, "ceiling_seeds": CEILING_SEEDS, "faults": FAULTS}
    rng = np.random.default_rng(2025)
    base = load_config(CONFIGS / "adult_fdp.yaml")
    adult = settings["adult"]
    base = base.with_overrides({"mechanism.sample_rate": adult["sample_rate"], "mechanism.steps": adult["steps"]})
    data = prepare_data(base.data, base.seed)
    work = out_dir / "one_run_tightness"
    rows, trainings, calibration, noise = [], [], [], {}
    for setting, calibrated in ((adult, True), (settings["published"], False)):
        if setting is None:
            continue
        rate, steps = setting["sample_rate"], setting["steps"]
        configured = base.with_overrides({"mechanism.sample_rate": rate, "mechanism.steps": steps})
        for epsilon in settings["epsilons"]:
            z, claim = _claim(epsilon, rate, steps, settings)
            epsilon = round(claim.epsilon, 2) if epsilon is None else epsilon
            if calibrated:  # the faults below train at the Adult setting, so with its z
                noise[epsilon] = z
            for m in setting["canaries"]:
                # streams of their own, so that the ceiling's cost settings leave the other figures unchanged
                ceilings = [_ceiling(np.random.default_rng([CEILING_STREAM, seed]), claim, z, rate, steps, m,
                                     settings["ceiling_releases"], settings["ceiling_sims"])
                            for seed in range(settings["ceiling_seeds"])]
                sections = [simulated_audit(rng, m, "inclusion", 2, z, rate, steps, claim, ALPHA,
                                            family_search=True) for _ in range(settings["simulated_seeds"])]
                simulated = [section["tightness_verdict"] for section in sections]
                counted = [section["tightness"] for section in sections]
                row = {"loop": "built-in", "epsilon": epsilon, "canaries": m, "sample_rate": rate, "steps": steps,
                       "noise_multiplier": z, "ratio_simulated": median(simulated), "simulated": simulated,
                       "ratio_simulated_count": median(counted), "simulated_count": counted,
                       "steinke_simulated": median(s["epsilon_steinke"] / claim.epsilon for s in sections),
                       "ceiling": median(ceilings), "ceilings": ceilings}
                runs = _trainings(work, configured, data, "dp_sgd", epsilon, z, m, settings["trainings"])
                trainings += runs
                row.update(_trained_fields(runs))
                if calibrated and m == min(setting["canaries"]):
                    informed = [_sampling_informed_ratio(rng, claim, z, rate, steps, m)
                                for _ in range(settings["simulated_seeds"])]
                    row["ratio_sampling_informed"], row["sampling_informed"] = median(informed), informed
                rows.append(row)
                opacus_rate, runs = _opacus_trainings(work, configured, data, None if quick else epsilon, rate,
                                                      steps, m, settings["trainings"], settings)
                trainings += runs
                rows.append({"loop": "opacus", "epsilon": epsilon, "canaries": m, "sample_rate": opacus_rate,
                             "steps": steps, "ratio_simulated": row["ratio_simulated"], **_trained_fields(runs)})
            if calibrated:
                m = min(setting["canaries"])
                nulls = [simulated_audit(rng, m, "inclusion", 2, z, rate, steps, claim, ALPHA)
                         for _ in range(settings["null_seeds"])]
                groups = [("simulated", m, [{"status": s["status"], **_test_fields(s)} for s in nulls])]
                groups += [(f"trained ({loop})", size, [r for r in trainings if r["epsilon"] == epsilon
                                                        and r["loop"] == loop and r["canaries"] == size
                                                        and r["steps"] == steps])
                           for loop in ("built-in", "opacus") for size in setting["canaries"]]
                for kind, size, runs in groups:
                    calibration.append(_null_row(kind, epsilon, size, sum(r["status"] == "VIOLATION" for r in runs),
                                                 len(runs)))
                    for test in TESTS:
                        calibration.append(_null_row(f"{kind}, {test} test", epsilon, size,
                                                     sum(r[f"{test}_alarm"] for r in runs), len(runs)))
    middle = sorted(noise)[len(noise) // 2]
    faults = [r for name in settings["faults"]
              for r in _trainings(work, base, data, name, middle, noise[middle], min(adult["canaries"]), 1)]
    return _write(out_dir, quick, rows, trainings, calibration, faults)


def _trained_fields(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """A table row's trained figures: the medians over the trainings ``runs`` of the verdict's test's family ε, the
    count test's and the Steinke et al. ε over the claimed ε, and each training's verdict family ε over the claimed
    ε."""
    return {"ratio_trained": median(r["tightness"] for r in runs), "trained": [r["tightness"] for r in runs],
            "steinke_trained": median(r["steinke"] for r in runs),
            "ratio_trained_count": median(r["tightness_count"] for r in runs)}


def _test_fields(section: dict[str, Any]) -> dict[str, Any]:
    """A one-run section's figures per test: the verdict's test's family ε over the claimed ε (``tightness``; None
    without the family search), the count test's (``tightness_count``), and whether each test rejected (its
    alarm)."""
    return {"tightness": section["tightness_verdict"], "tightness_count": section["tightness"],
            "conformance_alarm": any(r["rejects_conformance"] for r in section["rows"]),
            "count_alarm": any(r["rejects_claim"] for r in section["rows"])}


def _null_row(kind: str, epsilon: float, m: int, alarms: int, trials: int) -> dict[str, Any]:
    return {"kind": kind, "epsilon": epsilon, "canaries": m, "alarms": alarms, "trials": trials,
            "p_value_at_alpha": float(stats.binom.sf(alarms - 1, trials, ALPHA)) if alarms else 1.0}


def _write(out_dir: Path, quick: bool, rows: list[dict[str, Any]], trainings: list[dict[str, Any]],
           calibration: list[dict[str, Any]], faults: list[dict[str, Any]]) -> Summary:
    built_in = [r for r in rows if r["loop"] == "built-in"]
    table = ["| p | T | M | claimed ε | simulated (verdict) | quartiles | trained (verdict) | count test simulated | "
             "count test trained | count ceiling | count test / ceiling | Steinke et al. simulated | Steinke et al. "
             "trained |", "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in built_in:
        trained, counted, steinke = ("—" if r.get(key) is None else f"{r[key]:.2f}" for key in (
            "ratio_trained", "ratio_trained_count", "steinke_trained"))
        share = f"{r['ratio_simulated_count'] / r['ceiling']:.2f}" if r["ceiling"] else "—"
        low, high = np.percentile(r["simulated"], [25, 75])
        table.append(f"| {r['sample_rate']:g} | {r['steps']:,} | {r['canaries']:,} | {r['epsilon']:g} | "
                     f"{r['ratio_simulated']:.2f} | {low:.2f}–{high:.2f} | {trained} | "
                     f"{r['ratio_simulated_count']:.2f} | {counted} | {r['ceiling']:.2f} ({min(r['ceilings']):.2f}–"
                     f"{max(r['ceilings']):.2f}) | {share} | {r['steinke_simulated']:.2f} | {steinke} |")
    opacus = ["| Opacus loop: p | T | M | claimed ε | trained (verdict) | built-in simulated (verdict) | count test "
              "trained | Steinke et al. trained |", "|---|---|---|---|---|---|---|---|"]
    opacus += [f"| {r['sample_rate']:.4g} | {r['steps']:,} | {r['canaries']:,} | {r['epsilon']:g} | "
               f"{r['ratio_trained']:.2f} | {r['ratio_simulated']:.2f} | {r['ratio_trained_count']:.2f} | "
               f"{r['steinke_trained']:.2f} |"
               for r in rows if r["loop"] == "opacus"]
    null = ["| null data | ε | M | false alarms | trials | P[≥ that many] at rate α |", "|---|---|---|---|---|---|"]
    null += [f"| {c['kind']} | {c['epsilon']:g} | {c['canaries']:,} | {c['alarms']} | {c['trials']} | "
             f"{c['p_value_at_alpha']:.3g} |" for c in calibration]
    fault_lines = [f"* `{f['mechanism']}` at ε = {f['epsilon']:g}, M = {f['canaries']:,}: {f['status']} "
                   f"({f['correct']} of {f['guesses']} right, {f['rejecting_correct']} reject)" for f in faults]
    informed = [f"* ε = {r['epsilon']:g}, M = {r['canaries']:,}: {r['ratio_sampling_informed']:.2f}"
                for r in built_in if "ratio_sampling_informed" in r]
    ratios = [r["ratio_simulated"] for r in built_in]
    counted = [r["ratio_simulated_count"] for r in built_in]
    verdicts = [c for c in calibration if not c["kind"].endswith(" test")]
    summary = (f"family ε / claimed ε {min(ratios):.2f}–{max(ratios):.2f} simulated (count test "
               f"{min(counted):.2f}–{max(counted):.2f}); false alarms of the verdict "
               f"{sum(c['alarms'] for c in verdicts)} of {sum(c['trials'] for c in verdicts)} null runs; "
               f"faults rejected {sum(f['status'] == 'VIOLATION' for f in faults)} of {len(faults)}")
    sections = [
        "Family ε / claimed ε at α = 0.05 (medians; DP-SGD, inclusion game, δ = 1e-5) of the verdict's test — the "
        "conformance test, whose null is that the training behaves as the claimed DP-SGD (canaries independent, "
        "each within the claimed curve), at α/2 — and of the count test beside it (valid for any mechanism meeting "
        "the claimed curve, at α/2), with the Steinke et al. ε over the claimed ε."
        + (" QUICK MODE: one small setting." if quick else ""),
        "\n".join(table), "\n".join(opacus), "\n".join(null),
        "Known faults, one training each:\n\n" + "\n".join(fault_lines),
        "A valid analysis of guesses told which steps sampled each canary (conditioned on the masks; strata of 6, 8 "
        "and 10 inclusions, μ-GDP per stratum, Bonferroni), family ε / claimed ε, medians:\n\n" + "\n".join(informed)]
    payload = {"quick": quick, "alpha": ALPHA, "delta": DELTA, "rows": rows, "trainings": trainings,
               "calibration": calibration, "faults": faults}
    return write_reproduction(out_dir, "one_run_tightness", "Tightness of the one-run analysis", sections, payload,
                              summary)
