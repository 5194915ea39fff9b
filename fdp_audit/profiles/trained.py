"""Privacy profiles of trained mechanisms without a known output density — DP-SGD and Algorithm 1
(FDP-SGD) — by Monte Carlo coverage over independently trained models (docs/profiles.md;
paper footnote 1).

The setting is the profile setting of :mod:`.design` (the same normalised rows, labels and neighbours
as output perturbation), trained by the batched engine (:func:`fdp_audit.training.engine.train_models`)
with the config's ``mechanism`` hyperparameters (z, p, T, C, optimiser, public loss) and the engine's
logistic model, whose released parameters are the weights *and* the bias. For each studied neighbour
y_i a second batch of models is trained on y_i itself (row i removed, or its protected columns set to
the reference value); every model has its own model index, so all samples are independent.

Which neighbours: ``profile.monte_carlo_rows`` rows spread evenly over the ranking by the non-private
offset ‖A(y_i) - A(D)‖ of the regularised ERM (:mod:`.neighbours`), always including the most exposed
row — one batch of ``profile.samples`` models per neighbour, so the whole profile of every row is out of
reach and this is a *sample* of it.

Where: the loss is estimated (:func:`.monte_carlo.monte_carlo_privacy_loss`) at the centre M̄ (the mean
of the samples of 𝒜(D), the analogue of M = A(D)) and at ``profile.monte_carlo_points`` further models
M ~ 𝒜(D), trained separately so that a point is never one of the samples counted around it. Each point
has its own cutoff c (``profile.cutoff``, or the distance to its ⌈√K⌉-th nearest sample of 𝒜(D)).
Averaging l̂ over the points estimates KL(𝒜(D) ‖ 𝒜(y_i)); averaging the sorted |l̂| position by
position estimates the typical profile. Everything is reported as an estimate, with c, K and the
standard errors; an unresolved coverage (no neighbour sample inside the ball) makes the loss infinite
and is counted, never dropped silently.
"""

from __future__ import annotations

import hashlib
import io
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch
from matplotlib.figure import Figure

from fdp_audit import __version__
from fdp_audit.accounting.events import Relation
from fdp_audit.claim import Claim, noise_multiplier
from fdp_audit.config import Config, ProfileConfig
from fdp_audit.data.encoding import ColumnGroup, EncodedData
from fdp_audit.data.features import ColumnSplit
from fdp_audit.data.prepare import PreparedData
from fdp_audit.errors import BadInputError
from fdp_audit.json_numbers import json_float, json_floats
from fdp_audit.mechanisms import MECHANISMS
from fdp_audit.profiles.design import Design
from fdp_audit.profiles.logistic import fit_newton
from fdp_audit.profiles.monte_carlo import LABEL, MonteCarloLoss, default_cutoff, monte_carlo_privacy_loss
from fdp_audit.profiles.neighbours import Neighbours, exact_neighbour_models, worst_case_points
from fdp_audit.profiles.profile import spread_positions
from fdp_audit.training.engine import TrainingProblem, flatten, train_models
from fdp_audit.training.run import build_problem, resolve_device, with_mechanism

TRAINED_MECHANISMS = ("dp_sgd", "fdp_sgd")
SCHEMA_VERSION = 1
# Public losses that need no statistic of the protected columns: mean and impute would be fitted on a
# population split, which the profile setting (one data set D and its neighbours) does not have.
PUBLIC_LOSSES = ("mask", "gaussian_pad")


@dataclass(frozen=True)
class TrainedProfileRun:
    """Model samples and Monte Carlo losses of one trained mechanism; neighbour arrays are indexed like
    ``positions`` (neighbour positions 0..n-1, ``design.row_ids`` maps them to source rows)."""

    config: Config
    settings: ProfileConfig
    dataset: str
    label: str
    design: Design
    neighbours: Neighbours
    parameter_names: tuple[str, ...]
    claimed_epsilon: float
    relation: Relation
    erm_delta_norms: np.ndarray  # (n,) ‖A(y_i) - A(D)‖ of the non-private ERM, the ranking used
    positions: np.ndarray  # (m,) studied neighbours
    base_samples: np.ndarray  # (K, P) models of 𝒜(D)
    points: np.ndarray  # (Q, P) held-out models M ~ 𝒜(D)
    neighbour_samples: np.ndarray  # (m, K, P) models of 𝒜(y_i)
    centre: MonteCarloLoss  # at M̄, the mean of base_samples
    at_points: list[MonteCarloLoss]  # one per held-out point
    device: str

    @property
    def centre_point(self) -> np.ndarray:
        return self.base_samples.mean(axis=0)

    @property
    def point_losses(self) -> np.ndarray:
        """(Q, m) estimated l at the held-out points (±inf where unresolved)."""
        return np.stack([estimate.loss[0] for estimate in self.at_points])

    @property
    def mean_shift(self) -> np.ndarray:
        """(m,) ‖mean 𝒜(y_i) - mean 𝒜(D)‖ of the samples: how far each neighbour moves the output."""
        return np.linalg.norm(self.neighbour_samples.mean(axis=1) - self.centre_point, axis=1)

    @property
    def mean_shift_error(self) -> np.ndarray:
        """(m,) standard error of :attr:`mean_shift` under no shift: sqrt(tr Σ (1/K + 1/K'))."""
        k, k_prime = self.base_samples.shape[0], self.neighbour_samples.shape[1]
        spread = self.base_samples.var(axis=0, ddof=1).sum()
        return np.full(self.positions.size, np.sqrt(spread * (1 / k + 1 / k_prime)))


def profile_data(design: Design, label: str, protected: tuple[str, ...]) -> PreparedData:
    """The profile design as the engine's encoded data: labels 1 for +1 and 0 for -1, one column group
    per source column, Ψ = the columns not in ``protected``. The design has no population split; it
    stands in for one only where nothing is read from it (:data:`PUBLIC_LOSSES`).

    Args:
        design: the normalised profile design.
        label: the label column's name.
        protected: the protected source columns.

    Returns:
        The prepared data (the design as training, test and population split) with its public map Ψ.
    """
    groups, start = [], 0
    for column in dict.fromkeys(design.source):
        width = design.source.count(column)
        kind = "numeric" if width == 1 and design.features[start] == column else "categorical"
        groups.append(ColumnGroup(column, kind, start, start + width))
        start += width
    x = design.X.astype(np.float32)
    y = (design.y > 0).astype(np.int64)
    fingerprint = hashlib.sha256(x.tobytes() + y.tobytes()).hexdigest()[:16]
    encoded = EncodedData(x, y, tuple(groups), ("-1", "+1"), label, fingerprint)
    return PreparedData(encoded, encoded, encoded, ColumnSplit(tuple(groups), protected), "profile design")


def training_problem(config: Config, settings: ProfileConfig, design: Design, label: str) -> TrainingProblem:
    """The configured DP-SGD / FDP-SGD training of the engine's logistic model on the profile design.

    Args:
        config: the configuration (model, mechanism, data).
        settings: its ``profile`` section.
        design: the normalised profile design.
        label: the label column's name.

    Returns:
        The training problem of the profile's mechanism.

    Raises:
        BadInputError: the model is not logistic, FDP-SGD has no protected columns among the profile's columns,
            or its public loss needs a population split.
    """
    mech = config.mechanism
    if config.model.kind != "logistic":
        raise BadInputError("privacy profiles train the logistic model", "model.kind")
    protected = settings.protected if settings.protected is not None else config.data.protected
    if _protects_features(settings.mechanism):
        missing = [c for c in protected if c not in settings.columns]
        if not protected or missing:
            raise BadInputError(
                f"fdp_sgd needs protected columns among profile.columns; not there: {missing or 'none given'}",
                "profile.protected",
            )
        if mech.public_loss not in PUBLIC_LOSSES:
            raise BadInputError(
                f"profiles support the public losses {', '.join(PUBLIC_LOSSES)}; {mech.public_loss!r} needs a "
                "population split, which the profile setting does not have",
                "mechanism.public_loss",
            )
    # DP-SGD never reads Ψ: only protected columns that are features can (and need to) be named.
    split = tuple(c for c in protected if c in settings.columns)
    data = profile_data(design, label, split)
    return build_problem(with_mechanism(config, settings.mechanism), data)


def neighbour_problem(problem: TrainingProblem, neighbours: Neighbours, position: int) -> TrainingProblem:
    """The same training on y_i: row ``position`` removed, or its features replaced.

    Args:
        problem: the training on D.
        neighbours: the neighbours (removal, or replacement rows).
        position: the neighbour's row position in the design.

    Returns:
        The training problem on y_i.
    """
    if neighbours.kind == "remove":
        keep = torch.arange(problem.n) != position
        return replace(problem, x=problem.x[keep], y=problem.y[keep])
    x = problem.x.clone()
    x[position] = torch.as_tensor(neighbours.replacement[position], dtype=x.dtype)
    return replace(problem, x=x)


def sample_models(problem: TrainingProblem, seed: int, indices: np.ndarray, device: torch.device) -> np.ndarray:
    """Train one model per index (batched) and return the flattened parameters (len(indices), P).

    Args:
        problem: the training problem.
        seed: the seed the model keys derive from.
        indices: the model indices (distinct indices give independent models).
        device: where the models train.

    Returns:
        The flattened parameters, float64, (len(indices), P).
    """
    chunks = [
        flatten(chunk.params, lead=1).detach().cpu().double().numpy()
        for chunk in train_models(problem, seed, torch.as_tensor(indices), device=device)
    ]
    return np.concatenate(chunks)


# How _erm_offsets finds A(y_i) for each profile.neighbour_model: the ranking's description must name it.
_OFFSET_SOURCES = {"exact": "exact Newton", "okumura": "the Okumura sphere's worst-case point 2R - A(D)"}


def _erm_offsets(settings: ProfileConfig, design: Design, neighbours: Neighbours) -> np.ndarray:
    lam = settings.regularization
    w = fit_newton(design.X, design.y, lam).w
    if settings.neighbour_model == "exact":
        models = exact_neighbour_models(design.X, design.y, w, lam, neighbours).models
    else:
        models = worst_case_points(design.X, design.y, w, lam, neighbours)
    return np.linalg.norm(models - w, axis=1)


def _estimate(
    settings: ProfileConfig, base: np.ndarray, neighbour: np.ndarray, point: np.ndarray
) -> MonteCarloLoss:
    cutoff = settings.cutoff if settings.cutoff is not None else default_cutoff(base, point)
    return monte_carlo_privacy_loss(base, neighbour, point[None, :], cutoff)


def run_trained_profile(config: Config, design: Design, label: str, neighbours: Neighbours) -> TrainedProfileRun:
    """Train 𝒜(D) and 𝒜(y_i) for the studied neighbours and estimate their coverage and losses.

    Args:
        config: a configuration whose ``profile.mechanism`` is DP-SGD or FDP-SGD.
        design: the normalised profile design.
        label: the label column's name.
        neighbours: the neighbours of every row (removal or replacement).

    Returns:
        The run: the samples, the Monte Carlo estimates at the centre M̄ and at held-out points, and the claimed ε
        of the matching neighbouring relation.

    Raises:
        BadInputError: the mechanism has no noise, FDP-SGD is given removal neighbours, no neighbour changes the
            data set, or the training does not fit the design (:func:`training_problem`).
    """
    settings = config.profile
    assert settings is not None and settings.mechanism in TRAINED_MECHANISMS
    problem = training_problem(config, settings, design, label)
    mech = config.with_overrides({"mechanism.name": settings.mechanism}).mechanism
    if noise_multiplier(mech) == 0:
        raise BadInputError("a noise-free mechanism has no finite privacy loss to estimate", "mechanism")
    if _protects_features(settings.mechanism) and neighbours.kind == "remove":
        # Theorem 5: FDP-SGD's insertion/deletion guarantee is against a simulator that still draws public
        # batches from Ψ(x), not against training on D − x, whose loss its ε does not bound.
        raise BadInputError("fdp_sgd bounds replacing a record's protected part, not removing the record; use "
                            "neighbour: replace", "profile.neighbour")
    relation = Relation.ADD_REMOVE if neighbours.kind == "remove" else Relation.REPLACE
    claimed = float(Claim.from_config(config.with_overrides({"mechanism.name": settings.mechanism}))
                    .accountant(relation).epsilon(mech.delta))
    norms = _erm_offsets(settings, design, neighbours)
    order = np.argsort(norms, kind="stable")
    moved = order[norms[order] > 0]
    if moved.size == 0:
        raise BadInputError("no neighbour changes the data set: nothing to estimate", "profile.neighbour")
    positions = spread_positions(moved, settings.monte_carlo_rows)
    device = resolve_device(config.device)
    k, q = settings.samples, settings.monte_carlo_points
    drawn = sample_models(problem, config.seed, np.arange(k + q), device)
    base, points = drawn[:k], drawn[k:]
    start = k + q
    neighbour_samples = np.stack(
        [
            sample_models(neighbour_problem(problem, neighbours, int(p)), config.seed, start + j * k + np.arange(k),
                          device)
            for j, p in enumerate(positions)
        ]
    )
    centre = _estimate(settings, base, neighbour_samples, base.mean(axis=0))
    at_points = [_estimate(settings, base, neighbour_samples, point) for point in points]
    names = (*design.features, "bias")
    return TrainedProfileRun(
        config=config,
        settings=settings,
        dataset=config.data.dataset,
        label=label,
        design=design,
        neighbours=neighbours,
        parameter_names=names,
        claimed_epsilon=claimed,
        relation=relation,
        erm_delta_norms=norms,
        positions=positions,
        base_samples=base,
        points=points,
        neighbour_samples=neighbour_samples,
        centre=centre,
        at_points=at_points,
        device=str(device),
    )


def typical_estimate(losses: np.ndarray) -> tuple[np.ndarray, int]:
    """Position-by-position mean over points of the sorted |l̂| (``losses`` (Q, m)); a position is not
    finite as soon as one point has that many unresolved neighbours: infinite for a neighbour one of whose
    coverage counts is 0, NaN for one whose two counts are both 0 (``np.sort`` puts NaN last).

    Args:
        losses: the estimated losses at Q points for m neighbours, (Q, m).

    Returns:
        ``(profile (m,), number of points with an unresolved neighbour)``.
    """
    magnitude = np.sort(np.abs(losses), axis=1)
    return magnitude.mean(axis=0), int((~np.isfinite(losses)).any(axis=1).sum())


def results_dict(run: TrainedProfileRun) -> dict[str, Any]:
    """Every number the report shows about a trained-mechanism profile, as a JSON-able dict.

    Args:
        run: the trained-mechanism profile run.

    Returns:
        The ``profile.json`` content (kind ``privacy_profile_estimate``).
    """
    s, design, mech = run.settings, run.design, run.config.mechanism
    rows = run.design.row_ids[run.positions]
    losses = run.point_losses
    resolved = np.isfinite(losses)
    with np.errstate(invalid="ignore"):
        kl = np.where(resolved.all(axis=0), losses.mean(axis=0), np.nan)
    typical, unresolved_points = typical_estimate(losses)
    centre = run.centre
    cutoffs = np.array([e.cutoff for e in run.at_points])
    return {
        "schema_version": SCHEMA_VERSION,
        "kind": "privacy_profile_estimate",
        "label": LABEL,
        "package_version": __version__,
        "name": run.config.name,
        "seed": run.config.seed,
        "setting": {
            "dataset": run.dataset,
            "label": run.label,
            "columns": list(s.columns),
            "features": list(design.features),
            "parameters": list(run.parameter_names),
            "n": design.n,
            "d": len(run.parameter_names),
            "rows": s.rows,
            "normalisation": "standardise each column, then divide all rows by the largest row norm",
            "mechanism": s.mechanism,
            "neighbour": s.neighbour,
            "relation": run.relation,
            "row_ids": "0-based row index in the source table",
            "device": run.device,
        },
        "training": {
            "model": "logistic regression with bias (the engine's), parameters as listed",
            "noise_multiplier": json_float(noise_multiplier(mech)),
            "sample_rate": mech.sample_rate,
            "steps": mech.steps,
            "clip_norm": mech.clip_norm,
            "optimizer": {"name": mech.optimizer.name, "lr": mech.optimizer.lr},
            "public_loss": mech.public_loss if _protects_features(s.mechanism) else None,
            "public_batch_size": mech.public_batch_size if _protects_features(s.mechanism) else None,
            "delta": mech.delta,
            "claimed_epsilon": json_float(run.claimed_epsilon),
            "claimed_epsilon_source": f"PLD accountant, {run.relation} relation, at δ = {mech.delta:g}",
        },
        "estimate": {
            "label": LABEL,
            "base_samples": centre.base_samples,
            "neighbour_samples": centre.neighbour_samples,
            "points": len(run.at_points),
            "cutoff_rule": "profile.cutoff"
            if s.cutoff is not None
            else "per point: distance to the ceil(sqrt(K))-th nearest sample of A(D)",
            "neighbours_studied": int(run.positions.size),
            "neighbour_choice": "spread evenly over the ranking by the non-private ERM offset |A(y_i) - A(D)| "
            f"({_OFFSET_SOURCES[s.neighbour_model]}), the most exposed row included",
        },
        "centre": {
            "point": json_floats(run.centre_point),
            "cutoff": json_float(centre.cutoff),
            "base_count": int(centre.base_counts[0]),
            "rows": rows.tolist(),
            "neighbour_counts": centre.neighbour_counts[0].tolist(),
            "estimate": json_floats(centre.loss[0]),
            "standard_error": json_floats(centre.standard_error[0]),
            "unresolved": int((~centre.resolved[0]).sum()),
        },
        "typical": {
            "points": len(run.at_points),
            "cutoff_median": json_float(np.median(cutoffs)),
            "cutoff_range": [json_float(cutoffs.min()), json_float(cutoffs.max())],
            "profile": json_floats(typical),
            "points_with_unresolved": unresolved_points,
            "unresolved_pairs": int((~resolved).sum()),
        },
        "neighbours": [
            {
                "row": int(r),
                "erm_delta_norm": json_float(run.erm_delta_norms[p]),
                "mean_shift": json_float(shift),
                "mean_shift_standard_error": json_float(shift_error),
                "kl_estimate": json_float(kl_j),
                "mean_abs_loss_estimate": json_float(np.abs(losses[:, j]).mean()),
                "resolved_points": int(resolved[:, j].sum()),
            }
            for j, (r, p, shift, shift_error, kl_j) in enumerate(
                zip(rows, run.positions, run.mean_shift, run.mean_shift_error, kl)
            )
        ],
        "figures": {name: f"figures/{name}.png" for name in FIGURES},
    }


FIGURES = ("estimate_scatter", "estimate_profile")


def make_figures(run: TrainedProfileRun) -> dict[str, Figure]:
    """The sample clouds and the estimated profiles (:mod:`.figures`).

    Args:
        run: the trained-mechanism profile run.

    Returns:
        The figures by name (:data:`FIGURES`).
    """
    from fdp_audit.profiles.figures import estimate_profile_figure, estimate_scatter_figure

    rows = run.design.row_ids[run.positions]
    title = f"{run.settings.mechanism}, n = {run.design.n}: {LABEL} over {run.settings.samples} trained models each"
    typical, _ = typical_estimate(run.point_losses)
    return {
        "estimate_scatter": estimate_scatter_figure(
            run.base_samples, run.neighbour_samples, rows, run.parameter_names, title
        ),
        "estimate_profile": estimate_profile_figure(run.centre, typical, rows, run.claimed_epsilon, title),
    }


def arrays_npz(run: TrainedProfileRun) -> bytes:
    """The run's arrays as a compressed ``.npz`` file: the studied rows, the trained samples, the held-out points,
    the estimated losses and cutoffs, and the non-private offsets.

    Args:
        run: the trained-mechanism profile run.

    Returns:
        The file's bytes.
    """
    buffer = io.BytesIO()
    np.savez_compressed(
        buffer,
        rows=run.design.row_ids[run.positions],
        base_samples=run.base_samples,
        points=run.points,
        neighbour_samples=run.neighbour_samples,
        point_losses=run.point_losses,
        point_cutoffs=np.array([e.cutoff for e in run.at_points]),
        centre_losses=run.centre.loss[0],
        erm_delta_norms=run.erm_delta_norms,
    )
    return buffer.getvalue()


def _protects_features(mechanism: str) -> bool:
    """Whether a mechanism privatises only the protected features' part of the loss (ℓ_priv = ℓ − ℓ_pub∘Ψ,
    Algorithm 1), so that its profile needs protected columns and a public loss (its recipe says so)."""
    return MECHANISMS[mechanism].recipe.private_loss == "decomposed"
