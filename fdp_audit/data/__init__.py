"""Data layer (SPEC 7): bundled and user data sets, synthetic data with known priors, encoding, and the
public feature maps Ψ."""
