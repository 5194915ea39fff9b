"""Coverage, privacy loss and its mean (docs/profiles.md; paper Secs. 4.1-4.4, Eqs. 5-9).

Coverage of a model point M by the mechanism on data set y: C(y, M) = Pr[‖𝒜(y) - M‖ < c] (Eq. 5).
Empirically it is the fraction of K samples of 𝒜(y) within the cutoff radius c of M; as c → 0,
C(y, M)/vol(ball_c) → f_y(M), the output density (Eq. 7), which is the *analytic* coverage used when
the density is known. The privacy loss is l(D, y, M) = log C(D, M) - log C(y, M) (Eq. 8, with the sign of
docs/profiles.md).

Its mean over M ~ 𝒜(D) is E_M[l] = KL(𝒜(D) ‖ 𝒜(y)) (paper footnote 3):

* Gaussian: KL = ‖Δ‖² / (2σ²).
* Radial Laplace: writing b = u/β, l = ‖βΔ - u‖ - ‖u‖ depends on Δ only through s = β‖Δ‖ (the noise is
  isotropic), so KL = κ_d(s) for one universal function per dimension d — the reason per-neighbour
  curves collapse when drawn against β‖Δ_i‖ (paper Fig. 7). κ_1(s) = s - 1 + e^{-s}; for small s,
  κ_d(s) → s²/(2d) (expand l to second order in s and use E[1/‖u‖] = 1/(d-1) for ‖u‖ ~ Gamma(d, 1)).
  :func:`laplace_mean_loss` evaluates κ_d by quadrature (and :func:`laplace_mean_abs_loss` the
  universal curve of the mean |l|).
"""

from __future__ import annotations

import numpy as np
from scipy.integrate import quad_vec
from scipy.special import gammaln, roots_jacobi

from fdp_audit.profiles.mechanisms import OutputPerturbation

DIRECTION_NODES = 96


def analytic_log_coverage(mechanism: OutputPerturbation, centres: np.ndarray, points: np.ndarray) -> np.ndarray:
    """log f_y(M) (the c → 0 coverage, Eq. 7) for distribution centres A(y) (m, d) and points M (k, d):
    shape (k, m).

    Args:
        mechanism: the output perturbation, whose noise density f is known.
        centres: the neighbour models A(y), (m, d).
        points: the model points M, (k, d).

    Returns:
        log f_y(M) = log v(M − A(y)) for every point and centre, (k, m).
    """
    return mechanism.log_density(points[:, None, :] - centres[None, :, :])


def empirical_coverage(samples: np.ndarray, points: np.ndarray, cutoff: float) -> np.ndarray:
    """Fraction of ``samples`` (K, d) of a mechanism within ``cutoff`` of each point (k, d) (Eq. 5).

    Args:
        samples: K releases of the mechanism, (K, d).
        points: the model points M, (k, d).
        cutoff: the radius c.

    Returns:
        The coverage estimate Ĉ(y, M) of each point, (k,).
    """
    squared = (
        np.einsum("kj,kj->k", points, points)[:, None]
        - 2.0 * points @ samples.T
        + np.einsum("sj,sj->s", samples, samples)[None, :]
    )
    return (squared < cutoff**2).mean(axis=1)


def mean_loss(
    mechanism: OutputPerturbation, deltas: np.ndarray, samples: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Monte Carlo E_M[l(D, y_i, M)] = KL(𝒜(D) ‖ 𝒜(y_i)) per neighbour, with its standard error.

    Uses antithetic pairs M = A(D) ± b: the term of l that is linear in b cancels within each pair, so
    the estimate stays accurate for small β‖Δ‖ where the mean (≈ s²/(2d)) is far below the spread of l.
    The standard error is that of the mean of the ``samples // 2`` independent pair averages.

    Args:
        mechanism: the output perturbation.
        deltas: the offsets Δ_i = A(y_i) − A(D), (n, d).
        samples: noise draws (pairs of them are averaged).
        rng: the random generator.

    Returns:
        ``(mean, standard error)`` per neighbour, each (n,); the error is NaN with a single pair.
    """
    half = max(samples // 2, 1)
    noise = mechanism.sample_noise(2 * half, deltas.shape[1], rng, antithetic=True)
    loss = mechanism.privacy_loss(deltas, noise)
    pairs = 0.5 * (loss[:half] + loss[half:])
    spread = pairs.std(axis=0, ddof=1) if half > 1 else np.full(deltas.shape[0], np.nan)
    return pairs.mean(axis=0), spread / np.sqrt(half)


def gaussian_kl(delta_norms: np.ndarray, sigma: float) -> np.ndarray:
    """KL(N(A(D), σ²I) ‖ N(A(y), σ²I)) = ‖Δ‖²/(2σ²).

    Args:
        delta_norms: the distances ‖Δ_i‖ between the centres.
        sigma: the noise standard deviation σ.

    Returns:
        The KL divergence of each neighbour, shaped like ``delta_norms``.
    """
    return np.asarray(delta_norms) ** 2 / (2.0 * sigma**2)


def laplace_mean_loss(s: np.ndarray | float, d: int) -> np.ndarray:
    """κ_d(s) = E[‖u - s e‖ - ‖u‖] for radial Laplace u (β = 1) in d dimensions: the KL divergence
    between radial Laplace output perturbations whose centres are s/β apart. See :func:`_radial_mean`.

    Args:
        s: the scaled distances s = β‖Δ‖ (≥ 0).
        d: the dimension.

    Returns:
        κ_d(s), shaped like ``s``.
    """
    return _radial_mean(s, d, absolute=False)


def laplace_mean_abs_loss(s: np.ndarray | float, d: int) -> np.ndarray:
    """E[|‖u - s e‖ - ‖u‖|]: the mean |l| of a neighbour at s = β‖Δ‖ (→ s·E|cos θ| as s → 0, → s as
    s → ∞), the universal curve of the per-neighbour mean |l|. The kink of |·| inside the direction
    integral limits the quadrature to a relative accuracy of about 1e-4 (enough for a figure).

    Args:
        s: the scaled distances s = β‖Δ‖ (≥ 0).
        d: the dimension.

    Returns:
        The mean |l|, shaped like ``s``.
    """
    return _radial_mean(s, d, absolute=True)


def _radial_mean(s: np.ndarray | float, d: int, absolute: bool) -> np.ndarray:
    """E[f(‖u - s e‖ - ‖u‖)] for radial Laplace u (β = 1), f the identity or |·|, by quadrature.

    The direction enters through t = cos∠(u, e), whose density is ∝ (1 - t²)^{(d-3)/2} (Gauss-Jacobi
    nodes; two atoms t = ±1 when d = 1); the radius r ~ Gamma(d, 1) is integrated adaptively, split at
    the kink r = s. The integrand is the cancellation-free form (s² - 2srt)/(‖u - s e‖ + r)."""
    shape = np.shape(s)
    s = np.asarray(s, dtype=np.float64).ravel()
    if d == 1:
        t, weight = np.array([-1.0, 1.0]), np.array([0.5, 0.5])
    else:
        t, weight = roots_jacobi(DIRECTION_NODES, (d - 3) / 2, (d - 3) / 2)
        weight = weight / weight.sum()
    log_norm = -gammaln(d)

    def integrand(r: np.ndarray) -> np.ndarray:
        r = r[:, None]
        numerator = s[:, None] ** 2 - 2.0 * s[:, None] * r * t
        distance = np.sqrt(np.maximum(r * r - 2.0 * r * s[:, None] * t + s[:, None] ** 2, 0.0))
        with np.errstate(divide="ignore", invalid="ignore"):
            loss = np.where(distance + r > 0, numerator / (distance + r), 0.0)
        if absolute:
            loss = np.abs(loss)
        density = np.exp((d - 1) * np.log(np.maximum(r[:, 0], 1e-300)) - r[:, 0] + log_norm)
        return (loss @ weight) * density

    # The |·| kink makes tight radial tolerances slow without gaining accuracy (the direction
    # quadrature caps it near 1e-4), hence the looser tolerance for the absolute value.
    epsrel = 1e-5 if absolute else 1e-10
    inner, _ = quad_vec(lambda v: s * integrand(s * v), 0.0, 1.0, epsabs=1e-13, epsrel=epsrel)
    outer, _ = quad_vec(lambda v: integrand(s + v), 0.0, np.inf, epsabs=1e-13, epsrel=epsrel)
    return (inner + outer).reshape(shape)
