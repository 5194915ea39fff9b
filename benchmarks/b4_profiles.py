"""B4 (docs/training.md): the typical privacy profile on all of Adult, n = 32,561 rows (age, education-num), from
1,000 model samples M ~ 𝒜(D) of Laplace output perturbation (docs/profiles.md).

Ours: :func:`fdp_audit.profiles.profile.typical_profile` — per block of model samples one (block × n)
loss matrix by matrix products and one row-wise sort, no Python loop over rows. Baseline: the
straightforward loop — for every model sample, for every row, β(‖A(y_i) - M‖ - ‖A(D) - M‖) with NumPy
on d-vectors, then sort and accumulate. The baseline is timed on ``BASELINE_SAMPLES`` of the 1,000
samples (all rows) and scaled linearly to 1,000: its cost is exactly linear in the number of samples
(the note in the record says so). Both use the same neighbour offsets (the Okumura worst-case points,
computed once outside the timing) and the same noise draws, and the baseline's partial average is
checked against ours on those draws. Candidates run interleaved round by round (:mod:`benchmarks.timing`);
``ratio`` is baseline / ours (the speed-up) and ``spread`` the interquartile range of per-round ratios.
"""

from __future__ import annotations

import json
import statistics
import time

import numpy as np

from benchmarks.timing import Record, error_record, interleaved, quartiles
from fdp_audit.data.datasets import load_adult
from fdp_audit.profiles.design import design_from_table
from fdp_audit.profiles.logistic import fit_newton
from fdp_audit.profiles.mechanisms import LaplaceOutputPerturbation
from fdp_audit.profiles.neighbours import removal_neighbours, worst_case_points
from fdp_audit.profiles.profile import typical_profile

NAME = "B4 typical privacy profile"
SAMPLES = 1000
BASELINE_SAMPLES = 10
ROUNDS = 3
EPSILON = 30.0  # inside the transition on this data set; the cost does not depend on ε


def _loop_profile(models: np.ndarray, base: np.ndarray, beta: float, noise: np.ndarray) -> np.ndarray:
    """The straightforward per-row loop: the sum over model samples of the sorted |l|."""
    total = np.zeros(models.shape[0])
    for b in noise:
        point = base + b
        base_distance = np.linalg.norm(base - point)
        losses = np.empty(models.shape[0])
        for i in range(models.shape[0]):
            losses[i] = beta * (np.linalg.norm(models[i] - point) - base_distance)
        total += np.sort(np.abs(losses))
    return total


def run() -> Record:
    try:
        design = design_from_table(load_adult(drop_missing=False), ("age", "education-num"), "income")
        w = fit_newton(design.X, design.y, 1.0).w
        models = worst_case_points(design.X, design.y, w, 1.0, removal_neighbours(design.n))
        deltas = models - w
        mech = LaplaceOutputPerturbation.from_epsilon(EPSILON, design.n, 1.0)
        noise = mech.sample_noise(SAMPLES, design.d, np.random.default_rng(4))

        reference = typical_profile(mech, deltas, noise[:BASELINE_SAMPLES]).values * BASELINE_SAMPLES
        loop = _loop_profile(models, w, mech.beta, noise[:BASELINE_SAMPLES])
        if not np.allclose(loop, reference, rtol=1e-9, atol=1e-12 * mech.beta):
            return error_record(NAME, "the per-row loop and the vectorised profile disagree")

        def ours() -> None:
            typical_profile(mech, deltas, noise)

        def baseline() -> float:
            start = time.perf_counter()
            _loop_profile(models, w, mech.beta, noise[:BASELINE_SAMPLES])
            return (time.perf_counter() - start) * SAMPLES / BASELINE_SAMPLES

        times = interleaved({"ours": ours, "baseline": baseline}, rounds=ROUNDS, warmup=1)
    except Exception as err:  # noqa: BLE001 - a benchmark reports its failure as a record
        return error_record(NAME, err)
    ratios = [b / a for a, b in zip(times["ours"], times["baseline"])]
    q1, q3 = quartiles(ratios)
    return {
        "name": NAME,
        "ours": round(statistics.median(times["ours"]), 4),
        "baseline": round(statistics.median(times["baseline"]), 4),
        "ratio": round(statistics.median(ratios), 2),
        "unit": "s",
        "n": ROUNDS,
        "spread": [round(q1, 2), round(q3, 2)],
        "rows": design.n,
        "samples": SAMPLES,
        "note": f"baseline timed on {BASELINE_SAMPLES} of the {SAMPLES} model samples (all {design.n} rows) and "
        f"scaled linearly by {SAMPLES // BASELINE_SAMPLES}; ratio = baseline / ours; wall clock, interleaved rounds",
    }


if __name__ == "__main__":
    print(json.dumps(run()))
