"""``iterates`` threat model (docs/games.md): the tight audit with a gradient canary.

The canary's private-loss gradient is ``s·K·C·e_priv`` (raw norm K·C above the clip norm, s ∈ {−1, 0, +1}
set by the candidate: its private value, or 0 when the record is absent as in the simulator game) and its
public-loss gradient is along a second coordinate ``e_pub``; no real record has a gradient on either
coordinate, nor on the further *noise coordinates* of the game. A correct mechanism releases, per step,
``y_t = (noisy private sum)·e_priv / C``, distributed as ``(1 − p) N(0, σ²) + p N(s, σ²)`` with σ = z.

The attacks do not read the claimed z and p (an audit tests them):

* the noise is estimated per trial from the release along the *noise coordinates* (first-layer weights on the
  game's all-zero columns, which carry nothing but the noise), never from the claimed z. With n_{j,t} the
  release on noise coordinate j at step t and m_{−j,t} the mean of the other noise coordinates, the pooled
  leave-one-out coefficient β̂ = Σ_{j,t} n_{j,t} m_{−j,t} / Σ_{j,t} m_{−j,t}² measures the noise that every
  coordinate shares, and σ̂ is the root mean square of n_{j,t} − β̂ m_{−j,t} over all steps and noise
  coordinates, floored at :data:`MIN_NOISE` (so a degenerate release gives finite, very confident scores).
  The attack scores the canary's residuals y_t − β̂ m_t (m_t: the mean of all the noise coordinates) with
  that σ̂. For a correct mechanism (independent noise) β̂ ≈ 0, estimated from the noise coordinates alone,
  so the canary's signal loses no degree of freedom and its noise variance grows by only about β̂²σ²/K (K
  noise coordinates); for a mechanism that adds one draw to every coordinate
  (``randn(1)`` broadcast instead of ``randn(width)``) β̂ = 1, the residuals are the canary's signal
  un-noised and σ̂ falls to the floor;
* the sampling rate is unknown: the likelihood of each candidate is averaged over a log-uniform prior on
  p ∈ [10⁻⁴, 1] (a Bayes factor), so a mechanism that samples at another rate than it claims is still scored
  by a likelihood that allows that rate;
* the signal's unit is the clip norm C the auditor built the canary against (a mechanism that does not clip
  releases K times that: still a large positive contribution, so the statistic keeps its direction).

Whatever remains (the decision threshold and orientation) is fitted on a selection split of the trials by
the game audit (:mod:`fdp_audit.auditing.decision`) and judged on the rest, so the scores are a statistic like
any other: a mis-specified likelihood keeps the false-alarm rate valid, but a poor statistic can lose all its
power against a cheating mechanism. What these estimates cannot see: a mechanism whose noise on the canary's
coordinate differs from its noise on the noise coordinates — e.g. one that adds less noise only on the
coordinates that carry a signal (σ̂ too large) — and noise correlated between coordinates other than through
one component common to all of them.

A canary block (the image games, docs/images.md) gives each of the K candidates its own canary, on its own
coordinate, of which only the secret one is in the private population: candidate v's hypothesis is the mixture
on its coordinate and noise alone on the others', so each candidate is scored by the same statistic on its own
coordinate with sign +1 (the log-likelihood ratio against noise alone, which puts candidates on different
coordinates on one scale), its public channel read on that coordinate too.

* :class:`IteratesAttack`: the marginal log-likelihood of all steps for each candidate's sign. It also
  reads the public channel: a correct public gradient has no component along ``e_priv``, so any component
  there reveals the private value of the record the candidate puts in the public population.
* :class:`PublicAlignedIteratesAttack`: only the steps at which the canary was in the public batch, as
  unsubsampled Gaussian observations N(s, σ²) against N(0, σ²): powerless against Algorithm 1, whose public batch is
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
    """``log[(1−p)φ(y/z) + p φ((y−s)/z)]`` up to a constant (the same for every sign): the log-likelihood of one
    step's release under a Poisson-subsampled Gaussian with rate p (module docstring).

    Args:
        y: the observations, ``[R, T]`` (one for every sign) or ``[R, T, V]`` (one per sign).
        sign: the candidates' signs s ``[V]`` (in units of C).
        p: the sampling rate, in (0, 1]; p = 1 is the unsubsampled ``N(s, z²)``.
        z: the noise scale, a number or one per trial ``[R]``.

    Returns:
        ``[R, T, V]``.
    """
    z = torch.as_tensor(z, dtype=y.dtype)
    z = z[:, None, None] if z.dim() == 1 else z
    y = y[..., None] if y.dim() == 2 else y
    base = -0.5 * (y / z) ** 2
    shifted = -0.5 * ((y - sign) / z) ** 2
    if p >= 1.0:
        return shifted.expand(torch.broadcast_shapes(y.shape, sign.shape))
    return torch.logaddexp(base + math.log1p(-p), shifted + math.log(p))


def marginal_log_likelihood(y: torch.Tensor, sign: torch.Tensor, sigma: torch.Tensor) -> torch.Tensor:
    """The log Bayes factor of each sign against noise alone, ``log E_p[Π_t ((1−p)φ(y_t/σ) + p φ((y_t−s)/σ)) /
    φ(y_t/σ)]`` with p log-uniform on :data:`SAMPLE_RATES` (module docstring). A sign of 0 scores 0.

    Args:
        y: the observations ``[R, T]`` or ``[R, T, V]`` (:func:`mixture_log_likelihood`).
        sign: the candidates' signs ``[V]``.
        sigma: the noise scale σ of every trial ``[R]``.

    Returns:
        ``[R, V]``.
    """
    null = mixture_log_likelihood(y, sign[:1] * 0, 1.0, sigma)  # log φ(y/σ) up to the shared constant
    per_rate = torch.stack([(mixture_log_likelihood(y, sign, float(p), sigma) - null).sum(dim=1)
                            for p in SAMPLE_RATES], dim=-1)  # [R, V, G]
    return torch.logsumexp(per_rate, dim=-1) - math.log(len(SAMPLE_RATES))


class _GradientCanaryAttack(Attack):
    """Scores on the CPU, where the knowledge lives: only the few coordinates the attack reads leave the training
    device, whichever it is."""

    needs_gradient_canary = True
    needs = ("noise_coordinates",)

    def _noise_model(self, view: View) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Per trial: the mean m_t of the noise coordinates ``[R, T]``, the pooled leave-one-out coefficient
        β̂ ``[R]`` of a noise coordinate on the mean of the others, and the scale σ̂ ``[R]`` of what that
        regression leaves, all in units of C."""
        k = self.knowledge
        assert view.noisy_private_sums is not None and k.noise_coordinates is not None
        noise = view.noisy_private_sums[:, :, list(k.noise_coordinates)].cpu().double() / k.clip_norm
        others = (noise.sum(dim=2, keepdim=True) - noise) / max(noise.shape[2] - 1, 1)
        beta = (noise * others).sum(dim=(1, 2)) / others.square().sum(dim=(1, 2)).clamp_min(1e-300)
        left = noise - beta[:, None, None] * others
        return noise.mean(dim=2), beta, left.square().mean(dim=(1, 2)).sqrt().clamp_min(MIN_NOISE)

    def _coordinates(self) -> list[int]:
        """Each candidate's private coordinate: its own in a canary block, otherwise the one canary's."""
        k = self.knowledge
        if k.candidate_coordinates is not None:
            return list(k.candidate_coordinates)
        assert k.canary_private_coordinate is not None
        return [k.canary_private_coordinate] * len(self._signs())

    def _observations(self, view: View) -> tuple[torch.Tensor, torch.Tensor]:
        """Each candidate's per-step observations less the noise they share with every coordinate,
        ``y_t − β̂ m_t`` ``[R, T, V]``, and their noise scale σ̂ ``[R]`` (see :meth:`_noise_model`)."""
        k = self.knowledge
        assert view.noisy_private_sums is not None
        y = view.noisy_private_sums[:, :, self._coordinates()].cpu().double() / k.clip_norm
        mean, beta, sigma = self._noise_model(view)
        return y - beta[:, None, None] * mean[..., None], sigma

    def _public_presence(self, view: View, trials: int, steps: int) -> torch.Tensor | None:
        """``[R, T, V]``: whether each candidate's canary was in each step's public batch (its public
        coordinate moved, in a canary block; the release's count of the one canary otherwise); None when the
        release has no public batches."""
        k = self.knowledge
        if k.candidate_public_coordinates is not None and view.public_gradients is not None:
            return (view.public_gradients[:, :, list(k.candidate_public_coordinates)].cpu() != 0).double()
        if view.canary_public_counts is None:
            return None
        return (view.canary_public_counts.cpu() > 0).double()[..., None].expand(trials, steps, len(self._signs()))

    def _signs(self) -> torch.Tensor:
        k = self.knowledge
        if k.candidate_coordinates is not None:  # a canary block: each candidate's canary, present or not
            return torch.ones(len(k.candidate_coordinates), dtype=torch.float64)
        assert k.candidate_signs is not None
        return k.candidate_signs.double()

    def _with_prior(self, log_likelihood: torch.Tensor) -> AttackOutput:
        return AttackOutput(log_likelihood + torch.log(self.knowledge.prior.double().clamp_min(1e-300))[None, :])


class IteratesAttack(_GradientCanaryAttack):
    """The ``iterates`` attack (every noisy update; module docstring, docs/games.md): infers the gradient canary's
    candidate from each candidate's marginal log-likelihood of the released updates along its private coordinate,
    the mixture ``(1 − p) N(0, σ̂²) + p N(s, σ̂²)`` averaged over a log-uniform prior on p, with σ̂ estimated from the
    noise coordinates, plus a public-gradient term and the log prior."""

    name = "iterates"
    title = "likelihood ratio of the canary on the released updates"
    threat_model = "iterates"

    def infer(self, view: View) -> AttackOutput:
        """Each candidate's marginal log-likelihood of every step (:func:`marginal_log_likelihood`, with β̂ and σ̂
        estimated from the noise coordinates), plus :data:`PUBLIC_LEAK_WEIGHT` times the sum over steps of the sign
        of the public gradient along the candidate's private coordinate times its public sign, plus the log prior
        (module docstring).

        Args:
            view: the released noisy private sums ``[R, T, P]`` and, when the release has them, the public gradients
                ``[R, T, P]``.

        Returns:
            Scores ``[R, V]`` (float64, on the CPU).
        """
        k, signs = self.knowledge, self._signs()
        y, sigma = self._observations(view)
        scores = marginal_log_likelihood(y, signs, sigma)
        if view.public_gradients is not None:
            public_signs = signs if k.candidate_public_signs is None else k.candidate_public_signs.double()
            leak = torch.sign(view.public_gradients[:, :, self._coordinates()].cpu().double()).sum(dim=1)
            scores = scores + PUBLIC_LEAK_WEIGHT * leak * public_signs[None, :]
        return self._with_prior(scores)


class PublicAlignedIteratesAttack(_GradientCanaryAttack):
    """The ``iterates_public_aligned`` attack (every noisy update; module docstring, docs/games.md): infers the
    gradient canary's candidate from the Gaussian log-likelihood ratio ``Σ_t present_t (y_t s − s²/2) / σ̂²`` of
    ``N(s, σ̂²)`` against ``N(0, σ̂²)`` over the steps at which its canary was in the public batch, plus the log
    prior; decisive against the shared-batch variant (Proposition 3), whose private batch is its public one."""

    name = "iterates_public_aligned"
    title = "likelihood ratio on the released updates, at the canary's public steps"
    threat_model = "iterates"

    def infer(self, view: View) -> AttackOutput:
        """Each candidate's Gaussian log-likelihood ratio ``Σ_t present_t (y_t s − s²/2) / σ̂²`` of ``N(s, σ̂²)``
        against ``N(0, σ̂²)`` over the steps at which its canary was in the public batch, plus the log prior (module
        docstring); the log prior alone when the release has no public batches.

        Args:
            view: the released noisy private sums ``[R, T, P]``, and the public gradients or the canary's public
                counts ``[R, T]``.

        Returns:
            Scores ``[R, V]`` (float64, on the CPU).
        """
        signs = self._signs()
        y, sigma = self._observations(view)
        present = self._public_presence(view, *y.shape[:2])
        if present is None:  # a release without public batches (DP-SGD): no step to align on
            return self._with_prior(torch.zeros(y.shape[0], signs.shape[0], dtype=y.dtype))
        # log N(s, σ²) / N(0, σ²) of each aligned step: candidates on different coordinates compare on one scale
        scores = ((y * signs - 0.5 * signs ** 2) / sigma[:, None, None] ** 2 * present).sum(dim=1)
        return self._with_prior(scores)
