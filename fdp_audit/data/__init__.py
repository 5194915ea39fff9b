"""Data layer (docs/data.md): bundled and user data sets, synthetic data with known priors, encoding, and the
public maps Ψ."""
