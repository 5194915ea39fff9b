"""The reconstruction success metric (docs/accounting.md): ``d(x̂, x) <= ρ`` with the L2 or L∞ distance."""

from __future__ import annotations

import math

import pytest
import torch

from attacks import Knowledge, View
from attacks.prior import PriorAttack
from attacks.success import reconstruction_distance, reconstruction_success
from fdp_audit.errors import BadInputError
from fdp_audit.training.models import Model

ESTIMATE = torch.tensor([[0.0, 0.0], [3.0, 4.0], [math.nan, 0.0]])
TRUTH = torch.zeros(3, 2)


def test_distances_in_closed_form() -> None:
    torch.testing.assert_close(reconstruction_distance(ESTIMATE[:2], TRUTH[:2]), torch.tensor([0.0, 5.0]),
                               check_dtype=False)
    torch.testing.assert_close(reconstruction_distance(ESTIMATE[:2], TRUTH[:2], "linf"), torch.tensor([0.0, 4.0]),
                               check_dtype=False)


def test_success_over_a_grid_of_radii() -> None:
    assert reconstruction_success(ESTIMATE, TRUTH, [4.0, 5.0]).tolist() == [[True, True], [False, True],
                                                                             [False, False]]
    assert reconstruction_success(ESTIMATE, TRUTH, [4.0, 5.0], "linf").tolist() == [[True, True], [True, True],
                                                                                     [False, False]]
    assert reconstruction_success(ESTIMATE, TRUTH, 0.0).tolist() == [True, False, False]


@pytest.mark.parametrize(("kwargs", "field"), [({"metric": "l7"}, "metric"), ({"rho": -1.0}, "rho"),
                                               ({"truth": torch.zeros(3, 3)}, "estimate")])
def test_bad_input(kwargs: dict, field: str) -> None:
    arguments = {"estimate": ESTIMATE, "truth": TRUTH, "rho": 1.0} | kwargs
    with pytest.raises(BadInputError) as error:
        reconstruction_success(**arguments)
    assert error.value.field == field


def test_prior_attack_guesses_the_prior_centre() -> None:
    template = torch.tensor([[0.5, 0.25, -1.0, 2.0]])
    knowledge = Knowledge(Model("logistic", 4, 2), template, 0, torch.ones(1), protected_coordinates=(1, 3))
    out = PriorAttack().fit(knowledge).infer(View(params={"w": torch.zeros(5, 1)}))
    assert out.scores is None
    torch.testing.assert_close(out.estimate, torch.tensor([[0.25, 2.0]], dtype=torch.float64).expand(5, 2))
