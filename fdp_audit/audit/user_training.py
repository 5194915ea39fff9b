"""The user's own training code (docs/games.md): ``mechanism.training: file.py:train`` names a function

    def train(module: torch.nn.Module, dataset: torch.utils.data.Dataset, seed: int) -> torch.nn.Module

that trains the module (built by ``model.factory``) on the dataset, with all its randomness from ``seed``, and
returns it (an Opacus ``GradSampleModule`` wrapping it is unwrapped). The dataset holds ``(x, y)`` pairs: the
encoded records and labels of S, with the trial's canary as one more ordinary record when it is present. The
audit runs the function once per trial and never reads what it computes internally; what it observes:

* *Record canaries* (final-model games): the trained module's parameters.
* *Gradient canaries* (iterates games): the module is wrapped in :class:`AuditedModule`, which adds a canary head
  with a parameter vector ``w`` of ``1 + NOISE_COORDINATES`` entries that no record's gradient reaches but the
  canary's. The canary is a marked record (recognised by its input, which no record of S shares): the head
  replaces its logits by ``c·(w₀ − w₀.detach())·e₀`` — zero in value, so its loss is the loss at zero logits
  and none of the module's own parameters gets its gradient — with its label chosen so that ``∂ℓ/∂logit₀ < 0``
  for a classification loss (cross-entropy on ≥ 2 logits, label 0: ``1/V − 1``; the logistic loss on one logit,
  label 1: ``−½``). Its per-example gradient is therefore ``s·K·C·e₀`` whatever computes it — ``torch.func``,
  Opacus's hooks, functorch or ghost clipping — and the user's code clips, noises and applies it as any
  record's. The other coordinates of ``w`` receive only the mechanism's noise.
* The release is observed through the optimizer: global step hooks (``torch.optim``) snapshot ``w`` around every
  step of an optimizer holding it (an Opacus ``DPOptimizer`` steps its wrapped optimizer only when it does
  update, so skipped accumulation steps are not steps). For plain SGD the released update is the parameter
  change, ``−Δw/lr − λ·w`` (weight decay λ); for other optimizers the gradient the optimizer consumed (its
  state makes the change non-linear in it). Either is multiplied by the claimed expected batch ``p·n`` (n the
  size of S; a data-independent constant) — or by 1 when the loss is summed rather than averaged — to be in
  units of a noisy clipped sum; nothing else is reconstructed. The iterates attacks then read ``w₀`` and
  estimate the noise from the other coordinates (:mod:`attacks.iterates`), never from the claim.

A canary that never reaches the module unchanged (the loop transforms its inputs) cannot be observed: a run in
which it was never marked though it was in the data set of many trials is refused.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch
from torch import nn
from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook
from torch.utils.data import TensorDataset

from attacks import View
from fdp_audit.audit.third_party import TRIALS_PER_CHUNK, trial_seed
from fdp_audit.errors import BadInputError
from fdp_audit.threads import threads_for
from fdp_audit.training.engine import Canaries, TrainingProblem
from fdp_audit.training.models import Params
from fdp_audit.training.modules import ModuleModel, build_module
from fdp_audit.user_code import load_function, raise_failure

FIELD = "mechanism.training"
NOISE_COORDINATES = 15  # coordinates of the canary head that only noise reaches
HEAD_NAME = "fdp_audit_canary"
UserTraining = Callable[[nn.Module, TensorDataset, int], nn.Module]


def load_training(spec: str) -> UserTraining:
    return load_function(spec, FIELD)


class CanaryHead(nn.Module):
    """The canary's parameter block. Its input is the module's logits with one more column flagging the canary's
    rows (one tensor, as per-example gradient engines hand a layer one activation); its output is the logits,
    with the canary's rows replaced by ``scale·(w₀ − w₀.detach())·e₀`` (module docstring)."""

    def __init__(self, scale: float):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(1 + NOISE_COORDINATES))
        self.scale = scale

    def forward(self, flagged: torch.Tensor) -> torch.Tensor:
        logits, marked = flagged[..., :-1], flagged[..., -1:] > 0.5
        # c·w₀ as one product with c·e₀, neither an index nor a product after the sum: under a per-example vmap
        # of an empty batch (Opacus's functorch path on an empty Poisson batch) torch's backward of either fails
        tied = ((self.weight - self.weight.detach()) * self.scale * _first(len(self.weight), self.weight)).sum()
        return torch.where(marked, torch.zeros_like(logits) + _first(logits.shape[-1], logits) * tied, logits)


def _first(width: int, like: torch.Tensor) -> torch.Tensor:
    """e₀ of R^width, of ``like``'s dtype and device."""
    return (torch.arange(width, device=like.device) == 0).to(like.dtype)


class AuditedModule(nn.Module):
    """The user's module (``self.module``) with the canary head; attributes it lacks are the module's."""

    def __init__(self, module: nn.Module, canary_input: torch.Tensor, scale: float):
        super().__init__()
        self.module = module
        self.add_module(HEAD_NAME, CanaryHead(scale))
        self.canary_input = canary_input.flatten()
        self.marked = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        logits = self.module(x)
        marked = self.canary_rows(x, logits.shape[:-1])
        self.marked += int(_unwrapped(marked).sum())
        head = getattr(self, HEAD_NAME)
        return head(torch.cat([logits, marked[..., None].to(device=logits.device, dtype=logits.dtype)], dim=-1))

    def canary_rows(self, x: object, batch: torch.Size) -> torch.Tensor:
        """Which of the records in ``x`` are the canary, of shape ``batch`` (the logits' leading dimensions).

        The records are whatever follows ``batch`` in ``x``'s shape — ``[B, d]`` for a table, ``[B, C, H, W]``
        for images the loop reshaped, ``[d]`` for one example under a per-example ``vmap`` — compared entry by
        entry with the canary's input. ``B = 0`` (an empty Poisson batch) gives no rows. An input that does not
        hold records of the canary's size (the loop transformed it) has none marked; a run in which the canary
        was never marked is refused after its trials (:func:`train_user_trials`)."""
        size = self.canary_input.numel()
        lead = len(batch)
        if (not isinstance(x, torch.Tensor) or tuple(x.shape[:lead]) != tuple(batch)
                or math.prod(x.shape[lead:]) != size):
            return torch.zeros(batch, dtype=torch.bool)
        records = x.reshape(*batch, size)
        return (records == self.canary_input.to(x.device, x.dtype)).all(dim=-1)

    def __getattr__(self, name: str):
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(super().__getattr__("module"), name)


def _unwrapped(tensor: torch.Tensor) -> torch.Tensor:
    """The plain tensor under ``torch.func`` wrappers (a per-example ``vmap`` of the user's loop holds the whole
    batch there): the audit only counts the canary's rows, outside the transform."""
    while torch._C._functorch.is_functorch_wrapped_tensor(tensor):  # noqa: SLF001 - no public API for this
        tensor = torch._C._functorch.get_unwrapped(tensor)  # noqa: SLF001
    return tensor


def canary_label(n_outputs: int) -> int:
    """The canary's label: logit 0's class (label 0), or label 1 for one logit (module docstring)."""
    return 1 if n_outputs == 1 else 0


def head_scale(sign: float, raw_norm: float, n_outputs: int) -> float:
    """``c`` with ``∂ℓ/∂w₀ = c·∂ℓ/∂logit₀ = sign·raw_norm`` at zero logits for cross-entropy / the logistic loss."""
    slope = 0.5 if n_outputs == 1 else 1.0 - 1.0 / n_outputs  # |∂ℓ/∂logit₀| at zero logits
    return -sign * raw_norm / slope


@dataclass
class _Snapshot:
    value: torch.Tensor
    grad: torch.Tensor | None
    lr: float
    weight_decay: float
    linear: bool  # plain SGD: the change is linear in the gradient


class UpdateObserver:
    """Record the canary head's released update at every optimizer step (module docstring), while active."""

    def __init__(self, head: nn.Parameter, scale: float):
        self.head, self.scale = head, scale
        self.releases: list[torch.Tensor] = []
        self._open: dict[int, _Snapshot] = {}
        self._holds: dict[int, bool] = {}

    def _group(self, optimizer: torch.optim.Optimizer) -> dict | None:
        for group in optimizer.param_groups:
            if any(p is self.head for p in group["params"]):
                return group
        return None

    def before(self, optimizer: torch.optim.Optimizer, args, kwargs) -> None:
        group = self._group(optimizer)
        if group is None:
            return
        linear = (type(optimizer) is torch.optim.SGD and not group.get("momentum") and not group.get("nesterov")
                  and not group.get("maximize"))
        grad = None if self.head.grad is None else self.head.grad.detach().clone()
        self._open[id(optimizer)] = _Snapshot(self.head.detach().clone(), grad, float(group["lr"]),
                                              float(group.get("weight_decay") or 0.0), linear)

    def after(self, optimizer: torch.optim.Optimizer, args, kwargs) -> None:
        snapshot = self._open.pop(id(optimizer), None)
        if snapshot is None:
            return
        if snapshot.linear:
            update = -(self.head.detach() - snapshot.value) / snapshot.lr - snapshot.weight_decay * snapshot.value
        elif snapshot.grad is not None:
            update = snapshot.grad
        else:
            update = torch.zeros_like(snapshot.value)
        self.releases.append((update * self.scale).float().cpu())

    @contextlib.contextmanager
    def active(self) -> Iterator[UpdateObserver]:
        handles = [register_optimizer_step_pre_hook(self.before), register_optimizer_step_post_hook(self.after)]
        try:
            yield self
        finally:
            for handle in handles:
                handle.remove()


def unwrap(module: object) -> nn.Module | None:
    """The module under wrappers that keep it as ``_module`` (Opacus's GradSampleModule, DDP)."""
    seen = 0
    while isinstance(module, nn.Module) and hasattr(module, "_module") and seen < 8:
        module = module._module  # noqa: SLF001 - the wrappers' documented attribute
        seen += 1
    return module if isinstance(module, nn.Module) else None


@dataclass(frozen=True)
class TrialOutcome:
    params: dict[str, torch.Tensor]  # the module's own parameters, no model dimension
    release: torch.Tensor | None  # [T, 1 + NOISE_COORDINATES]: the canary head's released updates
    marked: int  # times the canary record reached the module


@dataclass(frozen=True)
class UserTrainer:
    """Runs the user's training function on trials (module docstring)."""

    training: UserTraining
    model: ModuleModel
    x: torch.Tensor  # S
    y: torch.Tensor
    clip_norm: float  # the claimed C: the canary's raw norm is canary_norm_factor·C
    canary_norm_factor: float
    update_scale: float  # the claimed expected batch p·n, or 1 for a summed loss
    initial_params: Params | None = None  # every trial's fixed start (the membership game's), else the factory's
    sample_rate: float = 1.0  # the claimed p: a step's work, from which the thread count is chosen, is p·n records

    def dataset(self, canary_x: torch.Tensor | None, canary_y: int | None) -> TensorDataset:
        if canary_x is None:
            return TensorDataset(self.x, self.y)
        return TensorDataset(torch.cat([self.x, canary_x[None].to(self.x.dtype)]),
                             torch.cat([self.y, torch.tensor([canary_y], dtype=self.y.dtype)]))

    def fresh_module(self, seed: int) -> nn.Module:
        """The factory's module, initialised from ``seed`` or, when the game fixes one, from
        :attr:`initial_params` (DP-SGD's guarantee holds from any start fixed before the data are seen)."""
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            module = build_module(self.model.factory, self.model.n_inputs, self.model.n_classes)
        if self.initial_params is not None:
            with torch.no_grad():
                for name, parameter in module.named_parameters():
                    parameter.copy_(self.initial_params[name])
        return module

    def run(self, seed: int, canary_x: torch.Tensor | None, canary_y: int | None, sign: float | None
            ) -> TrialOutcome:
        """One trial: a record canary (``sign`` None; ``canary_x`` None when absent) or a gradient canary of
        ``sign`` ∈ {−1, 0, +1} (0: absent from the data set)."""
        module = self.fresh_module(seed)
        if sign is None:
            trained = self._call(module, self.dataset(canary_x, canary_y), seed)
            return TrialOutcome(self._params(trained, module), None, 0)
        n_outputs = self.model.n_outputs
        scale = head_scale(1.0 if sign == 0 else sign, self.canary_norm_factor * self.clip_norm, n_outputs)
        audited = AuditedModule(module, self.canary_input(), scale)
        head = getattr(audited, HEAD_NAME).weight
        observer = UpdateObserver(head, self.update_scale)
        present = sign != 0
        data = self.dataset(self.canary_input() if present else None, canary_label(n_outputs))
        with observer.active():
            trained = self._call(audited, data, seed)
        if not observer.releases:
            raise BadInputError("the training function made no optimizer step on the module's parameters "
                                "(pass module.parameters() to the optimizer)", FIELD)
        return TrialOutcome(self._params(trained, audited), torch.stack(observer.releases), audited.marked)

    def canary_input(self) -> torch.Tensor:
        """The gradient canary's input: a point no record of S has (a constant row outside the data's range)."""
        return torch.full(self.x.shape[1:], float(self.x.abs().max()) + 1.0)

    def _call(self, module: nn.Module, dataset: TensorDataset, seed: int) -> object:
        work = int(self.sample_rate * len(dataset) * self.model.n_parameters)  # per step, as the engine's
        try:
            with threads_for(work), torch.random.fork_rng(devices=[]):
                torch.manual_seed(seed)
                return self.training(module, dataset, seed)
        except BadInputError:
            raise
        except (Exception, SystemExit) as err:
            raise_failure(err, f"the training function failed on a trial (seed {seed})", FIELD)

    def _params(self, returned: object, given: nn.Module) -> dict[str, torch.Tensor]:
        module = unwrap(returned)
        if module is None:
            raise BadInputError(f"the training function returned a {type(returned).__name__}, not the module",
                                FIELD)
        if isinstance(given, AuditedModule):
            if module is not given:
                raise BadInputError("the training function must return the module it was given (trained)", FIELD)
            module = given.module
        shapes = self.model.shapes()
        params = {name: p.detach().float().cpu() for name, p in module.named_parameters()}
        if set(params) != set(shapes) or any(tuple(params[k].shape) != s for k, s in shapes.items()):
            raise BadInputError("the returned module's parameters are not the factory's", FIELD)
        for name, value in params.items():
            if not torch.isfinite(value).all():
                raise BadInputError(f"training diverged: parameter {name} is not finite", FIELD)
        return params


def user_trainer(config, problem: TrainingProblem) -> UserTrainer:
    """The trainer of a config naming ``mechanism.training`` on ``problem``'s data set S."""
    mech = config.mechanism
    if not isinstance(problem.model, ModuleModel):
        raise BadInputError("user training needs model.factory (the module it trains)", FIELD)
    scale = 1.0 if mech.loss_reduction == "sum" else mech.sample_rate * problem.n
    return UserTrainer(load_training(mech.training), problem.model, problem.x.cpu(), problem.y.cpu(),
                       mech.clip_norm, config.audit.canary_norm_factor, scale, problem.initial_params,
                       mech.sample_rate)


def train_user_trials(trainer: UserTrainer, seed: int, indices: torch.Tensor, canaries: Canaries,
                      record_iterates: bool) -> Iterator[tuple[torch.Tensor, View]]:
    """One call of the user's function per trial (trial ``indices[i]`` with canary row i), yielded in chunks as
    the engine's trials are. Gradient canaries carry their sign in ``private_gradient[:, 0]`` (0: absent)."""
    marked = present = 0
    for start in range(0, len(indices), TRIALS_PER_CHUNK):
        rows = range(start, min(start + TRIALS_PER_CHUNK, len(indices)))
        outcomes = []
        for r in rows:
            seed_r = trial_seed(seed, int(indices[r]))
            if record_iterates:
                assert canaries.private_gradient is not None
                sign = float(torch.sign(canaries.private_gradient[r, 0])) * bool(canaries.in_private[r])
                present += sign != 0
                outcome = trainer.run(seed_r, None, None, sign)
                marked += outcome.marked
            else:
                inside = bool(canaries.in_private[r])
                outcome = trainer.run(seed_r, canaries.x[r] if inside else None, int(canaries.y[r]), None)
            outcomes.append(outcome)
        yield indices[list(rows)], _view(outcomes)
    if record_iterates and present >= 8 and marked == 0:
        raise BadInputError(f"the gradient canary was in the data set of {present} trials but never reached the "
                            "module unchanged: the training loop must feed the dataset's inputs to the module as "
                            "they are", FIELD)


def _view(outcomes: list[TrialOutcome]) -> View:
    params = {k: torch.stack([o.params[k] for o in outcomes]) for k in outcomes[0].params}
    if outcomes[0].release is None:
        return View(params)
    steps = {o.release.shape[0] for o in outcomes}
    if len(steps) != 1:
        raise BadInputError(f"trials made different numbers of optimizer steps {sorted(steps)}; the iterates "
                            "games compare the same steps of every trial", FIELD)
    return View(params, torch.stack([o.release for o in outcomes]))

