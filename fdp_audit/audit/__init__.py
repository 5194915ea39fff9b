"""Audit engine (SPEC 2.5, 2.6, 4): games, statistics, verdicts and results."""
