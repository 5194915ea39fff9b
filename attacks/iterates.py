"""``iterates`` threat model (SPEC 3): the tight audit with a gradient canary.

The canary's private-loss gradient is ``s·K·C·e_priv`` (raw norm K·C above the clip norm, s ∈ {−1, 0, +1}
set by the candidate: its private value, or 0 when the record is absent as in the simulator game) and its
public-loss gradient is along a second coordinate ``e_pub``; no real record has a gradient on either
coordinate. A correct mechanism releases, per step, ``y_t = (noisy private sum)·e_priv / C``, distributed
as ``(1 − p) N(0, z²) + p N(s, z²)``.

* :class:`IteratesAttack` scores each candidate by the exact log-likelihood of all steps under that
  Poisson mixture — the Bayes-optimal test against a correct mechanism. It also reads the public channel:
  a correct public gradient has no component along ``e_priv``, so any component there reveals s.
* :class:`PublicAlignedIteratesAttack` uses only the steps at which the canary was in the public batch
  and treats them as unsubsampled Gaussian observations N(s, z²): powerless against Algorithm 1, whose
  public batch is independent of the private one, but decisive against the shared-batch variant
  (Proposition 3), where those are exactly the steps at which the canary was privately sampled.
"""

from __future__ import annotations

import math

import torch

from attacks.base import Attack, AttackOutput, View

PUBLIC_LEAK_WEIGHT = 1e3


def mixture_log_likelihood(y: torch.Tensor, sign: torch.Tensor, p: float, z: float) -> torch.Tensor:
    """``log[(1−p)φ(y/z) + p φ((y−s)/z)]`` up to a constant, for y ``[R, T]`` and signs ``[V]`` → ``[R, T, V]``."""
    y = y[..., None]
    base = -0.5 * (y / z) ** 2
    shifted = -0.5 * ((y - sign) / z) ** 2
    if p >= 1.0:
        return shifted.expand(*y.shape[:-1], sign.shape[0])
    return torch.logaddexp(base + math.log1p(-p), shifted + math.log(p))


class _GradientCanaryAttack(Attack):
    needs_gradient_canary = True

    def _observations(self, view: View) -> torch.Tensor:
        k = self.knowledge
        assert view.noisy_private_sums is not None and k.canary_private_coordinate is not None
        return view.noisy_private_sums[:, :, k.canary_private_coordinate].double() / k.clip_norm

    def _signs(self) -> torch.Tensor:
        assert self.knowledge.candidate_signs is not None
        return self.knowledge.candidate_signs.double()

    def _with_prior(self, log_likelihood: torch.Tensor) -> AttackOutput:
        return AttackOutput(log_likelihood + torch.log(self.knowledge.prior.double().clamp_min(1e-300))[None, :])


class IteratesAttack(_GradientCanaryAttack):
    name = "iterates"
    threat_model = "iterates"

    def infer(self, view: View) -> AttackOutput:
        k, signs = self.knowledge, self._signs()
        y = self._observations(view)
        scores = mixture_log_likelihood(y, signs, k.sample_rate, k.noise_multiplier).sum(dim=1)
        if view.public_gradients is not None:
            leak = torch.sign(view.public_gradients[:, :, k.canary_private_coordinate].double()).sum(dim=1)
            scores = scores + PUBLIC_LEAK_WEIGHT * leak[:, None] * signs[None, :]
        return self._with_prior(scores)


class PublicAlignedIteratesAttack(_GradientCanaryAttack):
    name = "iterates_public_aligned"
    threat_model = "iterates"

    def infer(self, view: View) -> AttackOutput:
        k, signs = self.knowledge, self._signs()
        assert view.canary_public_counts is not None
        y = self._observations(view)[..., None]
        present = (view.canary_public_counts > 0).double()[..., None]
        scores = (-0.5 * ((y - signs) / k.noise_multiplier) ** 2 * present).sum(dim=1)
        return self._with_prior(scores)
