"""``images``: image FDP end to end (docs/images.md) — the utility table of the GroupNorm CNN with Ψ a
block-average downsampling (the FDP paper's public-image set-up, Sec. 6.3, with downsampling for its blur), and
the registered image games (:mod:`fdp_audit.auditing.games.images`) on the same CNN.

Mechanisms at ε ∈ {1, 2, 4, 8} (δ = 1e-5, z calibrated to each ε): non-private SGD, public-only (the public
image, upsampled: (0, 0)-FDP), DP-SGD, FDP via DP-SGD fine-tuning from the public model (``fdp_dpsgd``) and
Algorithm 1 from the same public model (``fdp_sgd``, as in the paper, whose Alg. 1 starts from the public
initialisation; public pre-training costs nothing, Remark 2). Test accuracy on the real test images.

Games (K = 4 candidates sharing a public image, Ball = 1/4, judged against Theorem 4's 1 − f(1/4) with exact
Clopper–Pearson bounds at α = 0.05 over each game's comparisons, as ``fdp-audit audit`` plays and judges them):
the gradient-canary game for Algorithm 1 (the iterates attack's share of the Bayes-optimal advantage, target
≥ 0.9) and for the five known-faulty mechanisms (each must be caught), and the record-canary game with
final-model attacks; a figure (the report's drawing, as SVG) shows example canaries, their public image and each
attack's pick.

``fdp-audit reproduce images`` runs it on scikit-learn's 8×8 digits (2× downsampling: a 4×4 public image), which
ship with the package's dependencies; ``--quick`` shrinks it for CI. The Fashion-MNIST table is the command

    python -m fdp_audit.reproduce.images --fashion-mnist DIR [--device cuda] [--out DIR]

with DIR the folder of the four IDX files (Debian's ``dataset-fashion-mnist`` installs them in
/usr/share/datasets/fashion-mnist); it prints the table, the targets' verdicts and the step time on the device
against the CPU.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from fdp_audit.atomic_io import atomic_write_bytes
from fdp_audit.auditing.games import ImageGradientCanaryGame, ImageRecordCanaryGame
from fdp_audit.auditing.journal import Journal
from fdp_audit.auditing.runner import play_games
from fdp_audit.claim import noise_multiplier
from fdp_audit.config import Config, config_from_dict, load_config
from fdp_audit.data.prepare import PreparedData, prepare_data
from fdp_audit.errors import BadInputError
from fdp_audit.execution import InProcessExecutor
from fdp_audit.mechanisms import faulty_mechanisms
from fdp_audit.report.games import examples_svg
from fdp_audit.report.model import Node
from fdp_audit.report.texts import IMAGE_EXAMPLES_CAPTION
from fdp_audit.reproduce import CONFIGS, Summary
from fdp_audit.reproduce.accuracy_grid import AccuracyCell, accuracy_grid, cell
from fdp_audit.reproduce.files import markdown_table
from fdp_audit.reproduce.utility import compare_mechanisms
from fdp_audit.training.engine import train_models
from fdp_audit.training.run import build_problem, resolve_device

DIGITS_CONFIG, FASHION_CONFIG = CONFIGS / "images_digits.yaml", CONFIGS / "images_fashion_mnist.yaml"
RECONSTRUCTION_CONFIG = CONFIGS / "images_reconstruction.yaml"
EPSILONS, SEEDS = (1.0, 2.0, 4.0, 8.0), 2
QUICK_EPSILONS, QUICK_SEEDS, QUICK_STEPS = (2.0,), 1, 40
PRETRAINED = ("fdp_dpsgd", "fdp_sgd")
CANDIDATES, GAME_EPSILON, GAME_STEPS, GAME_RATE, GAME_ALPHA = 4, 2.0, 20, 0.25, 0.05
# (ε, p, T) a known-faulty mechanism is claimed at where it is not the games' own: halving z shows in full at p = 1
FAULT_CLAIMS = {"dp_sgd_half_noise": (4.0, 1.0, 10)}
GAME_ATTACKS = {ImageGradientCanaryGame.name: ("prior", "iterates", "iterates_public_aligned"),
                ImageRecordCanaryGame.name: ("prior", "likelihood", "informed_gradient")}
FAULTY_ORDER = ("dp_sgd_half_noise", "dp_sgd_no_clip", "dp_sgd_wrong_rate", "fdp_sgd_leaky_public",
                "fdp_sgd_shared_batch")


def target_lines(cells: Sequence[AccuracyCell], epsilons: Sequence[float]) -> list[str]:
    """The targets (docs/images.md): Algorithm 1 above DP-SGD at every ε and above public-only at ε ≥ 2, each
    stated with its points.

    Args:
        cells: the accuracy grid (it must hold fdp_sgd and dp_sgd at every ε, and public_only).
        epsilons: the ε values checked.

    Returns:
        One markdown list item per ε, saying whether the target is met.
    """
    public_only = cell(cells, "public_only").mean
    lines = []
    for e in epsilons:
        alg1, dp = cell(cells, "fdp_sgd", e).mean, cell(cells, "dp_sgd", e).mean
        verdict = "met" if alg1 > dp and (e < 2 or alg1 > public_only) else "NOT met"
        lines.append(f"- ε = {e:g}: Algorithm 1 {100 * alg1:.1f} % vs DP-SGD {100 * dp:.1f} % "
                     f"({100 * (alg1 - dp):+.1f}) and public-only {100 * public_only:.1f} % "
                     f"({100 * (alg1 - public_only):+.1f}): target {verdict}.")
    return lines


def _table(out_dir: Path, config: Config, data: PreparedData, epsilons: Sequence[float], seeds: int, quick: bool,
           setup: str, sections: Sequence[str] = (), payload: dict[str, Any] | None = None) -> Summary:
    mech = config.mechanism
    cells = accuracy_grid(config, data, epsilons, seeds, mech.public_pretrain_steps, pretrained=PRETRAINED)
    paper = ["- Paper (AFHQ diffusion, blurred images public): FDP (DP-SGD) and FDP (Alg. 1) beat both DP-SGD and "
             "the public-only model; the targets here are Algorithm 1 above DP-SGD at every ε and above the "
             "public-only model at ε ≥ 2.", *target_lines(cells, epsilons)]
    return compare_mechanisms(out_dir, "images", f"Image FDP: utility on {data.table_name}", config, data, epsilons,
                              seeds, setup, paper, quick, sections, payload, pretrained=PRETRAINED, cells=cells)


def _setup_text(config: Config, data: PreparedData) -> str:
    psi = data.public_map.spec()
    return (f"{data.table_name}: {data.train.n_rows} training images, test on {data.test.n_rows}; Ψ = {psi['kind']} "
            f"({psi}); GroupNorm CNN, channels {list(config.model.hidden) or 'default'};")


def game_config(mechanism: str, epsilon: float, rows: int, steps: int, sample_rate: float, game: str,
                trials: int) -> Config:
    """The games' setting: digits under 2× downsampling, a small GroupNorm CNN, ``mechanism`` claimed at ``epsilon``
    (δ = 1e-5), ``trials`` trials of the registered image ``game`` with K = :data:`CANDIDATES` and its attacks.
    Gradient canaries live on coordinates no record touches, so the data set's size only costs time.

    Args:
        mechanism: a registered mechanism (known-faulty ones are marked faulty).
        epsilon: the claimed ε.
        rows: the digits kept.
        steps: the private steps T.
        sample_rate: the Poisson sampling rate p.
        game: the registered image game's name.
        trials: the game's trials.

    Returns:
        The configuration.
    """
    return config_from_dict({
        "name": f"images_game_{mechanism}", "seed": 0, "device": "cpu",
        "data": {"dataset": "digits", "protected": [], "public_map": "downsample", "downsample_factor": 2,
                 "max_rows": rows, "population_fraction": 0.5},
        "model": {"kind": "cnn", "hidden": [4, 8]},
        "mechanism": {"name": mechanism, "faulty": mechanism in faulty_mechanisms(), "target_epsilon": epsilon,
                      "delta": 1e-5, "sample_rate": sample_rate, "public_batch_size": 16, "steps": steps,
                      "clip_norm": 1.0, "public_loss": "public_image",
                      "optimizer": {"name": "sgd", "lr": 0.2, "momentum": 0.9}},
        "audit": {"trials": trials, "alpha": GAME_ALPHA, "games": [game], "attacks": list(GAME_ATTACKS[game]),
                  "target_prior": [1 / CANDIDATES] * CANDIDATES, "canary_norm_factor": 10.0}})


def audit_game(config: Config) -> tuple[str, dict[str, Any]]:
    """The configured image game played and judged as ``fdp-audit audit`` does: the verdict and its section of
    ``results.json``.

    Args:
        config: a configuration of :func:`game_config` (one game).

    Returns:
        ``(verdict status, game section)``.
    """
    played = play_games(config, prepare_data(config.data, config.seed), Journal(None, ""), InProcessExecutor())
    (section,) = played.sections(config.audit.alpha)
    return played.verdict["status"], section


def outcome_rows(label: str | None, section: dict[str, Any]) -> list[list[str]]:
    """The judged attacks of a game's section as table rows (the prior, which is not judged, left out).

    Args:
        label: a first column (the mechanism), or None for none.
        section: the game's section of results.json.

    Returns:
        Per attack: successes/trials, rate, interval, limit and verdict as text.
    """
    return [([label] if label is not None else []) + [
        a["attack"], f"{a['successes']}/{a['trials']}", f"{a['rate']:.3f}", f"[{a['ci_low']:.3f}, {a['ci_high']:.3f}]",
        f"{a['bound']:.3f}", a["status"].upper()] for a in section["attacks"] if a["attack"] != "prior"]


def gradient_canary_section(trials: int, faulty_trials: int) -> tuple[str, dict[str, Any]]:
    """Algorithm 1 and the known-faulty mechanisms in the registered gradient-canary image game.

    Args:
        trials: Algorithm 1's trials.
        faulty_trials: each known-faulty mechanism's trials.

    Returns:
        ``(markdown section, payload)``: the outcomes table with Algorithm 1's share of the Bayes-optimal advantage,
        and per mechanism its verdict, whether it was caught, and its outcomes.
    """
    rows, payload = [], {}
    for mechanism in ("fdp_sgd", *FAULTY_ORDER):
        n = trials if mechanism == "fdp_sgd" else faulty_trials
        epsilon, rate, steps = FAULT_CLAIMS.get(mechanism, (GAME_EPSILON, GAME_RATE, GAME_STEPS))
        config = game_config(mechanism, epsilon, 80, steps, rate, ImageGradientCanaryGame.name, n)
        verdict, section = audit_game(config)
        rows += outcome_rows(mechanism, section)
        payload[mechanism] = {"verdict": verdict, "caught": verdict == "VIOLATION", "outcomes": section["attacks"]}
        if mechanism == "fdp_sgd":
            optimum = section["optimal_success"]
            iterates = next(a for a in section["attacks"] if a["attack"] == "iterates")
            share = [(v - 1 / CANDIDATES) / (optimum - 1 / CANDIDATES)
                     for v in (iterates["rate"], iterates["ci_low"], iterates["ci_high"])]
            payload[mechanism] |= {"bayes_optimal": optimum, "bayes_optimal_se": section["optimal_success_se"],
                                   "share": share[0], "share_interval": share[1:],
                                   "noise_multiplier": noise_multiplier(config.mechanism)}
    alg1 = payload["fdp_sgd"]
    text = (f"## Gradient canaries (iterates threat model)\n\nThe registered `{ImageGradientCanaryGame.name}` game: "
            f"K = {CANDIDATES} candidates, one present; the claim: ε = {GAME_EPSILON:g} at δ = 1e-5 "
            f"(z = {alg1['noise_multiplier']:.3f}), p = {GAME_RATE:g}, T = {GAME_STEPS}; {trials} trials for "
            f"Algorithm 1, {faulty_trials} per known-faulty mechanism"
            + "".join(f" ({m} claimed at ε = {e:g}, p = {p:g}, T = {t})" for m, (e, p, t) in FAULT_CLAIMS.items())
            + "; each attack's argmax guess over every trial, "
            f"its interval and verdict at α = {GAME_ALPHA:g} over the game's comparisons.\n\n"
            + markdown_table(["mechanism", "attack", "successes", "rate", "interval", "limit 1 − f(1/K)",
                              "verdict"], rows)
            + f"\n\nBayes-optimal success (known p and σ, Monte Carlo): {alg1['bayes_optimal']:.4f} ± "
              f"{alg1['bayes_optimal_se']:.4f}; the iterates attack realises {alg1['share']:.2f} of the Bayes-optimal "
              f"advantage (interval [{alg1['share_interval'][0]:.2f}, {alg1['share_interval'][1]:.2f}]; target ≥ 0.9). "
              "Known-faulty mechanisms caught: "
            + ", ".join(f"{m} {'yes' if payload[m]['caught'] else 'NO'}" for m in FAULTY_ORDER) + ".")
    return text, payload


def record_canary_section(out_dir: Path, trials: int) -> tuple[str, dict[str, Any]]:
    """Algorithm 1 in the registered record-canary image game with final-model attacks, and its example canaries
    drawn as the report draws them.

    Args:
        out_dir: where the examples' figure ``images_canaries.svg`` is written.
        trials: the game's trials.

    Returns:
        ``(markdown section, payload)``: verdict, outcomes and the figure's path.
    """
    config = game_config("fdp_sgd", GAME_EPSILON, 200, 60, 0.1, ImageRecordCanaryGame.name, trials)
    verdict, section = audit_game(config)
    figure = out_dir / "images_canaries.svg"
    atomic_write_bytes(figure, examples_svg(Node(section["examples"]), "example canaries").encode("utf-8"))
    attacks = ", ".join(a for a in GAME_ATTACKS[ImageRecordCanaryGame.name] if a != "prior")
    text = (f"## Record canaries (final model)\n\nThe registered `{ImageRecordCanaryGame.name}` game: the canary "
            f"is a digit whose protected part (what the 2×2 block means do not show) is one of K = {CANDIDATES} "
            f"random patterns; Algorithm 1 claimed at ε = {GAME_EPSILON:g}, {trials} trials; verdict {verdict}.\n\n"
            + markdown_table(["attack", "successes", "rate", "interval", "limit", "verdict"],
                             outcome_rows(None, section))
            + f"\n\n![example canaries]({figure.name})\n\n{IMAGE_EXAMPLES_CAPTION.format(attacks=attacks)}")
    return text, {"verdict": verdict, "outcomes": section["attacks"], "figure": str(figure)}


def reconstruction_section(trials: int) -> tuple[str, dict[str, Any]]:
    """DP-SGD in the registered continuous image game (``configs/images_reconstruction.yaml``): success within each
    ρ against Ball(ρ) (the prior's mean) and 1 − f(Ball(ρ)), per attack.

    Args:
        trials: the game's trials.

    Returns:
        ``(markdown section, payload)``: verdict and the attacks' points.
    """
    config = load_config(RECONSTRUCTION_CONFIG).with_overrides({"audit.trials": trials, "device": "cpu"})
    verdict, section = audit_game(config)
    rows = [[a["attack"], f"{p['rho']:.3f}", f"{p['ball']:.3f}", f"{p['successes']}/{a['trials']}",
             f"{p['rate']:.3f}", f"[{p['ci_low']:.3f}, {p['ci_high']:.3f}]", f"{p['bound']:.3f}", p["status"].upper()]
            for a in section["attacks"] for p in a["points"]]
    mech, prior = config.mechanism, section["prior"]
    text = ("## Reconstruction within ρ (continuous protected part, iterates threat model)\n\nThe registered "
            f"`image_reconstruction` game: blurred digits (σ = {config.data.blur_sigma:g}, τ = "
            f"{config.data.blur_tolerance:g}, m = {prior['dim']} protected dimensions), the protected part drawn "
            f"from N(0, {prior['scale']:g}² I_m); {mech.name} claimed at z = {mech.noise_multiplier:g}, p = "
            f"{mech.sample_rate:g}, T = {mech.steps}; {trials} trials; ρ where Ball(ρ) is "
            f"{', '.join(f'{b:g}' for b in sorted(config.audit.ball_levels))}; verdict {verdict}.\n\n"
            + markdown_table(["attack", "ρ", "Ball(ρ)", "successes", "rate", "interval", "bound 1 − f(Ball)",
                              "status"], rows))
    return text, {"verdict": verdict, "attacks": section["attacks"]}


def run(out_dir: Path, quick: bool = False) -> Summary:
    """The digits utility table of image FDP and the three registered image games (module docstring); writes
    ``images.md``, ``images.json`` and ``images_canaries.svg``.

    Args:
        out_dir: the folder the reproduction writes into.
        quick: the seconds-long version the test suite runs (module docstring).

    Returns:
        The reproduction's summary.
    """
    out_dir = Path(out_dir)
    config = load_config(DIGITS_CONFIG)
    if quick:
        config = config.with_overrides({"mechanism.steps": QUICK_STEPS, "mechanism.public_pretrain_steps": QUICK_STEPS})
    data = prepare_data(config.data, config.seed)
    epsilons, seeds = (QUICK_EPSILONS, QUICK_SEEDS) if quick else (EPSILONS, SEEDS)
    gradient_text, gradient_payload = gradient_canary_section(*((64, 64) if quick else (1000, 200)))
    record_text, record_payload = record_canary_section(out_dir, 32 if quick else 200)
    reconstruction_text, reconstruction_payload = reconstruction_section(32 if quick else 200)
    payload = {"gradient_canaries": gradient_payload, "record_canaries": record_payload,
               "reconstruction": reconstruction_payload}
    return _table(out_dir, config, data, epsilons, seeds, quick, _setup_text(config, data),
                  [gradient_text, record_text, reconstruction_text], payload)


def step_seconds(config: Config, data: PreparedData, device: torch.device, steps: int = 20) -> float:
    """Wall seconds of one Algorithm 1 step (one model) on ``device``: ``steps + 1`` steps minus 1, so set-up
    is excluded. The noise multiplier is the configuration's, fixed, so the shorter runs are not re-calibrated.

    Args:
        config: the configuration whose mechanism is timed.
        data: the prepared data.
        device: where the step runs (CUDA is synchronised around the timing).
        steps: the steps timed.

    Returns:
        Seconds per step.
    """
    fixed = config.with_overrides({"mechanism.noise_multiplier": noise_multiplier(config.mechanism)})

    def timed(count: int) -> float:
        problem = build_problem(fixed.with_overrides({"mechanism.steps": count,
                                                      "mechanism.public_pretrain_steps": 0}), data)
        if device.type == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        list(train_models(problem, 0, [0], device=device))
        if device.type == "cuda":
            torch.cuda.synchronize()
        return time.perf_counter() - start

    timed(2)  # warm-up: kernels, allocator
    return (timed(steps + 1) - timed(1)) / steps


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m fdp_audit.reproduce.images --fashion-mnist DIR``: the utility table on Fashion-MNIST, printed and
    written, then the time of one step on the device (and on the CPU beside it).

    Args:
        argv: the command-line arguments (``sys.argv[1:]`` when None).

    Returns:
        The exit code: 0, or 2 for bad input (its message on stderr).
    """
    parser = argparse.ArgumentParser(prog="python -m fdp_audit.reproduce.images",
                                     description="Utility table of image FDP on Fashion-MNIST (docs/images.md).")
    parser.add_argument("--fashion-mnist", required=True, metavar="DIR", help="folder of the Fashion-MNIST IDX files")
    parser.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    parser.add_argument("--out", default="reports/reproduce", help="output folder for images.md / images.json")
    parser.add_argument("--seeds", type=int, default=SEEDS)
    parser.add_argument("--epsilons", type=float, nargs="+", default=list(EPSILONS), metavar="EPS")
    parser.add_argument("--steps", type=int, help="private steps (default: the config's)")
    parser.add_argument("--pretrain-steps", type=int, help="public pre-training steps (default: the config's)")
    args = parser.parse_args(argv)
    try:
        overrides = {"device": args.device, "data.path": args.fashion_mnist}
        if args.steps is not None:
            overrides["mechanism.steps"] = args.steps
        if args.pretrain_steps is not None:
            overrides["mechanism.public_pretrain_steps"] = args.pretrain_steps
        config = load_config(FASHION_CONFIG).with_overrides(overrides)
        mech = config.mechanism
        start = time.perf_counter()
        data = prepare_data(config.data, config.seed)
        summary = _table(Path(args.out), config, data, args.epsilons, args.seeds, False, _setup_text(config, data))
        print(Path(summary["markdown"]).read_text(encoding="utf-8"))
        device = resolve_device(args.device)
        on_device = step_seconds(config, data, device)
        line = f"Algorithm 1 step (one model, expected batch {mech.sample_rate * data.train.n_rows:.0f}): " \
               f"{1e3 * on_device:.1f} ms on {device.type}"
        if device.type != "cpu":
            on_cpu = step_seconds(config, data, torch.device("cpu"), steps=5)
            line += f", {1e3 * on_cpu:.1f} ms on the CPU ({on_cpu / on_device:.1f}× slower)"
        print(line)
        print(f"total {time.perf_counter() - start:.0f} s")
    except BadInputError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
