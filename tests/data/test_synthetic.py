"""Synthetic data with known priors (docs/data.md, docs/accounting.md): the generated frequencies match the stated
prior.

Every statistical test below runs at a fixed seed, so it cannot flake; the stated error probability is
the chance that a correct generator would fail it at a random seed (the test's level)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats
from scipy.special import expit

from fdp_audit.config import DataConfig
from fdp_audit.data import synthetic
from fdp_audit.data.synthetic import (
    BoxPrior,
    CategoricalPrior,
    GaussianPrior,
    generate,
    label_logit,
    public_matrix,
    purchase_like_table,
    synthetic_table,
)

LEVEL = 1e-3  # error probability of each goodness-of-fit test


def codes(table, prior: CategoricalPrior) -> np.ndarray:
    return np.searchsorted(np.array(prior.categories), table.columns["protected"].astype(str))


def test_categorical_marginal_matches_prior():
    prior = CategoricalPrior((0.2, 0.3, 0.5), n_public=4)
    table = generate(20_000, prior, 4, seed=11)
    counts = np.bincount(codes(table, prior), minlength=3)
    # Pearson χ² goodness of fit with 2 degrees of freedom; a correct generator fails with prob. 1e-3.
    assert stats.chisquare(counts, 20_000 * np.array(prior.probabilities)).pvalue > LEVEL


def conditional_chi_square(observed_codes: np.ndarray, probabilities: np.ndarray, bins: int = 10) -> float:
    """p-value of Pearson's χ² comparing category counts with their expected sums Σ Pr[v | u_i], in bins
    of the predicted probability of the first category. Given u the rows are independent, so the
    statistic is asymptotically χ² with bins·(k-1) degrees of freedom (conservative: within a bin the
    counts are Poisson-binomial, whose variance is below the multinomial's)."""
    k = probabilities.shape[1]
    order = np.argsort(probabilities[:, 0])
    statistic = 0.0
    for rows in np.array_split(order, bins):
        observed = np.bincount(observed_codes[rows], minlength=k)
        expected = probabilities[rows].sum(axis=0)
        statistic += float(((observed - expected) ** 2 / expected).sum())
    return float(stats.chi2.sf(statistic, bins * (k - 1)))


def test_exact_conditional_prior_matches_empirical_conditional_frequencies():
    prior = CategoricalPrior((0.2, 0.3, 0.5), n_public=5, coupling=1.5)
    table = generate(20_000, prior, 5, seed=12)
    probabilities = prior.conditional(public_matrix(table))
    assert probabilities[:, 0].std() > 0.1  # the link really moves Pr[v | u]
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0)
    # χ² with 20 degrees of freedom at level 1e-3 (error probability 1e-3 for a correct generator)
    assert conditional_chi_square(codes(table, prior), probabilities) > LEVEL
    # power check: the same test rejects the marginal prior, which ignores u
    marginal = np.tile(prior.probabilities, (table.n_rows, 1))
    assert conditional_chi_square(codes(table, prior), marginal) < LEVEL


def test_uncoupled_conditional_is_the_prior_and_ball_is_its_maximum():
    prior = CategoricalPrior((0.1, 0.6, 0.3), n_public=2)
    public = np.random.default_rng(0).normal(size=(7, 2))
    np.testing.assert_allclose(prior.conditional(public), np.tile([0.1, 0.6, 0.3], (7, 1)))
    np.testing.assert_allclose(prior.ball(public), 0.6)


def test_zero_probability_category_never_appears():
    prior = CategoricalPrior((0.0, 0.4, 0.6), n_public=3, coupling=2.0)
    table = generate(2_000, prior, 3, seed=5)
    assert "0" not in set(table.columns["protected"])
    assert np.all(prior.conditional(public_matrix(table))[:, 0] == 0.0)


def test_category_names_sort_in_prior_order():
    prior = CategoricalPrior(tuple([1 / 12] * 12), n_public=1)
    assert prior.categories[:3] == ("00", "01", "02") and prior.categories[-1] == "11"
    assert list(prior.categories) == sorted(prior.categories)


def test_gaussian_conditional_law():
    prior = GaussianPrior(dims=3, n_public=2, coupling=0.6)
    table = generate(5_000, prior, 2, seed=13)
    protected = np.column_stack([table.columns[c] for c in prior.columns])
    residual = (protected - prior.conditional_mean(public_matrix(table))) / prior.conditional_scale
    for j in range(3):
        # Kolmogorov–Smirnov against N(0, 1), conditional and marginal: each fails with prob. 1e-3
        assert stats.kstest(residual[:, j], "norm").pvalue > LEVEL
        assert stats.kstest(protected[:, j], "norm").pvalue > LEVEL
    assert prior.conditional_scale == pytest.approx(0.8)


def test_box_prior_is_uniform_and_bounded():
    prior = BoxPrior(dims=2)
    table = generate(5_000, prior, 3, seed=14)
    for column in prior.columns:
        values = table.columns[column]
        assert values.min() >= -1.0 and values.max() <= 1.0
        # Kolmogorov–Smirnov against U[-1, 1]; fails with prob. 1e-3 for a correct generator
        assert stats.kstest(values, "uniform", args=(-1.0, 2.0)).pvalue > LEVEL


@pytest.mark.parametrize(
    "prior",
    [CategoricalPrior((0.5, 0.5), 3, 1.0), GaussianPrior(2, 3, 0.5), BoxPrior(2)],
    ids=["categorical", "gaussian", "box"],
)
def test_label_follows_the_stated_logit(prior):
    table = generate(20_000, prior, 3, seed=15)
    if isinstance(prior, CategoricalPrior):
        protected = codes(table, prior)
    else:
        protected = np.column_stack([table.columns[c] for c in prior.columns])
    p = expit(label_logit(public_matrix(table), protected, prior))
    y = table.columns["label"] == "1"
    # Given (u, v) the labels are independent Bernoulli(p_i): the standardised sum is ≈ N(0, 1);
    # |z| < 3.29 has error probability 1e-3.
    z = (y.sum() - p.sum()) / np.sqrt((p * (1 - p)).sum())
    assert abs(z) < 3.29


def test_protected_attribute_moves_the_label():
    prior = CategoricalPrior((0.5, 0.5), 3)
    table = generate(4_000, prior, 3, seed=16)
    y = table.columns["label"] == "1"
    v = table.columns["protected"] == "1"
    # the protected term shifts the log-odds by ±1.5: the rates differ by far more than sampling noise
    assert y[v].mean() - y[~v].mean() > 0.3


def test_synthetic_table_from_config_is_deterministic_and_named():
    config = DataConfig(dataset="synthetic", synthetic_rows=50, synthetic_public_features=3)
    first, second = synthetic_table(config, 1), synthetic_table(config, 1)
    assert first.fingerprint() == second.fingerprint()
    assert first.fingerprint() != synthetic_table(config, 2).fingerprint()
    assert first.column_names == ["public-0", "public-1", "public-2", "protected", "label"]
    assert first.n_rows == 50 and first.kinds["protected"] == "categorical"
    assert synthetic.SYNTHETIC_LABEL == "label"


@pytest.mark.parametrize(("kind", "prior_type"), [("gaussian", GaussianPrior), ("box", BoxPrior)])
def test_continuous_kinds_from_config(kind, prior_type):
    config = DataConfig(dataset="synthetic", synthetic_rows=20, synthetic_prior_kind=kind)
    prior = synthetic.prior_for_config(config)
    assert isinstance(prior, prior_type)
    table = synthetic_table(config, 0)
    assert [c for c in table.columns if c.startswith("protected")] == ["protected-0", "protected-1"]
    assert all(table.kinds[c] == "numeric" for c in prior.columns)


def test_invalid_priors_are_rejected():
    with pytest.raises(ValueError, match="coupling"):
        synthetic.prior_for_config(DataConfig(synthetic_prior_kind="box"), coupling=0.5)
    with pytest.raises(ValueError, match="coupling"):
        GaussianPrior(2, 2, coupling=1.0)
    with pytest.raises(ValueError, match="probabilities"):
        CategoricalPrior((0.7, 0.7), 2)


def test_purchase_like_shape_values_and_names():
    table = purchase_like_table(300, seed=3)
    assert (table.n_rows, len(table.columns)) == (300, 601)
    names = table.column_names
    assert names[0] == "public-0" and names[99] == "public-99" and names[100] == "protected-0"
    assert names[599] == "protected-499" and names[600] == "label"
    features = np.column_stack([table.columns[c] for c in names[:600]])
    assert set(np.unique(features)) <= {0.0, 1.0}
    assert {int(v) for v in table.columns["label"]} <= set(range(1, 101))
    assert purchase_like_table(300, seed=3).fingerprint() == table.fingerprint()
    assert purchase_like_table(300, seed=4).fingerprint() != table.fingerprint()


def test_purchase_like_classes_are_uniform_and_prototypes_differ():
    table = purchase_like_table(5_000, seed=5, n_features=60, n_classes=10, n_public=10)
    labels = table.columns["label"].astype(int)
    # χ² goodness of fit of the class counts to uniform, 9 degrees of freedom; error probability 1e-3
    assert stats.chisquare(np.bincount(labels, minlength=11)[1:]).pvalue > LEVEL
    features = np.column_stack([table.columns[c] for c in table.column_names[:60]])
    class_means = np.array([features[labels == c].mean(axis=0) for c in range(1, 11)])
    # class-specific prototype parts make per-class frequencies differ well beyond sampling noise
    assert class_means.std(axis=0).mean() > 0.05
