"""Progress of the long phases of a command (training the models of a game, the attacks, shadow models), on
stderr: a tqdm bar on a terminal; in a CI log (stderr not a terminal) plain lines — at every tenth of the
phase and when it ends, with the time taken — never a bar redrawn with carriage returns. Either appears only
once a phase has run for :data:`QUIET_SECONDS`, so quick phases print nothing.

``FDP_AUDIT_PROGRESS=0`` turns both off; ``lines`` forces the plain lines (from the first moment), ``bar`` the bar.
"""

from __future__ import annotations

import os
import sys
import time
from types import TracebackType

from tqdm.auto import tqdm

LINES_PER_PHASE = 10  # a CI line at every tenth of the phase
QUIET_SECONDS = 3.0


def progress_style() -> str:
    """``bar``, ``lines`` or ``off``: the environment's choice, else a bar on a terminal and lines elsewhere."""
    chosen = os.environ.get("FDP_AUDIT_PROGRESS", "").strip().lower()
    if chosen in ("0", "off", "no", "false"):
        return "off"
    if chosen in ("bar", "lines"):
        return chosen
    return "bar" if sys.stderr.isatty() else "lines"


class Phase:
    """``with Phase("attribute game: training 200 models", total, "model-step") as phase: phase.update(n)``."""

    def __init__(self, description: str, total: int, unit: str = "step"):
        self.description, self.total, self.unit = description, max(int(total), 1), unit
        self.style = progress_style()
        forced = os.environ.get("FDP_AUDIT_PROGRESS", "").strip().lower() == "lines"
        self.quiet_until = time.monotonic() + (0.0 if forced else QUIET_SECONDS)
        self.done, self.next_line, self.spoke, self.finished = 0, 1, False, False
        self.start = time.monotonic()
        self.bar = (tqdm(total=self.total, desc=description, unit=unit, leave=False, delay=QUIET_SECONDS)
                    if self.style == "bar" else None)

    def _line(self, text: str) -> None:
        if self.style == "lines" and time.monotonic() >= self.quiet_until:
            print(f"fdp-audit: {self.description}: {text}", file=sys.stderr, flush=True)
            self.spoke = True

    def update(self, n: int = 1) -> None:
        self.done = min(self.done + int(n), self.total)
        if self.bar is not None:
            self.bar.update(int(n))
        if self.done * LINES_PER_PHASE >= self.next_line * self.total and self.done < self.total:
            self._line(f"{self.done / self.total:.0%} ({time.monotonic() - self.start:.0f} s)")
            while self.next_line * self.total <= self.done * LINES_PER_PHASE:
                self.next_line += 1

    def finish(self, succeeded: bool = True) -> None:
        """End the phase (once): close the bar, and in a log say how long it took if it said anything."""
        if self.finished:
            return
        self.finished = True
        if self.bar is not None:
            self.bar.close()
        if succeeded and self.spoke:
            self._line(f"done in {time.monotonic() - self.start:.1f} s")

    def __enter__(self) -> Phase:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.finish(succeeded=kind is None)
