"""Gradient canaries inserted at training time, the files a one-run training writes, and the audit that reads them.

``train_with_canaries`` trains the configured mechanism once with M gradient canaries on a canary block of the
model (:class:`~fdp_audit.training.engine.CanaryBlock`: 2M + M parameters that the model's forward pass never
reads, so no real record touches them; the last M receive noise only). It writes three files:

* the checkpoint (``model.pt``): the model's weights and privacy metadata, exactly as ``fdp-audit train`` writes;
* the *release* (``model.canary-release.pt``): what the training reveals about the canary block — its final
  values (white box on the final weights) and its per-step updates (white box on the released updates, as in
  federated or checkpointed training) — with no secret in it;
* the *manifest* (``model.canaries.json``): the game, the number of candidates k, the canary magnitude, the seed
  and every canary's secret, with SHA-256 digests binding it to the checkpoint and the release.

What the gradient canaries audit: the implementation of the private step itself — Poisson sampling, per-example
clipping, noise scale, normalisation — and the accountant's claim, under the white-box threat models (final
weights; every update). They do not exercise the model's own gradients, so they say nothing about leakage
through real records' features (record canaries and the game audit's final-model attacks do that).

Games. ``inclusion`` (DP, k = 2): canary i is in the private data set with probability ½ (add/remove relation;
its private gradient is ``a`` on its coordinate). ``value`` (FDP, k >= 2): every canary is in the data set and its
protected value, uniform over k candidates with Ψ held fixed, sets its private gradient to ``a·(2v/(k-1) - 1)``
(replace-one relation, sensitivity 2C after clipping); its public gradient is the same for every value. The
raw magnitude ``a`` is ``audit.canary_norm_factor`` times the clip norm, so a mechanism that skips clipping shows
it; the public gradient has the same magnitude ``a`` (Algorithm 1 neither clips nor noises the public loss, so a
large public gradient costs no privacy, and it makes a canary's public batches visible above the noise).
Secrets come from the GAME stream at a model index of their own.
"""

from __future__ import annotations

import datetime
import hashlib
import io
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch.utils.data import TensorDataset

from fdp_audit.atomic_io import atomic_write_bytes, atomic_write_text
from fdp_audit.audit.one_run.evaluation import judge_scores, mechanism_claim, section_comparisons
from fdp_audit.audit.one_run.guesser import Release, candidate_pattern, threat_scores
from fdp_audit.audit.one_run.records import (
    canary_records,
    candidate_columns,
    record_scores,
    secret_group,
    with_records,
)
from fdp_audit.bounded_read import read_bounded
from fdp_audit.claim import Claim
from fdp_audit.config import Config
from fdp_audit.data.prepare import PreparedData
from fdp_audit.errors import BadInputError
from fdp_audit.mechanisms import MECHANISMS
from fdp_audit.training import streams
from fdp_audit.training.checkpoint import MAX_CHECKPOINT_BYTES, load_checkpoint, load_torch_file, save_checkpoint
from fdp_audit.training.engine import BLOCK_KEY, CanaryBlock, TrainingProblem, accuracy, train_models
from fdp_audit.training.models import Params
from fdp_audit.training.run import build_problem, checkpoint_metadata, resolve_device

if TYPE_CHECKING:
    from fdp_audit.audit.checkpoint_audit import Checkpoint

MANIFEST_FORMAT = "fdp-audit canary manifest"
MANIFEST_VERSION = 1
RELEASE_VERSION = 1
SECRET_MODEL_INDEX = 40_000_000  # the GAME-stream index of one-run secrets, apart from every game's trials
MAX_CANARIES = 100_000
MAX_MANIFEST_BYTES = 16 << 20
GAMES = ("inclusion", "value")
KINDS = ("gradient", "record")
EXTERNAL_DIGEST = "external"  # the manifest of canaries inserted before the weights existed


def default_game(mechanism: str) -> str:
    """FDP mechanisms (ℓ_priv = ℓ - ℓ_pub∘Ψ) protect a protected value; the others membership."""
    return "value" if MECHANISMS[mechanism].recipe.private_loss == "decomposed" else "inclusion"


def relation_of(game: str) -> str:
    return "add-remove" if game == "inclusion" else "replace"


def canary_paths(checkpoint: Path) -> tuple[Path, Path]:
    """The release and manifest written beside ``checkpoint``."""
    return (checkpoint.with_name(checkpoint.stem + ".canary-release.pt"),
            checkpoint.with_name(checkpoint.stem + ".canaries.json"))


def draw_secrets(seed: int, count: int, k: int) -> np.ndarray:
    """``[count]`` secrets uniform on ``{0, …, k-1}`` from the GAME stream."""
    keys = streams.model_keys(seed, torch.tensor([SECRET_MODEL_INDEX]))
    u = streams.uniform(keys, 0, streams.Stream.GAME, count)[0].double().numpy()
    return np.minimum((u * k).astype(np.int64), k - 1)


def canary_block(game: str, k: int, secrets: np.ndarray, magnitude: float) -> CanaryBlock:
    """The engine's block for one model (module doc: private values, public values, presence)."""
    count = len(secrets)
    if game == "inclusion":
        private = torch.full((1, count), magnitude)
        present = torch.as_tensor(secrets == 1)[None]
    else:
        private = torch.as_tensor(magnitude * candidate_pattern(game, k)[secrets], dtype=torch.float32)[None]
        present = torch.ones(1, count, dtype=torch.bool)
    return CanaryBlock(private, torch.full((1, count), magnitude), present, count)


@dataclass(frozen=True)
class CanaryTraining:
    checkpoint: Path
    release: Path | None  # record canaries: the checkpoint is the release
    manifest: Path
    test_accuracy: float
    metadata: dict[str, Any]


class _BlockRecorder:
    """Collects the block's per-step updates of the private steps (canary and null coordinates)."""

    def __init__(self, count: int, pretrain_steps: int):
        self.count, self.pretrain, self.previous, self.updates = count, pretrain_steps, None, []

    def __call__(self, done: int, params: dict[str, torch.Tensor]) -> None:
        values = params[BLOCK_KEY][0].detach().cpu()  # private, public, then null coordinates
        if done > self.pretrain:
            self.updates.append(values - (self.previous if self.previous is not None else torch.zeros_like(values)))
        self.previous = values


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def train_with_canaries(config: Config, data: PreparedData, count: int, out: Path, seed: int | None = None,
                        game: str | None = None, k: int = 2, kind: str = "gradient") -> CanaryTraining:
    """Train once with ``count`` canaries of ``kind`` (``gradient``: a canary block, release written beside the
    checkpoint; ``record``: records appended to the data, the checkpoint is the release) and write the
    checkpoint and the manifest (module doc; :mod:`fdp_audit.audit.one_run.records`)."""
    if not 1 <= count <= MAX_CANARIES:
        raise BadInputError(f"must be between 1 and {MAX_CANARIES}", "--canaries")
    mech = config.mechanism
    game = game or default_game(mech.name)
    if game not in GAMES or (game == "inclusion" and k != 2) or not 2 <= k <= 64:
        raise BadInputError("inclusion has k = 2; a protected value takes 2 <= k <= 64", "--canary-values")
    if kind not in KINDS:
        raise BadInputError(f"unknown canary kind {kind!r}", "--canary-kind")
    if not MECHANISMS[mech.name].recipe.private:
        raise BadInputError("one-run audits need a private mechanism", "mechanism.name")
    seed = config.seed if seed is None else seed
    secrets = draw_secrets(seed, count, k)
    manifest = {"format": MANIFEST_FORMAT, "version": MANIFEST_VERSION, "kind": kind, "game": game, "k": k,
                "count": count, "seed": seed, "mechanism": mech.name, "secrets": [int(s) for s in secrets]}
    if kind == "gradient":
        problem, params, release = _train_gradient_canaries(config, data, game, k, secrets, out, seed)
        manifest.update({"null": count, "magnitude": config.audit.canary_norm_factor * mech.clip_norm,
                         "release": release.name, "release_sha256": _sha256(release)})
    else:
        if count > data.population.n_rows:
            raise BadInputError(f"record canaries copy population rows: at most {data.population.n_rows}",
                                "--canaries")
        widened, inserted = _with_record_canaries(data, game, k, secrets, seed)
        problem = build_problem(config, widened)
        (chunk,) = list(train_models(problem, seed, [0], device=resolve_device(config.device)))
        params = {name: v[0].detach().cpu() for name, v in chunk.params.items()}
        release = None
        manifest.update(inserted)
    metadata = checkpoint_metadata(config, data, problem, seed)
    save_checkpoint(out, params, metadata)
    manifest["checkpoint_sha256"] = _sha256(out)
    manifest_path = canary_paths(out)[1]
    atomic_write_text(manifest_path, json.dumps(manifest, indent=1))
    acc = accuracy(problem.model, {name: v[None] for name, v in params.items()}, torch.as_tensor(data.test.x),
                   torch.as_tensor(data.test.y))
    return CanaryTraining(out, release, manifest_path, float(acc[0]), metadata)


def _train_gradient_canaries(config: Config, data: PreparedData, game: str, k: int, secrets: np.ndarray, out: Path,
                             seed: int) -> tuple[TrainingProblem, Params, Path]:
    """Train with a canary block; write the release (final block and per-step updates) beside ``out``."""
    mech = config.mechanism
    count = len(secrets)
    problem = build_problem(config, data)
    block = canary_block(game, k, secrets, config.audit.canary_norm_factor * mech.clip_norm)
    recorder = _BlockRecorder(count, problem.hyper.public_pretrain_steps)
    (chunk,) = list(train_models(problem, seed, [0], device=resolve_device(config.device), on_step=recorder,
                                 canary_block=block))
    params = {name: v[0].detach().cpu() for name, v in chunk.params.items() if name != BLOCK_KEY}
    updates = torch.stack(recorder.updates) if recorder.updates else torch.zeros(0, block.size)
    has_public = MECHANISMS[mech.name].recipe.public_batch != "none"  # else the public coordinates are pure noise
    final = recorder.previous
    buffer = io.BytesIO()
    torch.save({"format_version": RELEASE_VERSION, "final": final[:count].clone(),
                "final_null": final[2 * count:].clone(), "updates": updates[:, :count].contiguous(),
                "updates_public": updates[:len(updates) if has_public else 0, count:2 * count].contiguous(),
                "updates_null": updates[:, 2 * count:].contiguous()}, buffer)
    release_path = canary_paths(out)[0]
    atomic_write_bytes(release_path, buffer.getvalue())
    return problem, params, release_path


def _with_record_canaries(data: PreparedData, game: str, k: int, secrets: np.ndarray, seed: int
                          ) -> tuple[PreparedData, dict[str, Any]]:
    """S with the record canaries that ``secrets`` insert (copies of population rows drawn by ``seed``; module
    doc of :mod:`fdp_audit.audit.one_run.records`), and the manifest fields that say which rows and values."""
    rows = np.sort(np.random.default_rng(seed).choice(data.population.n_rows, len(secrets), replace=False))
    columns = candidate_columns(data, k)
    records = canary_records(data, rows, columns)
    chosen = np.where(secrets == 1, 0, -1) if game == "inclusion" else secrets
    inserted = chosen >= 0
    widened = with_records(data, records[np.flatnonzero(inserted), chosen[inserted]],
                           data.population.y[rows][inserted])
    return widened, {"rows": [int(r) for r in rows], "candidates": [int(c) for c in columns],
                     "attribute": secret_group(data).feature}


def insert_record_canaries(config: Config, count: int, manifest_path: Path, game: str | None = None, k: int = 2
                           ) -> TensorDataset:
    """For training outside fdp-audit: the config's data set S with ``count`` record canaries inserted (module
    doc of :mod:`fdp_audit.audit.one_run.records`), as a ``TensorDataset`` of encoded records and labels to
    train on, and their manifest written to ``manifest_path``. Audit the trained weights with
    ``fdp-audit audit WEIGHTS --config CONFIG --canaries MANIFEST``."""
    from fdp_audit.data.prepare import prepare_data

    data = prepare_data(config.data, config.seed)
    game = game or default_game(config.mechanism.name)
    if game not in GAMES or (game == "inclusion" and k != 2) or not 2 <= k <= 64:
        raise BadInputError("inclusion has k = 2; a protected value takes 2 <= k <= 64", "k")
    if not 1 <= count <= min(MAX_CANARIES, data.population.n_rows):
        raise BadInputError(f"must be between 1 and {min(MAX_CANARIES, data.population.n_rows)} (population rows)",
                            "count")
    secrets = draw_secrets(config.seed, count, k)
    widened, inserted = _with_record_canaries(data, game, k, secrets, config.seed)
    manifest = {"format": MANIFEST_FORMAT, "version": MANIFEST_VERSION, "kind": "record", "game": game, "k": k,
                "count": count, "seed": config.seed, "mechanism": config.mechanism.name,
                "secrets": [int(s) for s in secrets], **inserted, "checkpoint_sha256": EXTERNAL_DIGEST}
    atomic_write_text(manifest_path, json.dumps(manifest, indent=1))
    x, y = widened.tensors()
    return TensorDataset(x, y)


# -- reading (untrusted input) -----------------------------------------------------------------------------------

def _field(manifest: dict[str, Any], key: str, kind: type, check=lambda v: True) -> Any:
    value = manifest.get(key)
    if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool or not check(value):
        raise BadInputError("missing or invalid", f"manifest.{key}")
    return value


def read_manifest(path: Path) -> dict[str, Any]:
    """Validate a canary manifest field by field (size-limited, JSON, types, ranges, secrets in range)."""
    try:
        manifest = json.loads(read_bounded(path, MAX_MANIFEST_BYTES, "canary manifest").decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as err:
        raise BadInputError(f"canary manifest {path.name} is not valid JSON") from err
    if not isinstance(manifest, dict) or manifest.get("format") != MANIFEST_FORMAT:
        raise BadInputError("not an fdp-audit canary manifest", "manifest.format")
    _field(manifest, "version", int, lambda v: v == MANIFEST_VERSION)
    kind = _field(manifest, "kind", str, lambda v: v in KINDS)
    game = _field(manifest, "game", str, lambda v: v in GAMES)
    k = _field(manifest, "k", int, lambda v: 2 <= v <= 64 and (game == "value" or v == 2))
    count = _field(manifest, "count", int, lambda v: 1 <= v <= MAX_CANARIES)
    _field(manifest, "seed", int)
    _field(manifest, "mechanism", str)
    _field(manifest, "checkpoint_sha256", str, lambda v: 0 < len(v) <= 255)
    if kind == "gradient":
        _field(manifest, "null", int, lambda v: 1 <= v <= MAX_CANARIES)
        _field(manifest, "magnitude", (int, float), lambda v: math.isfinite(v) and v > 0)
        for key in ("release", "release_sha256"):
            _field(manifest, key, str, lambda v: 0 < len(v) <= 255)
        if Path(manifest["release"]).name != manifest["release"]:
            raise BadInputError("must be a file name beside the manifest", "manifest.release")
    else:
        rows = _field(manifest, "rows", list, lambda v: len(v) == count)
        columns = _field(manifest, "candidates", list, lambda v: len(v) == k)
        _field(manifest, "attribute", str)
        for key, values in (("rows", rows), ("candidates", columns)):
            if not all(type(v) is int and v >= 0 for v in values) or len(set(values)) != len(values):
                raise BadInputError("must be distinct non-negative integers", f"manifest.{key}")
    secrets = _field(manifest, "secrets", list, lambda v: len(v) == count)
    if not all(type(s) is int and 0 <= s < k for s in secrets):
        raise BadInputError(f"every secret must be an integer in [0, {k})", "manifest.secrets")
    return manifest


def read_release(path: Path, manifest: dict[str, Any]) -> Release:
    """Load the release (tensors only), check its digest against the manifest and its shapes."""
    raw = read_bounded(path, MAX_CHECKPOINT_BYTES, "canary release")
    if hashlib.sha256(raw).hexdigest() != manifest["release_sha256"]:
        raise BadInputError("digest differs from the manifest's", "manifest.release_sha256")
    payload = load_torch_file(raw, f"canary release {path.name}")
    keys = {"format_version", "final", "final_null", "updates", "updates_public", "updates_null"}
    if not isinstance(payload, dict) or set(payload) != keys or payload["format_version"] != RELEASE_VERSION:
        raise BadInputError(f"canary release {path.name} does not have the fdp-audit layout")
    count, null = manifest["count"], manifest["null"]
    shapes = {"final": (count,), "final_null": (null,)}
    for name, shape in shapes.items():
        if not isinstance(payload[name], torch.Tensor) or tuple(payload[name].shape) != shape:
            raise BadInputError(f"expected shape {shape}", f"release.{name}")
    updates, updates_null = payload["updates"], payload["updates_null"]
    if not (isinstance(updates, torch.Tensor) and isinstance(updates_null, torch.Tensor) and updates.dim() == 2
            and updates_null.dim() == 2 and updates.shape == (updates_null.shape[0], count)
            and updates_null.shape[1] == null and isinstance(payload["updates_public"], torch.Tensor)
            and payload["updates_public"].shape in (updates.shape, (0, count))):
        raise BadInputError("updates and updates_null do not match the manifest", "release.updates")
    arrays = {name: payload[name].double().numpy() for name in keys - {"format_version"}}
    if not all(np.isfinite(a).all() for a in arrays.values()):
        raise BadInputError("non-finite values", "release")
    has_updates = arrays["updates"].shape[0] > 0
    public = arrays["updates_public"] if has_updates and len(arrays["updates_public"]) else None
    return Release(arrays["final"], arrays["final_null"], arrays["updates"] if has_updates else None,
                   arrays["updates_null"] if has_updates else None, public)


def audit_with_canaries(checkpoint: Path, manifest_path: Path, alpha: float, family_search: bool = True,
                        external: Checkpoint | None = None) -> dict[str, Any]:
    """The one-run audit of a checkpoint: the guesser on the release, judged against the checkpoint's claim.
    ``external``: weights trained outside fdp-audit (read with their config), whose record canaries were inserted
    by :func:`insert_record_canaries` before the checkpoint existed (the manifest names no digest)."""
    manifest = read_manifest(manifest_path)
    if external is None:
        raw = read_bounded(checkpoint, MAX_CHECKPOINT_BYTES, "checkpoint")
        if hashlib.sha256(raw).hexdigest() != manifest["checkpoint_sha256"]:
            raise BadInputError("the manifest belongs to another checkpoint (digest differs)",
                                "manifest.checkpoint_sha256")
        _, metadata, _ = load_checkpoint(checkpoint)
    else:
        if manifest["checkpoint_sha256"] != EXTERNAL_DIGEST or manifest["kind"] != "record":
            raise BadInputError("external weights are audited with the record canaries of insert_record_canaries",
                                "manifest.checkpoint_sha256")
        metadata = external.metadata
    if metadata["mechanism"] != manifest["mechanism"]:
        raise BadInputError("mechanism differs from the checkpoint's", "manifest.mechanism")
    game, k = manifest["game"], manifest["k"]
    secrets = np.asarray(manifest["secrets"])
    if manifest["kind"] == "gradient":
        release = read_release(manifest_path.with_name(manifest["release"]), manifest)
        threat = threat_scores(release, candidate_pattern(game, k))
    else:
        threat = {"final_model": _record_release_scores(checkpoint, manifest, external)}
    name = MECHANISMS[metadata["mechanism"]].claimed_as  # faulty ones claim a correct one
    parameters = {"mechanism": name, "noise_multiplier": metadata["noise_multiplier"],
                  "sample_rate": metadata["sample_rate"], "steps": metadata["steps"], "delta": metadata["delta"],
                  "relation": relation_of(game)}
    claim = mechanism_claim(name, parameters["noise_multiplier"], parameters["sample_rate"], parameters["steps"],
                            parameters["delta"], parameters["relation"])
    section = judge_scores(threat, secrets, claim, alpha, family_search)
    section.update({"game": game, "kind": manifest["kind"],
                    "magnitude": manifest.get("magnitude"), "claim_parameters": parameters})
    return section


def _record_release_scores(checkpoint: Path, manifest: dict[str, Any], external: Checkpoint | None = None
                           ) -> np.ndarray:
    """Record canaries: rebuild them from the checkpoint's data (its fingerprint checked) and score the final
    model's candidates."""
    from fdp_audit.audit.checkpoint_audit import checkpoint_data, read_checkpoint

    loaded = external or read_checkpoint(checkpoint)
    data = checkpoint_data(loaded)
    group = secret_group(data)
    if manifest["attribute"] != group.feature:
        raise BadInputError(f"the checkpoint's secret attribute is {group.feature!r}", "manifest.attribute")
    rows, columns = np.asarray(manifest["rows"]), np.asarray(manifest["candidates"])
    if rows.max() >= data.population.n_rows or columns.max() >= group.stop - group.start:
        raise BadInputError("rows or candidates out of range for the checkpoint's data", "manifest.rows")
    records = canary_records(data, rows, columns)
    return record_scores(loaded.model, loaded.params, manifest["game"], records, data.population.y[rows])


def one_run_results(checkpoint: Path, manifest_path: Path, alpha: float, command: str = "",
                    external: Checkpoint | None = None) -> dict[str, Any]:
    """results.json of a one-run audit: the verdict is the one-run section's (the f-DP test of the claim)."""
    from fdp_audit.audit.checkpoint_audit import read_checkpoint
    from fdp_audit.audit.gate import judge
    from fdp_audit.audit.provenance import versions
    from fdp_audit.json_numbers import finite_or_none

    section = audit_with_canaries(checkpoint, manifest_path, alpha, external=external)
    loaded = external or read_checkpoint(checkpoint)
    comparisons = section_comparisons(section, section["claim_parameters"])
    verdict, _ = judge(comparisons, alpha)  # the same test at the same level as the section's: one verdict
    return finite_or_none({
        "schema_version": 1, "kind": "audit",
        "title": loaded.config.report.title or f"{loaded.config.name} (one-run audit)",
        "created": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "verdict": verdict, "mechanism": Claim.from_config(loaded.config).section(), "one_run": section,
        "comparisons": comparisons,
        "reproducibility": {"versions": versions(), "seed": loaded.metadata["seed"], "config": loaded.config.to_dict(),
                            "dataset": loaded.config.data.dataset,
                            "dataset_fingerprint": loaded.metadata["dataset_fingerprint"], "command": command,
                            "checkpoint": str(checkpoint), "manifest": str(manifest_path)},
    })
