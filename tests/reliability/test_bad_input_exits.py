"""Bad input is exit 2 with one line naming the field or file (docs/files.md), never an internal error: inputs a
hostile probe found to give exit 3, each refused declaratively before the arithmetic or the allocation that
failed. Each test fails on the code before its fix."""

from __future__ import annotations

import errno
import os
import struct
from pathlib import Path

import numpy as np
import pytest


@pytest.mark.parametrize("z", ["1e200", "1e160", "1e308", "1000001"])
def test_account_refuses_a_noise_multiplier_it_cannot_account(cli, one_line_error, z: str) -> None:
    """``account --noise-multiplier 1e200``: "math domain error"; 1e160: an OverflowError in dp_accounting."""
    result = cli("account", "--noise-multiplier", z, "--sample-rate", "0.01", "--steps", "100")
    line = one_line_error(result.err)
    assert result.code == 2 and "--noise-multiplier: must be at most 1e+06" in line, line


@pytest.mark.parametrize("z", [1e308, 1e160])
def test_an_audit_refuses_a_noise_multiplier_it_cannot_account(cli, one_line_error, tmp_path: Path, small_config,
                                                               write_yaml, z: float) -> None:
    config = write_yaml(tmp_path / "c.yaml", small_config(rows=60, mechanism={"noise_multiplier": z}))
    result = cli("audit", config, "--out", tmp_path / "out")
    assert result.code == 2 and "mechanism.noise_multiplier: must be <= 1000000.0" in one_line_error(result.err)
    assert not (tmp_path / "out").exists()


def test_a_factory_with_nan_weights_is_bad_input(cli, one_line_error, tmp_path: Path, small_config,
                                                 write_yaml) -> None:
    """A factory whose module had NaN weights: "atol must be greater than or equal to zero, but got -nan"."""
    (tmp_path / "model.py").write_text("import torch\nfrom torch import nn\n\ndef make(n, k):\n"
                                       "    module = nn.Sequential(nn.Linear(n, 4), nn.ReLU(), nn.Linear(4, k))\n"
                                       "    with torch.no_grad():\n        module[0].weight.fill_(float('nan'))\n"
                                       "    return module\n")
    config = write_yaml(tmp_path / "c.yaml", small_config(rows=60, model={"kind": "module", "factory": "model.py:make"},
                                                          audit={"games": ["attribute"],
                                                                 "attacks": ["prior", "likelihood"]}))
    result = cli("audit", config, "--out", tmp_path / "out")
    line = one_line_error(result.err.strip().splitlines()[-1])
    assert result.code == 2 and "model.factory: the factory's module has non-finite values in its parameter " \
                                "0.weight" in line, result.err


def _idx(header: bytes, body: bytes = b"") -> bytes:
    return b"\x00\x00\x08" + header + body


@pytest.mark.parametrize(("images", "expected"), [
    (_idx(bytes([255]) + bytes(4 * 255)), "has 1 to 3 dimensions, not 255"),
    (_idx(bytes([3]) + struct.pack(">III", 0, 2**32 - 1, 2**32 - 1)), "which holds nothing"),
], ids=["255 dimensions", "empty with huge sizes"])
def test_an_idx_header_is_checked_before_anything_is_shaped(cli, one_line_error, tmp_path: Path, small_config,
                                                            write_yaml, images: bytes, expected: str) -> None:
    """IDX headers of 255 dimensions, or of shape (0, 2³²−1, 2³²−1) over no data: numpy's reshape failed (exit 3)."""
    folder = tmp_path / "fashion"
    folder.mkdir()
    labels = np.zeros(3, np.uint8)
    for split in ("train", "t10k"):
        (folder / f"{split}-images-idx3-ubyte").write_bytes(images)
        (folder / f"{split}-labels-idx1-ubyte").write_bytes(_idx(bytes([1]) + struct.pack(">I", 3), labels.tobytes()))
    config = write_yaml(tmp_path / "c.yaml", small_config(data={"dataset": "fashion_mnist", "path": str(folder),
                                                                "protected": [], "public_map": "downsample"},
                                                          model={"kind": "cnn"}))
    result = cli("audit", config, "--out", tmp_path / "out")
    line = one_line_error(result.err)
    assert result.code == 2 and "data.path" in line and expected in line, line


@pytest.mark.parametrize("name", ["journal.jsonl", "results.json"])
def test_a_full_disk_is_bad_input_naming_the_file(cli, one_line_error, tmp_path: Path, small_config, write_yaml,
                                                  monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """ENOSPC from a write to the journal or under --out carried no file name and was an internal error (exit 3),
    though the README promises exit 2 for a full disk. The disk fills when the file ``name`` (or its temporary
    copy) is synced."""
    sync = os.fsync

    def full_for_one_file(fd: int) -> None:
        if name in os.readlink(f"/proc/self/fd/{fd}"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        sync(fd)

    monkeypatch.setattr(os, "fsync", full_for_one_file)
    config = write_yaml(tmp_path / "c.yaml", small_config(rows=60, mechanism={"steps": 2}, audit={"trials": 14}))
    result = cli("audit", config, "--out", tmp_path / "out")
    line = one_line_error(result.err)
    assert result.code == 2 and "No space left on device" in line and str(tmp_path / "out" / name) in line, line
