"""Integrations with training libraries whose loops fdp-audit audits as written (docs/games.md).

Whatever the config's ``mechanism.integration``, the trials of the user's code (a training function or a
third-party mechanism) run inside :func:`library_caches` (:func:`fdp_audit.audit.trials.trained_views`): the
caches of the libraries it has loaded, so that a pure computation a loop repeats in every trial (Opacus's noise
calibration for a target ε) is done once per process.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator


@contextlib.contextmanager
def library_caches() -> Iterator[None]:
    """Within the block, the loaded libraries' pure computations are cached (Opacus:
    :func:`fdp_audit.integrations.opacus.calibration_cached`); a library not loaded yet is left alone (importing
    it here would cost seconds for code that does not use it)."""
    with contextlib.ExitStack() as stack:
        if "opacus.privacy_engine" in sys.modules:
            from fdp_audit.integrations.opacus import calibration_cached

            stack.enter_context(calibration_cached())
        yield
