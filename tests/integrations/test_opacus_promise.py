"""An Opacus loop's trials under ``integration: opacus`` (fdp_audit/integrations/opacus.py): the noise calibration
computed once per distinct target whatever the trial count; a trial whose engine was promised more than the
claim is a VIOLATION; a configuration's own claim held against what was trained; a broken promise through the
command line as a user runs it."""

from __future__ import annotations

import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from fdp_audit.auditing.promise import judge_promise, promise_section
from fdp_audit.auditing.third_party import trial_seed
from fdp_audit.config import config_from_dict
from fdp_audit.integrations.opacus import PROBE_INDEX

opacus = pytest.importorskip("opacus")
HERE = Path(__file__).parent
ROWS = 195  # p = 1/20 on 195 and 196 records alike (batch 10): no size dependence, one calibration target
TRIALS = 16  # the fewest at which the membership game's comparisons can fail at α = 0.05; the promise decides


def loop_config(loop: str, seed: int = 0, **mechanism: float) -> dict:
    """``loop`` (``file.py:function`` under this folder) on the synthetic table's first ``2·ROWS`` rows under
    ``integration: opacus``, the membership game alone."""
    return {"name": loop.rpartition(":")[2], "seed": seed, "device": "cpu",
            "data": {"dataset": "synthetic", "protected": ["protected"], "synthetic_rows": 2 * ROWS},
            "model": {"factory": f"{HERE / 'opacus_loops.py'}:make_model"},
            "mechanism": {"name": "dp_sgd", "training": str(HERE / loop), "integration": "opacus", **mechanism},
            "audit": {"trials": TRIALS, "games": ["membership"]}}


@pytest.mark.slow
def test_the_noise_calibration_runs_once_per_distinct_target_whatever_the_trials(verdict_only_audit, monkeypatch):
    """With the claim stated in the config (noise_multiplier), every training of the tutorial loop still calls
    make_private_with_epsilon, whose search for z given (ε, δ, p, epochs) is seconds of RDP evaluations. Counted
    beneath the cache (Opacus's get_noise_multiplier replaced by a counting one before the audit): one call for
    the one distinct target of the probe and all 16 trials, 17 trainings. Without the cache it is 17."""
    from opacus import privacy_engine

    calibrate = privacy_engine.get_noise_multiplier
    make_private_with_epsilon = opacus.PrivacyEngine.make_private_with_epsilon
    calibrations: list[tuple] = []
    trainings: list[int] = []

    def counted_calibration(**kwargs):
        calibrations.append(tuple(sorted(kwargs.items())))
        return calibrate(**kwargs)

    def counted_training(engine, *args, **kwargs):
        trainings.append(1)
        return make_private_with_epsilon(engine, *args, **kwargs)

    monkeypatch.setattr(privacy_engine, "get_noise_multiplier", counted_calibration)
    monkeypatch.setattr(opacus.PrivacyEngine, "make_private_with_epsilon", counted_training)
    config = config_from_dict(loop_config("opacus_loops.py:train", noise_multiplier=0.8))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = verdict_only_audit(config)
    assert results["mechanism"]["noise_multiplier"] == 0.8 and results["promise"]["status"] == "kept"
    assert results["promise"]["claimed"]["noise_multiplier"] == 0.8  # looser than the engine's z: judged, kept
    assert len(trainings) == TRIALS + 1
    (target,) = set(calibrations)
    assert len(calibrations) == 1 and dict(target)["target_epsilon"] == 4.0 and dict(target)["sample_rate"] == 0.05


@pytest.mark.slow
def test_a_trial_promising_more_than_the_claim_is_a_violation(verdict_only_audit, cli, tmp_path):
    """The probe (an even seed) promises ε = 4 over one epoch, which the audit claims (z, p, T read from it); the
    odd seeds' trainings are promised ε = 8 and keep that promise. What they train spends more than the claim:
    a VIOLATION naming the first such trial's seed, both ε (the claim's plan, its history) and its own larger
    promise, which the gate re-judges from results.json. Not an exit 2: the configuration is consistent; the loop
    releases models trained with less noise than it claims, which a privacy gate must fail as a leak."""
    from fdp_audit.auditing.results import write_results

    config = config_from_dict(loop_config("promise_loops.py:train_larger_target_on_odd_seeds", seed=3))
    assert trial_seed(config.seed, PROBE_INDEX) % 2 == 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = verdict_only_audit(config)
    promise = results["promise"]
    assert promise["status"] == "broken" and promise["seed"] % 2 == 1 and promise["target_epsilon"] == 4.0
    assert promise["steps_planned"] == promise["steps_taken"] == 20
    own = promise["own_promise"]
    assert own["target_epsilon"] == 8.0 and own["plan"]["noise_multiplier"] < promise["planned"]["noise_multiplier"]
    assert promise["spent_epsilon"] > promise["promised_epsilon"]
    assert results["verdict"]["status"] == "VIOLATION" and "promise/opacus" in results["verdict"]["violations"]
    explanation = results["verdict"]["explanation"]
    assert explanation.startswith(f"Training's promise · opacus: the training of the trial of seed {promise['seed']} "
                                  "spent more than the claim, the promise of the probe's training, though it kept "
                                  "its own: its engine was promised more (make_private_with_epsilon's target ε = 8")
    assert f"spending ε = {promise['spent_epsilon']:.4g}" in explanation
    assert f"spends ε = {promise['promised_epsilon']:.4g}" in explanation
    gated = cli("gate", str(write_results(tmp_path / "results.json", results)))
    assert gated.code == 1 and f"the trial of seed {promise['seed']} spent more than the claim" in gated.out


@pytest.mark.slow
def test_twice_the_promised_epochs_fails_the_command_line_audit(tmp_path, write_yaml):
    """``fdp-audit audit CONFIG`` as a user runs it, on a loop trained for two epochs where make_private_with_epsilon
    was calibrated for one: exit 1, and the verdict line names the promise, the promised and spent ε and the steps
    planned and taken."""
    import json

    out = tmp_path / "out"
    config = write_yaml(tmp_path / "twice.yaml", loop_config("opacus_loops.py:train_twice"))
    done = subprocess.run([sys.executable, "-m", "fdp_audit", "audit", str(config), "--out", str(out)],
                          capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert done.returncode == 1, done.stderr[-2000:]
    promise = json.loads((out / "results.json").read_text())["promise"]
    assert (promise["status"], promise["steps_planned"], promise["steps_taken"]) == ("broken", 20, 40)
    (banner,) = [line for line in done.stdout.splitlines() if line.startswith("VIOLATION")]
    assert "Training's promise · opacus: the training spent more than it promised: it took 40 steps" in banner
    assert f"spending ε = {promise['spent_epsilon']:.4g} at δ = 1e-05" in banner
    assert f"spends ε = {promise['promised_epsilon']:.4g}" in banner
    assert "it took 40 steps where 20 were planned" in banner


def engine_noise_multiplier() -> float:
    """The z make_private_with_epsilon calibrates for the tutorial loop's promise (ε = 4 at δ = 1e-5 over one
    epoch at p = 1/20, RDP), by Opacus's own search."""
    from opacus.accountants.utils import get_noise_multiplier

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return get_noise_multiplier(target_epsilon=4.0, target_delta=1e-5, sample_rate=1 / 20, epochs=1,
                                    accountant="rdp")


@pytest.mark.slow
def test_a_loop_spending_more_than_the_configuration_claims_is_a_violation(verdict_only_audit, cli, tmp_path):
    """The tutorial loop at n = 195 promises ε = 4 to make_private_with_epsilon (z = 0.8136, p = 0.05, T = 20) and
    keeps that promise, while the configuration claims target_epsilon: 2 (z = 0.997 at the same p and T). The
    training spends ε = 3.25 where the claim allows 2: a VIOLATION whatever the games find (the membership game
    PASSed this loop at 40 trials before the claim was compared), whose explanation names the claim's, the
    promise's and the spent ε; the gate re-judges it, and refuses (exit 2, naming the field) results whose claimed
    schedule or δ is not the stated configuration's, or that drop it — as results written before the claim was
    compared do. Moving the promise to another δ (δ = 1e-9 in the row and its section) leaves the claim judged at
    its own δ: still a VIOLATION."""
    from fdp_audit.auditing.results import write_results

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = verdict_only_audit(config_from_dict(loop_config("opacus_loops.py:train", target_epsilon=2.0)))
    promise = results["promise"]
    assert promise["status"] == "claim_exceeded" and promise["planned"]["noise_multiplier"] == engine_noise_multiplier()
    assert promise["claimed"] == {"noise_multiplier": results["mechanism"]["noise_multiplier"], "sample_rate": 0.05,
                                  "steps": 20, "target_epsilon": 2.0, "delta": 1e-5}
    assert promise["spent_epsilon"] == pytest.approx(promise["promised_epsilon"]) == pytest.approx(3.25, abs=0.01)
    assert promise["claimed_epsilon"] == 2.0 and promise["spent_epsilon_at_claim"] == promise["spent_epsilon"]
    explanation = results["verdict"]["explanation"]
    assert results["verdict"]["status"] == "VIOLATION" and "promise/opacus" in results["verdict"]["violations"]
    assert explanation.startswith("Training's promise · opacus: the training spent more than the configuration "
                                  f"claims: it took 20 steps (noise multiplier 0.8136), spending ε = "
                                  f"{promise['spent_epsilon']:.4g} at the claim's δ = 1e-05, where the "
                                  "configuration's claim, target_epsilon 2 at sample rate 0.05 over 20 steps "
                                  "(fdp-audit calibrates noise multiplier 0.9973 for it)")
    for shown in (f"allows ε = 2; its engine was promised ε = {promise['promised_epsilon']:.4g} "
                  "(make_private_with_epsilon's target ε = 4 over 1 epoch", "a promise it kept"):
        assert shown in explanation
    path = write_results(tmp_path / "results.json", results)
    gated = cli("gate", str(path))
    assert gated.code == 1 and "the training spent more than the configuration claims" in gated.out
    (i,) = [i for i, row in enumerate(results["comparisons"]) if row["kind"] == "promise"]
    row = results["comparisons"][i]
    for edit, field, words in (
            ({**row, "claimed": {**row["claimed"], "noise_multiplier": 0.8}}, "claimed.noise_multiplier",
             "is not the stated configuration's claim"),
            ({**row, "claimed": {**row["claimed"], "delta": 1e-9}}, "claimed.delta",
             "is not the stated configuration's claim"),
            ({**row, "claimed": None}, "claimed", "missing: the stated configuration claims noise multiplier"),
            ({key: value for key, value in row.items() if key != "claimed"}, "claimed", "re-run the audit")):
        comparisons = [*results["comparisons"][:i], edit, *results["comparisons"][i + 1:]]
        refused = cli("gate", str(write_results(tmp_path / "edited.json", {**results, "comparisons": comparisons})))
        assert refused.code == 2 and f"results.comparisons[{i}].{field}: " in refused.err and words in refused.err
    moved_row = {**row, "delta": 1e-9}
    comparisons = [*results["comparisons"][:i], moved_row, *results["comparisons"][i + 1:]]
    moved = {**results, "comparisons": comparisons,
             "promise": promise_section(moved_row, judge_promise(moved_row, 0.0, "row"))}
    gated = cli("gate", str(write_results(tmp_path / "moved.json", moved)))
    assert gated.code == 1 and "the training spent more than the configuration claims" in gated.out


@pytest.mark.slow
@pytest.mark.parametrize("claim", ["the engine's z", "target_epsilon: 4", "target_epsilon: 4, default accountant"])
def test_a_configuration_claiming_the_promise_or_less_passes(verdict_only_audit, cli, tmp_path, claim):
    """The tutorial loop keeping its promise, under a configuration that claims the engine's own z (the claim is
    the plan: no claimed schedule) or the same target ε = 4, which fdp-audit's exact accounting calibrates to
    z = 0.746 (a looser claim than Opacus's RDP z = 0.8136 for it: 4 claimed against 3.25 spent); and the same loop
    with Opacus's default accountant (PRV), whose calibration for ε = 4 spends 3.98 by exact accounting, under
    target_epsilon: 4: PASS. The membership game's comparisons are judged (16 trials, the fewest at which they can
    fail at α = 0.05; seeds fixed), each a one-sided Clopper–Pearson test whose false VIOLATION on a correct loop
    has probability at most its Bonferroni share of α, so the games' false-VIOLATION rate is at most the gate's
    α = 0.05. Where the claim is the plan, the gate refuses a promise moved to another δ than the configuration's,
    with ``claimed`` null or dropped (the claim would then go unjudged at its own δ)."""
    stated = {"noise_multiplier": engine_noise_multiplier()} if claim == "the engine's z" else {"target_epsilon": 4.0}
    loop = "promise_loops.py:train_default_accountant" if "default" in claim else "opacus_loops.py:train"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = verdict_only_audit(config_from_dict(loop_config(loop, **stated)))
    promise = results["promise"]
    assert results["verdict"]["status"] == "PASS" and promise["status"] == "kept"
    if claim == "the engine's z":
        from fdp_audit.auditing.results import write_results

        assert promise["claimed"] is None and promise["claimed_epsilon"] is None
        (i,) = [i for i, row in enumerate(results["comparisons"]) if row["kind"] == "promise"]
        moved_row = {**results["comparisons"][i], "delta": 1e-9}
        # null, or the key dropped as results written before the claim was compared hold it
        for name, row in (("null", moved_row), ("absent", {k: v for k, v in moved_row.items() if k != "claimed"})):
            moved = {**results, "comparisons": [*results["comparisons"][:i], row, *results["comparisons"][i + 1:]],
                     "promise": promise_section(row, judge_promise(row, 0.0, "row"))}
            refused = cli("gate", str(write_results(tmp_path / f"moved_{name}.json", moved)))
            assert refused.code == 2 and f"results.comparisons[{i}].claimed: missing: the promise is read at " \
                "δ = 1e-09, not the stated configuration's δ = 1e-05" in refused.err, (name, refused.err)
        return
    assert promise["claimed"]["target_epsilon"] == promise["claimed_epsilon"] == 4.0
    assert promise["spent_epsilon"] < (3.99 if "default" in claim else 3.3)
    assert "and of 4 the configuration claims" in results["verdict"]["explanation"]
    if "default" in claim:
        assert results["reproducibility"]["opacus_engine"]["accountant"] == "prv"


@pytest.mark.slow
@pytest.mark.parametrize("claimed_z", [0.7, 0.58])
def test_trials_are_held_to_the_configuration_claim_not_to_the_probe_promise(verdict_only_audit, cli, tmp_path,
                                                                              claimed_z):
    """The loop promising ε = 4 on even seeds (the probe's) and ε = 8 on odd ones (spending 3.25 and 6.61), under a
    configuration claiming its own z: at z = 0.7 (claimed ε 4.65) the probe keeps the claim and the odd trials
    exceed it — a VIOLATION naming the first such trial's seed, the claim, its own promise (kept) and the probe's,
    re-judged by the gate; at z = 0.58 (claimed ε 7.28) every training keeps both its own promise and the claim:
    PASS, though the odd trials spend more than the probe was promised (the claim, not the probe's promise, is
    what the loop states). 20 trials: the fewest at which the membership game's comparisons can fail at both
    claims (α = 0.05)."""
    from fdp_audit.auditing.results import write_results

    raw = loop_config("promise_loops.py:train_larger_target_on_odd_seeds", seed=3, noise_multiplier=claimed_z)
    # a looser claim needs more trials before the membership game's comparisons can fail (19 at z = 0.58)
    config = config_from_dict({**raw, "audit": {**raw["audit"], "trials": 20}})
    assert trial_seed(config.seed, PROBE_INDEX) % 2 == 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = verdict_only_audit(config)
    promise = results["promise"]
    assert promise["claimed"]["noise_multiplier"] == claimed_z and promise["target_epsilon"] == 4.0
    if claimed_z == 0.58:
        assert results["verdict"]["status"] == "PASS" and promise["status"] == "kept" and promise["seed"] is None
        return
    assert promise["seed"] % 2 == 1 and promise["own_promise"]["target_epsilon"] == 8.0
    assert promise["status"] == "claim_exceeded"  # it kept its own promise, as the explanation says
    assert promise["spent_epsilon"] > promise["claimed_epsilon"] == pytest.approx(4.65, abs=0.01)
    assert results["verdict"]["status"] == "VIOLATION" and "promise/opacus" in results["verdict"]["violations"]
    explanation = results["verdict"]["explanation"]
    assert explanation.startswith(f"Training's promise · opacus: the training of the trial of seed {promise['seed']} "
                                  "spent more than the configuration claims: it took 20 steps")
    assert (f"spends ε = {promise['claimed_epsilon']:.4g}; its engine was promised ε = {promise['spent_epsilon']:.4g} "
            "(make_private_with_epsilon's target ε = 8 over 1 epoch") in explanation
    assert (f"the probe's training's ε = {promise['promised_epsilon']:.4g} (make_private_with_epsilon's target ε = 4 "
            "over 1 epoch") in explanation and "a promise it kept" in explanation
    gated = cli("gate", str(write_results(tmp_path / "results.json", results)))
    assert gated.code == 1 and f"the trial of seed {promise['seed']} spent more than the configuration claims" \
        in gated.out


@pytest.mark.slow
def test_trials_on_fewer_records_at_the_claim_sample_rate_are_held_to_the_claim(verdict_only_audit):
    """The membership game's world without the canary trains on ROWS = 195 records, where the loader's p is the
    probe's 1/20 (196 records): the claim's mechanism on that data set. A loop promising ε = 8 on an odd number of
    records (spending 6.61) and ε = 4 on an even one, under a claim of z = 0.7 (ε 4.65): the probe and the trials
    with the canary keep the claim, those without it exceed it while keeping their own promise — a VIOLATION
    (status claim_exceeded) naming the first such trial, where such trials were once judged against their own
    promise only. 20 trials, as above."""
    raw = loop_config("promise_loops.py:train_larger_target_on_fewer_records", noise_multiplier=0.7)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = verdict_only_audit(config_from_dict({**raw, "audit": {**raw["audit"], "trials": 20}}))
    promise = results["promise"]
    assert promise["target_epsilon"] == 4.0 and promise["own_promise"]["target_epsilon"] == 8.0
    assert promise["status"] == "claim_exceeded" and promise["seed"] is not None
    assert promise["spent_epsilon"] == pytest.approx(6.61, abs=0.01) and promise["claimed_epsilon"] == pytest.approx(
        4.65, abs=0.01)
    assert results["verdict"]["status"] == "VIOLATION" and "promise/opacus" in results["verdict"]["violations"]
    assert results["verdict"]["explanation"].startswith(
        f"Training's promise · opacus: the training of the trial of seed {promise['seed']} spent more than the "
        "configuration claims")
