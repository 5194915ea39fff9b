"""The run behind ``fdp-audit profile`` (docs/profiles.md, docs/files.md): config → data → A(D) → neighbours → profiles,
ε sweep and transition → figures and ``profile.json``.

:func:`run_profile` computes everything into a :class:`ProfileRun`; :func:`results_dict` turns it into
the JSON-able dict the HTML report reads (every number it shows); :func:`make_figures` draws the
figures of docs/profiles.md; :func:`write_outputs` writes figures, arrays and JSON atomically (JSON last).

Choices made here (documented in the JSON):

* Data: rows with a missing value in a *used* column are dropped (not rows missing elsewhere), so the
  numeric Adult settings keep all 32,561 rows of adult.data as in the paper; ``profile.rows`` keeps
  the first rows. Row ids in the outputs are 0-based indices into the source table.
* Profiles at fixed points are reported at unit inverse scale (β = 1, or σ = 1 for the Gaussian),
  i.e. as |l|/β: the ranking is the same for every ε.
* The off-centre model point is M = A(D) + q·e, with e the leading principal axis of the offsets
  Δ_i = A(y_i) - A(D) and q their median norm, so the circle ‖A(y) - M‖ = ‖A(D) - M‖ of zero loss
  (through A(D), centred at M) cuts through the neighbour cloud (paper Fig. 4b).
* The scatter shows 50 neighbours evenly spread over the ranking by ‖Δ_i‖ (including y_max), 20 model
  samples each, at every ε of ``profile.epsilons`` (paper Figs. 1 and 8), on the first
  ``profile.scatter_rows`` rows when set (the paper's 100) so that one config draws every figure.
* ``profile.diffprivlib: true`` adds diffprivlib's objective perturbation to the scatter, and is bad
  input when diffprivlib cannot run (:func:`.third_party.unavailable_reason`).
* DP-SGD and FDP-SGD have no output density: :func:`run_profile` hands them to :mod:`.trained`
  (Monte Carlo coverage over models from the batched engine) and :func:`write_outputs` writes theirs.
* The Monte Carlo check estimates l for the 5 most exposed rows at one model point by sampling the
  analytic mechanism (K = 20,000 per distribution), at the ε where β‖Δ_max‖ = 1, and sets it beside
  the exact value: a live test of the estimator used for DP-SGD.
"""

from __future__ import annotations

import io
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from fdp_audit import __version__
from fdp_audit.atomic_io import atomic_write_bytes, atomic_write_json
from fdp_audit.config import Config, ProfileConfig
from fdp_audit.data.datasets import DEFAULT_LABELS, load_bundled
from fdp_audit.errors import BadInputError
from fdp_audit.profiles import third_party, trained
from fdp_audit.profiles.coverage import gaussian_kl, laplace_mean_loss
from fdp_audit.profiles.design import Design, design_from_table
from fdp_audit.profiles.figures import (
    ScatterPanel,
    figure_png,
    neighbour_curves_figure,
    profiles_figure,
    scatter_figure,
    transition_figure,
    typical_profiles_figure,
    worst_case_figure,
)
from fdp_audit.profiles.logistic import NewtonResult, fit_newton, objective
from fdp_audit.profiles.mechanisms import (
    GaussianOutputPerturbation,
    LaplaceOutputPerturbation,
    MechanismName,
    make_mechanism,
)
from fdp_audit.profiles.monte_carlo import MonteCarloLoss, monte_carlo_privacy_loss
from fdp_audit.profiles.neighbours import (
    NeighbourModels,
    Neighbours,
    exact_neighbour_models,
    okumura_spheres,
    removal_neighbours,
    replacement_neighbours,
    worst_case_points,
)
from fdp_audit.profiles.profile import PrivacyProfile, profile_at, spread_positions
from fdp_audit.profiles.section import report_section
from fdp_audit.profiles.trained import TRAINED_MECHANISMS, TrainedProfileRun, run_trained_profile
from fdp_audit.profiles.transition import (
    TAU,
    EpsilonSweep,
    Transition,
    beta_star,
    detect_transition,
    epsilon_sweep,
    rank_positions,
)

SCHEMA_VERSION = 1
PAPER_WC_CLAIM = 2e-3
SCATTER_NEIGHBOURS, SCATTER_SAMPLES = 50, 20
DIFFPRIVLIB_MAX_ROWS = 2000
MC_ROWS, MC_SAMPLES = 5, 20_000
CURVE_POINTS = 200  # rank positions kept per profile curve in the JSON
CURVE_ROW_QUANTILES = (0.01, 0.25, 0.5, 0.75, 0.95)  # of ‖Δ_i‖ > 0: neighbours in the per-neighbour figure
BUNDLED = ("adult", "german", "diabetes", "digits")
OPTIONAL_FIGURES = ("scatter_diffprivlib",)


@dataclass(frozen=True)
class McCheck:
    """The Monte Carlo estimate of l at one model point M = A(D) + ``point`` for the neighbours at
    ``positions``, beside the exact (density) values."""

    epsilon: float
    point: np.ndarray
    positions: np.ndarray
    estimate: MonteCarloLoss
    analytic: np.ndarray


@dataclass(frozen=True)
class ProfileRun:
    """Everything :func:`run_profile` computed; arrays are indexed by neighbour position 0..n-1
    (``design.row_ids`` maps positions to source rows)."""

    config: Config
    settings: ProfileConfig
    dataset: str
    label: str
    design: Design
    base: NewtonResult
    neighbours: Neighbours
    exact: NeighbourModels
    worst_case: np.ndarray
    sphere_centres: np.ndarray
    sphere_radii: np.ndarray
    deltas: np.ndarray
    centre_profile: PrivacyProfile
    off_centre_offset: np.ndarray
    off_centre_profile: PrivacyProfile
    sweep: EpsilonSweep
    positions: np.ndarray
    transition: Transition
    beta_star: float
    row_max: int
    curve_positions: np.ndarray
    mc_check: McCheck
    scatter: list[ScatterPanel]
    scatter_design: Design  # the first profile.scatter_rows rows, or ``design``
    scatter_positions: np.ndarray  # positions in scatter_design
    diffprivlib_scatter: list[ScatterPanel] | None
    diffprivlib_status: str
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def delta_norms(self) -> np.ndarray:
        return np.linalg.norm(self.deltas, axis=1)

    @property
    def relative_wc_error(self) -> np.ndarray:
        """|A_wc - A(y)| / |A(y) - A(D)| with exact A(y); NaN where A(y) = A(D)."""
        exact_offset = np.linalg.norm(self.exact.models - self.base.w, axis=1)
        error = np.linalg.norm(self.worst_case - self.exact.models, axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(exact_offset > 0, error / exact_offset, np.nan)

    def epsilon_of_scale(self, scale: float) -> float:
        return _epsilon_of_scale(
            self.settings.mechanism, scale, self.design.n, self.settings.regularization, self.sweep
        )


def _epsilon_of_scale(name: MechanismName, scale: float, n: int, lam: float, sweep: EpsilonSweep) -> float:
    """ε of an inverse noise scale: exact for Laplace (ε = 2β/(nΛ)), interpolated on the sweep grid
    for the Gaussian (NaN outside it)."""
    return 2.0 * scale / (n * lam) if name == "laplace" else sweep.epsilon_at(scale)


def unit_mechanism(name: MechanismName) -> LaplaceOutputPerturbation | GaussianOutputPerturbation:
    """The mechanism at unit inverse scale: its losses are |l|/β (or l·σ² for the Gaussian)."""
    return LaplaceOutputPerturbation(1.0) if name == "laplace" else GaussianOutputPerturbation(1.0)


def _load_design(config: Config, settings: ProfileConfig, rows: int | None) -> tuple[Design, str]:
    """The profile design of ``settings.columns`` on the first ``rows`` complete rows (None: all)."""
    dataset = config.data.dataset
    if dataset not in BUNDLED:
        raise BadInputError(
            f"privacy profiles run on a bundled data set ({', '.join(BUNDLED)}), got {dataset!r}", "data.dataset"
        )
    label = config.data.label or DEFAULT_LABELS[dataset]
    table = load_bundled(dataset, drop_missing=False)
    return design_from_table(table, settings.columns, label, rows), label


def _neighbours(config: Config, settings: ProfileConfig, design: Design) -> Neighbours:
    if settings.neighbour == "remove":
        return removal_neighbours(design.n)
    protected = settings.protected if settings.protected is not None else config.data.protected
    missing = [c for c in protected if c not in settings.columns]
    if not protected or missing:
        raise BadInputError(
            "replacement neighbours need protected columns among profile.columns; "
            f"not there: {missing or 'none given'}",
            "profile.protected",
        )
    return replacement_neighbours(design.X, design.feature_mask(protected), design.reference)


def _off_centre_offset(deltas: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(deltas, axis=1)
    _, _, vt = np.linalg.svd(deltas - deltas.mean(axis=0), full_matrices=False)
    return np.median(norms) * vt[0]


def _scatter(
    name: MechanismName,
    settings: ProfileConfig,
    design: Design,
    w: np.ndarray,
    models: np.ndarray,
    rng: np.random.Generator,
) -> list[ScatterPanel]:
    panels = []
    for epsilon in sorted(settings.epsilons):
        mech = make_mechanism(name, epsilon, design.n, settings.regularization, settings.delta)
        base = w + mech.sample_noise(SCATTER_SAMPLES, design.d, rng)
        noise = mech.sample_noise(models.shape[0] * SCATTER_SAMPLES, design.d, rng)
        panels.append(
            ScatterPanel(epsilon, base, models[:, None, :] + noise.reshape(models.shape[0], SCATTER_SAMPLES, -1))
        )
    return panels


def _neighbour_data(design: Design, neighbours: Neighbours, position: int) -> tuple[np.ndarray, np.ndarray]:
    """The data set y_i itself (for a third-party trainer that needs the rows)."""
    if neighbours.kind == "remove":
        keep = np.arange(design.n) != position
        return design.X[keep], design.y[keep]
    X = design.X.copy()
    X[position] = neighbours.replacement[position]
    return X, design.y


def _check_diffprivlib(settings: ProfileConfig, scatter_n: int) -> None:
    """Refuse, before any work, a diffprivlib scatter that cannot be drawn."""
    if settings.mechanism in TRAINED_MECHANISMS:
        raise BadInputError("the diffprivlib scatter goes with output perturbation (laplace, gaussian)",
                            "profile.diffprivlib")
    reason = third_party.unavailable_reason()
    if reason is not None:
        raise BadInputError(f"the optional diffprivlib cannot run here ({reason}); set it to false",
                            "profile.diffprivlib")
    if scatter_n > DIFFPRIVLIB_MAX_ROWS:
        raise BadInputError(f"the scatter has {scatter_n} rows, more than {DIFFPRIVLIB_MAX_ROWS} for diffprivlib "
                            "(one fit per sample and neighbour); set profile.scatter_rows", "profile.diffprivlib")


def _diffprivlib_scatter(
    settings: ProfileConfig, design: Design, neighbours: Neighbours, positions: np.ndarray, rng: np.random.Generator
) -> tuple[list[ScatterPanel] | None, str]:
    if not settings.diffprivlib:
        return None, "disabled by profile.diffprivlib"
    lam, panels = settings.regularization, []
    for epsilon in sorted(settings.epsilons):
        base = third_party.diffprivlib_samples(design.X, design.y, epsilon, lam, SCATTER_SAMPLES, rng)
        per_neighbour = [
            third_party.diffprivlib_samples(
                *_neighbour_data(design, neighbours, int(p)), epsilon, lam, SCATTER_SAMPLES, rng
            )
            for p in positions
        ]
        panels.append(ScatterPanel(epsilon, base, np.array(per_neighbour)))
    return panels, "used"


def _mc_check(
    name: MechanismName,
    settings: ProfileConfig,
    design: Design,
    deltas: np.ndarray,
    epsilon: float,
    rng: np.random.Generator,
) -> McCheck:
    mech = make_mechanism(name, epsilon, design.n, settings.regularization, settings.delta)
    positions = np.argsort(np.linalg.norm(deltas, axis=1))[::-1][:MC_ROWS]
    point = mech.sample_noise(1, design.d, rng)[0]  # M - A(D): a typical model point
    base = mech.sample_noise(MC_SAMPLES, design.d, rng)
    neighbour = deltas[positions][:, None, :] + mech.sample_noise(MC_ROWS * MC_SAMPLES, design.d, rng).reshape(
        MC_ROWS, MC_SAMPLES, -1
    )
    estimate = monte_carlo_privacy_loss(base, neighbour, point[None, :], settings.cutoff)
    analytic = mech.privacy_loss(deltas[positions], point[None, :])[0]
    return McCheck(epsilon, point, positions, estimate, analytic)


def run_profile(config: Config) -> ProfileRun | TrainedProfileRun:
    """Compute profiles, the ε sweep and its transition, and the figure data for ``config.profile``;
    for DP-SGD and FDP-SGD, the Monte Carlo estimate of :mod:`.trained` instead."""
    settings = config.profile
    if settings is None:
        raise BadInputError("the config has no profile section", "profile")
    if not settings.sweep_min_epsilon < settings.sweep_max_epsilon:
        raise BadInputError("must be below profile.sweep_max_epsilon", "profile.sweep_min_epsilon")
    design, label = _load_design(config, settings, settings.rows)
    if settings.diffprivlib:
        _check_diffprivlib(settings, min(settings.scatter_rows or design.n, design.n))
    if settings.mechanism in TRAINED_MECHANISMS:
        return run_trained_profile(config, design, label, _neighbours(config, settings, design))
    name: MechanismName = settings.mechanism
    lam = settings.regularization
    streams = [np.random.default_rng(s) for s in np.random.SeedSequence([config.seed, 0x9F0F]).spawn(4)]
    timings: dict[str, float] = {}
    clock = time.perf_counter()

    def lap(stage: str) -> None:
        nonlocal clock
        now = time.perf_counter()
        timings[stage] = round(now - clock, 3)
        clock = now

    base = fit_newton(design.X, design.y, lam)
    lap("base_model")
    neighbours = _neighbours(config, settings, design)
    exact = exact_neighbour_models(design.X, design.y, base.w, lam, neighbours)
    worst_case = worst_case_points(design.X, design.y, base.w, lam, neighbours)
    centres, radii = okumura_spheres(design.X, design.y, base.w, lam, neighbours)
    deltas = (exact.models if settings.neighbour_model == "exact" else worst_case) - base.w
    lap("neighbours")

    unit = unit_mechanism(name)
    offset = _off_centre_offset(deltas)
    centre_profile = profile_at(unit, deltas, np.zeros(design.d))
    off_centre_profile = profile_at(unit, deltas, offset)
    grid = np.geomspace(settings.sweep_min_epsilon, settings.sweep_max_epsilon, settings.sweep_points)
    sweep = epsilon_sweep(name, deltas, design.n, lam, grid, settings.samples, streams[0], settings.delta)
    positions = rank_positions(design.n, np.array(settings.rank_quantiles))
    transition = detect_transition(sweep, positions, TAU)
    b_star, row_max = beta_star(deltas)
    norms = np.linalg.norm(deltas, axis=1)
    order = np.argsort(norms)
    moved = order[norms[order] > 0]  # rows whose neighbour changes the model (all, for removal)
    curve_positions = (
        np.unique(np.append(moved[np.round(np.array(CURVE_ROW_QUANTILES) * (moved.size - 1)).astype(int)], row_max))
        if moved.size
        else np.array([], dtype=int)
    )
    lap("profiles_and_sweep")

    mc_epsilon = _epsilon_of_scale(name, b_star, design.n, lam, sweep)
    if not np.isfinite(mc_epsilon):  # β* outside a Gaussian sweep grid: check at the grid's middle
        mc_epsilon = float(np.sqrt(sweep.epsilons[0] * sweep.epsilons[-1]))
    mc_check = _mc_check(name, settings, design, deltas, mc_epsilon, streams[1])
    lap("monte_carlo_check")
    if settings.scatter_rows is not None and settings.scatter_rows < design.n:
        scatter_design, _ = _load_design(config, settings, settings.scatter_rows)
        scatter_neighbours = _neighbours(config, settings, scatter_design)
        scatter_w = fit_newton(scatter_design.X, scatter_design.y, lam).w
        scatter_models = exact_neighbour_models(
            scatter_design.X, scatter_design.y, scatter_w, lam, scatter_neighbours
        ).models
        scatter_order = np.argsort(np.linalg.norm(scatter_models - scatter_w, axis=1))
    else:
        scatter_design, scatter_neighbours, scatter_w = design, neighbours, base.w
        scatter_models, scatter_order = base.w + deltas, order
    scatter_positions = spread_positions(scatter_order, SCATTER_NEIGHBOURS)
    scatter = _scatter(name, settings, scatter_design, scatter_w, scatter_models[scatter_positions], streams[2])
    dpl_panels, dpl_status = _diffprivlib_scatter(
        settings, scatter_design, scatter_neighbours, scatter_positions, streams[3]
    )
    lap("scatter")
    return ProfileRun(
        config=config,
        settings=settings,
        dataset=config.data.dataset,
        label=label,
        design=design,
        base=base,
        neighbours=neighbours,
        exact=exact,
        worst_case=worst_case,
        sphere_centres=centres,
        sphere_radii=radii,
        deltas=deltas,
        centre_profile=centre_profile,
        off_centre_offset=offset,
        off_centre_profile=off_centre_profile,
        sweep=sweep,
        positions=positions,
        transition=transition,
        beta_star=b_star,
        row_max=row_max,
        curve_positions=curve_positions,
        mc_check=mc_check,
        scatter=scatter,
        scatter_design=scatter_design,
        scatter_positions=scatter_positions,
        diffprivlib_scatter=dpl_panels,
        diffprivlib_status=dpl_status,
        timings=timings,
    )


def _num(value: Any) -> float | None:
    """A JSON number, or None for NaN/inf (the JSON writer refuses non-finite numbers)."""
    value = float(value)
    return value if np.isfinite(value) else None


def _nums(values: np.ndarray) -> list:
    return [_nums(v) if np.ndim(v) else _num(v) for v in np.asarray(values, dtype=np.float64)]


def _curve_positions(n: int) -> np.ndarray:
    """At most CURVE_POINTS positions of an n-point profile, denser at both ends where it bends."""
    if n <= CURVE_POINTS:
        return np.arange(n)
    half = np.geomspace(1, n, CURVE_POINTS // 2)
    return np.unique(np.concatenate([half - 1, n - half]).round().astype(int).clip(0, n - 1))


def _profile_dict(run: ProfileRun, profile: PrivacyProfile, offset: np.ndarray, top: int = 20) -> dict[str, Any]:
    keep = _curve_positions(profile.values.size)
    rows = run.design.row_ids[profile.rows]
    return {
        "point": _nums(run.base.w + offset),
        "offset_from_base": _nums(offset),
        "rank": (keep + 1).tolist(),
        "value": _nums(profile.values[keep]),
        "most_exposed": [
            {"row": int(r), "value": _num(v)} for r, v in zip(rows[::-1][:top], profile.values[::-1][:top])
        ],
    }


def _unit_label(name: MechanismName) -> str:
    return "|l|/β (Laplace at β = 1)" if name == "laplace" else "|l|·σ² (Gaussian at σ = 1)"


def results_dict(run: ProfileRun) -> dict[str, Any]:
    """Every number the report shows about this run, as a JSON-able dict (schema ``SCHEMA_VERSION``)."""
    s, design, sweep, tr = run.settings, run.design, run.sweep, run.transition
    name: MechanismName = s.mechanism
    norms = run.delta_norms
    rel = run.relative_wc_error
    compared = np.isfinite(rel)
    worst = int(np.nanargmax(rel)) if compared.any() else None
    sphere_excess = (np.linalg.norm(run.exact.models - run.sphere_centres, axis=1) - run.sphere_radii).max()
    mc = run.mc_check
    scale_unit = "β" if name == "laplace" else "1/σ"
    kl_reference = (
        laplace_mean_loss(sweep.scales[:, None] * norms[run.curve_positions][None, :], design.d)
        if name == "laplace"
        else gaussian_kl(norms[run.curve_positions][None, :], 1.0 / sweep.scales[:, None])
    )
    return {
        "schema_version": SCHEMA_VERSION,
        "kind": "privacy_profile",
        "package_version": __version__,
        "name": run.config.name,
        "seed": run.config.seed,
        "setting": {
            "dataset": run.dataset,
            "label": run.label,
            "positive_class": "the lexicographically larger label value is +1",
            "columns": list(s.columns),
            "features": list(design.features),
            "n": design.n,
            "d": design.d,
            "rows": s.rows,
            "regularization": s.regularization,
            "normalisation": "standardise each column, then divide all rows by the largest row norm",
            "mechanism": name,
            "delta": s.delta if name == "gaussian" else None,
            "neighbour": s.neighbour,
            "protected": list(s.protected if s.protected is not None else run.config.data.protected)
            if s.neighbour == "replace"
            else [],
            "replacement": "protected numeric columns set to their mean, categorical ones to their mode"
            if s.neighbour == "replace"
            else None,
            "neighbour_model": s.neighbour_model,
            "samples": s.samples,
            "row_ids": "0-based row index in the source table",
        },
        "base_model": {
            "A_D": _nums(run.base.w),
            "newton_iterations": run.base.iterations,
            "gradient_norm": _num(run.base.gradient_norm),
            "objective": _num(objective(run.base.w, design.X, design.y, s.regularization)),
        },
        "neighbours": {
            "kind": run.neighbours.kind,
            "count": len(run.neighbours),
            "delta_norm": {
                "min": _num(norms.min()),
                "median": _num(np.median(norms)),
                "max": _num(norms.max()),
                "row_max": int(design.row_ids[run.row_max]),
            },
            "unchanged_rows": int((norms == 0).sum()),
            "newton_iterations_max": int(run.exact.iterations.max()),
            "newton_last_step_max": _num(run.exact.last_step.max()),
        },
        "worst_case_accuracy": {
            "statistic": "max over rows of |A_wc(y_i) - A(y_i)| / |A(y_i) - A(D)|, exact A(y_i) by Newton",
            "max_relative_error": _num(rel[worst]) if worst is not None else None,
            "median_relative_error": _num(np.nanmedian(rel)) if worst is not None else None,
            "row_of_max": int(design.row_ids[worst]) if worst is not None else None,
            "rows_compared": int(compared.sum()),
            "paper_claim": PAPER_WC_CLAIM,
            "within_paper_claim": bool(rel[worst] < PAPER_WC_CLAIM) if worst is not None else None,
            "max_sphere_excess": _num(sphere_excess),
        },
        "profiles": {
            "unit": _unit_label(name),
            "centre": _profile_dict(run, run.centre_profile, np.zeros(design.d)),
            "off_centre": _profile_dict(run, run.off_centre_profile, run.off_centre_offset),
        },
        "sweep": {
            "epsilons": _nums(sweep.epsilons),
            "scales": _nums(sweep.scales),
            "scale": scale_unit,
            "samples": sweep.samples,
            "rank_quantiles": list(s.rank_quantiles),
            "ranks": (run.positions + 1).tolist(),
            "curves": _nums(sweep.at_positions(run.positions)),
            "curve_unit": f"typical |l| / {scale_unit}",
            "typical_profile_ranks": (_curve_positions(design.n) + 1).tolist(),
            "typical_profiles": _nums(sweep.profiles[:, _curve_positions(design.n)] / sweep.scales[:, None]),
        },
        "transition": {
            "rule": (
                f"per rank, h = normalised rise of |l|/{scale_unit} between the grid ends; onset = first "
                f"crossing of h = {tr.tau}, end = last crossing of h = {1 - tr.tau} (log-linear interpolation); "
                "ε_low = min onset over ranks, ε_high = max end over ranks; a plateau is reached when two "
                "grid points lie on it"
            ),
            "tau": tr.tau,
            "epsilon_low": _num(tr.epsilon_low),
            "epsilon_high": _num(tr.epsilon_high),
            "scale_low": _num(tr.scale_low),
            "scale_high": _num(tr.scale_high),
            "low_plateau_reached": bool(tr.low_plateau_reached.all()),
            "high_plateau_reached": bool(tr.high_plateau_reached.all()),
            "per_rank": [
                {
                    "quantile": q,
                    "rank": int(p + 1),
                    "onset_epsilon": _num(oe),
                    "end_epsilon": _num(ee),
                    "onset_scale": _num(os_),
                    "end_scale": _num(es),
                    "low_plateau_reached": bool(lo),
                    "high_plateau_reached": bool(hi),
                }
                for q, p, oe, ee, os_, es, lo, hi in zip(
                    s.rank_quantiles,
                    run.positions,
                    tr.onset_epsilon,
                    tr.end_epsilon,
                    tr.onset_scale,
                    tr.end_scale,
                    tr.low_plateau_reached,
                    tr.high_plateau_reached,
                )
            ],
            "beta_star": _num(run.beta_star),
            "epsilon_star": _num(run.epsilon_of_scale(run.beta_star)),
            "beta_star_definition": "1 / max_i |A(D) - A(y_i)|",
            "row_max": int(design.row_ids[run.row_max]),
            "delta_max": _num(norms[run.row_max]),
        },
        "neighbour_curves": [
            {
                "row": int(design.row_ids[p]),
                "delta_norm": _num(norms[p]),
                "s": _nums(sweep.scales * norms[p]),
                "mean_loss": _nums(sweep.mean_loss[:, p]),
                "mean_abs_loss": _nums(sweep.mean_abs_loss[:, p]),
                "kl_exact": _nums(kl_reference[:, j]),
            }
            for j, p in enumerate(run.curve_positions)
        ],
        "coverage_check": {
            "label": mc.estimate.label,
            "epsilon": _num(mc.epsilon),
            "point": _nums(run.base.w + mc.point),
            "cutoff": _num(mc.estimate.cutoff),
            "cutoff_rule": "profile.cutoff"
            if s.cutoff is not None
            else "distance to the ceil(sqrt(K))-th nearest base sample",
            "base_samples": mc.estimate.base_samples,
            "neighbour_samples": mc.estimate.neighbour_samples,
            "base_count": int(mc.estimate.base_counts[0]),
            "rows": [int(design.row_ids[p]) for p in mc.positions],
            "neighbour_counts": mc.estimate.neighbour_counts[0].tolist(),
            "estimate": _nums(mc.estimate.loss[0]),
            "standard_error": _nums(mc.estimate.standard_error[0]),
            "analytic": _nums(mc.analytic),
        },
        "scatter": {
            "epsilons": sorted(s.epsilons),
            "n": run.scatter_design.n,
            "neighbours_shown": int(run.scatter_positions.size),
            "samples_per_distribution": SCATTER_SAMPLES,
            "rows_shown": [int(run.scatter_design.row_ids[p]) for p in run.scatter_positions],
            "diffprivlib": run.diffprivlib_status,
        },
        "figures": {name: f"figures/{name}.png" for name in figure_names(run)},
        "timings_s": dict(run.timings),
    }


def figure_names(run: ProfileRun) -> list[str]:
    return list(_figure_makers(run))


def _figure_makers(run: ProfileRun) -> dict[str, Callable[[], Figure]]:
    s, design = run.settings, run.design
    what = (
        f"{s.mechanism} output perturbation"
        if s.mechanism == "laplace"
        else f"Gaussian output perturbation (δ = {s.delta:g})"
    )
    makers: dict[str, Callable[[], Figure]] = {
        "scatter": lambda: scatter_figure(
            run.scatter,
            design.features,
            f"{what}: samples of $\\mathcal{{A}}(D)$ (×) and of {run.scatter_positions.size} "
            f"neighbours (○), n = {run.scatter_design.n}",
        ),
    }
    if run.diffprivlib_scatter is not None:
        makers["scatter_diffprivlib"] = lambda: scatter_figure(
            run.diffprivlib_scatter,
            design.features,
            f"diffprivlib LogisticRegression (objective perturbation), n = {run.scatter_design.n}",
        )
    makers.update(
        {
            "worst_case": lambda: worst_case_figure(
                run.base.w,
                run.exact.models,
                run.worst_case,
                run.sphere_centres,
                run.sphere_radii,
                run.relative_wc_error,
                design.features,
                PAPER_WC_CLAIM,
            ),
            "profiles": lambda: profiles_figure(
                run.deltas,
                run.centre_profile,
                run.off_centre_offset,
                run.off_centre_profile,
                _unit_label(s.mechanism),
                design.features,
                design.row_ids,
            ),
            "typical_profiles": lambda: typical_profiles_figure(run.sweep, run.transition),
            "transition": lambda: transition_figure(
                run.sweep, run.positions, s.rank_quantiles, run.transition, run.beta_star
            ),
            "neighbour_curves": lambda: neighbour_curves_figure(
                run.sweep, run.curve_positions, run.delta_norms, design.row_ids, design.d, run.transition.scale_low
            ),
        }
    )
    return makers


def make_figures(run: ProfileRun) -> dict[str, Figure]:
    """Every figure of docs/profiles.md for this run, by name."""
    return {name: make() for name, make in _figure_makers(run).items()}


def _arrays_npz(run: ProfileRun) -> bytes:
    buffer = io.BytesIO()
    np.savez_compressed(
        buffer,
        row_ids=run.design.row_ids,
        base_model=run.base.w,
        exact_models=run.exact.models,
        worst_case_models=run.worst_case,
        deltas=run.deltas,
        centre_profile_values=run.centre_profile.values,
        centre_profile_rows=run.design.row_ids[run.centre_profile.rows],
        off_centre_profile_values=run.off_centre_profile.values,
        off_centre_profile_rows=run.design.row_ids[run.off_centre_profile.rows],
        sweep_epsilons=run.sweep.epsilons,
        sweep_scales=run.sweep.scales,
        typical_profiles=run.sweep.profiles.astype(np.float32),
        mean_loss=run.sweep.mean_loss.astype(np.float32),
        mean_abs_loss=run.sweep.mean_abs_loss.astype(np.float32),
    )
    return buffer.getvalue()


def write_outputs(run: ProfileRun | TrainedProfileRun, out_dir: str | Path) -> dict[str, Any]:
    """Write ``figures/*.png``, ``profiles.npz``, ``report_section.json`` and ``profile.json`` (last) into
    ``out_dir``, each atomically; returns the results dict. Everything is rendered in memory first, so a
    failure leaves no partial file behind."""
    out = Path(out_dir)
    if isinstance(run, TrainedProfileRun):
        figures, arrays, results = trained.make_figures(run), trained.arrays_npz(run), trained.results_dict(run)
    else:
        figures, arrays, results = make_figures(run), _arrays_npz(run), results_dict(run)
    rendered = {name: figure_png(fig) for name, fig in figures.items()}
    section = report_section(results, figures)
    for name, png in rendered.items():
        atomic_write_bytes(out / "figures" / f"{name}.png", png)
    # An optional figure from an earlier run into the same folder would otherwise look current.
    for stale in set(OPTIONAL_FIGURES) - set(rendered):
        (out / "figures" / f"{stale}.png").unlink(missing_ok=True)
    atomic_write_bytes(out / "profiles.npz", arrays)
    atomic_write_json(out / "report_section.json", section)
    atomic_write_json(out / "profile.json", results)
    return results
