"""Trial journal (docs/files.md): finished trials are appended as JSON lines as soon as their chunk of models is
done, so an interrupted audit resumes without losing or recomputing them. Lines written under another key
(another configuration, code or library version: :func:`fdp_audit.auditing.provenance.journal_key`) are
ignored; a torn last line from a killed process is skipped; a line whose trials do not match their digests
stops the audit. How many trials were read back is reported (``reused``)."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np

from fdp_audit.atomic_io import naming
from fdp_audit.auditing.integrity import HMAC_KEY_VARIABLE, keyed_digest, same_digest
from fdp_audit.auditing.provenance import file_digest
from fdp_audit.bounded_read import read_bounded
from fdp_audit.errors import BadInputError

# Far above the journal of the largest audit the config allows (10^6 trials of a few scores each).
MAX_JOURNAL_BYTES = 1 << 30


class Journal:
    """Finished trials under one run key.

    Each line holds a chunk of trials with one digest per trial (:func:`trial_digest`) of the key, the game,
    the trial index, its secret and its scores: a line whose numbers were edited (swapped score columns, a
    changed secret) no longer matches and stops the audit. ``sources``, when given, lists the user's source
    files that produced the trials (a third-party mechanism's modules, :func:`fdp_audit.auditing.provenance.
    user_source_digests`); lines whose listed files have changed since are stale and not reused."""

    def __init__(self, path: Path | None, config_hash: str,
                 sources: Callable[[], dict[str, str]] | None = None):
        self.path, self.config_hash, self.sources = path, config_hash, sources
        self.entries: dict[str, dict[int, tuple[int, dict[str, list[float]]]]] = {}
        self.reused: dict[str, int] = {}  # trials per game read back from the file
        self._digests: dict[str, str] = {}  # source files read while checking lines
        if path is not None and path.exists():
            text = read_bounded(path, MAX_JOURNAL_BYTES, "trial journal").decode("utf-8", errors="replace")
            for number, line in enumerate(text.splitlines(), start=1):
                try:
                    row = json.loads(line)
                except (ValueError, RecursionError):
                    continue
                if not isinstance(row, dict) or row.get("config_hash") != config_hash or self._stale(row):
                    continue
                try:
                    game = self.entries.setdefault(str(row["game"]), {})
                    for i, index in enumerate(row["indices"]):
                        label, scores = int(row["labels"][i]), {a: s[i] for a, s in row["scores"].items()}
                        if not same_digest(row["digests"][i], trial_digest(config_hash, row["game"], int(index),
                                                                           label, scores)):
                            raise BadInputError(f"{path} line {number}: trial {index} does not match its digest: "
                                                "the journal was edited, or written under another "
                                                f"{HMAC_KEY_VARIABLE}; delete it to start the audit afresh")
                        self.reused[row["game"]] = self.reused.get(row["game"], 0) + (int(index) not in game)
                        game[int(index)] = (label, scores)
                except (KeyError, IndexError, TypeError, ValueError, AttributeError):
                    raise BadInputError(f"{path} line {number}: malformed entry; delete the journal to start the "
                                        "audit afresh") from None

    def _stale(self, row: dict) -> bool:
        """A line from source files that have changed since (only when sources are tracked)."""
        if self.sources is None:
            return False
        listed = row.get("sources")
        if not isinstance(listed, dict):
            return True
        for path, digest in listed.items():
            if path not in self._digests:
                self._digests[path] = file_digest(Path(path))
            if self._digests[path] != digest:
                return True
        return False

    def finished(self, game: str) -> dict[int, tuple[int, dict[str, list[float]]]]:
        """The journaled trials of a game.

        Args:
            game: the game's name.

        Returns:
            Trial index → (secret, scores by attack).
        """
        return self.entries.get(game, {})

    def check_reusable(self, game: str, indices: np.ndarray, secrets: np.ndarray, attacks: Iterable[str],
                       width: int) -> None:
        """Before ``game``'s journaled trials among ``indices`` are reused (and before its attacks are fitted):
        each must have been journaled with the secret this run draws for it and hold ``width`` numbers for
        every attack in ``attacks``. The key (:func:`fdp_audit.auditing.provenance.journal_key`) should make a
        mismatch impossible; one means an edited or foreign journal, whose scores paired with this run's
        secrets would not be a success rate at all, so it stops the audit.

        Args:
            game: the game's name.
            indices: the trials' model indices, shape (R,).
            secrets: the secrets this run draws for them, shape (R,).
            attacks: the attacks whose scores are reused.
            width: the numbers per attack and trial (:meth:`fdp_audit.auditing.games.Game.score_width`).

        Raises:
            BadInputError: a journaled trial has another secret or lacks an attack's scores.
        """
        finished, names = self.finished(game), tuple(attacks)
        for index, secret in zip(indices.tolist(), secrets.tolist()):
            if index not in finished:
                continue
            stored, scores = finished[index]
            if stored != secret:
                raise BadInputError(f"trial {index} was journaled with another secret than this run draws; the "
                                    "journal belongs to another run: delete it to start the audit afresh",
                                    self._where())
            for name in names:
                values = scores.get(name)
                if not isinstance(values, list) or len(values) != width or not all(
                        isinstance(v, (int, float)) for v in values):
                    raise BadInputError(f"trial {index} has no {width} scores of attack {name!r}; delete the "
                                        "journal to start the audit afresh", self._where())

    def _where(self) -> str:
        return str(self.path) if self.path is not None else "journal"

    def record(self, game: str, indices: np.ndarray, labels: np.ndarray, scores: dict[str, np.ndarray]) -> None:
        """Keep a finished chunk of trials and, when the journal has a file, append it there (one fsynced JSON line;
        after a torn last line, a new one) with a digest per trial and, when tracked, the user's source files'
        digests.

        Args:
            game: the game's name.
            indices: the trials' model indices, shape (R,).
            labels: their secrets, shape (R,).
            scores: every attack's scores, each of shape (R, width).
        """
        entries = self.entries.setdefault(game, {})
        digests = []
        for i, index in enumerate(indices):
            trial = {a: s[i].tolist() for a, s in scores.items()}
            entries[int(index)] = (int(labels[i]), trial)
            digests.append(trial_digest(self.config_hash, game, int(index), int(labels[i]), trial))
        row = {"config_hash": self.config_hash, "game": game, "indices": [int(i) for i in indices],
               "labels": [int(v) for v in labels], "scores": {a: s.tolist() for a, s in scores.items()},
               "digests": digests}
        if self.sources is not None:  # what produced these trials, read after the mechanism ran
            row["sources"] = self.sources()
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with naming(self.path), open(self.path, "a+b") as handle:
            # after a killed run's torn last line, start a new line rather than extend (and lose) it
            size = handle.seek(0, os.SEEK_END)
            torn = size > 0 and handle.seek(size - 1) >= 0 and handle.read(1) != b"\n"
            handle.write((("\n" if torn else "") + json.dumps(row) + "\n").encode("utf-8"))
            handle.flush()
            os.fsync(handle.fileno())


def trial_digest(key: str, game: str, index: int, secret: int, scores: dict[str, list[float]]) -> str:
    """One journaled trial's digest, tied to the run key (:func:`fdp_audit.auditing.integrity.keyed_digest`:
    HMAC under ``FDP_AUDIT_HMAC_KEY`` when set). JSON writes floats so that they read back exactly, so the
    digest of a line read back equals the one written.

    Args:
        key: the run key.
        game: the game's name.
        index: the trial's model index.
        secret: its secret.
        scores: its scores by attack.

    Returns:
        The hex digest.
    """
    return keyed_digest([key, game, index, secret, scores])


def secret_digests(secrets: np.ndarray) -> np.ndarray:
    """One integer per row of a continuous secret (a reconstruction target), for the journal's secret slot:
    the first 62 bits of the SHA-256 of the row's float64 bytes.

    Args:
        secrets: the secrets, shape (N, ...).

    Returns:
        Non-negative int64 digests, shape (N,).
    """
    rows = np.ascontiguousarray(secrets, dtype=np.float64).reshape(len(secrets), -1)
    return np.array([int.from_bytes(hashlib.sha256(row.tobytes()).digest()[:8], "big") >> 2 for row in rows],
                    dtype=np.int64)
