"""Realised privacy of CorrDP-SGD by exact Gaussian accounting, per neighbour type (docs/corrdp.md).

One step releases a Gaussian with covariance diag(σ²) centred at the (averaged, clipped) gradient. If
neighbours can move that centre by any Δ in a set 𝒟, whitening shows the step is μ_t-GDP with
``μ_t = max_{Δ∈𝒟} ‖Δ/σ‖₂``; T adaptive steps compose to μ = sqrt(T) μ_t (docs/accounting.md), and μ-GDP gives the
exact privacy profile ``δ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2)``, inverted for ε(δ). With Poisson
sampling (q < 1) the composition is done by dp_accounting's PLD for the REPLACE_ONE relation.

Sensitivity models, per step, for the average over the expected batch q·n of gradients clipped to L:

* ``paper``: the change moves only the coordinates of the changed features, by at most L/(qn) in ℓ2 —
  the model behind Eq. 4 (Assumption 3.4 without its cross terms) and the docs/corrdp.md convention;
* ``paper_replace``: as ``paper`` but 2L/(qn), the honest bound when one clipped gradient is *replaced*
  by another (both of norm ≤ L);
* ``unconfined``: any direction, 2L/(qn). For a GLM, ∇ℓ = ℓ'(θᵀx) x, so a change of any feature moves
  every coordinate through ℓ'; without the parameter box of Assumption 3.4 nothing confines Δ to the
  changed features, and the worst case puts it on the least-noised coordinate.

For a network (Eq. 5, Assumption 3.11) the coordinates are the first-layer weight columns of the inputs,
every other parameter having σ_S, so the same per-coordinate models apply.

The nominal guarantee of CorrDP is ε for a sensitive change and ε/d = ε/TV(j) for a change of the
insensitive feature j (Def. 2.2 with d from Remark 3.8); DP (Standard) claims ε for both; Semi makes no
claim for insensitive changes.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

import numpy as np
from scipy.optimize import brentq
from scipy.special import log_ndtr, ndtr

from fdp_audit.corrdp.noise import INTERCEPT, Variant
from fdp_audit.json_numbers import json_float

MODELS = ("paper", "paper_replace", "unconfined")


def gdp_delta(epsilon: float, mu: float) -> float:
    """δ(ε) of μ-GDP: Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2) (Dong, Roth & Su 2019, Cor. 2.13).

    The second term is evaluated as exp(ε + log Φ(·)) so that large ε does not overflow.

    Args:
        epsilon: ε ≥ 0.
        mu: μ ≥ 0 (0: no privacy loss, δ = 0).

    Returns:
        δ(ε).
    """
    if mu == 0.0:
        return 0.0
    return float(ndtr(-epsilon / mu + mu / 2) - math.exp(epsilon + log_ndtr(-epsilon / mu - mu / 2)))


def gdp_epsilon(delta: float, mu: float) -> float:
    """The smallest ε ≥ 0 with δ(ε) ≤ ``delta`` for μ-GDP (δ(ε) is decreasing in ε).

    Args:
        delta: the target δ in (0, 1).
        mu: μ ≥ 0.

    Returns:
        ε(δ), by root finding on :func:`gdp_delta`.
    """
    if gdp_delta(0.0, mu) <= delta:
        return 0.0
    hi = 1.0
    while gdp_delta(hi, mu) > delta:
        hi *= 2.0
    return float(brentq(lambda e: gdp_delta(e, mu) - delta, 0.0, hi, xtol=1e-12))


def gdp_mu_for(epsilon: float, delta: float) -> float:
    """The μ whose μ-GDP curve has ε(δ) = ``epsilon`` (the noise exact accounting needs).

    Args:
        epsilon: the target ε > 0.
        delta: the target δ in (0, 1).

    Returns:
        μ.
    """
    hi = 1.0
    while gdp_epsilon(delta, hi) < epsilon:
        hi *= 2.0
    return float(brentq(lambda mu: gdp_epsilon(delta, mu) - epsilon, 1e-9, hi, xtol=1e-12))


@functools.lru_cache(maxsize=4096)  # many neighbour types share one step μ
def composed_epsilon(step_mu: float, steps: int, delta: float, sample_rate: float = 1.0) -> float:
    """ε(δ) after ``steps`` Gaussian steps whose whitened difference per step is at most ``step_mu``.

    q = 1: exact, μ = sqrt(T)·step_mu. q < 1: dp_accounting PLD (pessimistic, discretisation 1e-4),
    REPLACE_ONE with noise 1 and per-record contribution step_mu/2 (the two records' whitened
    contributions ±step_mu/2, whose difference is step_mu).

    Args:
        step_mu: the per-step bound max ‖Δ/σ‖₂ (inf: unbounded).
        steps: the number of steps T.
        delta: the target δ.
        sample_rate: the Poisson sampling rate q (1: full batch).

    Returns:
        ε(δ) (inf when ``step_mu`` is).
    """
    if not math.isfinite(step_mu):
        return math.inf
    if sample_rate >= 1.0:
        return gdp_epsilon(delta, math.sqrt(steps) * step_mu)
    from dp_accounting.pld import privacy_loss_distribution as pld
    from dp_accounting.privacy_accountant import NeighboringRelation

    step = pld.from_gaussian_mechanism(
        standard_deviation=1.0,
        sensitivity=step_mu / 2.0,
        sampling_prob=sample_rate,
        value_discretization_interval=1e-4,
        neighboring_relation=NeighboringRelation.REPLACE_ONE,
    )
    return float(step.self_compose(steps).get_epsilon_for_delta(delta))


@dataclass(frozen=True)
class NeighbourPrivacy:
    """Nominal and realised ε for one variant and one neighbour type (``None``: unbounded / no claim).

    ``under_delivers``: the realised ε under the paper's own sensitivity model exceeds the nominal ε."""

    variant: str
    neighbour: str
    nominal_epsilon: float | None
    realised: dict[str, float | None]
    under_delivers: bool

    def to_dict(self) -> dict[str, object]:
        """The row as a plain dict, for the results JSON.

        Returns:
            Its fields by name.
        """
        return asdict(self)


def _step_mu(coords: np.ndarray, std: np.ndarray, bound: float) -> float:
    """max ‖Δ/σ‖ over Δ supported on ``coords`` with ‖Δ‖ ≤ bound: bound / min σ over those coords."""
    smallest = float(std[coords].min())
    return math.inf if smallest == 0.0 else bound / smallest


def realised_privacy(
    variant: Variant,
    noise_std: np.ndarray,
    groups: Sequence[str],
    sensitive: frozenset[str],
    tv: Mapping[str, float],
    epsilon: float,
    delta: float,
    lipschitz: float,
    n: int,
    steps: int,
    sample_rate: float = 1.0,
) -> list[NeighbourPrivacy]:
    """Realised ε(δ) of one trained configuration for a sensitive change and for a change of each
    insensitive feature, under each sensitivity model, beside the nominal ε (see the module doc).

    ``noise_std`` is the per-column noise std actually added, ``tv`` the TV(j) the calibration used.

    Args:
        variant: ``"corrdp"``, ``"semi"`` or ``"standard"``.
        noise_std: the noise standard deviation of each parameter column.
        groups: the feature group of each column (:data:`~fdp_audit.corrdp.noise.INTERCEPT` for the intercept).
        sensitive: the sensitive feature groups.
        tv: TV(j) of each insensitive feature j.
        epsilon: the nominal ε of a sensitive change.
        delta: the δ of the realised ε.
        lipschitz: the clipping bound L.
        n: the number of training rows.
        steps: the number of steps T.
        sample_rate: the Poisson sampling rate q (1: full batch).

    Returns:
        One row per neighbour type: the sensitive change, then each insensitive feature.
    """
    groups_arr = np.asarray(groups)
    batch = sample_rate * n
    bounds = {"paper": lipschitz / batch, "paper_replace": 2 * lipschitz / batch, "unconfined": 2 * lipschitz / batch}
    insensitive = [g for g in dict.fromkeys(groups) if g not in sensitive and g != INTERCEPT]
    neighbours = [("sensitive", np.flatnonzero(np.isin(groups_arr, sorted(sensitive))))]
    neighbours += [(f"insensitive:{g}", np.flatnonzero(groups_arr == g)) for g in insensitive]
    everything = np.arange(len(groups))
    rows = []
    for name, coords in neighbours:
        if name == "sensitive" or variant == "standard":
            nominal: float | None = epsilon
        elif variant == "corrdp":
            d = tv[name.split(":", 1)[1]]
            nominal = epsilon / d if d > 0 else None
        else:
            nominal = None  # Semi: no claim for insensitive changes
        realised = {}
        for model in MODELS:
            support = everything if model == "unconfined" else coords
            step = _step_mu(support, noise_std, bounds[model])
            realised[model] = json_float(composed_epsilon(step, steps, delta, sample_rate))
        paper = realised["paper"]
        under = nominal is not None and (paper is None or paper > nominal * (1 + 1e-9))
        rows.append(NeighbourPrivacy(variant, name, nominal, realised, under))
    return rows


def eq4_calibration(epsilons: Sequence[float], delta: float) -> list[dict[str, float]]:
    """Realised ε of Eq. 4 for a sensitive change of full-batch GD (docs/corrdp.md check).

    With σ_S² = (log(1/δ)+1) L² T/(n² ε²) and per-step sensitivity L/n, each step is (ε/sqrt((log(1/δ)+1)T))-GDP
    and T steps give μ = ε/sqrt(log(1/δ)+1), independent of L, T and n. ``sigma_ratio`` is the Eq. 4
    noise over the noise exact accounting needs for the nominal ε (< 1: under-calibrated).

    Args:
        epsilons: the nominal ε values.
        delta: δ.

    Returns:
        One row per ε: the nominal ε, μ, the realised ε (sensitivity L/n, and 2L/n for a replacement) and
        ``sigma_ratio``.
    """
    rows = []
    for eps in epsilons:
        mu = eps / math.sqrt(math.log(1.0 / delta) + 1.0)
        rows.append(
            {
                "nominal_epsilon": eps,
                "mu": mu,
                "realised_epsilon": gdp_epsilon(delta, mu),
                "realised_epsilon_replace": gdp_epsilon(delta, 2 * mu),
                "sigma_ratio": gdp_mu_for(eps, delta) / mu,
            }
        )
    return rows


def calibration_crossover(delta: float) -> float:
    """The nominal ε at which Eq. 4 is exactly calibrated (sensitivity L/n); above it, it under-delivers.

    Args:
        delta: δ.

    Returns:
        The crossover ε (searched in [1e-3, 100]).
    """
    scale = math.sqrt(math.log(1.0 / delta) + 1.0)
    return float(brentq(lambda e: gdp_epsilon(delta, e / scale) - e, 1e-3, 100.0))


def theorem_3_9_check(
    tv: Sequence[float], m: int, m_s: int, n: int, epsilon: float, delta: float
) -> dict[str, float | bool]:
    """Theorem 3.9 as printed against its own lower bound (Theorem 3.12), constants and logs dropped
    as both statements do (Õ, Ω), and the lower bound's min{1, ·} left out.

    printed:   sqrt((m_s + min{Σ_U TV(i), m_s/4}) log(1/δ)) / (nε)
    lower:     sqrt(m_s + max_k k TV_(k)²) / (nε)   (TV sorted in decreasing order)
    corrected: sqrt((m_s + Σ_U max{TV(i), m_s²/m²}) log(1/δ)) / (nε) — Eq. 15 of the proof writes
               min{TV(i), m_s²/m²} where Eq. 4 has max; with max the sum is ≥ Σ_U TV(i) ≥ max_k k TV_(k)².
    ``conflict`` is True when the printed upper bound is below the lower bound.

    Args:
        tv: TV(i) of the insensitive features.
        m: the number of features.
        m_s: the number of sensitive features.
        n: the number of rows.
        epsilon: ε.
        delta: δ.

    Returns:
        The three bounds and the flags ``conflict`` and ``corrected_consistent``.
    """
    values = np.sort(np.asarray(tv, dtype=float))[::-1]
    log_term = math.log(1.0 / delta)
    scale = n * epsilon
    k_terms = np.arange(1, len(values) + 1) * values**2
    printed = math.sqrt((m_s + min(values.sum(), m_s / 4)) * log_term) / scale
    lower = math.sqrt(m_s + (k_terms.max() if len(values) else 0.0)) / scale
    corrected = math.sqrt((m_s + np.maximum(values, (m_s / m) ** 2).sum()) * log_term) / scale
    return {
        "printed_upper": printed,
        "lower": lower,
        "corrected_upper": corrected,
        "conflict": printed < lower,
        "corrected_consistent": corrected >= lower,
    }
