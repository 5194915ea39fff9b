"""Image games (docs/images.md): the protected part of a canary image is one of K known candidates sharing its
public image, so Ball = 1/K (after Hayes, Mahloujifar & Balle, NeurIPS 2023, "Bounding Training Data
Reconstruction in DP-SGD"), and an attack's success is judged against Theorem 4's ``1 − f(1/K)``.

* **Gradient canaries** (:func:`play_gradient_canaries`, threat model ``iterates``): the K candidates are K
  gradient canaries on a canary block of the CNN (:class:`~fdp_audit.training.engine.CanaryBlock`, parameters the
  forward pass never reads): candidate k's private gradient is ``a·e_k`` (raw norm a = factor·C above the clip
  norm) and only the secret candidate is in the private population; all K are in the public population with the
  same public gradient, as K images with one public image are. A correct mechanism releases, per step, along
  ``e_k``: ``(1 − p) N(0, σ²) + p N(C, σ²)`` for the secret and ``N(0, σ²)`` for the others. The likelihood-ratio
  attack (:func:`iterates_scores`) scores each candidate by the marginal log-likelihood of its coordinate (σ
  estimated from the block's noise-only coordinates, p integrated over a log-uniform prior — neither read from the
  claim, as in :mod:`attacks.iterates`), plus the public channel: a public gradient along ``e_k`` (a public loss
  that reads the protected part) or public batches that follow the private ones (Proposition 3's shared batch)
  name the secret. Its Bayes-optimal counterpart knows p and σ (:func:`bayes_optimal_success`, Monte Carlo).
* **Record canaries** (:func:`play_record_canaries`): the canary is a real image, ``x_k = x − P x + P r_k`` with
  P the Ψ map's protected projection (the same public image for every k), inserted as an ordinary record. Final-
  model attacks score the candidates from the trained weights: ``loss`` (−ℓ(θ; x_k), black box) and the informed
  gradient attack of :mod:`attacks.informed` (white box, knowing the other records).

Every trial's success is the argmax guess being the secret (no threshold is fitted), so the success rate over all
trials is tested against the limit with an exact Clopper–Pearson bound.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from attacks.base import Knowledge, View
from attacks.informed import InformedGradientAttack
from attacks.iterates import MIN_NOISE, marginal_log_likelihood
from fdp_audit.accounting.mechanism import MechanismAccountant
from fdp_audit.audit.stats import clopper_pearson
from fdp_audit.data.image_psi import ImageMap
from fdp_audit.training import streams
from fdp_audit.training.engine import BLOCK_KEY, Canaries, CanaryBlock, TrainingProblem, train_models
from fdp_audit.training.models import example_loss

NOISE_COORDINATES = 32
PUBLIC_LEAK_WEIGHT = 1e3


def candidate_images(psi: ImageMap, base: torch.Tensor, count: int, scale: float,
                     generator: torch.Generator) -> torch.Tensor:
    """``count`` images ``[count, H·W]`` with ``base``'s public image and protected parts ``P z_k``, z_k ~ N(0, s²I)."""
    return psi.neighbours(base - psi.protected_part(base), count, scale, generator)


def draw_secrets(seed: int, indices: np.ndarray, k: int) -> np.ndarray:
    """One secret per trial, uniform on {0, …, k − 1}, from the GAME stream of the trial's model index."""
    u = streams.uniform(streams.model_keys(seed, torch.as_tensor(indices)), 0, streams.Stream.GAME, 1)[:, 0]
    return np.minimum((u.double().numpy() * k).astype(np.int64), k - 1)


@dataclass(frozen=True)
class GameOutcome:
    """One attack in one game: successes over trials, the limit it is judged against and the verdict."""

    game: str
    attack: str
    candidates: int
    trials: int
    successes: int
    limit: float
    alpha: float

    @property
    def rate(self) -> float:
        return self.successes / self.trials

    @property
    def interval(self) -> tuple[float, float]:
        return clopper_pearson(self.successes, self.trials, 2 * self.alpha)

    @property
    def violation(self) -> bool:
        """The one-sided 1 − α lower confidence bound of the success rate lies above the limit."""
        return self.interval[0] > self.limit

    def row(self) -> dict[str, Any]:
        low, high = self.interval
        return {"game": self.game, "attack": self.attack, "K": self.candidates, "trials": self.trials,
                "successes": self.successes, "rate": self.rate, "lower": low, "upper": high,
                "ball": 1 / self.candidates, "limit": self.limit,
                "verdict": "VIOLATION" if self.violation else "PASS"}


def theorem4_limit(accountant: MechanismAccountant, k: int) -> float:
    """Theorem 4 at Ball = 1/K: ``1 − f(1/K)`` with the claimed (symmetric, pessimistic) trade-off curve."""
    return float(accountant.bound(1.0 / k))


# -- gradient canaries ---------------------------------------------------------------------------------------


def gradient_canary_block(secrets: np.ndarray, k: int, magnitude: float) -> CanaryBlock:
    """K block canaries per trial: private value ``magnitude`` on the secret's coordinate only, the same public
    value on every candidate's, :data:`NOISE_COORDINATES` noise-only coordinates."""
    secret = torch.as_tensor(secrets)
    present = torch.nn.functional.one_hot(secret, k).bool()
    return CanaryBlock(magnitude * present.float(), torch.full((len(secrets), k), magnitude), present,
                       NOISE_COORDINATES)


def iterates_scores(noisy: torch.Tensor, public: torch.Tensor, k: int, clip_norm: float) -> torch.Tensor:
    """Scores ``[R, K]`` from the block's released per-step values: ``noisy`` private sums and ``public``
    gradients ``[R, T, 2K + noise]`` (module docstring). σ̂ is the root mean square of the noise-only coordinates,
    in units of C; the public channel adds :data:`PUBLIC_LEAK_WEIGHT` per step at which a candidate's private
    coordinate shows in the public gradient, or its public coordinate moves only with the private batch."""
    y = noisy.double() / clip_norm
    sigma = y[:, :, 2 * k:].square().mean(dim=(1, 2)).sqrt().clamp_min(MIN_NOISE)
    one = torch.ones(1, dtype=torch.float64)
    scores = torch.stack([marginal_log_likelihood(y[:, :, j], one, sigma)[:, 0] for j in range(k)], dim=1)
    leak = (public[:, :, :k].double().abs() > 0).sum(dim=1)
    return scores + PUBLIC_LEAK_WEIGHT * leak


def public_aligned_scores(noisy: torch.Tensor, public: torch.Tensor, k: int, clip_norm: float) -> torch.Tensor:
    """Scores ``[R, K]`` from only the steps at which each candidate was in the public batch, as unsubsampled
    observations N(1, σ²) against N(0, σ²): powerless against Algorithm 1 (independent public batches), decisive
    against the shared batch of Proposition 3, where those are the steps at which it was privately sampled."""
    y = noisy.double()[:, :, :k] / clip_norm
    sigma = (noisy.double()[:, :, 2 * k:] / clip_norm).square().mean(dim=(1, 2)).sqrt().clamp_min(MIN_NOISE)
    present = (public.double()[:, :, k:2 * k].abs() > 0).double()
    return ((y - 0.5) * present).sum(dim=1) / sigma[:, None] ** 2


def play_gradient_canaries(problem: TrainingProblem, seed: int, indices: np.ndarray, k: int, norm_factor: float,
                           device: torch.device | str = "cpu") -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Train one model per trial with the K-candidate gradient canary block and score every trial: the secrets
    ``[R]`` and each attack's scores ``[R, K]``."""
    secrets = draw_secrets(seed, indices, k)
    block = gradient_canary_block(secrets, k, norm_factor * problem.hyper.clip_norm)
    p = problem.model.n_parameters
    scores: dict[str, list[np.ndarray]] = {"iterates": [], "iterates_public_aligned": []}
    for chunk in train_models(problem, seed, indices, record_iterates=True, device=device, canary_block=block):
        assert chunk.iterates is not None
        noisy, public = chunk.iterates.noisy_private_sums[..., p:], chunk.iterates.public_gradients[..., p:]
        # the released public gradient is the batch mean: its scale does not matter to a test of "non-zero"
        scores["iterates"].append(iterates_scores(noisy, public, k, problem.hyper.clip_norm).numpy())
        scores["iterates_public_aligned"].append(public_aligned_scores(noisy, public, k, problem.hyper.clip_norm)
                                                 .numpy())
    return secrets, {name: np.concatenate(parts) for name, parts in scores.items()}


def bayes_optimal_success(sample_rate: float, noise_multiplier: float, steps: int, k: int, draws: int = 200_000,
                          seed: int = 0) -> tuple[float, float]:
    """Success of the Bayes-optimal guess in the gradient-canary game (known p and σ = z): the posterior of
    candidate j is proportional to ``Π_t [(1 − p) + p·exp((y_tj − ½)/σ²)]``, so the optimal guess is the argmax
    of ``Σ_t log[(1 − p) + p·exp((y_tj − ½)/σ²)]``. Monte Carlo over ``draws`` releases (the secret is candidate
    0 by symmetry); returns the success and its standard error."""
    rng = np.random.default_rng(seed)
    successes, done, block = 0, 0, 20_000
    while done < draws:
        n = min(block, draws - done)
        y = rng.standard_normal((n, steps, k)) * noise_multiplier
        y[:, :, 0] += rng.random((n, steps)) < sample_rate
        log_ratio = np.logaddexp(math.log1p(-sample_rate) if sample_rate < 1 else -np.inf,
                                 math.log(sample_rate) + (y - 0.5) / noise_multiplier ** 2).sum(axis=1)
        successes += int((log_ratio.argmax(axis=1) == 0).sum())
        done += n
    rate = successes / draws
    return rate, math.sqrt(rate * (1 - rate) / draws)


# -- record canaries -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RecordCanaryTrials:
    """The record-canary game's trials: each trial's candidates ``[R, K, d]``, label ``[R]`` and secret ``[R]``."""

    candidates: torch.Tensor
    labels: torch.Tensor
    secrets: np.ndarray


def record_canary_trials(psi: ImageMap, images: torch.Tensor, labels: torch.Tensor, seed: int, indices: np.ndarray,
                         k: int, scale: float) -> RecordCanaryTrials:
    """Trial r's canary: population image ``r mod N`` (its public image and label) with K protected parts drawn
    from the trial's own generator; the secret from the GAME stream."""
    rows = torch.as_tensor(indices % len(images))
    candidates = torch.stack([
        candidate_images(psi, images[row].double(), k, scale, torch.Generator().manual_seed(int(seed * 1_000_003 + i)))
        for row, i in zip(rows.tolist(), indices.tolist())]).float()
    return RecordCanaryTrials(candidates, labels[rows], draw_secrets(seed, indices, k))


def loss_scores(model, params: dict[str, torch.Tensor], candidates: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """The final-model (black-box) attack: −ℓ(θ_r; x_rk, y_r) for every trial r and candidate k, ``[R, K]``."""
    logits = torch.vmap(model.forward)(params, candidates)  # [R, K, O]
    return -example_loss(logits, labels[:, None].expand(-1, candidates.shape[1]))


def play_record_canaries(problem: TrainingProblem, trials: RecordCanaryTrials, seed: int, indices: np.ndarray,
                         device: torch.device | str = "cpu") -> dict[str, np.ndarray]:
    """Train one model per trial with its secret candidate inserted as a record (in the private and the public
    population) and score every trial with the final-model attacks, ``[R, K]`` each."""
    r = len(indices)
    chosen = trials.candidates[torch.arange(r), torch.as_tensor(trials.secrets)]
    present = torch.ones(r, dtype=torch.bool)
    canaries = Canaries(chosen, trials.labels, present, present)
    informed = InformedGradientAttack()
    scores: dict[str, list[np.ndarray]] = {"loss": [], "informed_gradient": []}
    position = {int(index): i for i, index in enumerate(indices)}
    for chunk in train_models(problem, seed, indices, canaries=canaries, device=device):
        rows = torch.tensor([position[int(index)] for index in chunk.model_indices])
        params = {name: value.cpu() for name, value in chunk.params.items() if name != BLOCK_KEY}
        candidates, labels = trials.candidates[rows], trials.labels[rows]
        scores["loss"].append(loss_scores(problem.model, params, candidates, labels).detach().numpy())
        prior = torch.full(candidates.shape[:2], 1 / candidates.shape[1])
        informed.fit(Knowledge(problem.model, candidates, labels, prior, rest_x=problem.x.cpu(),
                               rest_y=problem.y.cpu()))
        scores["informed_gradient"].append(informed.infer(View(params=params)).scores.numpy())
    return {name: np.concatenate(parts) for name, parts in scores.items()}


def outcomes(game: str, secrets: np.ndarray, scores: dict[str, np.ndarray], limit: float, alpha: float
             ) -> list[GameOutcome]:
    """Each attack's argmax-guess successes against the limit."""
    k = next(iter(scores.values())).shape[1]
    return [GameOutcome(game, name, k, len(secrets), int((s.argmax(axis=1) == secrets).sum()), limit, alpha)
            for name, s in scores.items()]
