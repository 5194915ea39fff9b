"""Any ``torch.nn.Module`` as a model (docs/training.md): the config names a factory (``model.factory:
file.py:function`` or ``package.module:function``) and :class:`ModuleModel` gives it the functional interface
of the built-in models (:class:`fdp_audit.training.models.Model`), so that the batched engine, the attacks and
the checkpoint audit use it unchanged.

* The factory is called as ``factory()`` or, when it takes two parameters, ``factory(n_inputs, n_classes)``.
  The module maps inputs ``[B, n_inputs]`` (the encoded records) to logits ``[B, V]``: one per class (softmax
  cross-entropy), or one for a binary task (the logistic loss), as the built-in models do.
* Parameters keep the module's own names (``encoder.0.weight``), in the order of ``named_parameters()``.
* ``forward(params, x)`` is ``torch.func.functional_call`` of the module with the given parameters (buffers are
  the module's own), so per-example gradients come from ``torch.func.grad`` under ``vmap`` like any built-in
  model's. The module runs in eval mode: dropout is off.
* Initialisation: each model's parameters are the factory's own initialisation with torch's generator seeded
  from the model's key (the INIT stream), so the models of an audit start apart and a model's start depends on
  its key only.
* Per-example norms: a module that :mod:`fdp_audit.training.layer_plan` traces into a chain of planned layers
  (convolutions, linear layers, GroupNorm/LayerNorm, element-wise maps, pooling, reshapes) gets the engine's fast
  path, :mod:`fdp_audit.training.conv_ghost` (ghost or direct norms per layer, batched over models); any other
  module keeps ``torch.func``, and a line on stderr names the call that has no plan. BatchNorm is refused as bad
  input: its batch statistics mix the records of a batch, which per-example clipping cannot bound.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

import torch
from torch import nn
from torch.func import functional_call

from fdp_audit.errors import BadInputError
from fdp_audit.threads import threads_for
from fdp_audit.training import layer_plan, streams
from fdp_audit.training.layer_plan import LayerPlan
from fdp_audit.training.models import Model, Params
from fdp_audit.user_calls import UserCalls, supervised_call
from fdp_audit.user_code import load_function, raise_failure

FIELD = "model.factory"


def build_module(factory: Callable[..., nn.Module], n_inputs: int, n_classes: int, field_name: str = FIELD,
                 timeout: float | None = None, seed: int | None = None) -> nn.Module:
    """Call the user's factory (with ``(n_inputs, n_classes)`` when it takes two parameters) and check that it
    returned a module; its failures are bad input. With a ``timeout``, the call is made as a trial's call of the
    training function is (:class:`fdp_audit.user_calls.UserCalls`): past the limit it is interrupted and bad input
    naming ``audit.trial_timeout``.

    Args:
        factory: the user's model factory.
        n_inputs: the number of encoded input columns.
        n_classes: the number of label classes.
        field_name: the config field named in errors.
        timeout: ``audit.trial_timeout`` in seconds, or None for no limit.
        seed: the trial's seed the module is built for, for messages (None: outside any trial).

    Returns:
        The module the factory built.

    Raises:
        UserCodeError: the factory raised or ran past ``timeout`` (its message carries the user's traceback).
        BadInputError: the factory returned something other than an ``nn.Module``.
    """
    call = partial(factory, n_inputs, n_classes) if takes_input_width(factory) else factory
    if timeout is not None:
        module = UserCalls(field_name, "the model factory", 1, timeout).call(call, (), seed)
    else:
        try:
            with supervised_call(field_name, "the model factory"):
                module = call()
        except (Exception, SystemExit) as err:
            raise_failure(err, "the model factory failed", field_name)
    if not isinstance(module, nn.Module):
        raise BadInputError(f"the model factory returned a {type(module).__name__}, not a torch.nn.Module",
                            field_name)
    return module


def takes_input_width(factory: Callable[..., nn.Module]) -> bool:
    """Whether the factory is called as ``factory(n_inputs, n_classes)`` (two parameters or more), not ``factory()``.

    Args:
        factory: the user's model factory.

    Returns:
        True when it takes the input width.
    """
    try:
        return len(inspect.signature(factory).parameters) >= 2
    except (TypeError, ValueError):
        return False


def seed_for_key(key: torch.Tensor) -> int:
    """A torch seed from a model key ``[2]`` (int32 words) and the INIT stream: distinct keys, distinct seeds.

    Args:
        key: one model key ``[2]``.

    Returns:
        The 64-bit seed.
    """
    low, high = (int(w) & 0xFFFFFFFF for w in key.tolist())
    return ((high << 32) | low) ^ (int(streams.Stream.INIT) << 59)


@dataclass(frozen=True, eq=False)
class ModuleModel(Model):
    """A user's ``nn.Module`` with the functional interface of :class:`Model` (module docstring)."""

    factory: Callable[..., nn.Module] | None = field(default=None, repr=False)
    module: nn.Module | None = field(default=None, repr=False)
    logits: int = 0  # the module's output width: one logit per class, or one for a binary task (0: the latter)
    plan: LayerPlan | None = field(default=None, repr=False)  # the fast path's layers; None: torch.func
    unplanned: str = ""  # why there is no plan: the call the trace could not plan
    factory_timeout: float | None = None  # audit.trial_timeout: every call of the factory is under it

    @property
    def n_outputs(self) -> int:
        return self.logits or super().n_outputs

    def shapes(self) -> dict[str, tuple[int, ...]]:
        """The module's parameter shapes, with its own names, in the order of ``named_parameters()``.

        Returns:
            Each parameter's shape by name.
        """
        assert self.module is not None
        return {name: tuple(p.shape) for name, p in self.module.named_parameters()}

    def forward(self, params: Params, x: torch.Tensor) -> torch.Tensor:
        """Logits ``[..., n_outputs]`` for inputs ``[..., n_inputs]``: ``functional_call`` of the module with
        ``params`` and its own buffers.

        Args:
            params: the parameters by name, without a model dimension.
            x: inputs ``[..., n_inputs]``.

        Returns:
            Logits ``[..., n_outputs]``.
        """
        assert self.module is not None
        lead = x.shape[:-1]
        buffers = {name: b.to(x.device) for name, b in self.module.named_buffers()}  # the module's own, on x's device
        out = functional_call(self.module, {**params, **buffers}, (x.reshape(-1, x.shape[-1]),))
        return out.reshape(*lead, self.n_outputs)

    def init(self, keys: torch.Tensor, device: torch.device | str = "cpu") -> Params:
        """The factory's initialisation for each model key, ``[R, *shape]`` (module docstring).

        Args:
            keys: model keys ``[R, 2]``; torch's generator is seeded from each (:func:`seed_for_key`).
            device: where the parameters are put.

        Returns:
            The parameters by name, each ``[R, *shape]``.

        Raises:
            BadInputError: the factory fails or gives non-finite parameters.
        """
        assert self.factory is not None
        per_model = []
        with torch.random.fork_rng(devices=[]):
            for key in keys.cpu():
                torch.manual_seed(seed_for_key(key))
                module = build_module(self.factory, self.n_inputs, self.n_classes, timeout=self.factory_timeout,
                                      seed=seed_for_key(key))
                per_model.append(finite_parameters(module))
        return {name: torch.stack([m[name] for m in per_model]).to(device) for name in per_model[0]}

    @property
    def activation_floats(self) -> int:
        """A count of one example's activations (for the memory estimate): every planned step's output, or without a
        plan a rough one, the parameters' output sizes."""
        if self.plan is not None:
            return layer_plan.activation_floats(self.plan)
        return self.n_inputs + sum(s[0] for s in self.shapes().values() if s)


def finite_parameters(module: nn.Module) -> Params:
    """The factory's module's parameters (detached, float32), refused when one is not finite: a NaN weight would
    fail the layer plan's checks, or make training look as if it diverged and blame the learning rate.

    Args:
        module: a module the factory built.

    Returns:
        Its parameters by name.
    """
    params = {name: p.detach().float() for name, p in module.named_parameters()}
    for name, value in params.items():
        if not torch.isfinite(value).all():
            raise BadInputError(f"the factory's module has non-finite values in its parameter {name}", FIELD)
    return params


def build_module_model(spec: str, n_inputs: int, n_classes: int, factory_timeout: float | None = None
                       ) -> ModuleModel:
    """The model of a ``model.factory`` spec on data of ``n_inputs`` encoded columns and ``n_classes`` labels;
    refuses a module whose output does not have one logit per class (one for a binary task).

    Args:
        spec: the factory, ``file.py:function`` or ``package.module:function``.
        n_inputs: the number of encoded input columns.
        n_classes: the number of label classes.
        factory_timeout: ``audit.trial_timeout``, the limit of every call of the factory (None: none).

    Returns:
        The :class:`ModuleModel`.

    Raises:
        BadInputError: the factory cannot be loaded, fails, runs past its limit, or its module is refused.
    """
    return module_model(load_function(spec, FIELD), n_inputs, n_classes, factory_timeout=factory_timeout)


def _refuse_batch_norm(module: nn.Module) -> None:
    for name, layer in module.named_modules():
        if isinstance(layer, nn.modules.batchnorm._BatchNorm):
            raise BadInputError(f"the module has a BatchNorm layer ({name or 'the module'}: {type(layer).__name__}), "
                                "whose batch statistics mix the records of a batch; use GroupNorm or "
                                "LayerNorm", FIELD)


_REPORTED: set[str] = set()


def _plan_or_reason(module: nn.Module, n_inputs: int) -> tuple[LayerPlan | None, str]:
    """The module's layer plan, or why it has none (reported once per process on stderr)."""
    try:
        with threads_for(0):  # its checks run a few examples
            return layer_plan.trace(module, n_inputs), ""
    except layer_plan.Unsupported as err:
        reason = str(err)
    if reason not in _REPORTED:
        _REPORTED.add(reason)
        print(f"fdp-audit: model: no per-layer norms for {reason}; per-example gradients from torch.func",
              file=sys.stderr, flush=True)
    return None, reason


def module_model(factory: Callable[..., nn.Module], n_inputs: int, n_classes: int, kind: str = "module",
                 hidden: tuple[int, ...] = (), image_side: int = 0, factory_timeout: float | None = None
                 ) -> ModuleModel:
    """The :class:`ModuleModel` of a factory (module docstring): checked, in eval mode, with its layer plan.

    Args:
        factory: the user's model factory.
        n_inputs: the number of encoded input columns.
        n_classes: the number of label classes.
        kind: the model kind recorded (``module``, or ``cnn`` for the built-in one).
        hidden: the widths recorded in the model's description.
        image_side: the image side recorded (0 for tabular data).
        factory_timeout: ``audit.trial_timeout``, the limit of every call of the factory (None: none).

    Returns:
        The model, with its layer plan, or none and the call the trace could not plan.

    Raises:
        BadInputError: the module has no parameters, has BatchNorm, non-finite parameters, fails on a batch, or
            gives logits of the wrong shape.
    """
    with threads_for(0):  # the model's size, from which the trials' thread count is chosen, is not known yet
        module = build_module(factory, n_inputs, n_classes, timeout=factory_timeout)
    module.eval()
    for p in module.parameters():
        p.requires_grad_(False)
    if not list(module.parameters()):
        raise BadInputError("the module has no parameters", FIELD)
    _refuse_batch_norm(module)
    finite_parameters(module)
    params = {name: p.detach() for name, p in module.named_parameters()}
    try:
        with torch.no_grad(), threads_for(0):  # a few examples: intra-op threads would only wait on each other
            out = functional_call(module, params, (torch.zeros(2, n_inputs),))
    except (Exception, SystemExit) as err:
        raise_failure(err, f"the module fails on a batch of inputs [2, {n_inputs}]", FIELD)
    widths = {n_classes, 1} if n_classes == 2 else {n_classes}
    if not isinstance(out, torch.Tensor) or out.dim() != 2 or out.shape[0] != 2 or out.shape[1] not in widths:
        shape = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
        raise BadInputError(f"the module maps inputs [2, {n_inputs}] to {shape}; expected logits "
                            f"[2, {' or '.join(str(w) for w in sorted(widths))}] ({n_classes} classes)", FIELD)
    plan, reason = _plan_or_reason(module, n_inputs)
    return ModuleModel(kind, n_inputs, n_classes, hidden, image_side, factory=factory, module=module,
                       logits=int(out.shape[1]), plan=plan, unplanned=reason, factory_timeout=factory_timeout)


class ModelsMap:
    """``fn`` mapped over a leading model dimension: ``torch.func.vmap`` where every operation of the module has
    a batching rule for stacked parameters, else a Python loop over the models (each model's call still
    vmapped over its examples inside ``fn``). The first call decides, once; :attr:`looped` says which it took.

    Modules that need the loop build a tensor and then write a parameter into it in place (``out = zeros(…);
    out += self.bias``): under ``vmap`` over models the parameter is batched and the buffer is not, which vmap
    refuses. Data-dependent Python control flow (``if x.sum() > 0``) and ``.item()`` fail under any ``vmap``,
    per example too, so such modules are refused as bad input (``model.factory``) naming that error."""

    def __init__(self, fn: Callable[..., object], in_dims: tuple[int | None, ...]):
        self.fn, self.in_dims = fn, in_dims
        self.batched = torch.func.vmap(fn, in_dims=in_dims)
        self.looped: bool | None = None

    def __call__(self, *args):
        if not self.looped:
            try:
                out = self.batched(*args)
                self.looped = False
                return out
            except RuntimeError:
                if self.looped is False:  # it worked before: a real failure, not a missing batching rule
                    raise
                self.looped = True
        count = next(_leading(a) for a, d in zip(args, self.in_dims, strict=True) if d == 0)
        try:
            outs = [self.fn(*(_take(a, r) if d == 0 else a for a, d in zip(args, self.in_dims, strict=True)))
                    for r in range(count)]
        except RuntimeError as err:  # fails per example too: the module itself cannot be vmapped
            message = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            raise BadInputError(f"the model's module cannot give per-example gradients with torch.func "
                                f"(data-dependent control flow, .item(), or a buffer changed in forward?): {message}",
                                "model.factory") from err
        return _stack(outs)


def _leading(value) -> int:
    if isinstance(value, dict):
        return next(iter(value.values())).shape[0]
    return value.shape[0]


def _take(value, r: int):
    if isinstance(value, dict):
        return {k: v[r] for k, v in value.items()}
    return value[r]


def _stack(outs: list):
    if isinstance(outs[0], dict):
        return {k: torch.stack([o[k] for o in outs]) for k in outs[0]}
    return torch.stack(outs)
