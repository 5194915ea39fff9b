"""Progress of long phases (fdp_audit/phases.py): plain lines in a CI log, never a carriage return, nothing for a
phase under 3 s, and a line for a long phase that reports no steps."""

from __future__ import annotations

import time

import pytest

from fdp_audit import phases
from fdp_audit.phases import Phase


def test_lines_at_every_tenth_and_at_the_end_with_the_total_beside_the_count(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("FDP_AUDIT_PROGRESS", "lines")
    monkeypatch.setattr(phases, "QUIET_SECONDS", 0.0)
    with Phase("attribute game: 200 models", 200, "model-step") as phase:
        for _ in range(40):
            phase.update(5, "loss 0.5")
    err = capsys.readouterr().err
    assert "\r" not in err
    lines = err.splitlines()
    tenths = [line for line in lines if "%" in line]
    assert [line.rsplit(": ", 1)[1].split(" ")[0] for line in tenths] == [f"{k}0%" for k in range(1, 10)]
    assert "(20 of 200 model-steps, loss 0.5; " in tenths[0]
    assert lines[-1].startswith("fdp-audit: attribute game: 200 models: done in ")
    assert lines[-1].endswith("(200 of 200 model-steps, loss 0.5)")


def test_a_quick_phase_says_nothing_even_in_forced_lines(monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """A 0.1 s phase printed ten lines in ``lines`` mode; under 3 s nothing is shown in any mode."""
    for style in ("lines", "", "bar"):
        monkeypatch.setenv("FDP_AUDIT_PROGRESS", style)  # "": stderr is captured, so not a terminal: lines
        with Phase("quick", 10) as phase:
            for _ in range(10):
                time.sleep(0.01)
                phase.update(1)
        assert capsys.readouterr().err == "", style


def test_a_long_phase_without_steps_says_it_is_running(monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("FDP_AUDIT_PROGRESS", raising=False)
    monkeypatch.setattr(phases, "QUIET_SECONDS", 0.05)
    with Phase("gate: re-deriving every limit"):
        time.sleep(0.3)
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].startswith("fdp-audit: gate: re-deriving every limit: running (")
    assert lines[-1].startswith("fdp-audit: gate: re-deriving every limit: done in ")
    assert len(lines) == 2


def test_a_failed_phase_says_no_done_and_off_says_nothing(monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("FDP_AUDIT_PROGRESS", "lines")
    monkeypatch.setattr(phases, "QUIET_SECONDS", 0.0)
    with pytest.raises(RuntimeError), Phase("fails", 10) as phase:
        phase.update(5)
        raise RuntimeError
    assert "done" not in capsys.readouterr().err
    monkeypatch.setenv("FDP_AUDIT_PROGRESS", "0")
    with Phase("off", 10) as phase:
        time.sleep(0.05)
        phase.update(10)
    assert capsys.readouterr().err == ""
