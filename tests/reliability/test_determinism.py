"""Determinism: the same config and seed give the same results.json, apart from its time stamp, the
checksum over it and the command line (which names the output folder), in separate processes with different
hash seeds and thread counts — on CPU. (tests/auditing/test_runner.py checks the same within one process; this
catches state that differs between processes: set or dict order under PYTHONHASHSEED, lazily initialised
generators, thread counts.) Randomness comes only from counter-based streams keyed by (seed, model index, step,
stream); see fdp_audit/training/streams.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from fdp_audit.training.checkpoint import load_checkpoint

VOLATILE = ("created", "checksum")


def run(argv: list[str], hash_seed: str, threads: str) -> None:
    env = {**os.environ, "PYTHONHASHSEED": hash_seed, "OMP_NUM_THREADS": threads, "FDP_AUDIT_DEBUG": "1"}
    done = subprocess.run([sys.executable, "-m", "fdp_audit", *argv], capture_output=True, text=True, env=env,
                          timeout=300)
    assert done.returncode in (0, 1), done.stderr[-2000:]  # 1: a violation, still a finished audit


def comparable(path: Path) -> dict[str, Any]:
    results = json.loads(path.read_text())
    out = {k: v for k, v in results.items() if k not in VOLATILE}
    out["reproducibility"] = {k: v for k, v in results["reproducibility"].items() if k != "command"}
    return out


@pytest.mark.slow
def test_same_config_and_seed_give_identical_results_across_processes(tmp_path: Path, small_config,
                                                                       write_yaml) -> None:
    config = write_yaml(tmp_path / "c.yaml", small_config(
        "fdp_sgd", rows=200, device="cpu", mechanism={"steps": 10},
        audit={"trials": 18, "games": ["attribute"], "attacks": ["prior", "likelihood", "gradient"]}))
    for name, hash_seed, threads in (("first", "1", "1"), ("second", "2", "2")):
        run(["audit", str(config), "--out", str(tmp_path / name)], hash_seed, threads)
        run(["train", str(config), "--out", str(tmp_path / name / "model.pt")], hash_seed, threads)
    first, second = comparable(tmp_path / "first" / "results.json"), comparable(tmp_path / "second" / "results.json")
    assert first == second
    assert first["reproducibility"]["seed"] == 0
    (params_a, meta_a, _), (params_b, meta_b, _) = (load_checkpoint(tmp_path / n / "model.pt")
                                                    for n in ("first", "second"))
    assert {k: v for k, v in meta_a.items() if k != "created"} == {k: v for k, v in meta_b.items() if k != "created"}
    for name in params_a:
        assert torch.equal(params_a[name], params_b[name]), name
