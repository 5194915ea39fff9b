"""diffprivlib's LogisticRegression as a third-party mechanism (docs/profiles.md; paper Sec. 2, Fig. 1).

diffprivlib (IBM, MIT licence) implements ε-DP logistic regression by *objective perturbation*
(Chaudhuri et al. 2011): there is no closed-form output density, so the paper only samples it for the
scatter figure. It is an optional dependency, imported lazily; callers check
:func:`unavailable_reason`.

Its objective is mean log-loss + (1/(2Cn))‖w‖², so C = 1/(nΛ) gives the same Λ as our base model;
``data_norm = 1`` matches the row normalisation (‖x_i‖ <= 1) and no intercept is fitted.
"""

from __future__ import annotations

import importlib
import warnings

import numpy as np


def unavailable_reason() -> str | None:
    """None when diffprivlib imports *and* builds its LogisticRegression; otherwise why not.

    Being installed is not enough. diffprivlib 0.6.6 (the newest release) fails twice against
    scikit-learn 1.9: its package import reaches ``diffprivlib.models.forest``, which imports
    ``sklearn.tree._tree.DOUBLE`` (no longer exported), and, past that, its LogisticRegression passes
    ``multi_class=`` to scikit-learn's constructor, which no longer takes it (removed in 1.8).

    Returns:
        None, or the error's type and message.
    """
    try:
        models = importlib.import_module("diffprivlib.models")
        models.LogisticRegression(epsilon=1.0, data_norm=1.0, fit_intercept=False)
    except Exception as err:  # noqa: BLE001 - any failure means the optional mechanism cannot run here
        return f"{type(err).__name__}: {err}"
    return None


def diffprivlib_samples(
    X: np.ndarray, y: np.ndarray, epsilon: float, lam: float, samples: int, rng: np.random.Generator
) -> np.ndarray:
    """``samples`` independent fits of diffprivlib's ε-DP logistic regression on (X, y): (samples, d).

    Args:
        X: the design (n, d), rows of norm ≤ 1.
        y: the labels (n,).
        epsilon: the ε of each fit.
        lam: the regularisation strength Λ (diffprivlib's C = 1/(nΛ)).
        samples: the number of fits.
        rng: the random generator the fits' seeds come from.

    Returns:
        The fitted weights (samples, d).

    Raises:
        ImportError: diffprivlib is not installed.
    """
    from diffprivlib.models import LogisticRegression

    seeds = rng.integers(0, 2**31 - 1, size=samples)
    models = np.empty((samples, X.shape[1]))
    with warnings.catch_warnings():
        # Objective perturbation can leave L-BFGS short of its tolerance; the draw is still a sample.
        warnings.simplefilter("ignore")
        for k, seed in enumerate(seeds):
            clf = LogisticRegression(
                epsilon=epsilon, data_norm=1.0, C=1.0 / (X.shape[0] * lam), fit_intercept=False, random_state=int(seed)
            )
            models[k] = clf.fit(X, y).coef_[0]
    return models
