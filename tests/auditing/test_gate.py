"""The gate (docs/statistics.md, docs/files.md): one judge for the end of an audit and for ``fdp-audit gate``.
Bonferroni over the m comparisons of one audit, violation when a lower confidence bound exceeds the accounted limit, and
JUnit XML with one test case per comparison."""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET
from typing import Any

import numpy as np
import pytest

from attacks import ATTACKS
from fdp_audit.accounting.tradeoff import gaussian_epsilon, gaussian_tradeoff
from fdp_audit.auditing.gate import can_fail, judge, judge_comparison, junit_xml
from fdp_audit.auditing.labels import comparison_label
from fdp_audit.auditing.stats import (
    RocCounts,
    clopper_pearson,
    curve_p_value,
    lower_confidence_bound,
    upper_confidence_bound,
)
from fdp_audit.errors import BadInputError

# the attacks as the labels name them: their registered titles
ITERATES = ATTACKS["iterates"].title


def rate(ident: str, successes: int, trials: int = 200, bound: float = 0.6, ball: float = 0.5) -> dict[str, Any]:
    return {"id": ident, "kind": "rate", "trials": trials, "successes": successes, "ball": ball, "bound": bound}


GAUSSIAN_CLAIM = {"mechanism": "dp_sgd", "noise_multiplier": 2.0, "sample_rate": 1.0, "steps": 1}  # G_{1/2}
NO_CLAIM = {"mechanism": "nonprivate"}


def epsilon(ident: str, fp: list[int], fn: list[int], claim: dict | None = None, n: int = 100) -> dict[str, Any]:
    return {"id": ident, "kind": "epsilon", "thresholds": [float(i) for i in range(len(fp))], "orientation": 1,
            "false_positives": fp, "false_negatives": fn, "negatives": n, "positives": n, "delta": 1e-5,
            "relation": "add_remove", "claim": GAUSSIAN_CLAIM if claim is None else claim}


def crossing_successes(trials: int, bound: float, alpha: float, m: int) -> int:
    """The smallest success count whose lower bound exceeds ``bound`` at level α but not at level α/m."""
    for k in range(trials + 1):
        if lower_confidence_bound(k, trials, alpha) > bound:
            assert lower_confidence_bound(k, trials, alpha / m) <= bound
            return k
    raise AssertionError("no crossing")


def test_rate_comparison_uses_the_one_sided_clopper_pearson_bound() -> None:
    (j,) = judge([rate("a", 140)], 0.05)[1]
    assert j["lower_bound"] == pytest.approx(lower_confidence_bound(140, 200, 0.05))
    assert (j["ci_low"], j["ci_high"]) == pytest.approx(clopper_pearson(140, 200, 0.10))
    assert j["rate"] == 0.7 and j["theoretical"] == 0.6
    assert j["margin"] == pytest.approx(j["lower_bound"] - 0.6)
    assert j["violated"] is True and j["tightness"] == pytest.approx((0.7 - 0.5) / (0.6 - 0.5))


@pytest.mark.parametrize("m", [2, 5, 10])
def test_bonferroni_over_m_comparisons(m: int) -> None:
    """Each of m comparisons is judged at level α/m: the same evidence is a violation alone and a pass
    beside m − 1 harmless comparisons."""
    alpha, trials, bound = 0.05, 200, 0.6
    k = crossing_successes(trials, bound, alpha, m)
    alone, _ = judge([rate("target", k, trials, bound)], alpha)
    assert alone["status"] == "VIOLATION" and alone["violations"] == ["target"]
    crowd = [rate("target", k, trials, bound)] + [rate(f"other{i}", 100, trials, bound) for i in range(m - 1)]
    verdict, judged = judge(crowd, alpha)
    assert verdict["status"] == "PASS" and verdict["n_comparisons"] == m
    for j, row in zip(judged, crowd):
        assert j["lower_bound"] == pytest.approx(lower_confidence_bound(row["successes"], trials, alpha / m))


def test_bonferroni_applies_to_epsilon_comparisons() -> None:
    """An ε comparison gets α/m too (then splits it over its thresholds)."""
    row = epsilon("eps", [1, 3], [60, 30], claim=NO_CLAIM)
    single = judge([row], 0.05)[1][0]["observed"]
    shared = judge([row] + [rate(f"r{i}", 100) for i in range(4)], 0.05)[1][0]["observed"]
    assert 0 < shared < single


def test_epsilon_comparison_violation_and_unbounded_claim() -> None:
    strong = epsilon("eps", [0, 0], [0, 1])  # perfect separation on 100 + 100 trials against G_{1/2}
    verdict, (j,) = judge([strong], 0.05)
    claimed = gaussian_epsilon(1e-5, 0.5)
    assert verdict["status"] == "VIOLATION" and j["theoretical"] == pytest.approx(claimed, abs=0.01)
    assert j["observed"] > j["theoretical"] and j["epsilon_ratio"] == j["observed"] / j["theoretical"]
    assert j["curve_p_value"] < 1e-6 and "smaller noise multiplier" in j["epsilon_family"]
    assert j["epsilon_lower_bound_cp"] > j["theoretical"]  # this evidence is strong enough for the CP ε too
    verdict, (j,) = judge([{**strong, "claim": NO_CLAIM}], 0.05)  # a non-private claim: ε = ∞, f ≡ 0
    assert math.isinf(j["theoretical"]) and j["epsilon_ratio"] is None and "μ-GDP" in j["epsilon_family"]
    assert verdict["status"] == "NOT JUDGED" and not j["judged"] and j["trials_needed"] is None  # cannot fail
    assert verdict["worst_margin"] is None


def test_epsilon_comparison_is_rederived_from_the_stated_claim() -> None:
    """The gate reads the claim's mechanism, never a stored bound: a stored ``epsilon_claimed`` changes
    nothing, a weaker stated claim (less noise) turns the same counts from a violation into a pass."""
    row = epsilon("eps", [5], [10])
    verdict, (j,) = judge([row], 0.05)
    assert verdict["status"] == "VIOLATION"
    assert judge([{**row, "epsilon_claimed": 100.0}], 0.05)[1][0] == j
    weaker = {**GAUSSIAN_CLAIM, "noise_multiplier": 0.3}
    verdict, (weak,) = judge([{**row, "claim": weaker}], 0.05)
    assert verdict["status"] == "PASS" and weak["observed"] < weak["theoretical"]
    assert j["family_capped"]  # the evidence rejects even half the claimed z: the family ε is "at least"
    assert (f"an ε lower bound of {j['observed']:.4g} (at the cap of the family's search: at least that much; "
            f"Clopper–Pearson ε {j['epsilon_lower_bound_cp']:.4g})") in judge([row], 0.05)[0]["explanation"]


def test_epsilon_comparison_curve_test_by_hand() -> None:
    """One threshold: violated iff the curve p-value against G_{1/2} is ≤ the level; the points carry the
    Clopper–Pearson bounds at level α/2 per side (for the CP ε and the figure) and the claimed f there."""
    row = epsilon("eps", [20], [50])
    (j,) = judge([row], 0.05)[1]
    (point,) = j["points"]
    assert point["fpr_ub"] == pytest.approx(upper_confidence_bound(20, 100, 0.025))
    assert point["fnr_ub"] == pytest.approx(upper_confidence_bound(50, 100, 0.025))
    assert point["f_claimed"] == pytest.approx(gaussian_tradeoff(point["fpr_ub"], 0.5), abs=1e-3)
    expected = curve_p_value(RocCounts(np.zeros(1), np.array([20]), np.array([50]), 100, 100),
                             lambda a: gaussian_tradeoff(a, 0.5))[0]
    assert j["curve_p_value"] == point["curve_p_value"] == pytest.approx(expected, rel=1e-3)
    assert j["violated"] == (j["curve_p_value"] <= 0.05) and j["orientation"] == 1


@pytest.mark.parametrize(("n", "claim", "expected"), [
    (100, GAUSSIAN_CLAIM, True),  # no error in 100 + 100 trials would be far below G_{1/2}
    (3, GAUSSIAN_CLAIM, False),  # 3 + 3 trials can never put the joint region below G_{1/2}
    (1000, NO_CLAIM, False),  # f ≡ 0: nothing is below it
    (10, {"mechanism": "public_only"}, True),  # f(α) = 1 − α: 10 + 10 error-free trials are below it
])
def test_can_fail(n: int, claim: dict, expected: bool) -> None:
    row = epsilon("eps", [0], [0], claim=claim, n=n)
    assert can_fail(row, 0.05) is expected
    assert can_fail({**row, "false_positives": [n], "false_negatives": [n]}, 0.05) is expected  # counts unused
    if expected:
        assert judge([row], 0.05)[0]["status"] == "VIOLATION"


def test_verdict_names_the_worst_comparison() -> None:
    verdict, _ = judge([rate("mild", 120), rate("worst", 190), rate("bad", 160)], 0.05)
    assert verdict["status"] == "VIOLATION"
    assert verdict["violations"] == ["worst", "bad"]
    assert verdict["worst_comparison"] == "worst"
    assert "worst" in verdict["explanation"] and "\n" not in verdict["explanation"]
    verdict, _ = judge([rate("a", 100), rate("b", 110)], 0.05)
    assert verdict["status"] == "PASS" and verdict["worst_comparison"] == "b" and verdict["violations"] == []
    verdict, judged = judge([], 0.05)  # nothing compared is never a pass
    assert verdict["status"] == "NOT JUDGED" and judged == [] and verdict["worst_comparison"] is None
    assert "No comparisons were made" in verdict["explanation"]


def test_smaller_alpha_is_more_lenient() -> None:
    rows = [rate("a", crossing_successes(200, 0.6, 0.05, 20))]
    assert judge(rows, 0.05)[0]["status"] == "VIOLATION"
    assert judge(rows, 0.05 / 20)[0]["status"] == "PASS"


BAD_ROWS = {
    "unknown kind": ({"id": "x", "kind": "vibes"}, "kind"),
    "kind not a string": ({"id": "x", "kind": []}, "kind"),
    "no id": ({"kind": "rate", "trials": 10, "successes": 1, "ball": 0.5, "bound": 0.6}, "comparisons[0]"),
    "successes above trials": (rate("x", 300), "between 0 and trials"),
    "zero trials": (rate("x", 0, trials=0), "between 0 and trials"),
    "float trials": ({**rate("x", 1), "trials": 10.5}, "trials"),
    "bool successes": ({**rate("x", 1), "successes": True}, "successes"),
    "bound above one": (rate("x", 1, bound=1.5), "bound"),
    "ball missing": ({k: v for k, v in rate("x", 1).items() if k != "ball"}, "ball"),
    "threshold lists differ": ({**epsilon("e", [1, 2], [3, 4]), "false_negatives": [3]}, "equal length"),
    "count above negatives": (epsilon("e", [101], [3]), "out of range"),
    "claim missing": ({k: v for k, v in epsilon("e", [1], [3]).items() if k != "claim"}, "claim.mechanism"),
    "unknown claimed mechanism": (epsilon("e", [1], [3], claim={"mechanism": "magic"}), "claim.mechanism"),
    "negative noise multiplier": (epsilon("e", [1], [3], claim={**GAUSSIAN_CLAIM, "noise_multiplier": -1.0}),
                                  "noise_multiplier"),
    "sample rate above one": (epsilon("e", [1], [3], claim={**GAUSSIAN_CLAIM, "sample_rate": 2}), "sample_rate"),
    "steps not an integer": (epsilon("e", [1], [3], claim={**GAUSSIAN_CLAIM, "steps": 1.5}), "steps"),
    "unknown relation": ({**epsilon("e", [1], [3]), "relation": "swap"}, "relation"),
    "orientation zero": ({**epsilon("e", [1], [3]), "orientation": 0}, "orientation"),
    "no threshold": (epsilon("e", [], []), "non-empty"),
    "infinite threshold": ({**epsilon("e", [1], [3]), "thresholds": [math.inf]}, "thresholds"),
}


@pytest.mark.parametrize("name", BAD_ROWS)
def test_malformed_comparisons_are_bad_input(name: str) -> None:
    row, field = BAD_ROWS[name]
    with pytest.raises(BadInputError, match=re.escape(field)):
        judge([row], 0.05)


@pytest.mark.parametrize("alpha", [0.0, 1.0, -0.1, float("nan")])
def test_alpha_out_of_range(alpha: float) -> None:
    with pytest.raises(BadInputError, match="alpha"):
        judge([rate("a", 100)], alpha)


def test_judge_comparison_level_is_used_as_given() -> None:
    j = judge_comparison(rate("a", 150), 0.001, "where")
    assert j["lower_bound"] == pytest.approx(lower_confidence_bound(150, 200, 0.001))


def test_junit_xml_one_testcase_per_comparison() -> None:
    rows = [rate("attribute/<likelihood>", 100), rate('distinguishing-attribute/"iterates"', 195),
            epsilon("distinguishing-epsilon/iterates", [5, 2], [40, 60], claim={**GAUSSIAN_CLAIM,
                                                                                 "noise_multiplier": 0.3})
            | {"game": "distinguishing", "attack": "iterates"}]
    verdict, judged = judge(rows, 0.05)
    merged = [row | j for row, j in zip(rows, judged, strict=True)]
    root = ET.fromstring(junit_xml(verdict, merged))
    assert root.tag == "testsuite"
    cases = root.findall("testcase")
    # named by their human labels, escaped and read back intact
    assert [c.get("name") for c in cases] == [comparison_label(row) for row in merged]
    assert cases[2].get("name") == f"Distinguishing game (add/remove) · {ITERATES}"
    assert root.get("tests") == "3" and root.get("failures") == "1"
    failed = [c.get("name") for c in cases if c.find("failure") is not None]
    assert failed == [comparison_label(merged[1])]
    message = cases[1].find("failure").get("message")  # the observed value is a lower bound: it says so
    assert message.startswith("lower confidence bound of the success rate ") and "> limit 0.6" in message


def test_a_perfect_attack_has_lower_bound_level_to_the_one_over_n() -> None:
    """The rate kind's power check rests on k = N giving the one-sided Clopper–Pearson bound level^(1/N)."""
    for trials, level in ((30, 0.001 / 4), (200, 0.01), (7, 0.2)):
        assert lower_confidence_bound(trials, trials, level) == pytest.approx(level ** (1 / trials), rel=1e-9)


@pytest.mark.parametrize(("bound", "alpha", "m"), [(0.7602, 0.001, 4), (0.6, 0.05, 1), (0.99, 0.05, 10),
                                                   (0.1, 0.05, 3)])
def test_rate_power_check_names_the_exact_trials_needed(bound: float, alpha: float, m: int) -> None:
    """A rate comparison is judged exactly when a perfect attack could violate it: at the reported number of
    trials k = N is a violation, one trial fewer even k = N is not."""
    rows = [rate(f"r{i}", 0, trials=1, bound=bound) for i in range(m)]
    needed = judge(rows, alpha)[1][0]["trials_needed"]
    assert needed is not None and needed > 1
    level = alpha / m
    assert lower_confidence_bound(needed, needed, level) > bound
    assert lower_confidence_bound(needed - 1, needed - 1, level) <= bound
    powered = [rate(f"r{i}", needed, trials=needed, bound=bound) for i in range(m)]
    verdict, judged = judge(powered, alpha)
    assert verdict["status"] == "VIOLATION" and all(j["judged"] for j in judged)
    weak = [rate(f"r{i}", needed - 1, trials=needed - 1, bound=bound) for i in range(m)]
    verdict, judged = judge(weak, alpha)
    assert verdict["status"] == "NOT JUDGED" and verdict["not_judged"] == [r["id"] for r in weak]
    assert f"needs at least {needed} trials" in verdict["explanation"]


def test_vacuous_pass_of_a_perfect_attack_is_not_a_pass() -> None:
    """The reproduced defect: 30 of 30 wins against a bound of 0.7602 at α = 0.001 over 4 comparisons was a
    PASS; no outcome of 30 trials can exceed that bound, so it is not judged."""
    rows = [rate("distinguishing-attribute/iterates", 30, trials=30, bound=0.7602)] + [
        rate(f"other{i}", 15, trials=30, bound=0.7602) for i in range(3)]
    verdict, judged = judge(rows, 0.001)
    assert verdict["status"] == "NOT JUDGED" and not judged[0]["violated"] and not judged[0]["judged"]
    assert verdict["worst_comparison"] is None


def test_a_bound_of_one_can_never_be_judged() -> None:
    """A prior of [1, 0] (Ball = 1) or a non-private claim: bound 1, no number of trials can fail it."""
    verdict, (j,) = judge([rate("attribute/likelihood", 10_000, trials=10_000, bound=1.0, ball=1.0)], 0.05)
    assert verdict["status"] == "NOT JUDGED" and j["trials_needed"] is None
    assert "no number of trials" in verdict["explanation"]


def test_a_powerless_epsilon_comparison_is_reported_but_does_not_block_a_pass() -> None:
    """The ε kind does not require power (an ε read off a ROC needs thousands of trials): beside a judged
    rate comparison it is listed as not judged and the verdict rests on the rate comparison alone; alone, it
    gives no verdict."""
    weak = epsilon("eps", [0], [0], n=2)  # 2 + 2 error-free trials cannot put the region below G_{1/2}
    verdict, judged = judge([rate("a", 100), weak], 0.05)
    assert verdict["status"] == "PASS" and verdict["not_judged"] == ["eps"]
    assert judged[0]["judged"] and not judged[1]["judged"] and judged[1]["trials_needed"] > 4
    assert "Not judged" in verdict["explanation"] and verdict["worst_comparison"] == "a"
    assert judge([weak], 0.05)[0]["status"] == "NOT JUDGED"
    errors = epsilon("eps", [2], [1], n=2)  # the search for the trials needed ignores the stored counts
    assert judge([rate("a", 100), errors], 0.05)[1][1]["trials_needed"] == judged[1]["trials_needed"]
    needed = judged[1]["trials_needed"]
    half = needed // 2
    assert judge([rate("a", 100), epsilon("eps", [0], [0], n=half + 1)], 0.05)[1][1]["judged"]


def test_a_user_loops_release_beyond_its_claim_is_a_violation_whatever_the_statistics() -> None:
    """More optimizer steps than claimed, or any change of the canary head outside the steps read, is a count, not
    an estimate: a violation at every α, explained in words; a release within the claim passes this comparison."""
    def steps(released: int, unobserved: int | None) -> dict[str, Any]:
        row = {"id": "one-run/released-steps", "kind": "released_steps", "released_steps": released, "steps": 20}
        return row if unobserved is None else {**row, "unobserved_updates": unobserved}

    assert not judge_comparison(steps(20, 0), 0.05, "row")["violated"]
    assert not judge_comparison(steps(20, None), 0.05, "row")["violated"]  # results written before the count
    for row, words in ((steps(30, 0), "released 30 optimizer steps, more than the 20"),
                       (steps(20, 1), "updated outside the 20 optimizer steps the audit read (the canary head "
                                      "changed in 1 gap "),
                       (steps(40, 3), "changed in 3 gaps before, between or after")):
        verdict, _ = judge([rate("weak", 100), row], 1e-9)
        assert verdict["status"] == "VIOLATION" and verdict["violations"] == ["one-run/released-steps"]
        assert words in verdict["explanation"] and "the claim does not cover what was released" in \
            verdict["explanation"]
    with pytest.raises(BadInputError, match="unobserved_updates"):
        judge([steps(20, -1)], 0.05)
