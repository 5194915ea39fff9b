"""``corrdp`` and ``profile``: the existing CorrDP (docs/corrdp.md) and privacy-profile (docs/profiles.md) pipelines as
reproduction entries — the same code as ``fdp-audit corrdp`` and ``fdp-audit profile`` on the shipped
configs, with their paper comparisons collected into one table each."""

from __future__ import annotations

from pathlib import Path

from fdp_audit.atomic_io import atomic_write_bytes, atomic_write_json
from fdp_audit.config import load_config
from fdp_audit.reproduce import CONFIGS, Summary
from fdp_audit.reproduce.files import markdown_table, write_reproduction

QUICK_CORRDP = {"corrdp.steps": 50, "corrdp.seeds": 1, "corrdp.epsilons": (0.1, 1.0)}
QUICK_PROFILE = {"profile.rows": 300, "profile.samples": 50, "profile.sweep_points": 9}


def run_corrdp(out_dir: Path, quick: bool = False) -> Summary:
    """Paper Table 2 (TV per insensitive Adult feature) and the synthetic ridge utility curves (Fig. 1a); writes
    ``corrdp.md``, ``corrdp.json`` and the pipelines' files under ``corrdp/``.

    Args:
        out_dir: the folder the reproduction writes into.
        quick: the seconds-long version the test suite runs (module docstring).

    Returns:
        The reproduction's summary.
    """
    from fdp_audit.corrdp.experiments import train_experiment, tv_experiment, utility_figure

    folder = Path(out_dir) / "corrdp"
    table2 = load_config(CONFIGS / "corrdp_adult_table2.yaml")
    tv = tv_experiment(table2)
    atomic_write_json(folder / "corrdp_tv.json", tv)
    synthetic = load_config(CONFIGS / "corrdp_synthetic.yaml")
    if quick:
        synthetic = synthetic.with_overrides(QUICK_CORRDP)
    train = train_experiment(synthetic)
    atomic_write_json(folder / "corrdp_train.json", train)
    atomic_write_bytes(folder / "corrdp_utility.png", utility_figure(train))
    rows = [[f["feature"], f["estimate"], f["paper_table2"] if f["paper_table2"] is not None else "—",
             f["upper"]] for f in tv.get("features", [])]
    sections = ["Paper Table 2 (CorrDP, Adult): estimated TV of each insensitive feature against the paper's value.",
                markdown_table(["feature", "TV estimate", "paper Table 2", "upper bound (Def. 4.3)"], rows),
                "Synthetic ridge utility curves (paper Fig. 1a): `corrdp/corrdp_utility.png`, numbers in "
                "`corrdp/corrdp_train.json`." + (" QUICK MODE (fewer steps and seeds)." if quick else "")]
    summary = "; ".join(f"TV({f['feature']}) = {f['estimate']:.3f} (paper {f['paper_table2']})"
                        for f in tv.get("features", []))
    return write_reproduction(out_dir, "corrdp", "CorrDP: feature TV (paper Table 2) and utility curves", sections,
                              {"quick": quick, "tv_features": tv.get("features", [])}, summary)


def run_profile(out_dir: Path, quick: bool = False) -> Summary:
    """Privacy profiles and the ε transition of output perturbation on Adult (``configs/profile_adult.yaml``);
    writes ``profile.md``, ``profile.json`` and the pipeline's figures and arrays under ``profile/``.

    Args:
        out_dir: the folder the reproduction writes into.
        quick: the seconds-long version the test suite runs (module docstring).

    Returns:
        The reproduction's summary: the ε transition.
    """
    from fdp_audit.profiles.compute import run_profile as profile_pipeline
    from fdp_audit.profiles.outputs import write_outputs

    config = load_config(CONFIGS / "profile_adult.yaml")
    if quick:
        config = config.with_overrides(QUICK_PROFILE)
    results = write_outputs(profile_pipeline(config), Path(out_dir) / "profile")
    transition = results["transition"]
    rows = [[key, transition[key]] for key in ("epsilon_low", "epsilon_star", "epsilon_high")]
    sections = [f"Adult, columns {', '.join(config.profile.columns)}, {config.profile.mechanism} output perturbation, "
                f"{config.profile.samples} model samples; figures and arrays in `profile/`."
                + (" QUICK MODE (fewer rows and samples)." if quick else ""),
                markdown_table(["transition", "ε"], rows)]
    summary = ", ".join(f"{key} = {transition[key]:.4g}" for key in ("epsilon_low", "epsilon_star", "epsilon_high"))
    return write_reproduction(out_dir, "profile", "Privacy profiles and the ε transition", sections,
                              {"quick": quick, "transition": transition}, summary)
