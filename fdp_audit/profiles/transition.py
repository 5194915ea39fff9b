"""The ε sweep and the transition to dataset-level privacy (docs/profiles.md; paper Sec. 5.4, Figs. 5-7).

Sweep: on a log grid of ε, the typical profile divided by the inverse noise scale s (β for Laplace)
is read at fixed ranks. For Laplace output perturbation each curve has two plateaus: at large β the
noise is negligible against the neighbour offsets and |l|/β → the sorted ‖Δ_i‖; at small β the noise
dominates and |l|/β → the sorted |Δ_i·û| (û the noise direction); in between it rises. All ε share
one set of unit-scale noise draws (common random numbers), so the curves are smooth in ε.

Transition rule (stated, with threshold τ = 0.05 by default). For a rank's curve g(β) on the grid
β_0 < … < β_J, let h = (g - g(β_0)) / (g(β_J) - g(β_0)) be its rise normalised between the two ends.

* onset β_low,r: the first grid crossing of h = τ (log-linear interpolation): below it the curve
  stays within τ of the low-β plateau;
* end β_high,r: the last grid crossing of h = 1 - τ: above it the curve stays within τ of the
  high-β plateau;
* β_low = min_r β_low,r (no rank's curve has left its first plateau below it: more noise buys no
  coverage), β_high = max_r β_high,r (every rank has reached its second plateau above it: no privacy).

A plateau counts as *reached* only when at least two grid points lie on it (h < τ at β_0 and β_1, or
h > 1 - τ at β_{J-1} and β_J); otherwise the grid must be widened and the value is flagged.
β* = 1/max_i ‖A(D) - A(y_i)‖ is the paper's scale for the plateau onset of the most exposed row.
For the Gaussian mechanism |l|·σ has no second plateau (it grows like ‖Δ‖²/(2σ) as σ → 0), and the
rule reports the high end as not reached.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fdp_audit.profiles.mechanisms import MechanismName, make_mechanism, standard_noise
from fdp_audit.profiles.profile import BLOCK, typical_profile

TAU = 0.05


@dataclass(frozen=True)
class EpsilonSweep:
    """Typical profiles (J, n) and per-neighbour mean losses (J, n) over the ε grid (J,)."""

    mechanism: MechanismName
    epsilons: np.ndarray
    scales: np.ndarray
    profiles: np.ndarray
    mean_loss: np.ndarray
    mean_abs_loss: np.ndarray
    samples: int

    def at_positions(self, positions: np.ndarray) -> np.ndarray:
        """The typical profile divided by the inverse noise scale at 0-based ``positions``: (R, J).

        Args:
            positions: R positions in the ascending profile (:func:`rank_positions`).

        Returns:
            |l|/s at each position over the ε grid, (R, J).
        """
        return (self.profiles[:, positions] / self.scales[:, None]).T

    def epsilon_at(self, scale: float) -> float:
        """ε whose inverse noise scale is ``scale`` (log-log interpolation on the grid, exact for Laplace
        where s ∝ ε; NaN outside the grid).

        Args:
            scale: an inverse noise scale s (β, or 1/σ).

        Returns:
            The interpolated ε, or NaN.
        """
        log_s = np.log(self.scales)
        if not log_s[0] <= np.log(scale) <= log_s[-1]:
            return float("nan")
        return float(np.exp(np.interp(np.log(scale), log_s, np.log(self.epsilons))))


@dataclass(frozen=True)
class Transition:
    """Per-rank onsets and ends (as inverse scales β and as ε), the shared values, and the flags."""

    tau: float
    onset_scale: np.ndarray
    end_scale: np.ndarray
    onset_epsilon: np.ndarray
    end_epsilon: np.ndarray
    low_plateau_reached: np.ndarray
    high_plateau_reached: np.ndarray
    scale_low: float
    scale_high: float
    epsilon_low: float
    epsilon_high: float


def rank_positions(n: int, quantiles: np.ndarray) -> np.ndarray:
    """0-based positions in an ascending profile of n values for rank quantiles q: ceil(q·n) - 1,
    clipped to [0, n - 1] (q = 1 is the most exposed row, q = 0 the least).

    Args:
        n: the profile's length.
        quantiles: rank quantiles q in [0, 1].

    Returns:
        The positions, shaped like ``quantiles``.
    """
    return np.clip(np.ceil(np.asarray(quantiles) * n).astype(int) - 1, 0, n - 1)


def epsilon_sweep(
    mechanism: MechanismName,
    deltas: np.ndarray,
    n: int,
    lam: float,
    epsilons: np.ndarray,
    samples: int,
    rng: np.random.Generator,
    delta: float = 1e-5,
    block: int = BLOCK,
) -> EpsilonSweep:
    """Typical profiles for every ε of the grid from one set of ``samples`` unit-scale noise draws
    (antithetic pairs), with ``n`` the data set size and Λ = ``lam`` fixing the calibration.

    Args:
        mechanism: ``"laplace"`` or ``"gaussian"``.
        deltas: the offsets Δ_i = A(y_i) − A(D), (m, d).
        n: the data set size.
        lam: the regularisation strength Λ.
        epsilons: the ε grid (sorted here).
        samples: noise draws shared by every ε (common random numbers).
        rng: the random generator.
        delta: the δ of the Gaussian calibration.
        block: noise rows per loss matrix.

    Returns:
        The sweep: per ε its inverse noise scale, typical profile and per-neighbour mean l and |l|.
    """
    epsilons = np.sort(np.asarray(epsilons, dtype=np.float64))
    unit = standard_noise(mechanism, samples, deltas.shape[1], rng, antithetic=True)
    scales, profiles, means, abs_means = [], [], [], []
    for epsilon in epsilons:
        mech = make_mechanism(mechanism, float(epsilon), n, lam, delta)
        typical = typical_profile(mech, deltas, unit / mech.scale, block)
        scales.append(mech.scale)
        profiles.append(typical.values)
        means.append(typical.mean_loss)
        abs_means.append(typical.mean_abs_loss)
    return EpsilonSweep(
        mechanism, epsilons, np.array(scales), np.array(profiles), np.array(means), np.array(abs_means), samples
    )


def _crossing(h: np.ndarray, level: float, first: bool) -> float:
    """Fractional grid index where h crosses ``level``: the first upward crossing, or the last
    crossing after which h stays above it. NaN when there is none."""
    above = h >= level
    if first:
        hits = np.flatnonzero(above)
        if hits.size == 0:
            return float("nan")
        j = int(hits[0])
    else:
        below = np.flatnonzero(~above)
        if below.size == 0:
            return 0.0
        j = int(below[-1]) + 1
        if j >= h.size:
            return float("nan")
    if j == 0:
        return 0.0
    return j - 1 + (level - h[j - 1]) / (h[j] - h[j - 1])


def detect_transition(sweep: EpsilonSweep, positions: np.ndarray, tau: float = TAU) -> Transition:
    """Apply the transition rule of this module to the sweep's curves at ``positions``.

    Args:
        sweep: the ε sweep.
        positions: profile positions whose curves |l|/s are located (:func:`rank_positions`).
        tau: the threshold τ: the onset is where the normalised curve first reaches τ, the end where it
            stays above 1 − τ.

    Returns:
        Each curve's onset and end (as scales and as ε), whether its plateaus were reached inside the grid, and
        the earliest onset and latest end over the curves (NaN where none).
    """
    curves = sweep.at_positions(positions)
    log_s, log_e = np.log(sweep.scales), np.log(sweep.epsilons)
    grid = np.arange(log_s.size)
    onset, end, low_ok, high_ok = [], [], [], []
    for g in curves:
        rise = g[-1] - g[0]
        # A curve that does not rise across the grid has no transition to locate.
        h = (g - g[0]) / rise if rise > 0 else np.full(g.shape, np.nan)
        onset.append(_crossing(h, tau, first=True) if rise > 0 else np.nan)
        end.append(_crossing(h, 1.0 - tau, first=False) if rise > 0 else np.nan)
        low_ok.append(bool(h[0] < tau and h[1] < tau))
        high_ok.append(bool(h[-1] > 1 - tau and h[-2] > 1 - tau))
    onset_idx, end_idx = np.array(onset), np.array(end)

    def to_scale(index: np.ndarray) -> np.ndarray:
        return np.exp(np.interp(index, grid, log_s, left=np.nan, right=np.nan))

    def to_epsilon(index: np.ndarray) -> np.ndarray:
        return np.exp(np.interp(index, grid, log_e, left=np.nan, right=np.nan))

    valid_low = onset_idx[np.isfinite(onset_idx)]
    valid_high = end_idx[np.isfinite(end_idx)]
    low = np.array([valid_low.min()]) if valid_low.size else np.array([np.nan])
    high = np.array([valid_high.max()]) if valid_high.size else np.array([np.nan])
    return Transition(
        tau=tau,
        onset_scale=to_scale(onset_idx),
        end_scale=to_scale(end_idx),
        onset_epsilon=to_epsilon(onset_idx),
        end_epsilon=to_epsilon(end_idx),
        low_plateau_reached=np.array(low_ok),
        high_plateau_reached=np.array(high_ok),
        scale_low=float(to_scale(low)[0]),
        scale_high=float(to_scale(high)[0]),
        epsilon_low=float(to_epsilon(low)[0]),
        epsilon_high=float(to_epsilon(high)[0]),
    )


def beta_star(deltas: np.ndarray) -> tuple[float, int]:
    """β* = 1/max_i ‖A(D) - A(y_i)‖ and the position i of y_max (paper Sec. 5.4, Fig. 7).

    Args:
        deltas: the offsets Δ_i = A(y_i) − A(D), (m, d).

    Returns:
        ``(β*, i)``; β* is infinite when every offset is 0.
    """
    norms = np.linalg.norm(deltas, axis=1)
    i = int(np.argmax(norms))
    return (1.0 / float(norms[i]) if norms[i] > 0 else float("inf")), i
