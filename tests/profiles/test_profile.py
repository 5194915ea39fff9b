"""Privacy profiles and typical profiles (docs/profiles.md; paper Secs. 4.3-4.4)."""

from __future__ import annotations

import numpy as np
import pytest

from fdp_audit.profiles.mechanisms import GaussianOutputPerturbation, LaplaceOutputPerturbation
from fdp_audit.profiles.neighbours import removal_neighbours, worst_case_points
from fdp_audit.profiles.profile import privacy_profile, profile_at, typical_profile


@pytest.fixture(scope="module")
def deltas(adult_small, fitted):
    w = fitted["adult_small"]
    return worst_case_points(adult_small.X, adult_small.y, w, 1.0, removal_neighbours(adult_small.n)) - w


def test_profile_is_sorted_with_row_ids():
    profile = privacy_profile(np.array([0.3, -0.1, -2.0, 0.0]), rows=np.array([10, 11, 12, 13]))
    assert profile.values.tolist() == [0.0, 0.1, 0.3, 2.0]
    assert profile.rows.tolist() == [13, 11, 10, 12]


@pytest.mark.parametrize("mechanism", ["laplace", "gaussian"])
def test_ranking_for_a_fixed_model_point_does_not_depend_on_beta(deltas, rng, mechanism):
    """For a fixed M, l is β times a function of the geometry only: the ranking of rows is the same for
    every ε and the values scale with β (Laplace) or 1/σ² (Gaussian)."""
    offset = rng.normal(size=deltas.shape[1]) * np.linalg.norm(deltas, axis=1).mean()
    if mechanism == "laplace":
        low, high, ratio = LaplaceOutputPerturbation(3.0), LaplaceOutputPerturbation(3e6), 1e6
    else:
        low, high, ratio = GaussianOutputPerturbation(2.0), GaussianOutputPerturbation(2e-3), 1e6
    first, second = profile_at(low, deltas, offset), profile_at(high, deltas, offset)
    assert np.array_equal(first.rows, second.rows)
    assert np.allclose(second.values, ratio * first.values, rtol=1e-12)


def test_profile_at_the_base_model_is_beta_times_the_offsets(deltas):
    """At M = A(D): |l(D, y_i, A(D))| = β‖Δ_i‖, so the profile ranks rows by how far they move the model."""
    profile = profile_at(LaplaceOutputPerturbation(5.0), deltas, np.zeros(deltas.shape[1]))
    norms = np.linalg.norm(deltas, axis=1)
    assert np.allclose(profile.values, 5.0 * np.sort(norms), rtol=1e-12)
    assert profile.rows[-1] == np.argmax(norms)


def test_typical_profile_matches_a_per_sample_loop(deltas, rng):
    mech = LaplaceOutputPerturbation(2e3)
    noise = mech.sample_noise(37, deltas.shape[1], rng)
    typical = typical_profile(mech, deltas, noise, block=8)
    sorted_rows, losses = [], []
    for b in noise:  # the straightforward reference: one model point at a time
        loss = np.array([mech.beta * (np.linalg.norm(dl - b) - np.linalg.norm(b)) for dl in deltas])
        sorted_rows.append(np.sort(np.abs(loss)))
        losses.append(loss)
    assert np.allclose(typical.values, np.mean(sorted_rows, axis=0), rtol=1e-9)
    assert np.allclose(typical.mean_loss, np.mean(losses, axis=0), rtol=1e-8, atol=1e-12)
    assert np.allclose(typical.mean_abs_loss, np.mean(np.abs(losses), axis=0), rtol=1e-9)
    assert typical.samples == 37 and typical.scale == mech.beta
