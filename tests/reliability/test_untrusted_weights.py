"""Checkpoints and weights are data (docs/files.md): nothing in one names code that runs, and every size it
declares is bounded before anything is inflated. Each test reproduces a defect found by a hostile probe and fails
on the code before its fix."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from fdp_audit.errors import BadInputError


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
    from fdp_audit.auditing.checkpoint_audit import read_checkpoint, replay_config
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
    original = copy.deepcopy(metadata["config"])
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
    metadata["config"] = {**original, "audit": {**original.get("audit", {}), "executor": "dask",
                                                "scheduler": "tcp://attacker.invalid:8786"}}
    save_checkpoint(edited, params, metadata)  # nor does it choose where the replay's trials run
    replay = replay_config(read_checkpoint(edited), 40).audit
    assert (replay.executor, replay.scheduler, replay.workers) == ("local", None, None)


@pytest.fixture
def no_torch_load(monkeypatch: pytest.MonkeyPatch) -> None:
    """``torch.load`` fails the test: a refusal must come before anything is inflated."""
    import torch

    def inflating(*args, **kwargs):
        raise AssertionError("torch.load was called on a file that should have been refused first")

    monkeypatch.setattr(torch, "load", inflating)


def test_a_pt_zip_bomb_is_refused_before_it_is_inflated(cli, one_line_error, tmp_path: Path, write_yaml,
                                                        small_config, zip_bomb, no_torch_load) -> None:
    """A 2 MB ``.pt`` whose ``data/0`` inflates to 2 GiB reached 2.5 GB of memory before being refused (a 6 MB one
    was OOM-killed), as a checkpoint and as external weights: the size limit applied to compressed bytes only."""
    import torch

    bomb = tmp_path / "bomb.pt"
    bomb.write_bytes(zip_bomb({"weight": torch.zeros(1, 7), "bias": torch.zeros(1)}, 2 << 30))
    assert bomb.stat().st_size < 3 << 20
    (tmp_path / "model.py").write_text("from torch import nn\n\ndef make(n, k):\n    return nn.Linear(n, 1)\n")
    module = {"kind": "module", "factory": "model.py:make"}
    config = write_yaml(tmp_path / "c.yaml", small_config("dp_sgd", rows=60, model=module))
    for argv in (["audit", bomb], ["audit", bomb, "--config", config]):
        result = cli(*argv, "--out", tmp_path / "out")
        line = one_line_error(result.err)
        assert result.code == 2 and "inflates to" in line and "more than the limit" in line, line
    assert not (tmp_path / "out").exists()


def test_a_tensor_larger_than_its_storage_is_refused(cli, one_line_error, dp_sgd_checkpoint: Path,
                                                     tmp_path: Path) -> None:
    """A pickle states each tensor's shape and strides: strides of 0 present a 4-byte storage as 2³⁸ elements,
    which the finiteness check allocated (exit 3), under metadata describing a model of that size."""
    import io
    import json

    import torch

    from fdp_audit.training import checkpoint

    _, metadata, _ = checkpoint.load_checkpoint(dp_sgd_checkpoint)
    metadata["model"] = {**metadata["model"], "kind": "mlp", "hidden": [1 << 35]}
    inputs = metadata["model"]["n_inputs"]
    params = {"layer0.weight": torch.zeros(1, 1).expand(1 << 35, inputs), "layer0.bias": torch.zeros(1).expand(1 << 35),
              "layer1.weight": torch.zeros(1, 1).expand(1, 1 << 35), "layer1.bias": torch.zeros(1)}
    forged = tmp_path / "forged.pt"
    torch.save({"format_version": 1, "params": params, "metadata": json.dumps(metadata)}, forged)
    assert forged.stat().st_size < 1 << 20
    result = cli("audit", forged, "--out", tmp_path / "out")
    assert result.code == 2 and "forged.pt" in one_line_error(result.err) and not (tmp_path / "out").exists()
    buffer = io.BytesIO()
    torch.save({"w": torch.zeros(1).expand(1 << 40)}, buffer)
    with pytest.raises(BadInputError, match=r"larger than its stored 4 bytes"):
        checkpoint.load_torch_file(buffer.getvalue(), "release.pt")


def _safetensors(header: dict, data: bytes) -> bytes:
    import json

    encoded = json.dumps(header).encode()
    return len(encoded).to_bytes(8, "little") + encoded + data


@pytest.mark.parametrize(("content", "expected"), [
    (lambda: _safetensors({"weight": {"dtype": "F32", "shape": [1 << 30, 1 << 30], "data_offsets": [0, 8]}},
                          bytes(8)), "states 4,611,686,018,427,387,904 bytes but holds 8"),
    (lambda: _safetensors({"weight": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}, bytes(8)),
     "offsets outside the file's 8 data bytes"),
    (lambda: _safetensors({"weight": {"dtype": "C1024", "shape": [1], "data_offsets": [0, 8]}}, bytes(8)),
     "unsupported dtype 'C1024'"),
    (lambda: (1 << 62).to_bytes(8, "little") + b"{}", "header length 4611686018427387904"),
])
def test_a_safetensors_header_is_checked_before_any_tensor_is_made(content, expected, tmp_path: Path) -> None:
    from fdp_audit.training.state_dicts import read_state_dict

    path = tmp_path / "w.safetensors"
    path.write_bytes(content())
    with pytest.raises(BadInputError, match=expected):
        read_state_dict(path)


def test_a_legacy_torch_file_is_refused(tmp_path: Path) -> None:
    """torch's format before the zip archive sizes each storage by its pickle alone; nothing bounds it first."""
    import torch

    from fdp_audit.training.state_dicts import read_state_dict

    path = tmp_path / "legacy.pt"
    torch.save({"weight": torch.zeros(2)}, path, _use_new_zipfile_serialization=False)
    with pytest.raises(BadInputError, match="legacy format"):
        read_state_dict(path)


@pytest.mark.parametrize("flag", [("--workers", "2"), ("--scheduler", "tcp://127.0.0.1:1")])
def test_execution_flags_are_refused_for_external_weights(cli, one_line_error, tmp_path: Path, small_config,
                                                          write_yaml, flag: tuple[str, str]) -> None:
    """``--workers`` and ``--scheduler`` were silently ignored for weights trained elsewhere (nothing is trained)."""
    import torch
    from safetensors.torch import save_file

    (tmp_path / "model.py").write_text("from torch import nn\n\ndef make(n, k):\n    return nn.Linear(n, 1)\n")
    config = write_yaml(tmp_path / "c.yaml", small_config("dp_sgd", rows=60, model={"kind": "module",
                                                                                    "factory": "model.py:make"}))
    save_file({"weight": torch.zeros(1, 7), "bias": torch.zeros(1)}, tmp_path / "w.safetensors")
    result = cli("audit", tmp_path / "w.safetensors", "--config", config, *flag, "--out", tmp_path / "out")
    line = one_line_error(result.err)
    assert result.code == 2 and line == f"fdp-audit: error: {flag[0]}: does not apply to external weights", line
    assert not (tmp_path / "out").exists()
