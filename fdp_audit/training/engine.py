"""The batched training engine (docs/training.md).

Trains R independent models of one architecture in one computation: parameters carry a leading model
dimension, and every model draws its own Poisson masks, public batches and noise from counter-based
streams keyed by (seed, model index) (:mod:`fdp_audit.training.streams`). A single model is the case
R = 1 of the same code, so model k of a batch equals model k trained alone (to float rounding, 1e-5).

One step of Algorithm 1 (docs/training.md), per model:

1. ``B_priv``: Poisson sample of the data set at rate p (stream A);
2. ``g_priv = (Σ_{x∈B_priv} clip_C(∇ℓ_priv(w; x)) + N(0, z²C²I)) / m`` with m = p·n the *expected* size;
3. ``B_pub``: m' records uniformly with replacement (stream B, independent of A);
4. ``g_pub = (1/m') Σ_{x∈B_pub} ∇ℓ_pub(w; Ψ(x))`` — built from :class:`PublicView` only;
5. ``g = g_pub + α·g_priv``; optimiser step; optional projection.

How a batch of models is computed (docs/training.md):

* *Tables, not copies.* Every per-record quantity (records, labels, the public loss's inputs built from Ψ,
  the first layer's per-record inner products) is computed once per chunk as a table with one row per
  record of S followed by one row per model's canary; a model's batch is an ``index_select`` of table rows.
  Canaries (the audit games' need) are K per-model extra records in slots n … n+K-1 of the data set, each
  present in the private and/or public population independently; no data set is copied R times.
* *Three ways to clip* (:func:`private_path`). Logistic models (GLMs) take
  :mod:`fdp_audit.training.glm`: ``‖∇ℓ‖ = ‖softmax − onehot‖·‖x̃‖`` with ``‖x̃‖²`` (and, for ℓ_priv, the
  other per-record inner products) precomputed in a table, the logits from cache-sized blocks of gathered
  rows, and the clipped sum as one ``embedding_bag`` over the table — no per-example gradient, and no
  batch-sized copy of the data. Other stacks of linear layers (MLP) take the ghost path of
  :mod:`fdp_audit.training.ghost`: per-example norms from inner products and the clipped sum as one
  re-weighted pass. ``nn.Module`` models with a layer plan (the built-in CNN, and any user module made of
  convolutions, linear layers, GroupNorm/LayerNorm, element-wise maps, pooling and reshapes:
  :mod:`fdp_audit.training.layer_plan`) take :mod:`fdp_audit.training.conv_ghost`: per-layer norms from one
  forward and backward pass over all models. Other modules take per-example gradients from ``torch.func``
  (``vmap`` over models of ``vmap`` over examples of ``grad``; a module whose operations have no batching rule for
  stacked parameters takes a loop over models instead, :class:`fdp_audit.training.modules.ModelsMap`). The public
  gradient of a logistic model is read from the table of public inputs the same way.
* *Memory.* :func:`bytes_per_model` estimates one model's share of a step on the path actually taken;
  :func:`chunk_size_for` splits the models into chunks that fit a quarter of the free memory and refuses,
  with a :class:`BadInputError`, a configuration of which not even one model fits. Chunks are trained one
  after another and yielded as they finish.

A *gradient canary* (the audit-only hook of docs/games.md, ``iterates``) fixes the canary's raw private-loss
gradient and its public-loss gradient to given vectors; the mechanism then treats them as it treats any
record's gradients (it clips them, or fails to, exactly as it does for real records).

A *canary block* (:class:`CanaryBlock`, one-run audits) inserts M gradient canaries into each model at once.
The model gets ``2M + M₀`` extra parameters that its forward pass never reads, so no real record's gradient
touches them: canary i's private gradient is a value on block coordinate i, its public gradient a value on
coordinate M + i, and the last M₀ coordinates receive nothing but the mechanism's noise. The canaries are
records in slots n … n+M-1 of the data set: the Poisson sampler (stream A) draws them with the real records,
the public batches (stream B) too, and clipping, noise, normalisation and the optimiser treat their
coordinates as any other. The noise of the model's own coordinates is the prefix of the noise stream, so a
model's coordinates receive the same noise with or without a block.

Where a step's time goes (``python -m benchmarks.b2_batched`` prints it): for 256 DP-SGD
logistic regressions on Adult (expected batch 256, one CPU thread, 8–10 ms a step) about 40 % gathers
batch rows for the logits, 20 % is the Poisson sampler (its counter hash, then the gaps), 12 % the
clipped-sum ``embedding_bag`` and 8 % the Gaussian noise; the rest is element-wise work on ``[R, K]``
tensors and Python. The gathers and the hash are memory passes: that is what a further speed-up must cut.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace

import torch
from torch.func import grad, vmap

from fdp_audit.config import OptimizerConfig
from fdp_audit.data.features import PublicMap, PublicView
from fdp_audit.errors import BadInputError
from fdp_audit.mechanisms import Recipe
from fdp_audit.phases import Phase
from fdp_audit.threads import threads_for
from fdp_audit.training import conv_ghost, ghost, glm, streams
from fdp_audit.training.memory import kept_host_memory, worker_memory_headroom
from fdp_audit.training.models import Model, Params, example_loss, label_free_loss
from fdp_audit.training.modules import ModelsMap, ModuleModel
from fdp_audit.training.optim import Optimizer, learning_rate, project_l2
from fdp_audit.training.public_losses import PublicLoss

PRETRAIN_STEP_OFFSET = 1 << 30  # stream step ids of public pre-training, disjoint from private steps


@dataclass(frozen=True)
class Hyperparameters:
    """Accounted privacy parameters (z, p, T, C) and the optimisation settings."""

    noise_multiplier: float
    sample_rate: float
    steps: int
    clip_norm: float
    public_batch_size: int = 256
    private_weight: float = 1.0
    public_pretrain_steps: int = 0
    projection_radius: float | None = None
    optimizer: OptimizerConfig = OptimizerConfig()


@dataclass(frozen=True)
class TrainingProblem:
    """Everything but the randomness: model, data set S, Ψ, public loss, mechanism recipe, settings."""

    model: Model
    x: torch.Tensor
    y: torch.Tensor
    public_map: PublicMap
    public_loss: PublicLoss | None
    recipe: Recipe
    hyper: Hyperparameters
    # where every model starts (no model dimension); None: ``model.init`` from each model's own stream. DP-SGD's
    # guarantee holds from any starting point fixed before the data are seen, so an auditor may choose it to
    # be the worst case (docs/games.md, the membership game)
    initial_params: Params | None = None

    @property
    def n(self) -> int:
        return self.x.shape[0]

    def to(self, device: torch.device | str) -> TrainingProblem:
        """The same problem with its data set and starting parameters on ``device``.

        Args:
            device: the target device.

        Returns:
            A new problem (the model, Ψ and public loss shared).
        """
        initial = None if self.initial_params is None else {k: v.to(device) for k, v in self.initial_params.items()}
        return replace(self, x=self.x.to(device), y=self.y.to(device), initial_params=initial)


@dataclass(frozen=True)
class Canaries:
    """K extra records per model (slots n … n+K-1 of its data set), each one a record like any other: Poisson
    sampled on its own when in the private population, drawn by the public batches when in the public one,
    clipped as any record. Fields are shaped ``[R, K, ...]``; one canary per model may drop the K axis
    (``x`` ``[R, d]``, ``y`` ``[R]``, …), which is how a set with K = 1 is told from one with K canaries."""

    x: torch.Tensor  # [R, K, d] or [R, d]
    y: torch.Tensor  # [R, K] or [R]
    in_private: torch.Tensor  # [R, K] or [R] bool: the record is in the private population (Poisson sampled)
    in_public: torch.Tensor  # [R, K] or [R] bool: the record is in the public population (uniform batches)
    private_gradient: torch.Tensor | None = None  # [R, K, P] or [R, P]: raw ∇ℓ_priv of a gradient canary
    public_gradient: torch.Tensor | None = None  # [R, K, P] or [R, P]: ∇ℓ_pub∘Ψ of a gradient canary

    @property
    def count(self) -> int:
        """K, the canaries per model."""
        return 1 if self.y.dim() == 1 else self.y.shape[1]

    def take(self, rows: torch.Tensor) -> Canaries:
        """The canaries of the models at ``rows``.

        Args:
            rows: model rows to keep (indices or a boolean mask over R).

        Returns:
            The set restricted to those models, each field indexed on its model axis.
        """
        pick = (lambda t: None if t is None else t[rows])  # noqa: E731
        return Canaries(self.x[rows], self.y[rows], self.in_private[rows], self.in_public[rows],
                        pick(self.private_gradient), pick(self.public_gradient))

    def per_canary(self) -> Canaries:
        """The same set with the K axis present in every field.

        Returns:
            The canaries with fields ``[R, K, ...]`` (itself when they already have the axis).
        """
        if self.y.dim() == 2:
            return self
        lift = (lambda t: None if t is None else t[:, None])  # noqa: E731
        return Canaries(*(lift(t) for t in (self.x, self.y, self.in_private, self.in_public,
                                            self.private_gradient, self.public_gradient)))


@dataclass(frozen=True)
class CanaryBlock:
    """M gradient canaries per model on a block of ``2M + null`` parameters appended to the model (module doc).

    Canary i of model r is in the private population when ``in_private[r, i]``; its raw private gradient is
    ``private_values[r, i]`` times block coordinate i, its public gradient ``public_values[r, i]`` times block
    coordinate M + i. Every canary is in the public population (its Ψ is public)."""

    private_values: torch.Tensor  # [R, M]
    public_values: torch.Tensor  # [R, M]
    in_private: torch.Tensor  # [R, M] bool
    null: int  # coordinates that only noise reaches

    @property
    def count(self) -> int:
        return self.private_values.shape[1]

    @property
    def size(self) -> int:
        return 2 * self.count + self.null

    def take(self, rows: torch.Tensor, device: torch.device) -> CanaryBlock:
        """The block of the models at ``rows``, on ``device``.

        Args:
            rows: model rows to keep (indices or a boolean mask over R), on ``device``.
            device: where the block's tensors are put.

        Returns:
            The block restricted to those models (the same ``null`` count).
        """
        return CanaryBlock(self.private_values.to(device)[rows], self.public_values.to(device)[rows],
                           self.in_private.to(device)[rows], self.null)


BLOCK_KEY = "canary.block"  # the parameter entry of a canary block


@dataclass(frozen=True)
class Iterates:
    """What the ``iterates`` adversary sees (docs/games.md): every released noisy private sum and public gradient,
    and the public batches' use of the canary slots (stream B is independent of the data, so releasing it
    costs nothing). ``canary_private_sampled`` is ground truth for tests, never shown to an attack."""

    noisy_private_sums: torch.Tensor  # [R, T, P]
    public_gradients: torch.Tensor  # [R, T, P]
    canary_public_counts: torch.Tensor  # [R, T]: draws of any of the model's canaries
    canary_private_sampled: torch.Tensor  # [R, T]: some canary of the model was in the private batch
    private_batch_sizes: torch.Tensor  # [R, T]


@dataclass(frozen=True)
class ChunkResult:
    """One chunk of a batch of trainings (:func:`train_models` yields them in order; docs/training.md).

    Attributes:
        model_indices: the chunk's model indices (which trials), shape (Rc,).
        params: the trained parameters by name, each with a leading model dimension Rc.
        iterates: the released noisy private sums and public gradients of every step, when they were recorded;
            None otherwise.
    """

    model_indices: torch.Tensor  # [Rc]
    params: Params  # [Rc, ...]
    iterates: Iterates | None


def flatten(tree: Params, lead: int) -> torch.Tensor:
    """Concatenate parameter-shaped tensors into ``[*lead_dims, P]`` (``lead`` leading dims kept).

    Args:
        tree: tensors by parameter name, each ``[*lead_dims, *shape]``, in the model's parameter order.
        lead: how many leading dimensions to keep.

    Returns:
        The flat tensor ``[*lead_dims, P]``, P the total parameter count.
    """
    return torch.cat([v.reshape(*v.shape[:lead], -1) for v in tree.values()], dim=-1)


def unflatten(flat: torch.Tensor, model: Model) -> Params:
    """The inverse of :func:`flatten`; columns beyond the model's parameters are its canary block.

    Args:
        flat: flat parameters ``[..., P]`` (P may exceed the model's count by a canary block).
        model: the architecture whose shapes split the columns.

    Returns:
        The tensors by name, ``[..., *shape]``, with :data:`BLOCK_KEY` holding any extra columns.
    """
    out, start = {}, 0
    for name, shape in model.shapes().items():
        size = math.prod(shape)
        out[name] = flat[..., start:start + size].reshape(*flat.shape[:-1], *shape)
        start += size
    if flat.shape[-1] > start:
        out[BLOCK_KEY] = flat[..., start:]
    return out


def without_block(params: Params) -> Params:
    """The model's own parameters (a canary block, if any, left out: the model never reads it).

    Args:
        params: parameters by name, maybe with :data:`BLOCK_KEY`.

    Returns:
        The parameters without the block.
    """
    return {name: value for name, value in params.items() if name != BLOCK_KEY}


def _has_public_table(problem: TrainingProblem) -> bool:
    """Whether the public loss's model inputs are a function of the record (every public loss but
    gaussian_pad, whose padding is fresh noise at every use)."""
    loss = problem.public_loss
    return problem.recipe.public_reads_protected or (loss is not None and loss.pad_width == 0)


def private_path(problem: TrainingProblem) -> str:
    """How the private part is computed: ``"glm"`` (logistic models whose ℓ_priv inputs are a function of
    the record: norms and sums straight from record tables, :mod:`fdp_audit.training.glm`), ``"ghost"``
    (other stacks of linear layers: ghost norms, :mod:`fdp_audit.training.ghost`), ``"conv"`` (modules with a
    layer plan, the CNN among them: :mod:`fdp_audit.training.conv_ghost`), or ``"materialised"`` (per-example
    gradients from ``torch.func``).

    Args:
        problem: the training problem (its model, recipe and public loss decide).

    Returns:
        The path's name.
    """
    if conv_ghost.supports(problem.model):
        return "conv"
    if not ghost.supports(problem.model):
        return "materialised"
    if problem.model.kind == "logistic" and (problem.recipe.private_loss != "decomposed"
                                             or _has_public_table(problem)):
        return "glm"
    return "ghost"


class _Step:
    """One mechanism step for a chunk of models; holds the per-chunk constant tensors.

    Every per-record quantity lives in a *table* with one row per record of S followed by one row per
    model's canary (row ``n + rK + k`` is model r's canary k), so a batch is one ``index_select`` of table
    rows and the data set is never copied per model."""

    def __init__(self, problem: TrainingProblem, keys: torch.Tensor, canaries: Canaries | None,
                 device: torch.device, block: CanaryBlock | None = None):
        self.p, self.keys, self.device = problem, keys, device
        self.recipe, self.hyper, self.model = problem.recipe, problem.hyper, problem.model
        self.canaries = None if canaries is None else canaries.per_canary()
        self.block = block
        self.clip_norm = self.hyper.clip_norm if self.recipe.clip else None
        self.n = problem.n
        self.rate = min(1.0, self.hyper.sample_rate * self.recipe.rate_factor)
        self.expected_batch = self.rate * self.n
        self.sigma = (self.hyper.noise_multiplier * self.recipe.noise_factor * self.hyper.clip_norm
                      if self.recipe.private else 0.0)
        self.loss = problem.public_loss
        self.canary_count = 0 if canaries is None else canaries.count
        self.canary_rows = self.n + torch.arange(keys.shape[0] * self.canary_count,
                                                 device=device).view(-1, self.canary_count or 1)
        self.x_table = self._table(problem.x, None if self.canaries is None else self.canaries.x.flatten(0, 1))
        self.y_table = self._table(problem.y, None if self.canaries is None else self.canaries.y.flatten())
        # The public loss's model inputs: the full record for the faulty leaky recipe; else built from Ψ
        # once for every row, or (gaussian_pad) from Ψ's features plus fresh padding noise per use.
        self.public_table: torch.Tensor | None = None
        self.public_features: torch.Tensor | None = None
        if self.recipe.public_reads_protected:
            self.public_table = self.x_table
        elif self.loss is not None:
            views = problem.public_map(self.x_table, self.y_table)
            if self.loss.pad_width == 0:
                self.public_table = self.loss.inputs(views)
            else:
                self.public_features = views.features
        self.label_free = self.loss is not None and self.loss.label_free and not self.recipe.public_reads_protected
        self.fast = ghost.supports(self.model)
        self.conv = conv_ghost.supports(self.model)
        self.glm = self.fast and self.model.kind == "logistic"
        self.path = private_path(problem)
        self.tables: glm.RecordTables | None = None
        self.split = None
        self.products: torch.Tensor | None = None  # ghost.input_products of every row, when a function of it
        decomposed = self.recipe.private_loss == "decomposed"
        if self.recipe.private_loss != "none" and self.path == "glm":
            self.tables = glm.record_tables(self.x_table, self.public_table if decomposed else None)
        elif self.recipe.private_loss != "none" and self.path == "ghost":
            if decomposed:
                self.split = ghost.input_split(self.loss, self.recipe.public_reads_protected, self.model.n_inputs)
            if not decomposed or self.split is not None:
                self.products = ghost.input_products(self.x_table, self.split)
        self.per_example_grad = ModelsMap(vmap(grad(self._private_example_loss), in_dims=(None, 0, 0, 0)),
                                          in_dims=(0, 0, 0, 0))
        self.public_grad = ModelsMap(grad(self._public_batch_loss), in_dims=(0, 0, 0, 0))

    def _table(self, records: torch.Tensor, canary_records: torch.Tensor | None) -> torch.Tensor:
        return records if canary_records is None else torch.cat([records, canary_records.to(records.dtype)])

    # -- losses -------------------------------------------------------------------------------------
    def _public_term(self, params: Params, inputs: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        logits = self.model.forward(params, inputs)
        if self.label_free:
            return label_free_loss(logits)
        return example_loss(logits, y)

    def _private_example_loss(self, params: Params, x: torch.Tensor, y: torch.Tensor,
                              public_inputs: torch.Tensor) -> torch.Tensor:
        loss = example_loss(self.model.forward(params, x), y)
        if self.recipe.private_loss == "decomposed":
            loss = loss - self._public_term(params, public_inputs, y)
        return loss

    def _public_batch_loss(self, params: Params, inputs: torch.Tensor, y: torch.Tensor,
                           weights: torch.Tensor) -> torch.Tensor:
        return (self._public_term(params, inputs, y) * weights).sum()

    # -- gathering ----------------------------------------------------------------------------------
    def _rows(self, idx: torch.Tensor, is_canary: torch.Tensor, canary_ids: torch.Tensor) -> torch.Tensor:
        """Table rows ``[R, B]`` of sampled slots ``idx`` whose canaries (``is_canary``) are the model's own
        canaries ``canary_ids``; padding and unused canary slots read row 0, with weight 0."""
        if self.canaries is None:  # no slot n: the slots are the rows
            return idx
        return torch.where(is_canary, self.canary_rows.gather(1, canary_ids), idx.clamp(max=self.n - 1))

    def _canary_ids(self, idx: torch.Tensor) -> torch.Tensor:
        """Which of the model's canaries slots ``idx`` ``[R, B]`` would be (slot n + k is canary k; 0 where
        the slot is no canary's)."""
        return (idx - self.n).clamp(0, max(self.canary_count - 1, 0))

    def _block_slots(self, idx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Sampled slots ``[R, K]`` with the block canaries' slots (n and above) sent to row 0, the canary id of
        each slot (0 where none), and which slots are block canaries."""
        in_block = idx >= self.n
        return torch.where(in_block, 0, idx), (idx - self.n).clamp(min=0), in_block

    def _on_block(self, ids: torch.Tensor, values: torch.Tensor, offset: int = 0) -> torch.Tensor:
        """``[R, block size]``: ``values`` ``[R, K]`` summed onto block coordinates ``offset + ids``."""
        assert self.block is not None
        out = torch.zeros(values.shape[0], self.block.size, dtype=values.dtype, device=self.device)
        return out.scatter_add_(1, ids + offset, values)

    @staticmethod
    def _gather(table: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        return table.index_select(0, rows.flatten()).view(*rows.shape, *table.shape[1:])

    def _public_inputs(self, rows: torch.Tensor, step: int, stream: streams.Stream) -> torch.Tensor:
        """Model inputs of the public loss on table rows ``rows`` (``[R, K]``)."""
        if self.public_table is not None:
            return self._gather(self.public_table, rows)
        assert self.loss is not None and self.public_features is not None
        features = self._gather(self.public_features, rows)
        noise = streams.normal(self.keys, step, stream, rows.shape[1] * self.loss.pad_width, self.device)
        noise = noise.reshape(*rows.shape, self.loss.pad_width)
        return self.loss.inputs(PublicView(features, None), noise)

    # -- the step -----------------------------------------------------------------------------------
    def private_part(self, params: Params, step: int) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Noisy clipped sum ``[R, P]`` and the Poisson batch (table rows, validity, canary flags). Logistic
        models clip from record tables (:mod:`fdp_audit.training.glm`), other linear stacks by ghost norms
        (:mod:`fdp_audit.training.ghost`), other models from materialised gradients."""
        r = self.keys.shape[0]
        n_slots = self.n + self.canary_count + (self.block.count if self.block else 0)
        idx, valid = streams.poisson_sample(self.keys, step, n_slots, self.rate, self.device)
        block_ids = block_hits = None
        if self.block is not None:  # slots n … n+M-1: present canaries join the batch on the block only
            idx, block_ids, in_block = self._block_slots(idx)
            block_hits = in_block & valid & self.block.in_private.gather(1, block_ids)
            valid = valid & ~in_block
        is_canary = idx >= self.n  # valid slots beyond S are canaries (block slots were sent to row 0)
        canary_ids = self._canary_ids(idx)
        if self.canaries is not None:
            valid = valid & ~(is_canary & ~self.canaries.in_private.gather(1, canary_ids))
        is_canary = is_canary & valid
        rows = self._rows(idx, is_canary, canary_ids)
        batch = {"rows": rows, "valid": valid, "is_canary": is_canary, "canary_ids": canary_ids,
                 "block_ids": block_ids, "block_hits": block_hits}
        if idx.shape[1] == 0:
            flat = torch.zeros(r, self.model.n_parameters, device=self.device)
        else:
            y = self._gather(self.y_table, rows)
            override = None
            if self.canaries is not None and self.canaries.private_gradient is not None:
                override = ghost.GradientOverride(is_canary, self.canaries.private_gradient, canary_ids)
            clip_norm = self.clip_norm
            decomposed = self.recipe.private_loss == "decomposed"
            if self.tables is not None:  # a GLM: norms and sums straight from the record tables
                flat = glm.clipped_private_sum(params, self.tables, rows, y, valid, clip_norm, self.label_free,
                                               override)
            elif self.fast:  # docs/training.md: norms from inner products, one re-weighted pass
                x = self._gather(self.x_table, rows)
                products = None if self.products is None else self._gather(self.products, rows)
                public = self._ghost_public_term(rows, step) if decomposed else None
                flat = ghost.clipped_private_sum(self.model, params, ghost.PrivateBatch(x, y, valid, public, products),
                                                 clip_norm, override)
            elif self.conv:  # docs/images.md: per-layer norms from one forward and backward pass
                x = self._gather(self.x_table, rows)
                public = None
                if decomposed:
                    public = ghost.PublicTerm(self._public_inputs(rows, step, streams.Stream.PRIVATE_PAD),
                                              self.label_free)
                flat = _clipped_sums_by_batch_size(self.model, without_block(params),
                                                   ghost.PrivateBatch(x, y, valid, public), clip_norm, override)
            else:
                x = self._gather(self.x_table, rows)
                public_inputs = self._public_inputs(rows, step, streams.Stream.PRIVATE_PAD) if decomposed else x
                flat = self._materialised_sum(params, x, y, public_inputs, valid, clip_norm, override)
        if self.block is not None:
            values = self.block.private_values.gather(1, block_ids) * block_hits
            if clip_norm is not None:  # a canary's gradient lies on one coordinate: its norm is |value|
                values = values * torch.clamp(clip_norm / values.abs().clamp_min(1e-12), max=1.0)
            flat = torch.cat([flat, self._on_block(block_ids, values)], dim=1)
        if self.sigma > 0:
            flat = flat + self.sigma * streams.normal(self.keys, step, streams.Stream.NOISE,
                                                      flat.shape[1], self.device, flat.dtype)
        return flat, batch

    def _ghost_public_term(self, rows: torch.Tensor, step: int) -> ghost.PublicTerm:
        """ℓ_pub∘Ψ of ℓ_priv for the fast path; an input split (mask, mean, label DP) makes the public inputs
        unnecessary."""
        inputs = None if self.split is not None else self._public_inputs(rows, step, streams.Stream.PRIVATE_PAD)
        return ghost.PublicTerm(inputs, self.label_free, self.split)

    def _materialised_sum(self, params: Params, x: torch.Tensor, y: torch.Tensor, public_inputs: torch.Tensor,
                          valid: torch.Tensor, clip_norm: float | None,
                          override: ghost.GradientOverride | None) -> torch.Tensor:
        """The clipped sum from per-example gradients ``[R, K, P]`` (any layer type)."""
        per_example = flatten(self.per_example_grad(without_block(params), x, y, public_inputs), lead=2)
        if override is not None:
            per_example = torch.where(override.mask[..., None], override.per_example().to(per_example.dtype),
                                      per_example)
        weights = valid.to(per_example.dtype)
        if clip_norm is not None:
            norms = per_example.norm(dim=-1)
            weights = weights * torch.clamp(clip_norm / norms.clamp_min(1e-12), max=1.0)
        return torch.einsum("rk,rkp->rp", weights, per_example)

    def public_part(self, params: Params, step: int, private_batch: dict[str, torch.Tensor] | None
                    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Public gradient ``[R, P]`` and how often each model's canaries were in its public batch."""
        r = self.keys.shape[0]
        block_ids = block_hits = None
        if private_batch is not None:  # shared batch (Proposition 3): the private Poisson batch
            rows, is_canary, canary_ids = private_batch["rows"], private_batch["is_canary"], private_batch["canary_ids"]
            block_ids, block_hits = private_batch["block_ids"], private_batch["block_hits"]
            weights = private_batch["valid"].to(self.p.x.dtype)
            denominator = self.expected_batch
        else:
            has = (self.canaries.in_public.long().sum(dim=1) if self.canaries is not None
                   else torch.zeros(r, dtype=torch.long, device=self.device))
            if self.block is not None:
                has = has + self.block.count
            idx = streams.uniform_indices(self.keys, step, streams.Stream.PUBLIC_SAMPLE,
                                          self.hyper.public_batch_size, self.n + has, self.device)
            if self.block is not None:
                idx, block_ids, block_hits = self._block_slots(idx)
            is_canary = idx >= self.n
            canary_ids = self._canary_ids(idx)
            if self.canaries is not None:  # slot n + j is the model's j-th canary of the public population
                public_first = torch.sort((~self.canaries.in_public).long(), dim=1, stable=True).indices
                canary_ids = public_first.gather(1, canary_ids)
            rows = self._rows(idx, is_canary, canary_ids)
            weights = torch.ones(idx.shape, dtype=self.p.x.dtype, device=self.device)
            if block_hits is not None:
                weights = weights * ~block_hits
            denominator = float(self.hyper.public_batch_size)
        counts = is_canary.sum(dim=1)
        gradient_canary = self.canaries is not None and self.canaries.public_gradient is not None
        if gradient_canary:
            weights = weights * ~is_canary
        y = self._gather(self.y_table, rows)
        if self.glm and self.public_table is not None:  # straight from the table of public inputs
            flat = glm.gradient_sum(params, self.public_table, rows, y, weights, self.label_free)
        else:
            inputs = self._public_inputs(rows, step, streams.Stream.PUBLIC_PAD)
            if self.fast:  # one forward and backward pass, no per-model torch.func transform
                flat = ghost.gradient_sum(self.model, params, inputs, y, weights, self.label_free)
            elif self.conv:
                flat = conv_ghost.gradient_sum(self.model, without_block(params), inputs, y, weights, self.label_free)
            else:
                flat = flatten(self.public_grad(without_block(params), inputs, y, weights), lead=1)
        if gradient_canary:
            canary_grad = self.canaries.public_gradient
            if self.recipe.public_reads_protected:  # the full loss: ∇ℓ = ∇ℓ_pub∘Ψ + ∇ℓ_priv
                canary_grad = canary_grad + self.canaries.private_gradient
            uses = torch.zeros(r, self.canary_count, dtype=flat.dtype, device=self.device)
            uses.scatter_add_(1, canary_ids, is_canary.to(flat.dtype))
            flat = flat + (uses[..., None] * canary_grad.to(flat.dtype)).sum(dim=1)
        if self.block is not None:
            assert block_ids is not None and block_hits is not None
            block = self._on_block(block_ids, self.block.public_values.gather(1, block_ids) * block_hits,
                                   self.block.count)
            if self.recipe.public_reads_protected:  # the full loss: ∇ℓ = ∇ℓ_pub∘Ψ + ∇ℓ_priv
                block = block + self._on_block(block_ids, self.block.private_values.gather(1, block_ids) * block_hits)
            flat = torch.cat([flat, block.to(flat.dtype)], dim=1)
        return flat / denominator, counts


def _available_bytes(device: torch.device) -> int:
    """Memory a chunk may use where it runs: the device's free memory; on the CPU the host's available memory,
    capped on a Dask worker by what its memory limit leaves (a worker is restarted at 95 % of its limit, however
    much the host has free)."""
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return int(free)
    host = int(os.environ.get("FDP_AUDIT_MEMORY_BYTES", 4 << 30))
    try:
        with open("/proc/meminfo") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    host = int(line.split()[1]) * 1024
                    break
    except OSError:
        pass
    worker = worker_memory_headroom()
    return host if worker is None else min(host, worker)


def bytes_per_model(problem: TrainingProblem, record_iterates: bool, block: CanaryBlock | None = None,
                    canaries: int = 0, scored: int = 0) -> int:
    """Peak memory one model adds to a chunk, following the path its private part takes
    (:func:`private_path`; float32, over the widest Poisson batch of its n + ``canaries`` records, and the
    ``block``'s M canaries, whose slots join every batch): the GLM
    path holds a few values per example and output (logits, their gradients, norms, weights; its gathered rows
    live in one shared cache-sized buffer); the ghost path holds each layer's inputs, pre-activations and
    output gradients on the records (and on the completed public inputs for ℓ_priv); neither materialises a
    per-example gradient. The ``torch.func`` path holds per-example gradients ``[K, P]`` and their clipped
    copies. All add the public batch's activations, a few parameter-sized vectors, the recorded iterates, and
    the model's canary records: a row of each per-record table (record, public inputs, precomputed products:
    at most three record widths and a few values) and, for gradient canaries, two gradient vectors. The attacks
    then score ``scored`` candidate records on each trained model (K candidates of an image game): each candidate's
    forward and backward activations, input and gradient ``4·(3A + d + P)`` bytes (A activations, d inputs, P
    parameters), so that the memory of a game grows with K and is sized before anything is trained.

    Args:
        problem: the training problem.
        record_iterates: whether every step's release is kept (``8·T·P`` bytes more).
        block: each model's canary block, if any.
        canaries: canary records per model.
        scored: candidates the attacks score on each model.

    Returns:
        The estimate in bytes.
    """
    h, model = problem.hyper, problem.model
    rate = min(1.0, h.sample_rate * problem.recipe.rate_factor)
    slots = problem.n + canaries + (0 if block is None else block.count)
    width = rate * slots + 6 * math.sqrt(max(rate * slots, 1)) + 16
    p = model.n_parameters + (0 if block is None else block.size)
    activations = (model.activation_floats if isinstance(model, ModuleModel)
                   else model.n_inputs + sum(model.hidden) + model.n_outputs)
    batch = max(width, h.public_batch_size)
    terms = 2 if problem.recipe.private_loss == "decomposed" else 1
    path = private_path(problem)
    if path == "glm":
        per_example = 4 * terms * model.n_outputs + 8
        private, public = width * per_example, 4 * batch * model.n_outputs + 4 * batch
    elif path == "ghost":
        private, public = 3 * terms * width * activations, 3 * batch * activations
    elif path == "conv":
        per_example, activations = conv_ghost.floats_per_example(model)
        private, public = terms * width * per_example, 3 * batch * activations
    else:
        private, public = 4 * width * p + width * activations, 3 * batch * activations
    per_step = 4 * (private + public + 8 * p)
    canary_rows = 4 * canaries * (3 * problem.x.shape[1] + 2 * p + 8)
    scoring = 4 * scored * (3 * activations + problem.x.shape[1] + model.n_parameters)
    return int(per_step + canary_rows + scoring + (8 * h.steps * p if record_iterates else 0))


def chunk_size_for(problem: TrainingProblem, record_iterates: bool, device: torch.device,
                   n_models: int, limit: int | None = None, block: CanaryBlock | None = None, canaries: int = 0,
                   scored: int = 0) -> int:
    """Models per chunk: what fits in a quarter of the available memory (the resource guard).

    Args:
        problem: the training problem.
        record_iterates: whether every step's release is kept.
        device: where the models train.
        n_models: the models to train.
        limit: at most this many per chunk.
        block: each model's canary block, if any.
        canaries: canary records per model.
        scored: candidates the attacks score on each model.

    Returns:
        The models per chunk.

    Raises:
        BadInputError: not even one model fits; the message gives the estimate.
    """
    per_model = bytes_per_model(problem, record_iterates, block, canaries, scored)
    budget = _available_bytes(device) // 4
    fits = budget // max(per_model, 1)
    if fits < 1:
        what = f", {scored} candidates scored per trial" if scored > 1 else ""
        what += f", {block.count} block canaries" if block is not None else ""
        raise BadInputError(
            f"one model needs about {per_model / 2**30:.1f} GiB for this configuration{what}, more than a "
            f"quarter of the available {budget * 4 / 2**30:.1f} GiB; lower the sample rate, the model size, the "
            "candidates or the steps recorded", "mechanism")
    return int(max(1, min(n_models, fits, limit or n_models)))


def train_models(problem: TrainingProblem, seed: int, model_indices: Sequence[int] | torch.Tensor,
                 canaries: Canaries | None = None, record_iterates: bool = False,
                 device: torch.device | str = "cpu", max_chunk: int | None = None,
                 progress: bool | str = False, on_step: Callable[[int, Params], None] | None = None,
                 canary_block: CanaryBlock | None = None, scored: int = 0) -> Iterator[ChunkResult]:
    """Train one model per index, in memory-sized chunks, yielding each chunk when it is done; ``scored``: the
    candidates the caller's attacks score on each model of a chunk (they count against its memory).

    ``canaries`` (K canary records per model, :class:`Canaries`) or ``canary_block`` (M gradient canaries per
    model; the models' parameters then include :data:`BLOCK_KEY`), if given, has one row per entry of
    ``model_indices``.
    Results stream out chunk by chunk
    so that callers never hold all models at once. ``on_step(done, params)``, if given, is called after every
    optimiser step of every chunk (``done`` counts public pre-training steps first, then private steps).
    ``progress`` (a phase name, or True) reports the model-steps done (:class:`fdp_audit.phases.Phase`).

    Args:
        problem: the training problem.
        seed: the seed the model keys derive from (:func:`fdp_audit.training.streams.model_keys`).
        model_indices: the models' indices; model i's randomness depends on (seed, i) only.
        canaries: canary records per model, or None.
        record_iterates: whether to keep every step's release (:class:`Iterates`).
        device: where the models train.
        max_chunk: at most this many models per chunk.
        progress: a phase name, True for ``"training"``, or False for no progress.
        on_step: called as ``on_step(done, params)`` after every optimiser step.
        canary_block: a canary block per model, or None (not with ``canaries``).
        scored: candidates the attacks score on each model.

    Yields:
        One :class:`ChunkResult` per chunk: its model indices, parameters ``[Rc, ...]`` and iterates (if recorded).

    Raises:
        BadInputError: not even one model fits in memory, or training diverged (:func:`check_finite`).
        ValueError: both ``canaries`` and ``canary_block`` are given.
    """
    device = torch.device(device)
    indices = torch.as_tensor(list(model_indices), dtype=torch.long)
    problem = problem.to(device)
    if canaries is not None and canary_block is not None:
        raise ValueError("a model takes either canary records or a canary block")
    size = chunk_size_for(problem, record_iterates, device, len(indices), max_chunk, canary_block,
                          0 if canaries is None else canaries.count, scored)
    if progress:
        steps = problem.hyper.steps + (problem.hyper.public_pretrain_steps if problem.public_loss is not None else 0)
        name = progress if isinstance(progress, str) else "training"
        with Phase(f"{name}: {len(indices)} model{'s' * (len(indices) != 1)}", len(indices) * steps,
                   "model-step") as phase:

            def counted(done: int, params: Params) -> None:
                phase.update(next(iter(params.values())).shape[0])
                if on_step is not None:
                    on_step(done, params)

            for chunk in _train_chunks(problem, seed, indices, canaries, record_iterates, device, size, counted,
                                       canary_block):
                if phase.done >= phase.total:  # trained: the caller's work on the last chunk is another phase
                    phase.finish()
                yield chunk
        return
    yield from _train_chunks(problem, seed, indices, canaries, record_iterates, device, size, on_step, canary_block)


def _train_chunks(problem: TrainingProblem, seed: int, indices: torch.Tensor, canaries: Canaries | None,
                  record_iterates: bool, device: torch.device, size: int,
                  on_step: Callable[[int, Params], None] | None,
                  canary_block: CanaryBlock | None) -> Iterator[ChunkResult]:
    for start in range(0, len(indices), size):
        rows = torch.arange(start, min(start + size, len(indices)))
        chunk_canaries = None
        if canaries is not None:
            chunk_canaries = Canaries(*(None if t is None else t.to(device) for t in (
                canaries.x, canaries.y, canaries.in_private, canaries.in_public,
                canaries.private_gradient, canaries.public_gradient))).take(rows.to(device))
        chunk_block = None if canary_block is None else canary_block.take(rows.to(device), device)
        keys = streams.model_keys(seed, indices[rows])
        with threads_for(step_work(problem, len(rows))), ieee_float32(), kept_host_memory(device):
            params, iterates = _train_chunk(problem, keys, chunk_canaries, record_iterates, device, on_step,
                                            chunk_block)
        check_finite(params, indices[rows], problem.hyper)
        yield ChunkResult(indices[rows], params, iterates)


def step_work(problem: TrainingProblem, models: int = 1) -> int:
    """Multiply-adds of one training step of ``models`` models, from which :func:`fdp_audit.threads.threads_for`
    chooses the thread count: the expected private batch ``p·n`` and the public batch, times one example's cost
    (its layer plan's multiply-adds, else the parameter count).

    Args:
        problem: the training problem (its data set's size, its claimed settings and model).
        models: how many models step together.

    Returns:
        The step's multiply-adds, rounded down.
    """
    hyper = problem.hyper
    rows_per_step = problem.n * min(1.0, hyper.sample_rate) + hyper.public_batch_size
    per_row = (conv_ghost.multiply_adds_per_example(problem.model) if conv_ghost.supports(problem.model)
               else problem.model.n_parameters)
    return int(models * rows_per_step * per_row)


@contextmanager
def ieee_float32() -> Iterator[None]:
    """Convolutions and matrix products in IEEE float32 rather than TF32 (cuDNN's default for convolutions on
    recent GPUs): with TF32's 10-bit mantissa a per-example norm, hence the clip bound C, holds only to about
    10⁻³ relative, and a model trained on the GPU would drift from its CPU twin by far more than rounding.

    Yields:
        Nothing; TF32 is off while the context is open and restored as it was after.
    """
    saved = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = saved


def check_finite(params: Params, model_indices: torch.Tensor, hyper: Hyperparameters) -> None:
    """Refuse a chunk whose training diverged. A non-finite gradient, update or parameter stays non-finite
    (NaN absorbs every later operation, an infinite weight yields NaN logits, and 0·∞ is NaN), so the final
    parameters are finite only if every step's update was, released noisy sums and public gradients
    included: one reduction per parameter tensor per chunk (0.01 % of a 128-model Adult chunk) sees any
    divergence. A diverged model would otherwise be attacked and judged (NaN scores guess the first
    candidate) as if it were a model.

    Args:
        params: the chunk's final parameters by name, ``[Rc, *shape]``.
        model_indices: the chunk's model indices ``[Rc]`` (their count is reported).
        hyper: the settings (steps and learning rate, for the message).

    Raises:
        BadInputError: some model's parameters are not finite.
    """
    finite = torch.stack([torch.isfinite(t).reshape(t.shape[0], -1).all(dim=1) for t in params.values()]).all(dim=0)
    if bool(finite.all()):
        return
    raise BadInputError(f"training diverged: {int((~finite).sum())} of {len(model_indices)} models have "
                        f"non-finite parameters after {hyper.public_pretrain_steps + hyper.steps} steps; lower "
                        f"the learning rate ({hyper.optimizer.lr:g})", "mechanism.optimizer.lr")


# models per size group of a CNN step (_clipped_sums_by_batch_size): on B2 for images (64 models, 8×8 digits) groups
# of 32 train 7 % faster than one group (0.79 s against 0.85 s, interleaved runs); groups of 16-22 gain no more
MODELS_PER_SIZE_GROUP = 32


def _clipped_sums_by_batch_size(model: Model, params: Params, batch: ghost.PrivateBatch, clip_norm: float | None,
                                override: ghost.GradientOverride | None) -> torch.Tensor:
    """Noisy-sum input ``[R, P]`` of a CNN step (:func:`conv_ghost.clipped_private_sum`), the models taken in groups
    sorted by Poisson batch width, each group padded only to its own widest batch rather than the chunk's (64
    models at expected batch 64 pad to about 82 rows, 1.28×). A model's clipped sum depends on its own rows
    only, and padding rows carry weight 0, so the grouping changes nothing but the rounding of the batched
    products."""
    r = batch.valid.shape[0]
    if r <= MODELS_PER_SIZE_GROUP:
        return conv_ghost.clipped_private_sum(model, params, batch, clip_norm, override)
    positions = torch.arange(1, batch.valid.shape[1] + 1, device=batch.valid.device)
    widths = (batch.valid * positions).amax(dim=1)  # one past each model's last real row
    out = None
    for group in torch.argsort(widths).split(MODELS_PER_SIZE_GROUP):
        w = max(int(widths[group].max()), 1)
        public = batch.public
        if public is not None and public.inputs is not None:
            public = replace(public, inputs=public.inputs[group, :w])
        rows = ghost.PrivateBatch(batch.x[group, :w], batch.y[group, :w], batch.valid[group, :w], public)
        group_override = None
        if override is not None:
            group_override = ghost.GradientOverride(override.mask[group, :w], override.vectors[group],
                                                    None if override.ids is None else override.ids[group, :w])
        sums = conv_ghost.clipped_private_sum(model, {name: v[group] for name, v in params.items()}, rows,
                                              clip_norm, group_override)
        if out is None:
            out = sums.new_empty(r, sums.shape[1])
        out[group] = sums
    return out


def _train_chunk(problem: TrainingProblem, keys: torch.Tensor, canaries: Canaries | None,
                 record_iterates: bool, device: torch.device,
                 on_step: Callable[[int, Params], None] | None = None, block: CanaryBlock | None = None
                 ) -> tuple[Params, Iterates | None]:
    recipe, hyper, model = problem.recipe, problem.hyper, problem.model
    step = _Step(problem, keys, canaries, device, block)
    params = (model.init(keys, device) if problem.initial_params is None else
              {k: v.to(device).expand(keys.shape[0], *v.shape).clone() for k, v in problem.initial_params.items()})
    r, p_count = keys.shape[0], model.n_parameters
    if block is not None:
        params[BLOCK_KEY] = torch.zeros(r, block.size, device=device)
        p_count += block.size
    optimizer = Optimizer(hyper.optimizer)
    if hyper.public_pretrain_steps and problem.public_loss is not None:
        for t in range(hyper.public_pretrain_steps):
            g_pub, _ = step.public_part(params, PRETRAIN_STEP_OFFSET + t, None)
            lr = learning_rate(hyper.optimizer, t, hyper.public_pretrain_steps)
            params = _apply(optimizer, params, g_pub, lr, hyper, model)
            if on_step is not None:
                on_step(t + 1, params)
        optimizer = Optimizer(hyper.optimizer)
    record = None
    if record_iterates:
        record = {
            "noisy": torch.zeros(r, hyper.steps, p_count, device=device),
            "public": torch.zeros(r, hyper.steps, p_count, device=device),
            "counts": torch.zeros(r, hyper.steps, dtype=torch.long, device=device),
            "sampled": torch.zeros(r, hyper.steps, dtype=torch.bool, device=device),
            "sizes": torch.zeros(r, hyper.steps, dtype=torch.long, device=device),
        }
    zeros = torch.zeros(r, p_count, device=device)
    for t in range(hyper.steps):
        noisy, batch = (step.private_part(params, t) if recipe.private_loss != "none" else (zeros, None))
        g_priv = noisy / step.expected_batch
        if recipe.public_batch == "none":
            g_pub, counts = zeros, torch.zeros(r, dtype=torch.long, device=device)
        else:
            g_pub, counts = step.public_part(params, t, batch if recipe.public_batch == "shared" else None)
        g = g_pub + hyper.private_weight * g_priv if recipe.private_loss != "none" else g_pub
        params = _apply(optimizer, params, g, learning_rate(hyper.optimizer, t, hyper.steps), hyper, model)
        if on_step is not None:
            on_step(hyper.public_pretrain_steps + t + 1, params)
        if record is not None:
            record["noisy"][:, t] = noisy
            record["public"][:, t] = g_pub
            record["counts"][:, t] = counts
            if batch is not None:
                record["sampled"][:, t] = batch["is_canary"].any(dim=1)
                record["sizes"][:, t] = batch["valid"].sum(dim=1)
    iterates = None
    if record is not None:
        iterates = Iterates(record["noisy"], record["public"], record["counts"], record["sampled"],
                            record["sizes"])
    return params, iterates


def _apply(optimizer: Optimizer, params: Params, flat_grad: torch.Tensor, lr: float,
           hyper: Hyperparameters, model: Model) -> Params:
    params = optimizer.step(params, unflatten(flat_grad, model), lr)
    if hyper.projection_radius is not None:
        params = project_l2(params, hyper.projection_radius)
    return params


def predict_logits(model: Model, params: Params, x: torch.Tensor) -> torch.Tensor:
    """Logits of every model on shared inputs: ``[R, N, n_outputs]``.

    Args:
        model: the architecture.
        params: the stacked parameters by name, ``[R, *shape]``.
        x: inputs ``[N, n_inputs]`` shared by every model.

    Returns:
        Logits ``[R, N, n_outputs]``.
    """
    return ModelsMap(model.forward, in_dims=(0, None))(params, x)


def accuracy(model: Model, params: Params, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Test accuracy of every model, ``[R]``: the fraction of ``x`` whose predicted class (logit > 0 for one logit,
    else the arg max) is ``y``.

    Args:
        model: the architecture.
        params: the stacked parameters by name, ``[R, *shape]``.
        x: test inputs ``[N, n_inputs]``.
        y: test labels ``[N]``.

    Returns:
        The accuracies ``[R]``, float64.
    """
    logits = predict_logits(model, params, x)
    pred = (logits[..., 0] > 0).long() if logits.shape[-1] == 1 else logits.argmax(dim=-1)
    return (pred == y[None, :]).double().mean(dim=1)
