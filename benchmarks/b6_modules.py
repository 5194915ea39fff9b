"""B6 (docs/training.md): the nn.Module path and the user's own training.

Records (``python -m benchmarks.b6_modules [--device cuda]`` prints them; ``make bench`` runs the CPU ones):

* ``b6_module_engine_plan`` / ``b6_module_engine_vmap`` / ``b6_module_engine_loop``: the batched engine training
  R = 16 DP-SGD models of a user's ``nn.Module`` (an MLP 7-64-64-2 on the synthetic table), per model, against the
  built-in MLP of the same shape (ghost clipping). ``plan``: the module as the engine takes it, through its layer
  plan (per-layer ghost norms, :mod:`fdp_audit.training.layer_plan`); ``vmap``: the same module on the
  ``torch.func`` path (its plan dropped), ``vmap`` over stacked parameters; ``loop``: a module whose first layer
  writes its bias in place (no plan, and no batching rule over models: the loop over models).
* ``b6_opacus_audit_gradient`` / ``b6_opacus_audit_record``: one trial of the audit of an Opacus loop
  (``make_private``, Poisson sampling, hooks; the same MLP; 1,000 records, batch 64, 2 epochs = 32 steps) against
  Opacus training the same model on the same data alone: with a gradient canary (canary head, optimizer
  observed, threads chosen by fdp-audit) and with a record canary. The budget is a ratio of 1.5 against Opacus
  as the user runs it (torch's default threads); ``same_threads_ratio`` compares with Opacus alone on the
  threads fdp-audit chose, which isolates the audit's own overhead (canary head, observer).
* ``b6_opacus_with_epsilon``: the same with ``make_private_with_epsilon``: Opacus alone recalibrates z every
  training (seconds of RDP evaluations); the audit computes it once per target (ratio below 1).
* ``b6_third_party_audit``: the attribute game's trials of a third-party audit (a DP-SGD written from scratch in
  plain PyTorch, logistic regression on 1,000 records, p = 0.05, T = 40; R = 32 models: training, attacks,
  secrets) against the same function training the same models alone, as the user runs it (torch's default
  threads). The budget is a ratio of 1.3; the audit runs the function on the thread count the engine chooses, so
  ``same_threads_ratio`` compares with the function alone on that thread count too (same rounds, interleaved).

With ``--device cuda`` every record is measured on the GPU and on the CPU and the CUDA/CPU ratio is printed too.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import tempfile
import time
import warnings
from dataclasses import replace
from pathlib import Path

import torch
from torch import nn
from torch.utils.data import DataLoader

from benchmarks.timing import WALL_CLOCK, Record, interleaved, ratio_record
from fdp_audit.atomic_io import atomic_write_text
from fdp_audit.auditing.user_training import UserTrainer
from fdp_audit.config import DataConfig, OptimizerConfig
from fdp_audit.data.prepare import prepare_data
from fdp_audit.integrations.opacus import calibration_cached
from fdp_audit.mechanisms import MECHANISMS
from fdp_audit.threads import threads_for
from fdp_audit.training.engine import Hyperparameters, TrainingProblem, step_work, train_models
from fdp_audit.training.models import Model
from fdp_audit.training.modules import build_module_model

MODELS = 16
ROWS = 2000  # synthetic rows; half are the training set S
FACTORIES = '''
import torch
from torch import nn


class InPlaceLinear(nn.Linear):
    def forward(self, x):
        out = torch.zeros(x.shape[0], self.out_features, dtype=x.dtype, device=x.device)
        out += self.bias
        return out + x @ self.weight.T


def mlp(n_inputs, n_classes):
    return nn.Sequential(nn.Linear(n_inputs, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, n_classes))


def in_place(n_inputs, n_classes):
    return nn.Sequential(InPlaceLinear(n_inputs, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(),
                         nn.Linear(64, n_classes))
'''
THIRD_PARTY = '''
import torch
from torch.func import grad, vmap

from fdp_audit.training.models import example_loss


def train(problem, seed, canary):
    """DP-SGD of logistic regression from scratch: Poisson sampling, per-example clipping, Gaussian noise."""
    h, generator = problem.hyper, torch.Generator().manual_seed(seed)
    x, y = problem.x.float(), problem.y
    if bool(canary.in_private[0]):
        x, y = torch.cat([x, canary.x.float()]), torch.cat([y, canary.y])
    params = {name: torch.zeros(shape) for name, shape in problem.model.shapes().items()}

    def loss(p, xi, yi):
        return example_loss(problem.model.forward(p, xi), yi)

    per_example = vmap(grad(loss), in_dims=(None, 0, 0))
    for _ in range(h.steps):
        batch = torch.rand(len(x), generator=generator) < h.sample_rate
        grads = per_example(params, x[batch], y[batch])
        norms = torch.stack([g.flatten(1).norm(dim=1) for g in grads.values()]).norm(dim=0)
        factor = (h.clip_norm / (norms + 1e-12)).clamp(max=1.0)
        for name in params:
            summed = (grads[name] * factor.view(-1, *[1] * (grads[name].dim() - 1))).sum(dim=0)
            noise = torch.randn(params[name].shape, generator=generator) * h.noise_multiplier * h.clip_norm
            params[name] = params[name] - h.optimizer.lr * (summed + noise) / (h.sample_rate * problem.n)
    return params
'''
THIRD_PARTY_MODELS = 32


def _data():
    data = prepare_data(DataConfig(dataset="synthetic", protected=("protected",), synthetic_rows=ROWS), 0)
    x, y = data.tensors()
    return x, y, data


def _problem(model, x, y, data) -> TrainingProblem:
    hyper = Hyperparameters(noise_multiplier=1.0, sample_rate=0.064, steps=32, clip_norm=1.0,
                            optimizer=OptimizerConfig(lr=0.3))
    return TrainingProblem(model, x, y, data.public_map, None, MECHANISMS["dp_sgd"].recipe, hyper)


def engine_records(device: str, factories: Path, rounds: int) -> list[Record]:
    x, y, data = _data()
    planned = build_module_model(f"{factories}:mlp", x.shape[1], 2)
    vmapped = replace(planned, plan=None)
    looped = build_module_model(f"{factories}:in_place", x.shape[1], 2)
    builtin = Model("mlp", x.shape[1], 2, (64, 64))

    def timed(model) -> float:
        problem = _problem(model, x, y, data)
        start = WALL_CLOCK()
        for chunk in train_models(problem, 0, range(MODELS), device=device):
            next(iter(chunk.params.values())).sum().item()  # waits for the device
        return (WALL_CLOCK() - start) / MODELS

    samples = interleaved({"plan": lambda: timed(planned), "vmap": lambda: timed(vmapped),
                           "loop": lambda: timed(looped), "builtin": lambda: timed(builtin)}, rounds)
    return [ratio_record(f"b6_module_engine_{name}", samples[name], samples["builtin"], device=device,
                         per="model", models=MODELS, note="baseline: the built-in MLP of the same shape (ghost)")
            for name in ("plan", "vmap", "loop")]


def opacus_loop(device: str, target_epsilon: float | None):
    """A tutorial-style Opacus loop (make_private, Poisson sampling, hooks) that trains on ``device``."""
    from opacus import PrivacyEngine

    def train(module, dataset, seed):
        module = module.to(device)
        loader = DataLoader(dataset, batch_size=64, generator=torch.Generator().manual_seed(seed))
        optimizer = torch.optim.SGD(module.parameters(), lr=0.3)
        engine = PrivacyEngine(accountant="rdp")
        if target_epsilon is None:
            module, optimizer, loader = engine.make_private(module=module, optimizer=optimizer, data_loader=loader,
                                                            noise_multiplier=1.0, max_grad_norm=1.0)
        else:
            module, optimizer, loader = engine.make_private_with_epsilon(
                module=module, optimizer=optimizer, data_loader=loader, target_epsilon=target_epsilon,
                target_delta=1e-5, epochs=2, max_grad_norm=1.0)
        criterion = nn.CrossEntropyLoss()
        for _ in range(2):
            for xb, yb in loader:
                optimizer.zero_grad()
                criterion(module(xb.to(device)), yb.to(device)).backward()
                optimizer.step()
        return module

    return train


def opacus_records(device: str, factories: Path, rounds: int) -> list[Record]:
    x, y, _ = _data()
    model = build_module_model(f"{factories}:mlp", x.shape[1], 2)
    return (_opacus_records("b6_opacus_audit", None, device, model, x, y, rounds)
            + _opacus_records("b6_opacus_with_epsilon", 3.0, device, model, x, y, rounds))


def _opacus_records(name: str, target: float | None, device: str, model, x: torch.Tensor, y: torch.Tensor,
                    rounds: int) -> list[Record]:
    train = opacus_loop(device, target)
    trainer = UserTrainer(train, model, x, y, 1.0, 10.0, 0.064 * len(x))
    extra = (x[0], int(y[0]))
    seeds = iter(range(10**6))

    def alone(threads: bool = False) -> None:  # Opacus training the same model on the same n + 1 records
        seed = next(seeds)
        work = (len(x) + 1) * model.n_parameters
        with torch.random.fork_rng(devices=[]), threads_for(work) if threads else contextlib.nullcontext():
            torch.manual_seed(seed)
            train(trainer.fresh_module(seed), trainer.dataset(*extra), seed)

    def audited(sign: float | None) -> None:
        with calibration_cached():
            trainer.run(next(seeds), None if sign is not None else extra[0], extra[1], sign)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        samples = interleaved({"opacus": alone, "opacus_same_threads": lambda: alone(True),
                               "gradient": lambda: audited(1.0), "record": lambda: audited(None)}, rounds)
    note = ("baseline: Opacus training the same model alone, per trial, torch's default threads; budget ratio "
            "1.5; same_threads: ours over Opacus alone on the threads fdp-audit chose")
    records = []
    for kind in ("gradient", "record") if target is None else ("gradient",):
        same = ratio_record("", samples[kind], samples["opacus_same_threads"])
        records.append(ratio_record(f"{name}_{kind}" if target is None else name, samples[kind], samples["opacus"],
                                    device=device, per="trial", note=note, same_threads_baseline=same["baseline"],
                                    same_threads_ratio=same["ratio"]))
    return records


def third_party_record(code: Path, rounds: int) -> Record:
    """``b6_third_party_audit`` (module docstring): the audit's trials of the attribute game against the function
    alone on the same problem, seeds and canaries."""
    from fdp_audit.auditing.games import AttributeGame
    from fdp_audit.auditing.third_party import load_mechanism, trial_seed
    from fdp_audit.auditing.trials import play_game
    from fdp_audit.config import config_from_dict

    config = config_from_dict({
        "name": "b6_third_party", "seed": 0, "device": "cpu",
        "data": {"dataset": "synthetic", "protected": ["protected"], "synthetic_rows": ROWS},
        "model": {"kind": "logistic"},
        "mechanism": {"name": "dp_sgd", "third_party": f"{code}:train", "noise_multiplier": 1.0,
                      "sample_rate": 0.05, "steps": 40, "clip_norm": 1.0, "optimizer": {"name": "sgd", "lr": 0.5}},
        "audit": {"trials": THIRD_PARTY_MODELS, "games": ["attribute"], "attacks": ["prior", "likelihood"]}})
    data = prepare_data(config.data, config.seed)
    game = AttributeGame()
    setup = game.setup(config, data)
    indices = game.trial_indices(THIRD_PARTY_MODELS)
    canaries = game.canaries(config, setup, indices)
    train = load_mechanism(config.mechanism.third_party)

    def alone(threads: bool = False) -> None:
        for row, index in enumerate(indices):
            with threads_for(step_work(setup.problem)) if threads else contextlib.nullcontext():
                train(setup.problem, trial_seed(config.seed, int(index)), canaries.take(torch.tensor([row])))

    samples = interleaved({"audit": lambda: play_game(game, config, data) and None, "alone": alone,
                           "alone_same_threads": lambda: alone(True)}, rounds)
    same = ratio_record("", samples["audit"], samples["alone_same_threads"], unit="s", scale=1.0)
    return ratio_record("b6_third_party_audit", samples["audit"], samples["alone"], unit="s", scale=1.0,
                        per=f"{THIRD_PARTY_MODELS} models", note="baseline: the same function training the same "
                        "models alone, torch's default threads; budget ratio 1.3; same_threads: the audit over the "
                        "function alone on the threads fdp-audit chose", same_threads_baseline=same["baseline"],
                        same_threads_ratio=same["ratio"], same_threads_spread=same["spread"])


def _records(device: str, rounds: int) -> list[Record]:
    with tempfile.TemporaryDirectory() as folder:
        factories = Path(folder) / "bench_factories.py"
        atomic_write_text(factories, FACTORIES)
        start = time.perf_counter()
        records = engine_records(device, factories, rounds)
        print(f"# engine on {device}: {time.perf_counter() - start:.0f} s", file=sys.stderr, flush=True)
        records += opacus_records(device, factories, rounds)
        print(f"# engine and Opacus on {device}: {time.perf_counter() - start:.0f} s", file=sys.stderr, flush=True)
        if device == "cpu":
            code = Path(folder) / "bench_third_party.py"
            atomic_write_text(code, THIRD_PARTY)
            records.append(third_party_record(code, rounds))
        return records


def run() -> list[Record]:
    return _records("cpu", rounds=3)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        print("no CUDA device", file=sys.stderr)
        return 2
    records = _records(args.device, args.rounds)
    if args.device == "cuda":
        cpu = {r["name"]: r for r in _records("cpu", args.rounds)}
        for record in records:
            record["cpu_ours"] = cpu[record["name"]]["ours"]
            record["cuda_over_cpu"] = round(record["ours"] / cpu[record["name"]]["ours"], 4)
    for record in records:
        print(json.dumps(record), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
