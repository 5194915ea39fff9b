"""The neighbour distance d(D, D') (paper Def. 2.3 axioms, Eq. 1) and Example 2.6 (docs/corrdp.md)."""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from fdp_audit.corrdp.distance import empirical_pmf, example_2_6, feature_tv_exact, neighbour_distance
from fdp_audit.corrdp.tv import tv_discrete, tv_histogram


def test_example_2_6_exactly() -> None:
    result = example_2_6()
    assert result["d_sensitive_change"] == 1.0
    assert abs(result["d_insensitive_change"] - 1 / 3) < 1e-12


@st.composite
def tables(draw: st.DrawFn) -> tuple[np.ndarray, list[int], tuple[int, ...], tuple[int, ...], str]:
    """A strictly positive law over 2–4 discrete features, a sensitive set and a neighbour pair that
    differs only in sensitive or only in insensitive features."""
    m = draw(st.integers(2, 4))
    levels = tuple(draw(st.lists(st.integers(2, 3), min_size=m, max_size=m)))
    seed = draw(st.integers(0, 2**32 - 1))
    pmf = np.random.default_rng(seed).dirichlet(np.ones(int(np.prod(levels)))).reshape(levels) + 1e-9
    pmf /= pmf.sum()
    sensitive = sorted(draw(st.sets(st.integers(0, m - 1), min_size=1, max_size=m - 1)))
    kind = draw(st.sampled_from(["sensitive", "insensitive"]))
    changed = sensitive if kind == "sensitive" else [k for k in range(m) if k not in sensitive]
    e = tuple(draw(st.integers(0, levels[k] - 1)) for k in range(m))
    which = draw(st.sets(st.sampled_from(changed), min_size=1))
    e_prime = tuple((e[k] + draw(st.integers(1, levels[k] - 1))) % levels[k] if k in which else e[k] for k in range(m))
    return pmf, sensitive, e, e_prime, kind


@settings(max_examples=150, deadline=None)
@given(tables())
def test_axioms_on_random_tables(case: tuple[np.ndarray, list[int], tuple[int, ...], tuple[int, ...], str]) -> None:
    pmf, sensitive, e, e_prime, kind = case
    d = neighbour_distance(pmf, sensitive, e, e_prime)
    assert 0.0 <= d <= 1.0
    if kind == "sensitive":
        assert d == 1.0
    else:
        assert d < 1.0  # axiom 3 for a strictly positive law
        # axiom 4: make the insensitive features independent of the sensitive ones
        m = pmf.ndim
        insensitive = [k for k in range(m) if k not in sensitive]
        p_s = pmf.sum(axis=tuple(insensitive), keepdims=True)
        p_u = pmf.sum(axis=tuple(sensitive), keepdims=True)
        assert neighbour_distance(p_s * p_u, sensitive, e, e_prime) < 1e-12


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 3), st.integers(1, 3))
def test_empirically_independent_records_have_distance_zero(seed: int, n_s: int, n_u: int) -> None:
    # Every sensitive record paired with every insensitive record: the empirical law factorises exactly.
    rng = np.random.default_rng(seed)
    s_rows = rng.integers(0, 2, size=(n_s, 2))
    u_rows = rng.integers(0, 3, size=(n_u, 1))
    records = np.array([np.concatenate([s, u]) for s, u in itertools.product(s_rows, u_rows)])
    pmf = empirical_pmf(records, (2, 2, 3))
    e = tuple(records[0])
    for value in range(3):
        e_prime = (e[0], e[1], value)
        d = neighbour_distance(pmf, [0, 1], e, e_prime)
        if value in u_rows[:, 0]:
            assert d < 1e-12
        else:
            assert d == 1.0  # an unseen conditioning value: conservative


def test_feature_tv_matches_plug_in_on_its_own_law() -> None:
    rng = np.random.default_rng(0)
    records = rng.integers(0, 3, size=(5000, 2))
    records[:, 0] = np.where(rng.random(5000) < 0.3, records[:, 1], records[:, 0])
    pmf = empirical_pmf(records, (3, 3))
    assert abs(feature_tv_exact(pmf, [0], 1) - tv_discrete(records[:, 0], records[:, 1]).value) < 1e-12


def test_marginal_sum_is_not_an_upper_bound_on_joint_tv() -> None:
    # Paper App. E.2 bounds the joint TV by TV_c + TV_d. Under u = 0, X_c = X_d; under u = 1, X_c = 1 − X_d:
    # both marginals are Bernoulli(1/2) either way, yet the joint laws are disjoint.
    x_d = np.tile([0, 1], 2000)
    u = np.repeat([0, 1], 2000)
    x_c = np.where(u == 0, x_d, 1 - x_d).astype(float)
    assert tv_discrete(x_d, u).value == 0.0
    assert tv_histogram(x_c, u).value == 0.0
    assert tv_histogram(x_c, u, discrete=x_d).value == 1.0
