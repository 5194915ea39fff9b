"""What code outside the training core may use of it: the ``attacks`` package and third-party training code
depend on these names only (docs/extending.md), so the engine may change behind them.

* models: :class:`Model` (architecture and the functional forward pass), :data:`Params` (a parameter tree
  with a leading model dimension), :func:`example_loss` (per-example cross-entropy), :func:`predict_logits`;
  :func:`flatten` / :func:`unflatten` between a parameter tree and one vector per model;
* the training problem and its canaries: :class:`TrainingProblem` (model, data, Ψ, public loss, recipe,
  hyperparameters), :class:`Canaries` (the records or gradients a game inserts, one set per model);
* training: :func:`train_models`, the batched engine (shadow models are trained with it), and
  :func:`learning_rate`, :func:`models_logits`, :func:`private_losses` and :func:`clipped_private_sums`, what
  an informed adversary replays of a training run (:mod:`fdp_audit.training.replay`).
"""

from fdp_audit.training.engine import Canaries, TrainingProblem, flatten, predict_logits, train_models, unflatten
from fdp_audit.training.models import Model, Params, example_loss
from fdp_audit.training.optim import learning_rate
from fdp_audit.training.replay import clipped_private_sums, models_logits, private_losses

__all__ = [
    "Canaries",
    "Model",
    "Params",
    "TrainingProblem",
    "example_loss",
    "flatten",
    "clipped_private_sums",
    "learning_rate",
    "models_logits",
    "private_losses",
    "predict_logits",
    "train_models",
    "unflatten",
]
