"""The ``fdp-audit train`` progress (docs/files.md): step, current training loss and the privacy spent so far, as a
bar on a terminal and as plain lines in a log (:class:`fdp_audit.phases.Phase`).

ε spent after t private steps is the ε(δ) of the same mechanism run for t steps. Accounting every step
would cost more than training, so ε is computed on a grid of :data:`EPSILON_GRID_POINTS` step counts
``t_k = k·⌈T/G⌉`` by composing one subsampled-Gaussian step PLD incrementally (one PLD convolution per
grid point, about a second in all), the last point being the accountant's own ε(T). Between grid points
the bar shows ``ε≤`` the value at the next grid point: ε(t) is non-decreasing in t, so that is an upper
bound on what has been spent.

The loss shown is the mean full loss ℓ on a fixed subsample of the training set, recomputed every
:data:`LOSS_EVERY_FRACTION` of the run; it is a diagnostic for the operator, not part of any release.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass

import torch

from fdp_audit.accounting.pld import Segment, gaussian_step_pld, resolve_discretization
from fdp_audit.config import MechanismConfig
from fdp_audit.errors import BadInputError
from fdp_audit.mechanisms import MECHANISMS
from fdp_audit.phases import Phase
from fdp_audit.training.engine import TrainingProblem, predict_logits
from fdp_audit.training.models import Params, example_loss

EPSILON_GRID_POINTS = 8
LOSS_SUBSAMPLE = 1024
LOSS_EVERY_FRACTION = 0.02


@dataclass(frozen=True)
class EpsilonCurve:
    """ε(δ) after ``steps[k]`` private steps is ``epsilons[k]`` (steps increasing, the last one T)."""

    steps: tuple[int, ...]
    epsilons: tuple[float, ...]

    def upper_bound(self, done: int) -> float:
        """An upper bound on ε after ``done`` private steps: ε at the first grid point >= done (0 at 0); ε(t) is
        non-decreasing in t.

        Args:
            done: private steps taken.

        Returns:
            The bound on ε(δ) spent.
        """
        if done <= 0:
            return 0.0
        return self.epsilons[min(bisect.bisect_left(self.steps, done), len(self.steps) - 1)]


def epsilon_curve(mech: MechanismConfig, noise_multiplier: float, final_epsilon: float,
                  points: int = EPSILON_GRID_POINTS) -> EpsilonCurve:
    """ε(δ) of the mechanism (as it claims: faulty variants are accounted like the mechanism they claim to
    be) after a grid of step counts, ending with ``final_epsilon``, the accountant's ε(T) (from
    :class:`fdp_audit.claim.Claim`). Without private steps (nonprivate, public_only) ε does
    not grow: the curve is the constant ``final_epsilon``.

    Args:
        mech: the configuration's ``mechanism`` section (T, p, δ).
        noise_multiplier: the claimed z.
        final_epsilon: the accountant's ε(T).
        points: grid points G; they are ``t_k = k·⌈T/G⌉`` below T, then T.

    Returns:
        The curve.
    """
    total = mech.steps
    if not MECHANISMS[mech.name].recipe.private:
        return EpsilonCurve((total,), (final_epsilon,))
    stride = math.ceil(total / points)
    grid = list(range(stride, total, stride))
    # The accountant's loss grid for the full run, so that the points agree with its ε(T).
    discretization = resolve_discretization((Segment(noise_multiplier, mech.sample_rate, total),))
    epsilons = []
    if grid:
        block = gaussian_step_pld(noise_multiplier, mech.sample_rate, discretization=discretization)
        block = block.self_compose(stride)
        composed = block
        for k in range(len(grid)):
            if k:
                composed = composed.compose(block)
            epsilons.append(float(composed.get_epsilon_for_delta(mech.delta)))
    return EpsilonCurve((*grid, total), (*epsilons, final_epsilon))


class TrainingProgress:
    """Progress over every optimiser step of one model (public pre-training first), used as the engine's
    ``on_step`` hook."""

    def __init__(self, problem: TrainingProblem, name: str, curve: EpsilonCurve):
        self.problem = problem
        self.pretrain = problem.hyper.public_pretrain_steps
        self.curve = curve
        generator = torch.Generator().manual_seed(0)  # a fixed subsample: successive losses are comparable
        rows = torch.randperm(problem.n, generator=generator)[:LOSS_SUBSAMPLE]
        self.x, self.y = problem.x[rows], problem.y[rows]
        total = self.pretrain + problem.hyper.steps
        self.loss_every = max(1, int(total * LOSS_EVERY_FRACTION))
        self.phase = Phase(f"training {name}", total, "step")
        self.loss = math.nan

    def __call__(self, done: int, params: Params) -> None:
        if done == 1 or done % self.loss_every == 0 or done == self.phase.total:
            self.loss = self.training_loss(params)
            if not math.isfinite(self.loss):  # stop now rather than train on to the end-of-run check
                self.phase.finish(succeeded=False)
                raise BadInputError(f"training diverged: the training loss is {self.loss} after {done} steps; lower "
                                    f"the learning rate ({self.problem.hyper.optimizer.lr:g})",
                                    "mechanism.optimizer.lr")
        self.phase.update(1, f"loss {self.loss:.4f}, ε ≤ {self.epsilon(done):.3g} spent")

    def epsilon(self, done: int) -> float:
        """The bound on ε spent after ``done`` optimiser steps (public pre-training steps spend none).

        Args:
            done: optimiser steps taken, pre-training included.

        Returns:
            The bound (:meth:`EpsilonCurve.upper_bound`).
        """
        return self.curve.upper_bound(done - self.pretrain)

    def training_loss(self, params: Params) -> float:
        """Mean ℓ of model 0 on the fixed subsample.

        Args:
            params: the stacked parameters by name, ``[R, *shape]`` (model 0 is read).

        Returns:
            The mean loss.
        """
        with torch.no_grad():
            model0 = {k: v[:1].to(self.x.device) for k, v in params.items()}
            logits = predict_logits(self.problem.model, model0, self.x)[0]
            return float(example_loss(logits, self.y).mean())

    def close(self, succeeded: bool = True) -> None:
        """End the bar.

        Args:
            succeeded: whether training finished (False marks the phase as failed).
        """
        self.phase.finish(succeeded)
