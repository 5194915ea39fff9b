"""A training's promise and whether the training kept it (docs/games.md, "The promise"; docs/files.md).

A DP library is told, before training, what the training will spend: Opacus's ``make_private_with_epsilon`` a
target (ε, δ) over a number of epochs, for which it calibrates the noise multiplier z; ``make_private`` a noise
multiplier. The *plan* is the DP-SGD schedule the promise stands for: z at sample rate p over the planned steps
(``epochs / p`` for a target; for ``make_private``, the steps its loop takes). The *trained* schedule is what the
library's accountant counted while the loop ran: one segment ``(z_t, p_t, steps_t)`` per run of equal settings —
a loop that trains more epochs than it planned, or lowers the noise multiplier after the calibration, changes it.

The promise is kept when the trained schedule spends no more than the plan: ``ε_spent ≤ ε_promised``, both the
ε(δ) of fdp-audit's exact (pessimistic PLD) accounting of the schedule at the promise's δ, so that the two
differ only by what the loop did (Opacus's own RDP accounting of the plan, the target ε, is looser and is kept
beside them for the explanation). This is no statistical test: it is judged without error, and it is not
counted in the Bonferroni correction of the audit's comparisons. The gate re-derives both ε from the schedules
a ``promise`` comparison states (:func:`judge_promise`), never from stored ε values.

A configuration may state the claim itself (a noise multiplier or target ε beside the integration): the games then
judge that claim, and the promise comparison also judges the trained schedule against the *claim's* schedule — the
claim's z at the plan's sample rate over the plan's steps (the engine's p and planned T, which the claim takes) —
so that a loop whose engine was promised more than the configuration claims is a VIOLATION without error too:
``ε_spent(δ_c) ≤ ε_claimed(δ_c)`` at the *configuration's* δ_c, by the same accounting, whatever δ the loop gave
its engine (the promise is judged at that one: ε(δ) curves of different schedules cross, so a training within its
promise at the engine's δ can spend more than the claim at the claim's). ε_claimed is the configuration's
target_epsilon itself where it states one (the user's number; the z fdp-audit calibrates for it spends at most
that, so the comparison leaves the calibration's slack to a loop Opacus calibrated for the same target by another
accountant), else the ε(δ_c) of the claim's z. The comparison is exact at δ_c and judges that one point of the
claim's curve, not the whole curve (the games judge the curve). The comparison states that schedule and δ_c as
``claimed``, null when the claim is the plan compared at the same δ (the configuration states no z of its own, or
the engine's, and the engine was given no other δ).

The promise compared is one training's: the probe's (trained once before any trial), whose plan is the claim the
games are judged against unless the configuration states its own. Every trial's training is judged too, and the
first that fails becomes the promise compared, naming its seed (:class:`BrokenPromise`), when the probe's was kept
(and, where the configuration states a claim, did not exceed it):

* a trial that spent more than the compared plan — its history against the probe's plan. A loop that trains more
  than it planned on some seeds only is one; so is a trial whose own engine was promised more than the probe's
  (a larger target ε on some seeds) and kept that promise: what it trained spends more than the claim, which is a
  privacy failure of the loop, not of its configuration, so it is a VIOLATION (``own_promise`` then states the
  trial's own plan, for the explanation);
* a trial that spent more than its own plan (a smaller promise, broken): its own promise;
* where the configuration states a claim of its own, that claim replaces the probe's plan in the first case: a
  trial that spent more than the configuration claims is one (the probe's plan with the claim's schedule, against
  the trial's history), a trial that spent more than the probe's plan but within the claim and its own promise is
  not (the engine's promises may differ between trainings; the claim does not). The claim is stated for the
  probe's data set and its sample rate: a trial on another size (the membership game's world without the canary) is
  held to it where its engine sampled at the claim's p (the claim's mechanism on that data set), and judged against
  its own plan only where Opacus planned another p from the size (the claim says nothing of that schedule; the
  games judge what the size changes).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from fdp_audit.errors import BadInputError

if TYPE_CHECKING:
    from fdp_audit.claim import Claim

KIND = "promise"
SOURCES = ("make_private", "make_private_with_epsilon")
_BROKEN: set[Any] = set()  # this process's configurations whose compared promise is a trial's broken one


@dataclass(frozen=True)
class Promise:
    """What a training promised and what it did (module docstring)."""

    library: str  # "opacus"
    source: str  # one of SOURCES
    noise_multiplier: float  # z as the promise set it up
    sample_rate: float
    planned_steps: int
    delta: float  # the δ its ε are read at: the target's, else the claim's
    trained: tuple[tuple[float, float, int], ...]  # (z_t, p_t, steps_t) as the accountant counted them
    target_epsilon: float | None = None
    epochs: float | None = None
    engine_epsilon: float | None = None  # what the library's own accountant counted (shown, never judged)
    seed: int | None = None  # the trial's training seed when the promise is a trial's, not the probe's
    # the trial's own plan when it differs from the plan compared (the probe's): source, plan (noise_multiplier,
    # sample_rate, steps), target_epsilon and epochs
    own_promise: dict[str, Any] | None = None
    # the configuration's claim when it is not the plan (module docstring): noise_multiplier, sample_rate, steps,
    # the target_epsilon it was calibrated for (null when the configuration states z) and the claim's delta
    claimed: dict[str, Any] | None = None
    kind = KIND
    game = KIND

    @property
    def attack(self) -> str:
        return self.library

    @property
    def id(self) -> str:
        return f"{KIND}/{self.library}"

    def row(self) -> dict[str, Any]:
        """The ``promise`` comparison as ``results.json`` stores it and the gate judges it.

        Returns:
            ``id``, ``kind``, ``game``, ``attack`` (the library), ``source``, ``target_epsilon``, ``epochs``, ``delta``,
            ``engine_epsilon``, the ``planned`` schedule, the ``trained`` segments, ``seed``, ``own_promise`` and
            ``claimed``.
        """
        return {"id": self.id, "kind": KIND, "game": KIND, "attack": self.library,
                "source": self.source, "target_epsilon": self.target_epsilon, "epochs": self.epochs,
                "delta": self.delta, "engine_epsilon": self.engine_epsilon,
                "planned": {"noise_multiplier": self.noise_multiplier, "sample_rate": self.sample_rate,
                            "steps": self.planned_steps},
                "trained": [{"noise_multiplier": z, "sample_rate": p, "steps": steps} for z, p, steps in self.trained],
                "seed": self.seed, "own_promise": self.own_promise, "claimed": self.claimed}

    def claiming(self, claimed: dict[str, Any]) -> Promise:
        """This promise judged against the configuration's claim too, unless the claim's schedule is the plan at the
        promise's δ.

        Args:
            claimed: the claim's schedule and δ (:func:`claimed_schedule`).

        Returns:
            The promise with ``claimed`` set, or None there when the claim is the plan at the same δ.
        """
        plan = (self.noise_multiplier, self.sample_rate, self.planned_steps, self.delta)
        same = (claimed["noise_multiplier"], claimed["sample_rate"], claimed["steps"], claimed["delta"]) == plan
        return replace(self, claimed=None if same else dict(claimed))


def claimed_schedule(claim: Claim) -> dict[str, Any]:
    """The DP-SGD schedule a claim states: its z (configured, or calibrated by fdp-audit for its target ε) at its
    sample rate over its steps — with an integration, the engine's p and planned T —, the target it came from and
    the δ the claim's ε is read at (the configuration's).

    Args:
        claim: the claim the games are judged against.

    Returns:
        ``noise_multiplier``, ``sample_rate``, ``steps``, ``target_epsilon`` (None when z is stated) and ``delta``.
    """
    mech = claim.mechanism
    return {"noise_multiplier": float(claim.noise_multiplier), "sample_rate": float(mech.sample_rate),
            "steps": int(mech.steps), "target_epsilon": mech.target_epsilon, "delta": float(mech.delta)}


class BrokenPromise(BadInputError):
    """A trial's training spent more than it promised where the compared promise, the probe's training's, was
    kept (module docstring): the audit compares ``promise`` (the trial's, with its seed) instead. Not caught, it is
    bad input naming the trial."""

    def __init__(self, promise: Promise, message: str, field: str | None = None):
        super().__init__(message, field)
        self.promise = promise

    def __reduce__(self):  # an executor's worker sends it back pickled
        return type(self), (self.promise, self.detail, self.field)


def mark_promise_broken(key: Any) -> None:
    """Record in this process that the audit of ``key`` (its claimed configuration) compares a trial's broken
    promise: the other trials' trainings need not be checked against the probe's any more.

    Args:
        key: the claimed configuration (hashable).
    """
    _BROKEN.add(key)


def promise_marked_broken(key: Any) -> bool:
    """Whether :func:`mark_promise_broken` was called for ``key`` in this process.

    Args:
        key: the claimed configuration.

    Returns:
        True once the audit of ``key`` compares a trial's broken promise.
    """
    return key in _BROKEN


def planned_steps(sample_rate: float, epochs: float) -> int:
    """The steps of ``epochs`` epochs at sample rate p: ``int(epochs / p)``, as Opacus plans them when it
    calibrates the noise multiplier for a target ε.

    Args:
        sample_rate: the Poisson sampling rate p.
        epochs: the planned epochs.

    Returns:
        The planned steps.
    """
    return int(epochs / sample_rate)


def _schedule_epsilon(segments: list[tuple[float, float, int]], delta: float) -> float:
    """ε(δ) of DP-SGD over the given segments under add/remove neighbours (pessimistic PLD)."""
    merged: list[list[Any]] = []
    for z, p, steps in segments:  # consecutive equal settings are one segment, as the plan is
        if merged and merged[-1][:2] == [z, p]:
            merged[-1][2] += steps
        else:
            merged.append([z, p, steps])
    return _merged_epsilon(tuple((z, p, steps) for z, p, steps in merged), delta)


def _spent_epsilon(trained: list[tuple[float, float, int]], delta: float) -> float:
    """ε(δ) of a trained schedule, infinite where a step had no noise or the privacy loss is too large to account
    (ε in the hundreds: the accounting refuses the grid): a loop that trained so is no DP-SGD, and spends more than
    any promise."""
    from fdp_audit.accounting.parameters import InvalidParameterError

    if any(z == 0 for z, _, _ in trained):
        return math.inf
    try:
        return _schedule_epsilon(trained, delta)
    except InvalidParameterError as error:
        if error.field != "noise_multiplier":
            raise
        return math.inf


@functools.lru_cache(maxsize=256)
def _merged_epsilon(segments: tuple[tuple[float, float, int], ...], delta: float) -> float:
    # a kept promise's plan and trained schedule are one schedule: accounted once (seconds of PLD each)
    from fdp_audit.accounting.events import Segment, SubsampledGaussianEvent
    from fdp_audit.accounting.mechanism import MechanismSpec, accountant_for

    event = SubsampledGaussianEvent(tuple(Segment(z, p, steps) for z, p, steps in segments))
    return float(accountant_for(MechanismSpec("dp_sgd", event)).epsilon(delta))


def _segment(value: Any, where: str, trained: bool = False) -> tuple[float, float, int]:
    """A schedule's segment; a trained one may have had no noise at all (z = 0), a plan may not."""
    if not isinstance(value, dict):
        raise BadInputError("must be a mapping of noise_multiplier, sample_rate and steps", where)
    z, p, steps = (value.get(k) for k in ("noise_multiplier", "sample_rate", "steps"))
    noise_ok = isinstance(z, int | float) and not isinstance(z, bool) and math.isfinite(z) and (
        z > 0 or (trained and z == 0))
    if not noise_ok:
        raise BadInputError("must be a non-negative number" if trained else "must be a positive number",
                            f"{where}.noise_multiplier")
    if not isinstance(p, int | float) or isinstance(p, bool) or not 0 < p <= 1:
        raise BadInputError("must be a number in (0, 1]", f"{where}.sample_rate")
    if not isinstance(steps, int) or isinstance(steps, bool) or steps < 1:
        raise BadInputError("must be a positive integer", f"{where}.steps")
    return float(z), float(p), steps


def judge_promise(row: dict[str, Any], level: float, where: str) -> dict[str, Any]:
    """Judge a ``promise`` comparison from what it states: ``violated`` when the trained schedule's ε exceeds the
    plan's at the row's δ, or the claim's at the claim's δ where the comparison states one (module docstring).
    ``level`` is unused: the judgement has no error.

    Args:
        row: the comparison (:meth:`Promise.row`).
        level: the per-comparison level of the statistical comparisons beside it.
        where: the row's place in the results, for errors.

    Returns:
        The evaluation: ``observed`` and ``theoretical`` the spent ε and the ε it is held to in whichever comparison
        has the larger ``margin`` (spent minus held to), ``violated`` (``promise_broken`` or ``claim_exceeded``),
        ``promise_kept`` (the training kept its own engine's promise: ``own_promise``'s where stated, else the
        plan's), ``spent_epsilon_at_claim`` (the spent ε at the claim's δ), and what the explanation names (source,
        target ε, δ, epochs, steps planned and taken, the noise multipliers, the claimed schedule and its ε).

    Raises:
        BadInputError: an unknown source, a δ outside (0, 1), a malformed planned, trained or claimed segment or
            claimed δ, a target's ε or epochs missing or the planned steps not ``int(epochs / p)``, a negative
            ``engine_epsilon`` or ``seed``, or a malformed ``own_promise`` (naming the field).
    """
    delta = row.get("delta")
    if not _probability(delta):
        raise BadInputError("must be a number in (0, 1)", f"{where}.delta")
    source, plan, target, epochs = _plan(row, where, "planned")
    trained_rows = row.get("trained")
    if not isinstance(trained_rows, list) or not trained_rows:
        raise BadInputError("must be a non-empty list of segments", f"{where}.trained")
    trained = [_segment(s, f"{where}.trained[{i}]", trained=True) for i, s in enumerate(trained_rows)]
    own = _own_promise(row, float(delta), where)
    claimed = _claimed(row, where)
    promised = _schedule_epsilon([plan], float(delta))
    spent = _spent_epsilon(trained, float(delta))
    broken = _exceeds(spent, promised)
    kept = not broken if own is None else not _exceeds(spent, own["epsilon"])
    margin, observed, limit = spent - promised, spent, promised
    claimed_epsilon = spent_at_claim = None
    exceeded = False
    if claimed is not None:
        segment, claimed_target, claimed_delta = claimed
        # the user's own number where the configuration states a target (module docstring), else its z's ε
        claimed_epsilon = (float(claimed_target) if claimed_target is not None
                           else _schedule_epsilon([segment], claimed_delta))
        spent_at_claim = spent if claimed_delta == delta else _spent_epsilon(trained, claimed_delta)
        exceeded = _exceeds(spent_at_claim, claimed_epsilon)
        if spent_at_claim - claimed_epsilon > margin:
            margin, observed, limit = spent_at_claim - claimed_epsilon, spent_at_claim, claimed_epsilon
    return {"observed": observed, "theoretical": limit, "margin": margin, "violated": broken or exceeded,
            "promise_broken": broken, "claim_exceeded": exceeded, "promise_kept": kept,
            "claimed_epsilon": claimed_epsilon, "spent_epsilon_at_claim": spent_at_claim,
            "claimed": None if claimed is None else {
                "noise_multiplier": claimed[0][0], "sample_rate": claimed[0][1], "steps": claimed[0][2],
                "target_epsilon": claimed[1], "delta": claimed[2]},
            "promised_epsilon": promised, "spent_epsilon": spent, "source": source, "target_epsilon": target,
            "epochs": epochs, "delta": float(delta), "steps_planned": plan[2],
            "steps_taken": sum(steps for _, _, steps in trained), "noise_multiplier_promised": plan[0],
            "noise_multipliers_trained": sorted({z for z, _, _ in trained}), "sample_rate": plan[1],
            "engine_epsilon": _optional_number(row, "engine_epsilon", where), "seed": _optional_seed(row, where),
            "own_promise": own}


def _probability(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and 0 < value < 1


def _exceeds(spent: float, limit: float) -> bool:
    # the same schedule gives the same ε; a relative 1e-9 absorbs the rounding of a schedule split in parts
    return spent > limit * (1 + 1e-9) + 1e-12


def _claimed(row: dict[str, Any], where: str) -> tuple[tuple[float, float, int], float | None, float] | None:
    """The configuration's claimed schedule, the target ε it was calibrated for and the claim's δ, or None (absent:
    a results file written before the claim was compared, judged as the claim being the plan — the gate refuses it
    otherwise)."""
    claimed = row.get("claimed")
    if claimed is None:
        return None
    segment = _segment(claimed, f"{where}.claimed")
    target = claimed.get("target_epsilon")
    if target is not None and (not isinstance(target, int | float) or isinstance(target, bool)
                               or not 0 < target < math.inf):
        raise BadInputError("must be a positive number or null", f"{where}.claimed.target_epsilon")
    delta = claimed.get("delta")
    if not _probability(delta):
        raise BadInputError("must be a number in (0, 1): the δ the claim's ε is read at", f"{where}.claimed.delta")
    return segment, target, float(delta)


def _plan(row: dict[str, Any], where: str, key: str) -> tuple[str, tuple[float, float, int], Any, Any]:
    """A stated plan: its source, its segment (``row[key]``), and a target's ε and epochs (checked against the
    planned steps)."""
    source = row.get("source")
    if source not in SOURCES:
        raise BadInputError(f"must be one of {', '.join(SOURCES)}", f"{where}.source")
    plan = _segment(row.get(key), f"{where}.{key}")
    target, epochs = row.get("target_epsilon"), row.get("epochs")
    if source == "make_private_with_epsilon":
        for name, value in (("target_epsilon", target), ("epochs", epochs)):
            if not isinstance(value, int | float) or isinstance(value, bool) or not 0 < value < math.inf:
                raise BadInputError("must be a positive number", f"{where}.{name}")
        if plan[2] != planned_steps(plan[1], epochs):
            raise BadInputError(f"{plan[2]} is not the {planned_steps(plan[1], epochs)} steps of {epochs:g} epochs "
                                f"at sample rate {plan[1]:g}", f"{where}.{key}.steps")
    return source, plan, target, epochs


def _own_promise(row: dict[str, Any], delta: float, where: str) -> dict[str, Any] | None:
    """A trial's own plan when the row compares another's (module docstring), with its ε at the row's δ."""
    own = row.get("own_promise")
    if own is None:
        return None
    if not isinstance(own, dict):
        raise BadInputError("must be a mapping of source, plan, target_epsilon and epochs, or null",
                            f"{where}.own_promise")
    source, (z, p, steps), target, epochs = _plan(own, f"{where}.own_promise", "plan")
    return {"source": source, "noise_multiplier": z, "sample_rate": p, "steps": steps, "target_epsilon": target,
            "epochs": epochs, "epsilon": _schedule_epsilon([(z, p, steps)], delta)}


def _optional_number(row: dict[str, Any], key: str, where: str) -> float | None:
    value = row.get(key)
    if value is not None and (not isinstance(value, int | float) or isinstance(value, bool) or value < 0):
        raise BadInputError("must be a non-negative number or null", f"{where}.{key}")
    return value


def _optional_seed(row: dict[str, Any], where: str) -> int | None:
    value = row.get("seed")
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
        raise BadInputError("must be a non-negative integer or null", f"{where}.seed")
    return value


def promise_violation(j: dict[str, Any]) -> str:
    """The verdict's explanation of a broken promise or an exceeded claim, after its comparison's label: spent,
    promised (and claimed) ε, steps planned and taken, and why (the label is the gate's to add, so that this module
    stays below the games).

    Args:
        j: the comparison's evaluation (:func:`judge_promise`).

    Returns:
        The explanation.
    """
    trained = ", ".join(f"{z:.4g}" for z in j["noise_multipliers_trained"])
    reasons = []
    if j["steps_taken"] > j["steps_planned"]:
        reasons.append(f"it took {j['steps_taken']} steps where {j['steps_planned']} were planned")
    if min(j["noise_multipliers_trained"]) < j["noise_multiplier_promised"]:
        reasons.append(f"it trained with noise multiplier {min(j['noise_multipliers_trained']):.4g} where "
                       f"{j['noise_multiplier_promised']:.4g} was promised")
    engine = ("" if j.get("engine_epsilon") is None
              else f"; the engine's own accountant counted ε = {_shown(j['engine_epsilon'])} for what was trained")
    training = "the training" if j.get("seed") is None else f"the training of the trial of seed {j['seed']}"
    took = (f"it took {j['steps_taken']} steps (noise multiplier {trained}), spending ε = {_shown(j['spent_epsilon'])} "
            f"at δ = {j['delta']:g}")
    if j.get("claim_exceeded"):
        return _claim_exceeded(j, training, reasons, engine)
    if j["source"] == "make_private_with_epsilon":
        epochs = f"{j['epochs']:g} epoch" + ("" if j["epochs"] == 1 else "s")
        plan = (f"the {j['steps_planned']} steps make_private_with_epsilon calibrated noise multiplier "
                f"{j['noise_multiplier_promised']:.4g} for (its target ε = {j['target_epsilon']:g} at δ = "
                f"{j['delta']:g} over {epochs} is Opacus's looser RDP accounting of the same plan)")
    else:
        plan = (f"the {j['steps_planned']} steps make_private was given noise multiplier "
                f"{j['noise_multiplier_promised']:.4g} for")
    own = j.get("own_promise")
    if own is None:
        spent, compared = "spent more than it promised", "its plan"
    else:
        spent = (f"spent more than the claim, the promise of the probe's training, though it kept its own: its "
                 f"engine was promised more ({_plan_words(own)}, ε = {own['epsilon']:.4g} by fdp-audit's exact "
                 "accounting)")
        compared = "the claim's plan"
    return (f"{training} {spent}: {took}, where {compared}, {plan}, spends ε = {j['promised_epsilon']:.4g} at sample "
            f"rate {j['sample_rate']:g} (both ε by fdp-audit's exact accounting{engine})"
            + (f": {'; '.join(reasons)}." if reasons else "."))


def _claim_exceeded(j: dict[str, Any], training: str, reasons: list[str], engine: str) -> str:
    """The explanation when the training spent more than the configuration claims, at the claim's δ: the claim's
    schedule and ε, then the engine's promise (at its own δ, where that differs) and whether the training kept it."""
    claimed = j["claimed"]
    trained = ", ".join(f"{z:.4g}" for z in j["noise_multipliers_trained"])
    if claimed["target_epsilon"] is None:
        claim = (f"noise multiplier {claimed['noise_multiplier']:.4g} at sample rate {claimed['sample_rate']:g} over "
                 f"{claimed['steps']} steps, spends ε = {j['claimed_epsilon']:.4g}")
    else:
        claim = (f"target_epsilon {claimed['target_epsilon']:g} at sample rate {claimed['sample_rate']:g} over "
                 f"{claimed['steps']} steps (fdp-audit calibrates noise multiplier {claimed['noise_multiplier']:.4g} "
                 f"for it), allows ε = {j['claimed_epsilon']:.4g}")
    at = "" if claimed["delta"] == j["delta"] else f" at δ = {j['delta']:g}"
    plan = {"source": j["source"], "noise_multiplier": j["noise_multiplier_promised"], "steps": j["steps_planned"],
            "target_epsilon": j["target_epsilon"], "epochs": j["epochs"]}
    own = j.get("own_promise")
    if own is None:
        promise, broke = f"its engine was promised ε = {j['promised_epsilon']:.4g}{at} ({_plan_words(plan)})", reasons
    else:
        promise = (f"its engine was promised ε = {own['epsilon']:.4g}{at} ({_plan_words(own)}), the probe's "
                   f"training's ε = {j['promised_epsilon']:.4g} ({_plan_words(plan)})")
        broke = []
    spent_there = "" if not at else f", ε = {_shown(j['spent_epsilon'])} there"
    verdict = (f"a promise it kept{spent_there}" if j["promise_kept"]
               else f"a promise it broke too{spent_there}" + (f" ({'; '.join(broke)})" if broke else ""))
    return (f"{training} spent more than the configuration claims: it took {j['steps_taken']} steps (noise "
            f"multiplier {trained}), spending ε = {_shown(j['spent_epsilon_at_claim'])} at the claim's δ = "
            f"{claimed['delta']:g}, where the configuration's claim, {claim}; {promise}, {verdict} (all ε by "
            f"fdp-audit's exact accounting{engine}).")


def _shown(epsilon: float) -> str:
    # a step without noise spends an unbounded ε (_spent_epsilon)
    return "∞" if math.isinf(epsilon) else f"{epsilon:.4g}"


def _plan_words(plan: dict[str, Any]) -> str:
    steps = f"noise multiplier {plan['noise_multiplier']:.4g} over {plan['steps']} steps"
    if plan["source"] == "make_private":
        return f"make_private's {steps}"
    epochs = f"{plan['epochs']:g} epoch" + ("" if plan["epochs"] == 1 else "s")
    return f"make_private_with_epsilon's target ε = {plan['target_epsilon']:g} over {epochs}: {steps}"


def promise_kept_words(j: dict[str, Any]) -> str:
    """What a kept promise's comparison says in a passing verdict, after its label.

    Args:
        j: the comparison's evaluation (:func:`judge_promise`), not violated.

    Returns:
        E.g. ``kept (ε 3.246 spent of 3.246 promised)``, with the configuration's claimed ε where it states one
        (and the ε spent at the claim's δ where that is not the promise's).
    """
    claimed = j.get("claimed")
    if claimed is None:
        claimed = ""
    elif claimed["delta"] == j["delta"]:
        claimed = f" and of {j['claimed_epsilon']:.4g} the configuration claims"
    else:
        claimed = (f" at δ = {j['delta']:g}; ε {j['spent_epsilon_at_claim']:.4g} spent of {j['claimed_epsilon']:.4g} "
                   f"the configuration claims at its δ = {claimed['delta']:g}")
    return f"kept (ε {j['spent_epsilon']:.4g} spent of {j['promised_epsilon']:.4g} promised{claimed})"


def promise_section(row: dict[str, Any], evaluation: dict[str, Any]) -> dict[str, Any]:
    """The ``promise`` section of ``results.json``: what was promised, what was trained, both ε and the status.

    Args:
        row: the stored ``promise`` comparison.
        evaluation: the gate's evaluation of it (:func:`judge_promise`).

    Returns:
        The section, with status ``kept``, ``claim_exceeded`` (the training kept its own engine's promise and spent
        more than the configuration claims, at the claim's δ) or ``broken`` (any other violation: more spent than its
        own promise, or than the probe's plan, the claim, where the configuration states none).
    """
    return {"library": row["attack"], "source": row["source"], "target_epsilon": row["target_epsilon"],
            "epochs": row["epochs"], "delta": row["delta"], "engine_epsilon": row["engine_epsilon"],
            "planned": row["planned"], "trained": row["trained"], "seed": evaluation["seed"],
            "own_promise": row.get("own_promise"),
            "claimed": evaluation["claimed"], "claimed_epsilon": evaluation["claimed_epsilon"],
            "steps_planned": evaluation["steps_planned"], "steps_taken": evaluation["steps_taken"],
            "promised_epsilon": evaluation["promised_epsilon"], "spent_epsilon": evaluation["spent_epsilon"],
            "spent_epsilon_at_claim": evaluation["spent_epsilon_at_claim"],
            "status": ("claim_exceeded" if evaluation["claim_exceeded"] and evaluation["promise_kept"]
                       else "broken" if evaluation["violated"] else "kept")}
