"""The ``prior`` threat model: the Bayes-optimal guess from Pr[v | u] alone, whose success is Ball."""

from __future__ import annotations

import torch

from attacks import ATTACKS, Knowledge, View
from attacks.prior import PriorAttack
from fdp_audit.training.models import Model


def knowledge(prior: list[float]) -> Knowledge:
    return Knowledge(Model("logistic", 3, 2), torch.eye(len(prior), 3), 1, torch.tensor(prior))


def test_scores_are_the_log_prior_for_every_trial() -> None:
    attack = PriorAttack().fit(knowledge([0.2, 0.5, 0.3]))
    for view in (View(params={"w": torch.zeros(7, 2)}), View(noisy_private_sums=torch.zeros(7, 4, 2)),
                 View(public_gradients=torch.zeros(7, 4, 2))):
        out = attack.infer(view)
        assert out.scores.shape == (7, 3)
        torch.testing.assert_close(out.scores, torch.tensor([0.2, 0.5, 0.3]).log().expand(7, 3), check_dtype=False)
        assert out.guess.tolist() == [1] * 7


def test_zero_prior_values_never_win() -> None:
    out = PriorAttack().fit(knowledge([0.0, 1.0])).infer(View(params={"w": torch.zeros(2, 1)}))
    assert torch.isfinite(out.scores).all() and out.guess.tolist() == [1, 1]


def test_registry_declares_threat_models() -> None:
    assert {name: cls.threat_model for name, cls in ATTACKS.items()} == {
        "prior": "prior", "likelihood": "black_box", "shadow": "black_box", "gradient": "white_box",
        "informed_gradient": "white_box", "reconstruction": "white_box", "gradient_matching": "white_box",
        "iterates": "iterates", "iterates_public_aligned": "iterates", "gradient_matching_iterates": "iterates",
        "canary_logit": "black_box", "noise_scale": "black_box"}
    assert [name for name, cls in ATTACKS.items() if "continuous" in cls.supports] == [
        "prior", "reconstruction", "gradient_matching"]
    assert [name for name, cls in ATTACKS.items() if "categorical" not in cls.supports] == [
        "reconstruction", "gradient_matching", "gradient_matching_iterates"]
    assert [name for name, cls in ATTACKS.items() if "subspace" in cls.supports] == [
        "prior", "gradient_matching_iterates"]
    assert [name for name, cls in ATTACKS.items() if cls.needs_gradient_canary] == [
        "iterates", "iterates_public_aligned"]
    assert [name for name, cls in ATTACKS.items() if cls.needs_input_canary] == ["canary_logit", "noise_scale"]
