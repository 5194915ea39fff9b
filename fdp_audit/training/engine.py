"""The batched training engine (SPEC 2.3, 6; issues 4 and 5).

Trains R independent models of one architecture in one computation: parameters carry a leading model
dimension, per-example gradients come from ``torch.func`` (``vmap`` over models of ``vmap`` over examples
of ``grad``), and every model draws its own Poisson masks, public batches and noise from counter-based
streams keyed by (seed, model index) (:mod:`fdp_audit.training.streams`). A single model is the case
R = 1, so model k of a batch equals model k trained alone.

One step of Algorithm 1 (SPEC 2.3), per model:

1. ``B_priv``: Poisson sample of the data set at rate p (stream A);
2. ``g_priv = (Σ_{x∈B_priv} clip_C(∇ℓ_priv(w; x)) + N(0, z²C²I)) / m`` with m = p·n the *expected* size;
3. ``B_pub``: m' records uniformly with replacement (stream B, independent of A);
4. ``g_pub = (1/m') Σ_{x∈B_pub} ∇ℓ_pub(w; Ψ(x))`` — built from :class:`PublicView` only;
5. ``g = g_pub + α·g_priv``; optimiser step; optional projection.

Canaries (the audit games' need) are per-model extra records in slot n of the data set, present in the
private and/or public population independently, without copying the data set R times. A *gradient
canary* (the audit-only hook of SPEC 3, ``iterates``) fixes the canary's raw private-loss gradient and its
public-loss gradient to given vectors; the mechanism then treats them as it treats any record's
gradients (it clips them, or fails to, exactly as it does for real records).
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace

import torch
from torch.func import grad, vmap
from tqdm.auto import tqdm

from fdp_audit.config import OptimizerConfig
from fdp_audit.data.features import FeatureMap, PublicView
from fdp_audit.errors import BadInputError
from fdp_audit.training import ghost, streams
from fdp_audit.training.mechanisms import Recipe
from fdp_audit.training.models import Model, Params, example_loss, label_free_loss
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
    feature_map: FeatureMap
    public_loss: PublicLoss | None
    recipe: Recipe
    hyper: Hyperparameters

    @property
    def n(self) -> int:
        return self.x.shape[0]

    def to(self, device: torch.device | str) -> TrainingProblem:
        return replace(self, x=self.x.to(device), y=self.y.to(device))


@dataclass(frozen=True)
class Canaries:
    """One extra record per model (slot n of its data set)."""

    x: torch.Tensor  # [R, d]
    y: torch.Tensor  # [R]
    in_private: torch.Tensor  # [R] bool: the record is in the private population (Poisson sampled)
    in_public: torch.Tensor  # [R] bool: the record is in the public population (uniform batches)
    private_gradient: torch.Tensor | None = None  # [R, P] raw ∇ℓ_priv of a gradient canary
    public_gradient: torch.Tensor | None = None  # [R, P] ∇ℓ_pub∘Ψ of a gradient canary

    def take(self, rows: torch.Tensor) -> Canaries:
        pick = (lambda t: None if t is None else t[rows])  # noqa: E731
        return Canaries(self.x[rows], self.y[rows], self.in_private[rows], self.in_public[rows],
                        pick(self.private_gradient), pick(self.public_gradient))


@dataclass(frozen=True)
class Iterates:
    """What the ``iterates`` adversary sees (SPEC 3): every released noisy private sum and public gradient,
    and the public batches' use of the canary slot (stream B is independent of the data, so releasing it
    costs nothing). ``canary_private_sampled`` is ground truth for tests, never shown to an attack."""

    noisy_private_sums: torch.Tensor  # [R, T, P]
    public_gradients: torch.Tensor  # [R, T, P]
    canary_public_counts: torch.Tensor  # [R, T]
    canary_private_sampled: torch.Tensor  # [R, T]
    private_batch_sizes: torch.Tensor  # [R, T]


@dataclass(frozen=True)
class ChunkResult:
    model_indices: torch.Tensor  # [Rc]
    params: Params  # [Rc, ...]
    iterates: Iterates | None


def flatten(tree: Params, lead: int) -> torch.Tensor:
    """Concatenate parameter-shaped tensors into ``[*lead_dims, P]`` (``lead`` leading dims kept)."""
    return torch.cat([v.reshape(*v.shape[:lead], -1) for v in tree.values()], dim=-1)


def unflatten(flat: torch.Tensor, model: Model) -> Params:
    out, start = {}, 0
    for name, shape in model.shapes().items():
        size = math.prod(shape)
        out[name] = flat[..., start:start + size].reshape(*flat.shape[:-1], *shape)
        start += size
    return out


class _Step:
    """One mechanism step for a chunk of models; holds the per-chunk constant tensors."""

    def __init__(self, problem: TrainingProblem, keys: torch.Tensor, canaries: Canaries | None,
                 device: torch.device):
        self.p, self.keys, self.device = problem, keys, device
        self.recipe, self.hyper, self.model = problem.recipe, problem.hyper, problem.model
        self.canaries = canaries
        self.n = problem.n
        self.rate = min(1.0, self.hyper.sample_rate * self.recipe.rate_factor)
        self.expected_batch = self.rate * self.n
        self.sigma = (self.hyper.noise_multiplier * self.recipe.noise_factor * self.hyper.clip_norm
                      if self.recipe.private else 0.0)
        self.loss = problem.public_loss
        # Ψ of the whole data set once; the public loss only ever sees these views.
        self.views = problem.feature_map(problem.x, problem.y)
        self.canary_views = None if canaries is None else problem.feature_map(canaries.x, canaries.y)
        self.completed = None
        if self.loss is not None and self.loss.pad_width == 0:
            self.completed = self.loss.inputs(self.views)
            self.canary_completed = None if canaries is None else self.loss.inputs(self.canary_views)
        self.per_example_grad = vmap(vmap(grad(self._private_example_loss), in_dims=(None, 0, 0, 0)),
                                     in_dims=(0, 0, 0, 0))
        self.public_grad = vmap(grad(self._public_batch_loss), in_dims=(0, 0, 0, 0))

    # -- losses -------------------------------------------------------------------------------------
    def _public_term(self, params: Params, inputs: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        logits = self.model.forward(params, inputs)
        if self.loss is not None and self.loss.label_free and not self.recipe.public_reads_protected:
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
    def _gather(self, table: torch.Tensor, canary_rows: torch.Tensor | None, idx: torch.Tensor,
                is_canary: torch.Tensor) -> torch.Tensor:
        base = table[idx.clamp(max=self.n - 1)]
        if canary_rows is None:
            return base
        return torch.where(is_canary[..., None], canary_rows[:, None, :].to(base.dtype), base)

    def _public_inputs(self, idx: torch.Tensor, is_canary: torch.Tensor, step: int,
                       stream: streams.Stream) -> tuple[torch.Tensor, torch.Tensor]:
        """Model inputs and labels for the public loss on records ``idx`` (``[R, K]``)."""
        canary_x = None if self.canaries is None else self.canaries.x
        canary_y = None if self.canaries is None else self.canaries.y[:, None]
        y = self._gather(self.p.y[:, None], canary_y, idx, is_canary)[..., 0]
        if self.recipe.public_reads_protected:  # the faulty variant: the full record, protected columns too
            return self._gather(self.p.x, canary_x, idx, is_canary), y
        assert self.loss is not None
        if self.completed is not None:
            return self._gather(self.completed, self.canary_completed, idx, is_canary), y
        features = self._gather(self.views.features, None if self.canary_views is None
                                else self.canary_views.features, idx, is_canary)
        noise = streams.normal(self.keys, step, stream, idx.shape[1] * self.loss.pad_width, self.device)
        noise = noise.reshape(*idx.shape, self.loss.pad_width)
        return self.loss.inputs(PublicView(features, y), noise), y

    # -- the step -----------------------------------------------------------------------------------
    def private_part(self, params: Params, step: int) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Noisy clipped sum ``[R, P]`` and the Poisson batch (indices, validity, canary flags). Linear stacks
        clip by ghost norms (:mod:`fdp_audit.training.ghost`), other models from materialised gradients."""
        r = self.keys.shape[0]
        n_slots = self.n + (1 if self.canaries is not None else 0)
        idx, valid = streams.poisson_sample(self.keys, step, n_slots, self.rate, self.device)
        is_canary = idx == self.n
        if self.canaries is not None:
            valid = valid & ~(is_canary & ~self.canaries.in_private[:, None])
        is_canary = is_canary & valid
        batch = {"idx": idx, "valid": valid, "is_canary": is_canary}
        if idx.shape[1] == 0:
            flat = torch.zeros(r, self.model.n_parameters, device=self.device)
        else:
            x = self._gather(self.p.x, None if self.canaries is None else self.canaries.x, idx, is_canary)
            y = self._gather(self.p.y[:, None], None if self.canaries is None else self.canaries.y[:, None],
                             idx, is_canary)[..., 0]
            override = None
            if self.canaries is not None and self.canaries.private_gradient is not None:
                override = ghost.GradientOverride(is_canary, self.canaries.private_gradient)
            clip_norm = self.hyper.clip_norm if self.recipe.clip else None
            if ghost.supports(self.model):  # SPEC 6: norms from inner products, one re-weighted pass
                private_batch = ghost.PrivateBatch(x, y, valid, self._ghost_public_term(idx, is_canary, step))
                flat = ghost.clipped_private_sum(self.model, params, private_batch, clip_norm, override)
            else:
                public_inputs = x
                if self.recipe.private_loss == "decomposed":
                    public_inputs, _ = self._public_inputs(idx, is_canary, step, streams.Stream.PRIVATE_PAD)
                flat = self._materialised_sum(params, x, y, public_inputs, valid, clip_norm, override)
        if self.sigma > 0:
            flat = flat + self.sigma * streams.normal(self.keys, step, streams.Stream.NOISE,
                                                      flat.shape[1], self.device, flat.dtype)
        return flat, batch

    def _ghost_public_term(self, idx: torch.Tensor, is_canary: torch.Tensor, step: int) -> ghost.PublicTerm | None:
        """ℓ_pub∘Ψ of ℓ_priv for the fast path; an input split (mask, mean, label DP) makes the public inputs
        unnecessary."""
        if self.recipe.private_loss != "decomposed":
            return None
        reads_protected = self.recipe.public_reads_protected
        split = ghost.input_split(self.loss, reads_protected, self.model.n_inputs)
        inputs = None
        if split is None:
            inputs, _ = self._public_inputs(idx, is_canary, step, streams.Stream.PRIVATE_PAD)
        label_free = self.loss is not None and self.loss.label_free and not reads_protected
        return ghost.PublicTerm(inputs, label_free, split)

    def _materialised_sum(self, params: Params, x: torch.Tensor, y: torch.Tensor, public_inputs: torch.Tensor,
                          valid: torch.Tensor, clip_norm: float | None,
                          override: ghost.GradientOverride | None) -> torch.Tensor:
        """The clipped sum from per-example gradients ``[R, K, P]`` (any layer type)."""
        per_example = flatten(self.per_example_grad(params, x, y, public_inputs), lead=2)
        if override is not None:
            per_example = torch.where(override.mask[..., None],
                                      override.vectors[:, None, :].to(per_example.dtype), per_example)
        weights = valid.to(per_example.dtype)
        if clip_norm is not None:
            norms = per_example.norm(dim=-1)
            weights = weights * torch.clamp(clip_norm / norms.clamp_min(1e-12), max=1.0)
        return torch.einsum("rk,rkp->rp", weights, per_example)

    def public_part(self, params: Params, step: int, private_batch: dict[str, torch.Tensor] | None
                    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Public gradient ``[R, P]`` and how often each model's canary was in its public batch."""
        r = self.keys.shape[0]
        if private_batch is not None:  # shared batch (Proposition 3): the private Poisson batch
            idx, is_canary = private_batch["idx"], private_batch["is_canary"]
            weights = private_batch["valid"].to(self.p.x.dtype)
            denominator = self.expected_batch
        else:
            has = (self.canaries.in_public.long() if self.canaries is not None
                   else torch.zeros(r, dtype=torch.long, device=self.device))
            idx = streams.uniform_indices(self.keys, step, streams.Stream.PUBLIC_SAMPLE,
                                          self.hyper.public_batch_size, self.n + has, self.device)
            is_canary = idx == self.n
            weights = torch.ones(idx.shape, dtype=self.p.x.dtype, device=self.device)
            denominator = float(self.hyper.public_batch_size)
        counts = is_canary.sum(dim=1)
        gradient_canary = self.canaries is not None and self.canaries.public_gradient is not None
        if gradient_canary:
            weights = weights * ~is_canary
        inputs, y = self._public_inputs(idx, is_canary, step, streams.Stream.PUBLIC_PAD)
        if ghost.supports(self.model):  # one forward and backward pass, no per-model torch.func transform
            label_free = self.loss is not None and self.loss.label_free and not self.recipe.public_reads_protected
            flat = ghost.gradient_sum(self.model, params, inputs, y, weights, label_free)
        else:
            flat = flatten(self.public_grad(params, inputs, y, weights), lead=1)
        if gradient_canary:
            canary_grad = self.canaries.public_gradient
            if self.recipe.public_reads_protected:  # the full loss: ∇ℓ = ∇ℓ_pub∘Ψ + ∇ℓ_priv
                canary_grad = canary_grad + self.canaries.private_gradient
            flat = flat + counts[:, None].to(flat.dtype) * canary_grad.to(flat.dtype)
        return flat / denominator, counts


def _available_bytes(device: torch.device) -> int:
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return int(free)
    try:
        with open("/proc/meminfo") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return int(os.environ.get("FDP_AUDIT_MEMORY_BYTES", 4 << 30))


def bytes_per_model(problem: TrainingProblem, record_iterates: bool) -> int:
    """Peak memory one model adds to a chunk: per-example gradients (and their clipped copies) over the
    widest Poisson batch, activations, and the recorded iterates."""
    h = problem.hyper
    rate = min(1.0, h.sample_rate * problem.recipe.rate_factor)
    width = rate * problem.n + 6 * math.sqrt(max(rate * problem.n, 1)) + 16
    p = problem.model.n_parameters
    widths = problem.model.n_inputs + sum(problem.model.hidden) + problem.model.n_outputs
    batch = max(width, h.public_batch_size)
    per_step = 4 * (4 * width * p + 3 * batch * widths + 8 * p)
    return int(per_step + (8 * h.steps * p if record_iterates else 0))


def chunk_size_for(problem: TrainingProblem, record_iterates: bool, device: torch.device,
                   n_models: int, limit: int | None = None) -> int:
    """Models per chunk: what fits in a quarter of the available memory (the resource guard)."""
    per_model = bytes_per_model(problem, record_iterates)
    budget = _available_bytes(device) // 4
    fits = budget // max(per_model, 1)
    if fits < 1:
        raise BadInputError(
            f"one model needs about {per_model / 2**30:.1f} GiB for this configuration, more than a quarter "
            f"of the available {budget * 4 / 2**30:.1f} GiB; lower the sample rate, the model size or the "
            "steps recorded", "mechanism")
    return int(max(1, min(n_models, fits, limit or n_models)))


def train_models(problem: TrainingProblem, seed: int, model_indices: Sequence[int] | torch.Tensor,
                 canaries: Canaries | None = None, record_iterates: bool = False,
                 device: torch.device | str = "cpu", max_chunk: int | None = None,
                 progress: bool = False) -> Iterator[ChunkResult]:
    """Train one model per index, in memory-sized chunks, yielding each chunk when it is done.

    ``canaries`` (if given) has one row per entry of ``model_indices``. Results stream out chunk by chunk
    so that callers never hold all models at once.
    """
    device = torch.device(device)
    indices = torch.as_tensor(list(model_indices), dtype=torch.long)
    problem = problem.to(device)
    size = chunk_size_for(problem, record_iterates, device, len(indices), max_chunk)
    starts = range(0, len(indices), size)
    for start in tqdm(starts, desc="training chunks", disable=not progress or len(starts) < 2):
        rows = torch.arange(start, min(start + size, len(indices)))
        chunk_canaries = None
        if canaries is not None:
            chunk_canaries = Canaries(*(None if t is None else t.to(device) for t in (
                canaries.x, canaries.y, canaries.in_private, canaries.in_public,
                canaries.private_gradient, canaries.public_gradient))).take(rows.to(device))
        keys = streams.model_keys(seed, indices[rows])
        params, iterates = _train_chunk(problem, keys, chunk_canaries, record_iterates, device)
        yield ChunkResult(indices[rows], params, iterates)


def _train_chunk(problem: TrainingProblem, keys: torch.Tensor, canaries: Canaries | None,
                 record_iterates: bool, device: torch.device) -> tuple[Params, Iterates | None]:
    recipe, hyper, model = problem.recipe, problem.hyper, problem.model
    step = _Step(problem, keys, canaries, device)
    params = model.init(keys, device)
    r, p_count = keys.shape[0], model.n_parameters
    optimizer = Optimizer(hyper.optimizer)
    if hyper.public_pretrain_steps and problem.public_loss is not None:
        for t in range(hyper.public_pretrain_steps):
            g_pub, _ = step.public_part(params, PRETRAIN_STEP_OFFSET + t, None)
            lr = learning_rate(hyper.optimizer, t, hyper.public_pretrain_steps)
            params = _apply(optimizer, params, g_pub, lr, hyper, model)
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
    """Logits of every model on shared inputs: ``[R, N, n_outputs]``."""
    return vmap(model.forward, in_dims=(0, None))(params, x)


def accuracy(model: Model, params: Params, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Test accuracy of every model, ``[R]``."""
    logits = predict_logits(model, params, x)
    pred = (logits[..., 0] > 0).long() if logits.shape[-1] == 1 else logits.argmax(dim=-1)
    return (pred == y[None, :]).double().mean(dim=1)
