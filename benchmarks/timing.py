"""Side-by-side timing (docs/training.md: every benchmark is a ratio measured in one run).

Candidates are timed in interleaved rounds (A, B, C, A, B, C, …) so that load from other processes on a
shared machine hits all of them alike; each round gives one time per candidate and one ratio per pair. A
record reports the median times, the median of the per-round ratios, and the interquartile range of those
ratios as ``spread``.

Benchmarks may be timed by the CPU time of the process (``CPU_CLOCK``, all its threads) instead of the wall
clock: on a machine shared with other jobs, wall time mostly measures how often the scheduler preempts
us, while CPU time measures the work done. For a single-threaded computation on an idle machine the two
agree.
"""

from __future__ import annotations

import contextlib
import statistics
import time
import warnings
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import torch

from fdp_audit.training.engine import train_models

Record = dict[str, Any]
Clock = Callable[[], float]
WALL_CLOCK: Clock = time.perf_counter
CPU_CLOCK: Clock = time.process_time


@contextlib.contextmanager
def torch_threads(count: int) -> Iterator[None]:
    """Run a block with ``count`` intra-op threads (others share this machine; one thread is steadier)."""
    previous = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def interleaved(candidates: Mapping[str, Callable[[], float | None]], rounds: int, warmup: int = 1,
                clock: Clock = WALL_CLOCK) -> dict[str, list[float]]:
    """Per-round seconds of each candidate on ``clock``. A candidate returns None to be timed from outside,
    or the seconds it measured itself (for candidates that must exclude their own set-up)."""
    samples: dict[str, list[float]] = {name: [] for name in candidates}
    for round_index in range(warmup + rounds):
        for name, run in candidates.items():
            start = clock()
            measured = run()
            elapsed = clock() - start if measured is None else measured
            if round_index >= warmup:
                samples[name].append(elapsed)
    return samples


def marginal_step_seconds(problem_with_steps: Callable[[int], Any], steps: int) -> Callable[[], float]:
    """A closure measuring the CPU seconds of one step of the engine's training: a run of ``1 + steps`` steps
    minus a run of one step, over ``steps`` (set-up, first-step and teardown costs cancel).
    ``problem_with_steps(T)`` builds the training problem with T steps."""
    short, long = problem_with_steps(1), problem_with_steps(1 + steps)

    def run() -> float:
        start = CPU_CLOCK()
        list(train_models(long, seed=0, model_indices=[0]))
        middle = CPU_CLOCK()
        list(train_models(short, seed=0, model_indices=[0]))
        return ((middle - start) - (CPU_CLOCK() - middle)) / steps

    return run


def optimizer_steps(module: torch.nn.Module, optimizer: torch.optim.Optimizer, criterion: Callable,
                    batches: list[tuple[torch.Tensor, torch.Tensor]]) -> Callable[[], None]:
    """A closure taking one optimiser step per ``(inputs, labels)`` batch, as an ordinary PyTorch loop does: the
    baselines' (Opacus's, a non-private step's) side of a step-time comparison."""

    def run() -> None:
        for xb, yb in batches:
            optimizer.zero_grad(set_to_none=True)
            criterion(module(xb), yb).backward()
            optimizer.step()

    return run


def opacus_private(module: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, mode: str, batch: int, lr: float,
                   noise: float, clip: float) -> tuple[torch.nn.Module, torch.optim.Optimizer, Callable, Any]:
    """``module`` made private by Opacus in ``mode`` (hooks or ghost) with SGD and a Poisson loader of expected
    ``batch``: its module, optimizer, criterion and loader (ghost mode wraps the criterion too)."""
    from opacus import PrivacyEngine  # a test oracle, not a dependency of the package

    optimizer = torch.optim.SGD(module.parameters(), lr=lr)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=batch)
    with warnings.catch_warnings():  # secure-RNG and accountant notices
        warnings.simplefilter("ignore")
        made = PrivacyEngine().make_private(module=module, optimizer=optimizer, data_loader=loader,
                                            criterion=torch.nn.CrossEntropyLoss(), noise_multiplier=noise,
                                            max_grad_norm=clip, grad_sample_mode=mode)
    if mode == "ghost":
        return made
    (module, optimizer, loader), criterion = made, torch.nn.CrossEntropyLoss()
    return module, optimizer, criterion, loader


def nonprivate_steps(module: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, lr: float, batch: int,
                     steps: int) -> Callable[[], None]:
    """``steps`` plain SGD steps on the first ``batch`` examples: the floor any private step is compared with."""
    optimizer = torch.optim.SGD(module.parameters(), lr=lr)
    return optimizer_steps(module, optimizer, torch.nn.CrossEntropyLoss(), [(x[:batch], y[:batch])] * steps)


def quartiles(values: list[float]) -> tuple[float, float]:
    if len(values) < 2:
        return values[0], values[0]
    q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q1, q3


def ratio_record(name: str, ours: list[float], baseline: list[float], unit: str = "ms",
                 scale: float = 1e3, **extra: Any) -> Record:
    """One JSON line: median times (in ``unit``), median per-round ratio ours/baseline, its IQR."""
    ratios = [a / b for a, b in zip(ours, baseline)]
    q1, q3 = quartiles(ratios)
    record: Record = {
        "name": name,
        "ours": round(statistics.median(ours) * scale, 4),
        "baseline": round(statistics.median(baseline) * scale, 4),
        "ratio": round(statistics.median(ratios), 4),
        "unit": unit,
        "n": len(ratios),
        "spread": [round(q1, 4), round(q3, 4)],
    }
    record.update(extra)
    return record


@contextlib.contextmanager
def phase_clock(targets: Mapping[str, tuple[Any, str]], clock: Clock = CPU_CLOCK) -> Iterator[dict[str, float]]:
    """Where a computation's time goes: inside the block, each function ``getattr(owner, name)``
    of ``targets`` (label → (owner, name)) is replaced by a wrapper that adds its seconds on ``clock`` to
    the yielded dict under its label. The targets must not call one another (no time is counted twice)."""
    seconds = dict.fromkeys(targets, 0.0)
    originals = {label: getattr(owner, name) for label, (owner, name) in targets.items()}

    def timed(label: str) -> Callable[..., Any]:
        function = originals[label]

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            start = clock()
            try:
                return function(*args, **kwargs)
            finally:
                seconds[label] += clock() - start

        return wrapper

    for label, (owner, name) in targets.items():
        setattr(owner, name, timed(label))
    try:
        yield seconds
    finally:
        for label, (owner, name) in targets.items():
            setattr(owner, name, originals[label])


def error_record(name: str, error: BaseException | str) -> Record:
    """A benchmark that could not run reports why instead of crashing the harness."""
    message = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
    return {"name": name, "error": message.splitlines()[0] if message else "failed"}
