"""Shared checks for hostile-input tests: the only outcomes allowed are success, or exit code 2 with
one line on stderr and no output file."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from fdp_audit.errors import BadInputError


def _assert_one_line(message: str) -> None:
    lines = [line for line in message.splitlines() if line.strip()]
    assert len(lines) == 1, f"expected one line, got {message[:2000]!r}"
    assert "Traceback" not in message and len(message) < 2000, message[:2000]


def _assert_refused(err: BadInputError) -> None:
    _assert_one_line(str(err))


def _files_under(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*")) if folder.exists() else []


def _stored_zip(records: dict[str, bytes], deflated: dict[str, tuple[bytes, int]]) -> bytes:
    """A zip archive written by hand: ``records`` stored, ``deflated`` as (raw deflate stream, the size it states
    once inflated). The CRCs are left 0: the archives are refused before anything is inflated or checked."""
    import struct

    body, directory = b"", b""
    for name, (data, method, size) in ({k: (v, 0, len(v)) for k, v in records.items()}
                                       | {k: (d, 8, n) for k, (d, n) in deflated.items()}).items():
        encoded = name.encode()
        directory += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, method, 0, 0, 0, len(data), size,
                                 len(encoded), 0, 0, 0, 0, 0, len(body)) + encoded
        body += struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, method, 0, 0, 0, len(data), size, len(encoded), 0)
        body += encoded + data
    count = len(records) + len(deflated)
    return body + directory + struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, count, count, len(directory), len(body), 0)


def _zip_bomb(payload: object, inflated: int) -> bytes:
    """``torch.save(payload)`` with its first storage record replaced by a deflate stream of ``inflated`` zero
    bytes: blocks of 16 MiB each ending in a full flush (byte-aligned, no reference back), so one block's bytes
    repeat, then an empty final block. About a thousandth of ``inflated``."""
    import io
    import zipfile
    import zlib

    import torch

    buffer = io.BytesIO()
    torch.save(payload, buffer)
    archive = zipfile.ZipFile(io.BytesIO(buffer.getvalue()))
    records = {info.filename: archive.read(info.filename) for info in archive.infolist()}
    name = next(n for n in records if n.endswith("/data/0"))
    del records[name]
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
    block = compressor.compress(bytes(16 << 20)) + compressor.flush(zlib.Z_FULL_FLUSH)
    return _stored_zip(records, {name: (block * (inflated >> 24) + b"\x03\x00", inflated)})


@pytest.fixture(scope="session")
def zip_bomb() -> Callable[[object, int], bytes]:
    """``zip_bomb(payload, inflated)``: ``torch.save(payload)`` whose first storage record inflates to ``inflated``
    zero bytes from about a thousandth of that."""
    return _zip_bomb


@pytest.fixture(scope="session")
def assert_one_line() -> Callable[[str], None]:
    """A message or a stderr: one non-empty line, no traceback, short even for a megabyte of hostile input."""
    return _assert_one_line


@pytest.fixture(scope="session")
def assert_refused() -> Callable[[BadInputError], None]:
    """A :class:`BadInputError` whose message is one readable line."""
    return _assert_refused


@pytest.fixture(scope="session")
def files_under() -> Callable[[Path], list[str]]:
    """The files and folders under a folder (empty when it does not exist): what a refused run left behind."""
    return _files_under
