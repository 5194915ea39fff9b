"""`fdp-audit reproduce images --quick` and the Fashion-MNIST table command (docs/images.md)."""

from __future__ import annotations

import json

import pytest

from fdp_audit.reproduce import images
from tests.data.test_images import _fashion_folder


@pytest.mark.slow
def test_quick_reproduction_plays_the_image_games_and_draws_the_canaries(tmp_path):
    from fdp_audit.cli import main

    assert main(["reproduce", "images", "--out", str(tmp_path), "--quick"]) == 0
    payload = json.loads((tmp_path / "images.json").read_text(encoding="utf-8"))
    assert {c["mechanism"] for c in payload["cells"]} == {"nonprivate", "public_only", "dp_sgd", "fdp_sgd",
                                                          "fdp_dpsgd"}
    games = payload["gradient_canaries"]
    assert not games["fdp_sgd"]["caught"]  # seeded trials: the correct mechanism passes
    for mechanism in ("dp_sgd_no_clip", "dp_sgd_wrong_rate", "fdp_sgd_leaky_public", "fdp_sgd_shared_batch"):
        assert games[mechanism]["caught"], mechanism
    assert 0.25 < games["fdp_sgd"]["bayes_optimal"] < 1
    assert payload["record_canaries"]["verdict"] == "PASS"
    assert payload["reconstruction"]["verdict"] == "PASS"  # DP-SGD, seeded trials: success ≈ Ball ≪ the bound
    assert (tmp_path / "images_canaries.svg").read_text(encoding="utf-8").startswith("<svg")
    assert "![example canaries](images_canaries.svg)" in (tmp_path / "images.md").read_text(encoding="utf-8")


@pytest.mark.slow
def test_the_fashion_mnist_command_prints_the_table_and_the_step_time(tmp_path, capsys):
    _fashion_folder(tmp_path, n_train=60, n_test=20)
    assert images.main(["--fashion-mnist", str(tmp_path), "--device", "cpu", "--steps", "60", "--pretrain-steps", "2",
                        "--seeds", "1", "--epsilons", "2", "--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert "| fdp_sgd |" in out and "Algorithm 1 step" in out and "target" in out


def test_the_fashion_mnist_command_without_the_files_exits_2(tmp_path, capsys):
    assert images.main(["--fashion-mnist", str(tmp_path / "absent"), "--device", "cpu"]) == 2
    assert "data.path" in capsys.readouterr().err
