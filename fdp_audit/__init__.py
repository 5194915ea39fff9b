"""fdp-audit: train with feature differential privacy, attack it, and check the attacks against the bound.

The library (docs/api.md)::

    import fdp_audit

    result = fdp_audit.audit("configs/adult_fdp.yaml", trials=64)   # an AuditResult
    result.verdict                                                   # "PASS" or "VIOLATION"
    fdp_audit.audit_checkpoint("model.pt")                          # the attacks on a checkpoint's records
    fdp_audit.account(1.0, 1 / 16, 100).epsilon(1e-5)               # the accountant of a claim

The audits themselves (games, trials, statistics, one-run audits, the gate) are the package
:mod:`fdp_audit.auditing`. Everything loads on first use, so that ``fdp-audit --version`` starts without torch.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

__all__ = ["AuditResult", "Claim", "Config", "GateResult", "GradientCanaries", "__version__", "account", "audit",
           "audit_checkpoint", "gate", "insert_record_canaries"]


def __getattr__(name: str) -> Any:  # PEP 562: the public names load on first use
    if name in ("AuditResult", "GateResult", "account", "audit", "audit_checkpoint", "gate"):
        from fdp_audit import api

        return getattr(api, name)
    if name == "Config":
        from fdp_audit.config import Config

        return Config
    if name == "Claim":
        from fdp_audit.claim import Claim

        return Claim
    if name == "GradientCanaries":  # the user's own training job, audited in one run (docs/one_run.md)
        from fdp_audit.auditing.one_run.loop import GradientCanaries

        return GradientCanaries
    if name == "insert_record_canaries":
        from fdp_audit.auditing.one_run.canaries import insert_record_canaries

        return insert_record_canaries
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
