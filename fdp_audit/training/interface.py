"""What code outside the training core may use of it: the ``attacks`` package and third-party training code
depend on these names only (docs/extending.md), so the engine may change behind them.

* models: :class:`Model` (architecture and the functional forward pass), :data:`Params` (a parameter tree
  with a leading model dimension), :func:`example_loss` (per-example cross-entropy), :func:`predict_logits`;
  :func:`flatten` / :func:`unflatten` between a parameter tree and one vector per model;
* the training problem and its canaries: :class:`TrainingProblem` (model, data, Ψ, public loss, recipe,
  hyperparameters), :class:`Canaries` (the records or gradients a game inserts, one set per model);
* training: :func:`train_models`, the batched engine (shadow models are trained with it).
"""

from fdp_audit.training.engine import Canaries, TrainingProblem, flatten, predict_logits, train_models, unflatten
from fdp_audit.training.models import Model, Params, example_loss

__all__ = [
    "Canaries",
    "Model",
    "Params",
    "TrainingProblem",
    "example_loss",
    "flatten",
    "predict_logits",
    "train_models",
    "unflatten",
]
