"""B9 (docs/api.md): the fixed start cost of every command, before it does any work.

A command's fixed cost is what a fresh interpreter spends to build the command line's parser and import
everything the command's handler imports (the imports inside the functions of ``fdp_audit/cli/<command>.py``
and of the library calls in :mod:`fdp_audit.api` it makes, read from their source, so that a new import shows up
here without an edit): the time ``fdp-audit <command> ...``
takes before it reads its first input. ``--version`` and ``--help`` are timed as they run. Each record compares a
command with ``fdp-audit --version`` in interleaved rounds, on the CPU time of the child process (on a shared
machine wall time mostly measures preemption; the wall median is reported beside it).
"""

from __future__ import annotations

import ast
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.timing import Record, ratio_record

ROUNDS = 3
PACKAGE = Path(__file__).resolve().parents[1] / "fdp_audit"


def _function_imports(path: Path, names: set[str] | None = None) -> set[str]:
    """The modules imported inside the functions of the module at ``path`` (those of the top-level functions and
    classes in ``names`` only, when given); ``from package import module`` counts as the module."""
    found = set()
    tree = ast.parse(path.read_text(encoding="utf-8"))
    roots = [node for node in tree.body if names is None or getattr(node, "name", None) in names]
    for root in roots:
        for function in (node for node in ast.walk(root) if isinstance(node, ast.FunctionDef)):
            for node in ast.walk(function):
                if isinstance(node, ast.Import):
                    found |= {alias.name for alias in node.names}
                elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                    found |= {f"{node.module}.{alias.name}" if _source(f"{node.module}.{alias.name}")
                              else node.module for alias in node.names}
    return found


def _library_calls(path: Path) -> set[str]:
    """The functions of :mod:`fdp_audit.api` a command module calls (``api.name``), and the result class whose
    methods it then calls."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    called = {node.attr for node in ast.walk(tree)
              if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "api"}
    return called | ({"AuditResult"} if called & {"audit", "audit_checkpoint"} else set())


def _source(module: str) -> Path | None:
    """The source file of a module of the package, or None."""
    path = PACKAGE.joinpath(*module.split(".")[1:])
    for candidate in (path.with_suffix(".py"), path / "__init__.py"):
        if module.startswith("fdp_audit.") and candidate.is_file():
            return candidate
    return None


def handler_imports(command: str) -> list[str]:
    """The modules the functions of the command's module import (its lazy imports), and those of the library
    functions it calls (:mod:`fdp_audit.api`).

    Args:
        command: a subcommand's name.

    Returns:
        The dotted module names, sorted.
    """
    from fdp_audit.cli import COMMANDS

    module = PACKAGE.joinpath(*COMMANDS[command].module.split(".")[1:]).with_suffix(".py")
    found = _function_imports(module)
    if "fdp_audit.api" in found:
        found |= _function_imports(PACKAGE / "api.py", _library_calls(module))
    return sorted(found)


def _script(command: str) -> list[str]:
    """The child process that pays ``command``'s fixed cost."""
    if command.startswith("--"):
        return [sys.executable, "-m", "fdp_audit", command]
    imports = "; ".join(f"importlib.import_module({name!r})" for name in handler_imports(command))
    code = f"import importlib; from fdp_audit.cli import build_parser; build_parser(); {imports}"
    return [sys.executable, "-c", code]


def _run(argv: list[str]) -> tuple[float, float]:
    """Wall and CPU seconds of one child process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, env={**os.environ, "MPLBACKEND": "Agg"})
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def run() -> list[Record]:
    """One record per command (and for ``--version`` and ``--help``): median CPU seconds against ``--version``'s.

    Returns:
        The records.
    """
    from fdp_audit.cli import COMMANDS

    commands = ["--version", "--help", *COMMANDS]
    cpu: dict[str, list[float]] = {name: [] for name in commands}
    wall: dict[str, list[float]] = {name: [] for name in commands}
    for round_index in range(ROUNDS + 1):  # the first round warms the file cache
        for name in commands:
            seconds = _run(_script(name))
            if round_index:
                wall[name].append(seconds[0])
                cpu[name].append(seconds[1])
    return [ratio_record(f"B9 start {name}", cpu[name], cpu["--version"], unit="s", scale=1.0, clock="cpu",
                         wall_median=round(statistics.median(wall[name]), 3)) for name in commands]
