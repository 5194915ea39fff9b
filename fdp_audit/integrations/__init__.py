"""Integrations with training libraries whose loops fdp-audit audits as written (docs/games.md)."""
