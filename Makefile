# Two-command set-up: `make demo` and `make test` create .venv if missing, install the CPU build of
# PyTorch first (so no dependency pulls a multi-GB CUDA build), then the package with its dev extra.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
TORCH_PIN := torch==2.13.0
STAMP := $(VENV)/.installed

.PHONY: demo test test-fast lint bench reproduce clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# Re-installs only when pyproject.toml changes. A CUDA torch already in the environment is kept.
$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/python -m pip install -q $(TORCH_PIN)
	$(BIN)/python -m pip install -q -e ".[dev]"
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/fdp-audit demo

lint: $(STAMP)
	$(BIN)/ruff check .

test: $(STAMP) lint
	$(BIN)/python -m pytest -q

test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -m "not slow"

bench: $(STAMP)
	$(BIN)/python -m benchmarks.run_all

reproduce: $(STAMP)
	$(BIN)/fdp-audit reproduce --out reports/reproduce

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache build *.egg-info
