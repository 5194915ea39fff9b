"""The Fréchet distance between two feature distributions (docs/generative.md).

For Gaussians N(μ₁, Σ₁) and N(μ₂, Σ₂) the squared 2-Wasserstein (Fréchet) distance is

    d² = ‖μ₁ - μ₂‖² + tr Σ₁ + tr Σ₂ - 2 tr (Σ₁^{1/2} Σ₂ Σ₁^{1/2})^{1/2}

(Dowson & Landau 1982; the "FID" of Heusel et al. 2017 is this number for Inception-v3 pool features). Here it is
computed from the sample means and covariances of two feature sets. ``tr (Σ₁^{1/2} Σ₂ Σ₁^{1/2})^{1/2}`` is the sum
of the square roots of the eigenvalues of the symmetric positive semi-definite ``Σ₁^{1/2} Σ₂ Σ₁^{1/2}`` (float64,
eigenvalues below zero from rounding set to zero), which stays exact for singular covariances where a general
matrix square root of Σ₁Σ₂ loses accuracy.

The features are those of a classifier the suite trains (:mod:`fdp_audit.generative.quality.classifier`), so the
numbers are *not* comparable with Inception FID values such as the FDP paper's: they rank models trained on the
same data and judged by the same classifier, nothing more. The plug-in estimate is biased upward by finite
samples (two samples of one distribution give a positive distance); :func:`null_distances` measures that floor.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def gaussian_frechet(mean_a: np.ndarray, cov_a: np.ndarray, mean_b: np.ndarray, cov_b: np.ndarray) -> float:
    """``d²`` between N(mean_a, cov_a) and N(mean_b, cov_b) (module doc), never below 0.

    Args:
        mean_a: μ₁, ``[d]``.
        cov_a: Σ₁, ``[d, d]`` (a scalar for d = 1).
        mean_b: μ₂, ``[d]``.
        cov_b: Σ₂, ``[d, d]`` (a scalar for d = 1).

    Returns:
        The squared Fréchet distance.
    """
    mean_a, mean_b = np.asarray(mean_a, dtype=float), np.asarray(mean_b, dtype=float)
    cov_a, cov_b = np.atleast_2d(np.asarray(cov_a, dtype=float)), np.atleast_2d(np.asarray(cov_b, dtype=float))
    values, vectors = np.linalg.eigh((cov_a + cov_a.T) / 2)
    root_a = (vectors * np.sqrt(np.clip(values, 0.0, None))) @ vectors.T
    middle = root_a @ cov_b @ root_a
    cross = float(np.sqrt(np.clip(np.linalg.eigvalsh((middle + middle.T) / 2), 0.0, None)).sum())
    distance = float(np.sum((mean_a - mean_b) ** 2) + np.trace(cov_a) + np.trace(cov_b) - 2 * cross)
    return max(distance, 0.0)


def frechet_distance(features_a: np.ndarray, features_b: np.ndarray) -> float:
    """``d²`` between the Gaussians fitted (sample mean, unbiased covariance) to two ``[n, d]`` feature sets.

    Args:
        features_a: the first feature set ``[n_a, d]``.
        features_b: the second feature set ``[n_b, d]``.

    Returns:
        The squared Fréchet distance.

    Raises:
        ValueError: the sets are not two-dimensional, differ in width, or one has fewer than 2 rows.
    """
    a, b = np.asarray(features_a, dtype=float), np.asarray(features_b, dtype=float)
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[1] or min(len(a), len(b)) < 2:
        raise ValueError(f"need two [n >= 2, d] feature sets of one width, got {a.shape} and {b.shape}")
    return gaussian_frechet(a.mean(0), np.cov(a, rowvar=False), b.mean(0), np.cov(b, rowvar=False))


def per_class_distances(features: np.ndarray, labels: np.ndarray, reference: np.ndarray,
                        reference_labels: np.ndarray, classes: Sequence[int]) -> dict[int, float]:
    """``d²`` within each class: the features of class c against the reference features of class c.

    Args:
        features: the features judged ``[n, d]``.
        labels: their classes ``[n]``.
        reference: the reference features ``[m, d]``.
        reference_labels: their classes ``[m]``.
        classes: the classes compared.

    Returns:
        ``d²`` by class.

    Raises:
        ValueError: a class has fewer than 2 rows on either side.
    """
    return {int(c): frechet_distance(features[labels == c], reference[reference_labels == c]) for c in classes}


def null_distances(features: np.ndarray, size_a: int, size_b: int, repeats: int, seed: int) -> np.ndarray:
    """``repeats`` distances between two disjoint random subsets (``size_a``, ``size_b`` rows) of one feature set:
    the distance two samples of the same distribution show at these sizes (the estimator's floor and spread).

    Args:
        features: the feature set ``[n, d]``.
        size_a: rows of the first subset.
        size_b: rows of the second subset.
        repeats: how many pairs of subsets.
        seed: the seed of the permutations.

    Returns:
        The distances ``[repeats]``.

    Raises:
        ValueError: the feature set has fewer than ``size_a + size_b`` rows.
    """
    if size_a + size_b > len(features):
        raise ValueError(f"need {size_a + size_b} rows for two disjoint subsets, have {len(features)}")
    rng = np.random.default_rng(seed)
    out = np.empty(repeats)
    for r in range(repeats):
        order = rng.permutation(len(features))
        out[r] = frechet_distance(features[order[:size_a]], features[order[size_a:size_a + size_b]])
    return out
