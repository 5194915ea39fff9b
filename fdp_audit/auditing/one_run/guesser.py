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
* ``updates``: the updates are standardised by the null coordinates' spread (:func:`null_spread`: one spread
  pooled over the steps when the steps' null variances scatter no more than χ² noise allows, else each step's
  own); a sampled canary adds
  ``a·u_v``, so every standardised value ``z`` (one canary, one step) is drawn from the mixture
  ``(1 - p) N(0, 1) + (p/k) Σ_v N(a u_v, 1)``, the canary's candidate being shared by its steps. The rate p and
  the step a are the maximum-likelihood estimates of that model over the canaries (:func:`fit_mixture`, started
  from the method of moments ``E[z²] - 1 = p a² E[u²]``, ``E[z⁴] - 3 - 6(E[z²] - 1) = p a⁴ E[u⁴]``). The
  score of candidate v is the Poisson-mixture log-likelihood ``Σ_t log(1 - p + p·exp(a u_v z_t - a² u_v²/2))``:
  the likelihood ratio of one subsampled Gaussian step, composed over steps, i.e. the Neyman–Pearson statistic
  of the per-step model. When the second moment shows no excess the fit gives up and the summed release is
  scored instead (for small ``a`` the mixture's log-likelihood is ``p a u_v Σ_t z_t`` plus a constant, so the
  ranking is the same); when the mixture does not fit better than a Gaussian shift of every step, that is used.

Guesses (:func:`rank_guesses`): the predicted value is the best-scoring candidate, the confidence its margin over
the runner-up; the canaries are ranked by confidence, and ``correct[c - 1]`` counts the right guesses among the
``c`` most confident. How many of them are judged is fixed before looking
(:mod:`fdp_audit.auditing.one_run.design`), so nothing is chosen by peeking at the secrets.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import optimize, special, stats

PUBLIC_HIT_SIGMAS = 2.0
FIT_ELEMENTS = 1_000_000  # the likelihood fit reads at most about this many (step, canary) values
FIT_ITERATIONS = 200
FIT_BOUNDS = ((-14.0, 14.0), (-10.0, 10.0))  # logit p and log a: p in [1e-6, 1 - 1e-6], a in [5e-5, 2e4]
ALWAYS_SAMPLED = ((14.0, 14.0), (-10.0, 10.0))  # the Gaussian-shift model: every step carries the canary
FIT_START_RATES = (0.01, 0.1)
FIT_GAIN = 5.0  # nats the sampled mixture must gain over the Gaussian shift to be used (one more parameter)
SCATTER_TOLERANCE = 1.25  # pooled spread while the null variances' relative scatter <= this × the χ² scatter
OUTLYING_STEP_LEVEL = 1e-6  # and no step's null variance outside its χ² quantiles at this level over all steps


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
    """``u_v`` of the game (module doc): inclusion ``(0, 1)``; a protected value ``2v/(k-1) - 1``.

    Args:
        game: ``"inclusion"`` or ``"value"``.
        k: the number of candidate values (ignored for inclusion, which has 2).

    Returns:
        ``u``, shape (k,).
    """
    if game == "inclusion":
        return np.array([0.0, 1.0])
    return np.linspace(-1.0, 1.0, k)


def final_scores(release: Release, pattern: np.ndarray) -> np.ndarray:
    """``[M, k]`` Gaussian log-likelihoods of the candidates from the final canary coordinates.

    Args:
        release: the canary block as released.
        pattern: the game's candidate pattern ``u``, shape (k,) (:func:`candidate_pattern`).

    Returns:
        The scores, shape (M, k) (in units of the null coordinates' variance; larger is likelier).
    """
    x = -np.asarray(release.final, dtype=float)
    noise = max(float(np.std(release.final_null)), 1e-30)
    spread = float(np.var(pattern))
    scale = np.sqrt(max(float(np.var(x)) - noise ** 2, 0.0) / spread) if spread > 0 else 0.0
    centre = float(np.median(x)) - scale * float(np.mean(pattern))
    means = centre + scale * pattern
    return -(x[:, None] - means[None, :]) ** 2 / (2 * noise ** 2)


@dataclass(frozen=True)
class StepModel:
    """The per-step model of a canary coordinate in noise units: sampled with probability ``rate``, then moved by
    ``step·u_v``."""

    rate: float
    step: float


def null_spread(updates_null: np.ndarray) -> np.ndarray:
    """``[T, 1]`` the noise's standard deviation at each step, read off the M₀ null coordinates: one spread pooled
    over the steps when the steps' null variances are as alike as χ² noise allows, else each step's own.

    With ``v_t`` the variance of step t's M₀ null values (about their mean), a mechanism whose noise scale ``σ``
    is the same at every step has ``(M₀ - 1) v_t / σ² ~ χ²(M₀ - 1)`` (up to the factor M₀/(M₀ - 1) of the
    divisor), so the ``v_t`` scatter with relative standard deviation ``√(2/(M₀ - 1))`` about ``σ²``. Dividing
    step t by its own ``√v_t`` then adds a relative scale error of about ``√(1/(2M₀))`` to every step (0.022 at
    M₀ = 1,000), which swamps the mixture's signal ``E[z²] - 1 = p a² E[u²]`` when ``p a²`` is small (0.0013 at
    p = 1/13, T = 2,500, ε = 2) and lets :func:`fit_mixture` settle on a spurious rare-large-step model. The
    pooled spread ``√(mean_t v_t)`` has relative error ``√(1/(2 T M₀))`` instead. It is used when the observed
    relative standard deviation of the ``v_t`` over the steps is at most :data:`SCATTER_TOLERANCE` ×
    ``√(2/(M₀ - 1))``: a true scatter of the step variances (a learning-rate or noise schedule, a loop that
    changes its noise) adds its own relative variance to the χ² one, and past the tolerance it exceeds
    ``√(1.25² - 1) = 0.75`` of a single step's estimation error, so the step's own spread is the better scale.
    A constant-noise release crosses the tolerance only by chance, with probability about
    ``P[χ²(T - 1) > 1.25² T]`` (the squared scatter ratio is about ``χ²(T - 1)/T``; 0.01 at T = 40, 2e-4 at
    T = 100, measured 0.008 and 3e-4 over 3,000 releases each); it is then standardised step by step, which costs
    power, never validity. The overall scatter barely moves when a few steps differ (a loop that skips the noise
    on one step in 2,500 stays within the tolerance, and pooling would hide the step whose canaries it exposes
    exactly), so the pooled spread is also refused when any step's ``v_t / mean_t v_t`` lies outside the
    ``χ²(M₀ - 1)/(M₀ - 1)`` quantiles at level :data:`OUTLYING_STEP_LEVEL`/T (two-sided; about ±6 standard
    deviations at M₀ = 1,000, T = 2,500): a constant-noise release is refused with probability at most about
    1e-6, and a step with less than about 0.86 of the noise's spread, or none, keeps each step's own spread.
    With fewer than two null coordinates or steps, or no noise, each step's own spread is kept (floored at
    1e-30).

    *Validity.* The choice reads only the null coordinates, which the secrets do not touch: the standardised
    release, and so every score and ranking built on it, stays a function of the release. The conformance test's
    bound (:mod:`fdp_audit.auditing.one_run.order_statistics`) holds for every auditor that ranks by a function
    of the whole release, and the count test's (:mod:`fdp_audit.auditing.one_run.analysis`) for every guess that
    is a post-processing of it, so both keep their level.

    Args:
        updates_null: the null coordinates' update per step, shape (T, M₀).

    Returns:
        The spread by step, shape (T, 1) (every row the same when pooled).
    """
    null = np.asarray(updates_null, dtype=float)
    variances = np.var(null, axis=1)
    steps, count = null.shape
    mean = float(np.mean(variances)) if steps else 0.0
    if steps >= 2 and count >= 2 and mean > 0:
        scatter = float(np.std(variances)) / mean
        tail = OUTLYING_STEP_LEVEL / (2 * steps)
        low, high = stats.chi2.ppf(tail, count - 1) / (count - 1), stats.chi2.isf(tail, count - 1) / (count - 1)
        ratios = variances / mean
        if (scatter <= SCATTER_TOLERANCE * np.sqrt(2.0 / (count - 1))
                and float(ratios.min()) >= low and float(ratios.max()) <= high):
            return np.full((steps, 1), np.sqrt(mean))
    return np.maximum(np.sqrt(variances), 1e-30)[:, None]


def standardised_updates(release: Release) -> np.ndarray:
    """``[T, M]`` negated per-step canary updates divided by the null coordinates' spread (:func:`null_spread`).

    Args:
        release: a release with per-step updates (``updates`` and ``updates_null`` set).

    Returns:
        ``z``, shape (T, M).
    """
    assert release.updates is not None and release.updates_null is not None
    return -np.asarray(release.updates, dtype=float) / null_spread(release.updates_null)


def _negative_log_likelihood(theta: np.ndarray, z: np.ndarray, pattern: np.ndarray) -> tuple[float, np.ndarray]:
    """Minus the canaries' log-likelihood ``Σ_i log mean_v exp(S_iv)`` at ``θ = (logit p, log a)`` and its gradient.
    Per value, with ``y = logit p + a u z - a² u²/2``, the step's term is ``log(1 - p) + softplus(y)``, whose
    derivatives are ``σ(y) - p`` in logit p and ``σ(y)(a u z - a² u²)`` in log a."""
    logit, step = float(theta[0]), float(np.exp(theta[1]))
    rate = float(special.expit(logit))
    scores = np.zeros((z.shape[1], len(pattern)))
    d_logit, d_step = np.zeros_like(scores), np.zeros_like(scores)
    for v in np.flatnonzero(pattern):  # an unshifted candidate scores 0 with zero gradient
        drift = step * pattern[v] * z - (step * pattern[v]) ** 2
        y = logit + step * pattern[v] * z - (step * pattern[v]) ** 2 / 2
        sampled = special.expit(y)
        scores[:, v] = (np.log1p(-rate) + np.logaddexp(0.0, y)).sum(axis=0)
        d_logit[:, v] = (sampled - rate).sum(axis=0)
        d_step[:, v] = (sampled * drift).sum(axis=0)
    weights = special.softmax(scores, axis=1)
    value = float(special.logsumexp(scores, axis=1).sum()) - z.shape[1] * np.log(len(pattern))
    return -value, -np.array([(weights * d_logit).sum(), (weights * d_step).sum()])


def fit_mixture(z: np.ndarray, pattern: np.ndarray) -> StepModel | None:
    """Maximum-likelihood ``(p, a)`` of the canaries' releases ``z`` (``[T, M]``): canary i's candidate is uniform
    over the k values and, given it, its steps are independent draws of ``(1 - p) N(0, 1) + p N(a u_v, 1)``, so
    its log-likelihood (over the noise's) is ``log mean_v exp(score_v)`` with the scores of
    :func:`mixture_scores`. SLSQP in ``(logit p, log a)`` with the exact gradient (L-BFGS-B's BLAS calls made
    a 2-parameter fit 5 times slower on a busy machine), from the method of moments
    and from p = 0.01 and 0.1 with ``p a² E[u²]`` equal to the excess second moment. At most about
    :data:`FIT_ELEMENTS` values enter (every canary up to FIT_ELEMENTS/100 of them, and evenly strided steps:
    the likelihood of a subset of steps is a likelihood too).

    The mixture is kept only if it gains :data:`FIT_GAIN` nats of likelihood over the Gaussian-shift model
    (p = 1: every step shifted by ``a u_v``, the same fit with p pinned): where p·a² is too small to be told
    apart from noise the likelihood is flat along p·a, a fitted (p, a) there is noise, and the Gaussian shift
    ranks the canaries like the summed release, the Neyman–Pearson ranking to first order in a. None when the
    second moment shows no excess over the noise.

    Args:
        z: the standardised per-step updates, shape (T, M) (:func:`standardised_updates`).
        pattern: the game's candidate pattern ``u``, shape (k,).

    Returns:
        The fitted rate p and step a, or None.
    """
    steps, count = z.shape
    canary_stride = max(1, count // (FIT_ELEMENTS // 100))
    step_stride = max(1, steps * (count // canary_stride) // FIT_ELEMENTS)
    canaries = z[::step_stride, ::canary_stride]
    second = float(np.mean(canaries ** 2)) - 1.0
    fourth = float(np.mean(canaries ** 4)) - 3.0 - 6.0 * second
    u2, u4 = float(np.mean(pattern ** 2)), float(np.mean(pattern ** 4))
    if not second > 0 or u2 == 0:
        return None
    starts = [(rate, np.sqrt(second / (rate * u2))) for rate in FIT_START_RATES]
    if fourth > 0:
        step = np.sqrt(fourth * u2 / (second * u4))
        starts.append((float(np.clip(second / (step ** 2 * u2), 1e-4, 1 - 1e-4)), step))

    def fit(rate: float, step: float, bounds: tuple) -> optimize.OptimizeResult:
        return optimize.minimize(_negative_log_likelihood, np.array([special.logit(rate), np.log(step)]),
                                 args=(canaries, pattern), jac=True, method="SLSQP", bounds=bounds,
                                 options={"maxiter": FIT_ITERATIONS})

    best = min((fit(rate, step, FIT_BOUNDS) for rate, step in starts), key=lambda result: result.fun)
    shift = fit(float(special.expit(ALWAYS_SAMPLED[0][0])), np.sqrt(second / u2), ALWAYS_SAMPLED)
    if shift.fun - best.fun < FIT_GAIN:
        best = shift
    return StepModel(float(special.expit(best.x[0])), float(np.exp(best.x[1])))


def mixture_scores(z: np.ndarray, pattern: np.ndarray, model: StepModel) -> np.ndarray:
    """``[M, k]`` Poisson-mixture log-likelihoods ``Σ_t log(1 - p + p·exp(a u_v z_t - a² u_v² / 2))``.

    Args:
        z: the standardised per-step updates, shape (T, M).
        pattern: the game's candidate pattern ``u``, shape (k,).
        model: the fitted rate p and step a.

    Returns:
        The scores, shape (M, k) (0 for a candidate with ``u_v = 0``).
    """
    shift = model.step * pattern
    scores = np.zeros((z.shape[1], len(pattern)))
    with np.errstate(divide="ignore"):  # rate 1: the unsampled branch has log-weight -inf
        stay, move = np.log1p(-model.rate), np.log(model.rate)
    for v in np.flatnonzero(shift):  # one candidate at a time ([T, M] in memory); an unshifted one scores 0
        scores[:, v] = np.logaddexp(stay, move + shift[v] * z - shift[v] ** 2 / 2).sum(axis=0)
    return scores


def update_scores(release: Release, pattern: np.ndarray) -> np.ndarray:
    """``[M, k]`` Poisson-mixture log-likelihoods of the candidates from the per-step updates (module doc).

    Args:
        release: the canary block as released, with per-step updates.
        pattern: the game's candidate pattern ``u``, shape (k,).

    Returns:
        The scores, shape (M, k); the summed release's Gaussian scores when the fit finds no excess.
    """
    z = standardised_updates(release)
    model = fit_mixture(z, pattern)
    if model is None:  # no detectable excess: fall back to the summed release
        assert release.updates is not None and release.updates_null is not None
        return final_scores(Release(release.updates.sum(axis=0), release.updates_null.sum(axis=0)), pattern)
    return mixture_scores(z, pattern, model)


def public_aligned_scores(release: Release, pattern: np.ndarray) -> np.ndarray:
    """``[M, k]`` scores from the private updates at the steps where the canary's *public* coordinate moved.

    With Algorithm 1's independent public batches those steps say nothing about the private batch; with the
    private batch reused for the public gradient (Proposition 3) they are exactly the steps where the canary
    was sampled, so the Gaussian log-likelihood ``Σ_{t sampled} (a u_v z_t - a² u_v² / 2)`` needs no mixture.
    The mechanism's noise reaches the public coordinates too: a step counts as a hit when the standardised public
    update exceeds :data:`PUBLIC_HIT_SIGMAS` (the public gradient is added without noise, so a hit stands out
    whenever it is larger than the noise).

    Args:
        release: the canary block as released, with per-step private and public updates.
        pattern: the game's candidate pattern ``u``, shape (k,).

    Returns:
        The scores, shape (M, k).
    """
    assert release.updates is not None and release.updates_null is not None and release.public_updates is not None
    z = standardised_updates(release)
    hits = -np.asarray(release.public_updates, dtype=float) / null_spread(release.updates_null) > PUBLIC_HIT_SIGMAS
    moved = hits.sum(axis=0)
    selected = (z * hits).sum(axis=0)
    excess = float(np.sum((z * hits) ** 2)) / max(int(moved.sum()), 1) - 1.0
    step = np.sqrt(max(excess, 0.0) / max(float(np.mean(pattern ** 2)), 1e-12)) or 1.0
    return step * selected[:, None] * pattern[None, :] - step ** 2 * moved[:, None] * pattern[None, :] ** 2 / 2


def threat_scores(release: Release, pattern: np.ndarray) -> dict[str, np.ndarray]:
    """``[M, k]`` scores per threat model: the final weights when only they are released; else the updates
    and, with a public batch, the public-aligned updates. The final block is then a function of the updates (their
    sum, for plain SGD), so the final-weights guesser would only add a comparison and cost Bonferroni level. That
    holds only when the block moved in the released steps alone: the engine releases every step, and a user's
    loop counts the block's changes outside its optimizer steps, each a violation of the claim
    (:attr:`fdp_audit.auditing.canary_head.UpdateObserver.unobserved_changes`).

    Args:
        release: the canary block as released.
        pattern: the game's candidate pattern ``u``, shape (k,) (:func:`candidate_pattern`).

    Returns:
        The scores by threat model: ``final``, or ``updates`` and (with public updates) ``updates_public_aligned``.
    """
    if release.updates is None:
        return {"final": final_scores(release, pattern)}
    scores = {"updates": update_scores(release, pattern)}
    if release.public_updates is not None:
        scores["updates_public_aligned"] = public_aligned_scores(release, pattern)
    return scores


@dataclass(frozen=True)
class RankedGuesses:
    """The guesses ranked by confidence: ``correct[c - 1]`` of the ``c`` most confident are right (``[M]``,
    non-decreasing), among ``m`` canaries with ``k`` candidates each."""

    m: int
    k: int
    correct: np.ndarray

    def correct_among(self, count: int) -> int:
        """Right guesses among the ``count`` most confident (0 for no guess).

        Args:
            count: the number c of most confident guesses judged, 0 … m.

        Returns:
            The count of right guesses among them.
        """
        return int(self.correct[count - 1]) if count > 0 else 0


def rank_guesses(scores: np.ndarray, secrets: np.ndarray) -> RankedGuesses:
    """Predicted value = best candidate; confidence = margin over the runner-up (ties broken by canary index, a
    rule that does not depend on the secrets); the running count of right guesses in order of confidence.

    Args:
        scores: the candidates' scores, shape (M, k), k ≥ 2.
        secrets: the canaries' true values, shape (M,).

    Returns:
        The ranked guesses (``correct`` of shape (M,)).
    """
    m, k = scores.shape
    ordered = np.sort(scores, axis=1)
    margin = ordered[:, -1] - ordered[:, -2]
    predicted = np.argmax(scores, axis=1)
    order = np.argsort(-margin, kind="stable")
    return RankedGuesses(m, k, np.cumsum(predicted[order] == np.asarray(secrets)[order]))
