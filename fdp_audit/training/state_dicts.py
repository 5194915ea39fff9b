"""Weights trained outside fdp-audit (docs/files.md): a ``state_dict`` as safetensors, or as a ``.pt``/``.pth``/``.bin``
file read with ``torch.load(weights_only=True)``, plus a config that names the model's factory, the data it was
trained on and the privacy claimed for the training. No code from the file runs: safetensors holds tensors only,
and ``weights_only`` unpickles only tensors and plain containers.

The tensors must be exactly the module's parameters (names and shapes of ``named_parameters()``; buffers such as
running statistics may be present and are ignored); the prefixes that wrappers add to every key — ``_module.``
(Opacus's ``GradSampleModule``) and ``module.`` (``DataParallel``) — are removed first.
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import Any

import torch

from fdp_audit.bounded_read import bounded_json_integer, read_bounded
from fdp_audit.errors import BadInputError
from fdp_audit.training.checkpoint import MAX_CHECKPOINT_BYTES, MAX_INFLATED_BYTES, load_torch_file
from fdp_audit.training.models import Model, Params

SUFFIXES = (".safetensors", ".pt", ".pth", ".bin")
WRAPPER_PREFIXES = ("_module.", "module.")
# bytes per element of the safetensors dtypes that torch reads
SAFETENSORS_DTYPE_BYTES = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E5M2": 1, "I16": 2, "U16": 2, "F16": 2,
                           "BF16": 2, "I32": 4, "U32": 4, "F32": 4, "I64": 8, "U64": 8, "F64": 8}


def check_safetensors_header(raw: bytes, name: str) -> None:
    """Refuse a safetensors file whose header states a tensor it does not hold, before any tensor is made: the
    file is an 8-byte little-endian header length N, N bytes of JSON ``{name: {"dtype", "shape",
    "data_offsets": [begin, end]}}`` (and an optional ``__metadata__``), then the data; each tensor's
    ``Π shape × dtype size`` must be ``end − begin`` within the data, and all of them at most
    :data:`~fdp_audit.training.checkpoint.MAX_INFLATED_BYTES`.

    Args:
        raw: the file's bytes.
        name: the file, for messages.

    Raises:
        BadInputError: the header is malformed or states tensors the file does not hold.
    """
    length = int.from_bytes(raw[:8], "little") if len(raw) >= 8 else -1
    if not 2 <= length <= len(raw) - 8:
        raise BadInputError(f"{name} is not a readable safetensors file (header length {length})")
    try:
        header = json.loads(raw[8:8 + length].decode("utf-8"), parse_int=bounded_json_integer)
    except (UnicodeDecodeError, ValueError, RecursionError) as err:
        raise BadInputError(f"{name} is not a readable safetensors file (its header is not JSON)") from err
    if not isinstance(header, dict):
        raise BadInputError(f"{name} is not a readable safetensors file (its header is not a mapping)")
    data, total = len(raw) - 8 - length, 0
    for key, entry in header.items():
        if key == "__metadata__":
            continue
        where = f"{name}: tensor {key[:80]!r}"
        if not isinstance(entry, dict) or set(entry) != {"dtype", "shape", "data_offsets"}:
            raise BadInputError(f"{where} is not described by dtype, shape and data_offsets")
        size, shape, offsets = SAFETENSORS_DTYPE_BYTES.get(entry["dtype"]), entry["shape"], entry["data_offsets"]
        if size is None:
            raise BadInputError(f"{where} has the unsupported dtype {str(entry['dtype'])[:20]!r}")
        if not (isinstance(shape, list) and all(type(d) is int and d >= 0 for d in shape)
                and isinstance(offsets, list) and len(offsets) == 2 and all(type(o) is int for o in offsets)
                and 0 <= offsets[0] <= offsets[1] <= data):
            raise BadInputError(f"{where} has a malformed shape or offsets outside the file's {data:,} data bytes")
        nbytes = math.prod(shape) * size
        if nbytes != offsets[1] - offsets[0]:
            raise BadInputError(f"{where} states {nbytes:,} bytes but holds {offsets[1] - offsets[0]:,}")
        total += nbytes
    if total > MAX_INFLATED_BYTES:
        raise BadInputError(f"{name} states {total:,} bytes of tensors, more than the limit of {MAX_INFLATED_BYTES:,}")


def read_state_dict(path: str | Path) -> tuple[dict[str, torch.Tensor], str]:
    """The tensors of a state_dict file and the file's SHA-256; anything else is a one-line bad input.

    Args:
        path: a ``.pt``/``.pth``/``.bin`` (``torch.save``, read with ``weights_only=True``) or ``.safetensors`` file
            (untrusted; its sizes are bounded before anything is inflated).

    Returns:
        ``(tensors by name, SHA-256 of the file's bytes in hex)``.

    Raises:
        BadInputError: the suffix is not a state_dict's, the file is refused or unreadable, is an fdp-audit
            checkpoint, or does not map names to tensors.
    """
    path = Path(path)
    if path.suffix.lower() not in SUFFIXES:
        raise BadInputError(f"{path.name}: a state_dict is a {', '.join(SUFFIXES)} file")
    raw = read_bounded(path, MAX_CHECKPOINT_BYTES, "state_dict")
    if path.suffix.lower() == ".safetensors":
        from safetensors.torch import load

        check_safetensors_header(raw, path.name)
        try:
            tensors = load(raw)
        except Exception as err:  # noqa: BLE001 - safetensors raises its own error types for any malformed header
            raise BadInputError(f"{path.name} is not a readable safetensors file") from err
    else:
        tensors = load_torch_file(raw, f"state_dict {path.name}")
        if isinstance(tensors, dict) and {"format_version", "params", "metadata"} <= set(tensors):
            raise BadInputError(f"{path.name} is an fdp-audit checkpoint: audit it without --config")
    if not isinstance(tensors, dict) or not tensors or not all(
            isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in tensors.items()):
        raise BadInputError(f"{path.name} is not a state_dict (a mapping of names to tensors)")
    return tensors, hashlib.sha256(raw).hexdigest()


def without_wrapper_prefix(tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The tensors without the prefixes wrappers add to every name (:data:`WRAPPER_PREFIXES`: Opacus's ``_module.``,
    ``DataParallel``'s ``module.``), each stripped in turn where every name has it.

    Args:
        tensors: a state_dict's tensors by name.

    Returns:
        The same tensors, renamed where every name had the prefix.
    """
    for prefix in WRAPPER_PREFIXES:
        if all(key.startswith(prefix) for key in tensors):
            tensors = {key[len(prefix):]: value for key, value in tensors.items()}
    return tensors


def module_params(tensors: dict[str, torch.Tensor], model: Model, name: str) -> Params:
    """The model's parameters from a state_dict's tensors, checked name by name and shape by shape.

    Args:
        tensors: the state_dict's tensors (a wrapper's prefix is removed first).
        model: the model whose parameters are read (tensors it does not have are ignored).
        name: the file, for messages.

    Returns:
        The parameters by name, float32, each of the model's shape.

    Raises:
        BadInputError: a parameter is missing, has another shape, or is not finite floating point.
    """
    tensors = without_wrapper_prefix(tensors)
    shapes = model.shapes()
    missing = sorted(set(shapes) - set(tensors))
    if missing:
        raise BadInputError(f"{name} lacks the module's parameter(s) {missing[:4]} (it has {sorted(tensors)[:4]}…)",
                            "state_dict")
    params = {}
    for key, shape in shapes.items():
        value = tensors[key]
        if tuple(value.shape) != shape:
            raise BadInputError(f"{name}: parameter {key} has shape {tuple(value.shape)}, the module's is {shape}",
                                "state_dict")
        if not value.is_floating_point() or not torch.isfinite(value).all():
            raise BadInputError(f"{name}: parameter {key} is not finite floating point", "state_dict")
        params[key] = value.detach().float()
    return params


def external_metadata(config: Any, fingerprint: str, noise_multiplier: float) -> dict[str, Any]:
    """What an fdp-audit checkpoint's metadata would hold, from the config that describes external weights: the
    claim, the seed, and the data's fingerprint (the config's data are taken as the training data).

    Args:
        config: the configuration describing how the weights were trained.
        fingerprint: the data set's fingerprint.
        noise_multiplier: the claimed z.

    Returns:
        The metadata (marked ``external``).
    """
    mech = config.mechanism
    return {"mechanism": mech.name, "faulty": False, "noise_multiplier": noise_multiplier,
            "sample_rate": mech.sample_rate, "steps": mech.steps, "clip_norm": mech.clip_norm, "delta": mech.delta,
            "seed": config.seed, "dataset_fingerprint": fingerprint, "config": config.to_dict(), "external": True}
