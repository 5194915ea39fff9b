"""The base model A(D): L2-regularised logistic regression without intercept (docs/profiles.md; paper Eqs. 2-4).

    J(w) = (1/n) Σ_i l_i(w) + (Λ/2) ‖w‖²,   l_i(w) = log(1 + exp(-y_i wᵀx_i)),   A(D) = argmin_w J(w).

Per-row gradient ∇l_i(w) = -y_i σ(-y_i wᵀx_i) x_i and Hessian σ(m_i)(1 - σ(m_i)) x_i x_iᵀ with
m_i = y_i wᵀx_i. J is Λ-strongly convex, so Newton's method with a backtracking line search converges
globally and quadratically; it is run until the step reaches the rounding floor ("machine precision").
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import expit, log_expit

# A Newton step below STEP_TOL·(1 + ‖w‖) is at the rounding floor of the gradient sum.
STEP_TOL = 16 * np.finfo(np.float64).eps
MAX_ITER = 100


def newton_converged(size: np.ndarray, previous: np.ndarray, w_norm: np.ndarray) -> np.ndarray:
    """Stopping rule shared by the base and the batched neighbour solvers, given the last two Newton
    step sizes: converged when the step is at the rounding floor; or when quadratic convergence
    (‖s_{k+1}‖ ≈ C‖s_k‖², C estimated as ‖s_k‖/‖s_{k-1}‖²) predicts the next step below that floor;
    or when a step near the floor stopped shrinking (rounding noise has taken over).

    Args:
        size: the last step's norm ‖s_k‖ (one per problem, or a scalar).
        previous: the step before's norm ‖s_{k-1}‖ (inf before the second step).
        w_norm: the current ‖w‖; the floor is :data:`STEP_TOL`·(1 + ‖w‖).

    Returns:
        Whether each problem has converged.
    """
    floor = STEP_TOL * (1.0 + w_norm)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        predicted = np.where(np.isfinite(previous) & (previous > 0), size**3 / previous**2, np.inf)
    return (size <= floor) | (predicted <= floor) | ((size >= previous) & (size <= 1e3 * floor))


@dataclass(frozen=True)
class NewtonResult:
    """The minimiser of the regularised logistic objective J found by Newton's method (:func:`fit_newton`).

    Attributes:
        w: the weights, shape (d,).
        iterations: the Newton iterations taken.
        gradient_norm: ‖∇J(w)‖ at the returned weights.
    """

    w: np.ndarray
    iterations: int
    gradient_norm: float


def objective(w: np.ndarray, X: np.ndarray, y: np.ndarray, lam: float) -> float:
    """J(w) = mean log(1 + e^{-y wᵀx}) + (Λ/2)‖w‖², evaluated without overflow.

    Args:
        w: the weights (d,).
        X: the design (n, d).
        y: the labels in {-1, +1}, (n,).
        lam: the regularisation strength Λ.

    Returns:
        J(w).
    """
    return float(-log_expit(y * (X @ w)).mean() + 0.5 * lam * w @ w)


def loss_gradients(w: np.ndarray, X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Per-row gradients ∇l_i(w) = -y_i σ(-y_i wᵀx_i) x_i, shape (n, d).

    Args:
        w: the weights (d,).
        X: the design (n, d).
        y: the labels in {-1, +1}, (n,).

    Returns:
        The gradients (n, d).
    """
    return (-y * expit(-y * (X @ w)))[:, None] * X


def _gradient_hessian(w: np.ndarray, X: np.ndarray, y: np.ndarray, lam: float) -> tuple[np.ndarray, np.ndarray]:
    margins = y * (X @ w)
    p = expit(-margins)
    gradient = X.T @ (-y * p) / len(y) + lam * w
    curvature = p * (1.0 - p)
    hessian = (X.T * curvature) @ X / len(y) + lam * np.eye(X.shape[1])
    return gradient, hessian


def fit_newton(
    X: np.ndarray, y: np.ndarray, lam: float, w0: np.ndarray | None = None, max_iter: int = MAX_ITER
) -> NewtonResult:
    """Minimise J by damped Newton from ``w0`` (default 0) until the step is at the rounding floor.

    Stops by :func:`newton_converged`.

    Args:
        X: the design (n, d).
        y: the labels in {-1, +1}, (n,).
        lam: the regularisation strength Λ (> 0).
        w0: the starting weights (d,); None starts at 0.
        max_iter: the most Newton steps.

    Returns:
        The minimiser A(D), the steps taken and the final gradient norm ‖∇J‖.

    Raises:
        RuntimeError: Newton did not converge in ``max_iter`` steps.
    """
    w = np.zeros(X.shape[1]) if w0 is None else np.array(w0, dtype=np.float64)
    previous = np.inf
    for iteration in range(1, max_iter + 1):  # noqa: B007 - the count is returned
        gradient, hessian = _gradient_hessian(w, X, y, lam)
        step = np.linalg.solve(hessian, gradient)
        value, t = objective(w, X, y, lam), 1.0
        decrement = float(gradient @ step)  # Newton decrement squared: the predicted decrease of J, x2
        # Armijo backtracking far from the optimum; near it the decrease is below the rounding
        # resolution of J, where the line search cannot judge and the full Newton step is safe.
        if decrement > 1e-10 * (1.0 + abs(value)):
            while t > 1e-10 and objective(w - t * step, X, y, lam) > value - 1e-4 * t * decrement:
                t *= 0.5
        w = w - t * step
        size = np.linalg.norm(t * step)
        if newton_converged(size, previous, np.linalg.norm(w)):
            break
        previous = size
    else:
        raise RuntimeError(f"Newton did not converge in {max_iter} iterations")
    gradient, _ = _gradient_hessian(w, X, y, lam)
    return NewtonResult(w, iteration, float(np.linalg.norm(gradient)))
