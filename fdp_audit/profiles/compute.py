"""The computation behind ``fdp-audit profile`` (docs/profiles.md): config → data → A(D) → neighbours → profiles,
ε sweep and transition, the Monte Carlo check and the scatter samples, into a :class:`ProfileRun`.
:mod:`.schema` turns a run into ``profile.json``; :mod:`.outputs` draws the figures and writes the files.

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
  (Monte Carlo coverage over models from the batched engine).
* The Monte Carlo check estimates l for the 5 most exposed rows at one model point by sampling the
  analytic mechanism (K = 20,000 per distribution), at the ε where β‖Δ_max‖ = 1, and sets it beside
  the exact value: a live test of the estimator used for DP-SGD.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field

import numpy as np

from fdp_audit.config import Config, ProfileConfig
from fdp_audit.data.catalog import DATASETS
from fdp_audit.errors import BadInputError
from fdp_audit.profiles import neighbours as neighbour_sets
from fdp_audit.profiles import third_party
from fdp_audit.profiles import transition as epsilon_transition
from fdp_audit.profiles.design import Design, design_from_table
from fdp_audit.profiles.figures import ScatterPanel
from fdp_audit.profiles.logistic import NewtonResult, fit_newton
from fdp_audit.profiles.mechanisms import (
    GaussianOutputPerturbation,
    LaplaceOutputPerturbation,
    MechanismName,
    make_mechanism,
)
from fdp_audit.profiles.monte_carlo import MonteCarloLoss, monte_carlo_privacy_loss
from fdp_audit.profiles.profile import PrivacyProfile, profile_at, spread_positions
from fdp_audit.profiles.trained import TRAINED_MECHANISMS, TrainedProfileRun, run_trained_profile

SCATTER_NEIGHBOURS, SCATTER_SAMPLES = 50, 20
DIFFPRIVLIB_MAX_ROWS = 2000
MC_ROWS, MC_SAMPLES = 5, 20_000
CURVE_ROW_QUANTILES = (0.01, 0.25, 0.5, 0.75, 0.95)  # of ‖Δ_i‖ > 0: neighbours in the per-neighbour figure


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
    neighbours: neighbour_sets.Neighbours
    exact: neighbour_sets.NeighbourModels
    worst_case: np.ndarray
    sphere_centres: np.ndarray
    sphere_radii: np.ndarray
    deltas: np.ndarray
    centre_profile: PrivacyProfile
    off_centre_offset: np.ndarray
    off_centre_profile: PrivacyProfile
    sweep: epsilon_transition.EpsilonSweep
    positions: np.ndarray
    transition: epsilon_transition.Transition
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
        """ε of an inverse noise scale: exact for Laplace (ε = 2β/(nΛ)), interpolated on the sweep grid for the
        Gaussian (NaN outside it).

        Args:
            scale: an inverse noise scale s (β, or 1/σ).

        Returns:
            The ε of this run's data set size and Λ at that scale.
        """
        return _epsilon_of_scale(
            self.settings.mechanism, scale, self.design.n, self.settings.regularization, self.sweep
        )


def _epsilon_of_scale(name: MechanismName, scale: float, n: int, lam: float,
                      sweep: epsilon_transition.EpsilonSweep) -> float:
    """ε of an inverse noise scale: exact for Laplace (ε = 2β/(nΛ)), interpolated on the sweep grid
    for the Gaussian (NaN outside it)."""
    return 2.0 * scale / (n * lam) if name == "laplace" else sweep.epsilon_at(scale)


def unit_mechanism(name: MechanismName) -> LaplaceOutputPerturbation | GaussianOutputPerturbation:
    """The mechanism at unit inverse scale: its losses are |l|/β (or l·σ² for the Gaussian).

    Args:
        name: ``"laplace"`` or ``"gaussian"``.

    Returns:
        Radial Laplace with β = 1, or the Gaussian with σ = 1.
    """
    return LaplaceOutputPerturbation(1.0) if name == "laplace" else GaussianOutputPerturbation(1.0)


def _load_design(config: Config, settings: ProfileConfig, rows: int | None) -> tuple[Design, str]:
    """The profile design of ``settings.columns`` on the first ``rows`` complete rows (None: all)."""
    entry = DATASETS[config.data.dataset]
    if not entry.bundled or entry.table is None:
        bundled = [name for name, other in DATASETS.items() if other.bundled and other.table is not None]
        raise BadInputError(f"privacy profiles run on a bundled data set ({', '.join(bundled)}), got {entry.name!r}",
                            "data.dataset")
    label = config.data.label or entry.label
    table, _ = entry.table(dataclasses.replace(config.data, drop_missing=False), config.seed)
    return design_from_table(table, settings.columns, label, rows), label


def _neighbours(config: Config, settings: ProfileConfig, design: Design) -> neighbour_sets.Neighbours:
    if settings.neighbour == "remove":
        return neighbour_sets.removal_neighbours(design.n)
    protected = settings.protected if settings.protected is not None else config.data.protected
    missing = [c for c in protected if c not in settings.columns]
    if not protected or missing:
        raise BadInputError(
            "replacement neighbours need protected columns among profile.columns; "
            f"not there: {missing or 'none given'}",
            "profile.protected",
        )
    return neighbour_sets.replacement_neighbours(design.X, design.feature_mask(protected), design.reference)


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


def _neighbour_data(design: Design, neighbours: neighbour_sets.Neighbours, position: int
                    ) -> tuple[np.ndarray, np.ndarray]:
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
    settings: ProfileConfig, design: Design, neighbours: neighbour_sets.Neighbours, positions: np.ndarray,
    rng: np.random.Generator,
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



@dataclass(frozen=True)
class Scatter:
    """The scatter's samples: of A(D) and of the neighbours at ``positions`` of ``design`` (every ε), and of
    diffprivlib's mechanism when asked for."""

    panels: list[ScatterPanel]
    design: Design
    positions: np.ndarray
    diffprivlib: list[ScatterPanel] | None
    diffprivlib_status: str


class _Stopwatch:
    """Seconds per stage of a run, for the JSON's ``timings_s``."""

    def __init__(self) -> None:
        self.timings: dict[str, float] = {}
        self._clock = time.perf_counter()

    def lap(self, stage: str) -> None:
        now = time.perf_counter()
        self.timings[stage] = round(now - self._clock, 3)
        self._clock = now


def _checked_settings(config: Config) -> ProfileConfig:
    settings = config.profile
    if settings is None:
        raise BadInputError("the config has no profile section", "profile")
    if not settings.sweep_min_epsilon < settings.sweep_max_epsilon:
        raise BadInputError("must be below profile.sweep_max_epsilon", "profile.sweep_min_epsilon")
    return settings


def _curve_rows(deltas: np.ndarray, row_max: int) -> np.ndarray:
    """The neighbours of the per-neighbour figure: the :data:`CURVE_ROW_QUANTILES` of ‖Δ_i‖ among the rows
    whose neighbour moves the model (all of them, for removal), and the most exposed row."""
    norms = np.linalg.norm(deltas, axis=1)
    order = np.argsort(norms)
    moved = order[norms[order] > 0]
    if not moved.size:
        return np.array([], dtype=int)
    return np.unique(np.append(moved[np.round(np.array(CURVE_ROW_QUANTILES) * (moved.size - 1)).astype(int)],
                               row_max))


def _scatter_samples(config: Config, settings: ProfileConfig, design: Design, neighbours: neighbour_sets.Neighbours,
                     base: NewtonResult, deltas: np.ndarray, streams: list[np.random.Generator]) -> Scatter:
    """The scatter on the first ``profile.scatter_rows`` rows (refitted there), or on the whole design."""
    lam = settings.regularization
    if settings.scatter_rows is not None and settings.scatter_rows < design.n:
        scatter_design, _ = _load_design(config, settings, settings.scatter_rows)
        scatter_neighbours = _neighbours(config, settings, scatter_design)
        scatter_w = fit_newton(scatter_design.X, scatter_design.y, lam).w
        scatter_models = neighbour_sets.exact_neighbour_models(
            scatter_design.X, scatter_design.y, scatter_w, lam, scatter_neighbours
        ).models
        scatter_order = np.argsort(np.linalg.norm(scatter_models - scatter_w, axis=1))
    else:
        scatter_design, scatter_neighbours, scatter_w = design, neighbours, base.w
        scatter_models, scatter_order = base.w + deltas, np.argsort(np.linalg.norm(deltas, axis=1))
    positions = spread_positions(scatter_order, SCATTER_NEIGHBOURS)
    panels = _scatter(settings.mechanism, settings, scatter_design, scatter_w, scatter_models[positions], streams[2])
    dpl_panels, dpl_status = _diffprivlib_scatter(settings, scatter_design, scatter_neighbours, positions, streams[3])
    return Scatter(panels, scatter_design, positions, dpl_panels, dpl_status)


def run_profile(config: Config) -> ProfileRun | TrainedProfileRun:
    """Compute profiles, the ε sweep and its transition, and the figure data for ``config.profile``;
    for DP-SGD and FDP-SGD, the Monte Carlo estimate of :mod:`.trained` instead.

    Args:
        config: a validated configuration with a ``profile`` section.

    Returns:
        The output-perturbation run, or the trained-mechanism run.

    Raises:
        BadInputError: no profile section, a sweep whose lowest ε is not below its highest, a data set that is
            not bundled, columns or a label it lacks, replacement neighbours without protected columns among the
            profile's columns, a diffprivlib scatter that cannot run, or (DP-SGD, FDP-SGD) a training
            :func:`~fdp_audit.profiles.trained.run_trained_profile` refuses.
        RuntimeError: a Newton solve of the base or a neighbour model does not converge.
    """
    settings = _checked_settings(config)
    design, label = _load_design(config, settings, settings.rows)
    if settings.diffprivlib:
        _check_diffprivlib(settings, min(settings.scatter_rows or design.n, design.n))
    if settings.mechanism in TRAINED_MECHANISMS:
        return run_trained_profile(config, design, label, _neighbours(config, settings, design))
    name: MechanismName = settings.mechanism
    lam = settings.regularization
    streams = [np.random.default_rng(s) for s in np.random.SeedSequence([config.seed, 0x9F0F]).spawn(4)]
    stopwatch = _Stopwatch()

    base = fit_newton(design.X, design.y, lam)
    stopwatch.lap("base_model")
    neighbours = _neighbours(config, settings, design)
    exact = neighbour_sets.exact_neighbour_models(design.X, design.y, base.w, lam, neighbours)
    worst_case = neighbour_sets.worst_case_points(design.X, design.y, base.w, lam, neighbours)
    centres, radii = neighbour_sets.okumura_spheres(design.X, design.y, base.w, lam, neighbours)
    deltas = (exact.models if settings.neighbour_model == "exact" else worst_case) - base.w
    stopwatch.lap("neighbours")

    unit = unit_mechanism(name)
    offset = _off_centre_offset(deltas)
    centre_profile = profile_at(unit, deltas, np.zeros(design.d))
    off_centre_profile = profile_at(unit, deltas, offset)
    grid = np.geomspace(settings.sweep_min_epsilon, settings.sweep_max_epsilon, settings.sweep_points)
    sweep = epsilon_transition.epsilon_sweep(name, deltas, design.n, lam, grid, settings.samples, streams[0],
                                             settings.delta)
    positions = epsilon_transition.rank_positions(design.n, np.array(settings.rank_quantiles))
    transition = epsilon_transition.detect_transition(sweep, positions, epsilon_transition.TAU)
    b_star, row_max = epsilon_transition.beta_star(deltas)
    curve_rows = _curve_rows(deltas, row_max)
    stopwatch.lap("profiles_and_sweep")

    mc_epsilon = _epsilon_of_scale(name, b_star, design.n, lam, sweep)
    if not np.isfinite(mc_epsilon):  # β* outside a Gaussian sweep grid: check at the grid's middle
        mc_epsilon = float(np.sqrt(sweep.epsilons[0] * sweep.epsilons[-1]))
    mc_check = _mc_check(name, settings, design, deltas, mc_epsilon, streams[1])
    stopwatch.lap("monte_carlo_check")
    scatter = _scatter_samples(config, settings, design, neighbours, base, deltas, streams)
    stopwatch.lap("scatter")
    return ProfileRun(
        config=config, settings=settings, dataset=config.data.dataset, label=label, design=design, base=base,
        neighbours=neighbours, exact=exact, worst_case=worst_case, sphere_centres=centres, sphere_radii=radii,
        deltas=deltas, centre_profile=centre_profile, off_centre_offset=offset, off_centre_profile=off_centre_profile,
        sweep=sweep, positions=positions, transition=transition, beta_star=b_star, row_max=row_max,
        curve_positions=curve_rows, mc_check=mc_check, scatter=scatter.panels,
        scatter_design=scatter.design, scatter_positions=scatter.positions,
        diffprivlib_scatter=scatter.diffprivlib, diffprivlib_status=scatter.diffprivlib_status,
        timings=stopwatch.timings,
    )
