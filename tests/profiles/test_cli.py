"""`fdp-audit profile CONFIG [--out DIR]` end to end, and its one-line bad-input errors (docs/files.md)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from fdp_audit.cli import main
from fdp_audit.profiles import third_party
from fdp_audit.report.sections import build_view

REPORT_FIXTURE = Path(__file__).parents[1] / "report" / "fixtures" / "results.json"

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
        (lambda t: t.replace("mechanism: laplace", "mechanism: sgd"), "profile.mechanism"),
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


TRAINED = """
name: tiny-trained-profile
seed: 5
device: cpu
mechanism: {{name: {mechanism}, noise_multiplier: 0.5, sample_rate: 0.2, steps: 5, clip_norm: 1.0,
            public_batch_size: 16, public_loss: {public_loss}}}
report: {{out_dir: {out}}}
profile:
  columns: [age, education-num]
  rows: 40
  mechanism: {mechanism}
  neighbour: {neighbour}
  protected: [education-num]
  samples: 60
  monte_carlo_rows: 3
  monte_carlo_points: 4
"""


@pytest.mark.parametrize(("mechanism", "neighbour"), [("dp_sgd", "remove"), ("fdp_sgd", "replace")])
def test_trained_mechanisms_give_a_labelled_estimate_and_a_report_section(tmp_path, capsys, mechanism, neighbour,
                                                                         audited_results):
    out = tmp_path / "out"
    text = TRAINED.format(out=out, mechanism=mechanism, neighbour=neighbour, public_loss="mask")
    assert main(["profile", str(_write(tmp_path, text))]) == 0
    assert "Monte Carlo estimate" in capsys.readouterr().out
    results = json.loads((out / "profile.json").read_text())
    assert results["kind"] == "privacy_profile_estimate" and results["label"] == "Monte Carlo estimate"
    assert results["setting"]["parameters"] == ["age", "education-num", "bias"]
    assert results["setting"]["relation"] == ("add_remove" if neighbour == "remove" else "replace")
    assert results["estimate"]["base_samples"] == results["estimate"]["neighbour_samples"] == 60
    assert results["centre"]["cutoff"] > 0 and len(results["centre"]["estimate"]) == 3
    assert len(results["typical"]["profile"]) == 3 and results["typical"]["points"] == 4
    assert results["training"]["claimed_epsilon"] > 0
    for relative in results["figures"].values():
        assert (out / relative).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with np.load(out / "profiles.npz") as arrays:
        assert arrays["neighbour_samples"].shape == (3, 60, 3) and arrays["point_losses"].shape == (4, 3)

    # fdp-audit report RESULTS --profile SECTION shows the estimate in the HTML report
    html = tmp_path / "report.html"
    assert main(["report", str(audited_results), "-o", str(html), "--profile", str(out / "report_section.json")]) == 0
    page = html.read_text(encoding="utf-8")
    assert 'id="profile"' in page and "Monte Carlo estimate" in page and "fig-profile-0" in page


def test_density_report_section_renders_with_its_figures(tmp_path):
    out = tmp_path / "out"
    config = _write(tmp_path, TINY.format(out=out, mechanism="laplace", neighbour="remove"))
    assert main(["profile", str(config)]) == 0
    section = json.loads((out / "report_section.json").read_text())
    results = json.loads(REPORT_FIXTURE.read_text())
    results["profile"] = section
    (view,) = [s for s in build_view(results).sections if s.id == "profile"]
    assert sorted(f.caption for f in view.figures) == ["neighbour curves", "transition"]
    assert all(f.svg is not None for f in view.figures)  # each SVG passed the report's safety check
    facts = dict(view.facts)
    profile = json.loads((out / "profile.json").read_text())
    assert facts["epsilon low"].fields == {"/profile/epsilon_low": profile["transition"]["epsilon_low"]}
    assert len(view.tables) == 3


def test_scatter_rows_draw_the_scatter_on_the_first_rows(tmp_path):
    out = tmp_path / "out"
    text = TINY.format(out=out, mechanism="laplace", neighbour="remove")
    text = text.replace("rows: 60", "rows: 60\n  scatter_rows: 25")
    assert main(["profile", str(_write(tmp_path, text))]) == 0
    results = json.loads((out / "profile.json").read_text())
    assert results["setting"]["n"] == 60 and results["scatter"]["n"] == 25
    assert max(results["scatter"]["rows_shown"]) < 25


def test_fdp_sgd_refuses_a_public_loss_fitted_on_protected_values(tmp_path, capsys):
    text = TRAINED.format(out=tmp_path / "out", mechanism="fdp_sgd", neighbour="replace", public_loss="impute")
    assert main(["profile", str(_write(tmp_path, text))]) == 2
    assert "mechanism.public_loss:" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_diffprivlib_that_cannot_run_is_bad_input(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(third_party, "unavailable_reason", lambda: "ImportError: no module named 'diffprivlib'")
    out = tmp_path / "out"
    text = TINY.format(out=out, mechanism="laplace", neighbour="remove")
    text = text.replace("rows: 60", "rows: 60\n  diffprivlib: true")
    assert main(["profile", str(_write(tmp_path, text))]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "profile.diffprivlib:" in err and "ImportError" in err
    assert not out.exists()


def test_fdp_sgd_refuses_removal_neighbours(tmp_path, capsys):
    """FDP-SGD's ε bounds replacement of the protected part (and insertion/deletion against a simulator that
    keeps Ψ(x)), not training on D − x: comparing that loss with its ε would be wrong."""
    text = TRAINED.format(out=tmp_path / "out", mechanism="fdp_sgd", neighbour="remove", public_loss="mask")
    assert main(["profile", str(_write(tmp_path, text))]) == 2
    assert "profile.neighbour:" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
