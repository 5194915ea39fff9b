"""B10 (docs/one_run.md): what M = 10,000 gradient canaries cost the user's own training.

The user's training: Opacus's MNIST example as its tutorials write it (``make_private``, Poisson sampling,
per-example gradients by hooks, SGD) — its CNN (two convolutions, two linear layers, 26,010 parameters) on the
60,000 Fashion-MNIST training images, expected batch 256, z = 1, C = 1 — for ``STEPS`` steps. The same script
with the lines of docs/one_run.md added (``GradientCanaries(10_000)``: 10,000 canaries, about half of them
records of the data set, and the default 1,000 null coordinates; ``add_to``, ``wrap``, ``attach``, ``save``) is
timed against it side by side: each run is a fresh process (so that peak memory is its own), in ``ROUNDS``
rounds whose order alternates (plain, canaried; canaried, plain; ...), so that a change of the machine's load
during a round, or a first-position advantage, hits both alike. Each process trains on ``THREADS`` intra-op
thread(s) (one by default): on cores shared with other jobs, a second thread mostly waits for its turn, which
inflates both the wall time and the CPU time (spinning) by whatever the load happens to be.

Records: ``b10_canary_overhead_time`` (wall seconds from the data set in memory to the weights written: the
canaries' set-up, the steps, and the release and manifest beside the weights), ``b10_canary_overhead_cpu`` (the
same in CPU seconds of the process: the work, which load from other processes on a shared machine does not
inflate) and ``b10_canary_overhead_memory`` (peak resident memory of the process; on CUDA the peak allocated on the
device), each with ratio = the median over rounds of with / without canaries, and its interquartile range
(``spread``). The budget is 1.2 for time and memory. ``b10_canary_overhead_step`` is the steps alone: both
trainings in one process, their ``STEPS`` steps alternating on the same batches, each step's CPU seconds (on CUDA,
synchronised wall seconds), ratio = the median over steps; it leaves out set-up and files, and process-to-process
variation. ``b10_canary_overhead_memory_increment`` is the peak memory above the process's memory before training
(the runtime, the libraries and the data set: the baseline that both trainings share, which hides the canaries'
share in the plain peak), with / without canaries, per round; ``…_increment_longer`` the same for one pair of
trainings of ``LONGER`` times the steps: the per-step release waits on disk
(:class:`~fdp_audit.auditing.one_run.manifest.ReleaseSpool`), so the ratio does not grow with T where a release
held in memory would add T·(M + M₀)·4 bytes (stated in the record). Each record also states the machine's
one-minute load average before and after the rounds.
``python -m benchmarks.b10_canary_overhead --device cuda`` measures on the GPU.
"""

from __future__ import annotations

import argparse
import io
import itertools
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import torch
from torch import nn

from benchmarks.timing import Record, ratio_record
from fdp_audit.atomic_io import atomic_write_bytes

CANARIES = 10_000
STEPS = 40
ROUNDS = 8
LONGER = 10  # b10_canary_overhead_memory_increment_longer: one pair of trainings of LONGER·STEPS steps
BATCH = 256
THREADS = 1


def make_cnn() -> nn.Module:
    """Opacus's MNIST example network (28×28 inputs, 10 classes)."""
    return nn.Sequential(nn.Conv2d(1, 16, 8, 2, padding=3), nn.ReLU(), nn.MaxPool2d(2, 1),
                         nn.Conv2d(16, 32, 4, 2), nn.ReLU(), nn.MaxPool2d(2, 1), nn.Flatten(),
                         nn.Linear(32 * 4 * 4, 32), nn.ReLU(), nn.Linear(32, 10))


def _fashion_mnist() -> torch.utils.data.TensorDataset:
    from torch.utils.data import TensorDataset

    from fdp_audit.data.images import load_fashion_mnist

    images = load_fashion_mnist()
    return TensorDataset(torch.as_tensor(images.images)[:, None], torch.as_tensor(images.labels))


def _made_private(train_set: torch.utils.data.Dataset, canaries: bool, device: str) -> tuple:
    """The script up to its training loop: (the canaries or None, model, optimizer, loader)."""
    from opacus import PrivacyEngine
    from torch.utils.data import DataLoader

    from fdp_audit.auditing.one_run.loop import GradientCanaries

    audit = None
    if canaries:
        audit = GradientCanaries(CANARIES, seed=0)
        train_set = audit.add_to(train_set)
    torch.manual_seed(0)
    model = make_cnn().to(device)
    if audit is not None:
        model = audit.wrap(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.25)
    loader = DataLoader(train_set, batch_size=BATCH, generator=torch.Generator().manual_seed(0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model, optimizer, loader = PrivacyEngine().make_private(
            module=model, optimizer=optimizer, data_loader=loader, noise_multiplier=1.0, max_grad_norm=1.0)
    if audit is not None:
        audit.attach(optimizer)
    return audit, model, optimizer, loader


def _step(model: nn.Module, optimizer: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor) -> None:
    optimizer.zero_grad()
    nn.functional.cross_entropy(model(x), y).backward()
    optimizer.step()


def _resident(key: str) -> float:
    with open("/proc/self/status") as status:
        return next(float(line.split()[1]) * 1024 for line in status if line.startswith(key + ":"))


def _memory_baseline(device: str) -> float | None:
    """The process's memory before training (the runtime, the libraries and the data set loaded), with its peak
    reset there: on CUDA the bytes allocated on the device; on the CPU the resident bytes (Linux resets the peak,
    VmHWM, through /proc/self/clear_refs; elsewhere None and no increment is measured)."""
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
        return float(torch.cuda.memory_allocated())
    try:
        with open("/proc/self/clear_refs", "w") as handle:
            handle.write("5")
    except OSError:
        return None
    return _resident("VmRSS")


def _train(canaries: bool, device: str, out: Path, threads: int = THREADS, steps: int = STEPS) -> dict[str, float]:
    """One training as the user's script runs it; the seconds from the data set to the weights written, the peak
    memory and its increment over the memory before training."""
    torch.set_num_threads(threads)
    train_set = _fashion_mnist()
    baseline = _memory_baseline(device)
    start, cpu_start = time.perf_counter(), time.process_time()
    audit, model, optimizer, loader = _made_private(train_set, canaries, device)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # epoch after epoch: one epoch is 235 steps plain and 254 canaried (Opacus keeps the expected batch, so the
        # canaries' records add steps to an epoch), and a budget of steps must not stop at an epoch's end
        for x, y in itertools.islice(itertools.chain.from_iterable(itertools.repeat(loader)), steps):
            _step(model, optimizer, x.to(device), y.to(device))
    if audit is not None:
        audit.save(model, out / "model.safetensors")
    else:
        buffer = io.BytesIO()
        torch.save(model._module.state_dict(), buffer)  # noqa: SLF001 - the user's own weights
        atomic_write_bytes(out / "model.pt", buffer.getvalue())
    if device == "cuda":
        torch.cuda.synchronize()
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    if device == "cuda":
        peak = float(torch.cuda.max_memory_allocated())
    else:
        peak = (_resident("VmHWM") if baseline is not None
                else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024.0)
    return {"seconds": seconds, "cpu_seconds": cpu, "peak_bytes": peak,
            "increment_bytes": None if baseline is None else peak - baseline}


def _paired_steps(device: str, threads: int = THREADS) -> dict[str, list[float]]:
    """Both trainings in one process, their steps alternating on the same batches (the canaried loader's): the
    seconds of each step on the process's CPU clock (CUDA: synchronised wall clock), without set-up or files."""
    torch.set_num_threads(threads)
    train_set = _fashion_mnist()
    plain, canaried = _made_private(train_set, False, device), _made_private(train_set, True, device)
    clock = time.perf_counter if device == "cuda" else time.process_time
    seconds: dict[str, list[float]] = {"with": [], "without": []}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for step, (x, y) in enumerate(canaried[3]):
            if step == STEPS + 1:
                break
            x, y = x.to(device), y.to(device)
            pairs = (("without", plain), ("with", canaried))
            for name, (_, model, optimizer, _) in (pairs if step % 2 else pairs[::-1]):
                start = clock()
                _step(model, optimizer, x, y)
                if device == "cuda":
                    torch.cuda.synchronize()
                if step:  # the first step of each builds Opacus's hooks' state
                    seconds[name].append(clock() - start)
    return seconds


def _child(kind: str, device: str, threads: int, steps: int = STEPS) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as folder:
        command = [sys.executable, "-m", "benchmarks.b10_canary_overhead", "--child", kind, "--device", device,
                   "--out", folder, "--threads", str(threads), "--steps", str(steps)]
        done = subprocess.run(command, capture_output=True, text=True, check=True,
                              cwd=Path(__file__).resolve().parents[1], env={**os.environ, "PYTHONWARNINGS": "ignore"})
    return json.loads(done.stdout.strip().splitlines()[-1])


def run(device: str = "cpu", rounds: int = ROUNDS, threads: int = THREADS) -> list[Record]:
    samples: dict[bool, list[dict[str, float]]] = {True: [], False: []}
    load_before = os.getloadavg()[0]
    for round_index in range(rounds):
        for canaries in ((False, True) if round_index % 2 == 0 else (True, False)):
            samples[canaries].append(_child("with" if canaries else "without", device, threads))
    steps = _child("steps", device, threads)
    # after the rounds, under the same load: one pair at LONGER times the steps
    longer = {canaries: _child("with" if canaries else "without", device, threads, LONGER * STEPS)
              for canaries in (False, True)}
    extra = {"device": device, "canaries": CANARIES, "steps": STEPS, "batch": BATCH, "threads": threads,
             "load": [round(load_before, 1), round(os.getloadavg()[0], 1)], "budget": 1.2}
    records = [ratio_record("b10_canary_overhead_time", [s["seconds"] for s in samples[True]],
                            [s["seconds"] for s in samples[False]], unit="s", scale=1.0, **extra),
               ratio_record("b10_canary_overhead_cpu", [s["cpu_seconds"] for s in samples[True]],
                            [s["cpu_seconds"] for s in samples[False]], unit="s", scale=1.0, **extra),
               ratio_record("b10_canary_overhead_memory", [s["peak_bytes"] for s in samples[True]],
                            [s["peak_bytes"] for s in samples[False]], unit="MiB", scale=1 / 2 ** 20, **extra),
               ratio_record("b10_canary_overhead_step", steps["with"], steps["without"], **extra)]
    if all(s["increment_bytes"] for group in (*samples.values(), longer.values()) for s in group):
        records += [
            ratio_record("b10_canary_overhead_memory_increment", [s["increment_bytes"] for s in samples[True]],
                         [s["increment_bytes"] for s in samples[False]], unit="MiB", scale=1 / 2 ** 20, **extra),
            ratio_record("b10_canary_overhead_memory_increment_longer", [longer[True]["increment_bytes"]],
                         [longer[False]["increment_bytes"]], unit="MiB", scale=1 / 2 ** 20,
                         **{**extra, "steps": LONGER * STEPS,
                            "release_in_memory_mib": round(LONGER * STEPS * (CANARIES + 1000) * 4 / 2 ** 20, 1)})]
    return records


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--child", choices=("with", "without", "steps"))
    parser.add_argument("--out")
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument("--threads", type=int, default=THREADS)
    parser.add_argument("--steps", type=int, default=STEPS)
    args = parser.parse_args()
    if args.child == "steps":
        print(json.dumps(_paired_steps(args.device, args.threads)))
        return
    if args.child:
        print(json.dumps(_train(args.child == "with", args.device, Path(args.out), args.threads, args.steps)))
        return
    for record in run(args.device, args.rounds, args.threads):
        print(json.dumps(record))


if __name__ == "__main__":
    main()
