"""Nothing lost, nothing half-written (docs/files.md): every output file goes through
:mod:`fdp_audit.atomic_io` (temporary file beside the target, fsync, rename), and a failed run leaves no output.

The source scan is a regression guard: a new ``open(path, "w")``, ``write_text``, ``savefig(path)`` or
``torch.save(obj, path)`` anywhere in the package, the attacks or the benchmarks fails this test. The only
other writer is the trial journal, which appends whole fsynced lines and whose reader skips a torn last line
(tests/auditing/test_journal.py).
"""

from __future__ import annotations

import ast
import errno
import os
import stat
import threading
import time
from pathlib import Path

import pytest

from fdp_audit.atomic_io import all_or_nothing, atomic_write, atomic_write_json, atomic_write_text

ROOT = Path(__file__).resolve().parents[2]
SCANNED = ("fdp_audit", "attacks", "benchmarks")
ALLOWED = {("fdp_audit/atomic_io.py", "open"), ("fdp_audit/atomic_io.py", "fdopen"),
           ("fdp_audit/auditing/journal.py", "open:a+b"),
           ("benchmarks/b10_canary_overhead.py", "open:w")}  # /proc/self/clear_refs: resets the peak, writes no file
PATH_WRITERS = {"write_text", "write_bytes"}
SERIALISERS = {"savefig", "save", "savez", "savez_compressed", "savetxt", "to_csv", "to_parquet", "write_table"}


def _to_memory(node: ast.expr) -> bool:
    """A serialiser's target that is an in-memory buffer: ``io.BytesIO()`` or a variable named ``*buffer*``."""
    if isinstance(node, ast.Call):
        return getattr(node.func, "attr", getattr(node.func, "id", "")) in ("BytesIO", "StringIO")
    return isinstance(node, ast.Name) and "buffer" in node.id


def _mode(call: ast.Call) -> str:
    args = [*call.args[1:2], *(k.value for k in call.keywords if k.arg == "mode")]
    return args[0].value if args and isinstance(args[0], ast.Constant) else "r"


def file_writes(source: str, name: str) -> list[str]:
    """``path:line: what`` for every call in ``source`` that writes a file other than through atomic_io."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        func = getattr(node.func, "attr", getattr(node.func, "id", ""))
        if func in ("open", "fdopen"):
            mode = _mode(node)
            if any(c in mode for c in "wax+") and (name, func) not in ALLOWED and (name, f"open:{mode}") not in ALLOWED:
                found.append(f"{name}:{node.lineno}: {func}(..., {mode!r})")
        elif func in PATH_WRITERS:
            found.append(f"{name}:{node.lineno}: {func}")
        elif func in SERIALISERS and isinstance(node.func, ast.Attribute):
            target = node.args[1] if func == "save" and len(node.args) > 1 else (node.args[0] if node.args else None)
            if func == "save" and getattr(node.func.value, "id", "") not in ("torch", "np", "numpy"):
                continue
            if target is not None and not _to_memory(target):
                found.append(f"{name}:{node.lineno}: {func} to a path")
    return found


def test_the_scan_finds_direct_writes() -> None:
    """Known answers for the scanner itself."""
    bad = ('open(p, "w")\nPath(p).write_text("x")\nfig.savefig("a.png")\ntorch.save(obj, "m.pt")\n'
           'np.savez_compressed(path, a=1)\nopen(p, mode="ab")\n')
    assert len(file_writes(bad, "x.py")) == 6
    good = ('open(p)\nopen(p, "rb")\nbuffer = io.BytesIO()\nfig.savefig(buffer)\ntorch.save(obj, buffer)\n'
            'np.savez_compressed(io.BytesIO(), a=1)\nparser.save(x)\n')
    assert file_writes(good, "x.py") == []


def test_every_output_goes_through_atomic_io() -> None:
    found = []
    for folder in SCANNED:
        for path in sorted((ROOT / folder).rglob("*.py")):
            found += file_writes(path.read_text(encoding="utf-8"), path.relative_to(ROOT).as_posix())
    assert found == []


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path: Path) -> None:
    target = atomic_write_json(tmp_path / "results.json", {"run": 1})
    before = target.read_bytes()

    def fails_half_way(handle) -> None:
        handle.write(b'{"run": 2, "half')
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        atomic_write(target, fails_half_way)
    assert target.read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == ["results.json"]


def test_json_output_refuses_nan_before_writing(tmp_path: Path) -> None:
    """JSON has no NaN: a non-finite number fails before the target exists, never a file a reader rejects."""
    with pytest.raises(ValueError):
        atomic_write_json(tmp_path / "out.json", {"x": float("nan")})
    assert os.listdir(tmp_path) == []


def test_refused_runs_leave_no_output(tmp_path: Path, cli, small_config, write_yaml, files_under) -> None:
    """Bad input found late (an unwritable output folder) or early (a bad config): exit 2, nothing written."""
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    config = write_yaml(tmp_path / "c.yaml", small_config(rows=60, mechanism={"steps": 2}, audit={"trials": 8}))
    result = cli("audit", config, "--out", blocker / "out")
    assert result.code == 2 and "cannot use" in result.err and "Not a directory" in result.err
    bad = write_yaml(tmp_path / "bad.yaml", small_config(mechanism={"steps": -1}))
    for argv in (["audit", bad, "--out", tmp_path / "a"], ["train", bad, "--out", tmp_path / "t" / "m.pt"],
                 ["profile", bad, "--out", tmp_path / "p"], ["corrdp", "train", bad, "--out", tmp_path / "c"]):
        assert cli(*argv).code == 2
    assert files_under(tmp_path) == ["bad.yaml", "c.yaml", "file"]


def _read_fifo_when_ready(fifo: Path, got: list[bytes]) -> threading.Thread:
    """A reader that opens ``fifo`` without blocking and collects what arrives until the writer closes it."""

    def read() -> None:
        fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
        chunks, deadline = [], time.monotonic() + 20
        writer_seen = False
        with os.fdopen(fd, "rb", buffering=0) as handle:
            while time.monotonic() < deadline:
                data = handle.read(65536)
                if data:
                    chunks.append(data)
                    writer_seen = True
                elif data == b"" and writer_seen:
                    break  # end of file: the writer closed
                else:
                    time.sleep(0.01)
        got.append(b"".join(chunks))

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    return thread


def test_a_fifo_is_written_through_not_replaced(tmp_path: Path) -> None:
    """Renaming over a FIFO (or /dev/full, as root) replaced the node with a regular file."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = _read_fifo_when_ready(fifo, got)
    time.sleep(0.1)
    atomic_write_text(fifo, "<testsuite/>\n")
    reader.join(25)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert got == [b"<testsuite/>\n"]
    assert sorted(os.listdir(tmp_path)) == ["pipe"]


def test_a_character_device_is_written_through(tmp_path: Path) -> None:
    """/dev/null stays a device (the old code, as root, would have replaced it: run this only on the new code);
    /dev/full's "no space left" is a one-line error naming the path, not an internal error."""
    null = Path("/dev/null")
    before = os.lstat(null)
    atomic_write_text(null, "discarded")
    after = os.lstat(null)
    assert stat.S_ISCHR(after.st_mode) and after.st_rdev == before.st_rdev and after.st_ino == before.st_ino
    if Path("/dev/full").exists():
        with pytest.raises(OSError) as err:
            atomic_write_text("/dev/full", "x")
        assert err.value.filename == "/dev/full"
        assert stat.S_ISCHR(os.lstat("/dev/full").st_mode)


def test_a_symlink_stays_a_link_and_its_target_keeps_its_mode(tmp_path: Path) -> None:
    elsewhere = tmp_path / "store"
    elsewhere.mkdir()
    real = elsewhere / "junit.xml"
    real.write_text("old")
    os.chmod(real, 0o640)
    link = tmp_path / "link.xml"
    link.symlink_to(real)
    atomic_write_text(link, "new")
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert real.read_text() == "new" and stat.S_IMODE(os.stat(real).st_mode) == 0o640
    assert sorted(os.listdir(elsewhere)) == ["junit.xml"] and sorted(os.listdir(tmp_path)) == ["link.xml", "store"]


def test_a_new_output_gets_the_usual_mode(tmp_path: Path) -> None:
    """mkstemp creates 0600 files; an output is readable like any other file the user creates (0666 − umask)."""
    old = os.umask(0o022)
    try:
        path = atomic_write_text(tmp_path / "report.html", "<html/>")
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o644


def test_a_block_device_or_folder_is_refused(tmp_path: Path) -> None:
    with pytest.raises(OSError) as err:
        atomic_write_text(tmp_path, "x")
    assert err.value.filename == str(tmp_path)


def test_outputs_of_one_command_are_all_or_nothing(tmp_path: Path) -> None:
    """A full disk while writing the second output kept the new first one beside the old second one."""
    first, second = atomic_write_text(tmp_path / "results.json", "old"), atomic_write_text(tmp_path / "r.html", "old")

    def disk_full(handle) -> None:
        handle.write(b"half")
        raise OSError(errno.ENOSPC, "No space left on device", str(second))

    with pytest.raises(OSError), all_or_nothing():
        atomic_write_text(first, "new")
        atomic_write(second, disk_full)
    assert first.read_text() == "old" and second.read_text() == "old"
    assert sorted(os.listdir(tmp_path)) == ["r.html", "results.json"]
    with all_or_nothing():
        atomic_write_text(first, "new")
        atomic_write_text(second, "new")
        assert first.read_text() == "old"  # nothing replaced before the block ends
    assert first.read_text() == "new" and second.read_text() == "new"
