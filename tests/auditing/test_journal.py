"""Trial journal and resume (docs/files.md): finished trials are journaled chunk by chunk, an interrupted
audit resumes without losing or recomputing them, and the resumed results equal an uninterrupted run's."""

from __future__ import annotations

import hashlib
import json
import signal
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from fdp_audit.auditing import provenance
from fdp_audit.auditing.games.reconstruction import secret_values
from fdp_audit.auditing.journal import Journal, secret_digests, trial_digest
from fdp_audit.auditing.provenance import journal_key
from fdp_audit.auditing.runner import run_audit
from fdp_audit.config import config_from_dict, load_config
from fdp_audit.data.prepare import PreparedData, prepare_data
from fdp_audit.errors import BadInputError
from tests.conftest import sigkill_audit_after_first_chunk

VOLATILE = ("created", "checksum")
RUN_SPECIFIC = ("command", "reused_trials")
THIRD_PARTY_EXAMPLES = Path(__file__).parent / "third_party_mechanisms.py"
FINISHED = (0, 1)  # pass or violation: a completed audit either way


def comparable(results: dict[str, Any]) -> dict[str, Any]:
    """Results without what legitimately differs between two runs: the time stamp, the checksum over it, the
    command line that produced them and how many trials they read back from a journal."""
    out = {k: v for k, v in results.items() if k not in VOLATILE}
    out["reproducibility"] = {k: v for k, v in results["reproducibility"].items() if k not in RUN_SPECIFIC}
    return out


def journal_rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def redigest(row: dict[str, Any]) -> dict[str, Any]:
    """What an editor without the HMAC key can do: recompute a line's per-trial digests after editing it."""
    scores = row["scores"]
    row["digests"] = [trial_digest(row["config_hash"], row["game"], index, row["labels"][i],
                                   {a: s[i] for a, s in scores.items() if i < len(s)})
                      for i, index in enumerate(row["indices"])]
    return row


# -- the journal file --------------------------------------------------------------------------------------------

def test_record_and_reload(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "journal.jsonl"
    journal = Journal(path, "hash-a")
    journal.record("distinguishing", np.array([3, 4]), np.array([1, 0]),
                   {"iterates": np.array([[0.1, 0.9], [0.7, -0.2]])})
    journal.record("attribute", np.array([10]), np.array([2]), {"prior": np.array([[0.0, -1.0, -2.0]])})
    again = Journal(path, "hash-a")
    assert again.finished("distinguishing") == {3: (1, {"iterates": [0.1, 0.9]}), 4: (0, {"iterates": [0.7, -0.2]})}
    assert again.finished("attribute") == {10: (2, {"prior": [0.0, -1.0, -2.0]})}
    assert again.finished("simulator") == {}
    assert len(path.read_text().splitlines()) == 2


def test_other_configuration_and_torn_lines_are_ignored(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    Journal(path, "old").record("distinguishing", np.array([0]), np.array([1]), {"iterates": np.array([[1.0, 2.0]])})
    Journal(path, "new").record("distinguishing", np.array([1]), np.array([0]), {"iterates": np.array([[3.0, 4.0]])})
    with open(path, "a", encoding="utf-8") as handle:  # a process killed in the middle of a line
        handle.write('{"config_hash": "new", "game": "distinguishing", "indices": [2], "lab')
    journal = Journal(path, "new")
    assert journal.finished("distinguishing") == {1: (0, {"iterates": [3.0, 4.0]})}
    assert Journal(path, "old").finished("distinguishing") == {0: (1, {"iterates": [1.0, 2.0]})}


def test_appending_after_a_torn_line(tmp_path: Path) -> None:
    """A resumed audit appends its chunks after the torn line of the killed one; they must stay readable."""
    path = tmp_path / "journal.jsonl"
    Journal(path, "h").record("distinguishing", np.array([0]), np.array([1]), {"iterates": np.array([[1.0, 2.0]])})
    with open(path, "a", encoding="utf-8") as handle:
        handle.write('{"config_hash": "h", "game": "distinguishing", "indices": [1], "lab')
    Journal(path, "h").record("distinguishing", np.array([1]), np.array([0]), {"iterates": np.array([[3.0, 4.0]])})
    assert sorted(Journal(path, "h").finished("distinguishing")) == [0, 1]


def test_in_memory_journal_writes_nothing(tmp_path: Path) -> None:
    journal = Journal(None, "x")
    journal.record("distinguishing", np.array([0]), np.array([1]), {"iterates": np.array([[1.0, 2.0]])})
    assert journal.finished("distinguishing") == {0: (1, {"iterates": [1.0, 2.0]})}
    assert list(tmp_path.iterdir()) == []


VERSIONS = {"fdp_audit": "0.1.0", "torch": "2.13.0"}


def _key(raw: dict[str, Any], versions: dict[str, str] = VERSIONS, data: PreparedData | None = None) -> str:
    config = config_from_dict(raw)
    return journal_key(config, versions, data or prepare_data(config.data, config.seed))


def test_journal_key_depends_on_everything_that_changes_trials(small_config, monkeypatch) -> None:
    """Configuration, data, library versions and the source of the code that runs a trial: a journal written
    by another version of the streams would pair its scores with other secrets."""
    raw = small_config()
    base = _key(raw)
    assert base == _key(small_config(), dict(VERSIONS))
    assert base != _key(small_config(seed=1))
    assert base != _key(small_config(mechanism={"steps": 21}))
    assert base != _key(small_config(audit={"trials": 25}))
    assert base != _key(raw, {**VERSIONS, "torch": "2.14.0"})
    data = prepare_data(config_from_dict(raw).data, raw["seed"])
    assert base == _key(raw, data=data)
    edited = replace(data, population=replace(data.population, fingerprint="rows edited in the CSV"))
    assert base != _key(raw, data=edited)
    monkeypatch.setattr(provenance, "source_digest", lambda: "edited")
    assert base != _key(raw)


def test_journal_key_leaves_out_where_the_trials_run(small_config) -> None:
    """An audit interrupted on a Dask cluster resumes in-process (and the other way round) on its journal: the
    executor's settings change no trial's numbers (docs/cluster.md)."""
    base = _key(small_config())
    assert base == _key(small_config(audit={"executor": "dask", "workers": 3}))
    assert base == _key(small_config(audit={"executor": "dask", "scheduler": "tcp://10.0.0.1:8786"}))


def test_source_digest_follows_every_file_of_the_packages(tmp_path: Path, monkeypatch) -> None:
    package = tmp_path / "package"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "streams.py").write_text("A = 1\n")
    monkeypatch.setattr(provenance, "PACKAGES", (SimpleNamespace(__file__=str(package / "__init__.py"),
                                                                 __name__="package"),))

    def digest() -> str:
        provenance.source_digest.cache_clear()
        return provenance.source_digest()

    try:
        first = digest()
        assert digest() == first
        (package / "sub" / "streams.py").write_text("A = 2\n")
        edited = digest()
        assert edited != first
        (package / "sub" / "streams.py").rename(package / "sub" / "moved.py")
        assert digest() not in (first, edited)
    finally:
        provenance.source_digest.cache_clear()  # the real packages' digest for the rest of the session


def test_journal_key_follows_a_third_party_source_file(small_config, tmp_path: Path) -> None:
    mechanism = tmp_path / "mechanism.py"
    mechanism.write_text(THIRD_PARTY_EXAMPLES.read_text())
    raw = small_config("dp_sgd", mechanism={"third_party": f"{mechanism}:honest_dp_sgd"})
    before = _key(raw)
    assert _key(raw) == before
    mechanism.write_text(THIRD_PARTY_EXAMPLES.read_text() + "\n# an edit\n")
    assert _key(raw) != before
    # module:function names the module's file
    expected = hashlib.sha256(THIRD_PARTY_EXAMPLES.read_bytes()).hexdigest()
    assert provenance.third_party_digest("tests.auditing.third_party_mechanisms:honest_dp_sgd") == expected


def _flip_secret(row: dict[str, Any]) -> str:
    row["labels"][0] = 1 - row["labels"][0]
    return "another secret"


def _drop_attack(row: dict[str, Any]) -> str:
    del row["scores"]["iterates"]
    return "no 2 scores of attack 'iterates'"


def _ragged_scores(row: dict[str, Any]) -> str:
    row["scores"]["iterates"][0] = [0.5]
    return "no 2 scores of attack 'iterates'"


@pytest.mark.parametrize("edit", [_flip_secret, _drop_attack, _ragged_scores])
def test_an_edited_journal_stops_the_audit(small_config, write_yaml, cli, tmp_path: Path, edit) -> None:
    """Defence in depth behind the key: a journal line with a secret other than the one this run draws, or
    without a score vector of the right length for every attack (a hand-edited or foreign journal under the
    same key), is refused with exit 2 before any model is trained, not averaged in."""
    config = resume_config(small_config, write_yaml, tmp_path, steps=5, chunk=6, trials=16)
    out = tmp_path / "out"
    assert cli("audit", config, "--out", out).code in FINISHED
    rows = journal_rows(out / "journal.jsonl")
    message = edit(rows[0])
    redigest(rows[0])  # past the digests: what the checks of every reused trial catch
    (out / "journal.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    (out / "results.json").unlink()
    result = cli("audit", config, "--out", out)
    assert result.code == 2 and "journal.jsonl: trial" in result.err and message in result.err, result.err
    assert not (out / "results.json").exists()


def test_reconstruction_trials_are_journaled_with_a_digest_of_their_secret(tmp_path: Path) -> None:
    """The reconstruction game's secret is a vector: the journal keeps a digest of it per trial, and a
    journaled digest that differs from this run's secret stops the audit like a categorical one."""
    config = config_from_dict({
        "seed": 5, "device": "cpu",
        "data": {"dataset": "synthetic", "protected": ["protected-0", "protected-1"], "synthetic_rows": 100,
                 "synthetic_prior_kind": "gaussian"},
        "mechanism": {"name": "dp_sgd", "sample_rate": 0.25, "steps": 5, "noise_multiplier": 1.0},
        "audit": {"trials": 10, "games": ["reconstruction"], "attacks": ["prior", "reconstruction"]},
    })
    run_audit(config, tmp_path)
    (row,) = journal_rows(tmp_path / "journal.jsonl")
    truth = secret_values(5, np.array(row["indices"]), "gaussian", 1.0, 2).numpy()
    assert row["labels"] == secret_digests(truth).tolist()
    row["labels"][3] += 1
    (tmp_path / "journal.jsonl").write_text(json.dumps(redigest(row)) + "\n")
    with pytest.raises(BadInputError, match="trial .* another secret"):
        run_audit(config, tmp_path)


# -- resume ------------------------------------------------------------------------------------------------------

def resume_config(small_config, write_yaml, folder: Path, steps: int, chunk: int, trials: int) -> Path:
    raw = small_config("fdp_sgd", rows=200, mechanism={"steps": steps, "sample_rate": 0.05},
                       audit={"trials": trials, "max_models_per_chunk": chunk,
                              "attacks": ["prior", "iterates", "iterates_public_aligned"]})
    return write_yaml(folder / "resume.yaml", raw)


def test_resume_reuses_journaled_trials(small_config, write_yaml, cli, tmp_path: Path) -> None:
    """In-process: keep the first two chunks of a finished audit's journal, run again, and only the missing
    trials are trained — with the same results as the uninterrupted run. (The verdict is not what is tested:
    exit code 0 or 1 are both finished audits.)"""
    config = resume_config(small_config, write_yaml, tmp_path, steps=10, chunk=6, trials=24)
    full = tmp_path / "full"
    assert cli("audit", config, "--out", full).code in FINISHED
    rows = journal_rows(full / "journal.jsonl")
    assert [len(r["indices"]) for r in rows] == [6, 6, 6, 6]
    partial = tmp_path / "partial"
    partial.mkdir()
    lines = (full / "journal.jsonl").read_text().splitlines(keepends=True)
    (partial / "journal.jsonl").write_text("".join(lines[:2]))
    assert cli("audit", config, "--out", partial).code in FINISHED
    resumed = journal_rows(partial / "journal.jsonl")
    assert resumed[:2] == rows[:2] and len(resumed) == 4  # two chunks reused, two trained
    indices = [i for r in resumed for i in r["indices"]]
    assert sorted(indices) == list(range(24))  # nothing recomputed, nothing lost
    assert comparable(json.loads((partial / "results.json").read_text())) == comparable(
        json.loads((full / "results.json").read_text()))
    # a second complete run trains nothing
    assert cli("audit", config, "--out", partial).code in FINISHED
    assert len(journal_rows(partial / "journal.jsonl")) == 4


@pytest.mark.slow
def test_sigkill_then_resume(small_config, write_yaml, cli, tmp_path: Path) -> None:
    """A real interruption: SIGKILL a command-line audit after its first chunk is journaled. Nothing but the
    journal is left (no partial results.json or report); the re-run keeps the journaled trials (their
    indices appear once in the journal) and its results equal an uninterrupted run with the same seed."""
    trials, chunk = 32, 4  # 32: enough for the comparisons to be able to fail at 150 steps
    config = resume_config(small_config, write_yaml, tmp_path, steps=150, chunk=chunk, trials=trials)
    out = tmp_path / "killed"
    journal = out / "journal.jsonl"
    assert sigkill_audit_after_first_chunk([str(config)], out) == -signal.SIGKILL
    killed_rows = journal_rows(journal)
    done = [i for r in killed_rows for i in r["indices"]]
    assert 0 < len(done) < trials, "the kill must land between the first and the last chunk"
    leftovers = sorted(p.name for p in out.iterdir())
    assert leftovers == ["journal.jsonl"], leftovers  # no results.json, no report.html, no temporary file

    assert cli("audit", config, "--out", out).code in FINISHED
    rows = journal_rows(journal)
    assert rows[:len(killed_rows)] == killed_rows
    indices = [i for r in rows for i in r["indices"]]
    assert sorted(indices) == list(range(trials))  # each trial trained exactly once over both runs
    assert sum(len(r["indices"]) for r in rows[len(killed_rows):]) == trials - len(done)

    reference = tmp_path / "reference"
    assert cli("audit", config, "--out", reference).code in FINISHED
    assert comparable(json.loads((out / "results.json").read_text())) == comparable(
        json.loads((reference / "results.json").read_text()))
    assert load_config(config).audit.max_models_per_chunk == chunk


# -- forged journals, visible reuse, the user's imported modules ----------------------------------------------------

def _swap_columns(row: dict[str, Any]) -> None:
    for attack, scores in row["scores"].items():
        row["scores"][attack] = [values[::-1] for values in scores]


def test_a_journal_with_swapped_score_columns_is_refused(small_config, write_yaml, cli, tmp_path: Path) -> None:
    """The reproduced defect: swapping every trial's two score columns turned each correct guess into a wrong
    one, a VIOLATION into a PASS. Each trial's digest (over the run key, trial, secret and scores) no longer
    matches: exit 2 before anything is trained, nothing written."""
    config = resume_config(small_config, write_yaml, tmp_path, steps=5, chunk=6, trials=16)
    out = tmp_path / "out"
    assert cli("audit", config, "--out", out).code in FINISHED
    rows = journal_rows(out / "journal.jsonl")
    for row in rows:
        _swap_columns(row)
    (out / "journal.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    (out / "results.json").unlink()
    result = cli("audit", config, "--out", out)
    assert result.code == 2 and "line 1: trial 0 does not match its digest" in result.err, result.err
    assert not (out / "results.json").exists()


def test_with_an_hmac_key_recomputed_digests_do_not_pass(small_config, write_yaml, cli, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Unkeyed digests only catch an editor who does not recompute them. Under FDP_AUDIT_HMAC_KEY an editor
    without the key cannot: swapped columns with recomputed plain digests are refused."""
    monkeypatch.setenv("FDP_AUDIT_HMAC_KEY", "ci-secret")
    config = resume_config(small_config, write_yaml, tmp_path, steps=5, chunk=6, trials=16)
    out = tmp_path / "out"
    assert cli("audit", config, "--out", out).code in FINISHED
    rows = journal_rows(out / "journal.jsonl")
    _swap_columns(rows[0])
    monkeypatch.delenv("FDP_AUDIT_HMAC_KEY")
    redigest(rows[0])
    (out / "journal.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    monkeypatch.setenv("FDP_AUDIT_HMAC_KEY", "ci-secret")
    result = cli("audit", config, "--out", out)
    assert result.code == 2 and "does not match its digest" in result.err, result.err


def test_reuse_is_reported(small_config, write_yaml, cli, tmp_path: Path) -> None:
    """Reusing journaled trials was silent: a re-run says how many trials it read back, on stderr and in
    results.json (reproducibility.reused_trials, per game)."""
    config = resume_config(small_config, write_yaml, tmp_path, steps=5, chunk=6, trials=16)
    out = tmp_path / "out"
    first = cli("audit", config, "--out", out)
    assert first.code in FINISHED and "reused" not in first.err
    assert json.loads((out / "results.json").read_text())["reproducibility"]["reused_trials"] == {}
    again = cli("audit", config, "--out", out)
    assert again.code == first.code
    assert f"reused 16 trials from {out / 'journal.jsonl'} (distinguishing 16)" in again.err
    assert json.loads((out / "results.json").read_text())["reproducibility"]["reused_trials"] == {
        "distinguishing": 16}


def test_editing_a_module_the_mechanism_imports_invalidates_its_trials(
        small_config, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, verdict_only_audit) -> None:
    """The reproduced defect: after an edit of a module that the third-party file imports (not the file
    itself) the old trials were reused — a PASS instead of a VIOLATION. Every journal line lists the user's
    loaded source files; lines whose files changed are not reused, whether the module was imported when the
    file was loaded or only when the mechanism was called."""
    package = tmp_path / "code"
    package.mkdir()
    (package / "noise_scale.py").write_text("DIVISOR = 1.0\n")
    (package / "late_import.py").write_text("OFFSET = 0.0\n")
    mechanism = package / "mechanism.py"
    mechanism.write_text(
        "import noise_scale\n"
        "from tests.auditing.third_party_mechanisms import _dp_sgd\n\n\n"
        "def train(problem, seed, canary):\n"
        "    import late_import\n\n"
        "    return _dp_sgd(problem, seed, canary, noise_divisor=noise_scale.DIVISOR + late_import.OFFSET)\n")
    monkeypatch.syspath_prepend(str(package))
    raw = small_config("dp_sgd", mechanism={"third_party": f"{mechanism}:train", "sample_rate": 1.0, "steps": 2,
                                            "noise_multiplier": 2.0},
                       audit={"trials": 24, "games": ["attribute"], "attacks": ["prior", "likelihood"]})
    config = config_from_dict(raw)
    out = tmp_path / "out"
    verdict_only_audit(config, out)
    assert verdict_only_audit(config, out)["reproducibility"]["reused_trials"] == {"attribute": 24}
    listed = journal_rows(out / "journal.jsonl")[0]["sources"]
    assert {str((package / name).resolve()) for name in ("noise_scale.py", "late_import.py")} <= set(listed)
    for edited in ("noise_scale.py", "late_import.py"):
        (package / edited).write_text((package / edited).read_text() + "# edited\n")
        assert verdict_only_audit(config, out)["reproducibility"]["reused_trials"] == {}, edited
        assert verdict_only_audit(config, out)["reproducibility"]["reused_trials"] == {"attribute": 24}
