"""The FDP paper's diffusion experiment on Fashion-MNIST (28×28), for a GPU (docs/generative.md):

    python -m benchmarks.diffusion_fmnist --fmnist /usr/share/datasets/fashion-mnist --device cuda

Trains the five mechanisms (non-private, public-only on the blurred images, DP-SGD, FDP by DP-SGD fine-tuning,
Algorithm 1) at ε = 8 on the first ``--train`` training images, measures the Fréchet distance of their samples to
the test images in the features of the suite's classifier, audits the training step (Algorithm 1 and the two
known-faulty variants), and prints every number with its wall time; the files go to ``--out`` (``report.html``
with the sample grids). The default sizes aim at under four minutes on one H100; ``--smoke`` runs the same code
in a minute on a CPU.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

import torch

from fdp_audit.data.images import FASHION_MNIST_DIR
from fdp_audit.errors import BadInputError
from fdp_audit.generative.audit.one_run import AuditPlan
from fdp_audit.generative.experiment import ExperimentPlan
from fdp_audit.generative.study import StudyData, run_study
from fdp_audit.generative.training.trainer import DiffusionSetup
from fdp_audit.reproduce.diffusion import PRIVATE_WEIGHT

PLAN = ExperimentPlan(DiffusionSetup(widths=(16, 32), embedding=64, steps=200, batch_size=256, learning_rate=5e-4,
                                     microbatch=256, private_weight=PRIVATE_WEIGHT),
                      seeds=2, samples_per_class=200, classifier_steps=1500, plain_steps=1500,
                      plain_learning_rate=2e-3)
AUDIT = AuditPlan(noise_multiplier=1.0, batch_size=100, steps=200, canaries=2000, candidates=2)
SMOKE = ExperimentPlan(DiffusionSetup(widths=(8, 16), embedding=16, diffusion_steps=10, steps=3, batch_size=16),
                       seeds=2, samples_per_class=4, grid_per_class=2, classifier_steps=5, plain_steps=3)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--fmnist", default=str(FASHION_MNIST_DIR), help="folder of the Fashion-MNIST IDX files")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--out", default="reports/diffusion_fmnist")
    parser.add_argument("--train", type=int, default=10_000, help="training images used (first N)")
    parser.add_argument("--seeds", type=int, default=PLAN.seeds)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes: checks the code path, not the result")
    args = parser.parse_args(argv)
    plan = replace(SMOKE if args.smoke else PLAN, seeds=args.seeds)
    audit = replace(AUDIT, steps=3, canaries=64, batch_size=16) if args.smoke else AUDIT
    data = StudyData("fashion_mnist", path=args.fmnist, psi="blur", psi_parameter=1.0,
                     train_limit=200 if args.smoke else args.train)
    start = time.perf_counter()
    device = torch.device(args.device)
    print(f"device {device}" + (f" ({torch.cuda.get_device_name(device)})" if device.type == "cuda" else ""),
          flush=True)
    def progress(line: str) -> None:
        print(f"[{time.perf_counter() - start:5.0f} s] {line}", flush=True)

    try:
        generative = run_study(data, plan, audit, Path(args.out), str(device),
                               command="python -m benchmarks.diffusion_fmnist " + " ".join(argv or []),
                               progress=progress)
    except BadInputError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    for v in generative["variants"]:
        d, t = v["distance"], v["train_seconds"]
        print(f"{v['mechanism']:>12}: Fréchet {d['mean']:8.2f} ± {d['sd']:6.2f} (seeds {json.dumps(v['distances'])}) "
              f"z={v['noise_multiplier']} train {t['mean']:.1f} s/seed, sample {v['sample_seconds']['mean']:.1f} s")
    print(f"floor (real images) {generative['reference']['real_train']['mean']:.2f}, public completions "
          f"{generative['reference']['public_completions']:.2f}, classifier accuracy "
          f"{generative['classifier_accuracy']:.3f}")
    print(f"ordering: {generative['ordering']} -> {'holds' if generative['ordering_holds'] else 'FAILS'}")
    for a in generative["audits"]:
        print(f"audit {a['mechanism']}: {a['status']} ({a['explanation']})")
    print(f"total {time.perf_counter() - start:.0f} s; report {Path(args.out) / 'report.html'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
