"""`fdp-audit profile CONFIG [--out DIR]` end to end, and its one-line bad-input errors (SPEC 5.1)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from fdp_audit.cli import main

TINY = """
name: tiny-profile
seed: 3
report: {{out_dir: {out}}}
profile:
  columns: [age, education-num, marital-status]
  rows: 60
  neighbour: {neighbour}
  protected: [marital-status]
  mechanism: {mechanism}
  epsilons: [1.0, 100.0]
  samples: 40
  rank_quantiles: [0.5, 1.0]
  sweep_min_epsilon: 0.01
  sweep_max_epsilon: 100000.0
  sweep_points: 9
"""


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(("mechanism", "neighbour"), [("laplace", "replace"), ("gaussian", "remove")])
def test_profile_command_writes_json_arrays_and_figures(tmp_path, capsys, mechanism, neighbour):
    out = tmp_path / "out"
    config = _write(tmp_path, TINY.format(out=tmp_path / "unused", mechanism=mechanism, neighbour=neighbour))
    assert main(["profile", str(config), "--out", str(out)]) == 0
    assert "wrote" in capsys.readouterr().out
    results = json.loads((out / "profile.json").read_text())
    assert results["schema_version"] == 1 and results["setting"]["n"] == 60 and results["setting"]["d"] > 2
    assert results["setting"]["mechanism"] == mechanism and results["neighbours"]["kind"] == neighbour
    assert results["coverage_check"]["label"] == "Monte Carlo estimate" and results["coverage_check"]["cutoff"] > 0
    assert results["worst_case_accuracy"]["max_sphere_excess"] <= 1e-12
    assert len(results["sweep"]["curves"]) == 2 and len(results["sweep"]["epsilons"]) == 9
    for name, relative in results["figures"].items():
        assert (out / relative).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name
    assert {"scatter", "worst_case", "profiles", "typical_profiles", "transition", "neighbour_curves"} <= set(
        results["figures"]
    )
    with np.load(out / "profiles.npz") as arrays:
        assert arrays["deltas"].shape == (60, results["setting"]["d"])
        assert arrays["typical_profiles"].shape == (9, 60)
    assert not (tmp_path / "unused").exists()  # --out wins over report.out_dir


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        (lambda t: t.replace("profile:\n", "profile:\n  bogus: 1\n"), "profile.bogus"),
        (lambda t: t.replace("mechanism: laplace", "mechanism: dp_sgd"), "profile.mechanism"),
        (lambda t: t.replace("protected: [marital-status]", "protected: [race]"), "profile.protected"),
        (lambda t: t.replace("rows: 60", "rows: 100000000"), "profile.rows"),
        (lambda t: t.replace("[age, education-num, marital-status]", "[age, nope]"), "profile.columns"),
        (lambda t: t.replace("sweep_min_epsilon: 0.01", "sweep_min_epsilon: 1e6"), "profile.sweep_min_epsilon"),
        (lambda t: t.replace("samples: 40", "samples: 1"), "profile.samples"),
        (lambda t: t.split("profile:")[0], "profile"),
    ],
)
def test_bad_input_is_one_line_exit_2_and_writes_nothing(tmp_path, capsys, edit, field):
    out = tmp_path / "out"
    text = edit(TINY.format(out=out, mechanism="laplace", neighbour="replace"))
    assert main(["profile", str(_write(tmp_path, text))]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and f"{field}:" in err
    assert not out.exists()


def test_missing_config_file(tmp_path, capsys):
    assert main(["profile", str(tmp_path / "nope.yaml")]) == 2
    assert "not found" in capsys.readouterr().err
