"""Shared checks for hostile-input tests: the only outcomes allowed are success, or exit code 2 with
one line on stderr and no output file."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from fdp_audit.errors import BadInputError


def _assert_one_line(message: str) -> None:
    lines = [line for line in message.splitlines() if line.strip()]
    assert len(lines) == 1, f"expected one line, got {message[:2000]!r}"
    assert "Traceback" not in message and len(message) < 2000, message[:2000]


def _assert_refused(err: BadInputError) -> None:
    _assert_one_line(str(err))


def _files_under(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*")) if folder.exists() else []


@pytest.fixture(scope="session")
def assert_one_line() -> Callable[[str], None]:
    """A message or a stderr: one non-empty line, no traceback, short even for a megabyte of hostile input."""
    return _assert_one_line


@pytest.fixture(scope="session")
def assert_refused() -> Callable[[BadInputError], None]:
    """A :class:`BadInputError` whose message is one readable line."""
    return _assert_refused


@pytest.fixture(scope="session")
def files_under() -> Callable[[Path], list[str]]:
    """The files and folders under a folder (empty when it does not exist): what a refused run left behind."""
    return _files_under
