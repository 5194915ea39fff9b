"""Generative models under FDP (docs/generative.md): a small class-conditional diffusion model trained with the FDP
paper's mechanisms, its sample quality without Inception weights, and the audit of its training step."""
