"""Synthetic tables whose protected attributes come from a known prior (docs/data.md, docs/games.md).

Because the generating distribution is known, the quantities Theorem 4 needs are exact rather than
estimated (docs/accounting.md): the conditional prior Pr[v | u] of a categorical attribute (so
``Ball = max_v Pr[v | u]``), or the conditional Gaussian or uniform law of continuous protected
features (so Ball is the χ² or volume formula of docs/accounting.md).

Recipe of :func:`generate` (all draws from one ``numpy`` generator seeded by ``seed``):

1. Public features ``public-0 … public-{d-1}``: i.i.d. N(0, 1).
2. Protected features from a prior object given the public row ``u``:

   - :class:`CategoricalPrior` — column ``protected``, ``Pr[v | u] = softmax_v(log π_v + c·u_{v mod d})``
     (π the base prior, c the coupling; c = 0 makes v independent of u with marginal π);
   - :class:`GaussianPrior` — columns ``protected-0 …``, ``v_j = c·u_{j mod d} + sqrt(1 - c²)·ε_j``,
     ε ~ N(0, 1), so ``v | u ~ N(c·(u_{j mod d})_j, (1 - c²) I)`` and each ``v_j`` is N(0, 1) marginally;
   - :class:`BoxPrior` — columns ``protected-0 …``, i.i.d. U[-h, h], independent of u.
3. Label ``label`` in {"0", "1"}: ``Pr[y = 1 | u, v] = sigmoid(label_logit(u, v))`` with
   ``Σ_j (-1)^j u_j / sqrt(d)`` from the public part plus a protected term of weight
   :data:`PROTECTED_LABEL_WEIGHT`, so a model has something to learn and the protected attribute moves
   its predictions.

:func:`purchase_like_table` is the separate Purchase100-shaped generator (its recipe is in its docstring).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import expit, softmax

from fdp_audit.config import DataConfig
from fdp_audit.data.table import ColumnKind, Table

SYNTHETIC_LABEL = "label"
PROTECTED_COLUMN = "protected"
# DataConfig has no field for the dimension of continuous protected features; two keeps the χ² and
# volume Balls non-trivial while staying cheap.
CONTINUOUS_DIMS = 2
PROTECTED_LABEL_WEIGHT = 1.5
# Purchase-like recipe: the share of a class prototype that is class-specific (the rest is shared
# popularity). At 0.3, logistic regression on 10,000 rows reaches about 85% test accuracy with all 600
# features and about 17% with the 100 public ones: learnable, not separable, public features help but
# do not suffice (as in the FDP paper's Purchase100 experiment). At 0.5 the classes are separable.
PURCHASE_CLASS_WEIGHT = 0.3


def public_columns(n_public: int) -> tuple[str, ...]:
    """The names of the public feature columns of a synthetic table.

    Args:
        n_public: the number of public features d.

    Returns:
        ``("public-0", …, "public-{d-1}")``.
    """
    return tuple(f"public-{j}" for j in range(n_public))


def _check_coupling(coupling: float, upper: float) -> None:
    if not 0.0 <= coupling < upper:  # also rejects NaN
        raise ValueError(f"coupling must be in [0, {upper}), got {coupling}")


@dataclass(frozen=True)
class CategoricalPrior:
    """A categorical protected attribute with a softmax link to the public features:
    ``Pr[v | u] = softmax_v(log π_v + coupling · u_{v mod n_public})``."""

    probabilities: tuple[float, ...]
    n_public: int
    coupling: float = 0.0

    def __post_init__(self) -> None:
        p = np.asarray(self.probabilities, dtype=float)
        if len(p) < 2 or np.any(p < 0) or abs(p.sum() - 1) > 1e-6:
            raise ValueError(f"prior must be at least two non-negative probabilities summing to 1, got {p}")
        if self.n_public < 1:
            raise ValueError("n_public must be >= 1")
        _check_coupling(self.coupling, upper=np.inf)

    @property
    def columns(self) -> tuple[str, ...]:
        return (PROTECTED_COLUMN,)

    @property
    def categories(self) -> tuple[str, ...]:
        """Category names in prior order, zero-padded so that sorted order (the encoder's one-hot order)
        is prior order."""
        width = len(str(len(self.probabilities) - 1))
        return tuple(str(v).zfill(width) for v in range(len(self.probabilities)))

    def conditional(self, public: np.ndarray) -> np.ndarray:
        """The exact Pr[v | u], shape (n, k), for raw (unstandardised) public rows ``u`` of shape (n, d).

        Args:
            public: the raw public rows, shape ``(n, n_public)``.

        Returns:
            One probability row per public row, over the k categories in prior order, each summing to 1.
        """
        public = np.asarray(public, dtype=float)
        with np.errstate(divide="ignore"):  # a zero-probability category has logit -inf and stays at 0
            base = np.log(np.asarray(self.probabilities, dtype=float))
        k = len(self.probabilities)
        linked = public[:, np.arange(k) % self.n_public]
        return softmax(base + self.coupling * linked, axis=1)

    def ball(self, public: np.ndarray) -> np.ndarray:
        """``Ball = max_v Pr[v | u]`` per row (0/1 metric, ρ = 0; docs/accounting.md).

        Args:
            public: the raw public rows, shape ``(n, n_public)``.

        Returns:
            Ball per row, shape ``(n,)``.
        """
        return self.conditional(public).max(axis=1)

    def sample(self, public: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Category codes 0..k-1, one per row of ``public``, drawn from Pr[v | u].

        Args:
            public: the raw public rows, shape ``(n, n_public)``.
            rng: the generator the draws come from.

        Returns:
            Integer codes, shape ``(n,)``.
        """
        cumulative = np.cumsum(self.conditional(public), axis=1)
        draws = rng.random(len(public))[:, None]
        # min() guards against a cumulative sum that rounds to just below 1
        return np.minimum((draws >= cumulative).sum(axis=1), len(self.probabilities) - 1)


@dataclass(frozen=True)
class GaussianPrior:
    """Continuous protected features ``v_j = coupling · u_{j mod n_public} + sqrt(1 - coupling²) ε_j``:
    ``v | u ~ N(conditional_mean(u), conditional_scale² I)``, each ``v_j ~ N(0, 1)`` marginally."""

    dims: int
    n_public: int
    coupling: float = 0.0

    def __post_init__(self) -> None:
        if self.dims < 1 or self.n_public < 1:
            raise ValueError("dims and n_public must be >= 1")
        _check_coupling(self.coupling, upper=1.0)

    @property
    def columns(self) -> tuple[str, ...]:
        return tuple(f"{PROTECTED_COLUMN}-{j}" for j in range(self.dims))

    def conditional_mean(self, public: np.ndarray) -> np.ndarray:
        """The mean of ``v | u``: ``coupling · u_{j mod n_public}`` for each protected coordinate j.

        Args:
            public: the raw public rows, shape ``(n, n_public)``.

        Returns:
            The means, shape ``(n, dims)``.
        """
        public = np.asarray(public, dtype=float)
        return self.coupling * public[:, np.arange(self.dims) % self.n_public]

    @property
    def conditional_scale(self) -> float:
        return float(np.sqrt(1.0 - self.coupling**2))

    def sample(self, public: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Protected values drawn from ``N(conditional_mean(u), conditional_scale² I)``, one row per public row.

        Args:
            public: the raw public rows, shape ``(n, n_public)``.
            rng: the generator the draws come from.

        Returns:
            The values, shape ``(n, dims)``.
        """
        noise = rng.standard_normal((len(public), self.dims))
        return self.conditional_mean(public) + self.conditional_scale * noise


@dataclass(frozen=True)
class BoxPrior:
    """Continuous protected features i.i.d. U[-half_width, half_width], independent of the public part."""

    dims: int
    half_width: float = 1.0

    def __post_init__(self) -> None:
        if self.dims < 1 or not self.half_width > 0:
            raise ValueError("dims must be >= 1 and half_width > 0")

    @property
    def columns(self) -> tuple[str, ...]:
        return tuple(f"{PROTECTED_COLUMN}-{j}" for j in range(self.dims))

    def sample(self, public: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Protected values i.i.d. U[-half_width, half_width], one row per public row (the rows' values are not read).

        Args:
            public: the raw public rows; only their number is used.
            rng: the generator the draws come from.

        Returns:
            The values, shape ``(n, dims)``.
        """
        return rng.uniform(-self.half_width, self.half_width, (len(public), self.dims))


Prior = CategoricalPrior | GaussianPrior | BoxPrior


def label_logit(public: np.ndarray, protected: np.ndarray, prior: Prior) -> np.ndarray:
    """The exact log-odds of ``y = 1`` given raw public rows and protected values: ``Σ_j (-1)^j u_j / sqrt(d)``
    plus :data:`PROTECTED_LABEL_WEIGHT` times the protected term (a category code spread evenly over [-1, 1], or
    the sum of the continuous values over ``sqrt(dims)``).

    Args:
        public: the raw public rows, shape ``(n, d)``.
        protected: category codes ``(n,)`` for a categorical prior, an ``(n, dims)`` array otherwise.
        prior: the prior the protected values were drawn from.

    Returns:
        The log-odds, shape ``(n,)``.
    """
    public = np.asarray(public, dtype=float)
    d = public.shape[1]
    signs = np.where(np.arange(d) % 2 == 0, 1.0, -1.0)
    logit = public @ signs / np.sqrt(d)
    if isinstance(prior, CategoricalPrior):
        k = len(prior.probabilities)
        # codes spread evenly over [-1, 1]: the extreme categories push the label hardest
        return logit + PROTECTED_LABEL_WEIGHT * (2.0 * np.asarray(protected) / (k - 1) - 1.0)
    protected = np.asarray(protected, dtype=float)
    return logit + PROTECTED_LABEL_WEIGHT * protected.sum(axis=1) / np.sqrt(protected.shape[1])


def public_matrix(table: Table) -> np.ndarray:
    """The raw public rows ``u`` (n × d) of a synthetic table, the argument of the conditional priors.

    Args:
        table: a table made by :func:`generate` (or a split of one).

    Returns:
        The ``public-*`` columns stacked in table order, shape ``(n, d)``.
    """
    names = [c for c in table.columns if c.startswith("public-")]
    return np.column_stack([table.columns[c] for c in names])


def generate(n_rows: int, prior: Prior, n_public: int, seed: int, name: str = "synthetic") -> Table:
    """A synthetic table by the recipe in the module docstring; deterministic in ``seed``.

    Args:
        n_rows: the number of rows (>= 1).
        prior: the prior of the protected features.
        n_public: the number of public features d (>= 1).
        seed: the seed of every draw.
        name: the table's name.

    Returns:
        The table: ``public-*`` numeric columns, the prior's protected column(s), and ``label`` (``"0"``/``"1"``).

    Raises:
        ValueError: ``n_rows`` or ``n_public`` below 1.
    """
    if n_rows < 1 or n_public < 1:
        raise ValueError("n_rows and n_public must be >= 1")
    rng = np.random.default_rng(np.random.SeedSequence([seed, 0x5D47A]))
    public = rng.standard_normal((n_rows, n_public))
    protected = prior.sample(public, rng)
    labels = rng.random(n_rows) < expit(label_logit(public, protected, prior))

    columns: dict[str, np.ndarray] = {}
    kinds: dict[str, ColumnKind] = {}
    for j, column in enumerate(public_columns(n_public)):
        columns[column], kinds[column] = public[:, j], "numeric"
    if isinstance(prior, CategoricalPrior):
        columns[PROTECTED_COLUMN] = np.asarray(prior.categories, dtype=object)[protected]
        kinds[PROTECTED_COLUMN] = "categorical"
    else:
        for j, column in enumerate(prior.columns):
            columns[column], kinds[column] = protected[:, j], "numeric"
    columns[SYNTHETIC_LABEL] = np.where(labels, "1", "0").astype(object)
    kinds[SYNTHETIC_LABEL] = "categorical"
    return Table(name, columns, kinds)


def prior_for_config(config: DataConfig, coupling: float = 0.0) -> Prior:
    """The exact prior behind :func:`synthetic_table` for this config: ``synthetic_prior_kind`` chooses
    categorical (probabilities ``synthetic_prior``), Gaussian N(0, 1) or box U[-1, 1] (with
    :data:`CONTINUOUS_DIMS` columns). The box prior has no link to the public part.

    Args:
        config: the ``data`` section.
        coupling: the strength c of the link between public and protected features (0: independent).

    Returns:
        The prior.

    Raises:
        ValueError: a coupling out of range for the prior, or a nonzero coupling for the box prior.
    """
    n_public = config.synthetic_public_features
    if config.synthetic_prior_kind == "categorical":
        return CategoricalPrior(tuple(config.synthetic_prior), n_public, coupling)
    if config.synthetic_prior_kind == "gaussian":
        return GaussianPrior(CONTINUOUS_DIMS, n_public, coupling)
    if coupling != 0.0:
        raise ValueError("the box prior is independent of the public features; coupling must be 0")
    return BoxPrior(CONTINUOUS_DIMS)


def synthetic_table(config: DataConfig, seed: int, coupling: float = 0.0) -> Table:
    """``config.synthetic_rows`` rows drawn by the module recipe with the prior of
    :func:`prior_for_config`.

    Args:
        config: the ``data`` section.
        seed: the seed of every draw.
        coupling: the strength c of the link between public and protected features (0: independent).

    Returns:
        The table, named ``synthetic``.

    Raises:
        ValueError: as :func:`prior_for_config` (a coupling out of range), or fewer than one row or public feature.
    """
    prior = prior_for_config(config, coupling)
    return generate(config.synthetic_rows, prior, config.synthetic_public_features, seed)


def purchase_like_table(
    n_rows: int, seed: int, n_features: int = 600, n_classes: int = 100, n_public: int = 100
) -> Table:
    """A Purchase100-shaped table: ``n_features`` binary columns and a ``label`` in "1"…"n_classes"
    (1-based, as in the original file). Deterministic in ``seed``.

    Recipe (documented so results can be reproduced without the real data):

    1. Shared popularity ``q_j ~ Beta(0.5, 2)`` per feature (mean 0.2, most products rarely bought).
    2. Class prototypes, Bernoulli probability vectors
       ``P[c, j] = (1 - w) q_j + w r_{c,j}`` with ``r_{c,j} ~ Beta(0.5, 2)`` and
       ``w =`` :data:`PURCHASE_CLASS_WEIGHT`.
    3. Each record: class ``c`` uniform over the classes, ``x_j ~ Bernoulli(P[c, j])`` independently.

    The first ``n_public`` features are named ``public-0 …``, the rest ``protected-0 …``: as in the FDP
    paper's Purchase100 experiment, a fixed subset of the (exchangeable) features is public.

    Args:
        n_rows: the number of records (>= 1).
        seed: the seed of every draw.
        n_features: the number of binary features.
        n_classes: the number of classes (>= 2).
        n_public: how many of the features are public, in (0, ``n_features``].

    Returns:
        The table, named ``purchase-like``.

    Raises:
        ValueError: a size out of range.
    """
    if not (0 < n_public <= n_features) or n_classes < 2 or n_rows < 1:
        raise ValueError("need 0 < n_public <= n_features, n_classes >= 2 and n_rows >= 1")
    rng = np.random.default_rng(np.random.SeedSequence([seed, 0x9C4A5E]))
    popularity = rng.beta(0.5, 2.0, n_features)
    specific = rng.beta(0.5, 2.0, (n_classes, n_features))
    prototypes = (1 - PURCHASE_CLASS_WEIGHT) * popularity + PURCHASE_CLASS_WEIGHT * specific
    classes = rng.integers(0, n_classes, n_rows)
    features = (rng.random((n_rows, n_features)) < prototypes[classes]).astype(np.float64)

    names = [f"public-{j}" for j in range(n_public)]
    names += [f"protected-{j}" for j in range(n_features - n_public)]
    columns: dict[str, np.ndarray] = {name: features[:, j].copy() for j, name in enumerate(names)}
    kinds: dict[str, ColumnKind] = dict.fromkeys(names, "numeric")
    columns[SYNTHETIC_LABEL] = (classes + 1).astype(str).astype(object)
    kinds[SYNTHETIC_LABEL] = "categorical"
    return Table("purchase-like", columns, kinds)
