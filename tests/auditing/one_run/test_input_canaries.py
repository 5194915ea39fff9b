"""Input canaries for one-run audits of final weights trained outside fdp-audit (fdp_audit/auditing/one_run/records.py):
crafted canaries catch an MLP trained without noise or clipping from its final weights alone; population copies,
which cannot, never end in a plain PASS (INFORMATIONAL in stdout and results.json, and the gate refuses it).

Error probabilities: a correct training fails the audit with probability at most α = 0.05 over seeds (the f-DP
test's level). The crafted canaries' verdict on the training without privacy is a power statement measured at
these settings: 132 of its 137 most confident guesses correct where 119 reject the claim (family ε 4.26
against the claimed 2.34)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from fdp_audit.auditing.gate import FINAL_WEIGHTS_ONLY, INFORMATIONAL, judge

LOOPS = Path(__file__).with_name("user_loops.py")


def _train_outside(tmp_path: Path, raw: dict, kind: str, count: int, training: str, write_yaml) -> tuple[Path, Path]:
    """The user's script: canaries inserted into the config's data, its own training, weights as safetensors."""
    import torch
    from safetensors.torch import save_file

    from fdp_audit.auditing.one_run.canaries import insert_record_canaries
    from fdp_audit.config import load_config

    config = write_yaml(tmp_path / "config.yaml", raw)
    dataset = insert_record_canaries(load_config(config), count, tmp_path / "model.canaries.json", kind=kind)
    sys.path.insert(0, str(LOOPS.parent))
    try:
        import user_loops
    finally:
        sys.path.remove(str(LOOPS.parent))
    x, y = dataset[:]
    torch.manual_seed(0)
    model = user_loops.make_model(x.shape[1], int(y.max()) + 1)
    getattr(user_loops, training)(model, dataset, 0)
    save_file(model.state_dict(), tmp_path / "model.safetensors")
    return config, tmp_path / "model.safetensors"


def _raw(features: int = 50) -> dict:
    return {"name": "outside", "seed": 0, "device": "cpu",
            "data": {"dataset": "synthetic", "protected": ["protected"], "synthetic_rows": 3000,
                     "synthetic_public_features": features},
            "model": {"kind": "module", "factory": f"{LOOPS}:make_model"},
            "mechanism": {"name": "dp_sgd", "noise_multiplier": 2.0, "sample_rate": 0.1, "steps": 100,
                          "clip_norm": 1.0, "delta": 1.0e-5}}


@pytest.mark.slow
def test_crafted_canaries_catch_a_training_without_privacy_from_its_final_weights(cli, tmp_path, write_yaml):
    """An MLP trained without noise or clipping (Adam, 10 epochs) while the config claims DP-SGD with z = 2,
    p = 0.1, T = 100 (ε = 2.34): 1,000 crafted canaries, half of them in the data."""
    config, weights = _train_outside(tmp_path, _raw(), "crafted", 1000, "non_private", write_yaml)
    result = cli("audit", weights, "--config", config, "--canaries", tmp_path / "model.canaries.json",
                 "--out", tmp_path / "out")
    assert result.code == 1 and "VIOLATION" in result.out, result.out + result.err
    section = json.loads((tmp_path / "out" / "results.json").read_text())["one_run"]
    assert section["kind"] == "crafted" and section["best"]["threat_model"] == "final_model"
    assert cli("gate", tmp_path / "out" / "results.json").code == 1


@pytest.mark.slow
def test_crafted_canaries_catch_a_clipped_training_without_noise_from_its_final_weights(cli, tmp_path, write_yaml):
    """DP-SGD that clips (C = 1) but adds no noise, 40 epochs of expected batches of 40 (p = 0.02, T = 2,000,
    learning rate 4), claimed as z = 1.2 (ε = 4.04): all 107 of the most confident guesses right where 104 reject
    the claim, VIOLATION from the final weights alone (μ-GDP ε 5.70). The same loop with the claimed noise passes
    (docs/one_run.md). Seeded: the training and the canaries are fixed, so this power statement does not flake;
    the audit's error probability on a correct training is α = 0.05."""
    raw = _raw()
    raw["mechanism"].update(noise_multiplier=1.2, sample_rate=0.02, steps=2000)
    config, weights = _train_outside(tmp_path, raw, "crafted", 1000, "by_hand_small_batches_no_noise", write_yaml)
    result = cli("audit", weights, "--config", config, "--canaries", tmp_path / "model.canaries.json",
                 "--out", tmp_path / "out")
    assert result.code == 1 and "\nVIOLATION at α=" in result.out, result.out + result.err
    assert FINAL_WEIGHTS_ONLY not in result.out
    section = json.loads((tmp_path / "out" / "results.json").read_text())["one_run"]
    assert section["best"]["correct"] >= section["rejecting_correct"]


@pytest.mark.slow
def test_crafted_canaries_pass_a_correct_training_and_say_what_the_final_weights_do_not_test(
        cli, tmp_path, write_yaml):
    """The PASS says, in stdout, results.json, the gate's verdict and the report's banner, that the final weights
    cannot show a clipping or sampling fault that the noise hides."""
    raw = _raw()
    raw["mechanism"].update(noise_multiplier=1.0, steps=20)  # by_hand_correct: z = 1, p = 0.1, two epochs
    config, weights = _train_outside(tmp_path, raw, "crafted", 1000, "by_hand_correct", write_yaml)
    result = cli("audit", weights, "--config", config, "--canaries", tmp_path / "model.canaries.json",
                 "--out", tmp_path / "out")
    assert result.code == 0 and "\nPASS at α=" in result.out, result.out + result.err
    assert FINAL_WEIGHTS_ONLY in result.out
    saved = json.loads((tmp_path / "out" / "results.json").read_text())
    assert saved["verdict"]["status"] == "PASS" and FINAL_WEIGHTS_ONLY in saved["verdict"]["explanation"]
    assert saved["one_run"]["final_weights_only"] is True and FINAL_WEIGHTS_ONLY in saved["one_run"]["explanation"]
    gated = cli("gate", tmp_path / "out" / "results.json")
    assert gated.code == 0 and FINAL_WEIGHTS_ONLY in gated.out
    assert cli("report", tmp_path / "out" / "results.json", "-o", tmp_path / "report.html").code == 0
    banner = (tmp_path / "report.html").read_text().split('<section id="verdict"')[1].split("</section>")[0]
    assert "Final weights only: crafted input canaries test what the final model keeps" in banner


def test_a_final_weights_pass_says_what_it_does_not_test_and_a_violation_is_unchanged():
    """The gate's words for comparisons of crafted canaries (``final_weights_only``): a PASS says what the final
    weights cannot show; a violated comparison is a VIOLATION with the same words as without the flag."""
    claim = {"mechanism": "dp_sgd", "noise_multiplier": 1.0, "sample_rate": 0.1, "steps": 20, "delta": 1e-5,
             "relation": "add_remove"}
    row = {"id": "one-run/final_model", "kind": "one_run", "threat_model": "final_model", "canaries": 1000, "k": 2,
           "guesses": 121, "final_weights_only": True, **claim}
    passed, _ = judge([{**row, "correct": 64}], 0.05)
    assert passed["status"] == "PASS" and passed["explanation"].startswith(FINAL_WEIGHTS_ONLY)
    plain, _ = judge([{**row, "correct": 64, "final_weights_only": False}], 0.05)
    assert FINAL_WEIGHTS_ONLY not in plain["explanation"]
    violated, _ = judge([{**row, "correct": 121}], 0.05)
    unflagged, _ = judge([{**row, "correct": 121, "final_weights_only": False}], 0.05)
    assert violated["status"] == unflagged["status"] == "VIOLATION"
    assert violated["explanation"] == unflagged["explanation"]


def test_population_copies_are_informational_not_a_pass(cli, tmp_path, write_yaml, one_line_error):
    """Population copies on a training without noise: no violation found, and the verdict says why that is not
    a pass — in stdout, results.json and the report's banner — and the gate refuses to pass it. A manifest of the
    previous version (written before crafted canaries existed) is read and judged the same way."""
    raw = _raw(features=5)
    raw["mechanism"].update(noise_multiplier=1.0, steps=20)
    config, weights = _train_outside(tmp_path, raw, "record", 200, "by_hand_no_noise", write_yaml)
    manifest = tmp_path / "model.canaries.json"
    old = {**json.loads(manifest.read_text()), "version": 1}
    (tmp_path / "v1.canaries.json").write_text(json.dumps(old))
    for path in (manifest, tmp_path / "v1.canaries.json"):
        result = cli("audit", weights, "--config", config, "--canaries", path, "--out", tmp_path / "out")
        assert result.code == 0, result.err
        assert f"\n{INFORMATIONAL} at α=" in result.out and "PASS" not in result.out
        assert "does not test" in result.out or "cannot test the mechanism" in result.out
        saved = json.loads((tmp_path / "out" / "results.json").read_text())
        assert saved["verdict"]["status"] == INFORMATIONAL and saved["one_run"]["status"] == INFORMATIONAL
        refused = cli("gate", tmp_path / "out" / "results.json")
        assert refused.code == 2 and "not a pass" in one_line_error(refused.err)
    assert cli("report", tmp_path / "out" / "results.json", "-o", tmp_path / "report.html").code == 0
    assert 'data-status="INFORMATIONAL"' in (tmp_path / "report.html").read_text()  # the banner
