"""Training core (docs/training.md): Algorithm 1 and its baselines, batched over many models."""
