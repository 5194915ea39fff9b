"""The image games (docs/images.md): the protected part of a canary image is one of K known candidates sharing its
public image, drawn from the known prior ``audit.target_prior`` (Ball = its largest probability, 1/K when
uniform; after Hayes, Mahloujifar & Balle, NeurIPS 2023). An attack's guess is the argmax of its scores — no
rule is fitted — so its successes over every trial are judged against Theorem 4's ``1 − f(Ball)`` with an exact
Clopper–Pearson bound.

* ``image_gradient_canary`` (threat model ``iterates``): the K candidates are K gradient canaries on a canary
  block of the model (:func:`fdp_audit.auditing.image_games.gradient_canary_block`); only the secret's is in the
  private population, all are in the public one with the same public gradient, as K images with one public image
  are. The iterates attacks (:mod:`attacks.iterates`) score each candidate on its own coordinate, estimating the
  noise from the block's noise-only coordinates and integrating over the sampling rate: they never read the claim.
* ``image_record_canary`` (final model): the canary is a population image ``x − Px + P z_j`` with P the Ψ map's
  protected projection (:meth:`fdp_audit.data.image_psi.ImagePublicMap.canary_candidates`), inserted as an ordinary
  record; final-model attacks (the black-box likelihood, the informed gradient attack, …) score the candidates.
  Its section of ``results.json`` holds a few example trials — the public image, the candidates and each attack's
  pick, as grey levels — for the report to draw.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import numpy as np
import torch

from attacks import Attack, Knowledge, View
from fdp_audit.auditing import image_games
from fdp_audit.auditing.games import base
from fdp_audit.auditing.games.attribute import AttributeGame, AttributeSetup, PriorBallLimit, record_canaries
from fdp_audit.auditing.games.categorical import GameRecord, argmax_counts, attribute_section, candidate_scores
from fdp_audit.claim import Claim
from fdp_audit.config import Config
from fdp_audit.data.image_psi import ImagePublicMap
from fdp_audit.data.prepare import PreparedData
from fdp_audit.errors import BadInputError
from fdp_audit.training.engine import Canaries, CanaryBlock
from fdp_audit.training.run import build_problem

EXAMPLES = 3  # example trials the record game stores for the report


def image_map(data: PreparedData, game: str) -> ImagePublicMap:
    """The data's Ψ, which an image game needs to be an image map (blur or downsampling).

    Args:
        data: the prepared data.
        game: the game's name, for the error.

    Returns:
        Ψ.

    Raises:
        BadInputError: Ψ is not an image map.
    """
    psi = data.public_map
    if not isinstance(psi, ImagePublicMap):
        raise BadInputError(f"the {game} game needs image data with an image Ψ (public_map: downsample or blur); "
                            f"{psi.spec()['kind']!r} is not one", "data.public_map")
    return psi


@dataclass(frozen=True)
class ImageGameRecord(GameRecord):
    """The trials of an image game, and what the report draws of a few of them (empty for gradient canaries)."""

    examples: dict[str, Any]


class ImageGame(PriorBallLimit, base.Game[ImageGameRecord]):
    """K candidates sharing a public image, the secret from ``audit.target_prior``, each attack's argmax guess
    judged on every trial against ``1 − f(Ball)`` under the add/remove claim (module docstring)."""

    def secrets(self, config: Config, setup: base.Setup, indices: np.ndarray) -> np.ndarray:
        """Each trial's candidate index drawn from ``audit.target_prior``.

        Args:
            config: the audit's configuration (its seed).
            setup: what :meth:`setup` built.
            indices: the trials' model indices, shape (R,).

        Returns:
            Candidate indices, shape (R,).
        """
        return base.prior_secrets(config.seed, indices, config.audit.target_prior)

    def score(self, attacks: dict[str, Attack], view: View) -> dict[str, np.ndarray]:
        """Every attack's score of each candidate.

        Args:
            attacks: the fitted attacks, by name.
            view: what the adversary sees of the chunk's R trained models.

        Returns:
            Name → float64 array of shape (R, K).
        """
        return candidate_scores(attacks, view)

    def candidate_names(self, setup: base.Setup) -> tuple[str, ...]:
        """How the report names the candidates.

        Args:
            setup: what :meth:`setup` built.

        Returns:
            ``candidate 0`` … ``candidate K−1``.
        """
        return tuple(f"candidate {j}" for j in range(self.score_width(setup)))

    def examples(self, setup: base.Setup, secrets: np.ndarray, scores: dict[str, np.ndarray]) -> dict[str, Any]:
        """What the report draws of a few trials (nothing by default).

        Args:
            setup: what :meth:`setup` built.
            secrets: every trial's secret, in trial order.
            scores: every attack's scores of every trial, in trial order.

        Returns:
            The examples.
        """
        return {}

    def record(self, config: Config, setup: base.Setup, secrets: np.ndarray, scores: dict[str, np.ndarray],
               threat_models: dict[str, str]) -> ImageGameRecord:
        """The played game with the prior ``audit.target_prior``, the candidates' names and the examples.

        Args:
            config: the audit's configuration.
            setup: what :meth:`setup` built.
            secrets: every trial's secret, in trial order.
            scores: every attack's scores of every trial, in trial order.
            threat_models: each attack's threat model.

        Returns:
            The game's record.
        """
        return ImageGameRecord(self.name, secrets, scores, np.asarray(config.audit.target_prior, dtype=float),
                               threat_models, self.candidate_names(setup), self.examples(setup, secrets, scores))

    def comparisons(self, record: ImageGameRecord, claim: Claim, selection_level: float) -> list[base.RateComparison]:
        """Each attack's argmax successes over every trial against Theorem 4's ``1 − f(Ball)``, Ball the prior's
        largest probability.

        Args:
            record: the played game.
            claim: the privacy claim under audit.
            selection_level: the per-bound level at which a test chosen on a selection split is chosen.

        Returns:
            One rate comparison per attack besides the prior.
        """
        ball = float(record.prior.max())
        bound = float(claim.add_remove.bound(ball))
        rows = []
        for attack in record.scores:
            if attack != "prior":
                successes, trials = argmax_counts(record, attack)
                rows.append(base.RateComparison(self.name, self.name, attack, record.threat_models[attack], trials,
                                                successes, ball, bound))
        return rows

    def planned(self, config: Config, data: PreparedData, claim: Claim) -> list[base.PlannedComparison]:
        """A rate comparison per configured attack besides the prior, judged on every trial.

        Args:
            config: the audit's configuration.
            data: its prepared data.
            claim: the privacy claim under audit.

        Returns:
            The planned comparisons.
        """
        ball = max(config.audit.target_prior)
        bound = float(claim.add_remove.bound(ball))
        return [base.PlannedComparison(base.RateComparison(self.name, self.name, name, attack.threat_model,
                                                           config.audit.trials, 0, ball, bound), base.judged_on_all)
                for name, attack in self.attacks(config.audit.attacks).items() if name != "prior"]

    def sections(self, record: ImageGameRecord, judgements: base.Judgements, claim: Claim,
                 alpha: float) -> list[dict[str, Any]]:
        """The game's section: the attribute view of its argmax successes, :meth:`extra_facts`, and the examples when
        there are any.

        Args:
            record: the played game.
            judgements: the gate's evaluation of every comparison.
            claim: the privacy claim under audit.
            alpha: the verdict's level.

        Returns:
            One section.
        """
        fallback = float(claim.add_remove.bound(float(record.prior.max())))
        section = attribute_section(record, judgements, self.name, self.canary, fallback, alpha, argmax_counts)
        section = {**section, "game": self.name} | self.extra_facts(record, claim)
        return [section | ({"examples": record.examples} if record.examples else {})]

    def extra_facts(self, record: ImageGameRecord, claim: Claim) -> dict[str, Any]:
        """Further numbers of the game's section.

        Args:
            record: the played game.
            claim: the privacy claim under audit.

        Returns:
            Name → value; none by default.
        """
        return {}


@dataclass(frozen=True)
class GradientBlockSetup(base.Setup):
    """The ``image_gradient_canary`` game's setup: the training problem with the canary block, and the adversary's
    knowledge (:class:`base.Setup`; the knowledge names the K candidates' and the noise-only coordinates).

    Attributes:
        magnitude: each canary's raw private gradient norm, ``canary_norm_factor · C``, above the clip norm.
    """

    magnitude: float  # each canary's raw private gradient: canary_norm_factor · C, above the clip norm


class ImageGradientCanaryGame(ImageGame):
    """The ``image_gradient_canary`` game (docs/images.md; module docstring): the canary image's protected part is one
    of K candidates sharing its public image, each hidden as a gradient canary on a canary block of the model; only
    the secret's is in the private population. The iterates attacks guess by the argmax of their scores, and the
    successes over every trial are judged against Theorem 4's ``1 − f(Ball)``, Ball the largest probability of
    ``audit.target_prior``."""

    name = "image_gradient_canary"
    stream_block = 25
    gradient_canary = True
    needs_attack = True
    canary = "gradient (canary block)"
    report = base.ReportView(
        "image", "Image game · gradient canaries",
        "An image game: the canary's protected part (what its public image does not show) is one of K known "
        "candidates sharing that public image, each hidden as a gradient canary on parameters the model never reads; "
        "only the secret's is in the private population. The attacks observe every update (threat model: iterates) "
        "and guess by the argmax of their scores, judged on every trial.",
        label="gradient canaries")

    def setup(self, config: Config, data: PreparedData) -> GradientBlockSetup:
        """The training problem on the built-in engine, with the coordinates of the K candidates' private and public
        gradients and of the noise-only coordinates of the canary block.

        Args:
            config: the audit's configuration.
            data: its prepared data and Ψ.

        Returns:
            The setup with each canary's raw gradient magnitude ``canary_norm_factor · C``.

        Raises:
            BadInputError: a third-party mechanism or the user's training, or a Ψ that is not an image map.
        """
        if config.mechanism.third_party is not None or config.mechanism.training is not None:
            raise BadInputError(f"the {self.name} game inserts a canary block into the built-in engine's models; "
                                "a third-party mechanism or the user's training cannot take one", "audit.games")
        image_map(data, self.name)
        problem = build_problem(config, data)
        k, p = len(config.audit.target_prior), problem.model.n_parameters
        x, y = data.tensors()
        knowledge = Knowledge(problem.model, torch.zeros(k, x.shape[1]), 0,
                              torch.as_tensor(config.audit.target_prior, dtype=torch.float32),
                              clip_norm=problem.hyper.clip_norm,
                              candidate_coordinates=tuple(range(p, p + k)),
                              candidate_public_coordinates=tuple(range(p + k, p + 2 * k)),
                              noise_coordinates=tuple(range(p + 2 * k, p + 2 * k + image_games.NOISE_COORDINATES)))
        return GradientBlockSetup(problem, knowledge, config.audit.canary_norm_factor * problem.hyper.clip_norm)

    def canaries(self, config: Config, setup: GradientBlockSetup, indices: np.ndarray) -> CanaryBlock:
        """The trials' canary blocks (:func:`~fdp_audit.auditing.image_games.gradient_canary_block`).

        Args:
            config: the audit's configuration.
            setup: what :meth:`setup` built.
            indices: the trials' model indices, shape (R,).

        Returns:
            The block of the R models.
        """
        return image_games.gradient_canary_block(self.secrets(config, setup, indices), self.score_width(setup),
                                                 setup.magnitude)

    def extra_facts(self, record: ImageGameRecord, claim: Claim) -> dict[str, Any]:
        """The Bayes-optimal success under the claim (known p and σ, uniform prior): what the iterates attack is
        measured against (docs/images.md).

        Args:
            record: the played game.
            claim: the privacy claim under audit.

        Returns:
            ``optimal_success`` and its Monte Carlo ``optimal_success_se``; none for a claim that is not a subsampled
            Gaussian or a prior that is not uniform.
        """
        spec = claim.add_remove.spec
        prior = record.prior
        if not spec.is_gaussian or not np.allclose(prior, prior[0]):
            return {}
        success, error = image_games.bayes_optimal_success(spec.sample_rate, spec.noise_multiplier, spec.steps,
                                                           len(prior))
        return {"optimal_success": success, "optimal_success_se": error}


@dataclass(frozen=True)
class ImageRecordSetup(AttributeSetup):
    """The ``image_record_canary`` game's setup: the attribute game's (:class:`AttributeSetup`, the K candidate
    images as ``candidates``) with what the report draws.

    Attributes:
        public_image: the candidates' common public image at full resolution, shape (H·W,).
        shape: the image's (H, W) in pixels.
    """

    public_image: torch.Tensor  # [H·W]: the candidates' common public image, drawn at full resolution
    shape: tuple[int, int]


class ImageRecordCanaryGame(ImageGame):
    """The ``image_record_canary`` game (docs/images.md; module docstring): the canary is a population image
    ``x − Px + P z_j`` whose protected part is one of K candidates sharing its public image, inserted as an ordinary
    record; the final-model attacks guess by the argmax of their scores, judged over every trial against Theorem 4's
    ``1 − f(Ball)``, Ball the largest probability of ``audit.target_prior``."""

    name = "image_record_canary"
    stream_block = 26
    report = base.ReportView(
        "image", "Image game · record canaries",
        "An image game: the canary is a real image whose protected part (what its public image does not show) is one "
        "of K known candidates sharing that public image, inserted as an ordinary record; the attacks see the trained "
        "model and guess by the argmax of their scores, judged on every trial.",
        label="record canaries")

    def setup(self, config: Config, data: PreparedData) -> ImageRecordSetup:
        """The attribute game's setup on the image data (candidates sharing the canary's public image) with the public
        image at full resolution.

        Args:
            config: the audit's configuration.
            data: its prepared data and Ψ.

        Returns:
            The setup with the public image and the images' shape.

        Raises:
            BadInputError: Ψ is not an image map, or gives fewer candidates than ``audit.target_prior`` has values.
        """
        psi = image_map(data, self.name)
        attribute = AttributeGame().setup(config, data)
        public = psi.public_image(psi(attribute.candidates[:1].double(), None).features)[0]
        return ImageRecordSetup(**{f.name: getattr(attribute, f.name) for f in fields(attribute)},
                                public_image=public, shape=(psi.height, psi.width))

    def canaries(self, config: Config, setup: ImageRecordSetup, indices: np.ndarray) -> Canaries:
        """Each trial's canary record (:func:`~fdp_audit.auditing.games.attribute.record_canaries`).

        Args:
            config: the audit's configuration.
            setup: what :meth:`setup` built.
            indices: the trials' model indices, shape (R,).

        Returns:
            One canary per trial.
        """
        return record_canaries(setup, self.secrets(config, setup, indices))

    def candidate_names(self, setup: ImageRecordSetup) -> tuple[str, ...]:
        """The candidates' names as Ψ gives them.

        Args:
            setup: what :meth:`setup` built.

        Returns:
            The names.
        """
        return setup.candidate_names

    def examples(self, setup: ImageRecordSetup, secrets: np.ndarray, scores: dict[str, np.ndarray]
                 ) -> dict[str, Any]:
        """The public image and the candidates as grey levels 0–255 (one linear scale for all, so that they
        compare), and the first :data:`EXAMPLES` trials' secrets and each attack's pick.

        Args:
            setup: what :meth:`setup` built.
            secrets: every trial's secret, in trial order.
            scores: every attack's scores of every trial, in trial order.

        Returns:
            ``image_shape``, ``public`` and ``candidates`` (flattened grey levels) and ``trials`` (each with its
            index, secret and picks).
        """
        images = torch.cat([setup.public_image[None], setup.candidates.double()])
        low, high = float(images.min()), float(images.max())
        grey = ((images - low) / max(high - low, 1e-12) * 255).round().clamp(0, 255).to(torch.int64).tolist()
        trials = [{"trial": i, "secret": int(secrets[i]),
                   "picks": {attack: int(s[i].argmax()) for attack, s in scores.items() if attack != "prior"}}
                  for i in range(min(EXAMPLES, len(secrets)))]
        return {"image_shape": list(setup.shape), "public": grey[0], "candidates": grey[1:], "trials": trials}
