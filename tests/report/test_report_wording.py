"""What the verdict's words say a number is (docs/files.md, "Labels"): an observed share is not called a bound, a
threat model is named in words, a violation's margin is over its limit."""

from __future__ import annotations

import re

from fdp_audit.auditing.gate import judge
from fdp_audit.auditing.one_run.evaluation import summary_lines

CLAIM = {"mechanism": "fdp_sgd", "noise_multiplier": 1.0, "sample_rate": 0.017, "steps": 300, "delta": 1e-5,
         "relation": "replace"}


def test_a_one_run_pass_calls_its_share_observed_and_says_where_the_claim_is_rejected():
    row = {"id": "one-run/updates/328", "kind": "one_run", "canaries": 1000, "k": 2, "guesses": 328,
           "correct": 222, **CLAIM}
    verdict, (judged,) = judge([row], 0.05)
    assert verdict["status"] == "PASS"
    words = verdict["explanation"]
    rejecting = round(judged["theoretical"] * 328) + 1
    assert rejecting > 222 and (rejecting - 1) / 328 == judged["theoretical"]
    assert "lower confidence bound" not in words and "at least" not in words
    assert f"observed share of correct guesses {222 / 328:.4g} (222 of 328 right)" in words
    assert f"rejected only at {rejecting} or more right" in words
    assert "328 most confident guesses on the released updates" in words


def test_the_one_run_console_line_names_the_threat_model_in_words():
    section = {"canaries": 1000, "comparisons": 2, "claimed_epsilon": 2.673, "delta": 1e-5, "alpha": 0.05,
               "empirical_epsilon": None, "epsilon_gdp": 0.1, "epsilon_steinke": 0.0,
               "best": {"threat_model": "updates_public_aligned", "guesses": 328, "correct": 222,
                        "abstentions": 672}}
    line = summary_lines(section)[0]
    assert "(on the released updates at the canaries' public steps, 672 abstentions)" in line
    assert "(updates" not in line


def test_a_violation_banner_names_the_faulty_mechanism_and_no_ids(violation_results):
    from fdp_audit.report import render_report
    from tests.report.conftest import VIOLATED

    html = render_report(violation_results)
    banner = html.split('<section id="verdict"')[1].split("</section>")[0]
    assert "Known-faulty test mechanism: fdp_sgd_shared_batch (see below)" in banner
    assert "furthest over its limit (success rate)" in banner and "closest to its limit (ε)" in banner
    assert "ε lower bound 0 vs claimed 2 · Simulator game" in banner  # not a margin of −2 read as an ε
    words = re.sub(r"<[^>]*>", "", banner)  # the id stays in attributes and in results.json, never in the words
    assert VIOLATED not in words


def test_an_epsilon_bound_found_in_the_claimed_family_says_so():
    from fdp_audit.auditing.gate import _epsilon_violation

    row = {"id": "distinguishing-epsilon/iterates", "kind": "epsilon", "game": "distinguishing",
           "relation": "replace", "attack": "iterates", "observed": 10.29, "theoretical": 2.673,
           "epsilon_family": "dp_sgd with a smaller z", "epsilon_lower_bound_cp": 0.9}
    words = _epsilon_violation(row)
    assert ("ε lower bound of 10.29 (assuming the mechanism's family: dp_sgd with a smaller z; assumption-free ε "
            "0.9) against") in words


def test_a_pass_above_its_limit_or_without_power_is_called_inconclusive(results):
    from fdp_audit.auditing.sanity import ABOVE_LIMIT, NO_POWER, sanity_warnings, weak_pass

    row = next(c for c in results["comparisons"] if c["id"] == "attribute/likelihood")
    assert all(w.where != f"comparisons/{results['comparisons'].index(row)}" for w in sanity_warnings(results))
    row.update(trials=32, successes=25, bound=0.6222)  # rate 0.7812 > 0.6222, the lower bound of 25/32 is not
    epsilon = next(g for g in results["games"] if g["game"] == "distinguishing")
    epsilon["attacks"][0]["epsilon_lower_bound"] = 0.0
    where = f"comparisons/{results['comparisons'].index(row)}"
    found = {w.kind: w for w in sanity_warnings(results) if w.where == where or w.kind == NO_POWER}
    assert "its measured rate 0.7812 is above its limit 0.6222" in found[ABOVE_LIMIT].message
    assert "32 judged trials cannot rule chance out" in found[ABOVE_LIMIT].message
    assert found[ABOVE_LIMIT].where == f"comparisons/{results['comparisons'].index(row)}"
    assert "its ε lower bound is 0" in found[NO_POWER].message
    assert weak_pass("PASS", list(found.values())).startswith("PASS (weak")


def test_the_page_names_relations_attacks_and_threat_models_in_words(results):
    from fdp_audit.report import render_report
    from fdp_audit.report.model import Node
    from fdp_audit.report.one_run import one_run_section

    game = next(g for g in results["games"] if g["game"] == "distinguishing" and g["attacks"][0].get("points"))
    game["relation"] = "add_remove"  # the fact and the trade-off plot's legend say add/remove
    game["attacks"][0]["points"] = game["attacks"][0]["points"][:1]
    words = re.sub(r"<[^>]*>", " ", render_report(results))
    assert "add_remove" not in words and "(1 rows)" not in words and "(1 row)" in words
    assert "iterates_public_aligned ROC" not in words and "iterates_public_aligned (" not in words
    assert "likelihood ratio on the released updates, at the canary's public steps ROC" in words
    section = one_run_section(Node({"rows": [{"threat_model": "updates_public_aligned", "guesses": 10, "correct": 9,
                                              "abstentions": 990, "rejects_claim": False, "epsilon_gdp": 0.1,
                                              "epsilon_steinke": None}]}))
    cell = section.tables[0].rows[0][0]
    assert cell.text == "released updates at the canaries' public steps"
    assert cell.fields == {"/rows/0/threat_model": "updates_public_aligned"}


def _tradeoff_caption(results) -> str:
    from fdp_audit.report.sections import build_view

    accounting = next(s for s in build_view(results).sections if s.id == "accounting")
    return next(f.caption for f in accounting.figures if f.id == "fig-tradeoff")


def test_the_trade_off_caption_judges_each_point_against_its_own_relations_curve(results):
    caption = _tradeoff_caption(results)
    assert "Circles" in caption and "Squares" in caption
    assert "PLD curve of its game's neighbour relation" in caption


def test_a_trade_off_plot_without_empirical_points_says_nothing_of_circles_or_squares(results):
    results["games"] = [g for g in results["games"] if g["game"] == "reconstruction"]
    caption = _tradeoff_caption(results)
    assert caption == "Trade-off curve as 1 − f(α) on log axes."
