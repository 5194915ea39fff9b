"""An Opacus loop's trials under ``integration: opacus`` (fdp_audit/integrations/opacus.py): the noise calibration
computed once per distinct target whatever the trial count; a trial whose engine was promised more than the
claim is a VIOLATION; a broken promise through the command line as a user runs it."""

from __future__ import annotations

import subprocess
import sys
import warnings
from pathlib import Path

import pytest

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
