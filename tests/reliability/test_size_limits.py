"""Size limits on everything read from a file a hostile user could supply: configs, data tables,
checkpoints, results.json and the trial journal are read through :func:`read_bounded`, which never holds more
than the limit plus one byte. The limits are lowered here by monkeypatching, so that nothing large is written."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fdp_audit.auditing import journal, results
from fdp_audit.bounded_read import read_bounded
from fdp_audit.config import load_config
from fdp_audit.data.formats import load_criteo, load_csv, load_purchase
from fdp_audit.errors import BadInputError
from fdp_audit.report import render
from fdp_audit.training import checkpoint


def test_read_bounded_reads_at_most_one_byte_past_the_limit(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"x" * 10)
    assert read_bounded(path, 10) == b"x" * 10
    with pytest.raises(BadInputError, match="larger than the limit of 9 bytes"):
        read_bounded(path, 9)


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="needs /dev/zero")
def test_endless_and_special_files_are_refused_without_reading_them() -> None:
    """/dev/zero never ends; a FIFO would block forever. Neither is a regular file."""
    with pytest.raises(BadInputError, match="not a regular file"):
        read_bounded("/dev/zero", 1 << 30, "config file")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    with pytest.raises(BadInputError, match="not a regular file"):
        load_config(fifo)


@pytest.mark.parametrize("path", ["a" * 5000, "a\0b"], ids=["name too long", "NUL byte"])
def test_unusable_paths_are_bad_input(path: str) -> None:
    with pytest.raises(BadInputError) as caught:
        read_bounded(path, 100, "data file", "data.path")
    assert caught.value.field == "data.path" and len(str(caught.value)) < 400


def test_every_reader_has_a_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each reader refuses a file one byte over its (lowered) limit with a message naming the limit."""
    big = tmp_path / "big"
    big.write_bytes(b"{" + b" " * 200 + b"}\n")
    monkeypatch.setattr("fdp_audit.config.MAX_CONFIG_BYTES", 200)
    monkeypatch.setattr(results, "MAX_RESULTS_BYTES", 200)
    monkeypatch.setattr(render, "MAX_RESULTS_BYTES", 200)
    monkeypatch.setattr(checkpoint, "MAX_CHECKPOINT_BYTES", 200)
    monkeypatch.setattr(journal, "MAX_JOURNAL_BYTES", 200)
    readers = {
        "config": lambda: load_config(big),
        "results": lambda: results.read_results(big),
        "report": lambda: render.load_results(big),
        "checkpoint": lambda: checkpoint.load_checkpoint(big),
        "journal": lambda: journal.Journal(big, "hash"),
        "csv": lambda: load_csv(big, ("a",), (), max_bytes=200),
        "purchase": lambda: load_purchase(big, max_bytes=200),
        "criteo": lambda: load_criteo(big, max_bytes=200),
    }
    for name, read in readers.items():
        with pytest.raises(BadInputError) as caught:
            read()
        assert "larger than the limit of 200 bytes" in str(caught.value), name


def test_default_limits_are_stated() -> None:
    """The limits in force (README, "Guarantees and failure modes")."""
    from fdp_audit.config import MAX_CONFIG_BYTES
    from fdp_audit.data.formats import MAX_DATA_BYTES

    assert MAX_CONFIG_BYTES == 1_000_000 and MAX_DATA_BYTES == 1 << 30
    assert checkpoint.MAX_CHECKPOINT_BYTES == 1 << 30 and results.MAX_RESULTS_BYTES == 64 << 20
    assert journal.MAX_JOURNAL_BYTES == 1 << 30


def test_oversized_inputs_through_the_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli, one_line_error) -> None:
    big = tmp_path / "results.json"
    big.write_text("{}" + " " * 300)
    monkeypatch.setattr(results, "MAX_RESULTS_BYTES", 200)
    monkeypatch.setattr(render, "MAX_RESULTS_BYTES", 200)
    for argv in (["gate", big], ["report", big, "-o", tmp_path / "report.html"]):
        result = cli(*argv)
        assert result.code == 2 and "larger than the limit" in one_line_error(result.err)
    assert not (tmp_path / "report.html").exists()


def test_a_malformed_journal_entry_is_refused_not_a_crash(tmp_path: Path) -> None:
    """A torn or foreign line is skipped; a line of this configuration that is not a journal entry is refused."""
    path = tmp_path / "journal.jsonl"
    path.write_text('{"config_hash": "h", "game": "attribute", "indices": [0], "labels": []}\n')
    with pytest.raises(BadInputError, match="journal.jsonl line 1: malformed entry"):
        journal.Journal(path, "h")
    assert journal.Journal(path, "other").finished("attribute") == {}
