"""``fdp-audit gate RESULTS`` (docs/files.md): re-judges saved comparisons at a given α; exit 0 pass, 1 violation,
2 bad input (a corrupt or hand-edited results file included), JUnit XML on request."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from attacks import ATTACKS
from fdp_audit.auditing.gate import judge
from fdp_audit.auditing.results import SCHEMA_VERSION, write_results
from fdp_audit.auditing.stats import lower_confidence_bound
from fdp_audit.claim import Claim
from fdp_audit.config import config_from_dict
from fdp_audit.json_numbers import finite_or_none

# the attacks as the labels name them: their registered titles
ITERATES = ATTACKS["iterates"].title
LIKELIHOOD = ATTACKS["likelihood"].title

# The stated claim: DP-SGD at p = 1, T = 1, z = 4, whose Theorem 4 bound at Ball = ½ is Φ(1/4) ≈ 0.599.
CONFIG = config_from_dict({
    "data": {"dataset": "synthetic", "protected": ["protected"]},
    "mechanism": {"name": "dp_sgd", "noise_multiplier": 4.0, "sample_rate": 1.0, "steps": 1, "delta": 1e-5},
    "audit": {"target_prior": [0.5, 0.5], "games": ["attribute", "distinguishing"]}})
TRIALS, BOUND = 200, float(Claim.of(CONFIG.mechanism).add_remove.bound(0.5))
# 200 trials against a bound of 0.6: the smallest count whose one-sided lower bound beats the bound at level
# 0.05/2 (the stored α over two comparisons), but not at 0.001/2.
BORDERLINE = next(k for k in range(TRIALS) if lower_confidence_bound(k, TRIALS, 0.025) > BOUND)


def results(successes: int, alpha: float = 0.05, stored_status: str | None = None) -> dict[str, Any]:
    """Results as an audit writes them (the verdict its comparisons give), or with ``stored_status`` instead."""
    comparisons = [
        {"id": "attribute/likelihood", "kind": "rate", "game": "attribute", "attack": "likelihood",
         "trials": TRIALS, "successes": 100, "ball": 0.5, "bound": BOUND},
        {"id": "distinguishing-attribute/iterates", "kind": "rate", "game": "distinguishing", "attack": "iterates",
         "trials": TRIALS, "successes": successes, "ball": 0.5, "bound": BOUND},
    ]
    return {"schema_version": SCHEMA_VERSION, "kind": "audit", "created": "2024-01-01T00:00:00Z",
            "verdict": (judge(comparisons, alpha)[0] if stored_status is None
                        else {"status": stored_status, "alpha": alpha}),
            "mechanism": finite_or_none(Claim.from_config(CONFIG).section()),
            "reproducibility": {"seed": 0, "config": CONFIG.to_dict()}, "comparisons": comparisons}


@pytest.fixture
def passing(tmp_path: Path) -> Path:
    return write_results(tmp_path / "pass" / "results.json", results(110))


@pytest.fixture
def violating(tmp_path: Path) -> Path:
    # 190 of 200 against a bound of 0.6: the lower bound is about 0.9, far above at any sensible α
    return write_results(tmp_path / "violation" / "results.json", results(190))


def test_pass(cli, passing: Path) -> None:
    result = cli("gate", passing)
    assert result.code == 0
    # the likelihood attack's 100 of 200 is the prior's ½: a PASS that says it is weak, and why
    assert result.out.startswith("PASS (weak: 1 sanity warning) at α=0.05, 2 of 2 comparisons judged: ")
    assert "\nwarning: Attribute inference · record canaries: no attack beat the prior (likelihood; " in result.out


def test_violation_exit_code_one(cli, violating: Path) -> None:
    result = cli("gate", violating)
    assert result.code == 1
    assert result.out.startswith("VIOLATION at α=0.05, 2 of 2 comparisons judged: Attribute inference · gradient "
                                 f"canaries (distinguishing game) · {ITERATES}: the lower confidence bound ")


def test_a_stored_verdict_that_its_comparisons_do_not_give_is_refused(cli, one_line_error, tmp_path: Path) -> None:
    """Never trusted: the gate judges the comparisons again, and refuses results whose stored verdict differs."""
    path = write_results(tmp_path / "results.json", results(190, stored_status="PASS"))
    result = cli("gate", path)
    assert result.code == 2 and "results.verdict.status: 'PASS' is not the 'VIOLATION'" in one_line_error(result.err)


def test_alpha_override(cli, tmp_path: Path) -> None:
    assert lower_confidence_bound(BORDERLINE, TRIALS, 0.001 / 2) <= BOUND
    path = write_results(tmp_path / "results.json", results(BORDERLINE))
    assert cli("gate", path).code == 1  # the stored α = 0.05
    strict = cli("gate", path, "--alpha", "0.001")
    assert strict.code == 0 and "α=0.001" in strict.out
    path = write_results(tmp_path / "stored.json", results(BORDERLINE, alpha=0.001))
    assert cli("gate", path).code == 0  # the stored α is the default
    assert cli("gate", path, "--alpha", "0.05").code == 1


@pytest.mark.parametrize("alpha", ["0", "1", "1.5", "-0.01"])
def test_alpha_out_of_range_is_bad_input(cli, one_line_error, passing: Path, alpha: str) -> None:
    result = cli("gate", passing, "--alpha", alpha)
    assert result.code == 2
    assert "alpha" in one_line_error(result.err)


def test_hand_edited_number_is_refused(cli, one_line_error, violating: Path) -> None:
    data = json.loads(violating.read_text())
    data["comparisons"][1]["successes"] = 120  # turn the violation into a pass by hand
    violating.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    result = cli("gate", violating)
    assert result.code == 2
    assert "checksum" in one_line_error(result.err)
    assert result.out == ""


@pytest.mark.parametrize("cut", [0.5, 0.99])
def test_corrupt_json_is_refused(cli, one_line_error, passing: Path, cut: float) -> None:
    text = passing.read_bytes()
    passing.write_bytes(text[: int(len(text) * cut)])
    result = cli("gate", passing)
    assert result.code == 2
    assert "not valid JSON" in one_line_error(result.err)


def test_missing_file_is_refused(cli, one_line_error, tmp_path: Path) -> None:
    result = cli("gate", tmp_path / "absent.json")
    assert result.code == 2
    assert "not found" in one_line_error(result.err)


def _edit(results: dict[str, Any], where: str, value: Any) -> dict[str, Any]:
    *path, last = where.split(".")
    node: Any = results
    for key in path:
        node = node[int(key)] if isinstance(node, list) else node[key]
    key = int(last) if isinstance(node, list) else last
    if value is KeyError:
        del node[key]
    else:
        node[key] = value
    return results


EPSILON_ROW = {"id": "distinguishing-epsilon/iterates", "kind": "epsilon", "thresholds": [0.0, 1.0],
               "orientation": 1, "false_positives": [3, 1], "false_negatives": [10, 20], "negatives": 50,
               "positives": 50, "delta": 1e-5, "relation": "replace", "game": "distinguishing",
               "claim": {"mechanism": "dp_sgd", "noise_multiplier": 4.0, "sample_rate": 1.0, "steps": 1}}

# A results file that is consistent with its checksum (written by another tool, or another version) can still
# be malformed; the gate must say which field, with exit code 2, never an internal error.
MALFORMED = {
    "negative successes": ("comparisons.0.successes", -3, "successes"),
    "comparison without kind": ("comparisons.0.kind", KeyError, "kind"),
    "comparison not an object": ("comparisons.1", "oops", "comparisons[1]"),
    "comparisons not a list": ("comparisons", {"a": 1}, "results.comparisons"),
    "stored alpha not a number": ("verdict.alpha", "0.05", "alpha"),
    "verdict not an object": ("verdict", ["PASS"], "results.verdict"),
    "threshold not a number": ("comparisons.2.thresholds", ["low", "high"], "thresholds"),
    "error counts not integers": ("comparisons.2.false_positives", [0.5, 1], "out of range"),
    "delta missing": ("comparisons.2.delta", KeyError, "delta"),
    # an integer beyond 64 bits overflowed in the float arithmetic of the interval (exit 3)
    "kind a list": ("comparisons.0.kind", [], "unknown comparison kind []"),  # unhashable: was exit 3
    "trials 10**400": ("comparisons.0.trials", 10**400, "an integer of 401 digits is out of range"),
}


@pytest.mark.parametrize("name", MALFORMED)
def test_malformed_results_with_a_valid_checksum(cli, one_line_error, tmp_path: Path, name: str) -> None:
    where, value, field = MALFORMED[name]
    data = results(110)
    data["comparisons"].append(dict(EPSILON_ROW))
    result = cli("gate", write_results(tmp_path / "results.json", _edit(data, where, value)))
    assert result.code == 2, result.err
    assert field in one_line_error(result.err)
    if name == "trials 10**400":  # the report reads results.json too
        result = cli("report", tmp_path / "results.json", "-o", tmp_path / "report.html")
        assert result.code == 2 and field in one_line_error(result.err)
        assert not (tmp_path / "report.html").exists()


@pytest.mark.parametrize(("fixture", "failures"), [("passing", 0), ("violating", 1)])
def test_junit(cli, request, tmp_path: Path, fixture: str, failures: int) -> None:
    path = request.getfixturevalue(fixture)
    junit = tmp_path / "reports" / "gate.xml"
    result = cli("gate", path, "--junit", junit)
    assert result.code == failures
    root = ET.parse(junit).getroot()
    cases = root.findall("testcase")
    ids = [c["id"] for c in json.loads(path.read_text())["comparisons"]]
    assert [c.get("name") for c in cases] == [
        f"Attribute inference · record canaries · {LIKELIHOOD}",
        f"Attribute inference · gradient canaries (distinguishing game) · {ITERATES}"]
    assert int(root.get("tests")) == len(ids) and int(root.get("failures")) == failures
    assert sum(c.find("failure") is not None for c in cases) == failures


@pytest.mark.parametrize("edit", ["emptied", "removed"])
def test_results_without_comparisons_never_pass(cli, one_line_error, tmp_path: Path, edit: str) -> None:
    """A results file whose comparisons were emptied or removed (checksum recomputed) gated as PASS; nothing
    compared is nothing judged: exit 2, and no JUnit file."""
    data = results(190)
    if edit == "emptied":
        data["comparisons"] = []
    else:
        del data["comparisons"]
    path = write_results(tmp_path / "results.json", data)
    junit = tmp_path / "junit.xml"
    result = cli("gate", path, "--junit", junit)
    assert result.code == 2 and "No comparisons were made" in one_line_error(result.err)
    assert result.out == "" and not junit.exists()


def test_a_stricter_alpha_that_leaves_no_power_is_not_a_pass(cli, one_line_error, tmp_path: Path) -> None:
    """200 trials against a bound of 0.6 can fail at α = 0.05 but not at α = 1e-50 (a perfect attack's lower
    bound (α/2)^(1/200) is then 0.56): the gate says which comparisons cannot fail and how many trials they
    would need, exit 2."""
    assert lower_confidence_bound(TRIALS, TRIALS, 1e-50 / 2) <= BOUND
    path = write_results(tmp_path / "results.json", results(110))
    assert cli("gate", path).code == 0
    result = cli("gate", path, "--alpha", "1e-50")
    line = one_line_error(result.err)
    assert result.code == 2 and "cannot fail" in line and "needs at least" in line


FORGED = {
    # a bound raised so that the violation passes: the gate recomputes 1 − f(½) from the stated mechanism
    "bound": ("comparisons.1.bound", 0.99, "comparisons[1].bound: bound 0.99 is not the"),
    # a larger Ball gives a larger bound: Ball of the distinguishing game is ½ by construction
    "ball": ("comparisons.1.ball", 0.9, "comparisons[1].ball"),
    # a displayed claim that differs from the configuration the bounds come from
    "mechanism section": ("mechanism.noise_multiplier", 40.0, "results.mechanism.noise_multiplier"),
    "no stated configuration": ("reproducibility.config", KeyError, "results.reproducibility.config"),
    "stated claim of an ε comparison": ("comparisons.2.claim.noise_multiplier", 40.0,
                                        "comparisons[2].claim.noise_multiplier"),
}


@pytest.mark.parametrize("name", FORGED)
def test_forged_limits_are_refused(cli, one_line_error, tmp_path: Path, name: str) -> None:
    """The reproduced defect: results whose numbers were edited and whose checksum was recomputed were
    re-judged against their stored bounds. The gate re-derives every limit from the stated mechanism."""
    where, value, message = FORGED[name]
    data = results(190)
    data["comparisons"].append(dict(EPSILON_ROW))
    assert cli("gate", write_results(tmp_path / "honest.json", data)).code == 1
    result = cli("gate", write_results(tmp_path / "forged.json", _edit(data, where, value)))
    assert result.code == 2 and message in one_line_error(result.err), result.err


def test_a_checkpoint_bound_may_not_exceed_one_minus_f_of_its_mean_ball(cli, one_line_error, tmp_path: Path) -> None:
    """A checkpoint audit's bound is the mean of per-record bounds at estimated Balls, at most 1 − f(mean
    Ball) (1 − f is concave): below it is accepted, above it refused."""
    data = results(110)
    mean_ball = 0.7
    limit = float(Claim.of(CONFIG.mechanism).add_remove.bound(mean_ball))
    data["comparisons"] = [{"id": "checkpoint/likelihood", "kind": "rate", "game": "checkpoint", "trials": 2000,
                            "successes": 1000, "ball": mean_ball, "bound": limit - 0.01}]
    assert cli("gate", write_results(tmp_path / "ok.json", data)).code == 0
    data["comparisons"][0]["bound"] = limit + 0.01
    result = cli("gate", write_results(tmp_path / "forged.json", data))
    assert result.code == 2 and "comparisons[0].bound" in one_line_error(result.err)


def test_an_hmac_key_makes_results_tamper_evident(cli, one_line_error, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The unkeyed checksum anyone can recompute. With FDP_AUDIT_HMAC_KEY set, results carry a MAC under
    it; the gate refuses results without one, or whose MAC does not match (an edit with a recomputed
    checksum), and accepts its own."""
    monkeypatch.setenv("FDP_AUDIT_HMAC_KEY", "ci-secret")
    signed = write_results(tmp_path / "signed.json", results(190))
    assert "mac" in json.loads(signed.read_text())
    assert cli("gate", signed).code == 1
    monkeypatch.delenv("FDP_AUDIT_HMAC_KEY")
    unsigned = write_results(tmp_path / "unsigned.json", results(190))
    stolen_mac = json.loads(signed.read_text())["mac"]
    edited = results(110)  # the violation turned into a pass, checksum recomputed, the old MAC kept
    forged = write_results(tmp_path / "forged.json", edited)
    forged.write_text(json.dumps({**json.loads(forged.read_text()), "mac": stolen_mac}))
    monkeypatch.setenv("FDP_AUDIT_HMAC_KEY", "ci-secret")
    result = cli("gate", unsigned)
    assert result.code == 2 and "results.mac: no MAC" in one_line_error(result.err)
    result = cli("gate", forged)
    assert result.code == 2 and "results.mac: MAC mismatch" in one_line_error(result.err)
    monkeypatch.setenv("FDP_AUDIT_HMAC_KEY", "another")
    assert cli("gate", signed).code == 2


@pytest.fixture
def progress_shown(monkeypatch: pytest.MonkeyPatch) -> None:
    """Progress as a CI log shows it, from the first moment: these commands' phases take seconds only on real
    audits."""
    from fdp_audit import phases

    monkeypatch.setenv("FDP_AUDIT_PROGRESS", "lines")
    monkeypatch.setattr(phases, "QUIET_SECONDS", 0.0)


def test_gate_and_report_show_progress_in_a_ci_log(cli, passing: Path, tmp_path: Path, progress_shown) -> None:
    """``gate`` and ``report`` sat 8–13 s silent on the demo's results."""
    gated = cli("gate", passing)
    assert gated.code == 0 and "\r" not in gated.err
    for phase in ("re-deriving every limit from the stated configuration", "judging 2 comparisons"):
        assert f"fdp-audit: {phase}: done in " in gated.err, gated.err
    from fdp_audit.auditing.gate import judge

    judged = results(110)
    judged["verdict"] = judge(judged["comparisons"], 0.05)[0]
    reported = cli("report", write_results(tmp_path / "judged.json", judged), "-o", tmp_path / "report.html")
    assert reported.code == 0 and "fdp-audit: drawing the report: done in " in reported.err, reported.err


def test_reproduce_shows_progress_in_a_ci_log(cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              progress_shown) -> None:
    """``reproduce gate_proof --quick`` ran 220 s without a line: a reproduction says it is running."""
    import time

    import fdp_audit.reproduce

    def reproduction(name: str, out: Path, quick: bool) -> dict[str, str]:
        time.sleep(0.2)
        return {"summary": "done", "markdown": str(out / f"{name}.md")}

    monkeypatch.setattr(fdp_audit.reproduce, "run_reproduction", reproduction)
    result = cli("reproduce", "label_dp", "--quick", "--out", tmp_path)
    assert result.code == 0
    lines = result.err.splitlines()
    assert lines[0].startswith("fdp-audit: reproduce label_dp --quick: running (")
    assert lines[-1].startswith("fdp-audit: reproduce label_dp --quick: done in ")


def test_library_gate_is_what_the_command_prints(cli, violating: Path, tmp_path: Path) -> None:
    """The command is a thin layer over fdp_audit.gate: the same verdict, lines and JUnit, from the file or from
    its dictionary."""
    import fdp_audit

    junit = tmp_path / "junit.xml"
    printed = cli("gate", violating, "--junit", junit)
    from_file, in_memory = fdp_audit.gate(violating), fdp_audit.gate(results(190))
    assert printed.code == 1 and from_file.failed and in_memory.failed
    assert printed.out == "\n".join(from_file.lines()) + "\n"
    assert junit.read_text() == from_file.junit() == in_memory.junit()
    assert not fdp_audit.gate(results(110)).failed


def test_missing_file_is_said_before_the_heavy_imports(tmp_path: Path) -> None:
    import subprocess
    import sys

    code = ("import sys; from fdp_audit.cli import main; code = main(['gate', sys.argv[1]]); "
            "print(code, 'numpy' in sys.modules, 'torch' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path / "absent.json")], capture_output=True,
                          text=True, check=True)
    assert done.stdout.split() == ["2", "False", "False"] and "not found" in done.stderr
