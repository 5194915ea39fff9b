"""What an informed adversary recomputes of a training run (fdp_audit.training.replay), against the model's own
forward pass and per-example gradients from torch.func."""

from __future__ import annotations

from dataclasses import replace

import torch
from torch.func import grad, vmap

from fdp_audit.config import config_from_dict
from fdp_audit.data.prepare import prepare_data
from fdp_audit.training import streams
from fdp_audit.training.engine import flatten
from fdp_audit.training.models import example_loss
from fdp_audit.training.replay import clipped_private_sums, models_logits, private_losses
from fdp_audit.training.run import build_problem


def image_problem(mechanism: str):
    raw = {"data": {"dataset": "digits", "protected": [], "public_map": "downsample", "downsample_factor": 2,
                    "max_rows": 60},
           "model": {"kind": "cnn", "hidden": [4, 8]},
           "mechanism": {"name": mechanism, "public_loss": "public_image"} if mechanism == "fdp_sgd" else
           {"name": mechanism}}
    config = config_from_dict(raw)
    return build_problem(config, prepare_data(config.data, config.seed))


def test_models_logits_is_each_models_forward_pass() -> None:
    problem = image_problem("fdp_sgd")
    model = problem.model
    params = {k: v.double() for k, v in model.init(streams.model_keys(0, torch.arange(3))).items()}
    x = torch.rand(3, 5, 64, dtype=torch.float64)
    expected = torch.stack([model.forward({k: v[r] for k, v in params.items()}, x[r]) for r in range(3)])
    torch.testing.assert_close(models_logits(model, params, x), expected, rtol=1e-12, atol=1e-12)


def test_clipped_private_sums_match_per_example_gradients() -> None:
    """Σ clip_C(∇ℓ_priv) over the data set, for the decomposed loss of Algorithm 1 and DP-SGD's full loss, against
    torch.func per-example gradients of the model's own forward pass (float64, to 1e-9)."""
    for mechanism in ("fdp_sgd", "dp_sgd"):
        problem = image_problem(mechanism)
        model = problem.model
        params = {k: v.double() for k, v in model.init(streams.model_keys(1, torch.arange(2))).items()}
        x, y = problem.x.double(), problem.y
        public = problem.public_loss

        def loss(p, record, label, public=public, model=model, psi=problem.public_map):
            value = example_loss(model.forward(p, record[None]), label[None])[0]
            if public is None:
                return value
            inputs = public.inputs(psi(record[None], label[None])).double()
            return value - example_loss(model.forward(p, inputs), label[None])[0]

        per_example = flatten(vmap(vmap(grad(loss), in_dims=(None, 0, 0)), in_dims=(0, None, None))(params, x, y),
                              lead=2)
        norms = per_example.norm(dim=-1, keepdim=True)
        expected = (per_example * (0.5 / norms).clamp(max=1.0)).sum(dim=1)
        problem = replace(problem, x=x)
        torch.testing.assert_close(clipped_private_sums(problem, params, 0.5), expected, rtol=1e-9, atol=1e-9)
        losses = private_losses(problem, {k: v[:1] for k, v in params.items()}, x[None, :4], y[None, :4])
        torch.testing.assert_close(losses[0], vmap(loss, in_dims=(None, 0, 0))({k: v[0] for k, v in params.items()},
                                                                               x[:4], y[:4]))
