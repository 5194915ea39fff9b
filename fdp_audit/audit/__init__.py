"""Audit engine (docs/accounting.md, docs/statistics.md, docs/games.md): games, statistics, verdicts and results."""
