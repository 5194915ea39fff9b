"""Gradient canaries in any training loop (docs/one_run.md): M marked records whose per-example gradients land on
coordinates of a parameter block of their own, whatever computes per-example gradients.

* :class:`CanaryInputs` — the marked records' inputs, recognised in O(B·D) per batch of B inputs of D values
  (never by comparing each input with each of the M canaries). Canary i's input holds the value ``b`` everywhere
  but on its first L coordinates, which hold ``b + digit_j(i)`` (the base-r digits of i, r >= 16). ``b`` is an
  integer above every magnitude of the data, so no record of the data set is ever taken for a canary, and the
  inputs are exact in float32 and wider types (the constructor refuses ``b + r >= 2²⁴``).
* :class:`CanaryHead` — the parameter block ``w`` of ``M + M₀`` coordinates. Its input is the module's logits
  with one more column holding ``i + 1`` on canary i's rows (0 elsewhere: one tensor, as per-example gradient
  engines hand a layer one activation); its output is the logits, with canary i's rows replaced by
  ``c_i·(w_i − sg(w_i))·e₀`` (sg: stop-gradient). That is zero in value, so the canary's loss is the loss at zero
  logits and none of the module's parameters gets its gradient, while ``∂ℓ/∂w = c_i·∂ℓ/∂z₀·e_i``. At zero logits
  ``∂ℓ/∂z₀`` is ``1/V − [y = 0]`` for cross-entropy over V >= 2 logits and ``½ − y`` for the logistic loss on one
  logit, so ``c_i = g_i / (∂ℓ/∂z₀)`` makes the canary's per-example gradient exactly ``g_i·e_i`` — under
  ``torch.func``, Opacus's hooks (a grad sampler and a norm sampler are registered for the head), functorch or
  ghost clipping alike — and the loop clips, noises and applies it as any record's. No record's gradient
  reaches ``w``, so the last M₀ coordinates carry the mechanism's noise alone.
* :class:`AuditedModule` — the user's module followed by the head; it counts how often each canary reached it.
* :class:`UpdateObserver` — the release: global optimizer step hooks (``torch.optim``) snapshot ``w`` around every
  step of an optimizer that holds it (an Opacus ``DPOptimizer`` steps its wrapped optimizer only when it does
  update, so skipped accumulation steps are not steps). For plain SGD the released update is ``−Δw/η − λ·w``
  (learning rate η, weight decay λ); for other optimizers the gradient the head held when ``step()`` began (its
  state makes the change non-linear in it); a step that computed or changed that gradient inside ``step()`` (an
  LBFGS closure) is refused, never read as a release of zeros. Either is multiplied by a data-independent
  constant ``scale`` (the expected batch for an averaged loss) to be in units of the noisy clipped sum. Nothing
  else is reconstructed. The head must move only in those steps: its value before each step is compared with its
  value after the previous one (at first, its initial value), and at the end with its value after the last, so an
  update made any other way — ``p -= lr·p.grad`` by hand, steps taken before the optimizer was attached — is
  counted (:attr:`UpdateObserver.unobserved_changes`): the final weights are then not the product of the released
  steps.

Memory and time grow with M, not with M times the module's parameters: recognition is O(B·D), the head's
per-example gradients are B·(M + M₀) numbers (what any per-example engine stores for a parameter of that size),
and a step's snapshot is M + M₀ numbers.
"""

from __future__ import annotations

import contextlib
import math
import sys
from collections.abc import Iterator
from dataclasses import dataclass

import torch
from torch import nn
from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

from fdp_audit.errors import BadInputError
from fdp_audit.user_code import passes_through

HEAD_NAME = "fdp_audit_canary"
MIN_RADIX = 16
FLUSH_STEPS = 256  # releases kept on the training device before they move to the host together


def _elements(shape: tuple[int, ...]) -> int:
    return math.prod(shape)


class CanaryInputs:
    """The inputs of ``count`` marked records of shape ``shape`` (module docstring): value ``base`` everywhere, the
    index's base-``radix`` digits added on the first ``digits`` coordinates."""

    def __init__(self, count: int, shape: tuple[int, ...], base: float):
        size = _elements(shape)
        if count < 1 or size < 1:
            raise BadInputError(f"need at least one canary and one input value (got {count} and shape {shape})")
        self.count, self.shape, self.size, self.base = count, tuple(shape), size, float(base)
        self.radix = max(MIN_RADIX, math.ceil(count ** (1.0 / size)))
        self.digits = max(1, math.ceil(math.log(count) / math.log(self.radix) - 1e-12)) if count > 1 else 1
        while self.radix ** self.digits < count:  # float rounding of the logarithm
            self.digits += 1
        if self.digits > size or self.base + self.radix >= 2 ** 24:
            raise BadInputError(f"{count} canaries do not fit inputs of shape {shape} with values up to {base:g}")
        self._powers = torch.tensor([float(self.radix) ** j for j in range(self.digits)], dtype=torch.float64)

    @staticmethod
    def base_above(magnitude: float) -> float:
        """The value ``b``: the smallest integer above every magnitude of the data, plus one.

        Args:
            magnitude: the largest absolute input value of the data set.

        Returns:
            ``⌊|magnitude|⌋ + 2``.

        Raises:
            BadInputError: the magnitude is not finite.
        """
        if not math.isfinite(magnitude):
            raise BadInputError("the data set holds non-finite inputs")
        return float(math.floor(abs(magnitude)) + 2)

    def inputs(self, indices: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """``[len(indices), *shape]``: the inputs of those canaries.

        Args:
            indices: the canaries' indices, each in 0 … count − 1.
            dtype: the inputs' floating-point type.

        Returns:
            The inputs, of ``dtype``.
        """
        indices = torch.as_tensor(indices, dtype=torch.long)
        remaining = indices.clone()
        flat = torch.full((len(indices), self.size), self.base, dtype=dtype)  # b + digit is exact in ``dtype``
        for j in range(self.digits):
            flat[:, j] += (remaining % self.radix).to(dtype)
            remaining //= self.radix
        return flat.reshape(len(indices), *self.shape)

    def indices(self, x: torch.Tensor) -> torch.Tensor:
        """``[B]``: the canary index of each input of the batch ``x`` (``[B, *shape]``), −1 for every other input.
        Works on an empty batch and inside ``torch.func`` transforms (elementwise operations only).

        Args:
            x: a batch of inputs, shape (B, *shape).

        Returns:
            Long tensor of shape (B,).
        """
        flat = x.reshape(x.shape[0], self.size)
        others_match = (flat[:, self.digits:] == self.base).all(dim=1)  # all() of no columns is True
        digits = flat[:, :self.digits].double() - self.base
        valid = ((digits == digits.round()) & (digits >= 0) & (digits < self.radix)).all(dim=1)
        index = (digits.clamp(0, self.radix - 1) * self._powers.to(flat.device)).sum(dim=1)
        found = others_match & valid & (index < self.count)
        return torch.where(found, index.long(), torch.full_like(index, -1, dtype=torch.long))


def zero_logit_slope(n_logits: int, label: int) -> float:
    """``∂ℓ/∂z₀`` at zero logits: ``1/V − [y = 0]`` (cross-entropy, V >= 2) or ``½ − y`` (logistic loss, V = 1).

    Args:
        n_logits: V, the number of logits (1: the logistic loss).
        label: the canaries' label y.

    Returns:
        The slope, never 0 (``1/V − 1`` or ``1/V`` for V ≥ 2, ``±½`` for V = 1).
    """
    if n_logits == 1:
        return 0.5 - label
    return 1.0 / n_logits - float(label == 0)


class CanaryHead(nn.Module):
    """The canary block ``w`` (``count + null`` coordinates) and each canary's per-example gradient ``g_i``
    (module docstring). ``label`` is the canaries' label in the data set."""

    def __init__(self, gradients: torch.Tensor, null: int, label: int = 0):
        super().__init__()
        gradients = torch.as_tensor(gradients, dtype=torch.float32).flatten()
        self.count, self.null, self.label = len(gradients), int(null), int(label)
        self.weight = nn.Parameter(torch.zeros(self.count + self.null))
        self.gradients = gradients  # not a buffer: Opacus refuses trainable layers that hold buffers

    def factors(self, index: torch.Tensor, n_logits: int) -> torch.Tensor:
        """``c_i`` of the canaries ``index`` for V logits.

        Args:
            index: canary indices, any shape.
            n_logits: V, the module's number of logits.

        Returns:
            ``c_i = g_i / (∂ℓ/∂z₀)``, the shape of ``index``.
        """
        if self.gradients.device != index.device:
            self.gradients = self.gradients.to(index.device)
        return self.gradients[index] / zero_logit_slope(n_logits, self.label)

    def forward(self, flagged: torch.Tensor) -> torch.Tensor:
        """The logits with canary i's rows replaced by ``c_i·(w_i − sg(w_i))·e₀`` (module docstring): zero in value,
        with the per-example gradient ``g_i·e_i`` on ``w``.

        Args:
            flagged: the module's logits with one more column holding ``i + 1`` on canary i's rows and 0 elsewhere,
                shape (..., V + 1).

        Returns:
            The logits, shape (..., V).
        """
        logits, code = flagged[..., :-1], flagged[..., -1]
        marked = code > 0.5
        index = (code - 1.0).round().clamp(0, self.count - 1).long()
        picked = self.weight[index]
        tied = (picked - picked.detach()) * self.factors(index, logits.shape[-1]).to(logits.dtype)
        first = torch.zeros(logits.shape[-1], dtype=logits.dtype, device=logits.device)
        first[0] = 1.0
        return torch.where(marked[..., None], first * tied[..., None], logits)


def _head_rows(layer: CanaryHead, activations: list[torch.Tensor], backprops: torch.Tensor
               ) -> tuple[torch.Tensor, torch.Tensor]:
    """Each row's canary index and the value of its per-example gradient on it (0 on rows of other records)."""
    flagged = activations[0]
    code = flagged[..., -1]
    index = (code - 1.0).round().clamp(0, layer.count - 1).long()
    value = backprops[..., 0] * layer.factors(index, flagged.shape[-1] - 1).to(backprops.dtype) * (code > 0.5)
    return index, value


def _opacus_grad_sample(layer: CanaryHead, activations: list[torch.Tensor], backprops: torch.Tensor
                        ) -> dict[nn.Parameter, torch.Tensor]:
    index, value = _head_rows(layer, activations, backprops)
    samples = torch.zeros(len(index), layer.weight.numel(), dtype=backprops.dtype, device=backprops.device)
    samples.scatter_(1, index[:, None], value[:, None])
    return {layer.weight: samples}


def _opacus_norm_sample(layer: CanaryHead, activations: list[torch.Tensor], backprops: torch.Tensor
                        ) -> dict[nn.Parameter, torch.Tensor]:
    return {layer.weight: _head_rows(layer, activations, backprops)[1].abs()}


def register_with_opacus() -> None:
    """Give Opacus the head's per-example gradients and norms directly (its functorch fallback computes the
    same values, more slowly). Only when Opacus is already imported: nothing here imports it."""
    if "opacus" not in sys.modules:
        return
    from opacus.grad_sample import register_grad_sampler
    from opacus.grad_sample.utils import register_norm_sampler

    register_grad_sampler(CanaryHead)(_opacus_grad_sample)
    register_norm_sampler(CanaryHead)(_opacus_norm_sample)


class AuditedModule(nn.Module):
    """The user's module (``self.module``) followed by the canary head; attributes it lacks are the module's.
    ``marks[i]`` counts how often canary i reached it (outside ``torch.func`` transforms: once per batch)."""

    def __init__(self, module: nn.Module, inputs: CanaryInputs, head: CanaryHead):
        super().__init__()
        if head.count != inputs.count:
            raise ValueError("the head and the inputs hold different numbers of canaries")
        self.module = module
        self.add_module(HEAD_NAME, head)
        self.canary_inputs = inputs
        self.marks = torch.zeros(inputs.count, dtype=torch.long)
        register_with_opacus()

    @property
    def head(self) -> CanaryHead:
        return getattr(self, HEAD_NAME)

    def forward(self, x: torch.Tensor, *args, **kwargs) -> torch.Tensor:
        """The user's module on ``x``, then the canary head on its logits flagged with each row's canary index;
        counts the canaries that reached it.

        Args:
            x: the batch the user's loop gives the module.
            *args: further positional arguments of the user's module.
            **kwargs: its keyword arguments.

        Returns:
            The logits, canaries' rows replaced as :meth:`CanaryHead.forward` says.
        """
        logits = _users_module_output(self.module, x, *args, **kwargs)
        index = self.canary_index(x, logits.shape[:-1]).to(logits.device)
        self._count(index)
        dtype = torch.promote_types(logits.dtype, torch.float32)  # the index column is exact up to 2^24
        return self.head(torch.cat([logits.to(dtype), (index + 1).to(dtype)[..., None]], dim=-1))

    def canary_index(self, x: object, batch: torch.Size) -> torch.Tensor:
        """The canary index of each record in ``x`` (−1: not a canary), of shape ``batch`` (the logits' leading
        dimensions). The records are whatever follows ``batch`` in ``x``'s shape — ``[B, d]`` for a table,
        ``[B, C, H, W]`` for images, ``[d]`` for one example under a per-example ``vmap`` — and ``B = 0`` (an empty
        Poisson batch) gives no rows. An input that does not hold records of the canaries' size (the loop
        transformed it) holds no canary; a training whose canaries were never marked is refused afterwards.

        Args:
            x: the module's input (any object).
            batch: the logits' leading dimensions.

        Returns:
            Long tensor of shape ``batch``.
        """
        size = self.canary_inputs.size
        lead = len(batch)
        if (not isinstance(x, torch.Tensor) or tuple(x.shape[:lead]) != tuple(batch)
                or math.prod(x.shape[lead:]) != size):
            return torch.full(tuple(batch), -1, dtype=torch.long)
        return self.canary_inputs.indices(x.reshape(math.prod(batch), size)).reshape(batch)

    def _count(self, index: torch.Tensor) -> None:
        index = _unwrapped(index).reshape(-1)
        if self.marks.device != index.device:
            self.marks = self.marks.to(index.device)
        # out of place: a torch.func transform refuses in-place changes of tensors it did not create
        self.marks = self.marks.scatter_add(0, index.clamp(min=0), (index >= 0).long())

    @property
    def marked(self) -> int:
        """How many times canaries reached the module."""
        return int(self.marks.sum())

    def __getattr__(self, name: str):
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(super().__getattr__("module"), name)


@passes_through
def _users_module_output(module: nn.Module, x: object, *args, **kwargs) -> torch.Tensor:
    """The user's module on the batch their loop gave the wrapper: what fails in it is theirs (a float64 batch
    into a float32 layer), though fdp-audit's ``forward`` called it."""
    return module(x, *args, **kwargs)


def _unwrapped(tensor: torch.Tensor) -> torch.Tensor:
    """The plain tensor under ``torch.func`` wrappers (a per-example ``vmap`` of the user's loop holds the whole
    batch there): the audit only counts the canaries' rows, outside the transform."""
    while torch._C._functorch.is_functorch_wrapped_tensor(tensor):  # noqa: SLF001 - no public API for this
        tensor = torch._C._functorch.get_unwrapped(tensor)  # noqa: SLF001
    return tensor


def unwrap(module: object) -> nn.Module | None:
    """The module under wrappers that keep it as ``_module`` (Opacus's GradSampleModule, DDP).

    Args:
        module: a module, maybe wrapped (any object).

    Returns:
        The innermost module (at most 8 wrappers are removed), or None when ``module`` is not a module.
    """
    seen = 0
    while isinstance(module, nn.Module) and hasattr(module, "_module") and seen < 8:
        module = module._module  # noqa: SLF001 - the wrappers' documented attribute
        seen += 1
    return module if isinstance(module, nn.Module) else None


@dataclass
class _Snapshot:
    value: torch.Tensor
    grad: torch.Tensor | None
    lr: float
    weight_decay: float
    linear: bool  # plain SGD: the change is linear in the gradient


class UpdateObserver:
    """Record the canary head's released update at every optimizer step (module docstring), while active."""

    def __init__(self, head: nn.Parameter, scale: float = 1.0, field: str = "mechanism.training", spool=None):
        """Observe the head's updates.

        Args:
            head: the canary head's parameter.
            scale: what each update is multiplied by (the expected batch of an averaged loss, else 1).
            field: what a refusal names.
            spool: where flushed steps go instead of host memory (a
                :class:`~fdp_audit.auditing.one_run.manifest.ReleaseSpool`: ``append(rows)``, ``steps``,
                ``rows()``), or None to keep them in memory.
        """
        self.head, self.scale, self.field, self.spool = head, scale, field, spool
        self.unread: str | None = None  # why a step's release could not be read (then :attr:`releases` refuses)
        self._pending: list[torch.Tensor] = []
        self._moved: list[torch.Tensor] = []
        self._open: dict[int, _Snapshot] = {}
        self._handles: list = []
        self._last = head.detach().clone()  # the head as the observed steps left it (before any: its initial value)
        self._changes = torch.zeros((), dtype=torch.long, device=head.device)  # on the device: no sync per step

    def _group(self, optimizer: torch.optim.Optimizer) -> dict | None:
        for group in optimizer.param_groups:
            if any(p is self.head for p in group["params"]):
                return group
        return None

    def holds_head(self, optimizer: torch.optim.Optimizer) -> bool:
        """Whether the optimizer steps the canary head.

        Args:
            optimizer: an optimizer.

        Returns:
            True when one of its parameter groups holds the head.
        """
        return self._group(optimizer) is not None

    def before(self, optimizer: torch.optim.Optimizer, args, kwargs) -> None:
        """The pre-step hook: snapshot the head (and, unless the optimizer is plain SGD, its gradient) before an
        optimizer that holds it steps, and count a change of the head since the last observed step.

        Args:
            optimizer: the optimizer about to step.
            args: ``step()``'s positional arguments (unused).
            kwargs: its keyword arguments (unused).
        """
        group = self._group(optimizer)
        if group is None:
            return
        lr = float(group["lr"])
        linear = (type(optimizer) is torch.optim.SGD and not group.get("momentum") and not group.get("nesterov")
                  and not group.get("maximize") and lr > 0)
        grad = None if self.head.grad is None or linear else self.head.grad.detach().clone()
        value = self.head.detach().clone()
        self._changes = self._changes.to(value.device) + self._moved_since_last(value)
        self._open[id(optimizer)] = _Snapshot(value, grad, lr, float(group.get("weight_decay") or 0.0), linear)

    def after(self, optimizer: torch.optim.Optimizer, args, kwargs) -> None:
        """The post-step hook: record the step's release (``−Δw/η − λ·w`` for plain SGD, else the gradient held when the
        step began, unchanged by it), times ``scale``; a release that cannot be read is marked (:attr:`unread`) and
        refused when :attr:`releases` is read.

        Args:
            optimizer: the optimizer that stepped.
            args: ``step()``'s positional arguments (unused).
            kwargs: its keyword arguments (unused).
        """
        snapshot = self._open.pop(id(optimizer), None)
        if snapshot is None:
            return
        if snapshot.linear:
            update = -(self.head.detach() - snapshot.value) / snapshot.lr - snapshot.weight_decay * snapshot.value
        elif snapshot.grad is not None and self.head.grad is not None and torch.equal(snapshot.grad, self.head.grad):
            update = snapshot.grad
        else:  # never a release of zeros: what the step applied is unknown, and the audit refuses it
            self.unread = self.unread or (
                f"the canary head had no gradient when {type(optimizer).__name__}.step() began (a gradient computed "
                "inside step(), by a closure as LBFGS's, or none)" if snapshot.grad is None else
                f"{type(optimizer).__name__}.step() changed the gradient it was given (computed it again in a "
                "closure, or noised or clipped it inside step())")
            update = torch.full_like(snapshot.value, float("nan"))
        self._pending.append((update * self.scale).float())
        self._last = self.head.detach().clone()
        if len(self._pending) >= FLUSH_STEPS:
            self._flush()

    def _flush(self) -> None:
        if self._pending:
            chunk = torch.stack(self._pending).cpu()
            if self.spool is None:
                self._moved.append(chunk)
            else:
                self.spool.append(chunk)
            self._pending = []

    def _moved_since_last(self, value: torch.Tensor) -> torch.Tensor:
        return (value != self._last.to(value.device, value.dtype)).any()

    @property
    def unobserved_changes(self) -> int:
        """In how many gaps the head changed outside the observed steps: before the first, between two, or after the
        last (up to now). Each holds updates the release does not, so the final weights are not the product of the
        observed steps."""
        return int(self._changes) + int(self._moved_since_last(self.head.detach()))

    @property
    def steps(self) -> int:
        spooled = 0 if self.spool is None else self.spool.steps
        return len(self._pending) + sum(len(chunk) for chunk in self._moved) + spooled

    def flushed(self):
        """Every observed step in the spool (none left on the device); refused as :attr:`releases` is.

        Returns:
            The spool.
        """
        self._refuse_unread()
        self._flush()
        return self.spool

    def _refuse_unread(self) -> None:
        if self.unread is not None:
            raise BadInputError(f"{self.unread}: the release of that step cannot be read; step an optimizer on the "
                                "gradient the loop computed before step() (SGD, Adam, Opacus's DPOptimizer)",
                                self.field)

    @property
    def releases(self) -> torch.Tensor:
        """``[T, M + M₀]`` on the host: every observed step's update (read back from the spool, if any); refused
        (bad input naming ``field``) when a step's could not be read: the release is the gradient the optimizer
        was given before ``step()``."""
        self._refuse_unread()
        self._flush()
        if self.spool is not None:
            return self.spool.rows()
        if not self._moved:
            return torch.zeros(0, self.head.numel())
        if len(self._moved) > 1:
            self._moved = [torch.cat(self._moved)]
        return self._moved[0]

    def start(self) -> None:
        if not self._handles:
            self._handles = [register_optimizer_step_pre_hook(self.before),
                             register_optimizer_step_post_hook(self.after)]

    def stop(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles = []

    @contextlib.contextmanager
    def active(self) -> Iterator[UpdateObserver]:
        """Observe the steps inside the ``with`` block (:meth:`start`, then :meth:`stop` however it ends).

        Yields:
            The observer.
        """
        self.start()
        try:
            yield self
        finally:
            self.stop()
