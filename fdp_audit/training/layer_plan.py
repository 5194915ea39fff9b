"""A user's ``nn.Module`` as a chain of layers whose per-example gradient norms have a closed form (docs/images.md,
docs/training.md): the *layer plan* that :mod:`fdp_audit.training.conv_ghost` runs over a batch of models.

How the plan is found. ``torch.fx.symbolic_trace`` records the module's ``forward`` as a graph of calls, whatever
its Python structure (an ``nn.Sequential``, a custom ``forward`` that reshapes the input, functional activations);
walking ``nn.Sequential`` children alone would miss every module with its own ``forward``. The graph must be a
*chain*: one input, and every call reads the previous call's output and nothing else (constants aside) — no
residual connection, no parameter read outside its layer, no layer called twice. Each call must be one of

* a layer with parameters: ``Conv2d`` (any kernel, stride, padding, dilation and groups; zero padding),
  ``Linear``, ``GroupNorm``, ``LayerNorm``, ``InstanceNorm2d`` (without running statistics: a GroupNorm of one
  channel per group);
* an element-wise map without parameters (``ReLU``, ``GELU``, ``Tanh``, ``Sigmoid``, ``SiLU``, ``LeakyReLU``,
  ``ELU``, ``Softplus``, ``Mish``, ``Dropout`` — the identity in eval mode — and their functional forms);
* a per-channel spatial map without parameters: ``AvgPool2d``, ``MaxPool2d``, their adaptive forms and functional
  forms;
* a softmax or log-softmax along one per-example dimension (``LogSoftmax(dim=1)``, ``F.log_softmax(x, 1)``);
* a reshape that keeps examples apart (``Flatten``, ``flatten``, ``reshape``/``view`` whose leading size is the
  batch).

Shapes come from running the traced graph on a batch of two inputs (``ShapeProp``): linear layers must see
per-example vectors, convolutions and pooling per-example ``[C, H, W]``. The plan is then checked against the module
itself on three random inputs: its forward pass must run and give the module's logits, and its per-example gradients
those torch.func takes of the module (to float32 rounding). So a reshape that mixes examples or a call the walk
misread is caught here, not in training, and so is what torch.fx drops because it changes gradients only (a
``torch.no_grad()`` block, a module hook that detaches an output or rescales its gradient). Anything
else — BatchNorm aside, which :mod:`fdp_audit.training.modules` refuses outright — leaves the module without a
plan, with a one-line reason naming the call, and the engine takes the ``torch.func`` path.

Batched over R models, activations carry two leading dimensions, examples N and models R, in either order
(:class:`Activations`): convolutions, norms and pooling see ``[N, R·C, H, W]`` (model r's channels are the r-th
block: grouped convolutions), linear layers ``[R, N, F]`` (batched matrix products).
"""

from __future__ import annotations

import copy
import inspect
import math
import operator
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import fx, nn
from torch.func import functional_call
from torch.fx.passes.shape_prop import ShapeProp

from fdp_audit.training import layer_kernels

Shape = tuple[int, ...]


@dataclass(frozen=True)
class Conv:
    """``Conv2d`` with zero padding: weight ``[C_o, C_i / groups, kh, kw]``."""

    name: str
    in_channels: int
    out_channels: int
    kernel: tuple[int, int]
    stride: tuple[int, int]
    padding: tuple[int, int]
    dilation: tuple[int, int]
    bias: bool
    groups: int = 1

    @property
    def fan_in(self) -> int:
        """``C_i·kh·kw / groups``: one output position's inputs."""
        return self.in_channels // self.groups * self.kernel[0] * self.kernel[1]


@dataclass(frozen=True)
class Linear:
    """``Linear`` in a layer plan: weight ``[out_features, in_features]`` and, when ``bias``, a bias
    ``[out_features]``.

    Attributes:
        name: the prefix of its parameters' names (``name.weight``, ``name.bias``).
        in_features: its inputs.
        out_features: its outputs.
        bias: whether it has a bias.
    """

    name: str
    in_features: int
    out_features: int
    bias: bool


@dataclass(frozen=True)
class GroupNorm:
    """Per-example, per-group normalisation ``x̂`` then per-channel ``γ x̂ + β`` (when ``affine``)."""

    name: str
    groups: int
    channels: int
    eps: float
    affine: bool

    @property
    def scale(self) -> bool:
        return self.affine

    @property
    def shift(self) -> bool:
        return self.affine


@dataclass(frozen=True)
class LayerNorm:
    """Per-example normalisation over the trailing ``shape``, then element-wise ``γ ⊙ x̂ + β``."""

    name: str
    shape: Shape
    eps: float
    scale: bool
    shift: bool


@dataclass(frozen=True)
class Elementwise:
    """A map applied to every entry on its own: any layout of the activations is fine."""

    fn: Callable[[torch.Tensor], torch.Tensor]


@dataclass(frozen=True)
class Channelwise:
    """A map of ``[batch, C, H, W]`` acting on every channel of every example on its own (pooling)."""

    fn: Callable[[torch.Tensor], torch.Tensor]


@dataclass(frozen=True)
class Reshape:
    """Each example's activations reshaped (row-major) to ``shape``."""

    shape: Shape


@dataclass(frozen=True)
class AlongDim:
    """A map along one dimension of each example (softmax, log-softmax): ``fn(h, dim=…)``, with ``dim`` counted
    as the module counts it, on ``[B, *shape]`` (1 is the first per-example dimension, negative from the end)."""

    fn: Callable[..., torch.Tensor]
    dim: int


Step = Conv | Linear | GroupNorm | LayerNorm | Elementwise | Channelwise | Reshape | AlongDim


@dataclass(frozen=True)
class Planned:
    """One step with its per-example input and output shapes."""

    step: Step
    in_shape: Shape
    out_shape: Shape


@dataclass(frozen=True)
class LayerPlan:
    """The module's chain of steps on per-example inputs of ``in_shape``."""

    steps: tuple[Planned, ...]
    in_shape: Shape


@dataclass
class Activations:
    """A batch of R models' activations: ``[N, R, *shape]`` (examples first) or ``[R, N, *shape]``."""

    values: torch.Tensor
    models_first: bool

    def examples_first(self) -> torch.Tensor:
        """The activations examples first.

        Returns:
            ``[N, R, *shape]`` (a transposed view when they are held models first).
        """
        return self.values.transpose(0, 1) if self.models_first else self.values

    def by_model(self) -> torch.Tensor:
        """The activations models first.

        Returns:
            ``[R, N, *shape]`` (a transposed view when they are held examples first).
        """
        return self.values if self.models_first else self.values.transpose(0, 1)

    def channels(self) -> torch.Tensor:
        """``[N, R·C, *spatial]``: model r's channels are the r-th block.

        Returns:
            The activations as one grouped batch of channels, as a grouped convolution reads them.
        """
        h = self.examples_first()
        return h.reshape(h.shape[0], -1, *h.shape[3:])


@dataclass
class Record:
    """What the per-layer norms read of one parametrised layer: its input (for norms, the normalised input x̂) and
    its output, laid out as the layer computes them (``[N, R·C, ...]`` or, for linear layers, ``[R, N, F]``)."""

    layer: Planned
    input: torch.Tensor
    output: torch.Tensor


def _record(records: list[Record] | None, planned: Planned, layer_input: torch.Tensor, output: torch.Tensor
            ) -> torch.Tensor:
    """Append the layer's :class:`Record`. The first recorded output becomes a leaf that requires a gradient (the
    parameters do not), so the backward pass starts there and never differentiates the inputs."""
    if records is None:
        return output
    if not output.requires_grad:
        output = output.detach().requires_grad_(True)
    records.append(Record(planned, layer_input.detach(), output))
    return output


def run_step(planned: Planned, params: dict[str, torch.Tensor], h: Activations, records: list[Record] | None
             ) -> Activations:
    """One step on R models' activations; with ``records``, append the parametrised layer's :class:`Record`.

    Args:
        planned: the step and its per-example shapes.
        params: the stacked parameters by name, ``[R, *shape]``.
        h: the step's input activations.
        records: a list to append the layer's record to, or None.

    Returns:
        The step's output activations.
    """
    step = planned.step
    if isinstance(step, Elementwise):
        return Activations(step.fn(h.values), h.models_first)
    if isinstance(step, AlongDim):  # our activations carry two leading dimensions where the module's carry one
        return Activations(step.fn(h.values, dim=step.dim + 1 if step.dim > 0 else step.dim), h.models_first)
    if isinstance(step, Reshape):
        lead = h.values.shape[:2]
        return Activations(h.values.reshape(*lead, *step.shape), h.models_first)
    if isinstance(step, Channelwise):
        x = h.channels()
        out = step.fn(x)
        return Activations(out.reshape(x.shape[0], -1, *planned.out_shape), False)
    if isinstance(step, Conv):
        x = h.channels()
        r = x.shape[1] // step.in_channels
        weight = params[f"{step.name}.weight"]
        bias = params[f"{step.name}.bias"].reshape(-1) if step.bias else None
        z = F.conv2d(x, weight.reshape(-1, *weight.shape[2:]), bias, step.stride, step.padding, step.dilation,
                     groups=r * step.groups)
        z = _record(records, planned, x, z)
        return Activations(z.reshape(z.shape[0], r, *planned.out_shape), False)
    if isinstance(step, Linear):
        a = h.by_model()
        weight = params[f"{step.name}.weight"]
        if step.bias:
            z = torch.baddbmm(params[f"{step.name}.bias"][:, None, :], a, weight.transpose(1, 2))
        else:
            z = torch.bmm(a, weight.transpose(1, 2))
        return Activations(_record(records, planned, a, z), True)
    if isinstance(step, GroupNorm):
        x = h.channels()
        r = x.shape[1] // step.channels
        if not step.affine:
            normalised = F.group_norm(x, r * step.groups, eps=step.eps)
            return Activations(normalised.reshape(x.shape[0], r, *planned.out_shape), False)
        y, normalised = layer_kernels.group_norm(x, r * step.groups, params[f"{step.name}.weight"].reshape(-1),
                                                 params[f"{step.name}.bias"].reshape(-1), step.eps)
        y = _record(records, planned, normalised, y)
        return Activations(y.reshape(x.shape[0], r, *planned.out_shape), False)
    assert isinstance(step, LayerNorm)
    x = h.examples_first()  # [N, R, *shape]: the parameters [R, *normalised shape] broadcast over the rest
    normalised = F.layer_norm(x, step.shape, eps=step.eps)
    between = x.dim() - 2 - len(step.shape)
    y = normalised
    if step.scale:
        y = y * params[f"{step.name}.weight"].reshape(1, -1, *([1] * between), *step.shape)
    if step.shift:
        y = y + params[f"{step.name}.bias"].reshape(1, -1, *([1] * between), *step.shape)
    if step.scale or step.shift:
        y = _record(records, planned, normalised, y)
    return Activations(y, False)


def forward(plan: LayerPlan, params: dict[str, torch.Tensor], x: torch.Tensor, records: list[Record] | None = None
            ) -> torch.Tensor:
    """Outputs ``[R, N, O]`` of R models on their own inputs ``x`` ``[R, N, d]``; with ``records``, each
    parametrised layer's :class:`Record`.

    Args:
        plan: the module's layer plan.
        params: the stacked parameters by name, ``[R, *shape]``.
        x: each model's inputs ``[R, N, d]``.
        records: a list to append each parametrised layer's record to, or None.

    Returns:
        The outputs ``[R, N, O]``.
    """
    h = Activations(x.reshape(*x.shape[:2], *plan.in_shape), True)
    for planned in plan.steps:
        h = run_step(planned, params, h, records)
    return h.by_model().reshape(x.shape[0], x.shape[1], -1)


ELEMENTWISE_MODULES = (nn.ReLU, nn.ReLU6, nn.GELU, nn.Tanh, nn.Sigmoid, nn.SiLU, nn.LeakyReLU, nn.ELU, nn.SELU,
                       nn.CELU, nn.Softplus, nn.Mish, nn.Hardtanh, nn.Hardswish, nn.Hardsigmoid, nn.Softsign,
                       nn.Tanhshrink, nn.Identity, nn.Dropout, nn.Dropout2d, nn.AlphaDropout)
CHANNELWISE_MODULES = (nn.AvgPool2d, nn.MaxPool2d, nn.AdaptiveAvgPool2d, nn.AdaptiveMaxPool2d)
ELEMENTWISE_FUNCTIONS = {F.relu, torch.relu, F.relu6, F.gelu, torch.tanh, F.tanh, torch.sigmoid, F.sigmoid, F.silu,
                         F.leaky_relu, F.elu, F.selu, F.celu, F.softplus, F.mish, F.hardtanh, F.hardswish,
                         F.hardsigmoid, F.dropout, F.softsign}
ELEMENTWISE_METHODS = {"relu", "tanh", "sigmoid", "contiguous"}
CHANNELWISE_FUNCTIONS = {F.avg_pool2d, F.max_pool2d, F.adaptive_avg_pool2d, F.adaptive_max_pool2d}
RESHAPE_FUNCTIONS = {torch.flatten, torch.reshape}
RESHAPE_METHODS = {"reshape", "view", "flatten", "unflatten"}
ALONG_DIM_FUNCTIONS = {F.softmax: F.softmax, F.log_softmax: F.log_softmax, torch.softmax: F.softmax,
                       torch.log_softmax: F.log_softmax}
ALONG_DIM_MODULES = {nn.Softmax: F.softmax, nn.LogSoftmax: F.log_softmax}
ALONG_DIM_METHODS = {"softmax": F.softmax, "log_softmax": F.log_softmax}
ARITHMETIC = {operator.mul, operator.truediv, operator.add, operator.sub}


class Unsupported(Exception):
    """The module has no layer plan; the message says which call and why."""


@dataclass(frozen=True)
class Call:
    """A traced call with the input in place of the previous activations: ``target(h, *args, **kwargs)``."""

    target: Callable[..., torch.Tensor]
    args: tuple
    kwargs: dict

    def __call__(self, h: torch.Tensor) -> torch.Tensor:
        return self.target(h, *self.args, **self.kwargs)


def _pair(value: int | tuple[int, ...]) -> tuple[int, int]:
    return (value, value) if isinstance(value, int) else (int(value[0]), int(value[1]))


def _conv(name: str, module: nn.Conv2d) -> Conv:
    if module.padding_mode != "zeros":
        raise Unsupported(f"{name} (Conv2d with padding_mode={module.padding_mode!r})")
    kernel, dilation = _pair(module.kernel_size), _pair(module.dilation)
    padding = module.padding
    if padding == "valid":
        padding = (0, 0)
    elif padding == "same":  # stride 1; symmetric only when the dilated kernel's extent is odd
        extents = [d * (k - 1) for k, d in zip(kernel, dilation)]
        if any(e % 2 for e in extents):
            raise Unsupported(f"{name} (Conv2d with asymmetric padding='same')")
        padding = (extents[0] // 2, extents[1] // 2)
    return Conv(name, module.in_channels, module.out_channels, kernel, _pair(module.stride), _pair(padding),
                dilation, module.bias is not None, module.groups)


def _along_dim(name: str, fn: Callable[..., torch.Tensor], dim: int | None) -> AlongDim:
    if not isinstance(dim, int) or dim == 0:
        raise Unsupported(f"{name} ({fn.__name__} along dim={dim}: not one per-example dimension)")
    return AlongDim(fn, dim)


def _module_step(name: str, module: nn.Module, calls: dict[str, int]) -> Step:
    calls[name] = calls.get(name, 0) + 1
    if calls[name] > 1 and list(module.parameters()):
        raise Unsupported(f"{name} ({type(module).__name__} called twice: shared parameters)")
    if isinstance(module, nn.Conv2d):
        return _conv(name, module)
    if isinstance(module, nn.Linear):
        return Linear(name, module.in_features, module.out_features, module.bias is not None)
    if isinstance(module, nn.GroupNorm):
        return GroupNorm(name, module.num_groups, module.num_channels, module.eps, module.affine)
    if isinstance(module, nn.InstanceNorm2d) and not module.track_running_stats:  # GroupNorm of one channel a group
        return GroupNorm(name, module.num_features, module.num_features, module.eps, module.affine)
    if isinstance(module, nn.LayerNorm):
        affine = module.elementwise_affine
        return LayerNorm(name, tuple(module.normalized_shape), module.eps, affine, affine and module.bias is not None)
    if type(module) in ALONG_DIM_MODULES:
        return _along_dim(name, ALONG_DIM_MODULES[type(module)], module.dim)
    if isinstance(module, ELEMENTWISE_MODULES):
        if getattr(module, "inplace", False):  # see _out_of_place
            module = copy.copy(module)
            module.inplace = False
        return Elementwise(module)
    if isinstance(module, nn.MaxPool2d) and module.return_indices:
        raise Unsupported(f"{name} (MaxPool2d returning indices)")
    if isinstance(module, CHANNELWISE_MODULES):
        return Channelwise(module)
    if isinstance(module, (nn.Flatten, nn.Unflatten)):
        return Reshape(())
    raise Unsupported(f"{name} ({type(module).__name__})")


def _constant(value: object) -> bool:
    return not isinstance(value, (fx.Node, list, tuple, dict)) or (
        isinstance(value, (list, tuple)) and all(_constant(v) for v in value))


def _function_step(node: fx.Node) -> Step:
    target, rest, kwargs = node.target, node.args[1:], dict(node.kwargs)
    name = getattr(target, "__name__", str(target))
    if target in RESHAPE_METHODS or target in RESHAPE_FUNCTIONS:  # sized by constants or size queries
        return Reshape(())
    if not all(_constant(a) for a in (*rest, *kwargs.values())):
        raise Unsupported(f"{node.name} ({name} of two tensors)")
    along = ALONG_DIM_METHODS if node.op == "call_method" else ALONG_DIM_FUNCTIONS
    if target in along:
        if set(kwargs) - {"dim", "_stacklevel", "dtype"} or kwargs.get("dtype") is not None or len(rest) > 1:
            raise Unsupported(f"{node.name} ({name} with arguments other than dim)")
        return _along_dim(node.name, along[target], rest[0] if rest else kwargs.get("dim"))
    if node.op == "call_method":
        if target in ELEMENTWISE_METHODS:
            return Elementwise(Call(getattr(torch.Tensor, target), rest, kwargs))
        raise Unsupported(f"{node.name} (tensor method {target})")
    scalar = len(rest) == 1 and isinstance(rest[0], (int, float))
    if target in ELEMENTWISE_FUNCTIONS or (target in ARITHMETIC and scalar):
        return Elementwise(Call(target, *_out_of_place(target, rest, kwargs)))
    if target in CHANNELWISE_FUNCTIONS:
        if kwargs.get("return_indices"):
            raise Unsupported(f"{node.name} ({name} returning indices)")
        return Channelwise(Call(target, rest, kwargs))
    raise Unsupported(f"{node.name} ({name})")


def _out_of_place(target: Callable[..., torch.Tensor], rest: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """The call's arguments with ``inplace`` off. An in-place activation would overwrite the output of the layer
    before it, which the plan records for its norms: autograd would then differentiate with respect to the
    activation's output instead, and every norm would be wrong."""
    try:
        bound = inspect.signature(target).bind(None, *rest, **kwargs)
    except (TypeError, ValueError):  # a builtin without a signature takes no inplace flag
        return rest, kwargs
    if not bound.arguments.get("inplace"):
        return rest, kwargs
    bound.arguments["inplace"] = False
    return bound.args[1:], bound.kwargs


def _shape(node: fx.Node, batch: int) -> Shape:
    meta = node.meta.get("tensor_meta")
    if meta is None or not hasattr(meta, "shape"):
        raise Unsupported(f"{node.name} (returns no single tensor)")
    shape = tuple(int(s) for s in meta.shape)
    if not shape or shape[0] != batch:
        raise Unsupported(f"{node.name} (its output's leading dimension is not the batch's)")
    return shape[1:]


def _with_shape(step: Step, out_shape: Shape) -> Step:
    return Reshape(out_shape) if isinstance(step, Reshape) else step


SHAPE_ARITHMETIC = {operator.getitem, operator.mul, operator.floordiv, operator.add, operator.sub, len}


def _is_shape_query(node: fx.Node, queries: set[fx.Node]) -> bool:
    """Whether the node computes a size rather than a tensor (``x.size(0)``, ``x.shape[0]``, arithmetic on them):
    such a value only sizes a reshape, whose per-example shape the plan takes from the traced shapes instead."""
    if node.op == "call_method" and node.target in ("size", "dim"):
        return True
    if node.op != "call_function":
        return False
    if node.target is getattr:
        return node.args[1] == "shape"
    return node.target in SHAPE_ARITHMETIC and bool(node.all_input_nodes) and all(
        n in queries for n in node.all_input_nodes)


INPUT_RANKS = {Linear: (1, "a linear layer"), Conv: (3, "a convolution"), Channelwise: (3, "a 2-D pooling")}


def _check_input_rank(name: str, step: Step, in_shape: Shape) -> None:
    """Linear layers run as batched matrix products of per-example vectors, convolutions and pooling as 2-D maps of
    per-example ``[C, H, W]``. torch applies them to other shapes too (a linear layer over the last axis, a 2-D
    pooling of ``[B, C, L]`` read as one unbatched image), which the plan would misread."""
    if type(step) not in INPUT_RANKS:
        return
    rank, kind = INPUT_RANKS[type(step)]
    if len(in_shape) != rank:
        raise Unsupported(f"{name} ({kind} on per-example inputs of shape {list(in_shape)}, not {rank}-D)")


def _walk(graph: fx.GraphModule, batch: int) -> tuple[list[Planned], Shape]:
    modules = dict(graph.named_modules())
    steps: list[Planned] = []
    current: fx.Node | None = None
    in_shape: Shape = ()
    calls: dict[str, int] = {}
    queries: set[fx.Node] = set()
    for node in graph.graph.nodes:
        if node.op == "placeholder":
            if current is not None:
                raise Unsupported(f"{node.name} (a second input)")
            current, in_shape = node, _shape(node, batch)
            continue
        if node.op == "output":
            if node.args[0] is not current:
                raise Unsupported("the output (not the last call's result)")
            return steps, in_shape
        if node.op == "get_attr":
            raise Unsupported(f"{node.target} (a parameter or buffer read outside its layer)")
        if _is_shape_query(node, queries):
            queries.add(node)
            continue
        tensors = [n for n in node.all_input_nodes if n not in queries]
        if tensors != [current] or (node.args and node.args[0] is not current):
            raise Unsupported(f"{node.name} (not a chain: it reads other than the previous call's output)")
        if node.op == "call_module":
            step = _module_step(str(node.target), modules[str(node.target)], calls)
        else:
            step = _function_step(node)
        previous = steps[-1].out_shape if steps else in_shape
        _check_input_rank(str(node.target) if node.op == "call_module" else node.name, step, previous)
        steps.append(Planned(_with_shape(step, _shape(node, batch)), previous, _shape(node, batch)))
        current = node
    raise Unsupported("the traced graph has no output")


def _check_parameters(module: nn.Module, steps: list[Planned]) -> None:
    """Every parameter of the module belongs to exactly one planned layer."""
    planned = set()
    for p in steps:
        step = p.step
        if isinstance(step, (Conv, Linear)):
            planned |= {f"{step.name}.weight"} | ({f"{step.name}.bias"} if step.bias else set())
        elif isinstance(step, GroupNorm) and step.affine:
            planned |= {f"{step.name}.weight", f"{step.name}.bias"}
        elif isinstance(step, LayerNorm):
            planned |= ({f"{step.name}.weight"} if step.scale else set()) | (
                {f"{step.name}.bias"} if step.shift else set())
    names = {name for name, _ in module.named_parameters()}
    if names != planned:
        missing = sorted(names - planned)
        raise Unsupported(f"parameter {missing[0] if missing else sorted(planned - names)[0]} "
                          "(not read by exactly one planned layer)")


def trace(module: nn.Module, n_inputs: int) -> LayerPlan:
    """The :class:`LayerPlan` of a module in eval mode on inputs ``[B, n_inputs]`` (module docstring); raises
    :class:`Unsupported` naming the first call that has none.

    The plan is kept only when it reproduces the module's outputs and per-example gradients on random inputs, reads
    every parameter in exactly one planned layer, and leaves the module's buffers unchanged.

    Args:
        module: the user's module, in eval mode.
        n_inputs: the input width.

    Returns:
        The plan.

    Raises:
        Unsupported: torch.fx cannot trace the module, a call has no planned step, or the plan does not reproduce
            the module.
    """
    try:
        graph = fx.symbolic_trace(module)
    except Exception as err:  # noqa: BLE001 - any tracing failure: data-dependent control flow, unsupported Python
        message = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise Unsupported(f"the forward pass (torch.fx cannot trace it: {message})") from err
    batch = 2
    parameter = next(module.parameters())
    buffers = {name: b.clone() for name, b in module.named_buffers()}
    try:
        ShapeProp(graph).propagate(torch.zeros(batch, n_inputs, dtype=parameter.dtype, device=parameter.device))
    except Exception as err:  # noqa: BLE001 - the module ran before; a failure here is the tracer's
        raise Unsupported(f"the traced forward pass ({type(err).__name__})") from err
    steps, in_shape = _walk(graph, batch)
    _check_parameters(module, steps)
    plan = LayerPlan(tuple(steps), in_shape)
    _check_outputs(plan, module, n_inputs)
    changed = [name for name, value in module.named_buffers() if not torch.equal(value, buffers[name])]
    if changed:  # state a plan would drop: the forward pass is no pure function
        for name, value in module.named_buffers():
            value.copy_(buffers[name])
        raise Unsupported(f"{changed[0]} (a buffer the forward pass changes)")
    return plan


def _check_outputs(plan: LayerPlan, module: nn.Module, n_inputs: int) -> None:
    """The plan computes the module's function and its per-example gradients, on three random inputs ``x_n`` (to
    float32 rounding): the outputs ``f(θ; x_n)``, and each example's ``∇_θ ⟨f(θ; x_n), u_n⟩`` for random ``u_n``
    against torch.func's, the fallback's (``vmap`` of ``grad`` of the module's ``functional_call``).

    Outputs alone miss what torch.fx drops while tracing and changes only gradients: a ``torch.no_grad()`` block,
    module hooks (an output detached, a gradient rescaled). The plan would then clip and train by gradients the
    module does not have, such as those of a feature extractor it freezes."""
    parameter = next(module.parameters())
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(3, n_inputs, generator=generator).to(parameter.device, parameter.dtype)
    params = {name: p.detach() for name, p in module.named_parameters()}
    with torch.no_grad():
        expected = module(x)
        got = _plan_forward(plan, {name: p[None] for name, p in params.items()}, x[None])[0]
    if got.shape != expected.shape or not _agree(got, expected, float(expected.abs().max()) + 1.0):
        raise Unsupported("the traced layers (they do not reproduce the module's outputs)")
    directions = torch.randn(expected.shape, generator=generator).to(parameter.device, parameter.dtype)
    expected_gradients = _module_gradients(module, params, x, directions)
    got_gradients = _plan_gradients(plan, params, x, directions)
    scale = max(float(expected_gradients.abs().max()), float(got_gradients.abs().max()))
    if not _agree(got_gradients, expected_gradients, scale):
        raise Unsupported("the traced layers (their gradients are not the module's: torch.fx drops torch.no_grad() "
                          "blocks and module hooks)")


def _agree(got: torch.Tensor, expected: torch.Tensor, scale: float) -> bool:
    return torch.allclose(got, expected, rtol=1e-4, atol=1e-4 * scale)


def _plan_forward(plan: LayerPlan, params: dict[str, torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    """:func:`forward`, where any failure means the walk misread a call: the module has no plan."""
    try:
        return forward(plan, params, x)
    except Exception as err:  # noqa: BLE001 - whatever the misread call raises
        message = str(err).strip().splitlines()[0] if str(err).strip() else ""
        raise Unsupported(f"the traced layers (their forward pass fails: {type(err).__name__}: {message})") from err


def _module_gradients(module: nn.Module, params: dict[str, torch.Tensor], x: torch.Tensor,
                      directions: torch.Tensor) -> torch.Tensor:
    """``∇_θ ⟨f(θ; x_n), u_n⟩`` ``[N, P]`` by torch.func, as the engine's fallback takes per-example gradients."""

    def projected(p: dict[str, torch.Tensor], example: torch.Tensor, direction: torch.Tensor) -> torch.Tensor:
        return (functional_call(module, p, (example[None],))[0] * direction).sum()

    try:
        gradients = torch.func.vmap(torch.func.grad(projected), in_dims=(None, 0, 0))(params, x, directions)
    except Exception as err:  # noqa: BLE001 - the fallback cannot take them either; it reports its own error
        raise Unsupported(f"the module's per-example gradients (torch.func: {type(err).__name__})") from err
    return torch.cat([gradients[name].reshape(x.shape[0], -1) for name in params], dim=1)


def _plan_gradients(plan: LayerPlan, params: dict[str, torch.Tensor], x: torch.Tensor, directions: torch.Tensor
                    ) -> torch.Tensor:
    """The plan's ``∇_θ ⟨f(θ; x_n), u_n⟩`` ``[N, P]``: one model per example, each with its own copy of the
    parameters, so that the gradient of model n's copy is example n's."""
    copies = {name: p[None].repeat(x.shape[0], *[1] * p.dim()).requires_grad_(True) for name, p in params.items()}
    with torch.enable_grad():
        outputs = _plan_forward(plan, copies, x[:, None])[:, 0]
        gradients = torch.autograd.grad((outputs * directions).sum(), list(copies.values()), allow_unused=True)
    return torch.cat([(torch.zeros_like(c) if g is None else g).reshape(x.shape[0], -1)
                      for c, g in zip(copies.values(), gradients, strict=True)], dim=1)


def activation_floats(plan: LayerPlan) -> int:
    """Floats of one example's activations in a plain forward pass: every step's output.

    Args:
        plan: the layer plan.

    Returns:
        The input's size plus every step's output size.
    """
    return math.prod(plan.in_shape) + sum(math.prod(p.out_shape) for p in plan.steps)
