"""The one-run auditor's guesses: candidate scores of every gradient canary from what the training released, the
most confident guesses, and how many were right.

What the auditor sees (:class:`Release`): the canary block of the final weights (``final``, white box) and,
when the updates are released, the block's per-step parameter updates (``updates``). Coordinates that no
canary and no record touches (``null``) carry the mechanism's noise alone; the guesser reads the noise scale
off them and never uses the claimed noise multiplier, sampling rate or clip norm (those are what is audited).

Canary i's secret ``v`` moves its private coordinate by ``u_v`` times an unknown scale, where ``u`` is the
candidate pattern of the game (inclusion: ``u = (0, 1)``; a protected value from a uniform k-value prior:
``u_v = 2v/(k-1) - 1``). A gradient step lowers the weight, so the auditor works with the negated release.

* ``final``: the block coordinate is Gaussian around ``c - s·u_v`` with the null coordinates' spread σ̂; the
  signal scale ``s`` comes from the excess variance over the canaries, ``Var = σ̂² + s² Var(u)``, and the centre
  ``c`` from their median (the prior is uniform and ``u`` symmetric). Scores are Gaussian log-likelihoods.
* ``updates``: each step's updates are standardised by that step's null spread; a sampled canary adds
  ``a·u_v``, so the standardised value ``z`` has ``E[z²] - 1 = p a² E[u²]`` and
  ``E[z⁴] - 3 - 6(E[z²] - 1) = p a⁴ E[u⁴]`` over canaries and steps (method of moments for the rate p and the
  step a). The score of candidate v is the Poisson-mixture log-likelihood
  ``Σ_t log(1 - p + p·exp(a u_v z_t - a² u_v² / 2))`` (the likelihood-ratio test of one subsampled Gaussian
  step, composed over steps).

Guesses: the predicted value is the best-scoring candidate, the confidence its margin over the runner-up; the
auditor guesses the ``c`` most confident canaries and abstains on the rest, for each ``c`` of a grid fixed in
advance (:func:`guess_counts`; the analysis Bonferroni-corrects over the grid, so nothing is chosen by peeking).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

GUESS_FRACTIONS = (1.0, 1 / 2, 1 / 4, 1 / 8, 1 / 16, 1 / 32, 1 / 64, 1 / 128)
MIN_GUESSES = 8
PUBLIC_HIT_SIGMAS = 2.0


@dataclass(frozen=True)
class Release:
    """The canary block as the auditor sees it: private coordinates of the M canaries and null coordinates,
    at the end (``final`` ``[M]``, ``final_null`` ``[M0]``) and, if released, per step (``updates`` ``[T, M]``,
    ``updates_null`` ``[T, M0]``)."""

    final: np.ndarray
    final_null: np.ndarray
    updates: np.ndarray | None = None
    updates_null: np.ndarray | None = None
    public_updates: np.ndarray | None = None  # [T, M] the canaries' public coordinates, when a public loss exists


def candidate_pattern(game: str, k: int) -> np.ndarray:
    """``u_v`` of the game (module doc): inclusion ``(0, 1)``; a protected value ``2v/(k-1) - 1``."""
    if game == "inclusion":
        return np.array([0.0, 1.0])
    return np.linspace(-1.0, 1.0, k)


def final_scores(release: Release, pattern: np.ndarray) -> np.ndarray:
    """``[M, k]`` Gaussian log-likelihoods of the candidates from the final canary coordinates."""
    x = -np.asarray(release.final, dtype=float)
    noise = max(float(np.std(release.final_null)), 1e-30)
    spread = float(np.var(pattern))
    scale = np.sqrt(max(float(np.var(x)) - noise ** 2, 0.0) / spread) if spread > 0 else 0.0
    centre = float(np.median(x)) - scale * float(np.mean(pattern))
    means = centre + scale * pattern
    return -(x[:, None] - means[None, :]) ** 2 / (2 * noise ** 2)


def update_scores(release: Release, pattern: np.ndarray) -> np.ndarray:
    """``[M, k]`` Poisson-mixture log-likelihoods of the candidates from the per-step updates (module doc)."""
    assert release.updates is not None and release.updates_null is not None
    noise = np.maximum(np.std(release.updates_null, axis=1, keepdims=True), 1e-30)
    z = -np.asarray(release.updates, dtype=float) / noise  # [T, M]
    second = float(np.mean(z ** 2)) - 1.0
    fourth = float(np.mean(z ** 4)) - 3.0 - 6.0 * second
    u2, u4 = float(np.mean(pattern ** 2)), float(np.mean(pattern ** 4))
    if second <= 0 or fourth <= 0:  # no detectable excess: fall back to the summed release
        return final_scores(Release(release.updates.sum(axis=0), release.updates_null.sum(axis=0)), pattern)
    step = np.sqrt(fourth * u2 / (second * u4))
    rate = min(1.0, second / (step ** 2 * u2))
    shift = step * pattern  # [k]
    exponent = shift[None, None, :] * z[:, :, None] - shift[None, None, :] ** 2 / 2  # [T, M, k]
    return np.log1p(rate * np.expm1(exponent)).sum(axis=0)


def public_aligned_scores(release: Release, pattern: np.ndarray) -> np.ndarray:
    """``[M, k]`` scores from the private updates at the steps where the canary's *public* coordinate moved.

    With Algorithm 1's independent public batches those steps say nothing about the private batch; with the
    private batch reused for the public gradient (Proposition 3) they are exactly the steps where the canary
    was sampled, so the Gaussian log-likelihood ``Σ_{t sampled} (a u_v z_t - a² u_v² / 2)`` needs no mixture.
    The mechanism's noise reaches the public coordinates too: a step counts as a hit when the standardised public
    update exceeds :data:`PUBLIC_HIT_SIGMAS` (the public gradient is added without noise, so a hit stands out
    whenever it is larger than the noise)."""
    assert release.updates is not None and release.updates_null is not None and release.public_updates is not None
    noise = np.maximum(np.std(release.updates_null, axis=1, keepdims=True), 1e-30)
    z = -np.asarray(release.updates, dtype=float) / noise
    hits = -np.asarray(release.public_updates, dtype=float) / noise > PUBLIC_HIT_SIGMAS
    moved = hits.sum(axis=0)
    selected = (z * hits).sum(axis=0)
    excess = float(np.sum((z * hits) ** 2)) / max(int(moved.sum()), 1) - 1.0
    step = np.sqrt(max(excess, 0.0) / max(float(np.mean(pattern ** 2)), 1e-12)) or 1.0
    return step * selected[:, None] * pattern[None, :] - step ** 2 * moved[:, None] * pattern[None, :] ** 2 / 2


def threat_scores(release: Release, pattern: np.ndarray) -> dict[str, np.ndarray]:
    """``[M, k]`` scores per threat model: the final weights when only they are released; else the updates
    (whose sum is the final block, so the final-weights guesser would only add a comparison and cost
    Bonferroni level) and, with a public batch, the public-aligned updates."""
    if release.updates is None:
        return {"final": final_scores(release, pattern)}
    scores = {"updates": update_scores(release, pattern)}
    if release.public_updates is not None:
        scores["updates_public_aligned"] = public_aligned_scores(release, pattern)
    return scores


def guess_counts(m: int) -> list[int]:
    """The grid of guess counts, fixed before looking: ``m·2^-j`` for j = 0 … 7, at least :data:`MIN_GUESSES`."""
    counts = sorted({int(m * f) for f in GUESS_FRACTIONS if int(m * f) >= min(MIN_GUESSES, m)}, reverse=True)
    return counts or [m]


@dataclass(frozen=True)
class Guesses:
    """For each guess count of the grid, how many of the most confident guesses were correct."""

    m: int
    k: int
    counts: tuple[int, ...]
    correct: tuple[int, ...]


def score_guesses(scores: np.ndarray, secrets: np.ndarray) -> Guesses:
    """Predicted value = best candidate; confidence = margin over the runner-up (ties broken by canary index, a
    rule that does not depend on the secrets); correct guesses among the ``c`` most confident, per ``c``."""
    m, k = scores.shape
    ordered = np.sort(scores, axis=1)
    margin = ordered[:, -1] - ordered[:, -2]
    predicted = np.argmax(scores, axis=1)
    order = np.argsort(-margin, kind="stable")
    hits = np.cumsum(predicted[order] == np.asarray(secrets)[order])
    counts = guess_counts(m)
    return Guesses(m, k, tuple(counts), tuple(int(hits[c - 1]) for c in counts))
