"""The generative section of the report: numbers as stored, sample grids drawn as vector graphics from the stored
grey levels, hostile labels escaped, malformed pixels named as bad input."""

from __future__ import annotations

import re

import pytest

from fdp_audit.errors import BadInputError
from fdp_audit.report.generative import GREY_LEVELS, grid_svg
from fdp_audit.report.model import Node
from fdp_audit.report.render import render_report


def _variant(name: str, mean: float) -> dict:
    summary = {"mean": mean, "sd": 1.5, "min": mean - 2, "max": mean + 2}
    return {"mechanism": name, "label": f"label of {name}", "paper_fid": 25.2, "noise_multiplier": None,
            "distance": summary, "distances": [mean - 2, mean + 2], "per_class_mean": {"0": mean, "1": mean + 1},
            "train_seconds": {"mean": 3.0, "sd": 0.1, "min": 2.9, "max": 3.1},
            "sample_seconds": {"mean": 0.5, "sd": 0.0, "min": 0.5, "max": 0.5}}


def _generative() -> dict:
    return {"dataset": "digits", "public_feature": "blur", "epsilon": 8.0, "delta": 1e-5, "seeds": 2,
            "image_shape": [1, 2, 2], "ordering": {"public_only < dp_sgd": True}, "ordering_holds": True,
            "reference": {"real_train": {"mean": 20.0, "sd": 2.0, "min": 18.0, "max": 22.0},
                          "public_completions": 300.0},
            "variants": [_variant("nonprivate", 81.25), _variant("dp_sgd", 1116.5)],
            "audits": [{"mechanism": "fdp_sgd", "status": "PASS", "claimed_epsilon": 1.5,
                        "best": {"threat_model": "updates", "guesses": 250, "correct": 165}}],
            "grids": {"nonprivate": [[[0, 255, 128, 64]], [[255, 255, 0, 0]]],
                      "dp_sgd": [[[0, 0, 0, 0]], [[1, 2, 3, 4]]]}}


def test_section_shows_the_stored_numbers_and_one_grid_per_model(results):
    results["generative"] = _generative()
    page = render_report(results)
    assert "Generative model: sample quality and audit" in page
    assert "81.25 ± 1.5" in page and "1116 ± 1.5" in page
    assert page.count('id="fig-generative-') == 2 and "label of dp_sgd" in page
    assert "<image" not in page  # vector squares, not an embedded raster


def test_grid_draws_one_square_per_pixel_in_its_grey():
    svg = grid_svg(Node([[[0, 255, 128, 64]], [[255, 255, 0, 0]]]), 2, 2, "x")
    squares = re.findall(r"M(\d+) (\d+)h1v1h-1z", svg)
    assert len(squares) == 8
    assert ("0", "3") in squares and ("1", "4") in squares  # second row of samples starts below a one-pixel gap
    white = round(255 * (GREY_LEVELS - 1) / 255)
    assert 'fill="#ffffff" d="M1 0h1v1h-1z' in svg and white == GREY_LEVELS - 1


def test_hostile_label_is_escaped_and_bad_pixels_are_bad_input(results):
    generative = _generative()
    generative["variants"][0]["label"] = "<script>alert(1)</script>"
    results["generative"] = generative
    page = render_report(results)
    assert "<script>alert(1)" not in page
    generative["grids"]["nonprivate"] = [[[0, 256, 0, 0]]]
    with pytest.raises(BadInputError, match="grids"):
        render_report(results)
