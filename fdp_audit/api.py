"""The public Python API (docs/api.md): audit a configuration, a checkpoint or weights trained elsewhere, and
account a claim. Each call returns a typed result; the ``fdp-audit`` command line is a thin layer over them.

::

    import fdp_audit

    result = fdp_audit.audit("configs/adult_fdp.yaml", trials=64)
    result.verdict                     # "PASS" or "VIOLATION"
    result.epsilon_lower_bounds        # per ε comparison, the empirical ε lower bound
    result.write("reports/adult")      # results.json, report.html and junit.xml, all or nothing

Bad input raises :class:`fdp_audit.errors.BadInputError` (one line naming the field); a failure inside the
user's own code shows the user's traceback.
"""

from __future__ import annotations

import contextlib
import copy
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fdp_audit.accounting.events import Relation, relation_named
from fdp_audit.errors import BadInputError

if TYPE_CHECKING:
    from fdp_audit.accounting.mechanism import MechanismAccountant
    from fdp_audit.claim import Claim
    from fdp_audit.config import Config
    from fdp_audit.execution import Executor

# The configs shipped with the package (a link to the repository's configs/ in a checkout, package data in a
# wheel): a relative path that does not exist from the working folder is looked up here.
SHIPPED_CONFIGS = Path(__file__).resolve().parent / "configs"
DEFAULT_CHECKPOINT_OUT = "reports/run"  # a checkpoint's metadata never chooses where output goes
WEIGHTS_SUFFIXES = (".safetensors", ".pth", ".bin")  # state_dicts trained outside fdp-audit


def shipped_config_path(path: str | os.PathLike[str]) -> Path:
    """A config file by path: as given when it exists, else the shipped config of that name.

    Args:
        path: a path such as ``configs/adult_fdp.yaml`` (relative to the working folder, or to the shipped
            configs with or without the leading ``configs/``).

    Returns:
        The path to read.
    """
    given = Path(path)
    if given.exists() or given.is_absolute():
        return given
    parts = given.parts[1:] if given.parts[:1] == ("configs",) else given.parts
    shipped = SHIPPED_CONFIGS.joinpath(*parts) if parts else SHIPPED_CONFIGS
    return shipped if shipped.is_file() else given


def as_config(config_or_path: Config | Mapping[str, Any] | str | os.PathLike[str]) -> Config:
    """The validated configuration a caller names.

    Args:
        config_or_path: a :class:`~fdp_audit.config.Config`, a mapping with the YAML file's structure, or the
            path of a YAML file (:func:`shipped_config_path`).

    Returns:
        The configuration.

    Raises:
        BadInputError: an invalid configuration, or a file that cannot be read.
    """
    from fdp_audit.config import Config, config_from_dict, load_config

    if isinstance(config_or_path, Config):
        return config_or_path
    if isinstance(config_or_path, Mapping):
        return config_from_dict(dict(config_or_path))
    if isinstance(config_or_path, str | os.PathLike):
        return load_config(shipped_config_path(config_or_path))
    raise BadInputError(f"must be a Config, a mapping or a path, got {type(config_or_path).__name__}", "config")


@dataclass(frozen=True)
class WrittenFiles:
    """The files :meth:`AuditResult.write` wrote."""

    results: Path
    report: Path
    junit: Path | None


@dataclass(frozen=True)
class AuditResult:
    """The outcome of an audit: its verdict, every judged comparison, the ε lower bounds, and the results
    dictionary that ``results.json`` holds (docs/files.md).

    Attributes:
        results: the results dictionary, non-finite numbers written as None.
        out_dir: where :meth:`write` writes by default (the audit's folder, which holds its trial journal), or
            None.
    """

    results: dict[str, Any]
    out_dir: Path | None = None
    _judged: list[dict[str, Any]] = field(default_factory=list, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        from fdp_audit.auditing.gate import NOT_JUDGED

        if self.results["verdict"]["status"] == NOT_JUDGED:  # never handed out as if it were a verdict
            raise BadInputError(self.results["verdict"]["explanation"])

    @property
    def verdict(self) -> str:
        """``"PASS"``, ``"VIOLATION"`` or ``"INFORMATIONAL"`` (a checkpoint audit whose bounds are estimated)."""
        return self.results["verdict"]["status"]

    @property
    def explanation(self) -> str:
        """The verdict in one sentence: the worst comparison and its margin."""
        return self.results["verdict"]["explanation"]

    @property
    def passed(self) -> bool:
        """Whether no comparison is violated (a VIOLATION is the only failing verdict)."""
        return self.verdict != "VIOLATION"

    @property
    def comparisons(self) -> list[dict[str, Any]]:
        """Every comparison the verdict judged, as stored, with the gate's evaluation of it.

        Returns:
            One dictionary per comparison: its stored row (``id``, ``kind``, ``game``, ``attack``, counts, …) and
            ``status`` (pass, violation or not judged), ``observed``, ``theoretical`` and ``margin``.
        """
        from fdp_audit.auditing.gate import comparison_status

        return [{**row, **judged, "status": comparison_status(judged)}
                for row, judged in zip(self.results.get("comparisons", []), self._judgements(), strict=True)]

    @property
    def epsilon_lower_bounds(self) -> dict[str, float]:
        """The empirical ε lower bounds at confidence 1 − α (docs/statistics.md).

        Returns:
            Per ε comparison id, its lower bound in the claimed mechanism's family; ``"one-run"`` for the
            one-run audit's count test, which holds for any mechanism meeting the claimed curve, when there is
            one; ``"one-run-conformance"`` for the conformance test's of gradient canaries, which holds if the
            training behaves as the claimed DP-SGD (canaries independent; docs/one_run.md).
        """
        bounds = {j["id"]: j["epsilon_lower_bound"] for j in self._judgements() if "epsilon_lower_bound" in j}
        one_run = self.results.get("one_run")
        if one_run is not None and one_run.get("empirical_epsilon") is not None:
            bounds["one-run"] = one_run["empirical_epsilon"]
        if one_run is not None and one_run.get("epsilon_order_statistics") is not None:
            bounds["one-run-conformance"] = one_run["epsilon_order_statistics"]
        return bounds

    def _judgements(self) -> list[dict[str, Any]]:
        if not self._judged and self.results.get("comparisons"):
            from fdp_audit.auditing.gate import judge

            self._judged.extend(judge(self.results["comparisons"], self.results["verdict"]["alpha"])[1])
        return self._judged

    def to_dict(self) -> dict[str, Any]:
        """The results dictionary.

        Returns:
            A copy of it, as ``results.json`` holds it.
        """
        return copy.deepcopy(self.results)

    def summary(self) -> str:
        """What the command line prints.

        Returns:
            The checkpoint audit's or the one-run audit's lines, if any, and the verdict's line.
        """
        lines = []
        if "checkpoint_audit" in self.results:
            from fdp_audit.auditing.checkpoint_audit import summary_lines

            lines += summary_lines(self.results["checkpoint_audit"])
        if "one_run" in self.results:
            from fdp_audit.auditing.one_run.evaluation import summary_lines as one_run_lines

            lines += one_run_lines(self.results["one_run"])
        from fdp_audit.auditing.sanity import sanity_warnings
        from fdp_audit.report.terminal import verdict_lines

        return "\n".join([*lines, *verdict_lines(self.results["verdict"], sanity_warnings(self.results))])

    def write(self, out_dir: str | os.PathLike[str] | None = None, *, junit: bool = True) -> WrittenFiles:
        """Write ``results.json``, ``report.html`` and (``junit``) ``junit.xml``: all of them or, on any failure,
        none (the previous files stay).

        Args:
            out_dir: the folder; by default the audit's own (:attr:`out_dir`).
            junit: also write the JUnit XML of the comparisons (one test case each, failed when violated).

        Returns:
            The paths written.

        Raises:
            BadInputError: no folder given and the audit has none.
        """
        from fdp_audit.atomic_io import all_or_nothing, atomic_write_text
        from fdp_audit.auditing.gate import junit_xml
        from fdp_audit.auditing.results import write_results
        from fdp_audit.auditing.sanity import sanity_warnings
        from fdp_audit.report.render import write_report

        folder = Path(out_dir) if out_dir is not None else self.out_dir
        if folder is None:
            raise BadInputError("give the folder to write to", "out_dir")
        with all_or_nothing():
            results = write_results(folder / "results.json", self.results)
            report = write_report(self.results, folder / "report.html")
            cases = (atomic_write_text(folder / "junit.xml", junit_xml(self.results["verdict"], self.comparisons,
                                                                       sanity_warnings(self.results)))
                     if junit else None)
        return WrittenFiles(results, report, cases)


def audit(config_or_path: Config | Mapping[str, Any] | str | os.PathLike[str], *, trials: int | None = None,
          seed: int | None = None, games: Sequence[str] | None = None, alpha: float | None = None,
          out_dir: str | os.PathLike[str] | None = None, executor: Executor | None = None,
          command: str = "") -> AuditResult:
    """Play the configured audit games, judge every comparison against the configured claim, and return the verdict
    (docs/games.md, docs/statistics.md).

    Args:
        config_or_path: the configuration (:func:`as_config`): a ``Config``, a mapping, or a YAML path (a shipped
            config's name works from any folder). Its user code (``model.factory``, ``mechanism.training``,
            ``mechanism.third_party``) may be a callable.
        trials: trials per game (replaces ``audit.trials``).
        seed: replaces the config's seed, from which the data, every model's random streams and the trials derive.
        games: the games to play (replaces ``audit.games``).
        alpha: the verdict's significance level (replaces ``audit.alpha``).
        out_dir: the audit's folder: its trial journal is kept there (an interrupted audit resumes from it) and
            :meth:`AuditResult.write` writes there by default. None keeps nothing on disk.
        executor: where trials run (:mod:`fdp_audit.execution`); by default the one ``audit.executor`` names.
        command: how the audit was started, recorded in the results for reproducibility.

    Returns:
        The result.

    Raises:
        BadInputError: an invalid configuration, or an audit whose comparisons cannot fail (refused before anything
            is trained).
    """
    from fdp_audit.auditing.runner import run_audit

    config = as_config(config_or_path)
    overrides = {"audit.trials": trials, "seed": seed, "audit.games": None if games is None else tuple(games),
                 "audit.alpha": alpha}
    given = {name: value for name, value in overrides.items() if value is not None}
    if given:
        config = config.with_overrides(given, {name: name.rpartition(".")[2] for name in given})
    folder = None if out_dir is None else Path(out_dir)
    fresh = folder is not None and not folder.exists()
    try:
        results = run_audit(config, folder, command=command, executor=executor)
    except BadInputError:
        if fresh:  # refused: the folder this run created holds only the journal of a run that cannot resume
            (folder / "journal.jsonl").unlink(missing_ok=True)
            with contextlib.suppress(OSError):
                folder.rmdir()
        raise
    return AuditResult(results, folder)


DEMO_ONE_RUN_CANARIES = 1000


def demo_config(quick: bool = False) -> Config:
    """The demo's configuration: FDP-SGD calibrated to a target ε on the bundled Adult data (``fdp_audit/demo.yaml``).

    Args:
        quick: fewer rows, steps and trials, for a run of about a minute.

    Returns:
        The configuration.
    """
    from importlib import resources

    import yaml

    from fdp_audit.config import config_from_dict

    config = config_from_dict(yaml.safe_load(resources.files("fdp_audit").joinpath("demo.yaml").read_text()))
    if quick:
        config = config.with_overrides({"data.max_rows": 6000, "mechanism.steps": 100, "mechanism.sample_rate": 0.04,
                                        "audit.trials": 256})
    return config


def demo(*, quick: bool = False, out_dir: str | os.PathLike[str] | None = None, command: str = "") -> AuditResult:
    """The end-to-end demo (docs/design.md): the game audit of :func:`demo_config`, and beside its verdict the
    attacks on one trained model's real records and the one-run audit of one training with gradient canaries.

    Args:
        quick: the quick configuration (:func:`demo_config`) and 500 canaries instead of 1,000.
        out_dir: the audit's folder (default ``report.out_dir``, ``reports/demo``); the trained models are
            written there.
        command: how the demo was started, recorded in the results.

    Returns:
        The result: the games' verdict, with the ``checkpoint_audit`` and ``one_run`` sections.
    """
    from fdp_audit.auditing.checkpoint_audit import train_and_attack
    from fdp_audit.auditing.one_run.canaries import audit_with_canaries, train_with_canaries
    from fdp_audit.data.prepare import prepare_data

    config = demo_config(quick)
    folder = Path(out_dir or config.report.out_dir)
    games = audit(config, out_dir=folder, command=command)
    data = prepare_data(config.data, config.seed)
    checkpoint = train_and_attack(config, data, folder / "model.pt", config.audit.alpha)
    trained = train_with_canaries(config, data, 500 if quick else DEMO_ONE_RUN_CANARIES,
                                  folder / "one_run" / "model.pt")
    one_run = audit_with_canaries(trained.checkpoint, trained.manifest, config.audit.alpha)
    return AuditResult({**games.results, "checkpoint_audit": checkpoint, "one_run": one_run}, folder)


def _alpha(alpha: float | None, default: float) -> float:
    value = default if alpha is None else alpha
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < 1:
        raise BadInputError(f"must be in (0, 1), got {value!r}", "alpha")
    return float(value)


def audit_checkpoint(weights: str | os.PathLike[str], *,
                     config: Config | Mapping[str, Any] | str | os.PathLike[str] | None = None,
                     canaries: str | os.PathLike[str] | None = None, alpha: float | None = None,
                     gate_on_estimated: bool = False, out_dir: str | os.PathLike[str] | None = None,
                     command: str = "") -> AuditResult:
    """Audit trained weights (docs/games.md, docs/one_run.md): the attacks on their real training records, or, with
    ``canaries``, the one-run audit of the canaries inserted in their training.

    Args:
        weights: a ``.pt`` checkpoint written by ``fdp-audit train`` (its privacy metadata states the claim), or,
            with ``config``, weights trained elsewhere (a state_dict: ``.safetensors``, or ``.pt``/``.pth``/``.bin``
            of tensors, read with ``weights_only``).
        config: for weights trained elsewhere, the configuration naming their ``model.factory``, data and claim.
        canaries: the manifest of the canaries inserted in the training: the one-run audit, which gates. With
            ``config``: the canaries of the user's own loop (:class:`fdp_audit.GradientCanaries`) or input canaries
            (:func:`fdp_audit.insert_record_canaries`).
        alpha: the significance level (default: the configuration's ``audit.alpha``; 0.05 for a one-run audit).
        gate_on_estimated: let the attacks on the real records, whose bound is estimated, fail the verdict
            (otherwise it is INFORMATIONAL); also set by the configuration's ``audit.gate_on_estimated``.
        out_dir: where :meth:`AuditResult.write` writes by default (default ``reports/run``; for a one-run audit
            of a checkpoint, its folder).
        command: how the audit was started, recorded in the results.

    Returns:
        The result.

    Raises:
        BadInputError: unreadable or untrusted weights, a checkpoint whose data are not the ones it was trained
            on, or a manifest that does not match.
    """
    from fdp_audit.auditing.checkpoint_audit import read_checkpoint, read_external_checkpoint, run_checkpoint_audit
    from fdp_audit.auditing.one_run.canaries import one_run_results

    path = Path(weights)
    if config is not None:
        config = as_config(config)
        if canaries is not None:  # a user loop's claim may be read from its Opacus engine
            from fdp_audit.auditing.one_run.canaries import claimed_user_config

            config = claimed_user_config(config)
        checkpoint = read_external_checkpoint(path, config)
        folder = Path(out_dir or DEFAULT_CHECKPOINT_OUT)
        if canaries is not None:
            results = one_run_results(checkpoint.path, Path(canaries), _alpha(alpha, 0.05), command,
                                      external=checkpoint)
        else:
            gate = checkpoint.config.audit.gate_on_estimated or gate_on_estimated
            results = run_checkpoint_audit(checkpoint, _alpha(alpha, 0.05), gate, command=command)
        return AuditResult(results, folder)
    if path.suffix in WEIGHTS_SUFFIXES:
        from fdp_audit.config import EXTERNAL_MODEL_HINT

        raise BadInputError(f"{path.name} holds weights only; {EXTERNAL_MODEL_HINT}")
    if canaries is not None:
        if path.suffix != ".pt":
            raise BadInputError("a one-run audit takes the checkpoint trained with --canaries", "target")
        results = one_run_results(path, Path(canaries), _alpha(alpha, 0.05), command)
        return AuditResult(results, Path(out_dir or path.parent))
    checkpoint = read_checkpoint(path)
    settings = checkpoint.config.audit
    results = run_checkpoint_audit(checkpoint, _alpha(alpha, settings.alpha),
                                   settings.gate_on_estimated or gate_on_estimated, command=command)
    return AuditResult(results, Path(out_dir or DEFAULT_CHECKPOINT_OUT))


def replay_checkpoint(weights: str | os.PathLike[str], games: int) -> Config:
    """The configuration of a game audit of ``games`` trials replaying a checkpoint's training recipe (docs/games.md):
    the built-in mechanism its privacy metadata names, with the claim's z, p, T and C, on the data it was trained on.
    ``audit(replay_checkpoint("model.pt", 64))`` is what ``fdp-audit audit model.pt --games 64`` does.

    A checkpoint is untrusted: it never names code to run, where trials run or where files go (its execution
    fields and ``report.out_dir`` are the defaults).

    Args:
        weights: a ``.pt`` checkpoint written by ``fdp-audit train``.
        games: trials per game (the configuration's ``audit.trials``).

    Returns:
        The validated configuration.

    Raises:
        BadInputError: an unreadable checkpoint or invalid metadata, a recipe that names code (a third-party
            mechanism, a training function or a model factory), a trial count out of range (naming ``games``), or
            data that are not the ones it was trained on.
    """
    from fdp_audit.auditing.checkpoint_audit import checkpoint_data, read_checkpoint, replay_config

    checkpoint = read_checkpoint(weights)  # the claim pinned to the metadata, as the checkpoint audit uses it
    config = replay_config(checkpoint, games)
    checkpoint_data(checkpoint)  # refuses data that are not the ones it was trained on
    return config


def account(noise_multiplier: float | None = None, sample_rate: float | None = None, steps: int | None = None, *,
            config: Config | Mapping[str, Any] | str | os.PathLike[str] | None = None,
            checkpoint: str | os.PathLike[str] | None = None,
            relation: str = Relation.ADD_REMOVE) -> MechanismAccountant:
    """The accountant of a claim (docs/accounting.md): f, ε(δ), δ(ε) and the Theorem 4 bound ``1 − f(Ball)``.

    Args:
        noise_multiplier: z of a Poisson-subsampled Gaussian claim (DP-SGD and Algorithm 1 alike).
        sample_rate: its sampling rate p.
        steps: its number of private steps T.
        config: instead of z, p and T, a configuration whose mechanism states the claim (a target ε is calibrated).
        checkpoint: instead, a checkpoint written by ``fdp-audit train``, whose privacy metadata states the claim
            (:func:`checkpoint_claim`, which also gives its δ).
        relation: ``"add_remove"`` or ``"replace"`` neighbours, or the older spelling that
            :func:`~fdp_audit.accounting.events.relation_named` reads.

    Returns:
        The accountant, e.g. ``account(1.0, 1 / 16, 100).epsilon(1e-5)``.

    Raises:
        BadInputError: both or neither of the two ways, or a parameter out of range.
    """
    from fdp_audit.accounting.mechanism import MechanismSpec, accountant_for
    from fdp_audit.claim import Claim

    parameters, relation = (noise_multiplier, sample_rate, steps), relation_named(relation)
    if checkpoint is not None:
        if config is not None or any(value is not None for value in parameters):
            raise BadInputError("give a checkpoint, a config or noise_multiplier, sample_rate and steps, one way",
                                "checkpoint")
        return checkpoint_claim(checkpoint, relation)[0]
    if config is not None:
        if any(value is not None for value in parameters):
            raise BadInputError("give a config or noise_multiplier, sample_rate and steps, not both", "config")
        return Claim.from_config(as_config(config)).accountant(relation)
    if any(value is None for value in parameters):
        raise BadInputError("give noise_multiplier, sample_rate and steps (or a config)", "noise_multiplier")
    # DP-SGD and Algorithm 1 have the same curve (FDP paper Theorem 5); the name only labels the claim.
    return accountant_for(MechanismSpec.gaussian("fdp_sgd", noise_multiplier, sample_rate, steps, relation))


def check_gaussian_parameters(z: float, p: float, steps: int, fields: Mapping[str, str]) -> None:
    """Range checks of a Gaussian claim's z > 0, p in (0, 1] and integer T >= 1.

    Args:
        z: the noise multiplier.
        p: the sampling rate.
        steps: the number of steps.
        fields: the name each of ``noise_multiplier``, ``sample_rate`` and ``steps`` has for the user (a flag, a
            checkpoint's key), named in the error.

    Raises:
        BadInputError: a value out of range.
    """
    from fdp_audit.accounting.parameters import noise_multiplier

    noise_multiplier(z, fields["noise_multiplier"])
    if not (0 < p <= 1):
        raise BadInputError(f"must be in (0, 1], got {p!r}", field=fields["sample_rate"])
    if isinstance(steps, bool) or int(steps) != steps or steps < 1:
        raise BadInputError(f"must be an integer >= 1, got {steps!r}", field=fields["steps"])


def checkpoint_claim(path: str | os.PathLike[str], relation: str = Relation.ADD_REMOVE) -> tuple[MechanismAccountant,
                                                                                          float | None]:
    """The claim a checkpoint's privacy metadata states (its mechanism, z, p, T and public steps), and its δ.

    Args:
        path: a ``.pt`` checkpoint written by ``fdp-audit train``.
        relation: ``"add_remove"`` or ``"replace"`` neighbours, or the older spelling that
            :func:`~fdp_audit.accounting.events.relation_named` reads.

    Returns:
        The claim's accountant, and the δ the checkpoint states (None if it states none).

    Raises:
        BadInputError: an unreadable checkpoint, an unknown mechanism, or metadata missing or out of range.
    """
    from fdp_audit.accounting.mechanism import MechanismSpec, accountant_for
    from fdp_audit.mechanisms import MECHANISMS
    from fdp_audit.training.checkpoint import read_privacy_metadata

    relation = relation_named(relation)
    try:
        meta = read_privacy_metadata(path)
    except OSError as err:
        raise BadInputError(f"cannot read {path}: {err.strerror or err}", field="checkpoint") from err
    name = meta.get("mechanism")
    if name not in MECHANISMS:
        raise BadInputError(f"{path}: unknown mechanism {name!r} in the privacy metadata", field="checkpoint")
    fields = {key: f"{path}: {key}" for key in ("noise_multiplier", "sample_rate", "steps")}
    try:
        row = MECHANISMS[name]
        if not row.releases.needs_noise_multiplier:
            spec = MechanismSpec(name, row.claimed_event(None, None, 0), relation)
        else:
            z, p, steps = meta.get("noise_multiplier"), meta.get("sample_rate"), meta.get("steps")
            if z is None or p is None or steps is None:
                raise BadInputError("privacy metadata lacks noise_multiplier, sample_rate or steps", field=path)
            check_gaussian_parameters(float(z), float(p), steps, fields)
            spec = MechanismSpec(name, row.claimed_event(float(z), float(p), int(steps)), relation,
                                 int(meta.get("public_pretrain_steps", 0) or 0))
        delta = meta.get("delta")
        if delta is not None and not (0 < float(delta) < 1):
            raise BadInputError(f"must be in (0, 1), got {delta!r}", field=f"{path}: delta")
    except (TypeError, ValueError) as err:
        raise BadInputError(f"malformed privacy metadata: {err}", field=path) from err
    return accountant_for(spec), None if delta is None else float(delta)


@dataclass(frozen=True)
class GateResult:
    """The gate's judgement of saved results (docs/files.md, "The gate's outputs").

    Attributes:
        verdict: the verdict at ``alpha`` (``status``, ``explanation``, ``alpha``).
        comparisons: the stored comparisons, in their order.
        judged: each comparison's judgement at ``alpha``, in the same order.
        cases: the JUnit test cases: every comparison, then one per tested rise since the baseline.
        regression: the comparison with the baseline, or None without one.
        warnings: the sanity warnings of the results.
        alpha: the significance level judged at.
    """

    verdict: dict[str, Any]
    comparisons: list[dict[str, Any]]
    judged: list[dict[str, Any]]
    cases: list[dict[str, Any]]
    regression: Any
    warnings: list[str]
    alpha: float

    @property
    def failed(self) -> bool:
        """True on a VIOLATION, or on a significant rise since the baseline."""
        regressed = self.regression is not None and bool(self.regression.regressed)
        return self.verdict["status"] == "VIOLATION" or regressed

    def junit(self) -> str:
        """Returns:
            The JUnit XML of :attr:`cases`.
        """
        from fdp_audit.auditing.gate import junit_xml

        return junit_xml(self.verdict, self.cases, self.warnings)

    def markdown(self) -> str:
        """Returns:
            The Markdown summary, for a CI job page.
        """
        from fdp_audit.report.markdown import gate_summary

        return gate_summary(self.verdict, self.judged, self.comparisons, self.regression, self.warnings)

    def lines(self) -> list[str]:
        """Returns:
            The terminal lines: the verdict with its warnings, then the rise since the baseline if there is one.
        """
        from fdp_audit.report.markdown import rise_words
        from fdp_audit.report.terminal import verdict_lines

        lines = list(verdict_lines(self.verdict, self.warnings))
        regression = self.regression
        if regression is not None:
            worst = max(regression.changes, default=None,
                        key=lambda c: c.rise_lower_bound if c.rise_lower_bound is not None else -2)
            rule = ("report only" if regression.tolerance is None
                    else f"fails above a rise of {regression.tolerance:g}")
            line = f"since the baseline: {len(regression.changes)} comparisons matched, " \
                   f"{len(regression.regressed)} regressed ({rule})"
            if worst is not None and worst.rise_lower_bound is not None:
                line += "; largest rise in success rate: " + rise_words(worst, 1 - self.alpha)
            lines.append(("REGRESSION: " if regression.regressed else "") + line)
        return lines


def _stored_results(results: AuditResult | Mapping[str, Any] | str | os.PathLike[str],
                    flag: str | None = None) -> tuple[dict[str, Any], Claim]:
    """A results dictionary, its limits re-derived from its stated configuration, and the claim it states: read
    and verified from a file (naming it, and the keyword ``flag`` that named it), or a copy of one in memory."""
    from fdp_audit.auditing.gate import restate_limits, verified_claim

    if isinstance(results, AuditResult | Mapping):
        stored = copy.deepcopy(dict(results.results if isinstance(results, AuditResult) else results))
        return stored, restate_limits(stored)
    return verified_claim(results, flag)


def gate(results: AuditResult | Mapping[str, Any] | str | os.PathLike[str], *, alpha: float | None = None,
         baseline: AuditResult | Mapping[str, Any] | str | os.PathLike[str] | None = None,
         max_regression: float | None = None, allow_config_change: bool = False) -> GateResult:
    """Re-judge saved results at ``alpha``, and compare them with a baseline (docs/files.md, "The gate's outputs").

    Args:
        results: a ``results.json`` (verified: schema, checksum), its dictionary, or an :class:`AuditResult`.
        alpha: the significance level (default: the audit's).
        baseline: earlier results, read like ``results``: how each comparison's margin and ε lower bound moved.
        max_regression: with ``baseline``, fail when an attack's success rate rose by more than this since the
            baseline, at confidence 1 − α (default: report only).
        allow_config_change: with ``baseline``, compare with a baseline that audited other settings.

    Returns:
        The judgement; :attr:`GateResult.failed` is what fails a CI job.

    Raises:
        BadInputError: a corrupt or edited results file, results with no comparison that can fail at ``alpha``
            (NOT JUDGED or INFORMATIONAL: no pass), or a baseline of other settings without
            ``allow_config_change``.
    """
    from fdp_audit.auditing.gate import INFORMATIONAL, NOT_JUDGED, judge
    from fdp_audit.auditing.regression import compare
    from fdp_audit.auditing.sanity import sanity_warnings

    for keyword, value in (("max_regression", max_regression is not None),
                           ("allow_config_change", allow_config_change)):
        if value and baseline is None:
            raise BadInputError("needs baseline", keyword)
    stored, claim = _stored_results(results)
    alpha = _alpha(alpha, stored["verdict"].get("alpha", 0.05))
    comparisons = stored.get("comparisons", [])
    verdict, judged = judge(comparisons, alpha, claim)
    if verdict["status"] in (NOT_JUDGED, INFORMATIONAL):  # nothing that can fail, or nothing that tests: no pass
        where = f"{results}: " if isinstance(results, str | os.PathLike) else ""
        raise BadInputError(f"{where}{verdict['explanation']}", "results.comparisons")
    regression = None
    if baseline is not None:
        regression = compare(stored, _stored_results(baseline, "baseline")[0], alpha, max_regression)
        if regression.config_changes and not allow_config_change:
            changes = regression.config_changes
            shown = "; ".join(changes[:3]) + (f" and {len(changes) - 3} more" if len(changes) > 3 else "")
            raise BadInputError(f"{baseline} audited other settings ({shown}); its success rates are no baseline "
                                "for these. Pass allow_config_change to compare them anyway", "baseline")
    cases = [case | j for case, j in zip(comparisons, judged, strict=True)]
    if regression is not None and regression.tolerance is not None:
        # one JUnit case per tested rise, failed when the rise exceeds the tolerance
        cases += [{"id": f"regression/{c.id}", "label": f"Rise since the baseline · {c.label}",
                   "violated": c.regressed, "observed": c.rise_lower_bound, "theoretical": regression.tolerance}
                  for c in regression.changes if c.rise_lower_bound is not None]
    return GateResult(verdict, comparisons, judged, cases, regression, sanity_warnings(stored), alpha)


REPORT_NAME = "report.html"  # the report written beside its results file


def report(results: str | os.PathLike[str], output: str | os.PathLike[str] | None = None, *,
           profile: str | os.PathLike[str] | None = None,
           baseline: str | os.PathLike[str] | None = None) -> Path:
    """Write the HTML report of a results file (docs/files.md), verified exactly as :func:`gate` verifies it.

    Args:
        results: a ``results.json`` written by an audit.
        output: the report to write (default: ``report.html`` beside ``results``).
        profile: a ``report_section.json`` written by :func:`profile`, shown as the report's privacy-profile section.
        baseline: an earlier ``results.json``: a section shows how each comparison moved since.

    Returns:
        The written report's path.

    Raises:
        BadInputError: a refused results file or baseline (naming it), or an ``output`` that is a folder or the
            results file itself.
    """
    from fdp_audit.auditing.gate import verified_results
    from fdp_audit.report import load_results, write_report

    source = Path(results)
    target = Path(output) if output else source.with_name(REPORT_NAME)
    if target.is_dir():
        raise BadInputError(f"{target} is a directory", "output")
    if target.exists() and source.exists() and target.samefile(source):
        raise BadInputError("would overwrite the results file with the report", "output")
    stored = verified_results(source)  # exactly what the gate verifies
    if profile:
        stored["profile"] = load_results(profile)
    earlier = verified_results(baseline, "baseline") if baseline else None
    try:
        return write_report(stored, target, earlier)
    except BadInputError as err:  # a contract error names the field; the user also needs the file
        raise BadInputError(str(err), str(source)) from None
    except OSError as err:
        raise BadInputError(f"cannot write {target}: {err.strerror or err}", "output") from None


def profile(config_or_path: Config | Mapping[str, Any] | str | os.PathLike[str], *,
            out_dir: str | os.PathLike[str] | None = None) -> tuple[dict[str, Any], Path]:
    """Privacy profiles and the ε transition (docs/profiles.md): exact profiles of output perturbation, or a Monte
    Carlo estimate over trained models for DP-SGD and FDP-SGD, written together (all or nothing): ``profile.json``,
    ``profiles.npz``, ``report_section.json`` (for :func:`report`) and ``figures/*.png``.

    Args:
        config_or_path: a configuration with a ``profile`` section.
        out_dir: the output folder (default: the configuration's ``report.out_dir``).

    Returns:
        The ``profile.json`` content, and its path.

    Raises:
        BadInputError: no profile section, or a setting the profile cannot compute (naming the field).
    """
    from fdp_audit.atomic_io import all_or_nothing
    from fdp_audit.profiles.compute import run_profile
    from fdp_audit.profiles.outputs import write_outputs

    config = as_config(config_or_path)
    folder = Path(out_dir or config.report.out_dir)
    profiled = run_profile(config)
    with all_or_nothing():  # profile.json and its figures together, or none of them
        return write_outputs(profiled, folder), folder / "profile.json"


def corrdp(action: str, config_or_path: Config | Mapping[str, Any] | str | os.PathLike[str], *,
           out_dir: str | os.PathLike[str] | None = None) -> tuple[dict[str, Any], tuple[Path, ...]]:
    """A CorrDP experiment (docs/corrdp.md), its outputs written only once every computation has succeeded.

    Args:
        action: ``"tv"``: TV(j) per insensitive feature and Example 2.6 (``corrdp_tv.json``; paper Table 2 on
            Adult); ``"train"``: CorrDP-SGD and its baselines, utility curves and realised against nominal ε
            (``corrdp_train.json`` and ``corrdp_utility.png``, together).
        config_or_path: a configuration with a ``corrdp`` section.
        out_dir: the output folder (default: the configuration's ``report.out_dir``).

    Returns:
        The experiment's results and the files written.

    Raises:
        BadInputError: an unknown action, or a configuration the experiment refuses (naming the field).
    """
    from fdp_audit.atomic_io import all_or_nothing, atomic_write_bytes, atomic_write_json
    from fdp_audit.corrdp.experiments import train_experiment, tv_experiment, utility_figure

    if action not in ("tv", "train"):
        raise BadInputError(f"must be 'tv' or 'train', got {action!r}", "action")
    config = as_config(config_or_path)
    out = Path(out_dir or config.report.out_dir)
    if action == "tv":
        result = tv_experiment(config)
        return result, (atomic_write_json(out / "corrdp_tv.json", result),)
    result = train_experiment(config)
    figure = utility_figure(result)
    with all_or_nothing():
        written = (atomic_write_json(out / "corrdp_train.json", result),
                   atomic_write_bytes(out / "corrdp_utility.png", figure))
    return result, written


def calibrate(epsilon: float, delta: float, sample_rate: float, steps: int | None = None, *,
              noise_multiplier: float | None = None, step_limit: int = 1_000_000,
              relation: Relation | str = Relation.ADD_REMOVE) -> dict[str, Any]:
    """Calibrate a Poisson-subsampled Gaussian mechanism to a budget (ε, δ) on the pessimistic PLD (docs/files.md,
    ``calibrate``), rounding towards privacy: the smallest noise multiplier z (relative tolerance 1e-3) whose
    ε(δ) meets ``epsilon`` over ``steps``, or, given ``noise_multiplier`` instead of ``steps``, the largest number
    of steps it affords (searched up to ``step_limit``).

    Args:
        epsilon: the target ε > 0.
        delta: the target δ in (0, 1).
        sample_rate: the Poisson sampling rate p in (0, 1].
        steps: T, to calibrate z; None with ``noise_multiplier``.
        noise_multiplier: z, to find the largest T; None with ``steps``.
        step_limit: where the search for T stops.
        relation: ``"add_remove"`` or ``"replace"`` neighbours (:func:`~fdp_audit.accounting.events.relation_named`).

    Returns:
        ``noise_multiplier`` (or ``max_steps`` and ``reached_step_limit``), the ``achieved_epsilon`` at ``delta``
        (None for T = 0) and the ``parameters``: what ``fdp-audit calibrate --json`` prints.

    Raises:
        BadInputError: a parameter out of range, or both or neither of ``steps`` and ``noise_multiplier``.
    """
    from fdp_audit.accounting import InvalidParameterError
    from fdp_audit.accounting.calibration import calibrate_noise_multiplier, max_steps_for_budget
    from fdp_audit.accounting.mechanism import MechanismSpec, accountant_for

    _check_calibration(epsilon, delta, sample_rate, steps, noise_multiplier, step_limit)
    relation = relation_named(relation)
    parameters: dict[str, Any] = {"epsilon": epsilon, "delta": delta, "sample_rate": sample_rate,
                                  "relation": relation, "accountant": "dp_accounting PLD, pessimistic"}

    def achieved(z: float, steps: int) -> float | None:  # ε(δ) of the answer, to show that it meets the budget
        if steps < 1:
            return None
        return float(accountant_for(MechanismSpec.gaussian("dp_sgd", z, sample_rate, steps, relation)).epsilon(delta))

    try:
        if noise_multiplier is not None:
            found = max_steps_for_budget(epsilon, delta, noise_multiplier, sample_rate, relation, step_limit)
            parameters.update(noise_multiplier=noise_multiplier, step_limit=step_limit)
            return {"max_steps": found, "reached_step_limit": found == step_limit,
                    "achieved_epsilon": achieved(noise_multiplier, found), "parameters": parameters}
        assert steps is not None
        z = calibrate_noise_multiplier(epsilon, delta, sample_rate, steps, relation)
        parameters.update(steps=steps)
        return {"noise_multiplier": z, "achieved_epsilon": achieved(z, steps), "parameters": parameters}
    except InvalidParameterError as err:
        field = "step_limit" if err.field == "max_steps" else err.field
        raise BadInputError(str(err).removeprefix(f"{err.field}: "), field) from err


def _check_calibration(epsilon: float, delta: float, sample_rate: float, steps: int | None,
                       noise_multiplier: float | None, step_limit: int) -> None:
    if not (math.isfinite(epsilon) and epsilon > 0):
        raise BadInputError(f"must be a finite number > 0, got {epsilon!r}", "epsilon")
    if not 0 < delta < 1:
        raise BadInputError(f"must be in (0, 1), got {delta!r}", "delta")
    if not 0 < sample_rate <= 1:
        raise BadInputError(f"must be in (0, 1], got {sample_rate!r}", "sample_rate")
    if noise_multiplier is not None:
        if steps is not None:
            raise BadInputError("cannot be given with noise_multiplier (it is the answer)", "steps")
        if not (math.isfinite(noise_multiplier) and noise_multiplier > 0):
            raise BadInputError(f"must be a finite number > 0, got {noise_multiplier!r}", "noise_multiplier")
        if step_limit < 1:
            raise BadInputError(f"must be an integer >= 1, got {step_limit!r}", "step_limit")
    elif steps is None:
        raise BadInputError("is required (or noise_multiplier, for the largest number of steps)", "steps")
    elif steps < 1:
        raise BadInputError(f"must be an integer >= 1, got {steps!r}", "steps")


@dataclass(frozen=True)
class Training:
    """What :func:`train` wrote: the weights, and with canaries the manifest of their secrets (and the gradient
    canaries' release).

    Attributes:
        config: the configuration trained (with ``seed`` and ``device`` as given).
        checkpoint: the checkpoint (``.pt``) or, for the user's own loop, the safetensors weights.
        metadata: what the checkpoint records beside the weights (the claim, the data's fingerprint, the seed).
        test_accuracy: the model's test accuracy (None for the user's own loop).
        manifest: the canaries' manifest (their secrets), with canaries.
        release: the gradient canaries' release, with gradient canaries of the built-in training.
    """

    config: Config
    checkpoint: Path
    metadata: dict[str, Any]
    test_accuracy: float | None
    manifest: Path | None = None
    release: Path | None = None


def train(config_or_path: Config | Mapping[str, Any] | str | os.PathLike[str], *,
          out: str | os.PathLike[str] | None = None, seed: int | None = None, device: str | None = None,
          canaries: int | None = None, canary_game: str | None = None, canary_kind: str = "gradient",
          canary_values: int = 2) -> Training:
    """Train one model with the configured mechanism and write its checkpoint (docs/files.md); with ``canaries``,
    once with canaries inserted for a one-run audit (docs/one_run.md), of the built-in training or, when the
    configuration names ``mechanism.training``, of the user's own loop.

    Args:
        config_or_path: the configuration.
        out: the checkpoint's path (default ``<report.out_dir>/model.pt``; the user's loop with canaries:
            ``<report.out_dir>/model.safetensors``).
        seed: replaces the configuration's seed.
        device: replaces the configuration's device (``auto``, ``cpu`` or ``cuda``).
        canaries: the number M of canaries to insert, or None.
        canary_game: ``"inclusion"`` or ``"value"`` (default: the mechanism's).
        canary_kind: ``"gradient"``, ``"crafted"`` or ``"record"``.
        canary_values: candidates per canary in the value game.

    Returns:
        The files written, the model's test accuracy and the checkpoint's metadata.

    Raises:
        BadInputError: a configuration, seed, device or canary setting out of range (naming it).
    """
    from fdp_audit.data.prepare import prepare_data
    from fdp_audit.training.checkpoint import save_checkpoint
    from fdp_audit.training.run import train_one

    values = {"device": device, "seed": seed}
    config = as_config(config_or_path).with_overrides({k: v for k, v in values.items() if v is not None})
    data = prepare_data(config.data, config.seed)
    user_loop = canaries is not None and config.mechanism.training is not None
    path = Path(out) if out else Path(config.report.out_dir) / ("model.safetensors" if user_loop else "model.pt")
    if canaries is None:
        trained = train_one(config, data, config.seed, progress=True)
        save_checkpoint(path, trained.params, trained.metadata)
        return Training(config, path, trained.metadata, trained.test_accuracy)
    from fdp_audit.auditing.one_run.canaries import train_with_canaries

    inserted = train_with_canaries(config, data, canaries, path, config.seed, canary_game, canary_values, canary_kind)
    return Training(config, inserted.checkpoint, inserted.metadata, inserted.test_accuracy, inserted.manifest,
                    inserted.release)
