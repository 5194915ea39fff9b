"""Checkpoints (docs/files.md): ``fdp-audit train`` writes weights plus privacy metadata atomically; a
checkpoint is untrusted input, loaded with ``torch.load(weights_only=True)`` and validated field by field.
A pickle that would run code, a truncated file, wrong shapes or inconsistent privacy metadata are refused
with exit code 2 and one line — and the code in a malicious pickle never runs."""

from __future__ import annotations

import io
import json
import math
import os
import pickle
import shlex
import zipfile
from pathlib import Path
from typing import Any

import pytest
import torch

from fdp_audit.auditing.checkpoint_audit import read_checkpoint
from fdp_audit.claim import Claim
from fdp_audit.cli import main
from fdp_audit.config import load_config
from fdp_audit.data.prepare import prepare_data
from fdp_audit.errors import BadInputError
from fdp_audit.training.checkpoint import FORMAT_VERSION, load_checkpoint, save_checkpoint
from fdp_audit.training.cnn import cnn_model
from fdp_audit.training.run import train_one


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory, small_config, write_yaml) -> tuple[Path, Path]:
    """(config, checkpoint) of one tiny FDP-SGD run through the command line."""
    folder = tmp_path_factory.mktemp("train")
    config = write_yaml(folder / "tiny.yaml", small_config("fdp_sgd", rows=200, mechanism={"steps": 10}))
    checkpoint = folder / "out" / "model.pt"
    assert main(["train", str(config), "--out", str(checkpoint)]) == 0
    return config, checkpoint


@pytest.fixture(scope="module")
def good(trained) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    params, metadata, _ = load_checkpoint(trained[1])
    return params, metadata


class RunsCode:
    """Unpickling this calls ``os.system("touch MARKER")``."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {shlex.quote(str(self.marker))}",)


def payload_bytes(params: Any, metadata: Any, format_version: Any = FORMAT_VERSION, **extra: Any) -> bytes:
    buffer = io.BytesIO()
    torch.save({"format_version": format_version, "params": params,
                "metadata": json.dumps(metadata) if isinstance(metadata, dict) else metadata, **extra}, buffer)
    return buffer.getvalue()


# -- what `train` writes ---------------------------------------------------------------------------------------

def test_train_writes_a_checkpoint_with_its_privacy_metadata(trained, good) -> None:
    config_path, checkpoint = trained
    params, metadata = good
    config = load_config(config_path)
    data = prepare_data(config.data, config.seed)
    mech = config.mechanism
    assert metadata["mechanism"] == "fdp_sgd" and metadata["faulty"] is False
    for key in ("sample_rate", "steps", "clip_norm", "delta", "public_batch_size", "public_pretrain_steps"):
        assert metadata[key] == getattr(mech, key), key
    assert metadata["noise_multiplier"] == mech.noise_multiplier
    assert metadata["epsilon"] == pytest.approx(float(Claim.of(mech).add_remove.epsilon(mech.delta)))
    assert metadata["dataset"] == "synthetic" and metadata["dataset_fingerprint"] == data.fingerprint
    assert metadata["seed"] == config.seed and metadata["format_version"] == FORMAT_VERSION
    assert metadata["psi"] == data.public_map.spec()
    assert metadata["config"] == config.to_dict()
    # the saved weights are exactly the model the run trained
    expected = train_one(config, data).params
    assert params.keys() == expected.keys()
    for name in params:
        assert torch.equal(params[name], expected[name]), name
    assert sorted(p.name for p in checkpoint.parent.iterdir()) == ["model.pt"]  # written atomically


def test_seed_override_is_recorded(trained, good, tmp_path: Path, cli) -> None:
    out = tmp_path / "seed5.pt"
    assert cli("train", trained[0], "--out", out, "--seed", "5").code == 0
    params, metadata, _ = load_checkpoint(out)
    # --seed replaces the config's seed, as `audit --seed` does: the data and the model streams both follow it
    assert metadata["seed"] == metadata["config"]["seed"] == 5
    assert not torch.equal(params["layer0.weight"], good[0]["layer0.weight"])
    assert read_checkpoint(out).config.seed == 5


def test_save_load_round_trip(good, tmp_path: Path) -> None:
    params, metadata = good
    changed = {name: torch.randn_like(value) for name, value in params.items()}
    path = save_checkpoint(tmp_path / "nested" / "copy.pt", changed, metadata)
    loaded, loaded_metadata, model = load_checkpoint(path)
    assert loaded_metadata == metadata
    assert model.shapes() == {name: tuple(v.shape) for name, v in changed.items()}
    for name in changed:
        assert torch.equal(loaded[name], changed[name])


CNN = {"kind": "cnn", "n_inputs": 64, "n_classes": 3, "hidden": [4, 8], "image_side": 8}


def test_a_cnn_checkpoint_round_trips_to_its_module(good, tmp_path: Path) -> None:
    model = cnn_model(64, 3, (4, 8))
    params = {name: value[0] for name, value in model.init(torch.tensor([[1, 2]], dtype=torch.int32)).items()}
    path = save_checkpoint(tmp_path / "cnn.pt", params, {**good[1], "model": CNN})
    loaded, _, loaded_model = load_checkpoint(path)
    assert loaded_model.kind == "cnn" and loaded_model.plan is not None and loaded_model.shapes() == model.shapes()
    assert all(torch.equal(loaded[name], params[name]) for name in params)


def test_save_refuses_bad_metadata(good, tmp_path: Path) -> None:
    with pytest.raises(BadInputError, match="sample_rate"):
        save_checkpoint(tmp_path / "bad.pt", good[0], {**good[1], "sample_rate": 2.0})
    assert not (tmp_path / "bad.pt").exists()


def test_account_reads_a_checkpoint(trained, good, cli) -> None:
    result = cli("account", "--checkpoint", trained[1], "--json")
    assert result.code == 0, result.err
    report = json.loads(result.out)
    assert "epsilon" in report
    delta = good[1]["delta"]
    (eps,) = [v for k, v in report["epsilon"].items() if math.isclose(float(k), delta)]
    assert eps == pytest.approx(good[1]["epsilon"], rel=1e-6)


# -- refused inputs ---------------------------------------------------------------------------------------------

def refused(cli, one_line_error, path: Path, expected: str) -> None:
    """Every reader of checkpoints says the same thing: one line, exit code 2."""
    with pytest.raises(BadInputError, match=expected):
        load_checkpoint(path)
    for argv in (("account", "--checkpoint", path, "--json"), ("audit", path, "--games", "4")):
        result = cli(*argv)
        assert result.code == 2, argv
        assert expected in one_line_error(result.err), argv
        assert result.out == ""


def unpickle_torch_archive(data: bytes) -> object:
    """Unpickle the object inside a torch.save archive with the standard, unrestricted unpickler — what an
    unsafe checkpoint loader would do. Tensors are not rebuilt (torch's own callables become no-ops); any
    other global, such as the payload's, is resolved and called as usual."""

    class Unpickler(pickle.Unpickler):
        def persistent_load(self, pid):
            return None

        def find_class(self, module, name):
            if module.split(".")[0] == "torch":
                return lambda *args, **kwargs: None
            return super().find_class(module, name)

    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        name = next(n for n in archive.namelist() if n.endswith("data.pkl"))
        return Unpickler(io.BytesIO(archive.read(name))).load()


@pytest.mark.filterwarnings("ignore:Detected pickle protocol:UserWarning")
@pytest.mark.parametrize(("writer", "expected"), [
    ("torch.save", "contains objects other than tensors"),
    ("pickle protocol 2", "not a torch.save zip archive"),  # torch's legacy format is a bare pickle
    ("pickle protocol 5", "not a torch.save zip archive"),
])
def test_pickle_that_runs_code_is_refused_and_never_runs(cli, one_line_error, good, tmp_path: Path, writer: str,
                                                         expected: str) -> None:
    control, marker = tmp_path / "control-marker", tmp_path / "marker"
    path = tmp_path / "evil.pt"
    if writer == "torch.save":
        path.write_bytes(payload_bytes(good[0], RunsCode(marker)))
        control_bytes = payload_bytes(good[0], RunsCode(control))
    else:
        protocol = int(writer.split()[-1])
        path.write_bytes(pickle.dumps(RunsCode(marker), protocol=protocol))
        control_bytes = pickle.dumps(RunsCode(control), protocol=protocol)
    # the payload is live: a plain (unsafe) unpickler runs it
    if writer == "torch.save":
        unpickle_torch_archive(control_bytes)
    else:
        pickle.loads(control_bytes)
    assert control.exists()
    refused(cli, one_line_error, path, expected)
    assert not marker.exists()


@pytest.mark.parametrize("keep", [0, 0.1, 0.5, 0.95])
def test_truncated_file(cli, one_line_error, trained, tmp_path: Path, keep: float) -> None:
    data = trained[1].read_bytes()
    path = tmp_path / "truncated.pt"
    path.write_bytes(data[: int(len(data) * keep)])
    refused(cli, one_line_error, path, "unreadable or truncated")


def test_not_a_checkpoint(cli, one_line_error, tmp_path: Path) -> None:
    path = tmp_path / "random.pt"
    path.write_bytes(os.urandom(4096))
    refused(cli, one_line_error, path, "unreadable or truncated")
    refused(cli, one_line_error, tmp_path / "absent.pt", "checkpoint not found")


def layout_cases(params: dict[str, torch.Tensor], metadata: dict[str, Any]) -> dict[str, tuple[bytes, str]]:
    weight = params["layer0.weight"]
    cases = {
        "wrong weight shape": ({**params, "layer0.weight": weight[:, :-1]}, metadata, "expected"),
        "transposed weight": ({**params, "layer0.weight": weight.T.contiguous()}, metadata, "expected"),
        "missing parameter": ({"layer0.weight": weight}, metadata, "parameter names"),
        "extra parameter": ({**params, "layer1.weight": weight}, metadata, "parameter names"),
        "non-finite weights": ({**params, "layer0.weight": weight * math.inf}, metadata, "non-finite"),
        "parameter not a tensor": ({**params, "layer0.bias": [0.0]}, metadata, "layer0.bias"),
        "metadata not JSON": (params, "{not json", "checkpoint.metadata"),
        "metadata not a mapping": (params, "[1, 2]", "checkpoint.metadata"),
    }
    out = {name: (payload_bytes(p, m), expected) for name, (p, m, expected) in cases.items()}
    out["format version"] = (payload_bytes(params, metadata, format_version=2), "format")
    out["format version tensor"] = (payload_bytes(params, metadata, format_version=torch.tensor([1, 1])), "format")
    out["extra payload key"] = (payload_bytes(params, metadata, optimizer={}), "layout")
    buffer = io.BytesIO()
    torch.save([params, metadata], buffer)
    out["payload not a mapping"] = (buffer.getvalue(), "layout")
    return out


def metadata_cases(metadata: dict[str, Any]) -> dict[str, tuple[dict[str, Any], str]]:
    without = {k: v for k, v in metadata.items() if k != "noise_multiplier"}
    return {
        "missing noise multiplier": (without, "checkpoint.metadata.noise_multiplier"),
        "missing dataset fingerprint": ({k: v for k, v in metadata.items() if k != "dataset_fingerprint"},
                                        "checkpoint.metadata.dataset_fingerprint"),
        "faulty flag on a correct mechanism": ({**metadata, "faulty": True}, "checkpoint.metadata.faulty"),
        "faulty mechanism without the flag": ({**metadata, "mechanism": "dp_sgd_no_clip"},
                                              "checkpoint.metadata.faulty"),
        "sample rate 2": ({**metadata, "sample_rate": 2}, "checkpoint.metadata.sample_rate"),
        "sample rate 0": ({**metadata, "sample_rate": 0.0}, "checkpoint.metadata.sample_rate"),
        "negative noise": ({**metadata, "noise_multiplier": -1.0}, "checkpoint.metadata.noise_multiplier"),
        "delta 1": ({**metadata, "delta": 1.0}, "checkpoint.metadata.delta"),
        "steps as text": ({**metadata, "steps": "10"}, "checkpoint.metadata.steps"),
        "steps as bool": ({**metadata, "steps": True}, "checkpoint.metadata.steps"),
        "unknown mechanism": ({**metadata, "mechanism": "magic"}, "checkpoint.metadata.mechanism"),
        "model description missing": ({**metadata, "model": {"kind": "logistic"}}, "checkpoint.metadata.model"),
        "metadata format version": ({**metadata, "format_version": 7}, "checkpoint.metadata.format_version"),
        # built on the meta device first: a 10⁵-wide description is refused without allocating its 360 GB
        "cnn larger than a checkpoint": ({**metadata, "model": {**CNN, "hidden": [100000, 100000]}},
                                         "larger than a checkpoint can hold"),
        "cnn of a non-square image": ({**metadata, "model": {**CNN, "n_inputs": 63}}, "needs square images"),
    }


LAYOUT_NAMES = ["wrong weight shape", "transposed weight", "missing parameter", "extra parameter",
                "non-finite weights", "parameter not a tensor", "metadata not JSON", "metadata not a mapping",
                "format version", "format version tensor", "extra payload key", "payload not a mapping"]
METADATA_NAMES = ["missing noise multiplier", "missing dataset fingerprint", "faulty flag on a correct mechanism",
                  "faulty mechanism without the flag", "sample rate 2", "sample rate 0", "negative noise",
                  "delta 1", "steps as text", "steps as bool", "unknown mechanism", "model description missing",
                  "metadata format version", "cnn larger than a checkpoint", "cnn of a non-square image"]


@pytest.mark.parametrize("name", LAYOUT_NAMES)
def test_bad_layout_or_weights(cli, one_line_error, good, tmp_path: Path, name: str) -> None:
    content, expected = layout_cases(*good)[name]
    path = tmp_path / "bad.pt"
    path.write_bytes(content)
    refused(cli, one_line_error, path, expected)


@pytest.mark.parametrize("name", METADATA_NAMES)
def test_missing_or_inconsistent_privacy_metadata(cli, one_line_error, good, tmp_path: Path, name: str) -> None:
    metadata, expected = metadata_cases(good[1])[name]
    path = tmp_path / "bad.pt"
    path.write_bytes(payload_bytes(good[0], metadata))
    refused(cli, one_line_error, path, expected)


def test_case_lists_are_complete(good) -> None:
    assert sorted(LAYOUT_NAMES) == sorted(layout_cases(*good))
    assert sorted(METADATA_NAMES) == sorted(metadata_cases(good[1]))
