"""One typed configuration schema (docs/files.md): data, model, mechanism, audit, report, and the optional
profile and corrdp sections.

A configuration is validated whenever it is built -- from a YAML file, from a mapping, or in Python
(``Config(mechanism=MechanismConfig(noise_multiplier=2.0))``, ``dataclasses.replace``): unknown keys, wrong types,
out-of-range values and inconsistent fields raise :class:`~fdp_audit.errors.BadInputError` whose one-line message
names the dotted field, e.g. ``mechanism.noise_multiplier: must be > 0, got -1``. Built in Python, a section may
be given as a mapping, and the user's code (``model.factory``, ``mechanism.training``, ``mechanism.third_party``)
as a function instead of a ``file.py:function`` name.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import math
import os
import re
import reprlib
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

import yaml

from fdp_audit.accounting.parameters import MAX_NOISE_MULTIPLIER
from fdp_audit.bounded_read import read_bounded
from fdp_audit.errors import BadInputError
from fdp_audit.mechanisms import ENGINE, MECHANISMS
from fdp_audit.registry import registry_of
from fdp_audit.user_code import resolve_file_spec

MAX_CONFIG_BYTES = 1_000_000
MODEL_SUFFIXES = (".pt", ".pth", ".safetensors", ".ckpt", ".bin")
EXTERNAL_MODEL_HINT = ("fdp-audit reads the .pt checkpoints that `fdp-audit train` writes, with their privacy "
                       "metadata; weights trained elsewhere (a state_dict: .safetensors, .pt, .pth, .bin) are audited "
                       "with a config naming their model factory, data and claim (`fdp-audit audit WEIGHTS --config "
                       "CONFIG`); to audit training code itself, name it in a config (mechanism.training or "
                       "mechanism.third_party: file.py:function) and run `fdp-audit audit CONFIG`")
MAX_SYNTHETIC_ROWS = 1_000_000
MAX_SYNTHETIC_FEATURES = 10_000
MAX_SYNTHETIC_CELLS = 50_000_000  # rows × columns of a generated table: 400 MB of float64


class _Loader(yaml.SafeLoader):
    """PyYAML follows YAML 1.1, which reads ``1e-5`` and ``1.5e3`` (no dot, or an unsigned exponent) as
    strings; a config writes ``delta: 1e-5``, so every exponent form resolves as a float, as in YAML 1.2."""


class DuplicateKeyError(yaml.constructor.ConstructorError):
    """A mapping names a key twice; PyYAML would keep the last value silently."""


def _construct_mapping_once(loader: _Loader, node: yaml.MappingNode, deep: bool = False) -> dict:
    seen: set = set()
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *defaults` then overriding a key is intended
            continue
        key = loader.construct_object(key_node, deep=True)
        try:
            if key in seen:
                raise DuplicateKeyError(None, None, f"duplicate key {_short(key)}", key_node.start_mark)
            seen.add(key)
        except TypeError:  # an unhashable key: the base constructor refuses it with its own message
            continue
    return yaml.SafeLoader.construct_mapping(loader, node, deep)


_Loader.construct_mapping = _construct_mapping_once  # type: ignore[method-assign]

_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+$"),
    list("-+.0123456789"),
)


def _choices(registry: dict[str, Any]):
    """Field metadata: the value must be a key of ``registry``, read when a config is checked (so that a row
    registered after import is accepted)."""
    return {"choices": registry}


def _registered(field: str, besides: tuple[str, ...] = ()):
    """Field metadata: the value, or each value of a list, names an entry of ``field``'s registry
    (:func:`fdp_audit.registry.registry_of`), or is one of ``besides``; read when a config is checked, so that
    entries registered by the user or a plugin before it is built are accepted."""
    return {"registered": field, "besides": besides}


def _range(lo: float | None = None, hi: float | None = None, lo_open: bool = False, hi_open: bool = False):
    """Field metadata for a numeric range check (open or closed ends)."""
    return {"range": (lo, hi, lo_open, hi_open)}


MAX_BLUR_SIGMA = 256.0

# The user's code a config names: ``file.py:function``, ``package.module:function``, or (built in Python) the
# function itself.
UserCode = str | Callable[..., Any]


class _Section:
    """Validation on construction, whichever way a section is built: every field is checked against its type,
    range and choices and put in the schema's representation (lists become tuples, integers floats, mappings
    sections); :class:`Config` also checks the rules between fields. ``_path`` is the section's dotted name in
    errors."""

    _path: ClassVar[str] = ""

    def __post_init__(self) -> None:
        hints = _hints(type(self))
        for spec in dataclasses.fields(self):  # type: ignore[arg-type]
            where = f"{self._path}.{spec.name}" if self._path else spec.name
            object.__setattr__(self, spec.name, _field_value(spec, hints[spec.name], getattr(self, spec.name), where))


@dataclass(frozen=True)
class DataConfig(_Section):
    """The ``data`` section: which data set, which columns are protected, and the public map Ψ (docs/data.md).

    Attributes:
        dataset: a registered data set's name (``adult``, ``german``, ``diabetes``, ``digits``, ``fashion_mnist``,
            ``synthetic``, ``csv``, ``purchase``, ``criteo``, or one registered by the user or a plugin).
        protected: the protected columns, whose values FDP protects; no column twice, none also public.
        public: the public feature columns; None: every column but the label and the protected ones.
        label: the label column; None: the data set's default label.
        label_public: whether the label is public; False: Ψ leaves the label out, so it is private too.
        path: the user's data file (``csv``, ``purchase``, ``criteo``); None for a bundled data set.
        numeric: the numeric columns of a user's file.
        categorical: the categorical columns of a user's file.
        population_fraction: the share of rows, in (0, 1), set apart as the population split the adversary's
            prior is read from; the rest is the training set.
        max_rows: rows kept (drawn by the seed) before the split, at least 1; None: all.
        drop_missing: remove the rows with a missing value in a column the run uses.
        synthetic_rows: rows of the ``synthetic`` table, 10 to 1,000,000.
        synthetic_prior: the ``synthetic`` table's protected prior: at least two non-negative probabilities summing
            to 1.
        synthetic_prior_kind: how the ``synthetic`` protected value is drawn: ``categorical``, ``gaussian`` or
            ``box``.
        synthetic_public_features: public columns of the ``synthetic`` table, 1 to 10,000.
        public_map: a registered kind of Ψ (``columns``, ``label_only``, ``blur``, ``downsample``, or one the user
            registered; docs/accounting.md, docs/images.md).
        blur_sigma: ``blur``: the Gaussian blur's standard deviation in pixels, in (0, 256].
        blur_tolerance: ``blur``: a frequency whose blur gain s is at most τ·s_max is protected; τ in [0, 1).
        downsample_factor: ``downsample``: the side k, at least 1, of the k×k pixel blocks Ψ replaces by their mean.
    """
    _path: ClassVar[str] = "data"
    # a registered data set (docs/data.md): adult, german, diabetes, digits, fashion_mnist, …
    dataset: str = field(default="adult", metadata=_registered("data.dataset"))
    protected: tuple[str, ...] = ("marital-status", "relationship")
    public: tuple[str, ...] | None = None
    label: str | None = None
    label_public: bool = True
    path: str | None = None
    numeric: tuple[str, ...] = ()
    categorical: tuple[str, ...] = ()
    population_fraction: float = field(default=0.5, metadata=_range(0, 1, True, True))
    max_rows: int | None = field(default=None, metadata=_range(1))
    drop_missing: bool = True
    synthetic_rows: int = field(default=2000, metadata=_range(10, MAX_SYNTHETIC_ROWS))
    synthetic_prior: tuple[float, ...] = (0.5, 0.5)
    synthetic_prior_kind: Literal["categorical", "gaussian", "box"] = "categorical"
    synthetic_public_features: int = field(default=5, metadata=_range(1, MAX_SYNTHETIC_FEATURES))
    # Ψ, a registered kind (docs/accounting.md, docs/images.md): columns, label_only, blur, downsample, …
    public_map: str = field(default="columns", metadata=_registered("data.public_map"))
    # public_map: blur; beyond a few hundred pixels a blur of any image this suite reads is constant
    blur_sigma: float = field(default=1.0, metadata=_range(0, MAX_BLUR_SIGMA, True))
    blur_tolerance: float = field(default=0.1, metadata=_range(0, 1, False, True))  # blur: protected if s ≤ τ·s_max
    downsample_factor: int = field(default=4, metadata=_range(1))  # public_map: downsample (k×k block means)


@dataclass(frozen=True)
class ModelConfig(_Section):
    """The ``model`` section: the trained model.

    Attributes:
        kind: ``logistic`` (logistic or softmax regression), ``mlp``, ``cnn`` (images) or ``module`` (the user's
            ``torch.nn.Module`` from ``factory``).
        hidden: the MLP's hidden layer widths, each at least 1.
        factory: with kind ``module`` only (and required then): the module's factory, ``file.py:function``,
            ``module:function`` or, built in Python, the function itself.
    """
    _path: ClassVar[str] = "model"
    kind: Literal["logistic", "mlp", "cnn", "module"] = "logistic"
    hidden: tuple[int, ...] = field(default=(), metadata=_range(1))
    factory: UserCode | None = None  # kind module: any torch.nn.Module's factory (file.py:function, module:function)


@dataclass(frozen=True)
class OptimizerConfig(_Section):
    """The ``mechanism.optimizer`` section: how each step's noisy gradient moves the parameters.

    Attributes:
        name: ``sgd`` or ``adam``.
        lr: the learning rate, at least 0 (0 holds the model still).
        momentum: SGD's momentum, in [0, 1).
        schedule: the learning rate's schedule: ``constant``, ``step`` (times ``step_gamma`` every ``step_every``
            steps) or ``cosine``.
        step_every: ``step``: steps between decays, at least 1.
        step_gamma: ``step``: the decay factor, in (0, 1].
    """
    _path: ClassVar[str] = "mechanism.optimizer"
    name: Literal["sgd", "adam"] = "sgd"
    lr: float = field(default=0.5, metadata=_range(0))  # 0 holds the model still (a step's sums, read alone)
    momentum: float = field(default=0.0, metadata=_range(0, 1, False, True))
    schedule: Literal["constant", "step", "cosine"] = "constant"
    step_every: int = field(default=100, metadata=_range(1))
    step_gamma: float = field(default=0.5, metadata=_range(0, 1, True))


@dataclass(frozen=True)
class MechanismConfig(_Section):
    """The ``mechanism`` section: the training mechanism under audit and the privacy it claims (docs/training.md,
    docs/accounting.md).

    Attributes:
        name: a mechanism of the registry (:data:`fdp_audit.mechanisms.MECHANISMS`: ``fdp_sgd``, ``dp_sgd``, …); for
            the user's training or a third-party function, the claim it is audited against.
        faulty: must be True exactly when ``name`` is a known-faulty mechanism (an acknowledgement that it breaks
            its claim).
        noise_multiplier: the noise multiplier z, in (0, 10⁶]; give it or ``target_epsilon``, not both (neither
            with an integration, which reads it from the user's training).
        target_epsilon: the ε > 0 (at ``delta``) the noise multiplier is calibrated to; None: use
            ``noise_multiplier``.
        delta: δ of the claimed (ε, δ), in (0, 1).
        sample_rate: the Poisson sampling rate p of the private batch, in (0, 1].
        public_batch_size: records per step in the public batch, at least 1.
        steps: private steps T, at least 1.
        clip_norm: the per-example clipping norm C > 0.
        private_weight: the weight α ≥ 0 of the noisy private gradient beside the public one (Algorithm 1).
        public_loss: the loss on the public part Ψ(x): ``mask``, ``mean``, ``gaussian_pad``, ``impute``,
            ``label_dp`` or ``public_image`` (docs/training.md).
        public_pretrain_steps: steps on the public loss alone (it reads Ψ(x) only) before the private steps, at
            least 0.
        projection_radius: after each step the parameters are projected onto the ℓ2 ball of this radius > 0;
            None: no projection.
        optimizer: the optimiser section (:class:`OptimizerConfig`).
        third_party: a third-party training function audited against ``name``'s claim (``file.py:function``,
            ``module:function`` or the function); None: the suite's own trainer.
        training: the user's own training of ``model.factory``'s module, ``train(module, dataset, seed) ->
            module``, audited against a ``dp_sgd`` claim (docs/user_training.md); None: none.
        integration: ``none`` or a registered integration (``opacus``) from whose library the claim's unstated
            parts are read; only with ``training``.
        loss_reduction: how the user's updates normalise the noisy clipped sum: ``mean`` or ``sum``.
    """
    _path: ClassVar[str] = "mechanism"
    name: str = field(default="fdp_sgd", metadata=_choices(MECHANISMS))  # a row of the mechanism registry
    faulty: bool = False
    noise_multiplier: float | None = field(default=1.0, metadata=_range(0, MAX_NOISE_MULTIPLIER, True))
    target_epsilon: float | None = field(default=None, metadata=_range(0, None, True))
    delta: float = field(default=1e-5, metadata=_range(0, 1, True, True))
    sample_rate: float = field(default=0.01, metadata=_range(0, 1, True))
    public_batch_size: int = field(default=256, metadata=_range(1))
    steps: int = field(default=100, metadata=_range(1))
    clip_norm: float = field(default=1.0, metadata=_range(0, None, True))
    private_weight: float = field(default=1.0, metadata=_range(0))
    public_loss: Literal["mask", "mean", "gaussian_pad", "impute", "label_dp", "public_image"] = "mask"
    public_pretrain_steps: int = field(default=0, metadata=_range(0))
    projection_radius: float | None = field(default=None, metadata=_range(0, None, True))
    optimizer: OptimizerConfig = field(default_factory=OptimizerConfig)
    third_party: UserCode | None = None
    # the user's own training of model.factory's module: train(module, dataset, seed) -> module
    training: UserCode | None = None
    # none, or a registered integration (docs/user_training.md) whose library the claim's unstated parts are read from
    integration: str = field(default="none", metadata=_registered("mechanism.integration", ("none",)))
    loss_reduction: Literal["mean", "sum"] = "mean"  # how the user's updates normalise the noisy clipped sum


@dataclass(frozen=True)
class AuditConfig(_Section):
    """The ``audit`` section: the games played, their attacks and trials, and where the trials run
    (docs/games.md).

    Attributes:
        trials: trials per game, 1 to 1,000,000.
        alpha: the significance level of every test, in (0, 1).
        games: registered games (:data:`fdp_audit.auditing.games.GAMES`), each once.
        attacks: registered attacks (:data:`attacks.ATTACKS`), each once.
        target_prior: the prior over the secret's candidates (attribute and image games): at least two
            non-negative probabilities summing to 1; its length is the number K of candidates.
        reconstruction_prior: the reconstruction games' prior over the secret: ``gaussian`` or ``box``.
        reconstruction_scale: that prior's scale s > 0 (in pixel units for images).
        rho_grid: the reconstruction game's success radii ρ, distinct, finite and > 0.
        ball_levels: the image reconstruction game's radii, each given as the probability Ball(ρ) in (0, 1) it
            sets, distinct (docs/images.md).
        canary_norm_factor: the gradient canary's raw norm as a multiple K ≥ 1 of the clip norm.
        gate_on_estimated: let comparisons whose Ball is estimated fail the verdict (otherwise they are
            informational).
        max_models_per_chunk: trials per chunk handed to the executor, at least 1; None: 128.
        executor: where the trials run: ``local`` (this process), ``dask`` or a registered executor
            (docs/cluster.md); it changes no number.
        scheduler: ``dask``: an existing scheduler's address (``tcp://host:8786``); None: a local cluster.
        workers: ``dask``: the local cluster's processes, 1 to 4,096; None: the default.
        trial_timeout: seconds one trial of the user's code may take, in (0, 10⁷]; None: no limit.
    """
    _path: ClassVar[str] = "audit"
    trials: int = field(default=200, metadata=_range(1, 1_000_000))
    alpha: float = field(default=0.05, metadata=_range(0, 1, True, True))
    # names of fdp_audit.auditing.games.GAMES; USER_LOOP_GAMES for the user's training or a third-party mechanism
    games: tuple[str, ...] = field(default=("attribute", "distinguishing"), metadata=_registered("audit.games"))
    attacks: tuple[str, ...] = field(default=("prior", "likelihood", "gradient", "iterates"),
                                     metadata=_registered("audit.attacks"))
    target_prior: tuple[float, ...] = (0.5, 0.5)
    reconstruction_prior: Literal["gaussian", "box"] = "gaussian"
    reconstruction_scale: float = field(default=1.0, metadata=_range(0, None, True))
    rho_grid: tuple[float, ...] = (0.25, 0.5, 1.0)
    # the image reconstruction game's radii: the ρ at which Ball(ρ) is each of these (docs/images.md)
    ball_levels: tuple[float, ...] = (0.05, 0.25, 0.5)
    canary_norm_factor: float = field(default=10.0, metadata=_range(1))
    gate_on_estimated: bool = False
    max_models_per_chunk: int | None = field(default=None, metadata=_range(1))
    # where the trials run (docs/cluster.md): "local" (this process) or "dask"; they change no number
    executor: str = field(default="local", metadata=_registered("audit.executor"))
    scheduler: str | None = None  # dask: an existing scheduler's address (tcp://host:8786); none: a LocalCluster
    workers: int | None = field(default=None, metadata=_range(1, 4096))  # dask: the LocalCluster's processes
    # seconds one trial of the user's code (mechanism.training, mechanism.third_party) may take; None: no limit
    trial_timeout: float | None = field(default=None, metadata=_range(0, 1e7, True))


# the default games when the config names the user's training or a third-party mechanism: with the add/remove
# (membership) game, whose worlds differ in the data set's size, so that a normalisation by it is seen
USER_LOOP_GAMES = ("attribute", "distinguishing", "membership")
# the audit fields that say where trials run, not what they compute: outside the journal's key
EXECUTION_FIELDS = ("executor", "scheduler", "workers")


@dataclass(frozen=True)
class ReportConfig(_Section):
    """The ``report`` section: where the outputs go.

    Attributes:
        out_dir: the folder ``results.json``, ``report.html`` and the JUnit file are written to.
        title: the report's title; None: the configuration's name and what was audited.
    """
    _path: ClassVar[str] = "report"
    out_dir: str = "reports/run"
    title: str | None = None


@dataclass(frozen=True)
class ProfileConfig(_Section):
    """Privacy profiles and the ε transition (docs/profiles.md); see :mod:`fdp_audit.profiles.compute`."""

    _path: ClassVar[str] = "profile"
    columns: tuple[str, ...] = ("age", "education-num")
    rows: int | None = field(default=None, metadata=_range(2))  # the first `rows` rows; None: all
    mechanism: Literal["laplace", "gaussian", "dp_sgd", "fdp_sgd"] = "laplace"
    neighbour: Literal["remove", "replace"] = "remove"
    protected: tuple[str, ...] | None = None  # columns replaced by `neighbour: replace`; None: data.protected
    neighbour_model: Literal["exact", "okumura"] = "exact"  # exact Newton or the worst-case point A_wc
    epsilons: tuple[float, ...] = field(default=(0.01, 0.1, 1.0, 10.0, 100.0), metadata=_range(0, None, True))
    delta: float = field(default=1e-5, metadata=_range(0, 1, True, True))  # gaussian mechanism only
    samples: int = field(default=1000, metadata=_range(2))  # model samples M ~ A(D) per ε
    rank_quantiles: tuple[float, ...] = field(default=(0.01, 0.1, 0.5, 0.9, 0.99, 1.0), metadata=_range(0, 1))
    sweep_min_epsilon: float = field(default=1e-3, metadata=_range(0, None, True))
    sweep_max_epsilon: float = field(default=1e3, metadata=_range(0, None, True))
    sweep_points: int = field(default=31, metadata=_range(3, 1000))
    cutoff: float | None = field(default=None, metadata=_range(0, None, True))  # Monte Carlo radius c
    # dp_sgd / fdp_sgd: coverage by Monte Carlo over trained models (`samples` models of 𝒜(D) and of each
    # of `monte_carlo_rows` neighbours), estimated at `monte_carlo_points` held-out models M ~ 𝒜(D)
    monte_carlo_rows: int = field(default=8, metadata=_range(1, 10_000))
    monte_carlo_points: int = field(default=20, metadata=_range(1, 10_000))
    scatter_rows: int | None = field(default=None, metadata=_range(2))  # the scatter on the first rows only
    diffprivlib: bool = False  # the optional third-party scatter; bad input when diffprivlib cannot run
    regularization: float = field(default=1.0, metadata=_range(0, None, True))


@dataclass(frozen=True)
class CorrDPConfig(_Section):
    """CorrDP (docs/corrdp.md): ``dataset`` adult uses ``sensitive`` / ``insensitive``; synthetic is the paper's
    Gaussian ridge data (its first ``synthetic_sensitive`` coordinates sensitive, feature lists unused)."""

    _path: ClassVar[str] = "corrdp"
    dataset: Literal["adult", "synthetic"] = "adult"
    sensitive: tuple[str, ...] = (
        "age",
        "education-num",
        "hours-per-week",
        "marital-status",
        "relationship",
    )
    insensitive: tuple[str, ...] = ("race", "sex", "workclass", "fnlwgt")
    epsilons: tuple[float, ...] = field(default=(0.5, 1.0, 2.0, 5.0), metadata=_range(0, None, True))
    delta: float = field(default=1e-5, metadata=_range(0, 1, True, True))
    confidence_delta: float | None = field(default=None, metadata=_range(0, 1, True, True))
    tv_source: Literal["estimate", "upper", "known"] = "estimate"
    tv_c2: float | None = field(default=None, metadata=_range(0))
    steps: int = field(default=1000, metadata=_range(1))
    learning_rate: float = field(default=0.05, metadata=_range(0, None, True))
    clip_norm: float = field(default=3.0, metadata=_range(0, None, True))
    sample_rate: float = field(default=1.0, metadata=_range(0, 1, True))
    projection_radius: float | None = field(default=None, metadata=_range(0, None, True))
    hidden: int = field(default=0, metadata=_range(0))
    variants: tuple[Literal["corrdp", "semi", "standard", "partial", "nonprivate"], ...] = (
        "corrdp",
        "semi",
        "standard",
        "partial",
        "nonprivate",
    )
    seeds: int = field(default=2, metadata=_range(1, 1000))
    synthetic_rows: int = field(default=2000, metadata=_range(10, MAX_SYNTHETIC_ROWS))
    synthetic_features: int = field(default=100, metadata=_range(2, MAX_SYNTHETIC_FEATURES))
    synthetic_sensitive: int = field(default=10, metadata=_range(1))


@dataclass(frozen=True)
class Config(_Section):
    """A whole configuration (docs/files.md), validated on construction (module docstring)."""

    name: str = "run"
    seed: int = field(default=0, metadata=_range(0, 2**63 - 1))
    device: Literal["auto", "cpu", "cuda"] = "auto"
    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    mechanism: MechanismConfig = field(default_factory=MechanismConfig)
    audit: AuditConfig = field(default_factory=AuditConfig)
    report: ReportConfig = field(default_factory=ReportConfig)
    profile: ProfileConfig | None = None
    corrdp: CorrDPConfig | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_consistency(self)

    def to_dict(self) -> dict[str, Any]:
        """The configuration as plain data, as a YAML file or ``results.json`` holds it (a function of the user's
        code is written as ``module:function``).

        Returns:
            A mapping of sections.
        """
        return _to_plain(self)

    def with_overrides(self, overrides: Mapping[str, Any], names: Mapping[str, str] | None = None) -> Config:
        """This config with the values of ``overrides`` (keyed by dotted field, e.g. ``"mechanism.steps"`` or
        ``"seed"``) put in, parsed and validated exactly as the same values in a YAML file would be. An error
        about an overridden field names it as ``names`` says (a command-line flag such as ``--seed``).

        ``mechanism.noise_multiplier`` and ``mechanism.target_epsilon`` are two ways to set one quantity: a
        non-null override of one clears the other unless both are overridden.

        Args:
            overrides: dotted field → new value, each given as a YAML file would give it (a number, a string, a
                list, ``None``).
            names: dotted field → the name a message about that field uses instead (default: the dotted field).

        Returns:
            A new validated ``Config``; this one is unchanged (it is frozen).

        Raises:
            BadInputError: a field that does not exist, or a value the field or the whole config refuses.
        """
        return _overridden(self, overrides, names or {})


def _to_plain(value: Any, keep_functions: bool = False) -> Any:
    """Plain data of a section; functions of the user's code kept (``keep_functions``) or named."""
    if dataclasses.is_dataclass(value):
        return {f.name: _to_plain(getattr(value, f.name), keep_functions) for f in dataclasses.fields(value)}
    if isinstance(value, tuple):
        return [_to_plain(v, keep_functions) for v in value]
    if callable(value) and not keep_functions:
        return function_name(value)
    return value


def function_name(function: Callable[..., Any]) -> str:
    """How a configuration records a function of the user's code: ``module:function``.

    Args:
        function: a module-level function.

    Returns:
        Its name, as a ``package.module:function`` spec would give it.
    """
    return f"{function.__module__}:{function.__qualname__}"


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _bounded_repr() -> reprlib.Repr:
    bounded = reprlib.Repr()  # keyword arguments need Python 3.12
    bounded.maxlevel, bounded.maxlist, bounded.maxdict, bounded.maxtuple = 2, 4, 4, 4
    bounded.maxstring = bounded.maxother = 60
    bounded.maxlong = 40
    return bounded


_REPR = _bounded_repr()


def _short(value: Any) -> str:
    """A bounded repr for error messages: a config may hold a megabyte string or, through YAML aliases, a
    list of 10^9 elements held by reference, whose full repr would never finish."""
    return _REPR.repr(value)


def _type_name(tp: Any) -> str:
    origin = typing.get_origin(tp)
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in typing.get_args(tp))
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_name(a) for a in typing.get_args(tp))
    if origin is tuple:
        return f"list of {_type_name(typing.get_args(tp)[0])}"
    if tp is type(None):
        return "null"
    if origin is Callable:
        return "function"
    if dataclasses.is_dataclass(tp):
        return "mapping"
    return getattr(tp, "__name__", str(tp))


def _coerce(value: Any, tp: Any, path: str) -> Any:
    """Check ``value`` against the annotation ``tp`` and return it in the schema's representation."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        options = typing.get_args(tp)
        if value is None and type(None) in options:
            return None
        present = [option for option in options if option is not type(None)]
        if len(present) == 1:  # Optional[X]: X's own error names the nested field
            return _coerce(value, present[0], path)
        for option in options:
            if option is type(None):
                continue
            try:
                return _coerce(value, option, path)
            except BadInputError:
                continue
        raise BadInputError(f"must be {_type_name(tp)}, got {_short(value)}", path)
    if origin is Literal:
        if value not in typing.get_args(tp):
            raise BadInputError(f"must be {_type_name(tp)}, got {_short(value)}", path)
        return value
    if origin is tuple:
        if not isinstance(value, list | tuple):
            raise BadInputError(f"must be a list, got {_short(value)}", path)
        inner = typing.get_args(tp)[0]
        return tuple(_coerce(v, inner, f"{path}[{i}]") for i, v in enumerate(value))
    if dataclasses.is_dataclass(tp):
        return value if isinstance(value, tp) else _build(tp, value, path)
    if origin is Callable:
        if isinstance(value, str) or not callable(value):
            raise BadInputError(f"must be a function, got {_short(value)}", path)
        return value
    if tp is bool:
        if not isinstance(value, bool):
            raise BadInputError(f"must be true or false, got {_short(value)}", path)
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise BadInputError(f"must be an integer, got {_short(value)}", path)
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise BadInputError(f"must be a number, got {_short(value)}", path)
        if not math.isfinite(value):
            raise BadInputError(f"must be finite, got {_short(value)}", path)
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise BadInputError(f"must be a string, got {_short(value)}", path)
        return value
    raise TypeError(f"unsupported schema type {tp!r} at {path}")


def _check_range(value: Any, spec: tuple, path: str) -> None:
    if value is None:
        return
    values = value if isinstance(value, tuple) else (value,)
    lo, hi, lo_open, hi_open = spec
    for v in values:
        if lo is not None and (v < lo or (lo_open and v == lo)):
            raise BadInputError(f"must be {'>' if lo_open else '>='} {lo}, got {_short(v)}", path)
        if hi is not None and (v > hi or (hi_open and v == hi)):
            raise BadInputError(f"must be {'<' if hi_open else '<='} {hi}, got {_short(v)}", path)


def _build(cls: type, raw: Any, path: str) -> Any:
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise BadInputError(f"must be a mapping, got {type(raw).__name__}", path or "config")
    known = [f.name for f in dataclasses.fields(cls)]
    for key in raw:
        if key not in known:
            where = (f"{path}.{key}" if path else str(key))[:120]  # a key may be a megabyte long
            raise BadInputError(f"unknown key (allowed: {', '.join(known)})", where)
    return cls(**{name: raw[name] for name in known if name in raw})  # checked on construction


def _field_value(spec: dataclasses.Field, tp: Any, value: Any, where: str) -> Any:
    """``value`` checked against the field's type, range and choices, in the schema's representation."""
    value = _coerce(value, tp, where)
    if "range" in spec.metadata:
        _check_range(value, spec.metadata["range"], where)
    if "registered" in spec.metadata:
        names = value if isinstance(value, tuple) else (value,)
        registry_of(spec.metadata["registered"]).lookup([n for n in names if n not in spec.metadata["besides"]], where)
    if "choices" in spec.metadata and value not in spec.metadata["choices"]:
        raise BadInputError(f"must be one of {', '.join(map(repr, spec.metadata['choices']))}, got {_short(value)}",
                            where)
    return value


def _check_user_code(code: UserCode, field: str) -> None:
    """A name of the user's code must be a function spec (:func:`_is_function_spec`); a function must be one
    defined at a module's top level, whose ``module:function`` name the results record."""
    if callable(code):
        if not _is_function_spec(function_name(code)) or not inspect.isfunction(code):
            raise BadInputError(f"must be a function defined at a module's top level (its module:function name is "
                                f"recorded in the results), got {_short(code)}", field)
    elif not _is_function_spec(code):
        raise BadInputError(f"must be 'module:function' or 'file.py:function', got {code!r}", field)


def _is_function_spec(spec: str) -> bool:
    """``file.py:function`` (a path, spaces allowed: a resolved spec holds the config's absolute folder) or
    ``package.module:function``."""
    return re.fullmatch(r"(?:.+\.py|[A-Za-z_][\w.]*):[A-Za-z_]\w*", spec) is not None


def _check_consistency(config: Config) -> None:
    """Cross-field rules that a single field's type cannot express."""
    mech, data = config.mechanism, config.data
    row = MECHANISMS[mech.name]
    if row.faulty and not mech.faulty:
        raise BadInputError(
            f"'{mech.name}' is a known-faulty mechanism for testing the audit; set faulty: true to use it",
            "mechanism.faulty",
        )
    if mech.faulty and not row.faulty:
        raise BadInputError(f"'{mech.name}' is not a faulty mechanism", "mechanism.faulty")
    if mech.third_party is not None:  # the name is the privacy claim the third-party function is audited against
        _check_user_code(mech.third_party, "mechanism.third_party")
        if row.faulty or row.trained_by != ENGINE:
            claims = ", ".join(name for name, other in MECHANISMS.items()
                               if not other.faulty and other.trained_by == ENGINE and name != "nonprivate")
            raise BadInputError(f"the claim of a third-party mechanism cannot be {mech.name!r}; name the mechanism "
                                f"whose accounting it claims ({claims})", "mechanism.name")
    if mech.training is not None:
        _check_user_code(mech.training, "mechanism.training")
        if config.model.factory is None:
            raise BadInputError("the user's training function trains the module of model.factory; name it",
                                "model.factory")
        if mech.third_party is not None or mech.name != "dp_sgd":
            raise BadInputError("the user's training function is audited against a DP-SGD claim (mechanism.name: "
                                "dp_sgd), without mechanism.third_party", "mechanism.training")
    elif mech.integration != "none":
        raise BadInputError("an integration reads the claim from the user's training (mechanism.training)",
                            "mechanism.integration")
    if (config.model.kind == "module") != (config.model.factory is not None):
        raise BadInputError("model.kind 'module' and model.factory (file.py:function or module:function) go "
                            "together", "model.factory")
    if config.model.factory is not None:
        _check_user_code(config.model.factory, "model.factory")
    if mech.noise_multiplier is not None and mech.target_epsilon is not None:
        raise BadInputError("give noise_multiplier or target_epsilon, not both (target_epsilon calibrates the noise "
                            "multiplier and would override it)", "mechanism.target_epsilon")
    for name, values in (("audit.games", config.audit.games), ("audit.attacks", config.audit.attacks)):
        if len(set(values)) != len(values):  # each entry is judged, and counted in the Bonferroni correction, once
            raise BadInputError(f"lists {sorted({v for v in values if values.count(v) > 1})} more than once", name)
    tables = [("data", data.synthetic_rows, data.synthetic_public_features + 1)]
    if config.corrdp is not None:
        tables.append(("corrdp", config.corrdp.synthetic_rows, config.corrdp.synthetic_features))
    for section, rows, columns in tables:
        if rows * columns > MAX_SYNTHETIC_CELLS:
            raise BadInputError(f"{rows} rows × {columns} columns exceed the limit of {MAX_SYNTHETIC_CELLS:,} "
                                "generated cells", f"{section}.synthetic_rows")
    if mech.noise_multiplier is None and mech.target_epsilon is None and mech.integration == "none" and \
            row.releases.needs_noise_multiplier:
        raise BadInputError("give noise_multiplier or target_epsilon", "mechanism.noise_multiplier")
    if data.public is not None:
        overlap = sorted(set(data.public) & set(data.protected))
        if overlap:
            raise BadInputError(f"column(s) {overlap} listed as both public and protected", "data.public")
    if len(set(data.protected)) != len(data.protected):
        raise BadInputError("duplicate column", "data.protected")
    for name, prior in (
        ("data.synthetic_prior", data.synthetic_prior),
        ("audit.target_prior", config.audit.target_prior),
    ):
        if len(prior) < 2 or any(p < 0 for p in prior) or abs(sum(prior) - 1) > 1e-6:
            raise BadInputError("must list at least two non-negative probabilities summing to 1", name)
    rho = config.audit.rho_grid
    if not rho or any(not math.isfinite(r) or r <= 0 for r in rho) or len(set(rho)) != len(rho):
        raise BadInputError("must list distinct finite radii ρ > 0", "audit.rho_grid")
    levels = config.audit.ball_levels
    if not levels or any(not 0 < level < 1 for level in levels) or len(set(levels)) != len(levels):
        raise BadInputError("must list distinct probabilities strictly between 0 and 1", "audit.ball_levels")


def config_from_dict(raw: Any) -> Config:
    """The validated config of a raw mapping. A ``mechanism.target_epsilon`` without a ``noise_multiplier``
    leaves the noise multiplier unset (it is calibrated), rather than at its default of 1; a config naming the
    user's training or a third-party mechanism without ``audit.games`` plays :data:`USER_LOOP_GAMES`.

    Args:
        raw: the configuration as plain data, sections of dotted fields (docs/files.md), as ``yaml.safe_load`` of
            a config file or :meth:`Config.to_dict` gives it; a missing section or field takes its default
            (docs/configuration.md). Relative paths are kept as given (:func:`load_config` resolves them).

    Returns:
        The validated ``Config``.

    Raises:
        BadInputError: an unknown field, a value of the wrong type or out of its range, or fields that contradict
            each other; the message names the dotted field.
    """
    model = raw.get("model") if isinstance(raw, dict) else None
    if isinstance(model, dict) and model.get("factory") is not None and "kind" not in model:
        raw = {**raw, "model": {**model, "kind": "module"}}  # a factory names a module
    mechanism = raw.get("mechanism") if isinstance(raw, dict) else None
    if (isinstance(mechanism, dict) and mechanism.get("target_epsilon") is not None
            and "noise_multiplier" not in mechanism):
        raw = {**raw, "mechanism": {**mechanism, "noise_multiplier": None}}
    if isinstance(mechanism, dict) and mechanism.get("integration", "none") != "none" and "noise_multiplier" not in \
            mechanism and "target_epsilon" not in mechanism:  # the engine states z (and p, T, C unless given)
        raw = {**raw, "mechanism": {**raw["mechanism"], "noise_multiplier": None}}
    if isinstance(mechanism, dict) and (mechanism.get("training") is not None
                                        or mechanism.get("third_party") is not None):
        audit = raw.get("audit")
        if audit is None or (isinstance(audit, dict) and "games" not in audit):
            raw = {**raw, "audit": {**(audit or {}), "games": list(USER_LOOP_GAMES)}}
    return _build(Config, raw, "")


_NOISE_FIELDS = ("mechanism.noise_multiplier", "mechanism.target_epsilon")


def _overridden(config: Config, overrides: Mapping[str, Any], names: Mapping[str, str]) -> Config:
    raw = _to_plain(config, keep_functions=True)
    for dotted, value in overrides.items():
        *sections, key = dotted.split(".")
        parent: Any = raw
        for section in sections:
            parent = parent.get(section) if isinstance(parent, dict) else None
        if not isinstance(parent, dict) or key not in parent:
            raise BadInputError("no such field in the config", names.get(dotted, dotted))
        parent[key] = _to_plain(value, keep_functions=True)
    for given, other in (_NOISE_FIELDS, _NOISE_FIELDS[::-1]):
        if given in overrides and other not in overrides and overrides[given] is not None:
            raw["mechanism"][other.split(".")[1]] = None
    try:
        return config_from_dict(raw)
    except BadInputError as err:
        if err.field in names:
            raise BadInputError(err.detail, names[err.field]) from err
        raise


def load_config(path: str | Path) -> Config:
    """Read and validate a YAML config; every failure is a one-line :class:`BadInputError`. A relative
    ``data.path``, and the file of every ``file.py:function`` the config names (``model.factory``,
    ``mechanism.training``, ``mechanism.third_party``), are read from the config file's folder (and held as
    absolute paths).

    Args:
        path: the YAML file (docs/files.md; the keys and their defaults are in docs/configuration.md).

    Returns:
        The validated ``Config``.

    Raises:
        BadInputError: a file that cannot be read, is not UTF-8 YAML (a model file is named as such), repeats a
            key, or holds a config that :func:`config_from_dict` refuses.
    """
    path = Path(path)
    if path.suffix.lower() in MODEL_SUFFIXES:
        raise BadInputError(f"{path} is a model file, not a YAML config; {EXTERNAL_MODEL_HINT}")
    raw_bytes = read_bounded(path, MAX_CONFIG_BYTES, "config file")
    try:
        text = raw_bytes.decode("utf-8")
    except UnicodeDecodeError as err:
        if raw_bytes.startswith(b"PK\x03\x04"):  # the zip container of torch.save
            raise BadInputError(f"{path} is a PyTorch file, not a YAML config; {EXTERNAL_MODEL_HINT}") from err
        raise BadInputError(f"config is not UTF-8 text: {path}") from err
    try:
        raw = yaml.load(text, Loader=_Loader)  # _Loader is a SafeLoader
    except DuplicateKeyError as err:
        raise BadInputError(f"{err.problem} at line {err.problem_mark.line + 1} (write each key once): {path}") from err
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise BadInputError(f"malformed YAML{where}: {path}") from err
    except RecursionError as err:  # PyYAML composes nested collections recursively
        raise BadInputError(f"malformed YAML: nested too deeply: {path}") from err
    except ValueError as err:  # a timestamp such as 2001-13-45, an integer of more than 4300 digits
        raise BadInputError(f"malformed YAML: a value cannot be read ({str(err)[:80]}): {path}") from err
    config = config_from_dict(raw)
    folder = path.parent
    # Not with_overrides: the resolved specs hold the config's absolute folder, whose name may contain the spaces
    # that a spec written in a config may not.
    config = dataclasses.replace(
        config, model=dataclasses.replace(config.model, factory=resolve_file_spec(config.model.factory, folder)),
        mechanism=dataclasses.replace(config.mechanism, training=resolve_file_spec(config.mechanism.training, folder),
                                      third_party=resolve_file_spec(config.mechanism.third_party, folder)))
    if config.data.path is not None and not Path(config.data.path).is_absolute():
        # relative to the config file, as an include would be: the same config works from any working folder
        config = config.with_overrides({"data.path": os.path.abspath(path.parent / config.data.path)})
    return config


def config_reference_markdown(registered: Mapping[str, Iterable[str]] | None = None) -> str:
    """The configuration reference (docs/configuration.md), generated from the schema so that it cannot drift.

    Args:
        registered: for a field whose values are the names of a registry's entries (``data.dataset``), the
            names registered, listed as its type.

    Returns:
        A markdown table: every dotted key, its type and its default.
    """
    registered = registered or {}
    lines = ["| key | type | default |", "|---|---|---|"]

    def walk(cls: type, prefix: str) -> None:
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            tp = hints[f.name]
            inner = [a for a in typing.get_args(tp) if dataclasses.is_dataclass(a)]
            if dataclasses.is_dataclass(tp) or inner:
                walk(tp if dataclasses.is_dataclass(tp) else inner[0], f"{prefix}{f.name}.")
                continue
            default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
            shown = "null" if default is None else json_like(default)
            kind = _type_name(Literal[tuple(f.metadata["choices"])]) if "choices" in f.metadata else _type_name(tp)
            if f"{prefix}{f.name}" in registered:
                kind = "one of " + ", ".join(map(repr, registered[f"{prefix}{f.name}"])) + " (registered)"
            lines.append(f"| `{prefix}{f.name}` | {kind.replace('|', '/')} | `{shown}` |")

    walk(Config, "")
    return "\n".join(lines)


def json_like(value: Any) -> str:
    """A default value as the configuration reference shows it: in YAML/JSON spelling.

    Args:
        value: a configuration default (a tuple, a bool, a number or a string).

    Returns:
        ``true``/``false`` for a bool, ``[a, b]`` for a tuple (its items spelled the same way), else ``str(value)``.
    """
    if isinstance(value, tuple):
        return "[" + ", ".join(json_like(v) for v in value) + "]"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
