"""fdp-audit: train with feature differential privacy, attack it, and check the attacks against the bound."""

__version__ = "0.1.0"
