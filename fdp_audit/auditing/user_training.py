"""The user's own training code (docs/games.md): ``mechanism.training: file.py:train`` names a function

    def train(module: torch.nn.Module, dataset: torch.utils.data.Dataset, seed: int) -> torch.nn.Module

that trains the module (built by ``model.factory``) on the dataset, with all its randomness from ``seed``, and
returns it (an Opacus ``GradSampleModule`` wrapping it is unwrapped). The dataset holds ``(x, y)`` pairs: the
encoded records and labels of S, with the trial's canary as one more ordinary record when it is present. The
audit runs the function once per trial and never reads what it computes internally; what it observes:

* *Record canaries* (final-model games): the trained module's parameters.
* *Gradient canaries* (iterates games): the module is wrapped in an
  :class:`~fdp_audit.auditing.canary_head.AuditedModule` with one canary (M = 1) and ``NOISE_COORDINATES`` null
  coordinates: the canary is a marked record whose per-example gradient is ``s·K·C`` on the head's first
  coordinate whatever computes per-example gradients, and the release is the head's update at every optimizer
  step, in units of a noisy clipped sum (the claimed expected batch ``p·n`` times the averaged update, or 1 when
  the loss is summed; a data-independent constant). The iterates attacks then read ``w₀`` and estimate the noise
  from the other coordinates (:mod:`attacks.iterates`), never from the claim.

A canary that never reaches the module unchanged (the loop transforms its inputs) cannot be observed: a run in
which it was never marked though it was in the data set of many trials is refused.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch
from torch import nn
from torch.utils.data import TensorDataset

from attacks import View
from fdp_audit.auditing.canary_head import AuditedModule, CanaryHead, CanaryInputs, UpdateObserver, unwrap
from fdp_audit.auditing.third_party import TRIALS_PER_CHUNK, trial_seed
from fdp_audit.errors import BadInputError
from fdp_audit.threads import threads_for
from fdp_audit.training.engine import Canaries, TrainingProblem
from fdp_audit.training.models import Params
from fdp_audit.training.modules import ModuleModel, build_module
from fdp_audit.user_calls import UserCalls
from fdp_audit.user_code import load_function

FIELD = "mechanism.training"
NOISE_COORDINATES = 15  # coordinates of the canary head that only noise reaches
UserTraining = Callable[[nn.Module, TensorDataset, int], nn.Module]


def load_training(spec: str) -> UserTraining:
    """The user's training function a ``mechanism.training`` spec names.

    Args:
        spec: ``file.py:function`` or ``module:function``.

    Returns:
        The function.

    Raises:
        BadInputError: the spec is malformed or its module cannot be imported (naming ``mechanism.training``).
    """
    return load_function(spec, FIELD)


@dataclass(frozen=True)
class TrialOutcome:
    """One trial of the user's training function (docs/user_training.md).

    Attributes:
        params: the trained module's own parameters, without a model dimension.
        release: gradient canaries: the canary head's released update at every optimizer step, shape
            (T, 1 + NOISE_COORDINATES); None for record canaries.
        marked: how many times the marked canary record reached the module.
    """

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
    timeout: float | None = None  # audit.trial_timeout
    # around each trial's training, given its seed: the integration's check of it (Opacus: its promise kept)
    each_training: Callable[[int], contextlib.AbstractContextManager[None]] = contextlib.nullcontext

    def dataset(self, canary_x: torch.Tensor | None, canary_y: int | None) -> TensorDataset:
        """S, and the canary when it is present, as new tensors: the function may edit them in place.

        Args:
            canary_x: the canary's input, or None when it is absent.
            canary_y: the canary's label (unused when absent).

        Returns:
            The ``(x, y)`` dataset of n or n + 1 records, the canary last.
        """
        if canary_x is None:
            return TensorDataset(self.x.clone(), self.y.clone())
        return TensorDataset(torch.cat([self.x, canary_x[None].to(self.x.dtype)]),
                             torch.cat([self.y, torch.tensor([canary_y], dtype=self.y.dtype)]))

    def calls(self, total: int, on_trial: Callable[[int], object] | None = None) -> UserCalls:
        """The calls of a phase of trials of the training function.

        Args:
            total: the phase's trials.
            on_trial: called with 1 after each trial (a phase's progress).

        Returns:
            The calls, under this trainer's time limit.
        """
        return UserCalls(FIELD, "the training function", total, self.timeout, on_trial)

    def fresh_module(self, seed: int) -> nn.Module:
        """The factory's module, initialised from ``seed`` or, when the game fixes one, from
        :attr:`initial_params` (DP-SGD's guarantee holds from any start fixed before the data are seen); the
        factory runs on the trial's thread count (:attr:`step_work`).

        Args:
            seed: the trial's seed.

        Returns:
            A new module.
        """
        with threads_for(self.step_work), torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            module = build_module(self.model.factory, self.model.n_inputs, self.model.n_classes,
                                  timeout=self.timeout, seed=seed)
        if self.initial_params is not None:
            with torch.no_grad():
                for name, parameter in module.named_parameters():
                    parameter.copy_(self.initial_params[name])
        return module

    def run(self, seed: int, canary_x: torch.Tensor | None, canary_y: int | None, sign: float | None,
            calls: UserCalls | None = None) -> TrialOutcome:
        """One trial: a record canary (``sign`` None; ``canary_x`` None when absent) or a gradient canary of
        ``sign`` ∈ {−1, 0, +1} (0: absent from the data set); ``calls`` counts it in its phase (default: a phase of
        its own).

        Args:
            seed: the trial's seed.
            canary_x: the record canary's input, or None.
            canary_y: its label.
            sign: None for a record canary, else the gradient canary's sign (0: absent).
            calls: the phase's calls of the user's function.

        Returns:
            The module's trained parameters, the head's release per optimizer step (gradient canaries) and how often
            the canary reached the module.

        Raises:
            BadInputError: the function fails, returns another module, diverges, makes no optimizer step, or a step's
                release cannot be read.
        """
        calls = calls or self.calls(1)
        module = self.fresh_module(seed)
        if sign is None:
            trained = self._call(module, self.dataset(canary_x, canary_y), seed, calls)
            return TrialOutcome(self._params(trained, module), None, 0)
        inputs = self.canary_inputs()
        gradient = (1.0 if sign == 0 else sign) * self.canary_norm_factor * self.clip_norm
        audited = AuditedModule(module, inputs, CanaryHead(torch.tensor([gradient]), NOISE_COORDINATES))
        observer = UpdateObserver(audited.head.weight, self.update_scale)
        present = sign != 0
        data = self.dataset(inputs.inputs(torch.tensor([0]))[0] if present else None, 0)
        with observer.active():
            trained = self._call(audited, data, seed, calls)
        if not observer.steps:
            raise BadInputError("the training function made no optimizer step on the module's parameters "
                                "(pass module.parameters() to the optimizer)", FIELD)
        return TrialOutcome(self._params(trained, audited), observer.releases, audited.marked)

    def canary_inputs(self) -> CanaryInputs:
        """The gradient canary's input: a point no record of S has (a constant row above the data's range).

        Returns:
            One canary's inputs.
        """
        return CanaryInputs(1, tuple(self.x.shape[1:]), CanaryInputs.base_above(float(self.x.abs().max())))

    def train_once(self, module: nn.Module, dataset: TensorDataset, seed: int) -> object:
        """One call of the user's function on ``module`` and ``dataset`` (its failures are bad input).

        Args:
            module: the module to train.
            dataset: the data set to train it on.
            seed: the seed.

        Returns:
            What the function returned.

        Raises:
            BadInputError: the function failed.
        """
        return self._call(module, dataset, seed, self.calls(1))

    def returned_params(self, returned: object, given: nn.Module) -> dict[str, torch.Tensor]:
        """The parameters of the module the function returned, checked to be the given one's, trained.

        Args:
            returned: what the function returned.
            given: the module it was given.

        Returns:
            Name → float32 tensor on the host.

        Raises:
            BadInputError: another object or module, other parameters than the factory's, or non-finite values.
        """
        return self._params(returned, given)

    @property
    def step_work(self) -> int:
        """Multiply-adds of one step of the user's training, as the engine counts one model's
        (:func:`fdp_audit.training.engine.step_work`): the expected batch p·(n + 1) times the parameters. The
        factory and the training function of a trial both run on the thread count
        :func:`fdp_audit.threads.threads_for` chooses for it."""
        return int(self.sample_rate * (len(self.x) + 1) * self.model.n_parameters)

    def _call(self, module: nn.Module, dataset: TensorDataset, seed: int, calls: UserCalls) -> object:
        with threads_for(self.step_work), torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            return calls.call(self.training, (module, dataset, seed), seed)

    def _params(self, returned: object, given: nn.Module) -> dict[str, torch.Tensor]:
        module = unwrap(returned)
        if module is None:
            raise BadInputError(f"the training function returned a {type(returned).__name__}, not the module",
                                FIELD)
        if module is not given:  # another module's weights (a fresh one's) would be judged as the trained ones
            raise BadInputError("the training function must return the module it was given, trained (it returned "
                                "another module)", FIELD)
        if isinstance(given, AuditedModule):
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
    """The trainer of a config naming ``mechanism.training`` on ``problem``'s data set S, with nothing around each
    trial's training (:func:`fdp_audit.integrations.checked_user_trainer` adds the integration's check).

    Args:
        config: the validated configuration.
        problem: the training problem (its model built by ``model.factory``).

    Returns:
        The trainer.

    Raises:
        BadInputError: the model is not a factory's module.
    """
    mech = config.mechanism
    if not isinstance(problem.model, ModuleModel):
        raise BadInputError("user training needs model.factory (the module it trains)", FIELD)
    scale = 1.0 if mech.loss_reduction == "sum" else mech.sample_rate * problem.n
    return UserTrainer(load_training(mech.training), problem.model, problem.x.cpu(), problem.y.cpu(),
                       mech.clip_norm, config.audit.canary_norm_factor, scale, problem.initial_params,
                       mech.sample_rate, config.audit.trial_timeout)


def train_user_trials(trainer: UserTrainer, seed: int, indices: torch.Tensor, canaries: Canaries,
                      record_iterates: bool, on_trial: Callable[[int], object] | None = None
                      ) -> Iterator[tuple[torch.Tensor, View]]:
    """One call of the user's function per trial (trial ``indices[i]`` with canary row i), yielded in chunks as
    the engine's trials are; ``on_trial(1)`` after each (a phase's progress). Gradient canaries carry their sign in
    ``private_gradient[:, 0]`` (0: absent).

    Args:
        trainer: the user's trainer.
        seed: the audit's seed.
        indices: the trials' model indices, shape (R,).
        canaries: one canary row per trial.
        record_iterates: gradient canaries (record the head's release) rather than record canaries.
        on_trial: called with 1 after each trial.

    Yields:
        ``(indices, view)`` per chunk of trials: the chunk's indices and the trained parameters (with the releases,
        shape (R, T, 1 + NOISE_COORDINATES), for gradient canaries).

    Raises:
        BadInputError: the function fails on a trial, trials made different numbers of steps, or the gradient canary
            never reached the module in 8 or more trials that held it.
    """
    calls = trainer.calls(len(indices), on_trial)
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
                with trainer.each_training(seed_r):
                    outcome = trainer.run(seed_r, None, None, sign, calls)
                marked += outcome.marked
            else:
                inside = bool(canaries.in_private[r])
                with trainer.each_training(seed_r):
                    outcome = trainer.run(seed_r, canaries.x[r] if inside else None, int(canaries.y[r]), None, calls)
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

