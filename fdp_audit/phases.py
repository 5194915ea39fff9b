"""Progress of the long phases of a command (training the models of a game, the attacks, shadow models, the gate's
re-derivation of every limit, drawing a report, a reproduction), on stderr: a tqdm bar on a terminal; in a CI log
(stderr not a terminal) plain lines — at every tenth of the phase and when it ends, with the time taken — never a
bar redrawn with carriage returns. Nothing appears before a phase has run :data:`QUIET_SECONDS`, so a quick phase
prints nothing, whichever style is chosen.

A phase that reports no steps for a while (one long computation, or inner phases that are each quick) still says
that it is running: once it has run :data:`QUIET_SECONDS`, and then every :data:`HEARTBEAT_SECONDS` in which no
phase printed a line.

``FDP_AUDIT_PROGRESS=0`` turns both off; ``lines`` forces the plain lines, ``bar`` the bar.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from types import TracebackType

from tqdm.auto import tqdm

LINES_PER_PHASE = 10  # a CI line at every tenth of the phase
QUIET_SECONDS = 3.0
HEARTBEAT_SECONDS = 30.0

_LOCK = threading.Lock()  # one line at a time from the phases and their heartbeats
_last_line = [0.0]  # when any phase last printed a line (monotonic seconds)


def progress_style() -> str:
    """``bar``, ``lines`` or ``off``: the environment's choice, else a bar on a terminal and lines elsewhere.

    Returns:
        ``"off"`` when ``FDP_AUDIT_PROGRESS`` is ``0``/``off``/``no``/``false``; ``"bar"`` or ``"lines"`` when it
        says so; else ``"bar"`` when stderr is a terminal and ``"lines"`` when not.
    """
    chosen = os.environ.get("FDP_AUDIT_PROGRESS", "").strip().lower()
    if chosen in ("0", "off", "no", "false"):
        return "off"
    if chosen in ("bar", "lines"):
        return chosen
    return "bar" if sys.stderr.isatty() else "lines"


class Phase:
    """``with Phase("attribute game: training 200 models", total, "model-step") as phase: phase.update(n)``.

    ``note`` (set with :meth:`update`) is shown after the count: the training loss and ε spent, say."""

    def __init__(self, description: str, total: int = 1, unit: str = "step"):
        self.description, self.total, self.unit = description, max(int(total), 1), unit
        self.style = progress_style()
        self.start = time.monotonic()
        self.done, self.next_line, self.spoke, self.finished, self.note = 0, 1, False, False, ""
        self.bar = (tqdm(total=self.total, desc=description, unit=unit, leave=False, delay=QUIET_SECONDS)
                    if self.style == "bar" else None)
        self._stop = threading.Event()
        self._heartbeat = None
        if self.style != "off":
            self._heartbeat = threading.Thread(target=self._beat, name="fdp-audit-progress", daemon=True)
            self._heartbeat.start()

    def _elapsed(self) -> float:
        return time.monotonic() - self.start

    def _line(self, text: str) -> None:
        if self.style != "lines" or self._elapsed() < QUIET_SECONDS:
            return
        with _LOCK:
            print(f"fdp-audit: {self.description}: {text}", file=sys.stderr, flush=True)
            _last_line[0] = time.monotonic()
        self.spoke = True

    def _count(self) -> str:
        """``k of N units, note``: what is done, with the total beside it."""
        parts = ([f"{self.done} of {self.total} {self.unit}s"] if self.total > 1 else []) + [self.note]
        return ", ".join(part for part in parts if part)

    def _beat(self) -> None:
        """Say that the phase is running once it has run QUIET_SECONDS, then every HEARTBEAT_SECONDS without a
        line from any phase; on a terminal, redraw the bar so that its clock moves."""
        if self._stop.wait(QUIET_SECONDS):
            return
        while not self._stop.is_set():
            if self.bar is not None:
                self.bar.refresh()
                if self._stop.wait(1.0):
                    return
                continue
            if not self.spoke or time.monotonic() - _last_line[0] >= HEARTBEAT_SECONDS:
                self._line(f"running ({', '.join(filter(None, [self._count(), f'{self._elapsed():.0f} s']))})")
            if self._stop.wait(HEARTBEAT_SECONDS):
                return

    def update(self, n: int = 1, note: str | None = None) -> None:
        """Count ``n`` more units done (capped at the total), and print a line in a log at each tenth of the phase.

        Args:
            n: the units just done.
            note: shown after the count from now on (the training loss, ε spent); None keeps the previous note.
        """
        self.done = min(self.done + int(n), self.total)
        if note is not None:
            self.note = note
            if self.bar is not None:
                self.bar.set_postfix_str(note, refresh=False)
        if self.bar is not None:
            self.bar.update(int(n))
        if self.done * LINES_PER_PHASE >= self.next_line * self.total and self.done < self.total:
            self._line(f"{self.done / self.total:.0%} ({self._count()}; {self._elapsed():.0f} s)")
            while self.next_line * self.total <= self.done * LINES_PER_PHASE:
                self.next_line += 1

    def finish(self, succeeded: bool = True) -> None:
        """End the phase (once): stop its heartbeat, close the bar, and in a log say how long it took if it said
        anything.

        Args:
            succeeded: False when the phase ends with an error: then no "done" line is printed.
        """
        if self.finished:
            return
        self.finished = True
        self._stop.set()
        if self._heartbeat is not None and self._heartbeat is not threading.current_thread():
            self._heartbeat.join()
        if self.bar is not None:
            self.bar.close()
        if succeeded and self.spoke:
            self._line(f"done in {self._elapsed():.1f} s" + (f" ({self._count()})" if self._count() else ""))

    def __enter__(self) -> Phase:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.finish(succeeded=kind is None)
