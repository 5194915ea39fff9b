"""One training of the user's own loop with 1,000 gradient canaries, audited from its files
(``fdp-audit train CONFIG --canaries 1000`` on a config naming ``mechanism.training``, then
``fdp-audit audit WEIGHTS --config CONFIG --canaries MANIFEST``): the correct loops pass, every fault is a violation,
and bad input is one line and exit 2 with nothing written.

The claim: DP-SGD with z = 1, C = 1, p = 0.1 (Opacus's 1 / len(loader): 10 batches of 211 of the 1,500 records and
the 510 canaries the seed puts in, the same 10 for 400 to 610 canaries present), T = 20 (two epochs), ε = 3.59 at
δ = 1e-5 (add/remove). Error probabilities: a correct loop fails the audit with probability at most α = 0.05 over
seeds (the verdict's level: its two tests at α/2 each; these seeds pass). The faults were each caught in 200 of 200
simulated exact releases of the same mechanism at these settings (z × 0.3, and no clipping: K = 10 times the claimed
norm, the noise left at z·C) by the verdict as it now stands, and by each of its two tests alone (the conformance
test and the count test at α/2; seeds default_rng([7, s]), s < 200, run once offline), so each misses with
probability below 1.5 % (95 % upper bound); no noise and the extra epoch without noise release the canaries exactly,
and a loop that releases more optimizer steps than the claim accounts for, or that moves the canary head outside the
optimizer steps read (an update by hand), is a violation whatever the guesses."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

pytest.importorskip("opacus")

LOOPS = Path(__file__).with_name("user_loops.py")
CANARIES = "1000"


def _config(tmp_path: Path, training: str, write_yaml) -> Path:
    raw = {"name": f"user_loop_{training}", "seed": 0, "device": "cpu",
           "data": {"dataset": "synthetic", "protected": ["protected"], "synthetic_rows": 3000},
           "model": {"factory": f"{LOOPS}:make_model"},
           "mechanism": {"name": "dp_sgd", "training": f"{LOOPS}:{training}", "noise_multiplier": 1.0,
                         "sample_rate": 0.1, "steps": 20, "clip_norm": 1.0, "delta": 1.0e-5}}
    return write_yaml(tmp_path / f"{training}.yaml", raw)


def _train_and_audit(cli, tmp_path: Path, training: str, write_yaml):
    config = _config(tmp_path, training, write_yaml)
    weights = tmp_path / training / "model.safetensors"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Opacus's notes on secure RNG and hooks
        trained = cli("train", config, "--canaries", CANARIES, "--out", weights)
        assert trained.code == 0, trained.err
        audited = cli("audit", weights, "--config", config, "--canaries", weights.with_suffix(".canaries.json"),
                      "--out", tmp_path / training / "audit")
    return audited, tmp_path / training / "audit" / "results.json"


@pytest.mark.slow
def test_a_correct_loop_passes(cli, tmp_path, write_yaml):
    """The Opacus loop as tutorials write it (the plain PyTorch loop passes in the examples' test)."""
    audited, results = _train_and_audit(cli, tmp_path, "opacus_correct", write_yaml)
    assert audited.code == 0 and "PASS" in audited.out, audited.out + audited.err
    section = json.loads(results.read_text())["one_run"]
    assert section["status"] == "PASS" and section["released_steps"] == 20 and section["canaries"] == 1000
    assert section["unobserved_updates"] == 0
    assert cli("gate", results).code == 0


@pytest.mark.slow
@pytest.mark.parametrize("training", ["by_hand_no_noise", "by_hand_no_clipping", "opacus_less_noise",
                                      "opacus_plain_epoch", "opacus_twice_the_epochs", "opacus_pass_by_hand"])
def test_every_fault_of_the_loop_is_a_violation(cli, tmp_path, training, write_yaml):
    audited, results = _train_and_audit(cli, tmp_path, training, write_yaml)
    assert audited.code == 1 and "VIOLATION" in audited.out, audited.out + audited.err
    section = json.loads(results.read_text())["one_run"]
    if training == "opacus_twice_the_epochs":  # 40 steps released against 20 claimed: the count decides
        assert section["released_steps"] == 40
    elif training == "opacus_pass_by_hand":  # 20 steps read, then the head moved outside them: the count decides
        assert section["released_steps"] == 20 and section["unobserved_updates"] >= 1
        assert "updated outside the 20 optimizer steps the audit read" in audited.out
    else:  # the guesses alone reject the claimed DP-SGD (the conformance test, the verdict's)
        assert any(row["rejects_conformance"] for row in section["rows"]), section["explanation"]
    assert cli("gate", results).code == 1


@pytest.mark.slow
@pytest.mark.parametrize(("training", "message"), [
    ("drops_canaries", "the canaries never reached the module"),
    ("never_steps", "no optimizer holding the canary head ever stepped")])
def test_a_loop_that_drops_the_canaries_or_never_steps_is_bad_input(cli, tmp_path, training, message, write_yaml,
                                                                    one_line_error):
    config = _config(tmp_path, training, write_yaml)
    weights = tmp_path / "out" / "model.safetensors"
    result = cli("train", config, "--canaries", CANARIES, "--out", weights)
    assert result.code == 2 and message in one_line_error(result.err)
    assert not (tmp_path / "out").exists()


@pytest.fixture(scope="module")
def two_trainings(tmp_path_factory):
    """Two correct trainings with other seeds' canaries: files to mismatch."""
    from fdp_audit.cli import main
    from tests.conftest import write_yaml

    root = tmp_path_factory.mktemp("user_loop_files")
    folders = {}
    for seed in (0, 1):
        config = _config(root, "by_hand_correct", write_yaml)
        raw = config.read_text().replace("seed: 0", f"seed: {seed}")
        config = root / f"seed{seed}.yaml"
        config.write_text(raw)
        assert main(["train", str(config), "--canaries", "300", "--out", str(root / f"s{seed}" / "m.safetensors")]) == 0
        folders[seed] = (config, root / f"s{seed}")
    return folders


def _audit_code(cli, config, folder, manifest, one_line_error, out) -> str:
    result = cli("audit", folder / "m.safetensors", "--config", config, "--canaries", manifest, "--out", out)
    assert result.code == 2, result.out
    assert not out.exists()
    return one_line_error(result.err)


@pytest.mark.slow
def test_mismatched_or_edited_files_are_bad_input_and_nothing_is_written(cli, two_trainings, tmp_path,
                                                                        one_line_error):
    (config0, folder0), folder1 = two_trainings[0], two_trainings[1][1]
    manifest = json.loads((folder0 / "m.canaries.json").read_text())
    out = tmp_path / "never"
    # a manifest for other weights (another training's)
    other = folder1 / "m.canaries.json"
    assert "belongs to other weights" in _audit_code(cli, config0, folder0, other, one_line_error, out)
    # edited secrets
    edited = tmp_path / "m.canaries.json"
    edited.write_text(json.dumps({**manifest, "secrets": [1 - s for s in manifest["secrets"]]}))
    (tmp_path / "m.canary-release.pt").write_bytes((folder0 / "m.canary-release.pt").read_bytes())
    line = _audit_code(cli, config0, folder0, edited, one_line_error, out)
    assert "300 of 300 secrets are not the ones drawn from the manifest's seed 0" in line
    # a release of another length, its manifest re-digested
    import hashlib

    from safetensors.torch import load

    from fdp_audit.auditing.one_run.manifest import release_bytes

    payload = load((folder0 / "m.canary-release.pt").read_bytes())
    (tmp_path / "m.canary-release.pt").write_bytes(release_bytes(
        payload["updates"][:-3], payload["updates_null"][:-3], payload["final"], payload["final_null"]))
    digest = hashlib.sha256((tmp_path / "m.canary-release.pt").read_bytes()).hexdigest()
    edited.write_text(json.dumps({**manifest, "release_sha256": digest}))
    steps = manifest["steps"]
    line = _audit_code(cli, config0, folder0, edited, one_line_error, out)
    assert f"{steps - 3} steps, but the manifest says {steps}" in line
