"""``iterates`` threat model (SPEC 3): the tight audit with a gradient canary.

The canary's private-loss gradient is ``s·K·C·e_priv`` (raw norm K·C above the clip norm, s ∈ {−1, 0, +1}
set by the candidate: its private value, or 0 when the record is absent as in the simulator game) and its
public-loss gradient is along a second coordinate ``e_pub``; no real record has a gradient on either
coordinate, nor on the further *noise coordinates* of the game. A correct mechanism releases, per step,
``y_t = (noisy private sum)·e_priv / C``, distributed as ``(1 − p) N(0, σ²) + p N(s, σ²)`` with σ = z.

The attacks do not read the claimed z and p (an audit tests them):

* the noise scale σ is estimated per trial from the release itself: the root mean square of the noisy
  private sums along the noise coordinates, over all steps (T × (number of noise coordinates) values that a
  correct mechanism makes i.i.d. N(0, σ²)). A mechanism that adds more noise there than along e_priv only
  makes the estimate too large, which costs power, never soundness;
* the sampling rate is unknown: the likelihood of each candidate is averaged over a log-uniform prior on
  p ∈ [10⁻⁴, 1] (a Bayes factor), so a mechanism that samples at another rate than it claims is still scored
  by a likelihood that allows that rate;
* the signal's unit is the clip norm C the auditor built the canary against (a mechanism that does not clip
  releases K times that: still a large positive contribution, so the statistic keeps its direction).

Whatever remains (the decision threshold and orientation) is fitted on a selection split of the trials by
the game audit (:mod:`fdp_audit.audit.decision`) and judged on the rest, so the scores are a statistic like
any other and a mis-specified likelihood costs power, not validity.

* :class:`IteratesAttack`: the marginal log-likelihood of all steps for each candidate's sign. It also
  reads the public channel: a correct public gradient has no component along ``e_priv``, so any component
  there reveals the private value of the record the candidate puts in the public population.
* :class:`PublicAlignedIteratesAttack`: only the steps at which the canary was in the public batch, as
  unsubsampled Gaussian observations N(s, σ²): powerless against Algorithm 1, whose public batch is
  independent of the private one, but decisive against the shared-batch variant (Proposition 3), where those
  are exactly the steps at which the canary was privately sampled.
"""

from __future__ import annotations

import math

import torch

from attacks.base import Attack, AttackOutput, View

PUBLIC_LEAK_WEIGHT = 1e3
SAMPLE_RATES = torch.logspace(-4, 0, 41, dtype=torch.float64)  # the log-uniform prior's support
MIN_NOISE = 1e-6  # in units of C: a noiseless release still gives finite scores


def mixture_log_likelihood(y: torch.Tensor, sign: torch.Tensor, p: float, z: float | torch.Tensor) -> torch.Tensor:
    """``log[(1−p)φ(y/z) + p φ((y−s)/z)]`` up to a constant (the same for every sign), for y ``[R, T]``, signs
    ``[V]`` and a noise scale z (a number or one per trial, ``[R]``) → ``[R, T, V]``."""
    z = torch.as_tensor(z, dtype=y.dtype)
    z = z[:, None, None] if z.dim() == 1 else z
    y = y[..., None]
    base = -0.5 * (y / z) ** 2
    shifted = -0.5 * ((y - sign) / z) ** 2
    if p >= 1.0:
        return shifted.expand(*y.shape[:-1], sign.shape[0])
    return torch.logaddexp(base + math.log1p(-p), shifted + math.log(p))


def marginal_log_likelihood(y: torch.Tensor, sign: torch.Tensor, sigma: torch.Tensor) -> torch.Tensor:
    """``log E_p[Π_t ((1−p)φ(y_t/σ) + p φ((y_t−s)/σ)) / φ(y_t/σ)]`` with p log-uniform on
    :data:`SAMPLE_RATES`: ``[R, V]`` for y ``[R, T]``, signs ``[V]`` and σ ``[R]``. A sign of 0 scores 0."""
    null = mixture_log_likelihood(y, sign[:1] * 0, 1.0, sigma)  # log φ(y/σ) up to the shared constant
    per_rate = torch.stack([(mixture_log_likelihood(y, sign, float(p), sigma) - null).sum(dim=1)
                            for p in SAMPLE_RATES], dim=-1)  # [R, V, G]
    return torch.logsumexp(per_rate, dim=-1) - math.log(len(SAMPLE_RATES))


class _GradientCanaryAttack(Attack):
    needs_gradient_canary = True

    def _observations(self, view: View) -> torch.Tensor:
        k = self.knowledge
        assert view.noisy_private_sums is not None and k.canary_private_coordinate is not None
        return view.noisy_private_sums[:, :, k.canary_private_coordinate].double() / k.clip_norm

    def _noise_scale(self, view: View) -> torch.Tensor:
        """σ per trial ``[R]`` in units of C, from the release along the noise coordinates."""
        k = self.knowledge
        k.require(self.name, "noise_coordinates")
        assert view.noisy_private_sums is not None
        noise = view.noisy_private_sums[:, :, list(k.noise_coordinates)].double() / k.clip_norm
        return noise.square().mean(dim=(1, 2)).sqrt().clamp_min(MIN_NOISE)

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
        scores = marginal_log_likelihood(self._observations(view), signs, self._noise_scale(view))
        if view.public_gradients is not None:
            public_signs = signs if k.candidate_public_signs is None else k.candidate_public_signs.double()
            leak = torch.sign(view.public_gradients[:, :, k.canary_private_coordinate].double()).sum(dim=1)
            scores = scores + PUBLIC_LEAK_WEIGHT * leak[:, None] * public_signs[None, :]
        return self._with_prior(scores)


class PublicAlignedIteratesAttack(_GradientCanaryAttack):
    name = "iterates_public_aligned"
    threat_model = "iterates"

    def infer(self, view: View) -> AttackOutput:
        signs = self._signs()
        assert view.canary_public_counts is not None
        y = self._observations(view)[..., None]
        sigma = self._noise_scale(view)[:, None, None]
        present = (view.canary_public_counts > 0).double()[..., None]
        scores = (-0.5 * ((y - signs) / sigma) ** 2 * present).sum(dim=1)
        return self._with_prior(scores)
