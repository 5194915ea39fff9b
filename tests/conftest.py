"""Fixtures shared across test packages: small synthetic configs, YAML writing, and the command line run
in-process (no interpreter start-up per call; exit code, stdout and stderr captured)."""

from __future__ import annotations

import contextlib
import copy
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml


@pytest.fixture(autouse=True)
def _no_progress(monkeypatch: pytest.MonkeyPatch) -> None:
    """No progress lines unless a test asks for them: a phase slowed past 3 s by a loaded machine would otherwise
    print before the one-line error a test reads."""
    monkeypatch.setenv("FDP_AUDIT_PROGRESS", "0")


def small_config(name: str = "fdp_sgd", /, *, seed: int = 0, rows: int = 300, **sections: dict[str, Any]
                 ) -> dict[str, Any]:
    """A raw config dict for a tiny CPU run on the synthetic table (protected column ``protected``, a binary
    prior, public ``public-0..4``). Keyword sections (``mechanism=``, ``audit=`` …) update the defaults."""
    from fdp_audit.mechanisms import faulty_mechanisms

    raw: dict[str, Any] = {
        "name": "tiny",
        "seed": seed,
        "device": "cpu",
        "data": {"dataset": "synthetic", "protected": ["protected"], "synthetic_rows": rows},
        "model": {"kind": "logistic"},
        "mechanism": {"name": name, "faulty": name in faulty_mechanisms(), "noise_multiplier": 1.0,
                      "sample_rate": 0.1, "public_batch_size": 32, "steps": 20, "clip_norm": 1.0,
                      "delta": 1.0e-5, "optimizer": {"name": "sgd", "lr": 1.0}},
        "audit": {"trials": 24, "games": ["distinguishing"], "attacks": ["prior", "iterates"]},
    }
    if name == "fdp_dpsgd":
        raw["mechanism"]["public_pretrain_steps"] = 5
    for key, value in sections.items():
        if isinstance(value, dict) and isinstance(raw.get(key), dict):
            raw[key] = {**raw[key], **copy.deepcopy(value)}
        else:
            raw[key] = copy.deepcopy(value)
    return raw


def write_yaml(path: Path, raw: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
    return path


@dataclass(frozen=True)
class CliResult:
    code: int
    out: str
    err: str


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Callable[..., CliResult]:
    """``cli("gate", path)`` runs ``fdp-audit gate path`` in this process."""
    from fdp_audit.cli import main

    def run(*argv: str | Path) -> CliResult:
        capsys.readouterr()
        code = main([str(a) for a in argv])
        captured = capsys.readouterr()
        return CliResult(code, captured.out, captured.err)

    return run


def _one_line_error(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, f"expected one line on stderr, got {err!r}"
    assert "Traceback" not in err and lines[0].startswith("fdp-audit: error: ")
    return lines[0]


@pytest.fixture(scope="session")
def one_line_error() -> Callable[[str], str]:
    """The single stderr line of a bad-input exit (docs/files.md: one line naming the problem, never a traceback)."""
    return _one_line_error


@pytest.fixture(name="small_config", scope="session")
def _small_config_fixture() -> Callable[..., dict[str, Any]]:
    return small_config


@pytest.fixture(name="write_yaml", scope="session")
def _write_yaml_fixture() -> Callable[[Path, dict[str, Any]], Path]:
    return write_yaml


@pytest.fixture(scope="session")
def audited_results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The results.json of a real tiny audit (FDP-SGD on 60 synthetic rows, T = 2, 14 trials; a PASS, the same on
    every run): a file ``gate`` and ``report`` verify. Copy it before changing it."""
    from fdp_audit.cli import main

    folder = tmp_path_factory.mktemp("audited")
    config = write_yaml(folder / "c.yaml", small_config(rows=60, mechanism={"steps": 2}, audit={"trials": 14}))
    assert main(["audit", str(config), "--out", str(folder / "out")]) == 0
    return folder / "out" / "results.json"


@contextlib.contextmanager
def module_from_file(path: Path, source: str, name: str) -> Any:
    """A module loaded from ``source`` written at ``path`` under ``name`` (as ``file.py:function`` specs load the
    user's files), in ``sys.modules`` for the block only."""
    import importlib.util

    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        del sys.modules[name]


EXTENDING = Path(__file__).resolve().parents[1] / "docs" / "extending.md"


def recipe_source(kind: str) -> str:
    """The Python block that follows ``<!-- recipe: KIND -->`` in docs/extending.md, as written there."""
    found = re.search(rf"<!-- recipe: {kind} -->\s*```python\n(.*?)```", EXTENDING.read_text(encoding="utf-8"),
                      flags=re.S)
    assert found is not None, f"docs/extending.md has no {kind} recipe"
    return found.group(1)


@contextlib.contextmanager
def recipe(kind: str, folder: Path) -> Any:
    """docs/extending.md's recipe for ``kind`` imported as the module ``recipe_<kind>`` (its registration runs), in
    ``sys.modules`` for the block only; the caller unregisters what it registered."""
    with module_from_file(folder / f"recipe_{kind}.py", recipe_source(kind), f"recipe_{kind}") as module:
        yield module


def sigkill_audit_after_first_chunk(arguments: list[str], out: Path) -> int:
    """Run ``fdp-audit audit ARGUMENTS --out OUT`` in a process group of its own and SIGKILL the group (the driver
    and any workers it started) once the first chunk of trials is journaled; returns the driver's exit status."""
    journal = out / "journal.jsonl"
    process = subprocess.Popen([sys.executable, "-m", "fdp_audit", "audit", *arguments, "--out", str(out)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               env={**os.environ, "PYTHONUNBUFFERED": "1"}, start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while not (journal.exists() and journal.read_text().endswith("\n")):
            assert process.poll() is None, "the audit ended before its first chunk was journaled"
            assert time.monotonic() < deadline, "no chunk journaled in 300 s"
            time.sleep(0.02)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    return process.returncode


@pytest.fixture
def verdict_only_audit(monkeypatch: pytest.MonkeyPatch) -> Callable[..., dict[str, Any]]:
    """The game audit without its informational sections: ``run_audit`` also computes the accounting curves
    (optimistic PLD, RDP) and trains utility models; neither enters a comparison or the verdict, so the
    statistical tests replace them by empty sections to spend their time on trials. The end-to-end CLI tests run
    the full audit."""
    from fdp_audit.auditing import runner

    monkeypatch.setattr(runner, "accounting_section", lambda claim: {})
    monkeypatch.setattr(runner, "utility_section", lambda config, data, claim: {})

    def run(config: Any, out_dir: Path | None = None) -> dict[str, Any]:
        return runner.run_audit(config, out_dir)

    return run
