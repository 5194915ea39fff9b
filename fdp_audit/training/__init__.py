"""Training core (SPEC 2.3, 2.4, 6): Algorithm 1 and its baselines, batched over many models."""
