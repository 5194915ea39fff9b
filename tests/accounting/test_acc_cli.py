"""`fdp-audit account` and `fdp-audit calibrate` (docs/files.md)."""

from __future__ import annotations

import json
import sys
import types

import pytest

from fdp_audit.cli import main

BASE = ["account", "--noise-multiplier", "1.0", "--sample-rate", "0.0625", "--steps", "100"]


def _run(capsys, argv):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_account_json_has_exactly_the_spec_shape(capsys):
    argv = [*BASE, "--delta", "1e-5", "--epsilon", "4", "--alpha", "0.5", "--ball", "0.5", "--ball", "0.001", "--json"]
    code, out, err = _run(capsys, argv)
    assert code == 0 and err == ""
    result = json.loads(out)
    assert set(result) == {"epsilon", "delta", "f", "bound", "parameters"}
    assert result["epsilon"]["1e-05"] == pytest.approx(4.376, abs=0.002)
    assert result["bound"] == {"0.5": pytest.approx(0.7783, abs=1e-4), "0.001": pytest.approx(0.01384, abs=1e-5)}
    assert result["f"]["0.5"] == pytest.approx(1 - 0.7783, abs=1e-4)
    assert 0 < result["delta"]["4.0"] < 1e-4
    params = result["parameters"]
    assert (params["noise_multiplier"], params["sample_rate"], params["steps"]) == (1.0, 0.0625, 100)
    assert params["relation"] == "add_remove" and params["discretization"] == 1e-4


def test_account_defaults_and_table(capsys):
    code, out, _ = _run(capsys, [*BASE, "--json"])
    assert code == 0
    result = json.loads(out)
    assert "1e-05" in result["epsilon"] and result["f"] and result["bound"] and result["delta"]
    code, out, _ = _run(capsys, BASE)
    assert code == 0 and "Theorem 4" in out and "1e-05" in out


def test_account_replace_relation_leaks_more(capsys):
    _, out, _ = _run(capsys, [*BASE, "--delta", "1e-5", "--json"])
    _, out_replace, _ = _run(capsys, [*BASE, "--delta", "1e-5", "--relation", "replace", "--json"])
    assert json.loads(out_replace)["epsilon"]["1e-05"] > json.loads(out)["epsilon"]["1e-05"]


BAD_ACCOUNT = [
    (["--noise-multiplier", "0"], "--noise-multiplier"),
    (["--noise-multiplier", "-1"], "--noise-multiplier"),
    (["--noise-multiplier", "nan"], "--noise-multiplier"),
    (["--noise-multiplier", "abc"], "--noise-multiplier"),
    (["--sample-rate", "0"], "--sample-rate"),
    (["--sample-rate", "1.5"], "--sample-rate"),
    (["--steps", "0"], "--steps"),
    (["--delta", "0"], "--delta"),
    (["--delta", "1"], "--delta"),
    (["--ball", "1.5"], "--ball"),
    (["--alpha", "-0.1"], "--alpha"),
    (["--epsilon", "-1"], "--epsilon"),
    (["--relation", "swap"], "--relation"),
]


@pytest.mark.parametrize(("override", "flag"), BAD_ACCOUNT)
def test_account_bad_input_is_one_line_exit_2(capsys, override, flag):
    argv = list(BASE)
    if override[0] in argv:
        argv[argv.index(override[0]) + 1] = override[1]
    else:
        argv += override
    code, out, err = _run(capsys, argv)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and flag in err and "Traceback" not in err


def test_account_missing_parameter(capsys):
    code, _, err = _run(capsys, ["account", "--noise-multiplier", "1.0", "--steps", "10"])
    assert code == 2 and "--sample-rate" in err and len(err.strip().splitlines()) == 1


def test_account_checkpoint_metadata(capsys, monkeypatch):
    meta = {"mechanism": "fdp_sgd_shared_batch", "noise_multiplier": 1.0, "sample_rate": 0.0625, "steps": 100,
            "delta": 1e-5}
    fake = types.SimpleNamespace(read_privacy_metadata=lambda path: dict(meta))
    monkeypatch.setitem(sys.modules, "fdp_audit.training.checkpoint", fake)
    code, out, _ = _run(capsys, ["account", "--checkpoint", "model.pt", "--json"])
    assert code == 0
    result = json.loads(out)
    assert result["parameters"]["mechanism"] == "fdp_sgd_shared_batch"  # accounted as it claims
    assert result["epsilon"]["1e-05"] == pytest.approx(4.376, abs=0.002)
    assert list(result["epsilon"]) == ["0.001", "1e-05", "1e-06"]  # the checkpoint's δ in order, not first
    fake.read_privacy_metadata = lambda path: {**meta, "delta": 1e-4}
    code, out, _ = _run(capsys, ["account", "--checkpoint", "model.pt"])
    rows = out.split("  delta        epsilon")[1].split("\n\n")[0].splitlines()[1:]
    assert code == 0 and [row.split()[0] for row in rows] == ["0.001", "0.0001", "1e-05", "1e-06"]
    code, _, err = _run(capsys, ["account", "--checkpoint", "model.pt", "--steps", "5"])
    assert code == 2 and "--checkpoint" in err
    fake.read_privacy_metadata = lambda path: {**meta, "sample_rate": 2.0}
    code, _, err = _run(capsys, ["account", "--checkpoint", "model.pt"])
    assert code == 2 and "sample_rate" in err and len(err.strip().splitlines()) == 1


def test_account_nonprivate_checkpoint_reports_infinite_epsilon_as_null(capsys, monkeypatch):
    fake = types.SimpleNamespace(read_privacy_metadata=lambda path: {"mechanism": "nonprivate", "delta": 1e-5})
    monkeypatch.setitem(sys.modules, "fdp_audit.training.checkpoint", fake)
    code, out, _ = _run(capsys, ["account", "--checkpoint", "model.pt", "--json"])
    assert code == 0 and json.loads(out)["epsilon"]["1e-05"] is None


def test_account_refuses_hopeless_parameters_cleanly(capsys):
    code, _, err = _run(capsys, ["account", "--noise-multiplier", "0.3", "--sample-rate", "1", "--steps", "10000"])
    assert code == 2 and "--noise-multiplier" in err and len(err.strip().splitlines()) == 1


def test_calibrate(capsys):
    argv = ["calibrate", "--epsilon", "3", "--delta", "1e-5", "--sample-rate", "1", "--steps", "4", "--json"]
    code, out, _ = _run(capsys, argv)
    assert code == 0
    result = json.loads(out)
    assert result["achieved_epsilon"] <= 3.0 and result["noise_multiplier"] > 0


def test_calibrate_max_steps(capsys):
    argv = ["calibrate", "--max-steps", "--noise-multiplier", "2", "--epsilon", "2", "--delta", "1e-5",
            "--sample-rate", "0.05"]
    code, out, _ = _run(capsys, argv)
    assert code == 0 and out.startswith("max steps:") and "achieved ε" in out
    assert int(out.split()[2]) >= 1


def test_calibrate_max_steps_says_when_the_search_limit_is_the_answer(capsys):
    """At z = 50 a budget of ε = 2 lasts far beyond 10 steps: 10 is where the search stopped, not the answer."""
    argv = ["calibrate", "--max-steps", "--noise-multiplier", "50", "--epsilon", "2", "--delta", "1e-5",
            "--sample-rate", "0.05", "--step-limit", "10"]
    code, out, _ = _run(capsys, argv)
    assert code == 0 and out.startswith("max steps: at least 10 ") and "--step-limit" in out
    code, out, _ = _run(capsys, [*argv, "--json"])
    assert code == 0 and json.loads(out)["reached_step_limit"] is True


BAD_CALIBRATE = [
    (["--epsilon", "-1", "--delta", "1e-5", "--sample-rate", "0.1", "--steps", "10"], "--epsilon"),
    (["--epsilon", "1", "--delta", "0", "--sample-rate", "0.1", "--steps", "10"], "--delta"),
    (["--epsilon", "1", "--delta", "1e-5", "--sample-rate", "0", "--steps", "10"], "--sample-rate"),
    (["--epsilon", "1", "--delta", "1e-5", "--sample-rate", "0.1", "--steps", "0"], "--steps"),
    (["--epsilon", "1", "--delta", "1e-5", "--sample-rate", "0.1"], "--steps"),
    (["--epsilon", "1", "--delta", "1e-5", "--sample-rate", "0.1", "--steps", "5", "--noise-multiplier", "1"],
     "--noise-multiplier"),
    (["--max-steps", "--epsilon", "1", "--delta", "1e-5", "--sample-rate", "0.1"], "--noise-multiplier"),
    (["--max-steps", "--noise-multiplier", "0", "--epsilon", "1", "--delta", "1e-5", "--sample-rate", "0.1"],
     "--noise-multiplier"),
]


@pytest.mark.parametrize(("args", "flag"), BAD_CALIBRATE)
def test_calibrate_bad_input_is_one_line_exit_2(capsys, args, flag):
    code, out, err = _run(capsys, ["calibrate", *args])
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and flag in err and "Traceback" not in err
    assert not any(keyword in err for keyword in ("noise_multiplier", "sample_rate", "step_limit"))  # flags only


def test_every_epsilon_the_gate_may_use_is_printed(capsys) -> None:
    """``account`` printed ε = 1.856 (add/remove) while the gate judged the distinguishing game against 2.673
    (replace-one): both relations' ε(δ) are printed, equal to ``--relation`` of each."""
    from fdp_audit.cli import main

    flags = ["--noise-multiplier", "1.0", "--sample-rate", "0.017", "--steps", "300", "--delta", "1e-5"]
    both = {}
    for relation in ("add_remove", "replace"):
        assert main(["account", *flags, "--relation", relation, "--json"]) == 0
        both[relation] = json.loads(capsys.readouterr().out)["epsilon"]["1e-05"]
    assert both == {"add_remove": pytest.approx(1.8558, abs=1e-4), "replace": pytest.approx(2.6727, abs=1e-4)}
    for relation in ("add_remove", "replace"):  # whichever relation is asked for, the table has both
        assert main(["account", *flags, "--relation", relation]) == 0
        row = capsys.readouterr().out.split("epsilon (replace)")[1].splitlines()[1].split()
        assert row == ["1e-05", f"{both['add_remove']:.6g}", f"{both['replace']:.6g}"]


def test_library_account_of_a_checkpoint_is_the_commands(capsys, monkeypatch):
    """``fdp_audit.account(checkpoint=...)`` states the claim the command prints; giving z, p, T as well is refused."""
    import fdp_audit
    from fdp_audit.errors import BadInputError

    meta = {"mechanism": "fdp_sgd_shared_batch", "noise_multiplier": 1.0, "sample_rate": 0.0625, "steps": 100}
    fake = types.SimpleNamespace(read_privacy_metadata=lambda path: dict(meta))
    monkeypatch.setitem(sys.modules, "fdp_audit.training.checkpoint", fake)
    accountant = fdp_audit.account(checkpoint="model.pt")
    _, out, _ = _run(capsys, ["account", "--checkpoint", "model.pt", "--json"])
    assert accountant.spec.name == "fdp_sgd_shared_batch"
    assert accountant.epsilon(1e-5) == pytest.approx(json.loads(out)["epsilon"]["1e-05"], rel=1e-12)
    with pytest.raises(BadInputError, match="checkpoint"):
        fdp_audit.account(1.0, 0.1, 10, checkpoint="model.pt")
