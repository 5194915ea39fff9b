"""Checkpoints (docs/files.md): weights plus privacy metadata, written atomically and read as untrusted input.

A checkpoint is a ``torch.save`` of ``{"format_version": int, "params": {name: tensor}, "metadata": str}``
where ``metadata`` is JSON. It is loaded by :func:`load_torch_file`, which bounds every size the file declares
before ``torch.load(weights_only=True)`` inflates anything and unpickles only tensors and plain containers — a
pickle that would run code is refused — and then validated field by field; anything unexpected is a one-line
:class:`BadInputError`.
"""

from __future__ import annotations

import io
import json
import math
import os
from pathlib import Path
from typing import Any

import torch

from fdp_audit.accounting.parameters import MAX_NOISE_MULTIPLIER
from fdp_audit.atomic_io import atomic_write_bytes
from fdp_audit.bounded_read import bounded_json_integer, read_bounded
from fdp_audit.config import EXTERNAL_MODEL_HINT
from fdp_audit.errors import BadInputError
from fdp_audit.mechanisms import MECHANISMS
from fdp_audit.training.cnn import cnn_model, cnn_size
from fdp_audit.training.models import Model, Params

FORMAT_VERSION = 1
MAX_CHECKPOINT_BYTES = 1 << 30
MAX_INFLATED_BYTES = 1 << 30  # what the records of a torch.save archive may hold once inflated, all together
MAX_RECORDS = 1 << 16  # records of a torch.save archive: one per tensor storage, and a few more
_ZIP_MAGIC = b"PK\x03\x04"

_REQUIRED: dict[str, type | tuple[type, ...]] = {
    "format_version": int,
    "package_version": str,
    "mechanism": str,
    "faulty": bool,
    "noise_multiplier": (int, float),
    "sample_rate": (int, float),
    "public_batch_size": int,
    "steps": int,
    "clip_norm": (int, float),
    "private_weight": (int, float),
    "public_pretrain_steps": int,
    "delta": (int, float),
    "epsilon": (int, float, type(None)),
    "psi": dict,
    "dataset": str,
    "dataset_fingerprint": str,
    "seed": int,
    "model": dict,
}


def save_checkpoint(path: str | Path, params: Params, metadata: dict[str, Any]) -> Path:
    """Write one model's parameters (no model dimension) and its metadata atomically. The training data's path
    is stored relative to the checkpoint's folder, so that the two can move together.

    Args:
        path: the checkpoint file to write.
        params: the model's parameters by name, each of its own shape (no leading model dimension).
        metadata: the privacy metadata (docs/files.md), checked by :func:`validate_metadata`.

    Returns:
        The path written.

    Raises:
        BadInputError: the metadata is incomplete or out of range.
    """
    validate_metadata(metadata)
    data = metadata.get("config", {}).get("data", {})
    if isinstance(data.get("path"), str) and os.path.isabs(data["path"]):
        folder = os.path.dirname(os.path.abspath(path))
        metadata = {**metadata, "config": {**metadata["config"],
                                           "data": {**data, "path": os.path.relpath(data["path"], folder)}}}
    buffer = io.BytesIO()
    torch.save({"format_version": FORMAT_VERSION,
                "params": {k: v.detach().cpu().contiguous() for k, v in params.items()},
                "metadata": json.dumps(metadata, sort_keys=True)}, buffer)
    return atomic_write_bytes(path, buffer.getvalue())


def validate_metadata(metadata: Any) -> dict[str, Any]:
    """Check a checkpoint's privacy metadata field by field: every required field present with its type, the
    format version, a known mechanism whose faulty flag matches, and each privacy parameter in range and finite.

    Args:
        metadata: the decoded metadata (untrusted).

    Returns:
        The same metadata, once it has passed.

    Raises:
        BadInputError: a field is missing, of the wrong type or out of range, naming the field.
    """
    if not isinstance(metadata, dict):
        raise BadInputError("metadata is not a mapping", "checkpoint.metadata")
    for key, kind in _REQUIRED.items():
        if key not in metadata:
            raise BadInputError("missing privacy metadata field", f"checkpoint.metadata.{key}")
        value = metadata[key]
        if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
            raise BadInputError(f"has the wrong type ({type(value).__name__})", f"checkpoint.metadata.{key}")
    if metadata["format_version"] != FORMAT_VERSION:
        raise BadInputError(f"unsupported format version {metadata['format_version']}",
                            "checkpoint.metadata.format_version")
    info = MECHANISMS.get(metadata["mechanism"])
    if info is None:
        raise BadInputError(f"unknown mechanism {metadata['mechanism']!r}", "checkpoint.metadata.mechanism")
    if info.faulty != metadata["faulty"]:
        raise BadInputError("faulty flag inconsistent with the mechanism", "checkpoint.metadata.faulty")
    checks = {
        "noise_multiplier": 0 < metadata["noise_multiplier"] <= MAX_NOISE_MULTIPLIER or not info.recipe.private,
        "sample_rate": 0 < metadata["sample_rate"] <= 1,
        "steps": metadata["steps"] >= 1,
        "clip_norm": metadata["clip_norm"] > 0,
        "delta": 0 < metadata["delta"] < 1,
        "public_batch_size": metadata["public_batch_size"] >= 1,
        "public_pretrain_steps": metadata["public_pretrain_steps"] >= 0,
        "private_weight": metadata["private_weight"] >= 0,
    }
    for key, ok in checks.items():
        value = metadata[key]
        if not ok or (isinstance(value, float) and not math.isfinite(value)):
            raise BadInputError(f"out of range ({value!r})", f"checkpoint.metadata.{key}")
    model = metadata["model"]
    for key in ("kind", "n_inputs", "n_classes", "hidden", "image_side"):
        if key not in model:
            raise BadInputError("missing", f"checkpoint.metadata.model.{key}")
    return metadata


def model_from_metadata(metadata: dict[str, Any]) -> Model:
    """The model a checkpoint's metadata describes, refused when the description is invalid or larger than a
    checkpoint can hold (checked before anything is allocated).

    Args:
        metadata: validated checkpoint metadata (:func:`validate_metadata`).

    Returns:
        The built-in model (``logistic``, ``mlp`` or ``cnn``) the parameters belong to.

    Raises:
        BadInputError: the model description is invalid or too large.
    """
    m = metadata["model"]
    try:
        model = Model(str(m["kind"]), int(m["n_inputs"]), int(m["n_classes"]), tuple(int(h) for h in m["hidden"]),
                      int(m["image_side"]))
    except (TypeError, ValueError) as err:
        raise BadInputError(f"invalid model description: {err}", "checkpoint.metadata.model") from err
    if model.kind not in ("logistic", "mlp", "cnn") or model.n_inputs < 1 or model.n_classes < 2:
        raise BadInputError("invalid model description", "checkpoint.metadata.model")
    field = "checkpoint.metadata.model"
    if model.kind == "cnn":
        if max(cnn_size(model.n_inputs, model.n_classes, model.hidden, field)) > MAX_INFLATED_BYTES // 4:
            raise BadInputError("describes a cnn larger than a checkpoint can hold", field)
        return cnn_model(model.n_inputs, model.n_classes, model.hidden, field)
    if model.n_parameters > MAX_INFLATED_BYTES // 4:
        raise BadInputError(f"describes a {model.kind} model larger than a checkpoint can hold", field)
    return model


def _zip_record_count(raw: bytes) -> int | None:
    """The record count a zip archive's end of central directory states (the larger of the classic and the
    zip64 record's, which a reader may take either of), or None without an end record."""
    end = raw.rfind(b"PK\x05\x06", max(0, len(raw) - (1 << 16) - 22))
    if end < 0 or len(raw) < end + 22:
        return None
    counts = [int.from_bytes(raw[end + 8:end + 10], "little"), int.from_bytes(raw[end + 10:end + 12], "little")]
    locator = end - 20
    if locator >= 0 and raw[locator:locator + 4] == b"PK\x06\x07":
        record = int.from_bytes(raw[locator + 8:locator + 16], "little")
        if raw[record:record + 4] == b"PK\x06\x06" and len(raw) >= record + 40:
            counts += [int.from_bytes(raw[record + 24:record + 32], "little"),
                       int.from_bytes(raw[record + 32:record + 40], "little")]
    return max(counts)


def inflated_size(raw: bytes, name: str) -> int:
    """The bytes a ``torch.save`` archive's records hold once inflated, as its zip directory states them — the
    sizes ``torch.load`` allocates for them (a record that inflates past its stated size is an error, and a
    storage must be exactly its record). Refused before anything is inflated: a legacy (not zip) file, whose
    storages are sized by the pickle alone; more than :data:`MAX_RECORDS` records; more than
    :data:`MAX_INFLATED_BYTES` in all (a 2 MB file can inflate to gigabytes).

    Args:
        raw: the file's bytes.
        name: the file, for messages.

    Returns:
        The inflated size in bytes.

    Raises:
        BadInputError: the file is refused.
    """
    if not raw.startswith(_ZIP_MAGIC):
        raise BadInputError(f"{name} is unreadable or truncated: not a torch.save zip archive (torch's legacy "
                            "format, before PyTorch 1.6, is not read: load and save the file again)")
    count = _zip_record_count(raw)
    if count is None:
        raise BadInputError(f"{name} is unreadable or truncated (no zip directory)")
    if count > MAX_RECORDS:
        raise BadInputError(f"{name} states {count:,} records, more than the limit of {MAX_RECORDS:,}")
    try:
        archive = torch._C.PyTorchFileReader(io.BytesIO(raw))  # noqa: SLF001 - the reader torch.load uses
        total = sum(archive.get_record_size(record) for record in archive.get_all_records())
    except Exception as err:  # noqa: BLE001 - the reader raises RuntimeError for any malformed archive
        raise BadInputError(f"{name} is unreadable or truncated ({' '.join(str(err).split())[:120]})") from err
    if total > MAX_INFLATED_BYTES:
        raise BadInputError(f"{name} inflates to {total:,} bytes, more than the limit of {MAX_INFLATED_BYTES:,}")
    return total


def load_torch_file(raw: bytes, name: str) -> Any:
    """``torch.load(weights_only=True)`` of an untrusted ``torch.save`` file, on the CPU, with every size bounded
    first (:func:`inflated_size`) and no tensor larger than its storage: a tensor's shape and strides come from
    the pickle, and a stride of 0 presents a 12-byte storage as 10¹² elements that the first reduction over it
    would allocate.

    Args:
        raw: the file's bytes (read with a size limit).
        name: the file, for messages (``"checkpoint model.pt"``).

    Returns:
        What the file holds: tensors in plain containers.

    Raises:
        BadInputError: the file is refused, unreadable, or holds objects other than tensors.
    """
    inflated_size(raw, name)
    try:
        payload = torch.load(io.BytesIO(raw), map_location="cpu", weights_only=True)
    except Exception as err:  # noqa: BLE001 - any unpickling failure means an unreadable or unsafe file
        # torch names the weights_only option in every failure; a refused class or function is a GLOBAL
        reason = "contains objects other than tensors" if "GLOBAL" in str(err) else "unreadable or truncated"
        raise BadInputError(f"{name} refused: {reason}") from err
    pending, seen = [payload], set()
    while pending:  # iterative, each container once: a pickle may nest deeper than the recursion limit, or in a cycle
        item = pending.pop()
        if isinstance(item, dict | list | tuple):
            if id(item) in seen:
                continue
            seen.add(id(item))
        if isinstance(item, dict):
            pending.extend(item.values())
        elif isinstance(item, list | tuple):
            pending.extend(item)
        elif isinstance(item, torch.Tensor) and item.numel() * item.element_size() > item.untyped_storage().nbytes():
            raise BadInputError(f"{name} refused: a tensor of shape {tuple(item.shape)} is larger than its stored "
                                f"{item.untyped_storage().nbytes():,} bytes")
    return payload


def load_checkpoint(path: str | Path) -> tuple[Params, dict[str, Any], Model]:
    """Read and validate a checkpoint: parameters, metadata, and the model they belong to.

    Args:
        path: the checkpoint file (untrusted; read with a size limit).

    Returns:
        The parameters (float32, by name, each of the model's shape), the validated metadata, and the model.

    Raises:
        BadInputError: the file is refused or unreadable, is a plain state_dict or another layout, or its metadata
            or parameters do not match (names, shapes, non-finite values).
    """
    path = Path(path)
    raw = read_bounded(path, MAX_CHECKPOINT_BYTES, "checkpoint")
    payload = load_torch_file(raw, f"checkpoint {path.name}")
    if isinstance(payload, dict) and payload and all(isinstance(v, torch.Tensor) for v in payload.values()):
        raise BadInputError(f"{path.name} is a plain PyTorch state_dict, not an fdp-audit checkpoint; "
                            f"{EXTERNAL_MODEL_HINT}")
    if not isinstance(payload, dict) or set(payload) != {"format_version", "params", "metadata"}:
        raise BadInputError(f"checkpoint {path.name} does not have the fdp-audit layout "
                            "(format_version, params, metadata); " + EXTERNAL_MODEL_HINT)
    if type(payload["format_version"]) is not int or payload["format_version"] != FORMAT_VERSION:  # not a tensor
        raise BadInputError(f"unsupported checkpoint format {payload['format_version']!r}", "checkpoint.format_version")
    try:
        metadata = json.loads(payload["metadata"], parse_int=bounded_json_integer)
    except (TypeError, ValueError) as err:
        raise BadInputError("metadata is not valid JSON", "checkpoint.metadata") from err
    validate_metadata(metadata)
    model = model_from_metadata(metadata)
    params = payload["params"]
    expected = model.shapes()
    if not isinstance(params, dict) or set(params) != set(expected):
        raise BadInputError("parameter names do not match the model", "checkpoint.params")
    for name, shape in expected.items():
        value = params[name]
        if not isinstance(value, torch.Tensor) or tuple(value.shape) != shape:
            raise BadInputError(f"parameter {name} has shape {tuple(getattr(value, 'shape', ()))}, expected {shape}",
                                "checkpoint.params")
        if not torch.isfinite(value).all():
            raise BadInputError(f"parameter {name} has non-finite values", "checkpoint.params")
    return {k: v.float() for k, v in params.items()}, metadata, model


def read_privacy_metadata(path: str | Path) -> dict[str, Any]:
    """The privacy parameters of a checkpoint (for ``fdp-audit account --checkpoint``).

    Args:
        path: the checkpoint file.

    Returns:
        Its validated metadata.

    Raises:
        BadInputError: the checkpoint is refused (:func:`load_checkpoint`).
    """
    _, metadata, _ = load_checkpoint(path)
    return metadata
