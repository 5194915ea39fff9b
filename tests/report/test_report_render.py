"""Rendering the report without a browser (SPEC 5.3): layout, omitted sections, flags, escaping, bad input,
and self-containment of the figures."""

from __future__ import annotations

import io
import re

import pytest
from matplotlib.figure import Figure

from fdp_audit.errors import BadInputError
from fdp_audit.report import render_report
from fdp_audit.report.format import interval, number, signed
from fdp_audit.report.svg import UnsafeSvgError, inline_svg

REQUIRED = ("schema_version", "kind", "verdict", "mechanism", "reproducibility")


def _section_ids(html: str) -> list[str]:
    return re.findall(r'<section id="([^"]+)"', html)


def test_verdict_comes_first_then_every_recorded_section(recorded_html):
    assert _section_ids(recorded_html) == [
        "verdict",
        "mechanism",
        "accounting",
        "attribute",
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


def test_each_section_explains_what_it_measures(recorded_html):
    # one "measured" and one "reading" line per section, the verdict included
    assert recorded_html.count('<p class="measured">') == len(_section_ids(recorded_html))
    assert recorded_html.count('<p class="reading">') == len(_section_ids(recorded_html))
    assert "does not bound membership inference, because Ψ(x) may identify the record" in recorded_html


def test_shown_numbers_are_the_stored_ones(recorded_html, results, page_reader, pointer):
    """The browser test repeats this on Chromium's DOM; this one runs where no browser is installed."""
    cells = page_reader(recorded_html).cells
    assert len(cells) > 150
    for cell in cells:
        for where, value in cell.fields.items():
            assert pointer(results, where) == value, where
            if not isinstance(value, dict | list):
                assert number(value) in cell.text, (where, cell.text)


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
    assert html.count('class="status status-violation"') == 1


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
