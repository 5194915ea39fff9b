"""The files of a one-run audit (docs/one_run.md): the *manifest* of the canaries and their secrets, and the
*release* of gradient canaries. Both are untrusted input when read back.

The manifest binds the audit's inputs together, so that each of them can only be the one it was written with:

* the secrets are drawn from the manifest's seed (:func:`draw_secrets`), so they are drawn again and compared;
  an edited secret or seed is refused, and the seed must be the one of the training (a checkpoint's metadata,
  or the config of weights trained outside fdp-audit);
* SHA-256 digests name the weights (``checkpoint_sha256``) and the release (``release_sha256``), and the weights
  name the release's digest too (a checkpoint's metadata, a safetensors file's header), so a release swapped in
  with a re-digested manifest does not match the weights;
* with ``FDP_AUDIT_HMAC_KEY`` set, the manifest carries an HMAC-SHA256 of its content under that key (``mac``)
  and is read back only when it matches, as results files are (:mod:`fdp_audit.auditing.integrity`): without the
  key nobody can write a manifest that verifies, re-digested or not.

JSON with a repeated key is refused (a reader could take either value).
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import torch

from fdp_audit.accounting.events import Relation
from fdp_audit.atomic_io import atomic_write, atomic_write_bytes, atomic_write_text
from fdp_audit.auditing.integrity import HMAC_KEY_VARIABLE, hmac_key, keyed_digest, same_digest
from fdp_audit.auditing.one_run.guesser import Release
from fdp_audit.bounded_read import bounded_json_integer, read_bounded
from fdp_audit.errors import BadInputError
from fdp_audit.mechanisms import MECHANISMS
from fdp_audit.training import streams
from fdp_audit.training.checkpoint import MAX_CHECKPOINT_BYTES, load_torch_file

MANIFEST_FORMAT = "fdp-audit canary manifest"
# version 1: written before the manifest bound the release into the weights and the steps; version 2: before a
# user's loop counted the head's changes outside the optimizer steps (``unobserved_updates``)
MANIFEST_VERSION = 3
READ_VERSIONS = (1, 2, 3)
# release version 1: one torch.save pickle of the whole release (still read); version 2: safetensors, whose layout
# is known once T is, so that a training can keep its per-step release on disk and write the file at the end
RELEASE_VERSION = 2
SECRET_MODEL_INDEX = 40_000_000  # the GAME-stream index of one-run secrets, apart from every game's trials
MAX_CANARIES = 100_000
MAX_MANIFEST_BYTES = 16 << 20
GAMES = ("inclusion", "value")
KINDS = ("gradient", "record", "crafted")  # record: copies of population rows; crafted: records made to be memorised
SOURCES = ("engine", "user_loop")  # who trained with gradient canaries: fdp-audit's engine or the user's own loop
EXTERNAL_DIGEST = "external"  # the manifest of input canaries inserted before the weights existed
RELEASE_METADATA_KEY = "fdp_audit_canary_release_sha256"  # a safetensors header entry binding weights to a release
RELEASE_KEYS = {"format_version", "final", "final_null", "updates", "updates_public", "updates_null"}
RELEASE_TENSORS = ("final", "final_null", "updates", "updates_null", "updates_public")  # their order in the file
SPOOL_CHUNK_BYTES = 8 << 20  # what a spooled release is copied in: the host memory it needs, whatever T is
# The guesser reads the noise scale off the null coordinates, pooled over the steps when it is constant (relative
# error 1/sqrt(2·T·M₀)); a step's own spread, kept for a noise schedule, is off by 1/sqrt(2·M₀), 2 % at 1,000
# (docs/one_run.md, "The analysis"). The right guesses on simulated releases match those with M₀ = M
# (tests/auditing/one_run/test_loop.py). More would only add B·M₀ numbers to every step's per-example gradients (a
# user's loop) or noise draws (the engine).
NULL_COORDINATES = 1_000


def null_coordinates(count: int) -> int:
    """M₀, the null coordinates of M = ``count`` gradient canaries by default, in a user's loop and in the engine
    alike: ``min(M, NULL_COORDINATES)``.

    Args:
        count: M, the number of gradient canaries.

    Returns:
        M₀, the head's or block's coordinates that only the mechanism's noise reaches.
    """
    return min(count, NULL_COORDINATES)


def draw_secrets(seed: int, count: int, k: int) -> np.ndarray:
    """``[count]`` secrets uniform on ``{0, …, k-1}`` from the GAME stream.

    Args:
        seed: the training's seed (the manifest's ``seed``).
        count: the number of canaries.
        k: the number of values a secret takes (2 for inclusion).

    Returns:
        The secrets, int64 array of shape (count,).
    """
    keys = streams.model_keys(seed, torch.tensor([SECRET_MODEL_INDEX]))
    u = streams.uniform(keys, 0, streams.Stream.GAME, count)[0].double().numpy()
    return np.minimum((u * k).astype(np.int64), k - 1)


def default_game(mechanism: str) -> str:
    """FDP mechanisms (ℓ_priv = ℓ - ℓ_pub∘Ψ) protect a protected value; the others membership.

    Args:
        mechanism: a registered mechanism's name.

    Returns:
        ``"value"`` or ``"inclusion"``.
    """
    return "value" if MECHANISMS[mechanism].recipe.private_loss == "decomposed" else "inclusion"


def relation_of(game: str) -> str:
    """The neighbouring relation a one-run game's claim is stated under.

    Args:
        game: ``"inclusion"`` or ``"value"``.

    Returns:
        ``Relation.ADD_REMOVE`` for inclusion, ``Relation.REPLACE`` for a protected value.
    """
    return Relation.ADD_REMOVE if game == "inclusion" else Relation.REPLACE


def canary_paths(weights: Path) -> tuple[Path, Path]:
    """The release and manifest written beside ``weights``.

    Args:
        weights: the path of the trained weights.

    Returns:
        ``(release, manifest)``: ``<stem>.canary-release.pt`` and ``<stem>.canaries.json`` in the weights' folder.
    """
    return (weights.with_name(weights.stem + ".canary-release.pt"),
            weights.with_name(weights.stem + ".canaries.json"))


def _body(manifest: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in manifest.items() if key != "mac"}


def manifest_text(manifest: dict[str, Any]) -> str:
    """The manifest's JSON, with its MAC under ``FDP_AUDIT_HMAC_KEY`` when the key is set.

    Args:
        manifest: the manifest's fields (a ``mac`` among them is replaced).

    Returns:
        The JSON text, with ``format`` and ``version`` first.
    """
    body = {"format": MANIFEST_FORMAT, "version": MANIFEST_VERSION, **_body(manifest)}
    if hmac_key() is not None:
        body["mac"] = keyed_digest(_body(body))
    return json.dumps(body, indent=1)


def write_manifest(path: Path, manifest: dict[str, Any]) -> Path:
    """Write a manifest atomically (:func:`manifest_text`).

    Args:
        path: where to write it.
        manifest: the manifest's fields.

    Returns:
        ``path``.
    """
    return atomic_write_text(path, manifest_text(manifest))


def _release_header(shapes: dict[str, tuple[int, ...]]) -> bytes:
    """The safetensors header of a release: float32 tensors of these shapes, laid out in this order, and the
    release's format version; padded to 8 bytes as the safetensors library writes it."""
    entries: dict[str, Any] = {"__metadata__": {"format_version": str(RELEASE_VERSION)}}
    offset = 0
    for name, shape in shapes.items():
        size = 4 * math.prod(shape)
        entries[name] = {"dtype": "F32", "shape": list(shape), "data_offsets": [offset, offset + size]}
        offset += size
    text = json.dumps(entries, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return len(text).to_bytes(8, "little") + text


def _float_bytes(tensor: torch.Tensor) -> bytes:
    return tensor.detach().float().cpu().contiguous().numpy().tobytes()


def release_bytes(updates: torch.Tensor, updates_null: torch.Tensor, final: torch.Tensor, final_null: torch.Tensor,
                  updates_public: torch.Tensor | None = None) -> bytes:
    """A release file's content: the canary block's per-step updates (``[T, M]``, ``[T, M₀]``), its final values
    and, with a public loss, the canaries' public coordinates per step. No secret is in it.

    Args:
        updates: the canary coordinates' update per step, shape (T, M).
        updates_null: the null coordinates' update per step, shape (T, M₀).
        final: the canary coordinates' final values, shape (M,).
        final_null: the null coordinates' final values, shape (M₀,).
        updates_public: the canaries' public coordinates per step, shape (T, M), or None without a public loss.

    Returns:
        The release's safetensors bytes (float32 tensors, :data:`RELEASE_TENSORS` in order).
    """
    public = torch.zeros(0, updates.shape[1]) if updates_public is None else updates_public
    tensors = dict(zip(RELEASE_TENSORS, (final, final_null, updates, updates_null, public), strict=True))
    return (_release_header({name: tuple(t.shape) for name, t in tensors.items()})
            + b"".join(_float_bytes(t) for t in tensors.values()))


class ReleaseSpool:
    """A training's per-step release of M canary and M₀ null coordinates, kept in two anonymous temporary files
    while it runs, so that its host memory does not grow with the steps T (in memory it would take
    T·(M + M₀)·4 bytes: 4.4 GB for 10,000 canaries over 100,000 steps); :meth:`write` copies it into the release
    file, in chunks of :data:`SPOOL_CHUNK_BYTES`, with the same bytes as :func:`release_bytes` gives."""

    def __init__(self, count: int, null: int, folder: str | Path | None = None):
        """Open the spool.

        Args:
            count: M, the canary coordinates of each step.
            null: M₀, the null coordinates of each step.
            folder: where the temporary files are made (default: the system's temporary folder); they have no
                name and disappear when closed or when the process ends.
        """
        self.count, self.null, self.steps = count, null, 0
        self._files = [tempfile.TemporaryFile(dir=folder) for _ in range(2)]

    def append(self, rows: torch.Tensor) -> None:
        """Add steps.

        Args:
            rows: ``[F, M + M₀]`` the updates of F steps, canary coordinates first.
        """
        if rows.dim() != 2 or rows.shape[1] != self.count + self.null:
            raise ValueError(f"expected rows of {self.count + self.null} values, got shape {tuple(rows.shape)}")
        # row by row, from views of the rows: a copy of each part per chunk would let the allocator's heap grow
        # (glibc raises its mmap threshold after freeing a large block, and reuses such blocks poorly)
        values = rows.detach().float().cpu().contiguous().numpy()
        for handle, (start, stop) in zip(self._files, ((0, self.count), (self.count, None)), strict=True):
            handle.seek(0, io.SEEK_END)
            for row in values:
                handle.write(row[start:stop])
        self.steps += len(rows)

    def _chunks(self, which: int, negate: bool) -> Iterator[np.ndarray]:
        """The spooled values of one part, in one reused buffer of about :data:`SPOOL_CHUNK_BYTES`."""
        width = (self.count, self.null)[which]
        buffer = np.empty(max(1, SPOOL_CHUNK_BYTES // (4 * width)) * width, np.float32)
        handle = self._files[which]
        handle.seek(0)
        while read := handle.readinto(memoryview(buffer).cast("B")):
            block = buffer[:read // 4]
            yield np.negative(block, out=block) if negate else block

    def rows(self) -> torch.Tensor:
        """Every step read back into memory (for a caller that wants them there; :meth:`write` does not).

        Returns:
            ``[T, M + M₀]`` float32 on the host.
        """
        parts = [np.concatenate([np.zeros(0, np.float32), *(block.copy() for block in self._chunks(which, False))])
                 .reshape(self.steps, width) for which, width in enumerate((self.count, self.null))]
        return torch.from_numpy(np.concatenate(parts, axis=1))

    def write(self, path: Path, final: torch.Tensor, final_null: torch.Tensor, negate: bool = False) -> str:
        """Write the release file atomically (:func:`fdp_audit.atomic_io.atomic_write`: inside
        :func:`~fdp_audit.atomic_io.all_or_nothing` it lands with the other outputs or not at all).

        Args:
            path: the release file.
            final: the canary coordinates' final values, shape (M,).
            final_null: the null coordinates' final values, shape (M₀,).
            negate: write every spooled update with its sign flipped (a release counts the parameters' change).

        Returns:
            The hex SHA-256 of what was written.
        """
        digest = hashlib.sha256()
        shapes = {"final": (self.count,), "final_null": (self.null,), "updates": (self.steps, self.count),
                  "updates_null": (self.steps, self.null), "updates_public": (0, self.count)}

        def pieces() -> Iterator[bytes | np.ndarray]:
            yield _release_header(shapes)
            yield _float_bytes(final)
            yield _float_bytes(final_null)
            yield from self._chunks(0, negate)
            yield from self._chunks(1, negate)

        def write(handle: BinaryIO) -> None:
            for piece in pieces():
                digest.update(piece)
                handle.write(piece)

        atomic_write(path, write)
        return digest.hexdigest()

    def close(self) -> None:
        """Remove the temporary files."""
        for handle in self._files:
            handle.close()


def write_release(path: Path, content: bytes) -> str:
    """Write a release atomically; its SHA-256.

    Args:
        path: where to write it.
        content: the release's bytes (:func:`release_bytes`).

    Returns:
        The hex SHA-256 of ``content``.
    """
    atomic_write_bytes(path, content)
    return hashlib.sha256(content).hexdigest()


# -- reading (untrusted input) -----------------------------------------------------------------------------------

def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    mapping: dict[str, Any] = {}
    for key, value in pairs:
        if key in mapping:
            raise BadInputError(f"the key {key!r} appears twice", "manifest")
        mapping[key] = value
    return mapping


def _field(manifest: dict[str, Any], key: str, kind: type | tuple[type, ...], check=lambda v: True) -> Any:
    value = manifest.get(key)
    if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool or not check(value):
        raise BadInputError("missing or invalid", f"manifest.{key}")
    return value


def _digest(value: object) -> bool:
    return 0 < len(value) <= 255


def read_manifest(path: Path) -> dict[str, Any]:
    """Validate a canary manifest (size-limited, JSON without repeated keys, types, ranges, its MAC when the key is
    set, and the secrets drawn again from its seed).

    Args:
        path: the manifest file.

    Returns:
        The manifest's fields.

    Raises:
        BadInputError: naming the first field (``manifest.<key>``) that is missing, invalid, edited or unsigned.
    """
    try:
        manifest = json.loads(read_bounded(path, MAX_MANIFEST_BYTES, "canary manifest").decode("utf-8"),
                              object_pairs_hook=_unique_keys, parse_int=bounded_json_integer)
    except (UnicodeDecodeError, ValueError, RecursionError) as err:
        raise BadInputError(f"canary manifest {path.name} is not valid JSON") from err
    if not isinstance(manifest, dict) or manifest.get("format") != MANIFEST_FORMAT:
        raise BadInputError("not an fdp-audit canary manifest", "manifest.format")
    _check_mac(manifest)
    version = _field(manifest, "version", int, lambda v: v in READ_VERSIONS)
    kind = _field(manifest, "kind", str, lambda v: v in KINDS)
    game = _field(manifest, "game", str, lambda v: v in GAMES)
    k = _field(manifest, "k", int, lambda v: 2 <= v <= 64 and (game == "value" or v == 2))
    count = _field(manifest, "count", int, lambda v: 1 <= v <= MAX_CANARIES)
    seed = _field(manifest, "seed", int, lambda v: 0 <= v < 2 ** 63)
    _field(manifest, "checkpoint_sha256", str, _digest)
    source = manifest.get("source", "engine")
    if kind == "gradient":
        if source not in SOURCES:
            raise BadInputError(f"must be one of {', '.join(SOURCES)}", "manifest.source")
        _field(manifest, "null", int, lambda v: 1 <= v <= MAX_CANARIES)
        _field(manifest, "magnitude", (int, float), lambda v: math.isfinite(v) and v > 0)
        for key in ("release", "release_sha256"):
            _field(manifest, key, str, _digest)
        if Path(manifest["release"]).name != manifest["release"]:
            raise BadInputError("must be a file name beside the manifest", "manifest.release")
        if version >= 2:
            _field(manifest, "steps", int, lambda v: 0 <= v <= 10 ** 8)
        if source == "user_loop":
            if version < 3:
                raise BadInputError("written before fdp-audit checked that the canary head moves only in the released "
                                    "optimizer steps, so updates made outside them would go unseen: save the "
                                    "training again with this version", "manifest.version")
            _field(manifest, "unobserved_updates", int, lambda v: 0 <= v <= 10 ** 8)
    if source != "user_loop":
        _field(manifest, "mechanism", str)
    if kind == "record":
        rows = _field(manifest, "rows", list, lambda v: len(v) == count)
        columns = _field(manifest, "candidates", list, lambda v: len(v) == k)
        _field(manifest, "attribute", str)
        for key, values in (("rows", rows), ("candidates", columns)):
            if not all(type(v) is int and v >= 0 for v in values) or len(set(values)) != len(values):
                raise BadInputError("must be distinct non-negative integers", f"manifest.{key}")
    secrets = _field(manifest, "secrets", list, lambda v: len(v) == count)
    if not all(type(s) is int and 0 <= s < k for s in secrets):
        raise BadInputError(f"every secret must be an integer in [0, {k})", "manifest.secrets")
    drawn = draw_secrets(seed, count, k)
    if not np.array_equal(np.asarray(secrets, dtype=np.int64), drawn):
        wrong = int(np.count_nonzero(np.asarray(secrets) != drawn))
        raise BadInputError(f"{wrong} of {count} secrets are not the ones drawn from the manifest's seed {seed}: "
                            "the manifest was edited", "manifest.secrets")
    return manifest


def _check_mac(manifest: dict[str, Any]) -> None:
    if hmac_key() is None:
        return
    if "mac" not in manifest:
        raise BadInputError(f"no MAC, but {HMAC_KEY_VARIABLE} is set: this manifest was not written under the key",
                            "manifest.mac")
    if not same_digest(manifest["mac"], keyed_digest(_body(manifest))):
        raise BadInputError(f"MAC mismatch: the manifest was edited after it was written, or under another "
                            f"{HMAC_KEY_VARIABLE}", "manifest.mac")


def check_seed(manifest: dict[str, Any], seed: int, where: str) -> None:
    """The manifest's canaries were drawn for the training of ``seed`` (the weights' or the config's).

    Args:
        manifest: a manifest read by :func:`read_manifest`.
        seed: the training's seed.
        where: how the message names the seed's origin (e.g. "checkpoint's").

    Raises:
        BadInputError: the seeds differ.
    """
    if manifest["seed"] != seed:
        raise BadInputError(f"the manifest's seed {manifest['seed']} is not the {where} seed {seed}: its canaries "
                            "belong to another training", "manifest.seed")


def check_bound_release(manifest: dict[str, Any], bound: object, weights: str) -> None:
    """The weights name the release they were trained with; it must be the manifest's (``weights``: how the
    message names them, e.g. "the checkpoint was").

    Args:
        manifest: a manifest read by :func:`read_manifest`.
        bound: the release digest the weights name (None when they name none).
        weights: how the message names the weights.

    Raises:
        BadInputError: a version ≥ 2 gradient-canary manifest names another release.
    """
    if manifest.get("version", 1) < 2 or manifest["kind"] != "gradient":
        return
    if bound != manifest["release_sha256"]:
        raise BadInputError(f"the release named by the manifest is not the one {weights} trained with (the release "
                            "or the manifest was replaced)", "manifest.release_sha256")


def _release_payload(raw: bytes, name: str) -> object:
    """A release's tensors and format version: version 1 is a torch.save zip (read tensors only), version 2
    safetensors; anything else is refused."""
    if raw[:4] == b"PK\x03\x04":
        return load_torch_file(raw, f"canary release {name}")
    from safetensors import SafetensorError
    from safetensors.torch import load

    length = int.from_bytes(raw[:8], "little") if len(raw) >= 8 else -1
    try:
        header = json.loads(raw[8:8 + length]) if 0 < length <= len(raw) - 8 else None
        tensors = load(raw) if isinstance(header, dict) else None
    except (ValueError, RecursionError, SafetensorError) as err:
        raise BadInputError(f"canary release {name} is neither safetensors nor a torch file") from err
    metadata = header.get("__metadata__") if isinstance(header, dict) else None
    if tensors is None or not isinstance(metadata, dict) or metadata.get("format_version") != str(RELEASE_VERSION):
        raise BadInputError(f"canary release {name} does not have the fdp-audit layout")
    return {**tensors, "format_version": RELEASE_VERSION}


def read_release(path: Path, manifest: dict[str, Any]) -> Release:
    """Load the release (tensors only), check its digest against the manifest and its shapes (canaries, null
    coordinates, and steps as the manifest states them).

    Args:
        path: the release file.
        manifest: its manifest, read by :func:`read_manifest` (a gradient-canary one).

    Returns:
        The release as float64 arrays (no per-step updates when the release has none).

    Raises:
        BadInputError: the file is not a release of this layout, a shape or the digest differs from the manifest,
            or a value is not finite.
    """
    raw = read_bounded(path, MAX_CHECKPOINT_BYTES, "canary release")  # T·(M + M₀) float32 numbers
    payload = _release_payload(raw, path.name)
    if (not isinstance(payload, dict) or set(payload) != RELEASE_KEYS
            or type(payload["format_version"]) is not int or payload["format_version"] not in (1, RELEASE_VERSION)):
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
    if "steps" in manifest and updates.shape[0] != manifest["steps"]:
        raise BadInputError(f"{updates.shape[0]} steps, but the manifest says {manifest['steps']}", "release.updates")
    if hashlib.sha256(raw).hexdigest() != manifest["release_sha256"]:  # after the shapes, which say more
        raise BadInputError("digest differs from the manifest's", "manifest.release_sha256")
    arrays = {name: payload[name].double().numpy() for name in RELEASE_KEYS - {"format_version"}}
    if not all(np.isfinite(a).all() for a in arrays.values()):
        raise BadInputError("non-finite values", "release")
    has_updates = arrays["updates"].shape[0] > 0
    public = arrays["updates_public"] if has_updates and len(arrays["updates_public"]) else None
    return Release(arrays["final"], arrays["final_null"], arrays["updates"] if has_updates else None,
                   arrays["updates_null"] if has_updates else None, public)
