"""``fdp-audit reproduce`` runs from the built wheel, outside the checkout: the configs the reproductions read
are package data (fdp_audit/configs, a link to the repository's configs/ in a checkout)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NOT_SOURCES = shutil.ignore_patterns(".git", ".venv", "reports", "build", "*.egg-info", "__pycache__", ".*_cache",
                                     ".hypothesis", "*.pt")

# Runs the reproduction in a fresh interpreter whose fdp_audit is the unpacked wheel, recording every file it
# opens; prints the files opened inside the checkout (there must be none; the environment's own files, as a
# .venv in the checkout, do not count) and where fdp_audit came from.
_RUN = r"""
import json, sys
checkout, out = sys.argv[1] + "/", sys.argv[2]
opened = []
sys.addaudithook(lambda event, args: opened.append(str(args[0])) if event == "open" and isinstance(args[0], str)
                 else None)
import fdp_audit
from fdp_audit.cli import main
code = main(["reproduce", "label_dp", "--quick", "--out", out])
inside = {p for p in opened if p.startswith(checkout) and not p.startswith(sys.prefix + "/")}
print(json.dumps({"code": code, "package": fdp_audit.__file__, "from_checkout": sorted(inside)}))
"""


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel built from a copy of the sources (a build in place would leave build/ in the checkout)."""
    folder = tmp_path_factory.mktemp("wheel")
    shutil.copytree(ROOT, folder / "src", symlinks=True, ignore=NOT_SOURCES)
    subprocess.run([sys.executable, "-m", "pip", "wheel", str(folder / "src"), "--no-deps", "--no-build-isolation",
                    "-q", "-w", str(folder / "dist")], check=True, capture_output=True, timeout=300)
    (built,) = (folder / "dist").glob("fdp_audit-*.whl")
    return built


@pytest.mark.slow
def test_the_wheel_carries_every_shipped_config(wheel: Path):
    shipped = {f"fdp_audit/configs/{p.relative_to(ROOT / 'configs').as_posix()}"
               for p in (ROOT / "configs").rglob("*") if p.is_file()}
    with zipfile.ZipFile(wheel) as archive:
        assert shipped <= set(archive.namelist())


@pytest.mark.slow
def test_reproduce_runs_from_the_unpacked_wheel_outside_the_checkout(wheel: Path, tmp_path: Path):
    site, outside = tmp_path / "site", tmp_path / "elsewhere"
    outside.mkdir()
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(site)
    env = {**os.environ, "PYTHONPATH": str(site), "MPLBACKEND": "Agg"}
    done = subprocess.run([sys.executable, "-c", _RUN, str(ROOT), str(outside / "out")], cwd=outside, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["code"] == 0
    assert Path(report["package"]).is_relative_to(site)
    assert report["from_checkout"] == []
    assert json.loads((outside / "out" / "label_dp.json").read_text())
