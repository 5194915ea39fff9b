"""The optional diffprivlib mechanism (docs/profiles.md).

diffprivlib 0.6.6 does not run against the pinned scikit-learn (see
:func:`fdp_audit.profiles.third_party.unavailable_reason`), so its own behaviour cannot be tested here.
What is ours is tested with a recording double in place of ``diffprivlib.models``: the objective
matches the base model (C = 1/(nΛ), no intercept, data_norm = 1), every sample gets its own seed, and
a package that imports but cannot build its model counts as unavailable.
"""

from __future__ import annotations

import sys
import types

import numpy as np
import pytest

from fdp_audit.profiles import third_party


class _Recorder:
    calls: list[dict] = []

    def __init__(self, **kwargs):
        self.kwargs = kwargs
        _Recorder.calls.append(kwargs)

    def fit(self, X, y):
        self.coef_ = np.full((1, X.shape[1]), float(self.kwargs["random_state"]))
        return self


@pytest.fixture
def fake_diffprivlib(monkeypatch):
    package, models = types.ModuleType("diffprivlib"), types.ModuleType("diffprivlib.models")
    models.LogisticRegression = _Recorder
    package.models = models
    monkeypatch.setitem(sys.modules, "diffprivlib", package)
    monkeypatch.setitem(sys.modules, "diffprivlib.models", models)
    _Recorder.calls = []
    return models


def test_samples_use_the_base_model_objective_and_fresh_seeds(fake_diffprivlib, rng):
    X, y = rng.normal(size=(40, 3)) / 4, np.where(rng.random(40) < 0.5, -1.0, 1.0)
    assert third_party.unavailable_reason() is None
    _Recorder.calls = []
    samples = third_party.diffprivlib_samples(X, y, epsilon=0.7, lam=0.5, samples=5, rng=rng)
    assert samples.shape == (5, 3)
    assert len({c["random_state"] for c in _Recorder.calls}) == 5
    for call in _Recorder.calls:
        assert call["epsilon"] == 0.7 and call["data_norm"] == 1.0 and call["fit_intercept"] is False
        assert call["C"] == pytest.approx(1 / (40 * 0.5))


def test_a_package_that_cannot_build_its_model_is_unavailable(fake_diffprivlib):
    def broken(**kwargs):
        raise TypeError("LogisticRegression.__init__() got an unexpected keyword argument 'multi_class'")

    fake_diffprivlib.LogisticRegression = broken
    assert "multi_class" in third_party.unavailable_reason()
