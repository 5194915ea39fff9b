"""Trial journal (SPEC 5.2): finished trials are appended as JSON lines as soon as their chunk of models is
done, so an interrupted audit resumes without losing or recomputing them. Lines written under another key
(another configuration, code or library version: :func:`fdp_audit.audit.provenance.journal_key`) are
ignored; a torn last line from a killed process is skipped."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from fdp_audit.bounded_read import read_bounded
from fdp_audit.errors import BadInputError

# Far above the journal of the largest audit the config allows (10^6 trials of a few scores each).
MAX_JOURNAL_BYTES = 1 << 30


class Journal:
    def __init__(self, path: Path | None, config_hash: str):
        self.path, self.config_hash = path, config_hash
        self.entries: dict[str, dict[int, tuple[int, dict[str, list[float]]]]] = {}
        if path is not None and path.exists():
            text = read_bounded(path, MAX_JOURNAL_BYTES, "trial journal").decode("utf-8", errors="replace")
            for number, line in enumerate(text.splitlines(), start=1):
                try:
                    row = json.loads(line)
                except (ValueError, RecursionError):
                    continue
                if not isinstance(row, dict) or row.get("config_hash") != config_hash:
                    continue
                try:
                    game = self.entries.setdefault(str(row["game"]), {})
                    for i, index in enumerate(row["indices"]):
                        game[int(index)] = (int(row["labels"][i]), {a: s[i] for a, s in row["scores"].items()})
                except (KeyError, IndexError, TypeError, ValueError, AttributeError):
                    raise BadInputError(f"{path} line {number}: malformed entry; delete the journal to start the "
                                        "audit afresh") from None

    def finished(self, game: str) -> dict[int, tuple[int, dict[str, list[float]]]]:
        return self.entries.get(game, {})

    def check_reusable(self, game: str, indices: np.ndarray, secrets: np.ndarray, attacks: Iterable[str],
                       width: int) -> None:
        """Before ``game``'s journaled trials among ``indices`` are reused (and before its attacks are fitted):
        each must have been journaled with the secret this run draws for it and hold ``width`` numbers for
        every attack in ``attacks``. The key (:func:`fdp_audit.audit.provenance.journal_key`) should make a
        mismatch impossible; one means an edited or foreign journal, whose scores paired with this run's
        secrets would not be a success rate at all, so it stops the audit."""
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
        row = {"config_hash": self.config_hash, "game": game, "indices": [int(i) for i in indices],
               "labels": [int(v) for v in labels], "scores": {a: s.tolist() for a, s in scores.items()}}
        entries = self.entries.setdefault(game, {})
        for i, index in enumerate(indices):
            entries[int(index)] = (int(labels[i]), {a: s[i].tolist() for a, s in scores.items()})
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a+b") as handle:
            # after a killed run's torn last line, start a new line rather than extend (and lose) it
            size = handle.seek(0, os.SEEK_END)
            torn = size > 0 and handle.seek(size - 1) >= 0 and handle.read(1) != b"\n"
            handle.write((("\n" if torn else "") + json.dumps(row) + "\n").encode("utf-8"))
            handle.flush()
            os.fsync(handle.fileno())


def secret_digests(secrets: np.ndarray) -> np.ndarray:
    """One integer per row of a continuous secret (a reconstruction target), for the journal's secret slot:
    the first 62 bits of the SHA-256 of the row's float64 bytes."""
    rows = np.ascontiguousarray(secrets, dtype=np.float64).reshape(len(secrets), -1)
    return np.array([int.from_bytes(hashlib.sha256(row.tobytes()).digest()[:8], "big") >> 2 for row in rows],
                    dtype=np.int64)
