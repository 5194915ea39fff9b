"""The ``image_reconstruction`` game (docs/images.md): Theorem 4 for a continuous protected part of an image.

Ψ is an image map (block-average downsampling or the band-limited blur, :mod:`fdp_audit.data.image_psi`) with
protected projection P of rank m and an orthonormal basis V ``[m, d]`` of its range. Each trial inserts one canary
image into S, in the private and the public population as an ordinary record:

    x = (x₀ − P x₀) + aᵀV,   a ~ N(0, s² I_m)   (from the trial's GAME stream),

with x₀ the population's first image (its label and public image known to the adversary) and s =
``audit.reconstruction_scale`` in pixel units. ``aᵀV`` is P z for z ~ N(0, s² I_d) (what
:meth:`~fdp_audit.data.image_psi.ImagePublicMap.neighbours` draws), so every candidate has x₀'s public image and the
protected part is an isotropic Gaussian of scale s on the m-dimensional protected subspace.

An attack outputs coordinates â (a reconstruction x̂ = (x₀ − P x₀) + âᵀV) and succeeds at radius ρ when
``‖P(x̂ − x)‖ = ‖â − a‖ ≤ ρ``. Ball(ρ) = sup_v π(B(v, ρ)) with π = N(0, s² I_m) on the subspace: by Anderson's
inequality (a centred Gaussian puts the most mass on a symmetric convex set when it is centred at the mean) the
supremum is at v = 0, and ‖a‖²/s² ~ χ²_m, so

    Ball(ρ) = F_{χ²_m}(ρ² / s²),

which the prior's mean (attack ``prior``) realises exactly. The radii are fixed by the prior alone:
ρ_q = s·sqrt(F⁻¹_{χ²_m}(q)) for each level q of ``audit.ball_levels``, so Ball(ρ_q) = q, and each success rate is
judged against Theorem 4's ``1 − f(Ball(ρ))`` with an exact Clopper–Pearson bound, α split by the gate over
every (attack, ρ). The trials record the released iterates for :mod:`attacks.iterates_matching`, whose replay
needs a starting point fixed before the data are seen: the game fixes one for every trial (DP-SGD's guarantee
holds from any such point).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

import numpy as np
import torch

from attacks import Attack, Knowledge, View
from attacks.base import ProtectedSubspace
from fdp_audit.accounting.ball import ball_gaussian, gaussian_radius
from fdp_audit.auditing.games import base
from fdp_audit.auditing.games.reconstruction import ReconstructionGame, ReconstructionRecord, secret_values
from fdp_audit.claim import Claim
from fdp_audit.config import Config, DataConfig
from fdp_audit.data.catalog import build_public_map, load_images
from fdp_audit.data.image_psi import ImagePublicMap
from fdp_audit.data.prepare import PreparedData
from fdp_audit.errors import BadInputError
from fdp_audit.training import streams
from fdp_audit.training.engine import Canaries
from fdp_audit.training.run import build_problem

METRIC = "l2"


def protected_basis(psi: ImagePublicMap) -> torch.Tensor:
    """An orthonormal basis ``[m, d]`` (float64) of the range of Ψ's protected projection P: the eigenvectors of
    the symmetric matrix P with eigenvalue 1.

    Args:
        psi: the image map.

    Returns:
        The basis, float64 tensor of shape (m, d), m the protected dimension and d the number of pixels.
    """
    projection = psi.protected_part(torch.eye(psi.n_pixels, dtype=torch.float64))
    _, vectors = torch.linalg.eigh(0.5 * (projection + projection.T))
    return vectors[:, psi.n_pixels - psi.protected_dimension:].T.contiguous()


def image_map(data: PreparedData) -> ImagePublicMap:
    """The data's Ψ, which must be an image map that protects something.

    Args:
        data: the prepared data.

    Returns:
        Ψ.

    Raises:
        BadInputError: Ψ is not an image map, or protects nothing.
    """
    psi = data.public_map
    if not isinstance(psi, ImagePublicMap):
        raise BadInputError(f"the image_reconstruction game needs an image Ψ (public_map: downsample or blur), not "
                            f"{psi.spec()['kind']!r}", "data.public_map")
    if psi.protected_dimension == 0:
        raise BadInputError(f"Ψ {psi.spec()} protects nothing: there is no protected part to reconstruct",
                            "data.public_map")
    return psi


@lru_cache(maxsize=8)
def stated_dimension(data: DataConfig) -> int:
    """m, the protected dimension the configuration's image Ψ has (from the image size alone).

    Args:
        data: the configuration's ``data`` section.

    Returns:
        m.

    Raises:
        BadInputError: the configuration's Ψ is not an image map.
    """
    images = load_images(data.dataset, "train", data.path)
    psi = build_public_map(data, (), (images.height, images.width))
    if not isinstance(psi, ImagePublicMap):
        raise BadInputError("the image_reconstruction game needs an image Ψ", "data.public_map")
    return psi.protected_dimension


def radii(config: Config, dimension: int) -> np.ndarray:
    """ρ_q for every level q of ``audit.ball_levels`` (module docstring), increasing.

    Args:
        config: the audit's configuration (``audit.ball_levels`` and ``audit.reconstruction_scale``).
        dimension: m, the protected dimension.

    Returns:
        The radii at which the Gaussian prior's Ball(ρ) is each level q.
    """
    return np.asarray(gaussian_radius(sorted(config.audit.ball_levels), config.audit.reconstruction_scale, dimension),
                      dtype=float)


@dataclass(frozen=True)
class ImageReconstructionSetup(base.Setup):
    """The ``image_reconstruction`` game's setup: the training problem and the adversary's knowledge
    (:class:`base.Setup`) and the canary's known part.

    Attributes:
        visible: the canary image with its protected part removed, ``x₀ − P x₀``, shape (d,) float64 in pixel units.
        subspace: the protected subspace: the orthonormal basis V of P's range, shape (m, d), and the prior's scale s.
        label: the canary's label (a class index).
    """

    visible: torch.Tensor  # [d] float64: x₀ − P x₀
    subspace: ProtectedSubspace
    label: int


class ImageReconstructionGame(ReconstructionGame):
    """The ``image_reconstruction`` game (docs/images.md; module docstring): each trial draws the canary image's
    protected part as ``aᵀV`` with a ~ N(0, s² I_m); an attack reconstructs the coordinates a and succeeds at radius
    ρ when ``‖â − a‖ ≤ ρ``. The radii are those at which Ball(ρ) = F_{χ²_m}(ρ²/s²) is each level of
    ``audit.ball_levels``, and each success rate is judged against Theorem 4's ``1 − f(Ball(ρ))``."""

    name = "image_reconstruction"
    stream_block = 8
    report = base.ReportView("reconstruction", "Reconstruction of an image's protected part",
                             ReconstructionGame.report.lead)
    attribute_kind = "subspace"

    @property
    def records_iterates(self) -> bool:
        return True

    def setup(self, config: Config, data: PreparedData) -> ImageReconstructionSetup:
        """The canary (the population's first image with its protected part removed, ``x₀ − P x₀``), the protected
        subspace with its basis, and one fixed starting point for every trial.

        Args:
            config: the audit's configuration.
            data: its prepared data and Ψ.

        Returns:
            The setup with the visible part, the subspace and the label.

        Raises:
            BadInputError: a third-party mechanism or the user's training (the attacks replay the engine's released
                steps), or a Ψ that is not an image map protecting something.
        """
        # refused here, before any training: the attack replays the engine's released per-step sums
        if config.mechanism.third_party is not None or config.mechanism.training is not None:
            raise BadInputError(f"the {self.name} game's attacks replay the built-in engine's released steps; a "
                                "third-party mechanism or the user's training releases none", "audit.games")
        psi = image_map(data)
        problem = build_problem(config, data)
        # a model index no trial uses: the one starting point of every trial, fixed before the data are seen
        key = streams.model_keys(config.seed, torch.tensor([(self.stream_block + 1) * base.TRIAL_BLOCK - 1]))
        problem = replace(problem, initial_params={name: value[0] for name, value in problem.model.init(key).items()})
        record = torch.as_tensor(data.population.x[0], dtype=torch.float64)
        visible = record - psi.protected_part(record)
        subspace = ProtectedSubspace(protected_basis(psi), config.audit.reconstruction_scale)
        label = int(data.population.y[0])
        x, y = data.tensors()
        knowledge = Knowledge(problem.model, visible[None, :].to(x.dtype), label, torch.ones(1), x, y,
                              clip_norm=problem.hyper.clip_norm, protected_subspace=subspace, procedure=problem)
        return ImageReconstructionSetup(problem, knowledge, visible, subspace, label)

    def values(self, config: Config, setup: ImageReconstructionSetup, indices: np.ndarray) -> torch.Tensor:
        """The trials' coordinates a ``[N, m]`` in the protected basis.

        Args:
            config: the audit's configuration (its seed and ``audit.reconstruction_scale``).
            setup: what :meth:`setup` built.
            indices: the trials' model indices, shape (N,).

        Returns:
            Float64 tensor of shape (N, m), each coordinate N(0, s²).
        """
        return secret_values(config.seed, indices, "gaussian", config.audit.reconstruction_scale,
                             setup.subspace.dimension)

    def canaries(self, config: Config, setup: ImageReconstructionSetup, indices: np.ndarray) -> Canaries:
        """Each trial's canary image, the visible part plus its protected coordinates in the basis, in both populations.

        Args:
            config: the audit's configuration.
            setup: what :meth:`setup` built.
            indices: the trials' model indices, shape (R,).

        Returns:
            One canary per trial.
        """
        n = len(indices)
        images = setup.visible + self.values(config, setup, indices) @ setup.subspace.basis
        present = torch.ones(n, dtype=torch.bool)
        return Canaries(images.to(setup.knowledge.rest_x.dtype), torch.full((n,), setup.label, dtype=torch.long),
                        present, present)

    def score(self, attacks: dict[str, Attack], view: View) -> dict[str, np.ndarray]:
        """Every attack's reconstruction of the protected coordinates.

        Args:
            attacks: the fitted attacks, by name.
            view: what the adversary sees of the chunk's R trained models.

        Returns:
            Name → float64 array of shape (R, m).
        """
        return {name: attack.infer(view).estimate.detach().double().numpy() for name, attack in attacks.items()}

    def score_width(self, setup: ImageReconstructionSetup) -> int:
        """The protected dimension m.

        Args:
            setup: what :meth:`setup` built.

        Returns:
            m.
        """
        return setup.subspace.dimension

    def record(self, config: Config, setup: ImageReconstructionSetup, secrets: np.ndarray,
               scores: dict[str, np.ndarray], threat_models: dict[str, str]) -> ReconstructionRecord:
        """The played game: true coordinates, reconstructions and the Gaussian prior's Ball at every radius of
        :func:`radii`.

        Args:
            config: the audit's configuration.
            setup: what :meth:`setup` built.
            secrets: every trial's secret, in trial order.
            scores: every attack's scores of every trial, in trial order.
            threat_models: each attack's threat model.

        Returns:
            The game's record.
        """
        m = setup.subspace.dimension
        rho = radii(config, m)
        ball = np.asarray(ball_gaussian(rho, config.audit.reconstruction_scale, m), dtype=float)
        truth = self.values(config, setup, self.trial_indices(len(secrets))).numpy()
        return ReconstructionRecord(self.name, truth, {name: np.asarray(v, dtype=float) for name, v in scores.items()},
                                    rho, ball, threat_models, "gaussian", config.audit.reconstruction_scale,
                                    METRIC, (f"protected subspace of Ψ ({m} dimensions)",))

    def planned(self, config: Config, data: PreparedData, claim: Claim) -> list[base.PlannedComparison]:
        """One comparison per configured attack besides the prior and per radius, judged on every trial; none when Ψ
        is not an image map that protects something (the game refuses the data itself).

        Args:
            config: the audit's configuration.
            data: its prepared data.
            claim: the privacy claim under audit.

        Returns:
            The planned comparisons.
        """
        try:
            m = image_map(data).protected_dimension
        except BadInputError:
            return []  # the game itself refuses such data, with its own message
        rho = radii(config, m)
        balls = ball_gaussian(rho, config.audit.reconstruction_scale, m)
        return [base.PlannedComparison(base.RateComparison(self.name, self.name, name, attack.threat_model,
                                                           config.audit.trials, 0, float(ball),
                                                           float(claim.add_remove.bound(ball)), rho=float(r)),
                                       base.judged_on_all)
                for name, attack in self.attacks(config.audit.attacks).items() if name != "prior"
                for r, ball in zip(rho, balls, strict=True)]

    def stated_ball(self, row: dict[str, Any], config: Config, where: str) -> float:
        """The Gaussian prior's Ball(ρ) at the row's radius, in the configuration's protected dimension.

        Args:
            row: the stored comparison.
            config: the configuration the results state.
            where: the row's place in the results, for errors.

        Returns:
            Ball(ρ).

        Raises:
            BadInputError: the row's ``rho`` is not a non-negative number.
        """
        rho = row.get("rho")
        if not isinstance(rho, int | float) or isinstance(rho, bool) or not rho >= 0:
            raise BadInputError("must be a number in [0, inf]", f"{where}.rho")
        return float(ball_gaussian(float(rho), config.audit.reconstruction_scale, stated_dimension(config.data)))
