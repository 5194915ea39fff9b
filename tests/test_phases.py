"""Progress of long phases (fdp_audit/phases.py): plain lines in a CI log, nothing for a quick phase."""

from __future__ import annotations

import pytest

from fdp_audit.phases import Phase


def test_forced_lines_at_every_tenth_and_at_the_end(monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("FDP_AUDIT_PROGRESS", "lines")
    with Phase("attribute game: 200 models", 200, "model-step") as phase:
        for _ in range(40):
            phase.update(5)
    lines = capsys.readouterr().err.splitlines()
    assert [line.rsplit(": ", 1)[1].split(" ")[0] for line in lines[:-1]] == [f"{k}0%" for k in range(1, 10)]
    assert lines[-1].startswith("fdp-audit: attribute game: 200 models: done in ")


def test_a_quick_phase_in_a_log_says_nothing_and_a_failed_one_no_done(monkeypatch: pytest.MonkeyPatch,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("FDP_AUDIT_PROGRESS", raising=False)  # stderr is captured: not a terminal
    with Phase("quick", 10) as phase:
        phase.update(10)
    assert capsys.readouterr().err == ""
    monkeypatch.setenv("FDP_AUDIT_PROGRESS", "lines")
    with pytest.raises(RuntimeError), Phase("fails", 10) as phase:
        phase.update(5)
        raise RuntimeError
    assert "done" not in capsys.readouterr().err
    monkeypatch.setenv("FDP_AUDIT_PROGRESS", "0")
    with Phase("off", 10) as phase:
        phase.update(10)
    assert capsys.readouterr().err == ""
