"""One-run audits: many canaries in one training, their guesses, and the analyses of Steinke, Nasr & Jagielski
(NeurIPS 2023) and Mahloujifar, Melis & Chaudhuri (ICML 2025)."""
