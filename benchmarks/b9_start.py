"""B9 (docs/api.md, docs/benchmarks.md): the fixed start cost of every command, measured on the real command.

Each command is run as a user runs it (``fdp-audit COMMAND ...``, the installed console script, its supervisor
and child included) on an input that it refuses with exit 2 at its first check of that input, or, for ``demo``
(which reads no input), until it prints its first line, which it does once its configuration is built and before
it trains. What is timed is everything before the command starts its work: the interpreter, the supervisor, the
parser, and whatever the command imports and checks before it would read data or train. ``--version`` and
``--help`` run to their end. The clock stops when the process exits or prints its first line; its CPU time is that
of the whole process tree then (``/proc``), so that other jobs on a shared machine do not count; the wall median
is reported beside it. Rounds interleave the commands; each record compares a command with ``--version``.
"""

from __future__ import annotations

import os
import select
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.timing import Record, ratio_record
from fdp_audit.atomic_io import atomic_write_bytes, atomic_write_text

ROUNDS = 3
TICKS = os.sysconf("SC_CLK_TCK")
# a configuration every command that reads one parses, and refuses only when it checks the data set's columns
BAD_COLUMNS = ("name: start\nseed: 0\ndata: {dataset: csv, path: missing.csv, protected: [a]}\n"
               "model: {kind: logistic}\n"
               "mechanism: {name: fdp_sgd, noise_multiplier: 1.0, sample_rate: 0.01, steps: 10}\n")


def invocations(folder: Path) -> dict[str, tuple[list[str], int | None]]:
    """What each command is given, and the exit code it must end with (None: stopped at its first line).

    Args:
        folder: where the bad inputs are written.

    Returns:
        Per command, its arguments and expected exit code.
    """
    config = folder / "columns.yaml"
    atomic_write_text(config, BAD_COLUMNS)
    results = folder / "results.json"
    atomic_write_text(results, "{")
    checkpoint = folder / "model.pt"
    atomic_write_bytes(checkpoint, b"not a checkpoint")
    return {
        "--version": (["--version"], 0),
        "--help": (["--help"], 0),
        "demo": (["demo", "--quick", "--out", str(folder / "demo")], None),
        "train": (["train", str(config), "--out", str(folder / "train.pt")], 2),
        "account": (["account", "--checkpoint", str(checkpoint)], 2),
        "calibrate": (["calibrate", "--epsilon", "0", "--delta", "1e-5", "--sample-rate", "0.1", "--steps", "10"], 2),
        "audit": (["audit", str(config), "--out", str(folder / "audit")], 2),
        "gate": (["gate", str(results)], 2),
        "profile": (["profile", str(config)], 2),
        "report": (["report", str(results)], 2),
        "corrdp": (["corrdp", "train", str(config)], 2),
        "reproduce": (["reproduce", "no_such_reproduction"], 2),
    }


def _tree_cpu(pid: int) -> float:
    """CPU seconds (user + system) of ``pid`` and every live descendant, with what their reaped children used."""
    total, pending = 0.0, [pid]
    while pending:
        current = pending.pop()
        try:
            fields = Path(f"/proc/{current}/stat").read_text().rsplit(")", 1)[1].split()
            children = Path(f"/proc/{current}/task/{current}/children").read_text().split()
        except OSError:  # it exited meanwhile: its parent's cutime/cstime holds it once reaped
            continue
        total += sum(int(value) for value in fields[11:15]) / TICKS  # utime, stime, cutime, cstime
        pending.extend(int(child) for child in children)
    return total


def measure(argv: list[str], expected: int | None) -> tuple[float, float]:
    """Wall and CPU seconds of one real invocation until it exits or, when ``expected`` is None, prints a line.

    Args:
        argv: the command line after ``fdp-audit``.
        expected: the exit code it must end with, or None to stop it at its first line.

    Returns:
        (wall, cpu) seconds.

    Raises:
        RuntimeError: it ended otherwise than expected (the input did not do what this benchmark relies on).
    """
    command = shutil.which("fdp-audit", path=str(Path(sys.executable).parent)) or "fdp-audit"
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "MPLBACKEND": "Agg"}
    start = time.perf_counter()
    process = subprocess.Popen([command, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    if expected is None:
        assert process.stdout is not None
        select.select([process.stdout], [], [])
        wall, cpu = time.perf_counter() - start, _tree_cpu(process.pid)
        process.kill()  # the supervisor takes its child with it (PR_SET_PDEATHSIG)
        process.communicate()
        return wall, cpu
    before = os.times()
    _, error = process.communicate()
    wall = time.perf_counter() - start
    after = os.times()
    if process.returncode != expected:
        raise RuntimeError(f"fdp-audit {' '.join(argv)} exited {process.returncode}, not {expected}: "
                           f"{error.decode(errors='replace')[-300:]}")
    return wall, (after.children_user - before.children_user) + (after.children_system - before.children_system)


def run() -> list[Record]:
    """One record per command (and for ``--version`` and ``--help``): median CPU seconds against ``--version``'s.

    Returns:
        The records, each with the wall median and what the command was given.
    """
    with tempfile.TemporaryDirectory() as folder:
        given = invocations(Path(folder))
        cpu: dict[str, list[float]] = {name: [] for name in given}
        wall: dict[str, list[float]] = {name: [] for name in given}
        for round_index in range(ROUNDS + 1):  # the first round warms the file cache
            for name, (argv, expected) in given.items():
                seconds = measure(argv, expected)
                if round_index:
                    wall[name].append(seconds[0])
                    cpu[name].append(seconds[1])
        return [ratio_record(f"B9 start {name}", cpu[name], cpu["--version"], unit="s", scale=1.0, clock="cpu",
                             wall_median=round(statistics.median(wall[name]), 3),
                             invocation=" ".join(["fdp-audit", *[Path(a).name if "/" in a else a
                                                                 for a in given[name][0]]]))
                for name in given]


if __name__ == "__main__":
    import json

    for record in run():
        print(json.dumps(record))
