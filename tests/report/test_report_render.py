"""Rendering the report without a browser (docs/files.md): layout, omitted sections, flags, escaping, bad input,
and self-containment of the figures."""

from __future__ import annotations

import copy
import io
import re

import pytest
from matplotlib.figure import Figure

from fdp_audit.errors import BadInputError
from fdp_audit.report import render_report
from fdp_audit.report.format import interval, number, signed
from fdp_audit.report.summary import judged_comparisons
from fdp_audit.report.svg import UnsafeSvgError, inline_svg
from tests.report.conftest import assert_shows

REQUIRED = ("schema_version", "kind", "verdict", "mechanism", "reproducibility")


def _section_ids(html: str) -> list[str]:
    return re.findall(r'<section id="([^"]+)"', html)


def test_verdict_comes_first_then_every_recorded_section(recorded_html):
    assert _section_ids(recorded_html) == [
        "verdict",
        "summary",
        "mechanism",
        "accounting",
        "attribute",
        "attribute-2",
        "attribute-3",
        "sweep",
        "reconstruction",
        "distinguishing",
        "simulator",
        "tightness",
        "checkpoint",
        "profile",
        "corrdp",
        "utility",
        "reproducibility",
    ]
    assert 'data-status="PASS"' in recorded_html
    assert "Known-faulty" not in recorded_html


def _titles(html: str) -> list[str]:
    return re.findall(r"<h2>([^<]+)</h2>", html)


def test_sections_say_which_game_they_are_and_explain_each_kind_once(recorded_html):
    titles = _titles(recorded_html)
    assert len(titles) == len(set(titles))
    for title in ("Attribute inference · record canaries",
                  "Attribute inference · gradient canaries (distinguishing game)",
                  "Attribute inference · gradient canaries (simulator game)", "Reconstruction",
                  "Distinguishing game (replace)", "Simulator game (add/remove)"):
        assert title in titles
    # the attribute explanation once, then two references back to it; likewise for the two ε games
    assert recorded_html.count("does not bound membership inference, because Ψ(x) may identify the record") == 1
    assert recorded_html.count('How to read it: as <a href="#attribute">') == 2
    assert recorded_html.count('How to read it: as <a href="#distinguishing">') == 1
    # every section but the summary explains itself or points to the section of its kind that does
    sections = len(_section_ids(recorded_html)) - 1
    assert recorded_html.count('<p class="measured">') + recorded_html.count('class="help-ref"') == sections


def test_same_titles_are_told_apart(results):
    results["games"].insert(0, copy.deepcopy(results["games"][0]))
    titles = _titles(render_report(results))
    assert "Attribute inference · record canaries" in titles
    assert "Attribute inference · record canaries (2)" in titles


def test_per_threshold_tables_are_folded_away(recorded_html):
    folded = re.findall(r'<details class="detail"><summary>([^<]+)</summary>', recorded_html)
    assert sum("error rates at each threshold" in summary for summary in folded) == 4
    assert "Configuration" in folded
    assert "<details open" not in recorded_html


def test_a_pass_above_its_bound_is_explained_in_its_row(recorded_html, results):
    attack = next(a for a in results["games"][2]["attacks"] if a["attack"] == "iterates")
    assert attack["rate"] > attack["bound"] and attack["status"] == "pass"  # the recorded case: 0.665 > 0.654
    row = re.search(r'<tr><td data-label="Attack" data-fields=\'\{"/games/2/attacks/1/attack".*?</tr>', recorded_html,
                    re.S).group(0)
    assert "rate above the limit, but its lower confidence bound 0.5693 is not" in row
    assert "PASS although the rate 0.665 is above its limit 0.6536" in recorded_html  # and in the summary


def test_summary_charts_every_comparison_closest_first(recorded_html, results):
    shown = re.findall(r'class="chart-row row-(\w[\w-]*)" data-comparison="([^"]+)"', recorded_html)
    assert sorted(c for _, c in shown) == sorted(c["id"] for c in results["comparisons"])
    _, judged = judged_comparisons(results)
    by_id = {row["id"]: row for row in judged}
    for panel in ("summary-rate", "summary-epsilon"):
        body = recorded_html.split(f'id="{panel}"')[1].split('class="axis"')[0]
        margins = [by_id[c]["margin"] for c in re.findall(r'data-comparison="([^"]+)"', body)]
        assert margins == sorted(margins, reverse=True) and margins
    assert "a PASS from them alone is weak evidence" not in recorded_html  # iterates attacks were run
    assert "Every ε lower bound is 0" in recorded_html


def test_final_model_attacks_alone_are_called_weak_evidence(results):
    results["comparisons"] = [c for c in results["comparisons"] if c["id"].startswith("attribute/")]
    html = render_report(results)
    assert "a PASS from them alone is weak evidence" in html


def test_without_comparisons_there_is_no_summary(results):
    del results["comparisons"]
    assert 'id="summary"' not in render_report(results)


def test_a_game_kind_without_a_layout_is_still_shown(results):
    results["games"].append({"game": "one_run", "canaries": 1000, "attacks": [
        {"attack": "loss", "guesses": 120, "correct": 110, "epsilon_lower_bound": 0.8, "status": "pass"}]})
    html = render_report(results)
    assert "<h2>One run</h2>" in html and 'id="one-run-attacks"' in html
    assert ">110<" in html and ">0.8<" in html


def test_shown_numbers_are_the_stored_ones(recorded_html, results, page_reader, pointer):
    """The browser test repeats this on Chromium's DOM; this one runs where no browser is installed."""
    cells = page_reader(recorded_html).cells
    assert len(cells) > 150
    for cell in cells:
        for where, value in cell.fields.items():
            assert pointer(results, where) == value, where
            assert_shows(cell, where, value, results)


def test_only_required_sections_render_with_the_optional_ones_omitted(results):
    minimal = {key: results[key] for key in REQUIRED}
    html = render_report(minimal)
    assert _section_ids(html) == ["verdict", "mechanism", "reproducibility"]
    assert "<svg" not in html


def test_violation_of_a_faulty_mechanism_is_flagged(violation_results):
    html = render_report(violation_results)
    assert 'class="verdict verdict-violation" data-status="VIOLATION"' in html
    assert "Known-faulty test mechanism" in html
    assert "did not catch it" not in html
    # in its game's table and in the summary chart
    assert html.count('class="status status-violation"') == 2


def test_violation_names_the_failing_comparison_inside_the_verdict(violation_results):
    html = render_report(violation_results)
    verdict = html.split('<section id="verdict"')[1].split("</section>")[0]
    failing = re.findall(r'<li data-comparison="([^"]+)">', verdict)
    assert failing == ["distinguishing-attribute/iterates_public_aligned"]
    assert "170 of 200 judged trials" in verdict and "lower confidence bound 0.7707 against its limit 0.6536" in verdict
    assert "leaks more than its privacy accounting says" in verdict
    # the faulty-mechanism notice follows the verdict, it does not push it down
    assert html.index('id="verdict"') < html.index('id="faulty"')


def test_a_faulty_mechanism_that_passes_is_called_a_miss(results):
    results["mechanism"]["faulty"] = True
    html = render_report({key: results[key] for key in REQUIRED})
    assert "Known-faulty test mechanism" in html
    assert "The audit did not catch it" in html


def test_stored_text_is_escaped_not_interpreted(results):
    results["title"] = "<b>bold</b> & co"
    results["reproducibility"]["command"] = "fdp-audit audit '<script>alert(1)</script>'"
    html = render_report({key: results[key] for key in (*REQUIRED, "title")})
    assert "<script>" not in html and "<b>bold" not in html
    assert "&lt;b&gt;bold&lt;/b&gt; &amp; co" in html


def _drop(path: tuple):
    def edit(results: dict) -> None:
        *parents, last = path
        target = results
        for key in parents:
            target = target[key]
        del target[last]

    return edit


def _set(path: tuple, value):
    def edit(results: dict) -> None:
        *parents, last = path
        target = results
        for key in parents:
            target = target[key]
        target[last] = value

    return edit


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        (_drop(("verdict",)), "verdict: required but missing"),
        (_set(("schema_version",), 2), "schema_version: unsupported version 2"),
        (_set(("kind",), "profile"), "kind: expected one of audit"),
        (_set(("verdict", "status"), "MAYBE"), "verdict/status"),
        (_set(("mechanism", "faulty"), "no"), "mechanism/faulty"),
        (_drop(("games", 0, "attacks", 1, "successes")), "games/0/attacks/1/successes: required but missing"),
        (_set(("games", 0, "attacks", 0, "rate"), "high"), "games/0/attacks/0/rate: expected a finite number"),
        (_set(("games", 1, "attacks", 0, "points", 2, "bound"), None), "games/1/attacks/0/points/2/bound"),
        (_set(("accounting", "curve", "f"), [0.5]), "accounting/curve/f: has 1 values"),
        (_set(("sweep", "rate"), [0.5, 0.6]), "sweep/rate: has 2 values"),
        (_set(("utility", "rows"), {"fdp_sgd": 0.84}), "utility/rows: expected a list"),
    ],
)
def test_bad_input_names_the_field_in_one_line(results, edit, field):
    edit(results)
    with pytest.raises(BadInputError) as info:
        render_report(results)
    message = str(info.value)
    assert field in message
    assert "\n" not in message


def _matplotlib_svg() -> str:
    fig = Figure(figsize=(3, 2))
    ax = fig.add_subplot()
    ax.plot([0, 1], [0, 1], marker="o")
    ax.set_title("t")
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg")
    return buffer.getvalue()


def test_matplotlib_svg_is_inlined_without_external_references():
    raw = _matplotlib_svg()
    assert "http://" in raw and "https://" in raw and "<metadata>" in raw  # what inlining must remove
    first, second = inline_svg(raw, "fig-a", "one"), inline_svg(raw, "fig-b", "two")
    for inlined in (first, second):
        assert inlined.startswith('<svg class="figure" role="img"')
        assert "http" not in inlined and "<metadata" not in inlined and "<style" not in inlined
    # ids no longer collide when two figures share a page, and references follow their ids
    ids = set(re.findall(r'id="([^"]+)"', first)) & set(re.findall(r'id="([^"]+)"', second))
    assert not ids
    assert all(ref.startswith("fig-a-") for ref in re.findall(r'href="#([^"]+)"', first))


@pytest.mark.parametrize(
    "svg",
    [
        '<svg viewBox="0 0 1 1"><image href="https://example.org/x.png"/></svg>',
        '<svg viewBox="0 0 1 1"><script>fetch("x")</script></svg>',
        '<svg viewBox="0 0 1 1"><rect onload="alert(1)"/></svg>',
        '<svg viewBox="0 0 1 1"><rect style="fill: url(//example.org/p.svg#a)"/></svg>',
        "not an svg",
    ],
)
def test_unsafe_svg_is_refused(svg):
    with pytest.raises(UnsafeSvgError):
        inline_svg(svg, "fig", "x")


def test_an_unsafe_free_form_figure_is_left_out_with_a_note(results, external_references):
    minimal = {key: results[key] for key in REQUIRED}
    minimal["corrdp"] = {
        "figures": {"tv": '<svg><image href="http://example.org/x.png"/></svg>'},
        "nominal_epsilon": 2.0,
    }
    html = render_report(minimal)
    assert "Figure “tv” left out" in html
    assert external_references(html) == []


def test_rendering_is_deterministic(recorded_html, results):
    assert render_report(results) == recorded_html


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (None, "—"),
        (2000, "2000"),
        (0.6586, "0.6586"),
        (0.004071, "0.004071"),
        (1e-05, "1e-5"),
        (2.0, "2"),
        (12345.6, "1.235e4"),
        (True, "yes"),
        ("iterates", "iterates"),
    ],
)
def test_number_format(value, shown):
    assert number(value) == shown


def test_signed_and_interval_format():
    assert (signed(0.031), signed(-0.047), signed(0.0)) == ("+0.031", "-0.047", "0")
    assert interval(0.4769, None) == "[0.4769, —]"


def test_a_one_run_violation_names_its_rejecting_guesses_inside_the_verdict(results):
    from fdp_audit.auditing.gate import judge

    claim = {"mechanism": "fdp_sgd", "noise_multiplier": 1.0, "sample_rate": 0.01, "steps": 100, "delta": 1e-5,
             "relation": "replace"}
    comparisons = [{"id": f"one-run/iterates/{guesses}", "kind": "one_run", "canaries": 1000, "k": 2,
                    "guesses": guesses, "correct": correct, **claim} for guesses, correct in ((100, 100), (400, 230))]
    minimal = {key: results[key] for key in REQUIRED} | {"comparisons": comparisons}
    minimal["verdict"], _ = judge(comparisons, 0.05)
    assert minimal["verdict"]["violations"] == ["one-run/iterates/100"]  # 100 of 100 right: far beyond z = 1
    html = render_report(minimal)
    verdict = html.split('<section id="verdict"')[1].split("</section>")[0]
    assert re.findall(r'<li data-comparison="([^"]+)">', verdict) == ["one-run/iterates/100"]
    assert "100 correct of 100 guesses among 1000 canaries" in verdict
    assert "more accurate than the claimed trade-off curve f allows" in verdict
    panel = html.split('id="summary-other"')[1].split('class="axis"')[0]
    assert re.findall(r'data-comparison="([^"]+)"', panel) == ["one-run/iterates/100", "one-run/iterates/400"]
    assert "2 comparisons of an attack against what the claimed privacy allows, from: One-run audit." in html
    minimal["one_run"] = {"status": "VIOLATION", "explanation": "100 of 100 guesses reject the claimed f", "rows": []}
    assert "judged on its own" not in render_report(minimal)  # its comparisons are this verdict's


def test_summary_rows_take_the_gates_newer_fields_when_given():
    """A gate that reports the family ε with the Clopper–Pearson ε and a curve test beside it, and comparisons
    that cannot fail (not judged), is shown as such; the older fields alone still render (above)."""
    from fdp_audit.report.summary import _epsilon_row, _rate_row

    epsilon = {"id": "distinguishing-epsilon/iterates", "kind": "epsilon", "game": "distinguishing",
               "relation": "replace", "attack": "iterates", "epsilon_lower_bound": 1.4, "theoretical": 2.0,
               "margin": -0.6, "violated": True, "epsilon_family": "fdp_sgd with a smaller z",
               "epsilon_lower_bound_cp": 0.9, "curve_p_value": 1e-4}
    row = _epsilon_row(epsilon, 0.0, 2.5)
    assert row.status == "violation"
    assert "(assuming the mechanism's family: fdp_sgd with a smaller z)" in row.numbers
    assert "Clopper–Pearson) ε 0.9" in row.numbers
    assert "lie below the claimed trade-off curve f" in row.meaning
    assert [m.css for m in row.marks] == ["point", "point-alt", "bound"]
    rate = {"id": "attribute/likelihood", "kind": "rate", "game": "attribute", "attack": "likelihood", "rate": 0.6,
            "ci_low": 0.4, "ci_high": 0.8, "lower_bound": 0.4, "bound": 0.65, "ball": 0.5, "margin": -0.25,
            "successes": 6, "trials": 10, "violated": False, "judged": False, "trials_needed": 31}
    row = _rate_row(rate, 0.0, 1.0, 0.05, 1, None)
    assert row.status == "not judged" and "needs at least 31" in row.note


def test_a_one_run_section_beside_the_games_is_named_in_the_summary(results):
    results["one_run"] = {"status": "PASS", "explanation": "no guess count rejects the claimed f", "rows": []}
    assert ("The one-run audit below is judged on its own, not in this verdict: PASS (no guess count rejects "
            "the claimed f)." in render_report(results))


def test_sanity_warnings_sit_in_the_banner_and_a_pass_with_them_is_weak(results):
    """The recorded reconstruction attack never beat the prior at any radius: the PASS says it is weak, in the
    banner, with the warning; results without warnings show neither."""
    from fdp_audit.auditing.sanity import sanity_warnings

    html = render_report(results)
    warnings = sanity_warnings(results)  # and a rate above its limit, four ε tests whose lower bound is 0
    assert [w.kind for w in warnings] == ["never_beat_prior", "above_limit_by_chance", *["epsilon_without_power"] * 4]
    assert '<span class="weak">weak</span>' in html and "<title>PASS (weak) · " in html
    banner = html[html.index('id="verdict"'):html.index("</section>", html.index('id="verdict"'))]
    assert 'id="warnings"' in banner and "A weak PASS: 6 sanity warnings" in banner
    assert "Reconstruction: no attack beat the prior (reconstruction; the closest, reconstruction at ρ = 0.5" in banner
    for comparison in results["comparisons"]:
        if comparison["game"] == "reconstruction":
            comparison["successes"] = int(comparison["bound"] * comparison["trials"])  # above Ball, not its limit
        elif comparison["kind"] == "rate" and comparison["successes"] > comparison["bound"] * comparison["trials"]:
            comparison["successes"] = int(comparison["bound"] * comparison["trials"])
    for game in results["games"]:
        for attack in game["attacks"]:
            if "epsilon_lower_bound" in attack:
                attack["epsilon_lower_bound"] = 0.5
    clean = render_report(results)
    assert 'id="warnings"' not in clean and 'class="weak"' not in clean


def test_binary_games_show_their_roc_summary_and_a_log_log_roc(results):
    """AUC and TPR at FPR 0.1 % and 1 % with their intervals for each attack of the distinguishing and simulator
    games, the one the trials cannot resolve said so, and the ROC on log-log axes beside the linear one."""
    import numpy as np

    from fdp_audit.auditing.roc import roc_summary

    rng = np.random.default_rng(0)
    for game in results["games"]:
        if game["game"] in ("distinguishing", "simulator"):
            for attack in game["attacks"]:
                labels = rng.random(200) < 0.5
                attack.update(roc_summary(rng.normal(size=200) + labels, labels))
    html = render_report(results)
    table = html.split('id="distinguishing-roc"')[1].split("</table>")[0]
    attack = results["games"][-2]["attacks"][0] if results["games"][-2]["game"] == "distinguishing" else None
    attack = attack or next(g for g in results["games"] if g["game"] == "distinguishing")["attacks"][0]
    low, high = attack["auc_ci"]
    assert f"{number(attack['auc'])} {interval(low, high)}" in table
    strict, one_percent = attack["tpr_at_fpr"]
    assert strict["resolved"] is False and "0.1 % needs ≥ 1000 negatives" in table
    assert f"{number(one_percent['tpr'])} {interval(one_percent['ci_low'], one_percent['ci_high'])}" in table
    assert 'id="fig-distinguishing-log"' in html and 'id="fig-simulator-log"' in html
    assert "log-log ROC curves of the distinguishing game" in html


def test_the_trade_off_plot_is_zoomed_to_its_points():
    """The plot spanned 1e-6 … 1 while every point sat in one corner: its axes now start a factor 3 (x) and 1.5
    (y) below the lowest point or whisker."""
    from fdp_audit.report.figures import _data_limits

    attribute = [("record", {"ball": 0.5, "rate": 0.6, "ci_low": 0.45})]
    points = [("distinguishing", "replace", [{"fpr": 0.3, "fpr_ub": 0.4, "fnr": 0.5, "fnr_ub": 0.7}])]
    assert _data_limits(attribute, points) == pytest.approx((0.3 / 3, 0.3 / 3 / 1.5))  # the curves at x = 0.1 too
    assert _data_limits([], []) is None


def test_every_comparison_has_one_label_in_the_report_the_gate_junit_and_markdown(tmp_path, cli):
    """Wherever a comparison is named it is by its label (game · attack), never by its id: in the report's
    summary chart, the JUnit test-case names, the Markdown summary and the gate's verdict line. The results are
    configs/adult_fdp.yaml's (a small variant, recorded by the current code, so the gate re-derives them)."""
    import gzip
    import html as html_module
    import json
    import xml.etree.ElementTree as ET

    from fdp_audit.auditing.labels import comparison_label
    from fdp_audit.auditing.results import write_results
    from tests.report.fixtures.record_configs import OUT

    results = json.loads(gzip.decompress((OUT / "adult_fdp.json.gz").read_bytes()))

    html = render_report(results)
    chart = html.split('id="summary"')[1].split("</section>")[0]
    labels = {row["id"]: comparison_label(row) for row in results["comparisons"]}
    shown = re.findall(r'<span class="row-game">([^<]+)</span><span class="row-attack"[^>]*>([^<]+)</span>', chart)
    assert sorted(html_module.unescape(game + attack) for game, attack in shown) == sorted(labels.values())
    path = write_results(tmp_path / "results.json", results)
    junit, markdown = tmp_path / "gate.xml", tmp_path / "gate.md"
    gated = cli("gate", path, "--junit", junit, "--markdown", markdown)
    assert gated.code == 0, gated.err
    assert sorted(case.get("name") for case in ET.parse(junit).getroot().iter("testcase")) == sorted(labels.values())
    summary = markdown.read_text(encoding="utf-8")
    assert all(f"| {label} |" in summary for label in labels.values())
    closest = results["verdict"]["worst_comparison"]
    assert labels[closest] in gated.out
    assert not any(ident in gated.out + summary for ident in labels)  # no id in what a person reads


def test_a_promise_section_shows_the_plan_beside_what_was_run(results, page_reader, pointer):
    """With integration: opacus the results hold what the training promised and what it ran: the report shows
    both ε, the steps planned and taken and the accountant's runs, right after the mechanism."""
    results["promise"] = {"library": "opacus", "source": "make_private_with_epsilon", "target_epsilon": 2.0,
                          "epochs": 1.0, "delta": 1e-5, "engine_epsilon": 1.93,
                          "planned": {"noise_multiplier": 1.1, "sample_rate": 0.01, "steps": 100},
                          "trained": [{"noise_multiplier": 1.1, "sample_rate": 0.01, "steps": 200}],
                          "steps_planned": 100, "steps_taken": 200, "promised_epsilon": 1.98,
                          "spent_epsilon": 2.9, "status": "broken"}
    html = render_report(results)
    assert _section_ids(html)[2:4] == ["mechanism", "promise"]
    section = html.split('<section id="promise"')[1].split("</section>")[0]
    assert "The promise to the DP library" in section and 'class="status status-broken"' in section
    shown = {where for cell in page_reader(section).cells for where in cell.fields}
    for key in ("promised_epsilon", "spent_epsilon", "steps_planned", "steps_taken", "engine_epsilon"):
        assert f"/promise/{key}" in shown, key
    assert "/promise/trained/0/steps" in shown


def test_a_promise_section_shows_the_configuration_claim_beside_the_promise(results, page_reader, pointer):
    """A configuration that states its own claim: the section shows the claimed ε, z and δ beside the promised and
    spent ε (and the ε spent at the claim's δ), with the status a training that kept its promise but spent more
    than the claim gets."""
    results["promise"] = {"library": "opacus", "source": "make_private_with_epsilon", "target_epsilon": 4.0,
                          "epochs": 1.0, "delta": 1e-5, "engine_epsilon": 3.99,
                          "planned": {"noise_multiplier": 0.8136, "sample_rate": 0.05, "steps": 20},
                          "trained": [{"noise_multiplier": 0.8136, "sample_rate": 0.05, "steps": 20}],
                          "claimed": {"noise_multiplier": 0.9973, "sample_rate": 0.05, "steps": 20,
                                      "target_epsilon": 2.0, "delta": 1e-5},
                          "claimed_epsilon": 2.0, "spent_epsilon_at_claim": 3.246, "steps_planned": 20,
                          "steps_taken": 20, "promised_epsilon": 3.246, "spent_epsilon": 3.246,
                          "status": "claim_exceeded"}
    section = render_report(results).split('<section id="promise"')[1].split("</section>")[0]
    assert 'class="status status-claim_exceeded"' in section
    shown = {where for cell in page_reader(section).cells for where in cell.fields}
    for key in ("claimed_epsilon", "claimed/noise_multiplier", "claimed/target_epsilon", "claimed/delta",
                "spent_epsilon_at_claim", "promised_epsilon"):
        assert f"/promise/{key}" in shown, key
