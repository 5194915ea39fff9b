"""Neighbouring data sets and their models (docs/profiles.md; paper Secs. 5.1-5.2, Eqs. 13-22).

Neighbours, one per row i:

* ``remove`` (DP): y_i = D without row i (n - 1 rows).
* ``replace`` (FDP, Definition 5 with the same Ψ): y_i = D with row i's *protected* features set to
  their reference value — the column mean for a numeric column (0 in normalised units), the most
  frequent category for a categorical one. The public part Ψ(x_i) and the label are unchanged, and the
  replaced row never has a larger norm than the original (so ‖x'_i‖ <= 1 still holds). A row already
  at the reference value has y_i = D (Δ = 0, no privacy loss). This is the "masked" record the suite's
  ``mask`` public loss sees (docs/training.md).

Exact neighbour models A(y_i) minimise the neighbour objective
J_i(w) = (1/n_i)[Σ_j l_j(w) - l_i(w) + l(w; x'_i, y_i)] + (Λ/2)‖w‖² (the last term for ``replace``
only; n_i = n - 1 or n). They are found by Newton's method warm-started at A(D), batched over all
neighbours at once: one (n × m) matrix of margins per block of m neighbours, no Python loop over rows.

Okumura sphere (Eqs. 13-16). A neighbour that removes the rows S and adds the rows A has
n₁ = n₀ - |S| + |A| rows and g = Σ_A ∇l(A(D)) - Σ_S ∇l(A(D)). Strong convexity of J_i gives
‖A(y_i) - R‖ <= r with

    R = A(D) - ((|A| - |S|)/(2n₁)) A(D) - g/(2Λn₁),      r = ‖R - A(D)‖,

so A(D) lies on the sphere, and the worst-case point across it is A_wc = 2R - A(D). For a removal
(|S| = 1, |A| = 0) this is A_wc = A(D) + (1/(n-1))(A(D) + (1/Λ)∇l_i(A(D))) (Eq. 22); for a
replacement (|S| = |A| = 1, n₁ = n) A_wc = A(D) - (1/(Λn))(∇l(A(D); x'_i) - ∇l_i(A(D))).
To first order A(y_i) - A(D) = Λ H⁻¹ (A_wc - A(D)) with H ⪰ ΛI the Hessian of J, so A_wc is exact
when the data curvature is negligible against Λ — which the paper's row normalisation makes nearly so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch

from fdp_audit.profiles.logistic import MAX_ITER, loss_gradients, newton_converged

NeighbourKind = Literal["remove", "replace"]


@dataclass(frozen=True)
class Neighbours:
    """The neighbour of each row in ``rows``: its removal, or its replacement by ``replacement[k]``."""

    kind: NeighbourKind
    rows: np.ndarray
    replacement: np.ndarray | None = None

    def __len__(self) -> int:
        return int(self.rows.size)


@dataclass(frozen=True)
class NeighbourModels:
    """Exact A(y_i) (m, d) with the Newton iterations each needed and the last step size (0 and 0 for a
    neighbour equal to D)."""

    models: np.ndarray
    iterations: np.ndarray
    last_step: np.ndarray


def removal_neighbours(n: int, rows: np.ndarray | None = None) -> Neighbours:
    """The removal neighbours (DP): y_i = D without row i, for each row in ``rows``.

    Args:
        n: the number of rows of D.
        rows: the rows to remove, one neighbour each; None takes every row.

    Returns:
        The neighbours.
    """
    return Neighbours("remove", np.arange(n) if rows is None else np.asarray(rows))


def replacement_neighbours(
    X: np.ndarray, protected: np.ndarray, reference: np.ndarray, rows: np.ndarray | None = None
) -> Neighbours:
    """Row i's features where ``protected`` is true set to ``reference`` (normalised units).

    Args:
        X: the design (n, d).
        protected: boolean mask of the protected features (d,).
        reference: each feature's reference value (d,).
        rows: the rows to replace, one neighbour each; None takes every row.

    Returns:
        The FDP replacement neighbours, with each replaced row.
    """
    rows = np.arange(X.shape[0]) if rows is None else np.asarray(rows)
    replaced = X[rows].copy()
    replaced[:, protected] = reference[protected]
    return Neighbours("replace", rows, replaced)


def _sizes(n: int, kind: NeighbourKind) -> tuple[int, int]:
    """(n₁, |A| - |S|) for one neighbour of the given kind."""
    return (n - 1, -1) if kind == "remove" else (n, 0)


def okumura_spheres(
    X: np.ndarray, y: np.ndarray, w: np.ndarray, lam: float, neighbours: Neighbours
) -> tuple[np.ndarray, np.ndarray]:
    """Centres R (m, d) and radii r (m,) of the Okumura spheres that contain every A(y_i) (Eqs. 13-16,
    module docstring).

    Args:
        X: the design (n, d).
        y: the labels in {-1, +1}, (n,).
        w: the base model A(D), (d,).
        lam: the regularisation strength Λ.
        neighbours: the neighbours (removal or replacement).

    Returns:
        ``(centres, radii)``.
    """
    n1, added_minus_removed = _sizes(X.shape[0], neighbours.kind)
    g = -loss_gradients(w, X[neighbours.rows], y[neighbours.rows])
    if neighbours.kind == "replace":
        g += loss_gradients(w, neighbours.replacement, y[neighbours.rows])
    centres = w[None, :] * (1.0 - added_minus_removed / (2.0 * n1)) - g / (2.0 * lam * n1)
    return centres, np.linalg.norm(centres - w[None, :], axis=1)


def worst_case_points(X: np.ndarray, y: np.ndarray, w: np.ndarray, lam: float, neighbours: Neighbours) -> np.ndarray:
    """A_wc(y_i) = 2R - A(D): the point of the Okumura sphere across from A(D).

    Args:
        X: the normalised rows x_i, each of norm at most 1, (n, d).
        y: their ±1 labels, (n,).
        w: A(D), the minimiser of J on the whole data set, (d,).
        lam: Λ of the objective J.
        neighbours: the m neighbouring data sets whose far points are wanted.

    Returns:
        The worst-case points (m, d).
    """
    centres, _ = okumura_spheres(X, y, w, lam, neighbours)
    return 2.0 * centres - w[None, :]


def _row_terms(w: torch.Tensor, x: torch.Tensor, label: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Gradient (m, d) and Hessian (m, d, d) of l(w_k; x_k, label_k) for paired rows."""
    p = torch.sigmoid(-label * (x * w).sum(dim=1))
    gradient = (-label * p)[:, None] * x
    hessian = (p * (1 - p))[:, None, None] * x[:, :, None] * x[:, None, :]
    return gradient, hessian


def exact_neighbour_models(
    X: np.ndarray,
    y: np.ndarray,
    w: np.ndarray,
    lam: float,
    neighbours: Neighbours,
    block: int = 512,
    max_iter: int = MAX_ITER,
) -> NeighbourModels:
    """A(y_i) for every neighbour by batched Newton warm-started at A(D) = ``w``, to the rounding floor.

    Each block of m neighbours costs O(n·m·d²) per iteration (margins X Wᵀ, full-data gradients and
    Hessians as matrix products); the own-row term of each neighbour is then taken out (and the
    replacement row's term added). Neighbours drop out of the block as they converge.

    Args:
        X: the data set's normalised rows, (n, d).
        y: their labels, ±1, (n,).
        w: A(D), the start of every neighbour's Newton solve, (d,).
        lam: Λ, the L2 regularisation of every J_i.
        neighbours: the m neighbouring data sets y_i to solve for.
        block: neighbours solved together.
        max_iter: the most Newton steps per neighbour.

    Returns:
        The models A(y_i) (m, d), the iterations each took and its last step size (0 and 0 for a replacement
        equal to the row).

    Raises:
        RuntimeError: some neighbour did not converge in ``max_iter`` steps.
    """
    n, d = X.shape
    n1, _ = _sizes(n, neighbours.kind)
    Xt, yt = torch.from_numpy(np.ascontiguousarray(X, dtype=np.float64)), torch.from_numpy(y.astype(np.float64))
    signed = yt[:, None] * Xt  # y_j x_j: margins are signed @ w, so the (n, m) matrices are built once
    outer = (Xt[:, :, None] * Xt[:, None, :]).reshape(n, d * d)
    eye = torch.eye(d, dtype=torch.float64)
    rows = torch.from_numpy(neighbours.rows)
    replacement = None if neighbours.replacement is None else torch.from_numpy(neighbours.replacement)
    m = len(neighbours)
    models = torch.from_numpy(np.tile(w, (m, 1)))
    iterations = torch.zeros(m, dtype=torch.int64)
    last_step = torch.zeros(m, dtype=torch.float64)
    # A replacement equal to the row itself leaves D unchanged: A(y_i) = A(D) exactly, nothing to solve
    # (solving would only add rounding noise, which a relative error would then divide by).
    todo = np.arange(m)
    if neighbours.replacement is not None:
        todo = todo[np.any(neighbours.replacement != X[neighbours.rows], axis=1)]
    for start in range(0, todo.size, block):
        active = torch.from_numpy(todo[start : start + block])
        previous = torch.full((active.numel(),), float("inf"), dtype=torch.float64)
        for _ in range(max_iter):
            W = models[active]
            # In-place element-wise work on the (n, m) matrix: this loop is memory-bound.
            p = torch.sigmoid_((signed @ W.T).neg_())  # σ(-y_j w_kᵀx_j)
            gradient = -(signed.T @ p).T
            hessian = (outer.T @ p.addcmul_(p, p, value=-1.0)).T.reshape(-1, d, d)  # σ(1 - σ)
            own_g, own_h = _row_terms(W, Xt[rows[active]], yt[rows[active]])
            gradient, hessian = gradient - own_g, hessian - own_h
            if replacement is not None:
                new_g, new_h = _row_terms(W, replacement[active], yt[rows[active]])
                gradient, hessian = gradient + new_g, hessian + new_h
            step = torch.linalg.solve(hessian / n1 + lam * eye, gradient / n1 + lam * W)
            models[active] = W - step
            size = torch.linalg.vector_norm(step, dim=1)
            iterations[active] += 1
            last_step[active] = size
            done = torch.from_numpy(
                newton_converged(
                    size.numpy(), previous.numpy(), torch.linalg.vector_norm(models[active], dim=1).numpy()
                )
            )
            active, previous = active[~done], size[~done]
            if active.numel() == 0:
                break
        if active.numel():
            raise RuntimeError(f"Newton did not converge for {active.numel()} neighbours in {max_iter} iterations")
    return NeighbourModels(models.numpy(), iterations.numpy(), last_step.numpy())
