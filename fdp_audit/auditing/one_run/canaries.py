"""One-run audits (docs/one_run.md): one training with M canaries, the files it writes, and the audit that reads
them.

``train_with_canaries`` trains once with M canaries of a kind and writes the weights, the manifest of the
canaries' secrets (:mod:`fdp_audit.auditing.one_run.manifest`) and, for gradient canaries, the release:

* ``gradient`` on the built-in engine: a canary block of the model (:class:`~fdp_audit.training.engine.CanaryBlock`:
  2M + M₀ parameters that the model's forward pass never reads, so no real record touches them; the last
  M₀ = min(M, 1,000) receive noise only, as in a user's loop:
  :func:`~fdp_audit.auditing.one_run.manifest.null_coordinates`). The checkpoint (``model.pt``) holds the model's
  weights and privacy metadata, exactly as ``fdp-audit train`` writes, and the digest of the release; the release
  (``model.canary-release.pt``) holds the block's final values and per-step updates (white box on the final weights
  and on every update);
* ``gradient`` on a config naming ``mechanism.training``: the user's loop, run once with the canary head
  (:mod:`fdp_audit.auditing.one_run.loop`, the same files as the Python API writes from the user's own script);
* ``crafted`` and ``record``: input canaries appended to the data (:mod:`fdp_audit.auditing.one_run.records`); the
  checkpoint is the release.

What the gradient canaries audit: the implementation of the private step itself — Poisson sampling, per-example
clipping, noise scale, normalisation — and the accountant's claim, under the white-box threat models (final
weights; every update). They do not exercise the model's own gradients, so they say nothing about leakage
through real records' features (crafted canaries and the game audit's final-model attacks do that).

Games. ``inclusion`` (DP, k = 2): canary i is in the private data set with probability ½ (add/remove relation;
its private gradient is ``a`` on its coordinate). ``value`` (FDP, k >= 2): every canary is in the data set and its
protected value, uniform over k candidates with Ψ held fixed, sets its private gradient to ``a·(2v/(k-1) - 1)``
(replace-one relation, sensitivity 2C after clipping); its public gradient is the same for every value. The
raw magnitude ``a`` is ``audit.canary_norm_factor`` times the clip norm, so a mechanism that skips clipping shows
it; the public gradient has the same magnitude ``a`` (Algorithm 1 neither clips nor noises the public loss, so a
large public gradient costs no privacy, and it makes a canary's public batches visible above the noise).
Secrets come from the GAME stream at a model index of their own.

The verdict is the one-run analysis's (:func:`fdp_audit.auditing.one_run.evaluation.judge_scores`). Two further
rules: a user's loop that released more optimizer steps than the claim accounts for violates the claim, whatever
the guesses (the release itself shows it: the claimed mechanism releases T updates); and an audit with
population copies, which cannot test noise, clipping or sampling, is INFORMATIONAL unless it finds a violation.
A PASS of crafted canaries says what it does not test (:data:`~fdp_audit.auditing.gate.FINAL_WEIGHTS_ONLY`: the
final weights hide a clipping or sampling fault under noise, and steps that sampled no canary leave no trace).
"""

from __future__ import annotations

import datetime
import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch.utils.data import TensorDataset

from fdp_audit.auditing.gate import FINAL_WEIGHTS_ONLY, release_beyond_claim
from fdp_audit.auditing.labels import audit_title
from fdp_audit.auditing.one_run.evaluation import judge_scores, section_comparisons
from fdp_audit.auditing.one_run.guesser import candidate_pattern, threat_scores
from fdp_audit.auditing.one_run.manifest import (
    EXTERNAL_DIGEST,
    GAMES,
    MAX_CANARIES,
    RELEASE_METADATA_KEY,
    canary_paths,
    check_bound_release,
    check_seed,
    default_game,
    draw_secrets,
    null_coordinates,
    read_manifest,
    read_release,
    relation_of,
    release_bytes,
    write_manifest,
    write_release,
)
from fdp_audit.auditing.one_run.records import (
    canary_records,
    candidate_columns,
    crafted_records,
    population_rows,
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
from fdp_audit.training.checkpoint import MAX_CHECKPOINT_BYTES, load_checkpoint, save_checkpoint
from fdp_audit.training.engine import BLOCK_KEY, CanaryBlock, TrainingProblem, accuracy, train_models
from fdp_audit.training.models import Params
from fdp_audit.training.run import build_problem, checkpoint_metadata, resolve_device

if TYPE_CHECKING:
    from fdp_audit.auditing.checkpoint_audit import Checkpoint

KINDS = ("gradient", "record", "crafted")
RELEASE_DIGEST_KEY = "canary_release_sha256"  # the checkpoint metadata entry binding the release
INFORMATIONAL = "INFORMATIONAL"


def _check_game(game: str, k: int, where: str) -> None:
    if game not in GAMES or (game == "inclusion" and k != 2) or not 2 <= k <= 64:
        raise BadInputError("inclusion has k = 2; a protected value takes 2 <= k <= 64", where)


def canary_block(game: str, k: int, secrets: np.ndarray, magnitude: float) -> CanaryBlock:
    """The engine's block for one model (module doc: private values, public values, presence).

    Args:
        game: ``"inclusion"`` or ``"value"``.
        k: the number of candidate values.
        secrets: the canaries' secrets, shape (M,).
        magnitude: the raw canary gradient ``a`` (``audit.canary_norm_factor`` times the clip norm).

    Returns:
        The block of one model: private values ``a`` (inclusion) or ``a·u_v``, public values ``a``, and presence
        (inclusion: secret 1; value: every canary), each of shape (1, M).
    """
    count = len(secrets)
    if game == "inclusion":
        private = torch.full((1, count), magnitude)
        present = torch.as_tensor(secrets == 1)[None]
    else:
        private = torch.as_tensor(magnitude * candidate_pattern(game, k)[secrets], dtype=torch.float32)[None]
        present = torch.ones(1, count, dtype=torch.bool)
    return CanaryBlock(private, torch.full((1, count), magnitude), present, null_coordinates(count))


@dataclass(frozen=True)
class CanaryTraining:
    """What one training with canaries wrote (:func:`train_with_canaries`; docs/one_run.md).

    Attributes:
        checkpoint: the trained weights' file.
        release: the recorded release of the gradient canaries' block; None for input canaries, whose release is
            the checkpoint itself.
        manifest: the canary manifest naming the canaries, the weights and the release.
        test_accuracy: the trained model's accuracy on the test split, in [0, 1]; None for the user's own loop.
        metadata: the training's privacy metadata, as the checkpoint records it.
    """

    checkpoint: Path
    release: Path | None  # input canaries: the checkpoint is the release
    manifest: Path
    test_accuracy: float | None
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


def train_with_canaries(config: Config, data: PreparedData, count: int, out: Path, seed: int | None = None,
                        game: str | None = None, k: int = 2, kind: str = "gradient") -> CanaryTraining:
    """Train once with ``count`` canaries of ``kind`` and write the weights, the manifest and (gradient canaries)
    the release (module doc). A config naming ``mechanism.training`` runs the user's loop once with gradient
    canaries and writes safetensors weights.

    Args:
        config: the validated configuration of the training.
        data: its prepared data.
        count: the number of canaries M, 1 … ``MAX_CANARIES``.
        out: the weights' path; the manifest and release are written beside it.
        seed: the training's seed (default the config's).
        game: ``"inclusion"`` or ``"value"`` (default: the mechanism's, :func:`~.manifest.default_game`).
        k: the number of candidate values.
        kind: ``"gradient"``, ``"record"`` or ``"crafted"``.

    Returns:
        The files written, the model's test accuracy and the checkpoint's metadata.

    Raises:
        BadInputError: a count, game, k or kind out of range, a mechanism that is not private, or input canaries
            for a user's training.
    """
    if not 1 <= count <= MAX_CANARIES:
        raise BadInputError(f"must be between 1 and {MAX_CANARIES}", "--canaries")
    mech = config.mechanism
    game = game or default_game(mech.name)
    _check_game(game, k, "--canary-values")
    if kind not in KINDS:
        raise BadInputError(f"unknown canary kind {kind!r}", "--canary-kind")
    if not MECHANISMS[mech.name].recipe.private:
        raise BadInputError("one-run audits need a private mechanism", "mechanism.name")
    seed = config.seed if seed is None else seed
    if mech.training is not None:
        if kind != "gradient":
            raise BadInputError("a user's training is audited in one run with gradient canaries", "--canary-kind")
        return _train_user_loop(config, data, count, out, seed, game, k)
    secrets = draw_secrets(seed, count, k)
    manifest = {"kind": kind, "game": game, "k": k, "count": count, "seed": seed, "mechanism": mech.name,
                "secrets": [int(s) for s in secrets]}
    extra = {}
    if kind == "gradient":
        problem, params, release, steps = _train_gradient_canaries(config, data, game, k, secrets, seed)
        release_path = canary_paths(out)[0]
        digest = hashlib.sha256(release).hexdigest()
        manifest.update({"null": null_coordinates(count), "magnitude": config.audit.canary_norm_factor * mech.clip_norm,
                         "release": release_path.name, "release_sha256": digest, "steps": steps})
        extra[RELEASE_DIGEST_KEY] = digest
    else:
        widened, inserted = _with_input_canaries(data, kind, game, k, secrets, seed)
        problem = build_problem(config, widened)
        (chunk,) = list(train_models(problem, seed, [0], device=resolve_device(config.device)))
        params = {name: v[0].detach().cpu() for name, v in chunk.params.items()}
        release_path = None
        manifest.update(inserted)
    metadata = {**checkpoint_metadata(config, data, problem, seed), **extra}
    manifest_path = canary_paths(out)[1]
    if release_path is not None:  # the release first, the manifest naming both last
        write_release(release_path, release)
    save_checkpoint(out, params, metadata)
    manifest["checkpoint_sha256"] = hashlib.sha256(out.read_bytes()).hexdigest()
    write_manifest(manifest_path, manifest)
    acc = accuracy(problem.model, {name: v[None] for name, v in params.items()}, torch.as_tensor(data.test.x),
                   torch.as_tensor(data.test.y))
    return CanaryTraining(out, release_path, manifest_path, float(acc[0]), metadata)


def _train_gradient_canaries(config: Config, data: PreparedData, game: str, k: int, secrets: np.ndarray, seed: int
                             ) -> tuple[TrainingProblem, Params, bytes, int]:
    """Train with a canary block: the model's parameters and the release (final block and per-step updates)."""
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
    release = release_bytes(updates[:, :count], updates[:, 2 * count:], final[:count], final[2 * count:],
                            updates[:, count:2 * count] if has_public else None)
    return problem, params, release, len(updates)


def _train_user_loop(config: Config, data: PreparedData, count: int, out: Path, seed: int, game: str, k: int
                     ) -> CanaryTraining:
    """One training of the user's loop with gradient canaries (:mod:`fdp_audit.auditing.one_run.loop`), its files
    written beside ``out`` (safetensors weights)."""
    from fdp_audit.auditing.one_run.loop import run_user_loop

    canaries, trained = run_user_loop(config, data, count, seed, game, k)
    files = canaries.save(trained, out if out.suffix == ".safetensors" else out.with_suffix(".safetensors"))
    metadata = {"mechanism": config.mechanism.name, "seed": seed, "steps": files.steps}
    return CanaryTraining(files.weights, files.release, files.manifest, None, metadata)


def _with_input_canaries(data: PreparedData, kind: str, game: str, k: int, secrets: np.ndarray, seed: int
                         ) -> tuple[PreparedData, dict[str, Any]]:
    """S with the input canaries that ``secrets`` insert (:mod:`fdp_audit.auditing.one_run.records`), and the manifest
    fields that say which (population copies: the rows and candidate columns; crafted: drawn from the seed)."""
    count = len(secrets)
    chosen = np.where(secrets == 1, 0, -1) if game == "inclusion" else secrets
    inserted = chosen >= 0
    if kind == "crafted":
        records, labels = crafted_records(data, seed, count, game, k)
        return with_records(data, records[np.flatnonzero(inserted), chosen[inserted]], labels[inserted]), {}
    if count > data.population.n_rows:
        raise BadInputError(f"record canaries copy population rows: at most {data.population.n_rows}", "--canaries")
    rows = population_rows(seed, data.population.n_rows, count)
    columns = candidate_columns(data, k)
    records = canary_records(data, rows, columns)
    widened = with_records(data, records[np.flatnonzero(inserted), chosen[inserted]],
                           data.population.y[rows][inserted])
    return widened, {"rows": [int(r) for r in rows], "candidates": [int(c) for c in columns],
                     "attribute": secret_group(data).feature}


def insert_record_canaries(config: Config, count: int, manifest_path: Path, game: str | None = None, k: int = 2,
                           kind: str = "crafted") -> TensorDataset:
    """For a training outside fdp-audit that keeps only its final weights: the config's data set S with ``count``
    input canaries inserted, as a ``TensorDataset`` of encoded records and labels to train on, and their manifest
    written to ``manifest_path``.

    Args:
        config: the config that will audit the weights (its data, seed and mechanism).
        count: the number of canaries.
        manifest_path: where the manifest (the secrets) is written.
        game: ``inclusion`` or ``value`` (default: by the mechanism).
        k: candidates per canary in the value game.
        kind: ``crafted`` (records a training without privacy memorises: the audit tests the mechanism) or
            ``record`` (copies of population rows: INFORMATIONAL unless violated).

    Returns:
        The data set to train on. Audit the trained weights with
        ``fdp-audit audit WEIGHTS --config CONFIG --canaries MANIFEST``.

    Raises:
        BadInputError: a kind other than crafted or record, a game or k out of range, or a count outside 1 …
            ``MAX_CANARIES`` (record canaries: at most the population's rows).
    """
    from fdp_audit.data.prepare import prepare_data

    if kind not in ("crafted", "record"):
        raise BadInputError("input canaries are crafted or record", "kind")
    data = prepare_data(config.data, config.seed)
    game = game or default_game(config.mechanism.name)
    _check_game(game, k, "k")
    limit = MAX_CANARIES if kind == "crafted" else min(MAX_CANARIES, data.population.n_rows)
    if not 1 <= count <= limit:
        raise BadInputError(f"must be between 1 and {limit}", "count")
    secrets = draw_secrets(config.seed, count, k)
    widened, inserted = _with_input_canaries(data, kind, game, k, secrets, config.seed)
    write_manifest(Path(manifest_path), {
        "kind": kind, "game": game, "k": k, "count": count, "seed": config.seed, "mechanism": config.mechanism.name,
        "secrets": [int(s) for s in secrets], **inserted, "checkpoint_sha256": EXTERNAL_DIGEST})
    x, y = widened.tensors()
    return TensorDataset(x, y)


# -- the audit ---------------------------------------------------------------------------------------------------

def weights_release_digest(path: Path) -> str | None:
    """The release digest a safetensors file's header names (:meth:`GradientCanaries.save`), if any.

    Args:
        path: the weights file.

    Returns:
        The hex digest, or None for a file that is not ``.safetensors`` or names none.

    Raises:
        BadInputError: a ``.safetensors`` file whose header cannot be read.
    """
    from safetensors import safe_open

    if path.suffix != ".safetensors":
        return None
    try:
        with safe_open(str(path), "pt") as weights:
            return (weights.metadata() or {}).get(RELEASE_METADATA_KEY)
    except Exception as err:  # noqa: BLE001 - safetensors raises its own error types for a malformed header
        raise BadInputError(f"{path.name} is not a readable safetensors file") from err


@dataclass(frozen=True)
class _Audited:
    """What the manifest is checked against: the weights' digest and seed, the release they name, the claim."""

    sha256: str
    seed: int
    bound_release: str | None
    mechanism: str
    claim: dict[str, Any]  # noise_multiplier, sample_rate, steps, delta


def _audited_of(checkpoint: Path, external: Checkpoint | None) -> _Audited:
    if external is None:
        raw = read_bounded(checkpoint, MAX_CHECKPOINT_BYTES, "checkpoint")
        _, metadata, _ = load_checkpoint(checkpoint)
        sha256, bound = hashlib.sha256(raw).hexdigest(), metadata.get(RELEASE_DIGEST_KEY)
    else:
        metadata, sha256, bound = external.metadata, external.sha256, weights_release_digest(external.path)
    return _Audited(sha256, metadata["seed"], bound, metadata["mechanism"],
                    {key: metadata[key] for key in ("noise_multiplier", "sample_rate", "steps", "delta")})


def _check_manifest(manifest: dict[str, Any], audited: _Audited, external: bool) -> None:
    """The manifest belongs to these weights: digest, seed, release, mechanism (:mod:`.manifest`)."""
    source = manifest.get("source", "engine")
    if not external and source == "user_loop":
        raise BadInputError("the weights of a user's loop are audited with the config: fdp-audit audit WEIGHTS "
                            "--config CONFIG --canaries MANIFEST", "manifest.source")
    if external and manifest["kind"] == "gradient" and source != "user_loop":
        raise BadInputError("this manifest belongs to an fdp-audit checkpoint: audit the checkpoint without --config",
                            "manifest.source")
    expected = EXTERNAL_DIGEST if external and manifest["kind"] != "gradient" else audited.sha256
    if manifest["checkpoint_sha256"] != expected:
        reason = ("the manifest belongs to other weights (digest differs)" if expected != EXTERNAL_DIGEST
                  else "input canaries inserted before training name no weights")
        raise BadInputError(reason, "manifest.checkpoint_sha256")
    check_seed(manifest, audited.seed, "config's" if external else "checkpoint's")
    if "mechanism" in manifest and manifest["mechanism"] != audited.mechanism:
        raise BadInputError(f"mechanism differs from the {'config' if external else 'checkpoint'}'s",
                            "manifest.mechanism")


def audit_with_canaries(checkpoint: Path, manifest_path: Path, alpha: float, family_search: bool = True,
                        external: Checkpoint | None = None) -> dict[str, Any]:
    """The one-run audit of weights: the guesser on the release (gradient canaries) or on the final model's losses
    (input canaries), judged against the claim. ``external``: weights trained outside fdp-audit (read with their
    config): input canaries inserted by :func:`insert_record_canaries`, or gradient canaries of a user's loop
    (:mod:`fdp_audit.auditing.one_run.loop`).

    Args:
        checkpoint: the weights' path.
        manifest_path: the canary manifest's path (the release is read beside it).
        alpha: the level of the verdict.
        family_search: also compute the empirical ε in the claimed mechanism's family.
        external: external weights with their config, or None for an fdp-audit checkpoint.

    Returns:
        The one-run section (:func:`~fdp_audit.auditing.one_run.evaluation.judge_scores`) with ``game``, ``kind``,
        ``magnitude`` and ``claim_parameters``, and for a user's loop its released steps.

    Raises:
        BadInputError: the manifest, the release or the weights are invalid or do not belong together.
    """
    manifest = read_manifest(manifest_path)
    audited = _audited_of(checkpoint, external)
    _check_manifest(manifest, audited, external is not None)
    game, k, kind = manifest["game"], manifest["k"], manifest["kind"]
    secrets = np.asarray(manifest["secrets"])
    if kind == "gradient":
        release = read_release(manifest_path.with_name(manifest["release"]), manifest)
        check_bound_release(manifest, audited.bound_release, "the weights were")
        threat = threat_scores(release, candidate_pattern(game, k))
    else:
        threat = {"final_model": _input_canary_scores(checkpoint, manifest, external)}
    name = MECHANISMS[audited.mechanism].claimed_as  # faulty ones claim a correct one
    parameters = {"mechanism": name, **audited.claim, "relation": relation_of(game)}
    claim = Claim.stated(name, parameters["noise_multiplier"], parameters["sample_rate"], parameters["steps"],
                         parameters["delta"]).one_run_curve(parameters["relation"])
    section = judge_scores(threat, secrets, claim, alpha, family_search, independent_canaries=kind == "gradient")
    section.update({"game": game, "kind": kind,
                    "magnitude": manifest.get("magnitude"), "claim_parameters": parameters})
    if manifest.get("source") == "user_loop":
        section["released_steps"], section["unobserved_updates"] = manifest["steps"], manifest["unobserved_updates"]
        beyond = release_beyond_claim(manifest["steps"], manifest["unobserved_updates"], parameters["steps"])
        if beyond:
            section.update(status="VIOLATION", explanation=beyond)
    if kind == "record":
        section["informational"] = True
        if section["status"] == "PASS":
            section.update(status=INFORMATIONAL, explanation=POPULATION_COPIES)
    elif kind == "crafted":
        section["final_weights_only"] = True
        if section["status"] == "PASS":
            section["explanation"] = f"{FINAL_WEIGHTS_ONLY} {section['explanation']}"
    return section


POPULATION_COPIES = ("record canaries copied from the population carry no signal about noise, clipping or sampling "
                     "(a model that generalises keeps nothing that singles them out), so no violation found with "
                     "them is not a pass: use crafted or gradient canaries to test the mechanism")


def _input_canary_scores(checkpoint: Path, manifest: dict[str, Any], external: Checkpoint | None = None
                         ) -> np.ndarray:
    """Input canaries: rebuild them from the checkpoint's data (its fingerprint checked) and the manifest's seed,
    and score the final model's candidates."""
    from fdp_audit.auditing.checkpoint_audit import checkpoint_data, read_checkpoint

    loaded = external or read_checkpoint(checkpoint)
    data = checkpoint_data(loaded)
    count, seed = manifest["count"], manifest["seed"]
    if manifest["kind"] == "crafted":
        records, labels = crafted_records(data, seed, count, manifest["game"], manifest["k"])
        return record_scores(loaded.model, loaded.params, manifest["game"], records, labels)
    group = secret_group(data)
    if manifest["attribute"] != group.feature:
        raise BadInputError(f"the checkpoint's secret attribute is {group.feature!r}", "manifest.attribute")
    if count > data.population.n_rows or manifest["rows"] != population_rows(seed, data.population.n_rows,
                                                                              count).tolist():
        raise BadInputError("are not the population rows drawn from the manifest's seed", "manifest.rows")
    columns = np.asarray(manifest["candidates"])
    if manifest["k"] > group.stop - group.start or columns.tolist() != candidate_columns(data, manifest["k"]).tolist():
        raise BadInputError("are not the attribute's most frequent categories", "manifest.candidates")
    rows = np.asarray(manifest["rows"])
    records = canary_records(data, rows, columns)
    return record_scores(loaded.model, loaded.params, manifest["game"], records, data.population.y[rows])


def steps_comparison(section: dict[str, Any], parameters: dict[str, Any]) -> list[dict[str, Any]]:
    """The gate's comparison of a user loop's release with the claimed steps (kind ``released_steps``): its
    optimizer steps and its updates outside them.

    Args:
        section: a one-run section (:func:`audit_with_canaries`).
        parameters: the claim's fields the gate reads.

    Returns:
        One comparison, or none when the section is not a user's loop's.
    """
    if "released_steps" not in section:
        return []
    return [{"id": "one-run/released-steps", "kind": "released_steps", "released_steps": section["released_steps"],
             "unobserved_updates": section["unobserved_updates"], **parameters}]


def claimed_user_config(config: Config) -> Config:
    """The config whose claim judges a user's loop: with ``integration: opacus`` and a training function, the claim's
    unstated parts read from the engine of one training (:func:`fdp_audit.integrations.opacus.claimed_config`).

    Args:
        config: the validated configuration.

    Returns:
        ``config`` itself, or with ``integration: opacus`` the config completed from the engine.

    Raises:
        BadInputError: ``integration: opacus`` without ``mechanism.training``.
    """
    mech = config.mechanism
    if mech.integration != "opacus":
        return config
    if mech.training is None:
        raise BadInputError("state the claim (noise_multiplier or target_epsilon, sample_rate, steps, clip_norm) in "
                            "the config: a finished training's engine cannot be read", "mechanism.integration")
    from fdp_audit.data.prepare import prepare_data
    from fdp_audit.integrations.opacus import claimed_config

    return claimed_config(config, prepare_data(config.data, config.seed))[0]


def one_run_results(checkpoint: Path, manifest_path: Path, alpha: float, command: str = "",
                    external: Checkpoint | None = None) -> dict[str, Any]:
    """results.json of a one-run audit: the verdict is the one-run section's (the f-DP test of the claim, the
    released steps of a user's loop); population copies are INFORMATIONAL unless violated.

    Args:
        checkpoint: the weights' path.
        manifest_path: the canary manifest's path.
        alpha: the level of the verdict.
        command: the command line recorded for reproduction.
        external: external weights with their config, or None for an fdp-audit checkpoint.

    Returns:
        The results document (JSON-ready; non-finite numbers as None).

    Raises:
        BadInputError: as :func:`audit_with_canaries`.
    """
    from fdp_audit.auditing.checkpoint_audit import read_checkpoint
    from fdp_audit.auditing.gate import judge
    from fdp_audit.auditing.provenance import versions
    from fdp_audit.json_numbers import finite_or_none

    section = audit_with_canaries(checkpoint, manifest_path, alpha, external=external)
    loaded = external or read_checkpoint(checkpoint)
    parameters = section["claim_parameters"]
    comparisons = section_comparisons(section, parameters) + steps_comparison(section, parameters)
    for flag in ("informational", "final_weights_only"):
        if section.get(flag):
            comparisons = [{**row, flag: True} for row in comparisons]
    verdict, _ = judge(comparisons, alpha)  # the same test at the same level as the section's: one verdict
    return finite_or_none({
        "schema_version": 1, "kind": "audit",
        "title": audit_title(loaded.config, "one-run audit"),
        "created": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "verdict": verdict, "mechanism": Claim.from_config(loaded.config).section(), "one_run": section,
        "comparisons": comparisons,
        "reproducibility": {"versions": versions(), "seed": loaded.metadata["seed"], "config": loaded.config.to_dict(),
                            "dataset": loaded.config.data.dataset,
                            "dataset_fingerprint": loaded.metadata["dataset_fingerprint"], "command": command,
                            "checkpoint": str(checkpoint), "manifest": str(manifest_path)},
    })
