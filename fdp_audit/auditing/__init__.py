"""Audits (docs/accounting.md, docs/statistics.md, docs/games.md): games, trials, statistics, one-run audits, the
gate, verdicts and results.

The library's entry point for an audit is the function :func:`fdp_audit.audit` (docs/api.md); this package holds
what it runs.
"""
