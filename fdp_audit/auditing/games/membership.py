"""The membership game (docs/games.md): add/remove, final model only, a crafted input-space canary.

A hidden bit decides whether the canary record is in the private population: the mechanism trains on n or
n + 1 records, so anything it derives from the data set's size, the realised batch sizes or the data themselves
can show the bit. The adversary sees the final model through queries only (:mod:`attacks.input_canary`).

What makes a final-model audit tight (Annamalai & De Cristofaro, NeurIPS 2024) is applied where the auditor
controls the training inputs:

* *a crafted canary*: zero everywhere except ``M = canary_norm_factor · C`` on an appended input column that no
  other record has a value in, so that no record's gradient touches the model's weights on it; its raw gradient
  is about M ≫ C, so every step that samples it adds exactly its clipped norm C along that column;
* *worst-case initial parameters*: DP-SGD's guarantee holds from any starting point fixed before the data are
  seen, so training starts from one at which the canary's label is wrong by a margin larger than any drift the
  training can produce; the canary's loss gradient then never vanishes and is clipped to C at every step.
  For a linear model the final weight on the canary column is then the initial weight plus the sum of every
  step's clipped contribution and noise along it — all the final model can keep of the release. Models with
  hidden layers start from their (fixed) initialisation with the canary column, which is sound but less tight.

Further appended all-zero columns carry nothing but the noise; their weights show the normalisation the
mechanism applied (``noise_scale``).

Any model whose inputs are table columns takes the appended columns: the built-in ones and the user's modules
(``model.factory``, built on the widened width), trained by the engine, a third-party mechanism or the user's
own loop (``mechanism.training``: the canary is one more record of its data set, which then has n + 1 records).
A module on images cannot take more inputs: its canary is a crafted image instead, a ±M/√(H·W) checkerboard
(norm M, negative intensities that no image has), scored by ``canary_logit`` against the blank image; no input
is untouched by the other records there, so ``noise_scale`` has nothing to read.

The appended columns are protected features: Ψ leaves them out, so under
Algorithm 1 the canary's crafted coordinate is in its private part, whose membership the claim bounds
(Theorem 5: insertion/deletion of the private part, Ψ(x) public). The canary is in the public population in
both worlds, so a public loss sees the same data in both. The game is binary with a uniform prior (Ball = ½)
and its worlds are add/remove neighbours: its success is judged against the smaller of Theorem 4's
``1 − f(½)`` and the Bayes-optimal ``½ + δ_add/remove(0)/2``, and its ROC against the claimed add/remove
curve, as for the simulator game.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
import torch

from attacks import Knowledge
from fdp_audit.accounting.events import Relation
from fdp_audit.auditing.games import base
from fdp_audit.auditing.games.gradient_canary import GradientCanaryGame
from fdp_audit.config import Config
from fdp_audit.data.catalog import read_as_images
from fdp_audit.data.encoding import ColumnGroup
from fdp_audit.data.features import ColumnSplit
from fdp_audit.data.image_psi import ImagePublicMap
from fdp_audit.data.prepare import PreparedData
from fdp_audit.errors import BadInputError
from fdp_audit.training import streams
from fdp_audit.training.engine import Canaries, TrainingProblem
from fdp_audit.training.models import Params
from fdp_audit.training.modules import FIELD as MODULE_FIELD
from fdp_audit.training.modules import takes_input_width
from fdp_audit.training.run import build_problem
from fdp_audit.user_code import load_function

NOISE_INPUTS = 256  # all-zero input columns whose weights hold only the noise: the scale's relative error ~ 1/√512
MEMBERSHIP_COLUMNS = ("audit-member-canary", *(f"audit-member-noise-{i}" for i in range(NOISE_INPUTS)))
CANARY_LABEL = 1
BASE_MARGIN = 10.0  # the canary's initial wrong margin beyond the largest drift training can produce


def canary_value(config: Config) -> float:
    """M: the canary's value on its column, ``canary_norm_factor`` times the clip norm, so that its raw
    gradient (about M while its label is wrong) is clipped to C.

    Args:
        config: the audit's configuration.

    Returns:
        M.
    """
    return config.audit.canary_norm_factor * config.mechanism.clip_norm


def wrong_margin(config: Config, value: float) -> float:
    """The canary's initial wrong margin L: ``BASE_MARGIN`` plus four times ``M · lr · T · max(1, C)``, what the
    canary's logit moves in T steps that each move its column's weight by lr (an adaptive optimiser) or by
    lr·C/(p·n) ≤ lr·C (SGD on the clipped sum over an expected batch of at least one record). Noise moves it
    by about as much again, so the canary's label stays wrong and its gradient clipped in every step. Only
    power depends on it: any fixed starting point is sound. It reads no claimed privacy parameter.

    Args:
        config: the audit's configuration (its optimiser's lr, T and the clip norm C).
        value: the canary's value M.

    Returns:
        L.
    """
    mech = config.mechanism
    return BASE_MARGIN + 4.0 * value * mech.optimizer.lr * mech.steps * max(1.0, mech.clip_norm)


def with_protected_columns(data: PreparedData, names: tuple[str, ...]) -> PreparedData:
    """Append all-zero columns that are protected features (Ψ leaves them out): the first-layer weights on them
    receive no gradient from any real record.

    Args:
        data: the prepared data; its Ψ must be a column subset.
        names: the appended columns' names.

    Returns:
        The data with the columns appended to every split and to Ψ's protected features.

    Raises:
        BadInputError: Ψ is not a column subset.
    """
    psi = data.public_map
    if not isinstance(psi, ColumnSplit):
        raise BadInputError("the membership game appends protected columns: it needs a column-subset Ψ "
                            "(data.public_map: columns)", "data.public_map")
    d = data.train.n_features
    added = tuple(ColumnGroup(name, "numeric", d + i, d + i + 1) for i, name in enumerate(names))

    def widen(part):
        x = np.concatenate([part.x, np.zeros((part.n_rows, len(names)), dtype=part.x.dtype)], axis=1)
        return replace(part, x=x, groups=part.groups + added)

    widened = ColumnSplit(psi.groups + added, psi.protected_features + names, psi.label_public)
    return PreparedData(widen(data.train), widen(data.population), widen(data.test), widened, data.table_name)


def worst_case_initial_params(problem: TrainingProblem, key: torch.Tensor, column: int, value: float,
                              margin: float) -> Params:
    """One fixed starting point for every trial: the model's initialisation from ``key`` (zeros for logistic
    regression) with, for a linear model, the canary column's weight set so that the canary's logit for its
    label is ``−margin`` (the other classes' at 0).

    Args:
        problem: the training problem on the widened data.
        key: the start's random key.
        column: the canary column's index.
        value: the canary's value M on it.
        margin: the wrong margin L.

    Returns:
        The parameters of one model (no leading model axis).
    """
    model = problem.model
    start = {name: tensor[0] for name, tensor in model.init(key).items()}
    if model.kind == "logistic":
        weight = start["layer0.weight"].clone()
        weight[0 if model.n_outputs == 1 else CANARY_LABEL, column] = -margin / value
        start["layer0.weight"] = weight
    return start


@dataclass(frozen=True)
class MembershipSetup(base.Setup):
    """The membership game's setup: the training problem and the adversary's knowledge (:class:`base.Setup`) and the
    crafted canary.

    Attributes:
        width: the model's inputs, the appended canary and noise-only columns included.
        canary: the crafted canary record, shape (width,): ``M = canary_norm_factor · C`` on its own column (or, for
            a module on images, the ±M/√(H·W) checkerboard), zero elsewhere.
    """

    width: int  # model inputs, appended columns included
    canary: torch.Tensor  # [width]


class MembershipGame(GradientCanaryGame):
    """The ``membership`` game (docs/games.md, "Games"; module docstring): a hidden bit decides whether the crafted
    input canary is trained on (n or n + 1 records, the add/remove relation), and the final-model attacks
    (:mod:`attacks.input_canary`) guess the bit by querying the final model. The guesses are judged against the
    claimed curve f of the add/remove relation (ε lower bound) and, as a binary game with Ball = ½, against
    ``min(1 − f(½), ½ + δ_add/remove(0)/2)``: Theorem 4's bound or the Bayes-optimal success, whichever is smaller
    (:func:`~fdp_audit.auditing.games.gradient_canary.binary_game_bound`)."""

    name = "membership"
    stream_block = 4
    epsilon_relation = Relation.ADD_REMOVE
    gradient_canary = False
    input_canary = True
    candidate_names = ("absent", "present")
    candidate_signs = (0.0, 1.0)
    canary = "crafted input"
    report = base.ReportView(
        "distinguishing", "Membership game (final model)",
        "A hidden bit chooses whether the crafted canary is trained on; the attacks query only the final model. "
        "Judged against the claimed curve f of the add/remove relation.")
    attribute_report = base.ReportView(
        "attribute", "Membership game · success rate (crafted input canaries)",
        "The membership game's canary is a crafted record on an input column no other record has a value in, with a "
        "label the initial model gets badly wrong; a hidden bit decides whether it is trained on (n or n + 1 "
        "records), and the attacks query only the final model. The bit is the secret (Ball = ½).",
        label="membership, crafted input canaries")

    def in_private(self, bit: torch.Tensor) -> torch.Tensor:
        """The canary is in the private population when the bit is 1.

        Args:
            bit: each trial's secret bit, shape (R,).

        Returns:
            The bits as bool, shape (R,).
        """
        return bit.bool()

    def automatic_attacks(self, config: Config) -> tuple[str, ...]:
        """Both final-model attacks on a table; ``canary_logit`` alone on images (module docstring).

        Args:
            config: the audit's configuration.

        Returns:
            ``("canary_logit",)`` on images, else ``("canary_logit", "noise_scale")``.
        """
        return ("canary_logit",) if read_as_images(config.data) else ("canary_logit", "noise_scale")

    def setup(self, config: Config, data: PreparedData) -> MembershipSetup:
        """The crafted canary and the training problem (module docstring): on a table, the data with
        :data:`MEMBERSHIP_COLUMNS` appended as protected features and a linear model started from
        :func:`worst_case_initial_params`; on images, the checkerboard canary and one fixed initialisation.

        Args:
            config: the audit's configuration.
            data: its prepared data and Ψ.

        Returns:
            The setup with the model's input width and the canary, shape (width,).

        Raises:
            BadInputError: fewer than two classes, a ``cnn`` on a table, a Ψ that is not a column subset, or a module
                factory that does not take the input width.
        """
        if data.train.n_classes <= CANARY_LABEL:
            raise BadInputError("the membership game needs at least two classes", "data")
        if isinstance(data.public_map, ImagePublicMap):
            return self._image_setup(config, data, data.public_map)
        if config.model.kind == "cnn":
            raise BadInputError("the membership game appends input columns to a table: a convolutional model needs "
                                "image data", "model.kind")
        widened = with_protected_columns(data, MEMBERSHIP_COLUMNS)
        d, width = data.train.n_features, widened.train.n_features
        if config.model.factory is not None and not takes_input_width(load_function(config.model.factory,
                                                                                     MODULE_FIELD)):
            raise BadInputError(f"the membership game trains the module on {width} input columns (the data's {d} and "
                                f"{width - d} of its own), so it needs a factory taking (n_inputs, n_classes), not "
                                "one of none; or list audit.games without membership", MODULE_FIELD)
        value = canary_value(config)
        problem = build_problem(config, widened)
        problem = replace(problem, initial_params=worst_case_initial_params(problem, self._start_key(config), d,
                                                                            value, wrong_margin(config, value)))
        canary = torch.zeros(width)
        canary[d] = value
        knowledge = Knowledge(problem.model, torch.stack([torch.zeros(width), canary]), CANARY_LABEL,
                              torch.tensor([0.5, 0.5]), noise_inputs=tuple(range(d + 1, width)))
        return MembershipSetup(problem, knowledge, width, canary)

    def _start_key(self, config: Config) -> torch.Tensor:
        """The key of every trial's fixed start: a model index no trial uses (trials stay below TRIAL_BLOCK)."""
        return streams.model_keys(config.seed, torch.tensor([(self.stream_block + 1) * base.TRIAL_BLOCK - 1]))

    def _image_setup(self, config: Config, data: PreparedData, psi: ImagePublicMap) -> MembershipSetup:
        """Images (module docstring): the crafted image canary on the data's own width, every trial from the
        model's initialisation at one fixed key."""
        problem = build_problem(config, data)
        start = {name: tensor[0] for name, tensor in problem.model.init(self._start_key(config)).items()}
        problem = replace(problem, initial_params=start)
        rows, columns = torch.meshgrid(torch.arange(psi.height), torch.arange(psi.width), indexing="ij")
        checkerboard = (1.0 - 2.0 * ((rows + columns) % 2)).flatten().float()
        canary = checkerboard * canary_value(config) / math.sqrt(psi.n_pixels)
        width = psi.n_pixels
        knowledge = Knowledge(problem.model, torch.stack([torch.zeros(width), canary]), CANARY_LABEL,
                              torch.tensor([0.5, 0.5]))
        return MembershipSetup(problem, knowledge, width, canary)

    def canaries(self, config: Config, setup: MembershipSetup, indices: np.ndarray) -> Canaries:
        """Every trial's canary, the crafted record with label 1, in the public population always and in the private one
        when the bit is 1.

        Args:
            config: the audit's configuration.
            setup: what :meth:`setup` built.
            indices: the trials' model indices, shape (R,).

        Returns:
            One canary per trial.
        """
        n = len(indices)
        bit = torch.as_tensor(self.secrets(config, setup, indices))
        return Canaries(setup.canary.repeat(n, 1), torch.full((n,), CANARY_LABEL, dtype=torch.long),
                        self.in_private(bit), torch.ones(n, dtype=torch.bool))
