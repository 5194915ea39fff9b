"""The CorrDP reproductions and the `fdp-audit corrdp` command line (docs/corrdp.md, docs/files.md)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from fdp_audit.cli import main
from fdp_audit.config import config_from_dict
from fdp_audit.corrdp.experiments import report_section, train_experiment, tv_experiment

SMALL = {
    "dataset": "synthetic",
    "synthetic_rows": 400,
    "synthetic_features": 12,
    "synthetic_sensitive": 3,
    "delta": 1e-4,
    "epsilons": [0.5, 4.0],
    "steps": 300,
    "learning_rate": 0.01,
    "clip_norm": 60.0,
    "seeds": 2,
}


def _config(tmp_path: Path, corrdp: dict | None, **extra: object) -> Path:
    raw = {"name": "t", "seed": 0, "report": {"out_dir": str(tmp_path / "out")}, **extra}
    if corrdp is not None:
        raw["corrdp"] = corrdp
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def test_synthetic_train_and_report_section() -> None:
    result = train_experiment(config_from_dict({"seed": 0, "corrdp": SMALL}))
    json.dumps(result, allow_nan=False)
    gap = {v: c["mean"] for v, c in result["curves"]["utility_gap"].items()}
    assert gap["semi"][0] < gap["corrdp"][0] < gap["standard"][0]  # noise: U none < U reduced < U full
    assert all(g[1] < g[0] for v, g in gap.items() if v in ("corrdp", "standard"))
    assert gap["partial"][0] == gap["partial"][1] and gap["nonprivate"][0] < gap["semi"][0]
    corr = [r for r in result["realised_privacy"]["4.0"] if r["variant"] == "corrdp"]
    assert {r["neighbour"] for r in corr} == {"sensitive"} | {f"insensitive:x{i}" for i in range(4, 13)}
    section = report_section(tv_experiment(config_from_dict({"seed": 0, "corrdp": SMALL})), result)
    json.dumps(section, allow_nan=False)
    assert section["example_2_6"]["d_sensitive_change"] == 1.0 and section["findings"]


def test_mlp_variant_runs_through_the_experiment() -> None:
    corrdp = {**SMALL, "synthetic_rows": 150, "steps": 5, "hidden": 3, "seeds": 1, "variants": ["corrdp", "partial"]}
    result = train_experiment(config_from_dict({"seed": 0, "corrdp": corrdp}))
    assert result["model"] == "mlp(3)" and result["metric"] == "objective"
    assert set(result["curves"]["objective"]) == {"corrdp", "partial"}


def test_synthetic_tv_known_versus_estimate() -> None:
    result = tv_experiment(config_from_dict({"seed": 0, "corrdp": {**SMALL, "synthetic_rows": 20_000}}))
    assert result["coordinates"]["known"]["min"] == pytest.approx(result["coordinates"]["known"]["max"])
    assert result["estimate_abs_error"]["mean"] < 0.05


def test_cli_tv_and_train_write_their_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _config(tmp_path, {**SMALL, "steps": 50, "seeds": 1})
    assert main(["corrdp", "tv", str(path)]) == 0
    assert main(["corrdp", "train", str(path), "--out", str(tmp_path / "other")]) == 0
    assert json.loads((tmp_path / "out" / "corrdp_tv.json").read_text())["dataset"] == "synthetic"
    assert json.loads((tmp_path / "other" / "corrdp_train.json").read_text())["schema"] == "corrdp-train/1"
    assert (tmp_path / "other" / "corrdp_utility.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize(
    ("corrdp", "field"),
    [
        (None, "corrdp"),
        ({"sensitive": ["age", "nope"]}, "corrdp.sensitive"),
        ({"insensitive": ["age", "race"]}, "corrdp.insensitive"),
        ({"dataset": "synthetic", "synthetic_features": 5, "synthetic_sensitive": 5}, "corrdp.synthetic_sensitive"),
        ({"tv_source": "known"}, "corrdp.tv_source"),
        # the generic validator reports errors inside an optional section at the section's name
        ({"epsilons": [0.0]}, "corrdp"),
        ({"bogus": 1}, "corrdp"),
    ],
)
def test_bad_input_is_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], corrdp: dict | None, field: str
) -> None:
    path = _config(tmp_path, corrdp)
    assert main(["corrdp", "tv", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and field in err
    assert not (tmp_path / "out").exists()


def test_cli_needs_an_action_and_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["corrdp"]) == 2
    assert main(["corrdp", "train", str(tmp_path / "missing.yaml")]) == 2
    assert "not found" in capsys.readouterr().err


@pytest.mark.slow
def test_adult_table2_command(tmp_path: Path) -> None:
    config = Path(__file__).resolve().parents[2] / "configs" / "corrdp_adult_table2.yaml"
    assert main(["corrdp", "tv", str(config), "--out", str(tmp_path)]) == 0
    rows = {r["feature"]: r for r in json.loads((tmp_path / "corrdp_tv.json").read_text())["features"]}
    assert set(rows) == {"race", "sex", "workclass", "fnlwgt"}
    assert rows["workclass"]["estimate"] == 1.0 and rows["sex"]["estimate"] > 0.8
    assert all(0.0 <= r["estimate"] <= r["upper"] <= 1.0 for r in rows.values())
    assert np.isclose(rows["sex"]["discrete"]["value"], 0.612, atol=0.005)
