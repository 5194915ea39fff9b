"""The membership game's final-model attacks (attacks/input_canary.py): known answers on logistic regressions
whose weights are set by hand, and models that do not depend on the secret."""

from __future__ import annotations

import torch

from attacks.base import Knowledge, View
from attacks.input_canary import CanaryLogitAttack, NoiseScaleAttack
from fdp_audit.auditing.decision import fit_decision_rule, selection_split
from fdp_audit.training.models import Model

D, CANARY, NOISE = 6, 3, (4, 5)
VALUE = 10.0


def _knowledge(model: Model) -> Knowledge:
    canary = torch.zeros(D)
    canary[CANARY] = VALUE
    return Knowledge(model, torch.stack([torch.zeros(D), canary]), 1, torch.tensor([0.5, 0.5]), noise_inputs=NOISE)


def _logistic(weights: torch.Tensor, bias: torch.Tensor) -> View:
    return View({"layer0.weight": weights[:, None, :].float(), "layer0.bias": bias[:, None].float()})


def test_canary_logit_is_m_times_the_canary_column_weight() -> None:
    """One logit: M·w_c, whatever the bias. Three classes with label 1: M·(w_1c − (w_0c + w_2c)/2)."""
    weights = torch.randn(5, D, generator=torch.Generator().manual_seed(0))
    bias = torch.tensor([0.0, 1.0, -2.0, 0.5, 3.0])
    scores = CanaryLogitAttack().fit(_knowledge(Model("logistic", D, 2))).infer(_logistic(weights, bias)).scores
    assert torch.allclose(scores[:, 1], VALUE * weights[:, CANARY].double(), atol=1e-4)
    assert bool((scores[:, 0] == 0).all())
    three = torch.randn(5, 3, D, generator=torch.Generator().manual_seed(1))
    view = View({"layer0.weight": three, "layer0.bias": torch.randn(5, 3)})
    scores = CanaryLogitAttack().fit(_knowledge(Model("logistic", D, 3))).infer(view).scores
    column = three[:, :, CANARY].double()
    assert torch.allclose(scores[:, 1], VALUE * (column[:, 1] - (column[:, 0] + column[:, 2]) / 2), atol=1e-4)


def test_noise_scale_is_minus_the_log_rms_of_the_untouched_weights() -> None:
    """For a linear model the response along an untouched column is that column's weight, for every output."""
    model = Model("logistic", D, 3)
    generator = torch.Generator().manual_seed(1)
    weights = torch.randn(4, 3, D, generator=generator)
    view = View({"layer0.weight": weights, "layer0.bias": torch.randn(4, 3, generator=generator)})
    scores = NoiseScaleAttack().fit(_knowledge(model)).infer(view).scores
    expected = -0.5 * torch.log(weights[:, :, list(NOISE)].double().square().mean(dim=(1, 2)))
    assert torch.allclose(scores[:, 1], expected, atol=1e-5)


def test_scores_that_do_not_depend_on_the_secret_do_not_distinguish_it() -> None:
    """Null: 4,000 models drawn from one distribution, labelled by independent fair bits. The fitted rule's
    evaluation successes are Binomial(2000, ½) whatever the selection did: above 1,090 (4 standard errors)
    with probability below 4e-5."""
    generator = torch.Generator().manual_seed(2)
    model = Model("logistic", D, 2)
    weights, bias = torch.randn(4000, D, generator=generator), torch.randn(4000, generator=generator)
    labels = torch.randint(0, 2, (4000,), generator=generator).numpy()
    selection, evaluation = selection_split(len(labels))
    for attack in (CanaryLogitAttack(), NoiseScaleAttack()):
        scores = attack.fit(_knowledge(model)).infer(_logistic(weights, bias)).scores.numpy()
        rule = fit_decision_rule(scores[selection], labels[selection])
        assert rule.successes(scores[evaluation], labels[evaluation]) < 1090
