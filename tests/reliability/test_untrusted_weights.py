"""Checkpoints and weights are data (docs/files.md): nothing in one names code that runs, and every size it
declares is bounded before anything is inflated. Each test reproduces a defect found by a hostile probe and fails
on the code before its fix."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def dp_sgd_checkpoint(tmp_path_factory: pytest.TempPathFactory, small_config, write_yaml) -> Path:
    """A tiny DP-SGD checkpoint written by ``fdp-audit train``."""
    from fdp_audit.cli import main

    folder = tmp_path_factory.mktemp("checkpoint")
    config = write_yaml(folder / "c.yaml", small_config("dp_sgd", rows=60, mechanism={"steps": 2}))
    assert main(["train", str(config), "--out", str(folder / "model.pt")]) == 0
    return folder / "model.pt"


def test_checkpoint_metadata_never_names_code(cli, one_line_error, dp_sgd_checkpoint: Path, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Editing only the metadata to name ``model.factory`` and ``mechanism.training`` in the attacker's file made
    ``audit CKPT --games N`` import and run both (the training function ran once per trial) and PASS."""
    from fdp_audit.training.checkpoint import load_checkpoint, save_checkpoint

    marker, planted = tmp_path / "ran", tmp_path / "planted.py"
    planted.write_text(f"import pathlib\npathlib.Path({str(marker)!r}).write_text('imported')\n"
                       "import torch\nfrom torch import nn\n\n"
                       "def make(n_inputs, n_classes):\n    return nn.Linear(n_inputs, 1)\n\n"
                       "def train(module, dataset, seed):\n"
                       "    optimizer = torch.optim.SGD(module.parameters(), lr=0.0)\n"
                       "    for p in module.parameters():\n        p.grad = torch.zeros_like(p)\n"
                       "    optimizer.step()\n    return module\n")
    params, metadata, _ = load_checkpoint(dp_sgd_checkpoint)
    metadata["config"]["model"] = {"kind": "module", "factory": f"{planted}:make"}
    metadata["config"]["mechanism"]["training"] = f"{planted}:train"
    edited = tmp_path / "edited.pt"
    save_checkpoint(edited, params, metadata)
    monkeypatch.chdir(tmp_path)
    result = cli("audit", edited, "--games", "40", "--out", tmp_path / "games")
    line = one_line_error(result.err)
    assert result.code == 2 and "model.factory" in line and "never runs code" in line, line
    assert not marker.exists() and not (tmp_path / "games").exists()
    result = cli("audit", edited, "--out", tmp_path / "records")  # the audit of its records runs none of it
    assert result.code == 0, result.err
    assert not marker.exists()
