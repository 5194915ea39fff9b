"""How leakage moved since a baseline audit (docs/statistics.md, "Regression against a baseline").

Both audits' comparisons are judged by the gate at the same α; comparisons are matched by id. For each
matched comparison the change of its margin and of its ε lower bound is reported as measured. Whether an
attack got *significantly* stronger is tested on success rates only, where the trials of the two audits
are independent binomial samples:

    rise_lcb = LCB(k₁, n₁; α/(2m)) − UCB(k₀, n₀; α/(2m))

with exact Clopper–Pearson bounds of the current (k₁ of n₁) and baseline (k₀ of n₀) successes and m the
number of matched rate comparisons. If the true rates satisfy p₁ − p₀ ≤ t, then ``rise_lcb > t`` needs one
of the two bounds to fail, which happens with probability at most α/m (union bound), so over all m
comparisons a false "regression" is reported with probability at most α. An ε lower bound is itself only a
one-sided statement, so the difference of two of them supports no such test; it is shown, never judged.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from fdp_audit.auditing.gate import judge
from fdp_audit.auditing.labels import comparison_label
from fdp_audit.auditing.stats import lower_confidence_bound, upper_confidence_bound
from fdp_audit.errors import BadInputError


@dataclass(frozen=True)
class Change:
    """One comparison present in both audits."""

    id: str
    kind: str
    game: str
    attack: str
    margin_before: float | None
    margin_now: float | None
    rate_before: float | None = None
    rate_now: float | None = None
    rise_lower_bound: float | None = None  # rate comparisons: LCB of (rate now − rate before)
    epsilon_before: float | None = None  # ε comparisons: the ε lower bounds
    epsilon_now: float | None = None
    regressed: bool = False
    label: str = ""  # its human label (:func:`fdp_audit.auditing.labels.comparison_label`)

    @property
    def margin_change(self) -> float | None:
        if self.margin_before is None or self.margin_now is None:
            return None
        return self.margin_now - self.margin_before


@dataclass
class Regression:
    """Two audits' comparisons matched by id, with each success rate's change (:func:`compare`; docs/statistics.md,
    "Regression against a baseline").

    Attributes:
        alpha: the overall significance level of the rise tests, in (0, 1).
        tolerance: the largest tolerated rise of a success probability, in [0, 1); None: report the changes, never
            fail on them.
        changes: one :class:`Change` per comparison both audits hold.
        new: the comparisons only the current audit has.
        gone: the comparisons only the baseline has.
        mechanism_changes: the accounted parameters that differ (the bounds moved too, so margins are not like for
            like).
        config_changes: the settings of the audited configuration that differ (rates from other settings).
    """

    alpha: float
    tolerance: float | None  # None: report the changes, never fail on them
    changes: list[Change]
    new: list[str] = field(default_factory=list)  # comparisons only the current audit has
    gone: list[str] = field(default_factory=list)  # comparisons only the baseline has
    # accounted parameters that differ: the bounds moved too, so margins are not like for like
    mechanism_changes: list[str] = field(default_factory=list)
    # settings of the audited configuration that differ (config_changes): rates from other settings
    config_changes: list[str] = field(default_factory=list)

    @property
    def regressed(self) -> list[Change]:
        return [change for change in self.changes if change.regressed]


def _finite(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and math.isfinite(value) else None


def _judged(results: dict[str, Any], alpha: float, name: str) -> dict[str, dict[str, Any]]:
    comparisons = results.get("comparisons")
    if not isinstance(comparisons, list) or not comparisons:
        raise BadInputError("holds no comparisons to compare", f"{name}.comparisons")
    _, judged = judge(comparisons, alpha)
    return {j["id"]: stored | j for stored, j in zip(comparisons, judged, strict=True)}


def compare(current: dict[str, Any], baseline: dict[str, Any], alpha: float,
            tolerance: float | None = None) -> Regression:
    """Match the two audits' comparisons by id and test each success rate for a rise above ``tolerance``
    (a difference of success probabilities) at overall level ``alpha``; ``tolerance=None`` still computes
    the rise's lower bound but flags nothing.

    The rise of a rate is ``LCB_now − UCB_before``, the one-sided Clopper–Pearson bounds at ``alpha / (2m)`` each
    (Bonferroni over the m rate comparisons both audits hold; docs/statistics.md).

    Args:
        current: the current audit's results.
        baseline: the baseline audit's results.
        alpha: the overall level, in (0, 1).
        tolerance: the largest tolerated rise, in [0, 1), or None to flag nothing.

    Returns:
        The regression: per matched comparison its change, the ids new and gone, and the mechanism's and the
        configuration's changes.

    Raises:
        BadInputError: α or the tolerance is out of range, or either results file holds no comparisons or an invalid
            one.
    """
    if not isinstance(alpha, int | float) or isinstance(alpha, bool) or not 0 < alpha < 1:
        raise BadInputError(f"must be in (0, 1), got {alpha!r}", "alpha")
    if tolerance is not None and not 0 <= tolerance < 1:
        raise BadInputError(f"must be in [0, 1), got {tolerance!r}", "--max-regression")
    now, before = _judged(current, alpha, "results"), _judged(baseline, alpha, "baseline")
    matched = [key for key in now if key in before]
    rate_pairs = [key for key in matched if now[key].get("kind") == before[key].get("kind") == "rate"]
    level = alpha / (2 * max(len(rate_pairs), 1))
    changes = []
    for key in matched:
        a, b = now[key], before[key]
        change = {"id": key, "kind": str(a.get("kind")), "game": str(a.get("game", "")),
                  "attack": str(a.get("attack", key)), "margin_before": _finite(b.get("margin")),
                  "margin_now": _finite(a.get("margin")), "label": comparison_label(a)}
        if key in rate_pairs:
            rise = (lower_confidence_bound(a["successes"], a["trials"], level)
                    - upper_confidence_bound(b["successes"], b["trials"], level))
            change |= {"rate_before": b["rate"], "rate_now": a["rate"], "rise_lower_bound": rise,
                       "regressed": tolerance is not None and rise > tolerance}
        elif a.get("kind") == b.get("kind") == "epsilon":
            change |= {"epsilon_before": _finite(b.get("epsilon_lower_bound")),
                       "epsilon_now": _finite(a.get("epsilon_lower_bound"))}
        changes.append(Change(**change))
    return Regression(float(alpha), tolerance, changes, new=[key for key in now if key not in before],
                      gone=[key for key in before if key not in now],
                      mechanism_changes=_mechanism_changes(current, baseline),
                      config_changes=config_changes(current, baseline))


ACCOUNTED = ("name", "noise_multiplier", "sample_rate", "steps", "clip_norm", "delta", "epsilon")


def _mechanism_changes(current: dict[str, Any], baseline: dict[str, Any]) -> list[str]:
    """``"key: before → now"`` for every accounted mechanism parameter that differs between the audits."""
    now, before = current.get("mechanism") or {}, baseline.get("mechanism") or {}
    return [f"{key}: {_shown(before.get(key))} → {_shown(now.get(key))}" for key in ACCOUNTED
            if now.get(key) != before.get(key)]


# settings that change neither what is trained nor what is attacked: where the run went and how it was executed,
# its title, how many trials, at what level, from which seed (the rise test needs independent trials, not the
# same ones), and where the data file lay (its rows are compared by the dataset fingerprint instead)
SAME_SETTING = frozenset({"name", "seed", "device", "report", "audit.trials", "audit.alpha", "audit.executor",
                          "audit.scheduler", "audit.workers", "audit.max_models_per_chunk", "data.path"})


def _settings(config: Any, prefix: str = "") -> dict[str, Any]:
    """The configuration's settings by dotted name; a section is one name when it is null or not a mapping."""
    if not isinstance(config, dict):
        return {prefix: config}
    flat: dict[str, Any] = {}
    for key, value in config.items():
        name = f"{prefix}.{key}" if prefix else str(key)
        if name in SAME_SETTING:
            continue
        flat |= _settings(value, name) if isinstance(value, dict) else {name: value}
    return flat


def config_changes(current: dict[str, Any], baseline: dict[str, Any]) -> list[str]:
    """``"setting: before → now"`` for every setting of the audited configuration (``reproducibility.config``)
    that differs between the two audits, apart from :data:`SAME_SETTING`, and the data's fingerprint when both
    state one: a success rate measured under other settings is no baseline for this one.

    Args:
        current: the current audit's results.
        baseline: the baseline audit's results.

    Returns:
        The changes, settings sorted by name, then the fingerprint's.
    """
    def reproducibility(results: dict[str, Any]) -> dict[str, Any]:
        section = results.get("reproducibility")
        return section if isinstance(section, dict) else {}

    now, before = reproducibility(current), reproducibility(baseline)
    settings_now, settings_before = _settings(now.get("config") or {}), _settings(before.get("config") or {})
    changes = [f"{name}: {_shown(settings_before.get(name))} → {_shown(settings_now.get(name))}"
               for name in sorted(settings_now.keys() | settings_before.keys())
               if settings_now.get(name) != settings_before.get(name)]
    fingerprints = now.get("dataset_fingerprint"), before.get("dataset_fingerprint")
    if all(isinstance(f, str) for f in fingerprints) and fingerprints[0] != fingerprints[1]:
        changes.append(f"data rows (fingerprint): {fingerprints[1][:12]} → {fingerprints[0][:12]}")
    return changes


def _shown(value: Any) -> str:
    return format(value, ".4g") if isinstance(value, float) else str(value)
