"""Which loaded modules are the user's own (fdp_audit/auditing/provenance.py): those travel by value to Dask workers
and have their files digested per journal line of a third-party mechanism."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from fdp_audit.auditing.provenance import user_modules
from tests.conftest import module_from_file


def test_a_module_loaded_after_an_earlier_answer_is_still_found(tmp_path: Path) -> None:
    """The answer per module file is kept between calls; a module loaded from outside the libraries after a first
    call is the user's in the next one, and the libraries' modules never are."""
    before = user_modules()
    with module_from_file(tmp_path / "late_user_module.py", "VALUE = 1\n", "fdp_audit_test_late_user_module") as module:
        after = user_modules()
    assert module not in before and module in after
    assert np not in after and sys.modules["fdp_audit.auditing.provenance"] not in after


def test_every_version_is_known() -> None:
    """dp_accounting has no ``__version__``: the reproducibility section said "unknown"."""
    import importlib.metadata

    from fdp_audit.auditing.provenance import versions

    found = versions()
    assert found["dp_accounting"] == importlib.metadata.version("dp-accounting")
    assert all(value and value != "unknown" for value in found.values()), found
