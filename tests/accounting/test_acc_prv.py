"""ε(δ) against two independent accountants: Opacus' PRV accountant and Microsoft's prv_accountant
(Gopi et al. 2021), on 22 settings covering z ∈ [0.5, 10], p ∈ [1e-3, 1], T ∈ [1, 10^4].

Both PRV accountants account the remove direction (the privacy loss of the subsampled mixture against
N(0, z²)), so they are compared with our remove-direction ε (Theorem 2 on that curve); the usual ε,
maximised over both directions, is printed beside it (it coincides on this grid).

Opacus' public ``get_epsilon`` returns the upper end of its error interval, ``ε̂(δ - δ/1000) +
eps_error``; subtracting ``eps_error`` gives its estimate. prv_accountant returns (lower, estimate,
upper); its estimate is used. A reference that raises is skipped for that setting and reported.
"""

from __future__ import annotations

import math
import warnings

import pytest

from fdp_audit.accounting import MechanismSpec, accountant_for

opacus_accountants = pytest.importorskip("opacus.accountants")
prv_accountant = pytest.importorskip("prv_accountant")

DELTA = 1e-5
SETTINGS = [
    (0.5, 1e-3, 1),
    (0.5, 1e-3, 1000),
    (0.5, 0.01, 100),
    (0.6, 1e-3, 10_000),
    (0.8, 0.01, 1000),
    (1.0, 1 / 16, 100),
    (1.0, 0.01, 1000),
    (1.0, 0.01, 10_000),
    (1.0, 0.1, 100),
    (1.0, 1.0, 1),
    (1.0, 1.0, 10),
    (1.5, 0.05, 2000),
    (2.0, 0.01, 1000),
    (2.0, 0.1, 10_000),
    (2.0, 1.0, 100),
    (3.0, 0.5, 500),
    (4.0, 1.0, 1000),
    (5.0, 0.2, 10_000),
    (8.0, 1.0, 10_000),
    (10.0, 1e-3, 10_000),
    (10.0, 1.0, 1),
    (10.0, 0.3, 100),
]
TOLERANCE = 0.01


def _opacus(z: float, p: float, steps: int, eps_error: float) -> float:
    accountant = opacus_accountants.PRVAccountant()
    accountant.history = [(z, p, steps)]
    return accountant.get_epsilon(DELTA, eps_error=eps_error) - eps_error


def _prv(z: float, p: float, steps: int, eps_error: float) -> float:
    mechanism = prv_accountant.PoissonSubsampledGaussianMechanism(sampling_probability=p, noise_multiplier=z)
    accountant = prv_accountant.PRVAccountant(
        prvs=[mechanism], max_self_compositions=[steps], eps_error=eps_error, delta_error=DELTA / 1000
    )
    return accountant.compute_epsilon(DELTA, [steps])[1]


@pytest.mark.slow
def test_epsilon_agrees_with_prv_accountants():
    assert len(SETTINGS) >= 20
    rows, failures, skipped, worst = [], [], [], 0.0
    for z, p, steps in SETTINGS:
        acc = accountant_for(MechanismSpec.gaussian("dp_sgd", z, p, steps))
        ours, ours_both = acc.curve("remove").epsilon(DELTA), acc.epsilon(DELTA)
        eps_error = 5e-3 * max(ours, 1.0)  # the references' error budget: 0.5 % of ε, at least 5e-3
        cells = [f"z={z:<4} p={p:<7.4g} T={steps:<6}", f"ours {ours:9.5f} (both directions {ours_both:9.5f})"]
        for name, reference in (("opacus", _opacus), ("prv_accountant", _prv)):
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    value = float(reference(z, p, steps, eps_error))
            except Exception as err:  # noqa: BLE001 - a reference failing is reported, not fatal
                skipped.append(f"{name} at z={z}, p={p}, T={steps}: {type(err).__name__}: {err}")
                cells.append(f"{name} error")
                continue
            rel = abs(ours - value) / value if value > 0 else math.inf
            worst = max(worst, rel)
            cells.append(f"{name} {value:9.5f} ({100 * rel:5.2f} %)")
            if rel > TOLERANCE:
                failures.append(" | ".join(cells))
        rows.append(" | ".join(cells))
    print(f"\nε at δ = {DELTA:g}: ours (pessimistic PLD) vs PRV accountants")
    print("\n".join(rows))
    print(f"max relative difference: {100 * worst:.3f} %")
    if skipped:
        print("skipped (reference raised):\n  " + "\n  ".join(skipped))
    assert not failures, "disagreement beyond 1 %:\n" + "\n".join(failures)
