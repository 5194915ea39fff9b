"""Data for the CorrDP experiments: the Adult table as the paper used it and the synthetic Gaussian
ridge data of paper Sec. 5.1, encoded as a design matrix whose columns remember their raw feature."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from fdp_audit.corrdp.noise import INTERCEPT
from fdp_audit.corrdp.sgd import Loss
from fdp_audit.data.datasets import load_adult
from fdp_audit.errors import BadInputError


@dataclass(frozen=True)
class Design:
    """Design matrix ``x`` (n × p), target ``y``, the raw feature of each column and the sensitive set."""

    x: np.ndarray
    y: np.ndarray
    groups: tuple[str, ...]
    sensitive: frozenset[str]
    loss: Loss

    @property
    def n(self) -> int:
        return self.x.shape[0]


def adult_columns() -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """Adult train and test splits together, rows with a missing value dropped (45,222 rows).

    The paper used the Kaggle copy, which is both UCI splits in one file, and kept 45,175 rows after
    its (unstated) filtering.

    Returns:
        ``(columns by name, each column's kind)``.
    """
    train, test = load_adult("train"), load_adult("test")
    columns = {name: np.concatenate([train.columns[name], test.columns[name]]) for name in train.columns}
    return columns, dict(train.kinds)


def check_adult_features(kinds: dict[str, str], sensitive: Sequence[str], insensitive: Sequence[str]) -> None:
    """Bad input unless both feature lists name distinct Adult columns (and never the label).

    Args:
        kinds: the Adult columns' kinds by name.
        sensitive: the sensitive columns (``corrdp.sensitive``).
        insensitive: the insensitive columns (``corrdp.insensitive``).

    Raises:
        BadInputError: a list is empty, names an unknown column or the label, repeats a column, or the two lists
            overlap.
    """
    for field, names in (("corrdp.sensitive", sensitive), ("corrdp.insensitive", insensitive)):
        if not names:
            raise BadInputError("must list at least one column", field)
        unknown = [c for c in names if c not in kinds or c == "income"]
        if unknown:
            raise BadInputError(f"not an Adult feature column: {unknown}", field)
        if len(set(names)) != len(names):
            raise BadInputError("duplicate column", field)
    overlap = sorted(set(sensitive) & set(insensitive))
    if overlap:
        raise BadInputError(f"column(s) {overlap} listed as both sensitive and insensitive", "corrdp.insensitive")


def encode(
    columns: dict[str, np.ndarray],
    kinds: dict[str, str],
    features: Sequence[str],
    sensitive: Sequence[str],
    y: np.ndarray,
    loss: Loss,
) -> Design:
    """Numeric columns min-max scaled to [0, 1] (the paper's MinMaxScaler), categorical ones one-hot
    (every level, all columns of a feature sharing its noise, paper App. E.2), plus an intercept.

    Args:
        columns: the table's columns by name.
        kinds: each column's kind, ``"numeric"`` or categorical.
        features: the columns encoded, in order.
        sensitive: the sensitive ones among them.
        y: the target of each row.
        loss: the GLM's loss, ``"squared"`` or ``"logistic"``.

    Returns:
        The design, each column tagged with its raw feature (the last one :data:`INTERCEPT`).
    """
    blocks, groups = [], []
    for name in features:
        values = columns[name]
        if kinds[name] == "numeric":
            lo, hi = values.min(), values.max()
            blocks.append(((values - lo) / (hi - lo if hi > lo else 1.0))[:, None])
            groups.append(name)
        else:
            levels = np.unique(values)
            blocks.append((values[:, None] == levels[None, :]).astype(float))
            groups.extend([name] * len(levels))
    blocks.append(np.ones((len(y), 1)))
    groups.append(INTERCEPT)
    return Design(np.hstack(blocks), y.astype(float), tuple(groups), frozenset(sensitive), loss)


def adult_design(sensitive: Sequence[str], insensitive: Sequence[str]) -> Design:
    """Logistic regression of income > 50K on the sensitive and insensitive Adult features.

    Args:
        sensitive: the sensitive Adult columns.
        insensitive: the insensitive Adult columns.

    Returns:
        The design (45,222 rows).

    Raises:
        BadInputError: the feature lists are refused (:func:`check_adult_features`).
    """
    columns, kinds = adult_columns()
    check_adult_features(kinds, sensitive, insensitive)
    y = (columns["income"] == ">50K").astype(float)
    return encode(columns, kinds, [*sensitive, *insensitive], sensitive, y, "logistic")


@dataclass(frozen=True)
class SyntheticRidge:
    """Paper Sec. 5.1: X ~ N(μ, Σ), Y = θᵀX + η, η ~ N(0, 5²); S = the first m_s coordinates."""

    x: np.ndarray
    y: np.ndarray
    mean: np.ndarray
    covariance: np.ndarray
    m_s: int

    def design(self) -> Design:
        """Ridge regression without intercept, as in the paper (loss (y − θᵀx)² + (1/n)‖θ‖²).

        Returns:
            The design, the first m_s coordinates sensitive, with the squared loss.
        """
        groups = tuple(f"x{i + 1}" for i in range(self.x.shape[1]))
        return Design(self.x, self.y, groups, frozenset(groups[: self.m_s]), "squared")


def synthetic_ridge(n: int, m: int, m_s: int, seed: int) -> SyntheticRidge:
    """μ_i = (−1)^{i+1}; Σ_ii = 1 on S and 2 on U, 0.5 within S and within U, 0.1 across;
    θ_i = (−1)^{i+1} sqrt(i+1) (i = 1..m, paper Sec. 5.1).

    Args:
        n: the number of rows.
        m: the number of coordinates.
        m_s: the number of sensitive coordinates (the first ones).
        seed: the seed of the draw.

    Returns:
        The data with its law's mean and covariance.
    """
    i = np.arange(1, m + 1)
    mean = np.where(i % 2 == 1, 1.0, -1.0)
    in_s = i <= m_s
    same_block = in_s[:, None] == in_s[None, :]
    covariance = np.where(same_block, 0.5, 0.1)
    np.fill_diagonal(covariance, np.where(in_s, 1.0, 2.0))
    theta = mean * np.sqrt(i + 1.0)
    rng = np.random.default_rng(np.random.SeedSequence([seed, 0xC022]))
    x = rng.multivariate_normal(mean, covariance, size=n, method="cholesky")
    y = x @ theta + rng.normal(0.0, 5.0, size=n)
    return SyntheticRidge(x, y, mean, covariance, m_s)


def synthetic_evaluation_pair(mean: float, m_s: int, delta: float) -> tuple[float, float]:
    """The paper's pair of values of an insensitive coordinate (App. E.1): μ_i ∓ 2 sqrt(log(2 m_s / δ)).

    Args:
        mean: the coordinate's mean μ_i.
        m_s: the number of sensitive coordinates.
        delta: δ.

    Returns:
        The two values, lower first.
    """
    half = 2.0 * np.sqrt(np.log(2 * m_s / delta))
    return float(mean - half), float(mean + half)
