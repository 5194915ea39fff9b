"""The checkpoint audit (docs/games.md): attack the real training records of a trained
checkpoint and compare the attacks' success with the *estimated* Theorem 4 bound. Informational: it fails
the gate only when ``audit.gate_on_estimated`` is true.

1. The checkpoint is read with ``torch.load(weights_only=True)``
   (:func:`fdp_audit.training.checkpoint.load_checkpoint`); its metadata holds the training config, the
   accounted mechanism (z, p, T, C, δ) and the data set's fingerprint. The data are prepared again from that
   config and refused unless the fingerprint matches: attacking other records would measure nothing.
2. The secret is each training record's first protected attribute (categorical). The adversary knows
   everything else of the record: its public features, its label and its other protected attributes. That
   is Ψ'(x) = x without the secret, a refinement of Ψ (Ψ'(x) = Ψ'(x') implies Ψ(x) = Ψ(x')), so an
   f-DP^Ψ mechanism is also f-DP^Ψ' (a simulator for Ψ computes Ψ(x) from Ψ'(x)) and Theorem 4 applies
   with ``Ball_i = max_v Pr[v | Ψ'(x_i)]`` — the same adversary as the record-canary game.
3. ``Pr[v | Ψ'(x)]`` is estimated on the disjoint population split: a multinomial logistic regression fitted
   on two thirds of it and calibrated by temperature scaling (one parameter, minimum log loss) on the last
   third (Guo et al. 2017). ``Ball_i`` is the calibrated classifier's largest probability and the
   per-record bound is ``1 − f(Ball_i)`` with f the checkpoint's accounted add/remove curve (docs/accounting.md: the
   mean success is compared with the mean of the per-record bounds).
4. The final-model attacks (``prior``, ``likelihood``, ``gradient``) score every record's candidates in one
   vectorised call per chunk of records (the attacks' per-trial targets, with the one model broadcast).

The records' successes share one model and the Balls are estimates, so the Clopper–Pearson intervals are
descriptive; that is why the section does not gate by default.
"""

from __future__ import annotations

import datetime
import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from scipy.optimize import minimize_scalar
from scipy.special import log_softmax

from attacks import ATTACKS, Knowledge, View, checkpoint_attacks
from fdp_audit.auditing.gate import INFORMATIONAL, comparison_status, judge
from fdp_audit.auditing.labels import attack_words, audit_title
from fdp_audit.auditing.stats import clopper_pearson
from fdp_audit.claim import Claim, noise_multiplier
from fdp_audit.config import EXECUTION_FIELDS, AuditConfig, Config, ReportConfig, config_from_dict
from fdp_audit.data.encoding import ColumnGroup
from fdp_audit.data.prepare import PreparedData, prepare_data
from fdp_audit.errors import BadInputError
from fdp_audit.json_numbers import finite_or_none
from fdp_audit.mechanisms import MECHANISMS
from fdp_audit.training.checkpoint import load_checkpoint
from fdp_audit.training.engine import accuracy
from fdp_audit.training.models import Model, Params

CALIBRATION_SHARE = 1 / 3
GRADIENT_FLOATS_PER_CHUNK = 1 << 24  # per-candidate gradients materialised at once (64 MiB)


@dataclass(frozen=True)
class Checkpoint:
    """A loaded checkpoint and the configuration it was trained with, its privacy claim pinned to the
    metadata (the accounted z, p, T, C, δ of the run that produced the weights)."""

    path: Path
    sha256: str
    params: Params
    metadata: dict[str, Any]
    model: Model
    config: Config


@dataclass(frozen=True)
class AttributePrior:
    """Calibrated estimate of ``Pr[v | Ψ'(x)]`` for the training records, ``[n, V]``, and how it was made."""

    probabilities: np.ndarray
    temperature: float
    calibration_error: float  # expected calibration error of the top probability on the calibration rows
    fit_rows: int
    calibration_rows: int


# the recipe's numbers that the checkpoint's metadata pins, over whatever its embedded config says
PINNED_METADATA = {"name": "mechanism", **{key: key for key in (
    "faulty", "sample_rate", "steps", "clip_norm", "delta", "public_pretrain_steps", "public_batch_size",
    "private_weight", "noise_multiplier")}}


# the config fields that name code to run; only a config given on the command line may set them
CODE_FIELDS = ("model.factory", "mechanism.training", "mechanism.third_party")


def named_code(raw: dict[str, Any]) -> dict[str, str]:
    """The code a raw config names.

    Args:
        raw: a config as a mapping (a checkpoint's embedded config).

    Returns:
        ``{dotted field: spec}`` for each field of :data:`CODE_FIELDS` that is set.
    """
    named = {}
    for dotted in CODE_FIELDS:
        section, key = dotted.split(".")
        value = raw.get(section, {}).get(key) if isinstance(raw.get(section), dict) else None
        if value is not None:
            named[dotted] = str(value)
    return named


def read_checkpoint(path: str | Path) -> Checkpoint:
    """Load and validate a checkpoint; its embedded config must itself be a valid config.

    A checkpoint is untrusted: its config is kept for the data and the recipe, but it never names code to run
    (the fields of :data:`CODE_FIELDS` are dropped here, the model is the metadata's built-in architecture, and
    :func:`replay_config` refuses to replay a recipe that named code), nor where trials run (the execution fields
    are reset to the defaults: a scheduler it named would send replies the client unpickles; the caller's own
    choice applies on top), nor a folder to write (``report.out_dir`` is reset to the default). A relative
    ``data.path`` is resolved from the checkpoint's folder, where ``train``
    stored it relative to, so a checkpoint moved with its data still finds them.

    Args:
        path: the checkpoint file (``fdp-audit train``'s).

    Returns:
        The checkpoint with its validated, pinned config and its SHA-256.

    Raises:
        BadInputError: the file is not a readable checkpoint, or its metadata or embedded config is missing or
            invalid (naming ``checkpoint.metadata.…``).
    """
    path = Path(path)
    params, metadata, model = load_checkpoint(path)
    raw = metadata.get("config")
    if not isinstance(raw, dict):
        raise BadInputError("missing the training configuration", "checkpoint.metadata.config")
    if isinstance(raw.get("mechanism"), dict):  # z, p, T, C and δ come from the metadata, never a target ε
        mechanism = {k: v for k, v in raw["mechanism"].items() if k != "target_epsilon"}
        if mechanism.get("noise_multiplier") is None and metadata.get("noise_multiplier") is not None:
            # a config that asked for a target ε stated no z; the z it was calibrated to is the metadata's
            mechanism["noise_multiplier"] = metadata["noise_multiplier"]
        raw = {**raw, "mechanism": mechanism}
    try:
        config = config_from_dict(raw)
    except BadInputError as err:
        raise BadInputError(str(err), "checkpoint.metadata.config") from err
    data_path = config.data.path
    if data_path is not None and not Path(data_path).is_absolute():
        data_path = str(path.parent / data_path)
    info = MECHANISMS[metadata["mechanism"]]
    pinned = {f"mechanism.{field}": metadata[key] for field, key in PINNED_METADATA.items()}
    if not info.recipe.private:
        pinned["mechanism.noise_multiplier"] = None
    pinned.update({"mechanism.target_epsilon": None, "data.path": data_path, "report.out_dir": ReportConfig().out_dir,
                   **dict.fromkeys(CODE_FIELDS), "mechanism.integration": "none",
                   **{f"audit.{name}": getattr(AuditConfig(), name) for name in EXECUTION_FIELDS},
                   "model.kind": model.kind, "model.hidden": model.hidden})
    config = config.with_overrides(pinned, {f"mechanism.{field}": f"checkpoint.metadata.{key}"
                                            for field, key in PINNED_METADATA.items()})
    sha256 = hashlib.sha256(path.read_bytes()).hexdigest()
    return Checkpoint(path, sha256, params, metadata, model, config)


def read_external_checkpoint(path: str | Path, config: Config) -> Checkpoint:
    """External weights (:mod:`fdp_audit.training.state_dicts`) audited as a checkpoint: the model is the
    config's factory, the claim and the data are the config's. The file only provides tensors.

    Args:
        path: the weights file (a state dict, ``.pt`` or ``.safetensors``).
        config: the validated configuration that states the model, the claim and the data.

    Returns:
        The weights as a checkpoint, with metadata made from the config.

    Raises:
        BadInputError: the file cannot be read or its tensors do not fit the config's model.
    """
    from fdp_audit.training.architectures import build_model
    from fdp_audit.training.state_dicts import external_metadata, module_params, read_state_dict

    path = Path(path)
    tensors, sha256 = read_state_dict(path)
    data = prepare_data(config.data, config.seed)
    model = build_model(config.model, data.train.n_features, data.train.n_classes)
    params = module_params(tensors, model, path.name)
    metadata = external_metadata(config, data.fingerprint, noise_multiplier(config.mechanism))
    return Checkpoint(path, sha256, params, metadata, model, config)


def replay_config(checkpoint: Checkpoint, trials: int) -> Config:
    """The config of a game audit of ``trials`` trials replaying the checkpoint's recipe: the built-in mechanism
    its metadata names, with the claim's numbers. A recipe that names code (a third-party mechanism, the user's
    training or model factory) is refused: a checkpoint cannot make the audit import a file, and its built-in
    name alone would audit other code.

    Args:
        checkpoint: the read checkpoint.
        trials: the audit's trials.

    Returns:
        The checkpoint's config with ``audit.trials`` set.

    Raises:
        BadInputError: the recipe names code, or ``trials`` is out of range (both naming ``games``).
    """
    named = named_code(checkpoint.metadata["config"])
    if named:
        field, spec = next(iter(named.items()))
        raise BadInputError(f"the checkpoint's recipe names code ({field}: {spec[:80]!r}); a checkpoint never runs "
                            "code: audit a config you wrote that names it", "games")
    return checkpoint.config.with_overrides({"audit.trials": trials}, {"audit.trials": "games"})


def checkpoint_data(checkpoint: Checkpoint) -> PreparedData:
    """The checkpoint's training data, prepared again from its config; refused unless its fingerprint is
    the one recorded at training time.

    Args:
        checkpoint: the read checkpoint.

    Returns:
        The prepared data.

    Raises:
        BadInputError: the fingerprint or the number of model inputs differs from the checkpoint's.
    """
    config = checkpoint.config
    data = prepare_data(config.data, config.seed)
    if data.fingerprint != checkpoint.metadata["dataset_fingerprint"]:
        raise BadInputError(
            f"the data prepared from the checkpoint's config (fingerprint {data.fingerprint}) are not the data it "
            f"was trained on ({checkpoint.metadata['dataset_fingerprint']}); the records cannot be attacked",
            "checkpoint.metadata.dataset_fingerprint")
    if data.train.n_features != checkpoint.model.n_inputs:
        raise BadInputError(f"model expects {checkpoint.model.n_inputs} inputs, the data have "
                            f"{data.train.n_features}", "checkpoint.metadata.model.n_inputs")
    return data


def secret_attribute(data: PreparedData) -> ColumnGroup:
    """The secret the checkpoint audit infers: the data's first protected attribute, which must be categorical.

    Args:
        data: the prepared data.

    Returns:
        The attribute's one-hot column group.

    Raises:
        BadInputError: the first protected attribute is missing or not categorical.
    """
    split = data.column_split()
    if not split.protected_groups or split.protected_groups[0].kind != "categorical":
        raise BadInputError("the checkpoint audit needs a categorical first protected attribute", "data.protected")
    return split.protected_groups[0]


def adversary_features(x: np.ndarray, y: np.ndarray, group: ColumnGroup, n_classes: int) -> np.ndarray:
    """Ψ'(x): every encoded column but the secret's, and the label one-hot.

    Args:
        x: encoded records, shape (n, d).
        y: their labels, shape (n,).
        group: the secret attribute's column group.
        n_classes: the number of labels.

    Returns:
        The features, shape (n, d − categories + n_classes).
    """
    keep = np.r_[0:group.start, group.stop:x.shape[1]]
    return np.concatenate([x[:, keep], np.eye(n_classes, dtype=x.dtype)[y]], axis=1)


def _temperature(log_probabilities: np.ndarray, truth: np.ndarray) -> float:
    """The temperature T minimising the log loss of ``softmax(log p / T)`` (searched over log T)."""
    rows = np.arange(len(truth))

    def loss(log_t: float) -> float:
        return -float(log_softmax(log_probabilities / np.exp(log_t), axis=1)[rows, truth].mean())

    return float(np.exp(minimize_scalar(loss, bounds=(-3.0, 3.0), method="bounded").x))


def expected_calibration_error(probabilities: np.ndarray, truth: np.ndarray, bins: int = 10) -> float:
    """``Σ_b (n_b / n) |accuracy_b − confidence_b|`` over equal-width bins of the top probability.

    Args:
        probabilities: predicted probabilities, shape (n, V).
        truth: the true categories, shape (n,).
        bins: the number of equal-width bins on [0, 1].

    Returns:
        The expected calibration error, in [0, 1].
    """
    top, guess = probabilities.max(axis=1), probabilities.argmax(axis=1)
    which = np.minimum((top * bins).astype(int), bins - 1)
    error = 0.0
    for b in np.unique(which):
        rows = which == b
        error += rows.mean() * abs((guess[rows] == truth[rows]).mean() - top[rows].mean())
    return float(error)


def attribute_prior(data: PreparedData, group: ColumnGroup, seed: int) -> AttributePrior:
    """Fit and calibrate ``Pr[v | Ψ'(x)]`` on the population split; evaluate it on the training records.

    Args:
        data: the prepared data (its population split fits the prior).
        group: the secret attribute's column group.
        seed: the seed of the split into fit and calibration rows.

    Returns:
        The calibrated probabilities of the training records, shape (n, V), with the temperature, the calibration
        error and the row counts.

    Raises:
        BadInputError: the attribute takes one value only, or the population has too few rows of different values.
    """
    from sklearn.linear_model import LogisticRegression
    from threadpoolctl import threadpool_limits

    population, classes = data.population, data.train.n_classes
    truth = population.x[:, group.start:group.stop].argmax(axis=1)
    features = adversary_features(population.x, population.y, group, classes)
    order = np.random.default_rng(np.random.SeedSequence([seed, 0xBA11])).permutation(population.n_rows)
    cut = int(round(population.n_rows * (1 - CALIBRATION_SHARE)))
    fit_rows, calibration_rows = order[:cut], order[cut:]
    every_value = np.concatenate([truth, data.train.x[:, group.start:group.stop].argmax(axis=1)])
    if len(np.unique(every_value)) < 2:  # no split of the rows can help: there is no secret to infer
        raise BadInputError(f"the protected column {group.feature!r} takes a single value in the data; the "
                            "checkpoint audit infers its first protected column, which needs two values or more",
                            "data.protected")
    if len(np.unique(truth[fit_rows])) < 2 or not np.isin(truth[calibration_rows], truth[fit_rows]).any():
        raise BadInputError(f"the population split has too few rows with different {group.feature!r} values to "
                            "estimate Pr[v | u]", "data.population_fraction")
    with threadpool_limits(1, user_api="blas"):  # a small fit: BLAS threads only add synchronisation (100× here)
        classifier = LogisticRegression(max_iter=2000).fit(features[fit_rows], truth[fit_rows])
    seen = classifier.classes_

    def log_probabilities(rows_features: np.ndarray) -> np.ndarray:
        """Over every category, unseen ones at probability 0 (log −inf)."""
        out = np.full((len(rows_features), group.stop - group.start), -np.inf)
        out[:, seen] = classifier.predict_log_proba(rows_features)
        return out

    calibration_log = log_probabilities(features[calibration_rows])[:, seen]
    calibration_truth = np.searchsorted(seen, truth[calibration_rows])
    known = np.isin(truth[calibration_rows], seen)
    temperature = _temperature(calibration_log[known], calibration_truth[known])
    calibrated = np.exp(log_softmax(calibration_log[known] / temperature, axis=1))
    train_log = log_probabilities(adversary_features(data.train.x, data.train.y, group, classes))
    probabilities = np.zeros_like(train_log)
    probabilities[:, seen] = np.exp(log_softmax(train_log[:, seen] / temperature, axis=1))
    return AttributePrior(probabilities, temperature, expected_calibration_error(calibrated, calibration_truth[known]),
                          len(fit_rows), int(known.sum()))


def record_scores(model: Model, params: Params, candidates: torch.Tensor, labels: torch.Tensor,
                  prior: torch.Tensor, attacks: tuple[str, ...]) -> dict[str, np.ndarray]:
    """Every final-model attack's candidate scores for every record, ``{attack: [n, V]}``: each record is one
    trial of the attack with its own candidates, label and prior, and the one model broadcast to it.

    Args:
        model: the checkpoint's model.
        params: its parameters (no model axis).
        candidates: each record with each value of the secret, shape (n, V, d).
        labels: the records' labels, shape (n,).
        prior: each record's prior over the values, shape (n, V).
        attacks: the attacks' names.

    Returns:
        Name → float64 scores of shape (n, V).
    """
    n, v, _ = candidates.shape
    chunk = max(1, GRADIENT_FLOATS_PER_CHUNK // (v * model.n_parameters))
    scores: dict[str, list[np.ndarray]] = {name: [] for name in attacks}
    for start in range(0, n, chunk):
        rows = slice(start, min(start + chunk, n))
        size = rows.stop - rows.start
        knowledge = Knowledge(model, candidates[rows], labels[rows], prior[rows])
        view = View({k: p[None].expand(size, *p.shape) for k, p in params.items()})
        for name in attacks:
            scores[name].append(ATTACKS[name]().fit(knowledge).infer(view).scores.detach().double().numpy())
    return {name: np.concatenate(parts) for name, parts in scores.items()}


def checkpoint_section(checkpoint: Checkpoint, data: PreparedData, alpha: float, gate: bool,
                       claim: Claim | None = None) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The ``checkpoint_audit`` section of results.json and, when ``gate``, its comparisons for the verdict, with
    bounds from ``claim`` (by default the checkpoint configuration's).

    Args:
        checkpoint: the read checkpoint.
        data: its training data (:func:`checkpoint_data`).
        alpha: the level of the Clopper–Pearson intervals.
        gate: make comparisons of the attacks besides the prior.
        claim: the claim the bounds come from.

    Returns:
        ``(section, comparisons)``: the section (records, attribute, estimated Ball and bound, the prior model and one
        row per attack) and the ``rate`` comparisons of game ``checkpoint`` (none unless ``gate``).

    Raises:
        BadInputError: the secret attribute is not categorical, or its prior cannot be estimated.
    """
    group = secret_attribute(data)
    categories = group.stop - group.start
    x, y = data.tensors()
    truth = x[:, group.start:group.stop].argmax(dim=1)
    candidates = x[:, None, :].repeat(1, categories, 1)
    candidates[:, :, group.start:group.stop] = torch.eye(categories, dtype=x.dtype)
    prior = attribute_prior(data, group, checkpoint.config.seed)
    attacks = checkpoint_attacks()
    scores = record_scores(checkpoint.model, checkpoint.params, candidates, y,
                           torch.as_tensor(prior.probabilities, dtype=torch.float32), attacks)
    balls = prior.probabilities.max(axis=1)
    claim = claim or Claim.from_config(checkpoint.config)
    bounds = np.asarray(claim.add_remove.bound(balls), dtype=float)
    ball, bound, n = float(balls.mean()), float(bounds.mean()), len(balls)
    correct = {name: s.argmax(axis=1) == truth.numpy() for name, s in scores.items()}
    rows, comparisons = [], []
    for name in attacks:
        successes = int(correct[name].sum())
        low, high = clopper_pearson(successes, n, alpha)
        rows.append({"attack": name, "threat_model": ATTACKS[name].threat_model, "trials": n,
                     "successes": successes, "rate": successes / n, "ci_low": low, "ci_high": high,
                     "advantage_over_prior": float(correct[name].mean() - correct["prior"].mean()),
                     "estimated_ball": ball, "estimated_bound": bound, "status": "info"})
        if gate and name != "prior":
            comparisons.append({"id": f"checkpoint/{name}", "kind": "rate", "game": "checkpoint", "attack": name,
                                "threat_model": ATTACKS[name].threat_model, "trials": n, "successes": successes,
                                "ball": ball, "bound": bound})
    section = {
        "records": n, "attribute": group.feature, "candidates": list(group.categories), "gated": gate,
        "estimated_ball": ball, "estimated_bound": bound, "allowed_advantage": bound - ball,
        "ball_range": [float(balls.min()), float(balls.max())],
        "prior_model": {"kind": "multinomial logistic regression on Ψ'(x) (all but the secret, and the label), "
                                "temperature-scaled", "fit_rows": prior.fit_rows,
                        "calibration_rows": prior.calibration_rows, "temperature": prior.temperature,
                        "calibration_error": prior.calibration_error},
        "checkpoint": checkpoint.path.name, "checkpoint_sha256": checkpoint.sha256,
        "attacks": rows,
    }
    return section, comparisons


def run_checkpoint_audit(checkpoint: Checkpoint, alpha: float, gate_on_estimated: bool,
                         command: str = "") -> dict[str, Any]:
    """results.json of a checkpoint audit: the verdict (INFORMATIONAL unless the estimated comparisons are
    gated, then judged as any audit's), the checkpoint's mechanism and accounting, the attacks on its records
    and its test accuracy.

    Args:
        checkpoint: the read checkpoint.
        alpha: the audit's α.
        gate_on_estimated: judge the comparisons against the estimated bounds.
        command: the command line recorded for reproduction.

    Returns:
        The results document (JSON-ready; non-finite numbers as None).

    Raises:
        BadInputError: the checkpoint's data cannot be prepared again or attacked.
    """
    from fdp_audit.auditing.provenance import versions
    from fdp_audit.auditing.runner import accounting_section

    config = checkpoint.config
    claim = Claim.from_config(config)
    data = checkpoint_data(checkpoint)
    section, comparisons = checkpoint_section(checkpoint, data, alpha, gate_on_estimated, claim)
    verdict, judged = judge(comparisons, alpha)
    if not gate_on_estimated:  # nothing was gated: informational, which is not a pass
        verdict |= {"status": INFORMATIONAL,
                    "explanation": "The checkpoint audit's Ball is estimated, so nothing was gated: the attacks "
                                   "on the training records are informational, not a pass (--gate-on-estimated "
                                   "gates on them)."}
    by_id = {j["id"]: j for j in judged}
    for row in section["attacks"]:
        j = by_id.get(f"checkpoint/{row['attack']}")
        if j is not None:
            row["status"] = comparison_status(j)
    params = {k: v[None] for k, v in checkpoint.params.items()}
    test_accuracy = float(accuracy(checkpoint.model, params, torch.as_tensor(data.test.x),
                                   torch.as_tensor(data.test.y))[0])
    mechanism = claim.section()
    return finite_or_none({
        "schema_version": 1, "kind": "audit", "title": audit_title(config, "checkpoint audit"),
        "created": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "verdict": verdict,
        "mechanism": mechanism,
        "accounting": accounting_section(claim),
        "checkpoint_audit": section,
        "utility": {"metric": "test accuracy", "models_per_mechanism": 1,
                    "rows": [{"mechanism": config.mechanism.name, "accuracy": test_accuracy, "std": None,
                              "epsilon": mechanism["epsilon"]}]},
        "comparisons": comparisons,
        "reproducibility": {
            "versions": versions(), "seed": checkpoint.metadata["seed"], "config": config.to_dict(),
            "dataset": config.data.dataset, "dataset_fingerprint": data.fingerprint, "command": command,
            "device": "cpu", "checkpoint": str(checkpoint.path), "checkpoint_sha256": checkpoint.sha256,
        },
    })


def train_and_attack(config: Config, data: PreparedData, path: Path, alpha: float) -> dict[str, Any]:
    """Train the configured mechanism once, write its checkpoint to ``path``, read it back as untrusted input
    and return the informational ``checkpoint_audit`` section of its real records (the demo's last step).

    Args:
        config: the validated configuration.
        data: its prepared data.
        path: where the checkpoint is written.
        alpha: the level of the Clopper–Pearson intervals.

    Returns:
        The section (:func:`checkpoint_section`).
    """
    from fdp_audit.training.checkpoint import save_checkpoint
    from fdp_audit.training.run import train_one

    trained = train_one(config, data)
    save_checkpoint(path, trained.params, trained.metadata)
    checkpoint = read_checkpoint(path)
    section, _ = checkpoint_section(checkpoint, checkpoint_data(checkpoint), alpha, gate=False)
    return section


def summary_lines(section: dict[str, Any]) -> list[str]:
    """One line per attack of a ``checkpoint_audit`` section, for the command line.

    Args:
        section: a ``checkpoint_audit`` section.

    Returns:
        A head line, then one line per attack.
    """
    head = (f"checkpoint audit ({section['records']} training records, secret {section['attribute']!r}, "
            f"{'gated' if section['gated'] else 'informational'}): estimated Ball {section['estimated_ball']:.3f}, "
            f"estimated bound {section['estimated_bound']:.3f}")
    return [head] + [f"  {attack_words(a)}: success {a['rate']:.3f} [{a['ci_low']:.3f}, {a['ci_high']:.3f}], "
                     f"{a['advantage_over_prior']:+.3f} over the prior, {a['status']}" for a in section["attacks"]]
