"""Audit test helpers: the game audit without its informational sections.

``run_audit`` also computes the accounting curves (optimistic PLD, RDP) and trains utility models; neither
enters a comparison or the verdict, so the statistical tests replace them by empty sections to spend their
time on trials. The end-to-end CLI tests run the full audit."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from fdp_audit.audit import runner
from fdp_audit.config import Config


@pytest.fixture
def verdict_only_audit(monkeypatch: pytest.MonkeyPatch) -> Callable[..., dict[str, Any]]:
    monkeypatch.setattr(runner, "accounting_section", lambda claim: {})
    monkeypatch.setattr(runner, "utility_section", lambda config, data, claim: {})

    def run(config: Config, out_dir: Path | None = None) -> dict[str, Any]:
        return runner.run_audit(config, out_dir)

    return run

