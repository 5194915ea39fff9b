"""Third-party mechanisms (docs/games.md): the game audit runs a user's training function
unchanged and judges it against the privacy it claims.

A config names the function and states the claim::

    mechanism:
      third_party: my_package.training:train      # or path/to/file.py:train (relative to the config)
      name: dp_sgd            # the claim: accounted as this mechanism (dp_sgd, fdp_sgd, fdp_dpsgd, public_only)
      noise_multiplier: 1.0   # with these claimed z (or target_epsilon), p, T and clip norm C
      sample_rate: 0.01
      steps: 1000
      clip_norm: 1.0

The function has the signature of the built-in mechanisms (what :func:`fdp_audit.training.engine.train_models`
receives, for one model)::

    def train(problem: TrainingProblem, seed: int, canary: Canaries) -> Params | MechanismOutput

* ``problem``: the data set S (``problem.x``, ``problem.y``, encoded), Ψ (``problem.public_map``), the
  architecture (``problem.model``: ``forward(params, x)``, ``shapes()``), the public loss, and the claimed
  settings (``problem.hyper``: z, p, T, C, public batch size, optimiser). ``problem.recipe`` describes the
  built-in mechanism named as the claim; a third-party function need not follow it. Training must start from
  ``problem.initial_params`` when it is not None (the membership game's worst-case starting point: DP-SGD's
  guarantee holds from any start fixed before the data are seen); a function that ignores it is audited all
  the same, less tightly.
* ``seed``: a fresh integer per trial; all randomness must come from it (trials must be independent).
* ``canary``: one extra record (every tensor has a leading dimension of 1) that the function must add to its
  data set — to the private (Poisson-sampled) population when ``canary.in_private[0]``, to the public
  population when ``canary.in_public[0]``. For the gradient-canary games (``distinguishing``, ``simulator``)
  it also carries ``private_gradient`` and ``public_gradient`` (``[1, P]``, P parameters in the order of
  ``problem.model.shapes()``): the canary's raw private-loss gradient and public-loss gradient, to be used
  in place of computing them (the audit hook of docs/games.md; clip and noise them as any other record's).
* Return the final parameters (a dict name → tensor of ``problem.model.shapes()``, no model dimension) —
  enough for the attribute game — or a :class:`MechanismOutput` that also releases the per-step noisy private
  sums and public gradients, which the ``iterates`` attacks of the gradient-canary games read.

The audit calls the function once per trial in a Python loop (opaque code cannot be batched); everything
else (games, attacks, statistics, verdict) is the built-in audit's.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import torch

from attacks import View
from fdp_audit.errors import BadInputError
from fdp_audit.threads import threads_for
from fdp_audit.training.engine import Canaries, TrainingProblem, step_work
from fdp_audit.training.models import Params
from fdp_audit.user_calls import UserCalls, copies
from fdp_audit.user_code import load_function

FIELD = "mechanism.third_party"
TRIALS_PER_CHUNK = 32  # trials whose outputs are stacked before the attacks score them


@dataclass(frozen=True)
class MechanismOutput:
    """What a third-party mechanism releases: the final model and, optionally, its per-step updates."""

    params: Params  # final model, no model dimension
    noisy_private_sums: torch.Tensor | None = None  # [T, P]: Σ clipped private gradients + noise, per step
    public_gradients: torch.Tensor | None = None  # [T, P]: the public-loss gradient applied at each step
    canary_public_counts: torch.Tensor | None = None  # [T]: times the canary was in each public batch

    @property
    def has_iterates(self) -> bool:
        return self.noisy_private_sums is not None


ThirdPartyMechanism = Callable[[TrainingProblem, int, Canaries], "Params | MechanismOutput"]


def load_mechanism(spec: str) -> ThirdPartyMechanism:
    """Resolve ``module:function`` (importable) or ``file.py:function`` (a path) to the function.

    Args:
        spec: ``module:function`` or ``file.py:function``.

    Returns:
        The function, which takes ``(problem, seed, canary)``.

    Raises:
        BadInputError: the spec does not resolve, or the function cannot take those three arguments (naming
            ``mechanism.third_party``).
    """
    function = load_function(spec, FIELD)
    try:
        inspect.signature(function).bind(None, 0, None)
    except TypeError as err:
        raise BadInputError(f"{function.__name__} must take (problem, seed, canary): {err}", FIELD) from err
    return function


def mechanism_calls(total: int, timeout: float | None = None, on_trial: Callable[[int], object] | None = None
                    ) -> UserCalls:
    """The calls of a phase of trials of a third-party mechanism.

    Args:
        total: the phase's trials.
        timeout: ``audit.trial_timeout`` in seconds, or None.
        on_trial: called with 1 after each trial (a phase's progress).

    Returns:
        The calls (:class:`fdp_audit.user_calls.UserCalls`).
    """
    return UserCalls(FIELD, "the mechanism", total, timeout, on_trial)


def trial_seed(seed: int, index: int) -> int:
    """The seed handed to trial ``index``: independent of every other trial's (a SeedSequence draw).

    Args:
        seed: the audit's seed.
        index: the trial's model index.

    Returns:
        A seed in [0, 2⁶³).
    """
    return int(np.random.SeedSequence([seed, index, 0x3D9A27]).generate_state(1, dtype=np.uint64)[0] >> 1)


def _output(value: Params | MechanismOutput, problem: TrainingProblem, record_iterates: bool) -> MechanismOutput:
    """Check one trial's return value against the model and the games' needs."""
    output = value if isinstance(value, MechanismOutput) else MechanismOutput(value)
    shapes = problem.model.shapes()
    params = output.params
    if not isinstance(params, dict) or set(params) != set(shapes):
        raise BadInputError(f"must return parameters named {sorted(shapes)}", FIELD)
    for key, shape in shapes.items():
        _check_tensor(params[key], f"parameter {key}", shape)
    if record_iterates:
        if not output.has_iterates or output.public_gradients is None:
            raise BadInputError("the gradient-canary games need the per-step noisy private sums and public "
                                "gradients: return a MechanismOutput with them, or audit only the attribute "
                                "game", FIELD)
        width = problem.model.n_parameters
        for key in ("noisy_private_sums", "public_gradients"):
            _check_tensor(getattr(output, key), key, (None, width))
        if output.canary_public_counts is not None:
            _check_tensor(output.canary_public_counts, "canary_public_counts", (output.noisy_private_sums.shape[0],))
    return output


def _check_tensor(value: object, what: str, shape: tuple[int | None, ...]) -> None:
    """A released tensor of the expected shape (None: any length) with finite entries: NaN scores would make
    every attack guess the first candidate, and a broken mechanism could pass silently."""
    if not isinstance(value, torch.Tensor):
        raise BadInputError(f"returned {what} is a {type(value).__name__}, not a tensor", FIELD)
    if value.dim() != len(shape) or any(want is not None and got != want for got, want in zip(value.shape, shape,
                                                                                                strict=True)):
        expected = "[" + ", ".join("steps" if s is None else str(s) for s in shape) + "]"
        raise BadInputError(f"returned {what} of shape {tuple(value.shape)}, expected {expected}", FIELD)
    if not torch.isfinite(value).all():
        raise BadInputError(f"returned {what} has non-finite entries", FIELD)


def _stack(outputs: list[MechanismOutput], record_iterates: bool) -> View:
    params = {k: torch.stack([o.params[k].detach().float().cpu() for o in outputs]) for k in outputs[0].params}
    if not record_iterates:
        return View(params)
    steps = {o.noisy_private_sums.shape[0] for o in outputs} | {o.public_gradients.shape[0] for o in outputs}
    if len(steps) != 1:
        raise BadInputError(f"trials released different numbers of steps {sorted(steps)}", FIELD)
    (t,) = steps
    counts = [torch.zeros(t) if o.canary_public_counts is None else o.canary_public_counts.detach().float().cpu()
              for o in outputs]
    return View(params, torch.stack([o.noisy_private_sums.detach().float().cpu() for o in outputs]),
                torch.stack([o.public_gradients.detach().float().cpu() for o in outputs]), torch.stack(counts))


def train_third_party(mechanism: ThirdPartyMechanism, problem: TrainingProblem, seed: int, indices: torch.Tensor,
                      canaries: Canaries, record_iterates: bool, calls: UserCalls | None = None
                      ) -> Iterator[tuple[torch.Tensor, View]]:
    """Run the mechanism once per trial (trial ``indices[i]`` with canary row i) and yield what the attacks
    see, chunk by chunk, as the batched engine's trials are yielded. Each call gets copies of the problem and the
    canary (:func:`fdp_audit.user_calls.copies`) and is made by ``calls`` (default: :func:`mechanism_calls`):
    whatever it raises, or a ``sys.exit`` (even with status 0), is bad input naming its error, so that no trial of
    a run whose mechanism failed may become a result.

    Args:
        mechanism: the third-party mechanism.
        problem: the training problem.
        seed: the audit's seed.
        indices: the trials' model indices, shape (R,).
        canaries: one canary row per trial.
        record_iterates: require and yield the released per-step sums (gradient-canary games).
        calls: the phase's calls of the mechanism.

    Yields:
        ``(indices, view)`` per chunk of trials: the chunk's indices and what the attacks see.

    Raises:
        BadInputError: the mechanism fails, or returns parameters or releases of the wrong names, shapes or
            non-finite values, or trials released different numbers of steps.
    """
    calls = calls or mechanism_calls(len(indices))
    for start in range(0, len(indices), TRIALS_PER_CHUNK):
        rows = torch.arange(start, min(start + TRIALS_PER_CHUNK, len(indices)))
        outputs = []
        for r in rows:
            trial = trial_seed(seed, int(indices[r]))
            with threads_for(step_work(problem)):  # the thread count the engine would choose for one model's step
                value = calls.call(mechanism, copies((problem, trial, canaries.take(r[None]))), trial)
            outputs.append(_output(value, problem, record_iterates))
        yield indices[rows], _stack(outputs, record_iterates)
