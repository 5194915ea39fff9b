"""Gradient canaries in the user's own training job (docs/one_run.md): one training, run by the user's script or by
``fdp-audit train`` on a config naming ``mechanism.training``, audited afterwards from its files.

The script adds a few lines to its training as written::

    canaries = GradientCanaries.from_config("audit.yaml", 10_000)   # secrets drawn from the config's seed
    train_set = canaries.add_to(train_set)                          # the canaries present are records of it
    model = canaries.wrap(model)                                    # the canary head after the model's logits
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)          # (as before, on the wrapped model)
    canaries.attach(optimizer)                                      # the release is read at every step
    ...                                                             # make_private, the training loop: unchanged
    canaries.save(model, "model.safetensors")                       # weights, release and manifest

and ``fdp-audit audit model.safetensors --config audit.yaml --canaries model.canaries.json`` judges the release
against the config's claim.

Canary i (:mod:`fdp_audit.auditing.canary_head`) is a marked record whose per-example gradient is ``g_i·e_i`` on
coordinate i of a head of ``M + M₀`` coordinates. Games: ``inclusion`` (add/remove, DP): canary i is in the data
set when its secret is 1, with ``g_i = K·C`` (K ``audit.canary_norm_factor``, C the clip norm the loop claims);
``value`` (replace-one, FDP): every canary is in, with ``g_i = K·C·u_{v_i}`` for its secret value v_i of k
(``u_v = 2v/(k−1) − 1``). A canary's raw norm K·C > C shows a loop that does not clip. The release is the head's
update at every step of every optimizer holding it (:class:`~fdp_audit.auditing.canary_head.UpdateObserver`), in
units of the noisy clipped sum when the expected batch is known (an Opacus ``DPOptimizer`` with an averaged
loss states it; otherwise 1: the guesser is scale-free), and the head's final values. The head moves only in those
steps in a training that releases what its claim describes; the manifest counts the gaps around them in which it
moved (an update by hand, steps before :meth:`GradientCanaries.attach`), and the audit calls any a violation.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset, TensorDataset

from fdp_audit.atomic_io import all_or_nothing, atomic_write_bytes
from fdp_audit.auditing.canary_head import AuditedModule, CanaryHead, CanaryInputs, UpdateObserver, unwrap
from fdp_audit.auditing.one_run.guesser import Release, candidate_pattern
from fdp_audit.auditing.one_run.manifest import (
    GAMES,
    MAX_CANARIES,
    RELEASE_METADATA_KEY,
    ReleaseSpool,
    canary_paths,
    default_game,
    draw_secrets,
    null_coordinates,
    write_manifest,
)
from fdp_audit.auditing.user_training import user_trainer
from fdp_audit.errors import BadInputError
from fdp_audit.training.run import build_problem

SCAN_BATCH = 4096


@dataclass(frozen=True)
class OneRunFiles:
    """What :meth:`GradientCanaries.save` wrote."""

    weights: Path
    release: Path
    manifest: Path
    steps: int
    unobserved_updates: int  # gaps around the observed steps in which the head changed (a correct loop: 0)


def _largest_magnitude(x: torch.Tensor) -> float:
    """max |x| without a temporary the size of ``x`` (a data set can be most of the memory)."""
    if not x.numel():
        return 0.0
    low, high = torch.aminmax(x)
    return max(-float(low), float(high))


def _scan_magnitude(dataset: Dataset) -> tuple[float, torch.Tensor, torch.Tensor]:
    """The largest magnitude of the data set's inputs, and its first input and label (shape and dtypes)."""
    if isinstance(dataset, TensorDataset):
        x, y = dataset.tensors[0], dataset.tensors[1]
        return _largest_magnitude(x), x[0], y[0]
    largest = 0.0
    for x, _ in DataLoader(dataset, batch_size=SCAN_BATCH):
        largest = max(largest, _largest_magnitude(torch.as_tensor(x)))
    x0, y0 = dataset[0]
    return largest, torch.as_tensor(x0), torch.as_tensor(y0)


class WithCanaries(Dataset):
    """A data set followed by the canary records present, without copying it. Indexed by an integer it returns
    one ``(x, y)``; by a slice, a sequence or a tensor of indices (``dataset[:]``, as a ``TensorDataset`` allows)
    the stacked inputs and labels of those records."""

    def __init__(self, data: Dataset, x: torch.Tensor, y: torch.Tensor):
        self.data, self.x, self.y, self.n = data, x, y, len(data)

    def __len__(self) -> int:
        return self.n + len(self.x)

    def __getitem__(self, index):
        if isinstance(index, int) or (isinstance(index, torch.Tensor) and index.dim() == 0):
            i = int(index) + (len(self) if int(index) < 0 else 0)
            if not 0 <= i < len(self):
                raise IndexError(f"index {int(index)} out of range for {len(self)} records")
            return self.data[i] if i < self.n else (self.x[i - self.n], self.y[i - self.n])
        rows = torch.arange(len(self))[index]
        records, canaries = rows[rows < self.n], rows[rows >= self.n] - self.n
        if isinstance(self.data, TensorDataset):
            xs, ys = self.data.tensors[0][records], self.data.tensors[1][records]
        else:
            pairs = [self.data[int(i)] for i in records]
            xs = torch.stack([torch.as_tensor(p[0]) for p in pairs]) if pairs else self.x[:0]
            ys = torch.stack([torch.as_tensor(p[1]) for p in pairs]) if pairs else self.y[:0]
        order = torch.argsort(torch.cat([torch.nonzero(rows < self.n).flatten(),
                                         torch.nonzero(rows >= self.n).flatten()]))
        return (torch.cat([xs, self.x[canaries].to(xs.device)])[order],
                torch.cat([ys, self.y[canaries].to(ys.device)])[order])


class GradientCanaries:
    """M gradient canaries for one training run by the user's code (module docstring; docs/one_run.md)."""

    def __init__(self, count: int, *, seed: int = 0, clip_norm: float = 1.0, norm_factor: float = 10.0,
                 game: str = "inclusion", k: int = 2, null: int | None = None,
                 expected_batch: float | None = None, spool_folder: str | Path | None = None):
        """Draw the canaries' secrets and their gradients: ``g_i = K·C`` for a present canary in the inclusion
        game, ``g_i = K·C·u_{v_i}`` with ``u_v = 2v/(k−1) − 1`` in the value game.

        Args:
            count: M, the number of canaries (1 … 100,000).
            seed: the seed their secrets are drawn from; the audit's config must state the same seed.
            clip_norm: the clip norm C the training claims; the canaries' raw norm is ``norm_factor·C``.
            norm_factor: K ≥ 1; K > 1 makes a loop that does not clip show it.
            game: ``inclusion`` (DP, add/remove) or ``value`` (FDP, replace-one).
            k: candidates per canary in the value game (2 for inclusion).
            null: M₀, the head's coordinates that only noise reaches (default ``min(M, 1000)``: enough to read the
                noise scale off, :data:`~fdp_audit.auditing.one_run.manifest.NULL_COORDINATES`).
            expected_batch: the loop's expected batch when its loss is averaged and it is not an Opacus
                ``DPOptimizer`` (which states it): releases are then in units of the noisy clipped sum.
            spool_folder: where the per-step release waits on disk until :meth:`save` (T·(M + M₀)·4 bytes, in
                anonymous temporary files; default: the system's temporary folder), so that the host memory it
                takes does not grow with the steps.

        Raises:
            BadInputError: a count, game, k, clip norm, norm factor or M₀ out of range.
        """
        if not isinstance(count, int) or not 1 <= count <= MAX_CANARIES:
            raise BadInputError(f"must be an integer between 1 and {MAX_CANARIES}", "count")
        if game not in GAMES or (game == "inclusion" and k != 2) or not 2 <= k <= 64:
            raise BadInputError("inclusion has k = 2; a protected value takes 2 <= k <= 64", "game")
        if not (math.isfinite(clip_norm) and clip_norm > 0 and math.isfinite(norm_factor) and norm_factor >= 1):
            raise BadInputError("clip_norm must be positive and norm_factor at least 1", "clip_norm")
        self.count, self.seed, self.game, self.k = count, int(seed), game, k
        self.null = null_coordinates(count) if null is None else int(null)
        if not 1 <= self.null <= MAX_CANARIES:
            raise BadInputError(f"must be between 1 and {MAX_CANARIES}", "null")
        self.magnitude = norm_factor * clip_norm
        self.secrets = draw_secrets(self.seed, count, k)
        if game == "inclusion":
            self.gradients = torch.full((count,), self.magnitude)
            self.present = torch.as_tensor(self.secrets == 1)
        else:
            self.gradients = torch.as_tensor(self.magnitude * candidate_pattern(game, k)[self.secrets],
                                             dtype=torch.float32)
            self.present = torch.ones(count, dtype=torch.bool)
        self.expected_batch, self.spool_folder = expected_batch, spool_folder
        self.inputs: CanaryInputs | None = None
        self.audited: AuditedModule | None = None
        self.observer: UpdateObserver | None = None

    @classmethod
    def from_config(cls, config: Any, count: int, game: str | None = None, k: int = 2) -> GradientCanaries:
        """Canaries for the training a config describes: its seed, clip norm and ``audit.canary_norm_factor``,
        and the game of its mechanism (value for FDP mechanisms, inclusion otherwise).

        Args:
            config: the config that will audit the training (a ``Config`` or a YAML path).
            count: M, the number of canaries.
            game: ``inclusion`` or ``value`` (default: by the mechanism).
            k: candidates per canary in the value game.

        Returns:
            The canaries, not yet added to a data set."""
        from fdp_audit.config import Config, load_config

        config = config if isinstance(config, Config) else load_config(config)
        mech = config.mechanism
        return cls(count, seed=config.seed, clip_norm=mech.clip_norm, norm_factor=config.audit.canary_norm_factor,
                   game=game or default_game(mech.name), k=k)

    # -- the three calls before training -------------------------------------------------------------------------

    def add_to(self, dataset: Dataset) -> WithCanaries:
        """The data set with the canaries that are present appended as ordinary ``(x, y)`` records, without a copy
        of the data (:class:`WithCanaries`: indexed as a ``TensorDataset`` is, so ``dataset[:]`` still works).
        Each canary's input is a marked record built on a value above every input magnitude of the data set, so
        that the head recognises it; its label is 0.

        Args:
            dataset: the training set, whose records are ``(x, y)`` pairs with floating-point inputs ``x``.

        Returns:
            The data set followed by the present canaries (those whose secret is 1 in the inclusion game; all of
            them in the value game).

        Raises:
            BadInputError: a data set whose inputs are not floating-point.
        """
        largest, x0, y0 = _scan_magnitude(dataset)
        if not torch.is_floating_point(x0):
            raise BadInputError(f"gradient canaries need floating-point inputs; the data set's are {x0.dtype}",
                                "dataset")
        self.inputs = CanaryInputs(self.count, tuple(x0.shape), CanaryInputs.base_above(largest))
        present = torch.nonzero(self.present).flatten()
        x = self.inputs.inputs(present, x0.dtype)
        y = torch.zeros(len(present), *y0.shape, dtype=y0.dtype)  # label 0 (canary_head.zero_logit_slope)
        return WithCanaries(dataset, x, y)

    def wrap(self, module: nn.Module) -> AuditedModule:
        """The module followed by the canary head (on the module's device). Call after :meth:`add_to`.

        The head has ``M + M₀`` coordinates: canary i's per-example gradient is ``g_i·e_i`` on coordinate i, and
        the M₀ null coordinates receive only the training's noise.

        Args:
            module: the user's model, whose logits the head follows.

        Returns:
            The wrapped module, to train (and to build the optimizer on) in place of ``module``.

        Raises:
            BadInputError: :meth:`add_to` was not called first.
        """
        if self.inputs is None:
            raise BadInputError("call add_to(dataset) before wrap(module): the canaries' inputs depend on the data",
                                "wrap")
        device = next((p.device for p in module.parameters()), torch.device("cpu"))
        head = CanaryHead(self.gradients, self.null).to(device)
        self.audited = AuditedModule(module, self.inputs, head)
        self.observer = UpdateObserver(head.weight, field="attach",
                                       spool=ReleaseSpool(self.count, self.null, self.spool_folder))
        return self.audited

    def attach(self, optimizer: torch.optim.Optimizer) -> None:
        """Read the release at every step of every optimizer that holds the head, from now until :meth:`save`
        (an Opacus ``DPOptimizer`` is read through the optimizer it wraps, when it really steps). The updates are
        read in units of the noisy clipped sum: multiplied by the expected batch when the loss is averaged (as a
        ``DPOptimizer`` states it, or ``expected_batch`` gave it), and as they are otherwise.

        Args:
            optimizer: the optimizer built on the wrapped module's parameters (or an Opacus ``DPOptimizer``
                around it).

        Raises:
            BadInputError: :meth:`wrap` was not called first, or the optimizer does not hold the canary head.
        """
        if self.observer is None:
            raise BadInputError("call wrap(module) before attach(optimizer)", "attach")
        inner = getattr(optimizer, "original_optimizer", optimizer)
        if not self.observer.holds_head(inner):
            raise BadInputError("the optimizer does not hold the canary head: build it on the wrapped module's "
                                "parameters (model = canaries.wrap(model) first)", "attach")
        batch = getattr(optimizer, "expected_batch_size", None)
        if batch and getattr(optimizer, "loss_reduction", "mean") == "mean":
            self.observer.scale = float(batch)
        elif getattr(optimizer, "loss_reduction", None) == "sum":
            self.observer.scale = 1.0
        elif self.expected_batch:
            self.observer.scale = float(self.expected_batch)
        self.observer.start()

    @contextlib.contextmanager
    def observing(self) -> Iterator[None]:
        """Read the release of every optimizer holding the head within the block (for code that builds its own
        optimizers, as a ``train(module, dataset, seed)`` function does).

        Returns:
            A context manager; the steps taken inside the ``with`` block are read.

        Raises:
            BadInputError: :meth:`wrap` was not called first.
        """
        if self.observer is None:
            raise BadInputError("call wrap(module) first", "observing")
        if self.expected_batch:
            self.observer.scale = float(self.expected_batch)
        with self.observer.active():
            yield

    # -- after training ------------------------------------------------------------------------------------------

    def release(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(updates [T, M], updates_null [T, M₀], final [M], final_null [M₀])`` observed so far (updates in the
        direction of the parameters' change, as :mod:`fdp_audit.auditing.one_run.guesser` reads them); refuses a
        training that never stepped an optimizer holding the head, or whose canaries never reached the module.

        Returns:
            ``updates`` ``[T, M]`` and ``updates_null`` ``[T, M₀]``, minus the update each of the T observed steps
            applied (``Δw/η + λ·w`` for plain SGD, minus the gradient held for other optimizers, times the update
            scale) on the canaries' and the null coordinates, and ``final`` ``[M]`` and ``final_null`` ``[M₀]``,
            the head's values now; float32 tensors on the CPU.

        Raises:
            BadInputError: no module was wrapped, no optimizer holding the head stepped, or present canaries
                never reached the module.
        """
        observer, audited = self._released()
        updates = -observer.releases  # the block's change, as the engine releases it: a step lowers the weight
        final = audited.head.weight.detach().float().cpu()
        return (updates[:, :self.count].contiguous(), updates[:, self.count:].contiguous(),
                final[:self.count].clone(), final[self.count:].clone())

    def _released(self) -> tuple[UpdateObserver, AuditedModule]:
        """The observer and the module of a training that released something (:meth:`release`'s refusals)."""
        if self.observer is None or self.audited is None:
            raise BadInputError("the canaries were never wrapped around a module", "save")
        if not self.observer.steps:
            raise BadInputError("no optimizer holding the canary head ever stepped while the canaries were attached: "
                                "nothing was released (attach the optimizer that trains the wrapped module)", "save")
        if bool(self.present.any()) and self.audited.marked == 0:
            raise BadInputError("the canaries never reached the module: the loop must feed the data set's inputs "
                                "to the wrapped module as they are (no transform, no dropped records)", "save")
        return self.observer, self.audited

    def guesser_release(self) -> Release:
        """What the training released about the canaries, as the one-run guesser reads it
        (:func:`fdp_audit.auditing.one_run.guesser.threat_scores`; the secrets are :attr:`secrets`).

        Returns:
            A ``Release`` of float64 arrays holding :meth:`release`'s four tensors.

        Raises:
            BadInputError: as :meth:`release`.
        """
        updates, updates_null, final, final_null = (t.double().numpy() for t in self.release())
        return Release(final, final_null, updates, updates_null)

    def save(self, module: nn.Module, path: str | Path) -> OneRunFiles:
        """Stop reading the release and write, together or not at all: the module's weights (safetensors, without
        the head; wrappers such as Opacus's are unwrapped), the release ``<stem>.canary-release.pt`` and the
        manifest ``<stem>.canaries.json`` (secrets, which the training knows: they follow from the config's seed;
        docs/one_run.md, "What the audit trusts").

        Args:
            module: the module :meth:`wrap` returned, or a wrapper around it (an Opacus ``GradSampleModule``).
            path: the weights file, ending in ``.safetensors``; the release and the manifest are written beside it.

        Returns:
            ``OneRunFiles``: the three paths written, the number of steps released, and the number of gaps in
            which the head changed outside the observed steps (0 for a loop that releases what its claim
            describes).

        Raises:
            BadInputError: a path not ending in ``.safetensors``, a module other than the wrapped one, or a
                release that :meth:`release` refuses.
        """
        path = Path(path)
        if path.suffix != ".safetensors":
            raise BadInputError("the weights are written as safetensors: give a path ending in .safetensors", "path")
        audited = unwrap(module)
        if not isinstance(audited, AuditedModule):
            audited = getattr(module, "module", None) if isinstance(module, nn.Module) else None
        if audited is not self.audited:
            raise BadInputError("save the module that wrap() returned (or the wrapper around it)", "module")
        if self.observer is not None:
            self.observer.stop()
        observer, _ = self._released()
        return self._write(path, audited.module, observer.flushed())

    @property
    def unobserved_updates(self) -> int:
        """In how many gaps before, between or after the optimizer steps read so far the head changed
        (:attr:`~fdp_audit.auditing.canary_head.UpdateObserver.unobserved_changes`): updates of the module that the
        release does not hold, each a violation of any claim about the released steps."""
        return 0 if self.observer is None else self.observer.unobserved_changes

    def _write(self, path: Path, module: nn.Module, spool: ReleaseSpool) -> OneRunFiles:
        """The release streamed from the spool (its digest then names it in the weights and the manifest), the
        weights and the manifest: all three land or none does."""
        from safetensors.torch import save

        release_path, manifest_path = canary_paths(path)
        final = self.audited.head.weight.detach().float().cpu()
        tensors = {name: value.detach().cpu().contiguous().clone() for name, value in module.state_dict().items()}
        with all_or_nothing():
            release_sha256 = spool.write(release_path, final[:self.count], final[self.count:], negate=True)
            weights = save(tensors, metadata={RELEASE_METADATA_KEY: release_sha256})
            manifest = {"kind": "gradient", "source": "user_loop", "game": self.game, "k": self.k,
                        "count": self.count, "null": self.null, "seed": self.seed, "magnitude": self.magnitude,
                        "steps": spool.steps, "unobserved_updates": self.unobserved_updates,
                        "update_scale": self.observer.scale, "secrets": [int(s) for s in self.secrets],
                        "release": release_path.name, "release_sha256": release_sha256,
                        "checkpoint_sha256": hashlib.sha256(weights).hexdigest()}
            atomic_write_bytes(path, weights)
            write_manifest(manifest_path, manifest)
        return OneRunFiles(path, release_path, manifest_path, spool.steps, manifest["unobserved_updates"])



def run_user_loop(config: Any, data: Any, count: int, seed: int | None = None, game: str | None = None, k: int = 2
                  ) -> tuple[GradientCanaries, nn.Module]:
    """One training of the loop a config names (``mechanism.training``) with ``count`` gradient canaries added
    to its data set S, as ``fdp-audit train CONFIG --canaries M`` runs it.

    Args:
        config: the config (its ``mechanism.training``, ``model.factory``, clip norm and seed).
        data: the prepared data (:func:`fdp_audit.data.prepare.prepare_data` of the config's data).
        count: M, the number of canaries.
        seed: the training's seed and the canaries' (default: the config's).
        game: ``inclusion`` or ``value`` (default: by the mechanism).
        k: candidates per canary in the value game.

    Returns:
        The canaries (:meth:`GradientCanaries.guesser_release` is what the training released about them; their
        ``secrets``) and the module the loop returned."""
    seed = config.seed if seed is None else seed
    trainer = user_trainer(config, build_problem(config, data))
    canaries = GradientCanaries.from_config(replace(config, seed=seed), count, game, k)
    canaries.expected_batch = trainer.update_scale
    dataset = canaries.add_to(TensorDataset(trainer.x, trainer.y))
    audited = canaries.wrap(trainer.fresh_module(seed))
    with canaries.observing():
        trained = trainer.train_once(audited, dataset, seed)
    trainer.returned_params(trained, audited)
    return canaries, trained
