"""Benchmarks B1–B5 of SPEC 6: each a ratio measured side by side in one run (``make bench``)."""
