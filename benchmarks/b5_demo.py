"""B5 (docs/training.md): wall time and peak memory of ``fdp-audit demo`` (docs/design.md: "in a few minutes on a 2-core
laptop", taken here as a 300 s budget, the baseline of the ratio).

The demo runs as a child process writing into a temporary folder, so a user's ``reports/demo`` is left
alone; its peak resident memory is the children's ``ru_maxrss``. A failed or timed-out demo gives a record
with ``error`` rather than an exception.
"""

from __future__ import annotations

import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.timing import Record, error_record

BUDGET_SECONDS = 300.0
TIMEOUT_SECONDS = 600


def run() -> list[Record]:
    name = "b5_demo_wall_time"
    with tempfile.TemporaryDirectory(prefix="fdp-audit-bench-") as folder:
        command = [sys.executable, "-m", "fdp_audit", "demo", "--out", folder]
        start = time.perf_counter()
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            return [error_record(name, f"timed out after {TIMEOUT_SECONDS} s")]
        seconds = time.perf_counter() - start
        if done.returncode != 0:
            lines = (done.stderr or done.stdout).strip().splitlines()
            return [error_record(name, f"exit code {done.returncode}: {lines[-1] if lines else 'no output'}")]
        report_written = (Path(folder) / "report.html").is_file()
    peak_mib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # kilobytes on Linux
    return [{
        "name": name, "ours": round(seconds, 1), "baseline": BUDGET_SECONDS,
        "ratio": round(seconds / BUDGET_SECONDS, 3), "unit": "s", "n": 1, "spread": None,
        "peak_rss_mib": round(peak_mib, 1), "report_written": report_written,
        "note": "fdp-audit demo end to end (train, audit, report) in a child process, wall time; baseline: the "
                "docs/design.md budget of a few minutes taken as 300 s; peak_rss_mib: largest child resident set",
    }]
