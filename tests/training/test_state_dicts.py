"""Weights trained outside fdp-audit (fdp_audit/training/state_dicts.py): a safetensors state_dict trained by a
plain PyTorch script is audited end to end (checkpoint audit, one-run audit of the record canaries it was trained
with); bad files are one-line bad input (exit 2); no code from a file runs."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import torch

from fdp_audit.user_code import load_function

REPO = Path(__file__).resolve().parents[2]
CONFIG = REPO / "configs" / "plain_dp_sgd.yaml"


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    """The example script: crafted input canaries inserted by fdp-audit, the plain DP-SGD loop, safetensors out."""
    out = tmp_path_factory.mktemp("weights") / "model.safetensors"
    main = load_function(f"{REPO / 'examples' / 'plain_dp_sgd' / 'train_and_save.py'}:main", "example")
    main(str(CONFIG), str(out), 60)
    return out


def test_checkpoint_audit_of_safetensors(cli, trained, tmp_path):
    result = cli("audit", trained, "--config", CONFIG, "--out", tmp_path)
    assert result.code == 0, result.err
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["verdict"]["status"] == "INFORMATIONAL"
    assert results["checkpoint_audit"]["records"] > 0 and results["mechanism"]["noise_multiplier"] == 1.0


def test_one_run_audit_of_the_inserted_canaries(cli, trained, tmp_path):
    manifest = trained.with_suffix(".canaries.json")
    result = cli("audit", trained, "--config", CONFIG, "--canaries", manifest, "--out", tmp_path)
    assert result.code == 0, result.err  # a correct mechanism: PASS (fails with probability at most α)
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["one_run"]["canaries"] == 60 and results["verdict"]["status"] == "PASS"


def test_pt_state_dict_with_opacus_prefix_is_read(cli, trained, tmp_path):
    """A .pt state_dict saved from Opacus's GradSampleModule (keys `_module.…`) is the same weights."""
    from safetensors.torch import load_file

    path = tmp_path / "model.pt"
    torch.save({f"_module.{k}": v for k, v in load_file(trained).items()}, path)
    result = cli("audit", path, "--config", CONFIG, "--out", tmp_path / "out")
    assert result.code == 0, result.err


def _bad_files(tmp_path: Path) -> dict[str, Path]:
    files = {}
    files["truncated"] = tmp_path / "truncated.safetensors"
    files["truncated"].write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{\"a\":")
    files["code"] = tmp_path / "code.pt"

    class Payload:
        def __reduce__(self):
            return (print, ("this must never run",))

    buffer = io.BytesIO()
    torch.save({"weight": Payload()}, buffer)
    files["code"].write_bytes(buffer.getvalue())
    files["names"] = tmp_path / "names.pt"
    torch.save({"fc.weight": torch.zeros(2, 7)}, files["names"])
    files["shapes"] = tmp_path / "shapes.pt"
    torch.save({"0.weight": torch.zeros(3, 3), "0.bias": torch.zeros(16), "2.weight": torch.zeros(2, 16),
                "2.bias": torch.zeros(2)}, files["shapes"])
    files["nan"] = tmp_path / "nan.pt"
    torch.save({"0.weight": torch.full((16, 7), float("nan")), "0.bias": torch.zeros(16),
                "2.weight": torch.zeros(2, 16), "2.bias": torch.zeros(2)}, files["nan"])
    return files


@pytest.mark.parametrize("case", ["truncated", "code", "names", "shapes", "nan"])
def test_bad_weights_are_one_line_bad_input(cli, one_line_error, tmp_path, case):
    path = _bad_files(tmp_path)[case]
    result = cli("audit", path, "--config", CONFIG, "--out", tmp_path / "never")
    assert result.code == 2
    line = one_line_error(result.err)
    assert path.name in line or "state_dict" in line
    assert not (tmp_path / "never").exists()
    assert "this must never run" not in result.out + result.err


def test_weights_without_config_say_what_to_do(cli, one_line_error, trained, tmp_path):
    result = cli("audit", trained, "--out", tmp_path / "never")
    assert result.code == 2 and "--config" in one_line_error(result.err)
