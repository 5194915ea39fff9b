"""`fdp-audit train` (docs/files.md): the per-step progress (step, loss, ε spent so far), its ε(t)
curve against the accountant, and bit-for-bit reproducibility of a seeded run through the command line."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from fdp_audit import phases
from fdp_audit.claim import Claim
from fdp_audit.config import MechanismConfig, config_from_dict
from fdp_audit.data.prepare import prepare_data
from fdp_audit.training.checkpoint import load_checkpoint
from fdp_audit.training.progress import epsilon_curve
from fdp_audit.training.run import train_one


@pytest.mark.parametrize(("steps", "points"), [(120, 4), (5, 8), (1, 8)])
def test_epsilon_curve_matches_the_accountant_at_every_grid_point(steps, points):
    """The incrementally composed PLD gives the accountant's ε(t) at each grid point (to 0.5 %: the
    accountant truncates tails once for t steps, the curve once per composition), ends with the given ε(T),
    and its upper bound is non-decreasing and never below the true ε(t)."""
    mech = MechanismConfig(name="fdp_sgd", noise_multiplier=1.0, sample_rate=0.02, steps=steps)
    final = float(Claim.of(mech).add_remove.epsilon(mech.delta))
    curve = epsilon_curve(mech, 1.0, final, points)
    assert curve.steps[-1] == steps and curve.epsilons[-1] == final and len(curve.steps) <= points
    for t, eps in zip(curve.steps, curve.epsilons):
        assert eps == pytest.approx(Claim.of(replace(mech, steps=t)).epsilon, rel=5e-3)
    bounds = [curve.upper_bound(t) for t in range(steps + 1)]
    assert bounds[0] == 0.0 and bounds == sorted(bounds)
    for t in {1, steps // 2, steps} - {0}:
        assert bounds[t] >= Claim.of(replace(mech, steps=t)).epsilon * (1 - 5e-3)


@pytest.mark.parametrize(("name", "expected"), [("nonprivate", float("inf")), ("public_only", 0.0)])
def test_epsilon_curve_is_constant_without_private_steps(name, expected):
    mech = MechanismConfig(name=name, steps=40)
    curve = epsilon_curve(mech, 0.0, float(Claim.of(mech).add_remove.epsilon(mech.delta)))
    assert [curve.upper_bound(t) for t in (0, 1, 40)] == [0.0, expected, expected]


def test_progress_in_a_log_is_plain_lines_with_step_loss_and_epsilon(cli, small_config, write_yaml, tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch):
    """stderr is not a terminal here: plain lines (no tqdm bar, no carriage return), and its last line the steps
    done of the total, the training loss and the ε spent. A run under 3 s shows nothing; the quiet time is
    lowered so that this short run shows its lines."""
    monkeypatch.delenv("FDP_AUDIT_PROGRESS", raising=False)
    monkeypatch.setattr(phases, "QUIET_SECONDS", 0.0)
    config = write_yaml(tmp_path / "tiny.yaml", small_config("fdp_sgd", rows=200, mechanism={"steps": 25}))
    result = cli("train", config, "--out", tmp_path / "model.pt")
    assert result.code == 0 and "\r" not in result.err
    final = re.fullmatch(r"fdp-audit: training fdp_sgd: done in [0-9.]+ s \((\d+) of 25 steps, loss (\d+\.\d+), "
                         r"ε ≤ ([0-9.]+) spent\)", result.err.splitlines()[-1])
    _, metadata, _ = load_checkpoint(tmp_path / "model.pt")
    assert final and final[1] == "25" and 0 < float(final[2]) < 1
    assert float(final[3]) == pytest.approx(metadata["epsilon"], rel=1e-2)  # shown with 3 digits
    assert len(result.err.splitlines()) <= 11  # a line per tenth and one at the end
    # every ε the gate may judge against: the attribute games add/remove, the distinguishing game replace-one
    claim = Claim.from_config(config_from_dict(small_config("fdp_sgd", rows=200, mechanism={"steps": 25})))
    shown = re.search(r"ε=([0-9.]+) \(add/remove\), ε=([0-9.]+) \(replace-one\) at δ=1e-05", result.out)
    assert shown and float(shown[1]) == pytest.approx(claim.epsilon, abs=1e-3)
    assert float(shown[2]) == pytest.approx(claim.replace_one.epsilon(1e-5), abs=1e-3)
    assert float(shown[2]) > float(shown[1])


def test_progress_does_not_change_the_model(small_config):
    config = config_from_dict(small_config("fdp_dpsgd", rows=200))
    data = prepare_data(config.data, config.seed)
    quiet, shown = train_one(config, data), train_one(config, data, progress=True)
    for name in quiet.params:
        assert torch.equal(quiet.params[name], shown.params[name])


def test_seeded_training_run_is_bit_for_bit_reproducible(cli, small_config, write_yaml, tmp_path: Path):
    config = write_yaml(tmp_path / "mlp.yaml", small_config("fdp_sgd", rows=200, model={"kind": "mlp", "hidden": [8]},
                                                            mechanism={"public_loss": "gaussian_pad"}))
    for name in ("a.pt", "b.pt"):
        assert cli("train", config, "--out", tmp_path / name).code == 0
    first, _, _ = load_checkpoint(tmp_path / "a.pt")
    second, _, _ = load_checkpoint(tmp_path / "b.pt")
    assert first.keys() == second.keys()
    for name in first:
        assert torch.equal(first[name], second[name]), name


def test_a_seed_out_of_range_is_bad_input(cli, one_line_error, small_config, write_yaml, tmp_path: Path):
    """``train --seed -1`` was an internal error (exit 3) in the random streams."""
    config = write_yaml(tmp_path / "c.yaml", small_config(rows=60, mechanism={"steps": 2}))
    result = cli("train", config, "--seed", "-1", "--out", tmp_path / "m.pt")
    assert result.code == 2 and "--seed: must be >= 0" in one_line_error(result.err)
    assert not (tmp_path / "m.pt").exists()


def test_diverged_training_exits_two_and_writes_nothing(cli, small_config, write_yaml, tmp_path: Path):
    """lr = 1e308 trained to NaN weights, exit 0 and "test accuracy 0.7543"; the game audit wrote a PASS
    results.json. Both stop with exit 2 naming the field, and write nothing."""
    raw = small_config("dp_sgd", mechanism={"optimizer": {"name": "sgd", "lr": 1.0e308}},
                       audit={"trials": 200, "games": ["attribute"], "attacks": ["prior", "likelihood"]})
    config = write_yaml(tmp_path / "diverge.yaml", raw)
    checkpoint = tmp_path / "model.pt"
    result = cli("train", config, "--out", checkpoint)
    assert result.code == 2  # the progress bar stops at the first non-finite loss, then the one-line error
    assert result.err.splitlines()[-1].startswith("fdp-audit: error: mechanism.optimizer.lr: training diverged")
    assert not checkpoint.exists()
    out = tmp_path / "audit"
    result = cli("audit", config, "--out", out)
    assert result.code == 2
    assert result.err.splitlines()[-1].startswith("fdp-audit: error: mechanism.optimizer.lr: training diverged")
    assert not (out / "results.json").exists() and not (out / "report.html").exists()
