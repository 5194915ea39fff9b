"""The model a config names: a built-in architecture (:mod:`fdp_audit.training.models`) or a user's ``nn.Module``
(:mod:`fdp_audit.training.modules`), which itself builds on the built-in models' interface."""

from __future__ import annotations

from fdp_audit.config import ModelConfig
from fdp_audit.errors import BadInputError
from fdp_audit.training.cnn import cnn_model
from fdp_audit.training.models import Model
from fdp_audit.training.modules import build_module_model


def build_model(config: ModelConfig, n_inputs: int, n_classes: int, factory_timeout: float | None = None) -> Model:
    """The model ``config`` names: a built-in architecture, checked against the data's shape, or the user's
    ``nn.Module`` from its factory.

    Args:
        config: the configuration's ``model`` section (``kind``, ``hidden`` widths, ``factory``).
        n_inputs: the number of encoded input columns (pixels for images).
        n_classes: the number of label classes (2 for a binary task, which gets one logit).
        factory_timeout: ``audit.trial_timeout``, the limit of every call of a user's factory (None: none).

    Returns:
        The model: a :class:`Model` for ``logistic``/``mlp``, a :class:`ModuleModel` for ``cnn`` and ``module``.

    Raises:
        BadInputError: logistic regression given hidden layers, a ``cnn`` whose images do not fit its pooling, or a
            factory whose module is refused.
    """
    if config.kind == "module":
        assert config.factory is not None
        return build_module_model(config.factory, n_inputs, n_classes, factory_timeout)
    if config.kind == "cnn":
        return cnn_model(n_inputs, n_classes, tuple(config.hidden))
    if config.kind == "logistic" and config.hidden:
        raise BadInputError("logistic regression has no hidden layers", "model.hidden")
    return Model(config.kind, n_inputs, n_classes, tuple(config.hidden))
