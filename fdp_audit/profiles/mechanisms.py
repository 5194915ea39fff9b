"""Output perturbation with a known output density (docs/profiles.md; paper Sec. 3.2, Eq. 9).

The mechanism releases 𝒜(D) = A(D) + b. With ‖x_i‖ <= 1, a 1-Lipschitz loss and Λ-strong convexity,
the ℓ2 sensitivity of A is 2/(nΛ) (Chaudhuri et al. 2011), which fixes the noise scale:

* Laplace (radial): density ∝ exp(-β‖b‖) with β = nΛε/2, giving ε-DP. Sampled as a uniform direction
  times ‖b‖ ~ Gamma(shape=d, scale=1/β) — *not* i.i.d. per-coordinate Laplace, whose density is
  ∝ exp(-β‖b‖₁) and has a different privacy loss. Normalised density
  v(b) = β^d Γ(d/2) / (2 π^{d/2} Γ(d)) · exp(-β‖b‖).
* Gaussian: b ~ N(0, σ² I) with σ the smallest noise giving (ε, δ)-DP for ℓ2 sensitivity 2/(nΛ), by
  the exact (analytic) calibration of Balle & Wang (2018, Thm. 8).

Both are location families, so the noise at any scale is unit-scale noise divided by the *inverse
scale* s (β for Laplace, 1/σ for Gaussian): the ε sweep reuses one set of unit-scale draws for every
ε (common random numbers), which keeps its curves smooth in ε.

Privacy loss at M = A(D) + b for the neighbour with Δ = A(y) - A(D) (docs/profiles.md sign convention,
l = log C(D, M) - log C(y, M)):

* Laplace: l = β(‖Δ - b‖ - ‖b‖) = β(‖Δ‖² - 2Δ·b) / (‖Δ - b‖ + ‖b‖) — the second form avoids the
  cancellation of two nearly equal distances when ‖b‖ >> ‖Δ‖ (small ε).
* Gaussian: l = (‖Δ - b‖² - ‖b‖²) / (2σ²) = (‖Δ‖² - 2Δ·b) / (2σ²).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, Protocol

import numpy as np
from scipy.optimize import brentq
from scipy.special import gammaln, log_ndtr

MechanismName = Literal["laplace", "gaussian"]


def laplace_beta(epsilon: float, n: int, lam: float) -> float:
    """β = nΛε/2: the Laplace rate for ε-DP output perturbation with sensitivity 2/(nΛ).

    Args:
        epsilon: the target ε.
        n: the number of rows.
        lam: the regularisation strength Λ.

    Returns:
        β.
    """
    return n * lam * epsilon / 2.0


def _log_delta(sigma: float, epsilon: float, sensitivity: float) -> float:
    """log δ(σ) of the Gaussian mechanism (Balle & Wang 2018, Thm. 8), computed in log space:
    δ = Φ(Δ/2σ - εσ/Δ) - e^ε Φ(-Δ/2σ - εσ/Δ)."""
    a, b = sensitivity / (2 * sigma), epsilon * sigma / sensitivity
    first = log_ndtr(a - b)
    ratio = math.exp(min(0.0, epsilon + log_ndtr(-a - b) - first))
    return first + math.log1p(-ratio) if ratio < 1 else -math.inf


def gaussian_sigma(epsilon: float, delta: float, sensitivity: float) -> float:
    """Smallest σ for which N(0, σ² I) noise on a query of ℓ2 sensitivity ``sensitivity`` is (ε, δ)-DP
    (the analytic Gaussian mechanism, Balle & Wang 2018, Thm. 8), found by root finding on log δ(σ).

    Args:
        epsilon: the target ε.
        delta: the target δ in (0, 1).
        sensitivity: the query's ℓ2 sensitivity.

    Returns:
        σ.
    """
    target = math.log(delta)

    def excess(log_sigma: float) -> float:
        return _log_delta(math.exp(log_sigma), epsilon, sensitivity) - target

    lo, hi = math.log(sensitivity) - 1.0, math.log(sensitivity) + 1.0
    while excess(lo) < 0:
        lo -= 2.0
    while excess(hi) > 0:
        hi += 2.0
    return math.exp(brentq(excess, lo, hi, xtol=1e-14, rtol=1e-14))


def _numerator(deltas: np.ndarray, noise: np.ndarray) -> np.ndarray:
    """‖Δ_i‖² - 2Δ_i·b_k for every noise row k and neighbour i: shape (k, n), built in place."""
    numerator = noise @ deltas.T
    numerator *= -2.0
    numerator += np.einsum("ij,ij->i", deltas, deltas)[None, :]
    return numerator


class OutputPerturbation(Protocol):
    """A noise family with known density: what coverage and profiles need."""

    name: MechanismName

    @property
    def scale(self) -> float:
        """Inverse noise scale (β for Laplace, 1/σ for Gaussian): the unit of |l| in the ε sweep."""
        ...

    def sample_noise(self, k: int, d: int, rng: np.random.Generator, antithetic: bool = False) -> np.ndarray:
        """Draws of the mechanism's noise b.

        Args:
            k: the number of draws.
            d: the dimension.
            rng: the random generator.
            antithetic: draw pairs (b, −b).

        Returns:
            The noise (k, d).
        """
        ...

    def log_density(self, noise: np.ndarray) -> np.ndarray:
        """log v(b), the normalised noise density.

        Args:
            noise: noise vectors (..., d).

        Returns:
            The log densities (...).
        """
        ...

    def privacy_loss(self, deltas: np.ndarray, noise: np.ndarray) -> np.ndarray:
        """Signed l(D, y_i, A(D) + b_k) for noise rows b_k and offsets Δ_i = A(y_i) − A(D) (module docstring).

        Args:
            deltas: the offsets (n, d).
            noise: the noise rows (k, d).

        Returns:
            The privacy losses (k, n).
        """
        ...


def _antithetic(draw, k: int, d: int, rng: np.random.Generator) -> np.ndarray:
    """k draws as pairs (b, -b): every draw keeps the right law; odd moments of the noise cancel exactly,
    which removes the first-order term of the mean privacy loss (variance reduction for KL)."""
    half = draw((k + 1) // 2, d, rng)
    return np.concatenate([half, -half])[:k]


def standard_laplace_noise(k: int, d: int, rng: np.random.Generator) -> np.ndarray:
    """k draws of radial Laplace noise with β = 1: uniform direction, radius ~ Gamma(d, 1).

    Args:
        k: the number of draws.
        d: the dimension.
        rng: the random generator.

    Returns:
        The noise (k, d).
    """
    direction = rng.standard_normal((k, d))
    direction /= np.linalg.norm(direction, axis=1, keepdims=True)
    return direction * rng.gamma(shape=d, scale=1.0, size=(k, 1))


def standard_gaussian_noise(k: int, d: int, rng: np.random.Generator) -> np.ndarray:
    """k draws of N(0, I) noise.

    Args:
        k: how many vectors, one per row.
        d: the length of each.
        rng: the generator of the standard normals.

    Returns:
        Independent standard normals, (k, d).
    """
    return rng.standard_normal((k, d))


def standard_noise(name: MechanismName, k: int, d: int, rng: np.random.Generator, antithetic: bool) -> np.ndarray:
    """Unit-scale noise of family ``name``: divide by a mechanism's ``scale`` to get its noise.

    Args:
        name: ``"laplace"`` (radial, β = 1) or ``"gaussian"`` (σ = 1).
        k: the number of draws.
        d: the dimension.
        rng: the random generator.
        antithetic: draw pairs (b, −b) (odd moments cancel exactly).

    Returns:
        The noise (k, d).
    """
    draw = standard_laplace_noise if name == "laplace" else standard_gaussian_noise
    return _antithetic(draw, k, d, rng) if antithetic else draw(k, d, rng)


@dataclass(frozen=True)
class LaplaceOutputPerturbation:
    """A(D) + b with density ∝ exp(-β‖b‖)."""

    beta: float
    name: MechanismName = "laplace"

    @classmethod
    def from_epsilon(cls, epsilon: float, n: int, lam: float) -> LaplaceOutputPerturbation:
        """The ε-DP radial Laplace mechanism, β = nΛε/2 (:func:`laplace_beta`).

        Args:
            epsilon: the target ε.
            n: the number of rows.
            lam: the regularisation strength Λ.

        Returns:
            The mechanism.
        """
        return cls(laplace_beta(epsilon, n, lam))

    @property
    def scale(self) -> float:
        return self.beta

    def sample_noise(self, k: int, d: int, rng: np.random.Generator, antithetic: bool = False) -> np.ndarray:
        """Radial Laplace noise at rate β: unit-scale draws divided by β.

        Args:
            k: how many noise vectors, one per row of the result.
            d: their dimension, the model's.
            rng: the generator of the directions (normalised normals) and radii (Gamma(d, 1)).
            antithetic: whether the second half negates the first (pairs b, −b).

        Returns:
            Noise vectors with density ∝ exp(−β‖b‖), (k, d).
        """
        return standard_noise("laplace", k, d, rng, antithetic) / self.beta

    def log_density(self, noise: np.ndarray) -> np.ndarray:
        """log v(b) = d log β + log Γ(d/2) − log 2 − (d/2) log π − log Γ(d) − β‖b‖ (module docstring).

        Args:
            noise: the vectors b, last axis the dimension d.

        Returns:
            log v(b) of each vector, the last axis reduced.
        """
        d = noise.shape[-1]
        log_norm = d * math.log(self.beta) + gammaln(d / 2) - math.log(2) - (d / 2) * math.log(math.pi) - gammaln(d)
        return log_norm - self.beta * np.linalg.norm(noise, axis=-1)

    def privacy_loss(self, deltas: np.ndarray, noise: np.ndarray) -> np.ndarray:
        """Signed l(D, y_i, A(D) + b_k) for noise rows b_k (k, d) and offsets Δ_i (n, d): shape (k, n), as
        β(‖Δ‖² − 2Δ·b)/(‖Δ − b‖ + ‖b‖), free of cancellation.

        Args:
            deltas: the offsets Δ_i = A(y_i) − A(D), (n, d).
            noise: the noise rows b_k, (k, d).

        Returns:
            The privacy losses (k, n).
        """
        numerator = _numerator(deltas, noise)
        squared_b = np.einsum("kj,kj->k", noise, noise)[:, None]
        # ‖Δ - b‖ + ‖b‖, with ‖Δ - b‖² = numerator + ‖b‖² (a sum of positives: no cancellation that matters).
        denominator = numerator + squared_b
        np.maximum(denominator, 0.0, out=denominator)
        np.sqrt(denominator, out=denominator)
        denominator += np.sqrt(squared_b)
        # A zero denominator means Δ = b = 0 (M at both centres), where the numerator is 0 as well.
        np.divide(numerator, denominator, out=numerator, where=denominator > 0)
        numerator *= self.beta
        return numerator


@dataclass(frozen=True)
class GaussianOutputPerturbation:
    """A(D) + b with b ~ N(0, σ² I)."""

    sigma: float
    name: MechanismName = "gaussian"

    @classmethod
    def from_epsilon(cls, epsilon: float, n: int, lam: float, delta: float) -> GaussianOutputPerturbation:
        """The (ε, δ)-DP Gaussian mechanism for sensitivity 2/(nΛ) (:func:`gaussian_sigma`).

        Args:
            epsilon: the target ε.
            n: the number of rows.
            lam: the regularisation strength Λ.
            delta: the target δ.

        Returns:
            The mechanism.
        """
        return cls(gaussian_sigma(epsilon, delta, 2.0 / (n * lam)))

    @property
    def scale(self) -> float:
        return 1.0 / self.sigma

    def sample_noise(self, k: int, d: int, rng: np.random.Generator, antithetic: bool = False) -> np.ndarray:
        """N(0, σ² I) noise: unit-scale draws times σ.

        Args:
            k: how many noise vectors, one per row of the result.
            d: their dimension, the model's.
            rng: the generator of the standard normals.
            antithetic: whether the second half negates the first (pairs b, −b).

        Returns:
            Gaussian noise vectors of standard deviation σ per coordinate, (k, d).
        """
        return standard_noise("gaussian", k, d, rng, antithetic) * self.sigma

    def log_density(self, noise: np.ndarray) -> np.ndarray:
        """log v(b) = −(d/2) log(2πσ²) − ‖b‖²/(2σ²).

        Args:
            noise: the vectors b, last axis the dimension d.

        Returns:
            log v(b) of each vector, the last axis reduced.
        """
        d = noise.shape[-1]
        return -0.5 * d * math.log(2 * math.pi * self.sigma**2) - 0.5 * np.sum(noise**2, axis=-1) / self.sigma**2

    def privacy_loss(self, deltas: np.ndarray, noise: np.ndarray) -> np.ndarray:
        """Signed l(D, y_i, A(D) + b_k) = (‖Δ_i‖² − 2Δ_i·b_k)/(2σ²), exact (the ‖b‖² terms cancel algebraically).

        Args:
            deltas: one offset Δ_i = A(y_i) − A(D) per neighbour, (n, d).
            noise: one noise vector b_k per model point, (k, d).

        Returns:
            l for every model point and neighbour, (k, n).
        """
        numerator = _numerator(deltas, noise)
        numerator /= 2.0 * self.sigma**2
        return numerator


def make_mechanism(
    name: MechanismName, epsilon: float, n: int, lam: float, delta: float = 1e-5
) -> LaplaceOutputPerturbation | GaussianOutputPerturbation:
    """The output-perturbation mechanism ``name`` calibrated to ε (and δ for the Gaussian one).

    Args:
        name: ``"laplace"`` or ``"gaussian"``.
        epsilon: the target ε.
        n: the number of rows.
        lam: the regularisation strength Λ.
        delta: the target δ (Gaussian only).

    Returns:
        The mechanism.
    """
    if name == "laplace":
        return LaplaceOutputPerturbation.from_epsilon(epsilon, n, lam)
    return GaussianOutputPerturbation.from_epsilon(epsilon, n, lam, delta)
