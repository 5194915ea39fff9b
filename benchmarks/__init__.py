"""Benchmarks B1–B5 of docs/training.md: each a ratio measured side by side in one run (``make bench``)."""
