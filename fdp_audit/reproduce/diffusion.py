"""``diffusion``: the FDP paper's diffusion experiment (Section 6.3, Figure 7) at laptop scale, on scikit-learn's
8×8 digits with the Gaussian blur (σ = 1) as the public feature, and the audit of the training step
(:mod:`fdp_audit.generative.study`).

Quick mode (CI): a 30-thousand-parameter denoiser, two seeds, 600 plain and 120 private steps. The full mode uses
more steps and seeds. The Fashion-MNIST variant is ``python -m benchmarks.diffusion_fmnist``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fdp_audit.generative.audit.one_run import AuditPlan
from fdp_audit.generative.experiment import ExperimentPlan
from fdp_audit.generative.study import StudyData, run_study
from fdp_audit.generative.training.trainer import DiffusionSetup
from fdp_audit.reproduce import Summary
from fdp_audit.reproduce.files import markdown_table, write_reproduction

DIGITS = StudyData("digits", psi="blur", psi_parameter=1.0)
# Algorithm 1's private weight α (g = g_pub + α·g_priv, post-processing of the noisy sum: privacy unchanged).
# Clipping shrinks the private correction ℓ(x) − ℓ(Ψ̃(x)) while the public gradient pulls, unclipped, towards the
# blurred images; α offsets that bias. Chosen among {1, 2, 4} on seed 0 of the quick run by its Fréchet distance
# (672, 401, 363), as the paper tunes α for Purchase100; the search is not accounted. Adam's steps hardly change
# when a whole gradient is scaled, so α matters only where a public part is added (Algorithm 1).
PRIVATE_WEIGHT = 4.0
QUICK = ExperimentPlan(DiffusionSetup(widths=(8, 16), embedding=32, steps=120, batch_size=128, learning_rate=5e-4,
                                     private_weight=PRIVATE_WEIGHT),
                       seeds=2, samples_per_class=50, classifier_steps=400, plain_steps=600, plain_learning_rate=2e-3)
FULL = ExperimentPlan(DiffusionSetup(widths=(8, 16), embedding=32, steps=300, batch_size=128, learning_rate=5e-4,
                                    private_weight=PRIVATE_WEIGHT),
                      seeds=5, samples_per_class=100, classifier_steps=800, plain_steps=1500, plain_learning_rate=2e-3)
AUDIT = AuditPlan(noise_multiplier=1.0, batch_size=14, steps=200, canaries=2000, candidates=2)


def markdown_sections(generative: dict[str, Any], quick: bool, plan: ExperimentPlan) -> list[str]:
    """Setup, the distance table, the ordering checks, the audits and the notes of a generative study.

    Args:
        generative: the study's results (:func:`fdp_audit.generative.study.run_study`).
        quick: whether the quick plan ran (said in the setup).
        plan: the plan that ran (its setup, seeds and samples per class).

    Returns:
        The markdown sections, in order.
    """
    setup = plan.setup
    text = (f"{generative['dataset']}; public feature {generative['public_feature']}; class-conditional DDPM "
            f"({generative['denoiser_parameters']} parameters, {setup.diffusion_steps} diffusion steps); "
            f"private mechanisms at ε = {setup.epsilon:g}, δ = {setup.delta:g} (p = "
            f"{generative['sample_rate']:.4g}, T = {setup.steps}, C = {setup.clip_norm:g}); "
            f"{plan.seeds} seeds, {plan.samples_per_class} samples per class; Fréchet distance in the features of "
            f"the suite's classifier (test accuracy {generative['classifier_accuracy']:.3f}), not Inception FID."
            + (" QUICK MODE." if quick else ""))
    rows = [[v["label"], f"{v['distance']['mean']:.1f} ± {v['distance']['sd']:.1f}",
             f"{v['distance']['min']:.1f} – {v['distance']['max']:.1f}",
             "—" if v["noise_multiplier"] is None else f"{v['noise_multiplier']:.3f}",
             f"{v['train_seconds']['mean']:.1f}", f"{v['sample_seconds']['mean']:.1f}", v["paper_fid"]]
            for v in generative["variants"]]
    table = markdown_table(["mechanism", "Fréchet distance", "min – max", "z", "training s", "sampling s",
                            "paper FID (AFHQ)"], rows)
    floor = generative["reference"]["real_train"]
    checks = "\n".join(f"- {name}: {'holds' if holds else 'DOES NOT HOLD'}"
                       for name, holds in generative["ordering"].items())
    audits = markdown_table(["mechanism", "verdict", "claimed ε", "best guesses (correct / guessed)"],
                            [[a["mechanism"], a["status"], f"{a['claimed_epsilon']:.3f}",
                              f"{a['best']['correct']} / {a['best']['guesses']} ({a['best']['threat_model']})"]
                             for a in generative["audits"]])
    notes = [f"- Floor: real training images score {floor['mean']:.1f} ± {floor['sd']:.1f} at the same sample size; "
             f"the public completions Ψ̃(x) themselves {generative['reference']['public_completions']:.1f}.",
             "- The paper's rejection step for blurry samples is not applied: every sample counts.",
             f"- Total wall time {generative['seconds']:.0f} s."]
    return [text, "## Sample quality", table, "## The paper's ordering (means over seeds)", checks,
            "## Audit of the training step (one run, gradient canaries)", audits, "## Notes\n\n" + "\n".join(notes)]


def run(out_dir: Path, quick: bool = False) -> Summary:
    """Train the class-conditional diffusion models of the module docstring, compare their samples and audit their
    training step; writes ``diffusion.md``, ``diffusion.json`` and the study's report under ``diffusion/``.

    Args:
        out_dir: the folder the reproduction writes into.
        quick: the seconds-long version the test suite runs (module docstring).

    Returns:
        The reproduction's summary: Fréchet distances, whether the paper's ordering holds, the audits' verdicts.
    """
    plan = QUICK if quick else FULL
    generative = run_study(DIGITS, plan, AUDIT, Path(out_dir) / "diffusion",
                           command=f"fdp-audit reproduce diffusion{' --quick' if quick else ''}")
    means = ", ".join(f"{v['mechanism']} {v['distance']['mean']:.0f}" for v in generative["variants"])
    verdicts = {a["mechanism"]: a["status"] for a in generative["audits"]}
    summary = (f"Fréchet distances {means}; ordering {'holds' if generative['ordering_holds'] else 'FAILS'}; "
               f"audits {verdicts}")
    payload = {"quick": quick, "generative": {k: v for k, v in generative.items() if k != "grids"},
               "verdicts": verdicts, "report": str(Path(out_dir) / "diffusion" / "report.html")}
    return write_reproduction(out_dir, "diffusion", "Diffusion models with a blurred public image (FDP paper, 6.3)",
                              markdown_sections(generative, quick, plan), payload, summary)
