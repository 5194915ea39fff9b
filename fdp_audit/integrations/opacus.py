"""Auditing an Opacus training loop as written (docs/games.md): ``mechanism.integration: opacus``.

The user's ``train(module, dataset, seed)`` builds its ``PrivacyEngine`` as the Opacus tutorials do —
``make_private`` or ``make_private_with_epsilon`` with Poisson sampling (``poisson_sampling=False``, shuffled
batches the accountant would count as Poisson, is refused), per-example gradients by hooks,
functorch or ghost clipping — and fdp-audit runs it as any user training
(:mod:`fdp_audit.auditing.user_training`): canaries are records of its dataset, updates are observed through its
optimizer. What this module adds is the claim: where the config does not state it, it is read from the engine
of one training on S (before any trial, so the audit is planned against it):

* z: the noise multiplier ``make_private`` set up (given, or calibrated by ``make_private_with_epsilon`` for the
  target ε, δ and epochs with the engine's accountant). That is the promise; a loop that changes
  ``optimizer.noise_multiplier`` afterwards trains with other noise than it promised — the audit judges the
  promise (state ``noise_multiplier`` in the config to claim something else);
* p: the engine's sample rate (``1/len(data_loader)``), C: the optimizer's ``max_grad_norm`` (flat clipping
  only), the loss reduction (a summed loss releases the noisy sum itself);
* T: the steps the promise planned — ``epochs / p`` for ``make_private_with_epsilon`` (the steps its noise was
  calibrated for), the steps the accountant counted for ``make_private`` (which is told no epochs);
* the engine's accountant and target (ε, δ), kept for the report: the verdict uses fdp-audit's exact PLD
  accounting of (z, p, T), which is at least as tight as Opacus's.

Beside the games, the training is judged against its promise (:mod:`fdp_audit.auditing.promise`): what the
engine's accountant counted (every step's z and p) must spend no more ε than the plan. A loop that trains
twice the epochs it calibrated for, or lowers the noise multiplier afterwards, is a VIOLATION saying so. The
promise compared is the probe's training; every trial's engine is read too (:func:`promise_kept`): when a trial
spends more than the claim's plan (its own engine promised more, or it trained more) or than its own promise, that
is compared instead (a VIOLATION naming its seed), so a loop cannot keep its promise on the probe's seed alone.
A configuration that states its own z or target ε has the training judged against that claim's schedule too (its z
at the engine's p over the planned T): spending more than the claim is a VIOLATION even where the promise is kept,
and the trials are then held to the claim rather than to the probe's plan.

The engine is read by wrapping ``PrivacyEngine.make_private`` and ``make_private_with_epsilon`` for the duration
of that one training (restored afterwards). In that training and every trial, the noise multiplier's calibration
is cached (:func:`calibration_cached`): a pure function of its arguments, computed once per process for each
distinct target instead of once per trial (seconds of RDP or PRV evaluations each time).
"""

from __future__ import annotations

import contextlib
import functools
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from fdp_audit.auditing.promise import (
    BrokenPromise,
    Promise,
    claimed_schedule,
    judge_promise,
    planned_steps,
    promise_marked_broken,
)
from fdp_audit.config import Config
from fdp_audit.data.prepare import PreparedData
from fdp_audit.errors import BadInputError
from fdp_audit.user_code import passes_through

FIELD = "mechanism.integration"
PROBE_INDEX = 90_000_000  # the trial index whose seed trains the probe, apart from every game's trials


@dataclass
class EngineRecord:
    """What one training's engines were set up with, and what their accountants counted."""

    setups: list[dict[str, Any]] = field(default_factory=list)
    engines: list[Any] = field(default_factory=list)


@contextlib.contextmanager
def recording_engines() -> Iterator[EngineRecord]:
    """Within the block, every ``PrivacyEngine.make_private`` (and ``make_private_with_epsilon``) call records
    its optimizer's settings; the engines are kept to read their accountants afterwards.

    Yields:
        The record the block's calls fill: one setup (z, clip norm, loss reduction, accountant, target, sample
        rate, Poisson sampling) and one engine per call. Opacus is restored after the block.

    Raises:
        BadInputError: Opacus is not installed.
    """
    try:
        from opacus import PrivacyEngine
    except ImportError as err:
        raise BadInputError("mechanism.integration opacus needs Opacus (pip install 'fdp-audit[opacus]')",
                            FIELD) from err
    record = EngineRecord()
    make_private, with_epsilon = PrivacyEngine.make_private, PrivacyEngine.make_private_with_epsilon

    @passes_through
    def recorded_make_private(engine, *args, **kwargs):
        returned = make_private(engine, *args, **kwargs)
        optimizer, loader = returned[1], returned[-1]
        target = getattr(engine, "_fdp_audit_target", None)
        record.setups.append({
            "noise_multiplier": float(optimizer.noise_multiplier), "max_grad_norm": optimizer.max_grad_norm,
            "loss_reduction": optimizer.loss_reduction, "accountant": engine.accountant.mechanism(),
            "target": target, "optimizer": type(optimizer).__name__, "sample_rate": 1 / len(loader),
            "poisson_sampling": bool(kwargs.get("poisson_sampling", True)), "rows": _rows(loader)})
        record.engines.append(engine)
        return returned

    @passes_through
    def recorded_with_epsilon(engine, *args, **kwargs):
        engine._fdp_audit_target = {k: kwargs.get(k) for k in ("target_epsilon", "target_delta", "epochs")}
        try:
            return with_epsilon(engine, *args, **kwargs)
        finally:
            del engine._fdp_audit_target

    PrivacyEngine.make_private = recorded_make_private
    PrivacyEngine.make_private_with_epsilon = recorded_with_epsilon
    try:
        yield record
    finally:
        PrivacyEngine.make_private, PrivacyEngine.make_private_with_epsilon = make_private, with_epsilon


def _rows(loader: Any) -> int | None:
    try:
        return len(loader.dataset)
    except (AttributeError, TypeError):  # an iterable dataset has no length
        return None


@functools.lru_cache(maxsize=64)
@passes_through
def _calibrated(calibrate: Callable[..., float], items: tuple) -> float:
    return calibrate(**dict(items))


@contextlib.contextmanager
def calibration_cached() -> Iterator[None]:
    """Within the block, ``make_private_with_epsilon``'s search for the noise multiplier (a pure function of the
    target ε, δ, sample rate, epochs and accountant; seconds of RDP or PRV evaluations per call) is computed once
    per distinct arguments instead of once per trial.

    Yields:
        Nothing; the block runs once, and Opacus's own search is restored after it.
    """
    from opacus import privacy_engine

    calibrate = privacy_engine.get_noise_multiplier

    @passes_through
    def cached(**kwargs) -> float:
        try:
            return _calibrated(calibrate, tuple(sorted(kwargs.items())))
        except TypeError:  # an unhashable argument: compute it as Opacus would
            return calibrate(**kwargs)

    privacy_engine.get_noise_multiplier = cached
    try:
        yield
    finally:
        privacy_engine.get_noise_multiplier = calibrate


@dataclass(frozen=True)
class EnginePromise:
    """What Opacus promised in one training of the user's loop (an integration's ``Promised``): the settings its
    engine was set up with, the steps its plan and its accountant count, and what it counted; the config's claim
    reads its unstated parts from it (:func:`claimed_config`) and :meth:`promise` is judged beside the games."""

    noise_multiplier: float  # as make_private set it up: the promise
    sample_rate: float
    steps: int  # counted by the accountant
    planned_steps: int  # the promise's (module docstring)
    clip_norm: float
    loss_reduction: str
    accountant: str
    target: dict[str, Any] | None
    history: tuple[tuple[float, float, int], ...]  # (z, p, steps) as the accountant counted them
    engine_epsilon: float | None = None  # the engine's own ε of that history at the promise's δ (shown only)
    rows: int | None = None  # the size of the data set its loader sampled (None: unknown)

    def summary(self) -> dict[str, Any]:
        """What the engine promised and counted, as results.json stores it.

        Returns:
            z, p, steps taken and planned, clip norm, loss reduction, accountant, target, and the noise multipliers
            the accountant counted.
        """
        return {"noise_multiplier": self.noise_multiplier, "sample_rate": self.sample_rate, "steps": self.steps,
                "planned_steps": self.planned_steps, "clip_norm": self.clip_norm,
                "loss_reduction": self.loss_reduction, "accountant": self.accountant, "target": self.target,
                "counted_noise_multipliers": [z for z, _, _ in self.history]}

    def promise(self, delta: float) -> Promise:
        """What the engine was promised and what its accountant counted, at the target's δ (else ``delta``).

        Args:
            delta: the claim's δ, used when the engine was given no target δ.

        Returns:
            The :class:`Promise` to judge (docs/user_training.md).
        """
        target = self.target or {}
        return Promise("opacus", "make_private_with_epsilon" if self.target else "make_private",
                       self.noise_multiplier, self.sample_rate, self.planned_steps,
                       float(target.get("target_delta") or delta), self.history,
                       target.get("target_epsilon"), target.get("epochs"), self.engine_epsilon)


def engine_promise(record: EngineRecord, delta: float = 1e-5, read_engine_epsilon: bool = True) -> EnginePromise:
    """What one training's engine promised (module docstring); refuses what it cannot state as one DP-SGD claim.
    The engine's own ε is read at the target's δ, else at ``delta`` (unless ``read_engine_epsilon`` is false).

    Args:
        record: what :func:`recording_engines` recorded during one training.
        delta: the claim's δ, used when the engine was given no target δ.
        read_engine_epsilon: ask the engine's accountant for its ε (None when it cannot answer).

    Returns:
        The engine's promise: z, the sample rate and steps it counted, the planned steps, clip norm, loss
        reduction, accountant, target and history.

    Raises:
        BadInputError: not exactly one ``make_private`` call, shuffled instead of Poisson batches, per-layer
            clipping, no step counted, or several sample rates.
    """
    if len(record.setups) != 1:
        raise BadInputError(f"the training made {len(record.setups)} PrivacyEngine.make_private calls; the claim "
                            "is read from exactly one (state it in the config otherwise)", FIELD)
    (setup,), (engine,) = record.setups, record.engines
    if not setup["poisson_sampling"]:
        raise BadInputError("make_private was given poisson_sampling=False: the batches are shuffled, not Poisson "
                            "samples, so the accountant's DP-SGD guarantee is not what was trained; use Poisson "
                            "sampling, or audit the loop without an integration, stating its claim", FIELD)
    clip = setup["max_grad_norm"]
    if not isinstance(clip, int | float):
        raise BadInputError("per-layer clipping (a list of max_grad_norm) is not a single DP-SGD claim", FIELD)
    history = tuple((float(z), float(q), int(steps)) for z, q, steps in engine.accountant.history)
    if not history:
        raise BadInputError("the engine's accountant counted no step: the loop never stepped its optimizer", FIELD)
    rates = {round(q, 12) for _, q, _ in history}
    if len(rates) != 1:
        raise BadInputError(f"the accountant saw several sample rates {sorted(rates)}", FIELD)
    rate, counted = rates.pop(), sum(steps for _, _, steps in history)
    target = setup["target"]
    planned = counted if not target or target.get("epochs") is None else planned_steps(setup["sample_rate"],
                                                                                       target["epochs"])
    try:
        engine_epsilon = (float(engine.accountant.get_epsilon((target or {}).get("target_delta") or delta))
                          if read_engine_epsilon else None)
    except (ValueError, ArithmeticError):  # an accountant that cannot answer at this δ: shown as unknown
        engine_epsilon = None
    return EnginePromise(setup["noise_multiplier"], rate, counted, planned, float(clip), setup["loss_reduction"],
                         setup["accountant"], target, history, engine_epsilon, setup["rows"])


_PROBES: dict[Config, EnginePromise] = {}  # this process's: the probe's training's promise of a claimed config


def promise_check(config: Config, trainer: Any) -> Callable[[int], contextlib.AbstractContextManager[None]]:
    """The check of every trial's training of ``trainer`` (a :class:`~fdp_audit.auditing.user_training.UserTrainer`
    of the claimed ``config``): :func:`promise_kept` at the claim's δ, against the probe's training, which is
    trained again in a process that did not train it (an executor's worker), once.

    Args:
        config: the claimed configuration (:func:`claimed_config`'s).
        trainer: the trials' trainer.

    Returns:
        A function of a trial's seed giving the context manager to train it in.
    """
    from fdp_audit.claim import Claim

    delta = config.mechanism.delta

    def compared() -> tuple[EnginePromise, dict[str, Any]] | None:
        if promise_marked_broken(config):  # a trial's broken promise is compared already
            return None
        if config not in _PROBES:
            from fdp_audit.auditing.third_party import trial_seed

            with recording_engines() as record, calibration_cached():
                trainer.run(trial_seed(config.seed, PROBE_INDEX), trainer.x[0], int(trainer.y[0]), None)
            _PROBES[config] = engine_promise(record, delta, read_engine_epsilon=False)
        probe, claimed = _PROBES[config], claimed_schedule(Claim.from_config(config))
        return None if _judged(probe.promise(delta).claiming(claimed))["violated"] else (probe, claimed)

    return lambda seed: promise_kept(seed, delta, compared)


@contextlib.contextmanager
def promise_kept(seed: int, delta: float,
                 compared: Callable[[], tuple[EnginePromise, dict[str, Any]] | None]) -> Iterator[None]:
    """Within the block, one trial's training; afterwards what it spent is judged
    (:func:`fdp_audit.auditing.promise.judge_promise`, once per distinct schedule) against the promise the audit
    compares, the probe's training's (the claim's plan, and the configuration's claim where it states its own), and
    against its own engine's promise. While the compared promise is kept, a trial that spent more than the claim or
    than its own promise raises :class:`~fdp_audit.auditing.promise.BrokenPromise` with the promise it broke, which
    the audit then compares instead (a VIOLATION naming the seed):

    * more than the claim — the probe's plan, or the configuration's claim where it states its own (at the
      configuration's δ, :func:`~fdp_audit.auditing.promise.judge_promise`) — (it trained more than planned on some
      seeds, or its own engine was promised more than the claim): the probe's plan, with the configuration's claim,
      against the trial's history, with the trial's own plan beside it when that differs.
      Only a trial whose loader sampled a data set of the probe's size, or whose engine sampled at the claim's
      rate, is compared with the claim: Opacus plans the sample rate (and, for a target, the steps and z) from the
      size, and the claim is stated for the probe's. A training on one record fewer (the membership game's world
      without the canary) at the same p is the claim's mechanism on that data set, z at p over T, and is held to
      it; at another p the claim says nothing of it (the games judge what the size changes), and it has its own
      plan for the same promise;
    * more than its own plan: its own promise (stated with the configuration's claim, which the gate requires).

    When the compared promise is broken already, the comparison is a VIOLATION and nothing is raised.

    Args:
        seed: the trial's seed, stated with its promise.
        delta: the claim's δ (a target's own δ is used where it states one).
        compared: the promise compared while it is kept and the configuration's claimed schedule
            (:func:`~fdp_audit.auditing.promise.claimed_schedule`), else None (asked after the training).

    Yields:
        Nothing; the block runs the trial's training once.

    Raises:
        BrokenPromise: the trial's training spent more than the claim's plan, the configuration's claim or its own
            promise where the compared promise was kept.
        BadInputError: the trial's training cannot be read as one claim.
    """
    with recording_engines() as record:
        yield
    own = engine_promise(record, delta, read_engine_epsilon=False)
    probed = compared()
    if probed is None:
        return
    probe, claimed = probed
    probe_promise = probe.promise(delta).claiming(claimed)
    # each check judged without the seed, so that equal schedules are judged once, and by what it breaks: its own
    # promise alone where the trial's data set is not the probe's size and Opacus planned another p for it (the
    # claim is stated for the probe's size and p)
    checks = [(own.promise(delta).claiming(claimed), "promise_broken")]
    if own.sample_rate == probe.sample_rate or (own.rows is not None and own.rows == probe.rows):
        own_row, claim_row = checks[0][0].row(), probe_promise.row()
        differs = any(own_row[key] != claim_row[key] for key in ("source", "planned", "target_epsilon", "epochs",
                                                                 "delta"))
        # against the claim: the probe's plan where the configuration states none (at the engine's δ, and at the
        # configuration's where that differs), else the configuration's
        plan = claim_row["planned"]
        stated = probe_promise.claimed is not None and (
            claimed["noise_multiplier"], claimed["sample_rate"], claimed["steps"]) != (
            plan["noise_multiplier"], plan["sample_rate"], plan["steps"])
        checks.insert(0, (replace(probe_promise, trained=own.history, engine_epsilon=None, own_promise={
            "source": own_row["source"], "plan": own_row["planned"], "target_epsilon": own_row["target_epsilon"],
            "epochs": own_row["epochs"]} if differs else None), "claim_exceeded" if stated else "violated"))
    for broken, breaks in checks:
        judged = _judged(broken)
        if judged[breaks]:
            spent = engine_promise(record, delta).engine_epsilon
            over_claim = breaks != "promise_broken" and judged["claim_exceeded"]
            what, (used, limit, steps, z, at) = (
                ("the configuration's claim", (judged["spent_epsilon_at_claim"], judged["claimed_epsilon"],
                                               claimed["steps"], claimed["noise_multiplier"], claimed["delta"]))
                if over_claim else
                ("its own promise" if breaks == "promise_broken" else "the claim",
                 (judged["spent_epsilon"], judged["promised_epsilon"], judged["steps_planned"],
                  judged["noise_multiplier_promised"], judged["delta"])))
            raise BrokenPromise(replace(broken, engine_epsilon=spent, seed=seed),
                f"the training of the trial of seed {seed} spent more than {what}: ε = {used:.4g} "
                f"in {judged['steps_taken']} steps (noise multipliers "
                f"{', '.join(f'{z:.4g}' for z in judged['noise_multipliers_trained'])}) where "
                f"{'it' if over_claim else 'the plan'} allows ε = {limit:.4g} in {steps} steps (noise multiplier "
                f"{z:.4g}), at δ = {at:g}, though the probe's training kept its promise: every "
                "training must keep it", FIELD)


def _judged(promise: Promise) -> dict[str, Any]:
    return _judged_promise(json.dumps(promise.row(), sort_keys=True))


@functools.lru_cache(maxsize=256)
def _judged_promise(row: str) -> dict[str, Any]:
    return judge_promise(json.loads(row), 0.0, FIELD)


def claimed_config(config: Config, data: PreparedData) -> tuple[Config, EnginePromise]:
    """``config`` with the claim's unstated parts read from the engine of one training on S (module docstring):
    z unless ``noise_multiplier`` or ``target_epsilon`` is stated; p, the planned T, C and the loss reduction
    always.

    Args:
        config: a configuration whose ``mechanism.integration`` is opacus.
        data: the prepared data S the probe trains on.

    Returns:
        ``(claimed configuration, the engine's promise)``; the promise is judged beside the games.

    Raises:
        BadInputError: the probe's engine cannot be read as one DP-SGD claim, or Opacus is not installed.
    """
    from fdp_audit.auditing.third_party import trial_seed
    from fdp_audit.auditing.user_training import user_trainer
    from fdp_audit.training.run import build_problem

    mech = config.mechanism
    # the probe's z is the engine's: a stated target is not calibrated at the configuration's own p and T (seconds
    # of accounting for a schedule the claim does not take), and a placeholder z stands in for the problem's
    probe = config if mech.noise_multiplier is not None else replace(
        config, mechanism=replace(mech, noise_multiplier=1.0, target_epsilon=None))
    trainer = user_trainer(probe, build_problem(probe, data))
    with recording_engines() as record, calibration_cached():  # on n + 1 records, as the trials train
        trainer.run(trial_seed(config.seed, PROBE_INDEX), trainer.x[0], int(trainer.y[0]), None)
    promised = engine_promise(record, mech.delta)
    stated = mech.noise_multiplier is not None or mech.target_epsilon is not None
    mechanism = replace(mech, sample_rate=promised.sample_rate, steps=promised.planned_steps,
                        clip_norm=promised.clip_norm, loss_reduction=promised.loss_reduction,
                        noise_multiplier=mech.noise_multiplier if stated else promised.noise_multiplier)
    claimed = replace(config, mechanism=mechanism)
    _PROBES[claimed] = promised
    return claimed, promised
