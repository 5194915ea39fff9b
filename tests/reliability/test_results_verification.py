"""A results file is data (docs/files.md): ``report`` verifies exactly what ``gate`` verifies — the checksum (and
the MAC under ``FDP_AUDIT_HMAC_KEY``), every stored limit re-derived from the stated configuration, and the stored
verdict re-judged from the stored comparisons — for the results and for a baseline alike. Each test reproduces a
defect found by a hostile probe and fails on the code before its fix."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

GATE_PROOF = Path(__file__).parents[1] / "auditing" / "configs"


@pytest.fixture(scope="module")
def violation(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real VIOLATION: dp_sgd_no_clip at p = 1, 60 trials (missed with probability far below 1e-6: the canary's
    raw norm is 10 C against noise 2 C at every step)."""
    from fdp_audit.cli import main

    out = tmp_path_factory.mktemp("violation")
    assert main(["audit", str(GATE_PROOF / "no_clip.yaml"), "--trials", "60", "--out", str(out)]) == 1
    return out / "results.json"


def _edited(source: Path, target: Path, recompute: bool) -> Path:
    """``source`` with its verdict turned into a PASS; its checksum stale, or recomputed as any tool could."""
    from fdp_audit.auditing.results import write_results

    data = json.loads(source.read_text())
    data["verdict"] |= {"status": "PASS", "violations": []}
    if recompute:
        write_results(target, data)
    else:
        target.write_text(json.dumps(data))
    return target


@pytest.mark.parametrize("recompute", [False, True], ids=["stale checksum", "recomputed checksum"])
def test_report_refuses_what_gate_refuses(cli, one_line_error, violation: Path, tmp_path: Path,
                                          recompute: bool) -> None:
    """A VIOLATION edited to PASS rendered "PASS" (exit 0) while ``gate`` refused it (stale checksum) or judged it
    a VIOLATION again (recomputed checksum): both now refuse it, with the same line."""
    edited = _edited(violation, tmp_path / "results.json", recompute)
    gate = cli("gate", edited)
    report = cli("report", edited, "-o", tmp_path / "report.html")
    assert gate.code == report.code == 2
    assert one_line_error(gate.err) == one_line_error(report.err)
    assert not (tmp_path / "report.html").exists()


def test_report_under_a_key_refuses_results_written_without_it(cli, one_line_error, violation: Path,
                                                               tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With the key set at both steps: results edited and re-checksummed by someone without the key carry no MAC;
    ``report`` rendered them."""
    edited = _edited(violation, tmp_path / "results.json", recompute=True)
    monkeypatch.setenv("FDP_AUDIT_HMAC_KEY", "secret of the CI job")
    for argv in (("gate", edited), ("report", edited, "-o", tmp_path / "report.html")):
        result = cli(*argv)
        assert result.code == 2 and "results.mac" in one_line_error(result.err), argv


def test_a_forged_baseline_is_refused_by_report_as_by_gate(cli, one_line_error, violation: Path,
                                                           tmp_path: Path) -> None:
    forged = _edited(violation, tmp_path / "baseline.json", recompute=False)
    gate = cli("gate", violation, "--baseline", forged)
    report = cli("report", violation, "--baseline", forged, "-o", tmp_path / "report.html")
    assert gate.code == report.code == 2
    assert "checksum" in one_line_error(report.err) and one_line_error(gate.err) == one_line_error(report.err)
    assert not (tmp_path / "report.html").exists()


def test_gate_writes_no_summary_beside_a_device(cli, audited_results: Path, tmp_path: Path) -> None:
    """``gate --junit /dev/null`` created ``/dev/null.md``: the Markdown summary goes beside the JUnit file only
    when that is a file (here a link to /dev/null, so that the test writes nothing in /dev)."""
    sink = tmp_path / "junit"
    sink.symlink_to(os.devnull)
    assert cli("gate", audited_results, "--junit", sink).code == 0
    assert list(tmp_path.iterdir()) == [sink]
