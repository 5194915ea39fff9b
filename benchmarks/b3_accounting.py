"""B3 (docs/training.md): the f-curve and the Theorem 4 bound for T = 10,000 steps against dp_accounting's own ε.

Mechanism: DP-SGD / Algorithm 1 with z = 1, p = 0.01, T = 10,000 (add/remove, pessimistic PLD, grid
1e-4). Ours (:mod:`fdp_audit.accounting`): compose the PLD, extract the symmetric trade-off curve and read
the Theorem 4 bound ``1 - f(Ball)`` at four Ball values. Baselines:

* dp_accounting's ``PLDAccountant`` composing the same event and answering ``get_epsilon(δ)``: the work a
  user of dp_accounting waits for (the ≤ 2× target);
* the same comparison from one already composed PLD: our curve and bound against
  ``get_epsilon_for_delta`` on that PLD object (both skip the composition they share);
* Opacus's PRV accountant's ε for the same mechanism.

Every candidate runs uncached, on the CPU time of the process.
"""

from __future__ import annotations

from dp_accounting import dp_event
from dp_accounting.pld import pld_privacy_accountant

from benchmarks.timing import CPU_CLOCK, Record, interleaved, ratio_record
from fdp_audit.accounting import Segment, build_pld, theorem4_bound, tradeoff_curves

NOISE, RATE, STEPS, DELTA = 1.0, 0.01, 10_000, 1e-5
BALLS = (0.5, 0.25, 0.1, 1e-3)
GRID = 1e-4


def _ours_from_pld(pld) -> tuple[float, list[float]]:
    curve = tradeoff_curves(pld)["symmetric"]
    return float(curve.epsilon(DELTA)), [float(b) for b in theorem4_bound(curve, list(BALLS))]


def _ours() -> tuple[float, list[float]]:
    return _ours_from_pld(build_pld((Segment(NOISE, RATE, STEPS),), discretization=GRID))


def _dp_accounting() -> float:
    accountant = pld_privacy_accountant.PLDAccountant(value_discretization_interval=GRID)
    event = dp_event.PoissonSampledDpEvent(RATE, dp_event.GaussianDpEvent(NOISE))
    accountant.compose(dp_event.SelfComposedDpEvent(event, STEPS))
    return float(accountant.get_epsilon(DELTA))


def _opacus_prv() -> float:
    from opacus.accountants import PRVAccountant

    accountant = PRVAccountant()
    accountant.history = [(NOISE, RATE, STEPS)]  # what T calls of accountant.step(...) would record
    return float(accountant.get_epsilon(DELTA))


def run(rounds: int = 5) -> list[Record]:
    results: dict[str, object] = {}

    def record(name, function, *args):
        def call() -> None:
            results[name] = function(*args)
        return call

    end_to_end = interleaved({"ours": record("ours", _ours), "dp_accounting": record("dp", _dp_accounting),
                              "prv": record("prv", _opacus_prv)}, rounds=rounds, clock=CPU_CLOCK)
    pld = build_pld((Segment(NOISE, RATE, STEPS),), discretization=GRID)
    from_pld = interleaved({"ours": record("ours_pld", _ours_from_pld, pld),
                            "dp_accounting": record("dp_pld", pld.get_epsilon_for_delta, DELTA)},
                           rounds=rounds, clock=CPU_CLOCK)
    epsilon, bounds = results["ours"]
    setting = f"z={NOISE}, p={RATE}, T={STEPS}, add/remove, pessimistic PLD grid {GRID}"
    agreement = {"epsilon_ours": round(epsilon, 5), "epsilon_dp_accounting": round(results["dp"], 5),
                 "epsilon_opacus_prv": round(results["prv"], 5),
                 "bounds": {str(b): round(v, 5) for b, v in zip(BALLS, bounds)}}
    return [
        ratio_record("b3_fcurve_bound_vs_dp_accounting_epsilon", end_to_end["ours"], end_to_end["dp_accounting"],
                     unit="s", scale=1.0, target="<= 2",
                     note=f"compose PLD + symmetric f-curve + Theorem 4 bound at {len(BALLS)} Ball values / "
                          f"dp_accounting PLDAccountant compose + get_epsilon({DELTA}); {setting}; CPU time",
                     **agreement),
        ratio_record("b3_fcurve_bound_vs_epsilon_from_same_pld", from_pld["ours"], from_pld["dp_accounting"],
                     unit="s", scale=1.0,
                     note=f"from one composed PLD: f-curve + bound / get_epsilon_for_delta; {setting}; CPU time"),
        ratio_record("b3_fcurve_bound_vs_opacus_prv_epsilon", end_to_end["ours"], end_to_end["prv"],
                     unit="s", scale=1.0,
                     note=f"compose PLD + f-curve + bound / Opacus PRVAccountant.get_epsilon({DELTA}); {setting}; "
                          "CPU time"),
    ]
