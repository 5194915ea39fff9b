"""Shared pieces of the report tests (docs/files.md): the recorded results.json, its VIOLATION variant, a
reader of the cells the page shows, and a headless Chromium."""

from __future__ import annotations

import copy
import html
import json
import os
import re
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

FIXTURE = Path(__file__).parent / "fixtures" / "results.json"
_RESULTS = json.loads(FIXTURE.read_text(encoding="utf-8"))


@pytest.fixture
def results() -> dict[str, Any]:
    """A fresh copy of the recorded results: the demo's games (fdp_sgd on Adult, z = 0.968, p = 0.017, T = 300,
    200 trials), a reconstruction game on synthetic data (dp_sgd, 100 trials) and the sweep, profile and CorrDP
    sections of earlier runs, re-judged together: a PASS over 14 comparisons."""
    return copy.deepcopy(_RESULTS)


VIOLATED = "distinguishing-attribute/iterates_public_aligned"  # the comparison violation_results violates
_GRADIENT_CANARY = re.compile(r"gradient \((\w+) trials\)")


def rejudge(results: dict[str, Any]) -> dict[str, Any]:
    """Judge ``results["comparisons"]`` again and write the gate's numbers into the verdict and into every game
    row, as the runner does: an edited comparison then reads consistently everywhere on the page."""
    from fdp_audit.auditing.gate import judge

    verdict, judged = judge(results["comparisons"], results["verdict"]["alpha"])
    by_id = {j["id"]: j | {"successes": c.get("successes")} for c, j in zip(results["comparisons"], judged)}
    results["verdict"] = verdict

    def status(j: dict[str, Any]) -> str:
        return "violation" if j["violated"] else "pass"

    for game in results["games"]:
        for attack in game["attacks"]:
            if game["game"] == "attribute":
                found = _GRADIENT_CANARY.fullmatch(game["canary"])
                prefix = f"{found.group(1)}-attribute" if found else "attribute"
                j = by_id.get(f"{prefix}/{attack['attack']}")
                if j:
                    keys = ("successes", "rate", "ci_low", "ci_high", "lower_bound", "margin", "tightness")
                    attack.update({k: j[k] for k in keys}, status=status(j))
            elif game["game"] == "reconstruction":
                for point in attack["points"]:
                    j = by_id.get(f"reconstruction/{attack['attack']}/rho={point['rho']:g}")
                    if j:
                        keys = ("successes", "rate", "ci_low", "ci_high", "lower_bound", "margin")
                        point.update({k: j[k] for k in keys}, status=status(j))
            else:
                j = by_id[f"{game['game']}-epsilon/{attack['attack']}"]
                attack.update(points=j["points"], epsilon_lower_bound=j["epsilon_lower_bound"],
                              epsilon_ratio=j["epsilon_ratio"], status=status(j))
    return results


@pytest.fixture
def violation_results(results: dict[str, Any]) -> dict[str, Any]:
    """The recorded results edited into a caught known-faulty mechanism: the gradient-canary attack with the
    longest name (the most to fit on a phone's first screen) succeeds in 170 of 200 trials, far above its bound
    0.654."""
    results["mechanism"].update(name="fdp_sgd_shared_batch", faulty=True)
    comparison = next(c for c in results["comparisons"] if c["id"] == VIOLATED)
    comparison["successes"] = 170
    return rejudge(results)


@pytest.fixture
def baseline_results() -> dict[str, Any]:
    """An earlier audit to compare the recorded one with: its iterates attacks succeeded 30 times less."""
    earlier = copy.deepcopy(_RESULTS)
    for comparison in earlier["comparisons"]:
        if comparison["id"].endswith("attribute/iterates"):
            comparison["successes"] -= 30
    return rejudge(earlier)


# ------------------------------------------------------------------ what the page shows


@dataclass
class ShownCell:
    """An element with ``data-fields``: the stored values it claims to show, and the text it shows."""

    fields: dict[str, Any]
    text: str


class _CellReader(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.cells: list[ShownCell] = []
        self.verdict_status: str | None = None
        self.svg_count = 0
        self._open: list[tuple[str, ShownCell]] = []  # cells being read, innermost last

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        if attributes.get("id") == "verdict":
            self.verdict_status = attributes.get("data-status")
        if tag == "svg":
            self.svg_count += 1
        if attributes.get("data-fields") is not None:
            cell = ShownCell(json.loads(attributes["data-fields"] or "{}"), "")
            self.cells.append(cell)
            self._open.append((tag, cell))

    def handle_endtag(self, tag: str) -> None:
        if self._open and self._open[-1][0] == tag:
            self._open.pop()

    def handle_data(self, data: str) -> None:
        for _, cell in self._open:
            cell.text += data


@dataclass
class Page:
    cells: list[ShownCell]
    verdict_status: str | None
    svg_count: int


def read_page(html: str) -> Page:
    reader = _CellReader()
    reader.feed(html)
    reader.close()
    return Page(reader.cells, reader.verdict_status, reader.svg_count)


def assert_shows(cell: ShownCell, where: str, value: Any, results: dict[str, Any]) -> None:
    """The text of ``cell`` shows the stored ``value`` at ``where``: a number as the report rounds it, a JSON block
    as itself, a list in words item by item, and a comparison's id, an attack, a neighbour relation and a threat
    model in words."""
    from fdp_audit.auditing.labels import attack_words, comparison_label, threat_title
    from fdp_audit.report.format import number

    if where == "/verdict/worst_comparison":
        row = next(row for row in results["comparisons"] if row["id"] == value)
        assert comparison_label(row) in cell.text, (where, value, cell.text)
    elif where.endswith("/attack"):  # an attack's name in words: its registered title
        assert attack_words({"attack": value}) in cell.text, (where, value, cell.text)
    elif where.endswith("/relation"):  # a neighbour relation's id in words: add_remove reads add/remove
        assert value.replace("_", "/") in cell.text, (where, value, cell.text)
    elif where.endswith("/threat_model"):  # a game's or a one-run audit's threat model in words
        assert threat_title(value) in cell.text, (where, value, cell.text)
    elif isinstance(value, dict) or isinstance(value, list) and cell.text.startswith(("[", "{")):
        assert json.loads(cell.text) == value, where
    elif isinstance(value, list):
        assert all(str(item) in cell.text for item in value), (where, value, cell.text)
    else:
        assert number(value) in cell.text, (where, value, cell.text)


def resolve(document: Any, pointer: str) -> Any:
    """RFC 6901 JSON pointer lookup."""
    value = document
    for token in pointer.split("/")[1:]:
        token = token.replace("~1", "/").replace("~0", "~")
        value = value[int(token)] if isinstance(value, list) else value[token]
    return value


# an http(s) or protocol-relative URL, a non-fragment src/href, a CSS url() or an @import
_EXTERNAL = re.compile(
    r"""https?://|(?<![\w:])//[\w.-]|\b(?:src|href)\s*=\s*["']?+(?!#)|url\(\s*["']?+(?!#)|@import""",
    re.I,
)


@pytest.fixture
def external_references() -> Callable[[str], list[str]]:
    """Everything in a page's source that could make a browser fetch from elsewhere."""
    return _EXTERNAL.findall


@pytest.fixture
def page_reader() -> Callable[[str], Page]:
    return read_page


@pytest.fixture
def pointer() -> Callable[[Any, str], Any]:
    return resolve


# ------------------------------------------------------------------ headless Chromium

CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",  # the test may run as root (containers, CI)
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    "--force-device-scale-factor=1",
    # nothing may leave the machine even if the page asked: every host name fails to resolve
    "--host-resolver-rules=MAP * ~NOTFOUND",
)


def _find_chromium() -> str | None:
    found = shutil.which("chromium")
    if found:
        return found
    return "/usr/bin/chromium" if os.access("/usr/bin/chromium", os.X_OK) else None


@dataclass
class Visit:
    """What one page load in Chromium gave: the screenshot, the DOM after parsing, and the URLs the page
    asked the network for."""

    screenshot: Path
    dom: str
    requests: list[str]


class Chromium:
    """One fresh headless browser per visit, each with its own throw-away profile."""

    def __init__(self, binary: str, workdir: Path):
        self.binary = binary
        self.workdir = workdir
        self._visits = 0

    def visit(self, page: Path, width: int = 1280, height: int = 2000) -> Visit:
        """Load ``page`` once: screenshot, dumped DOM and NetLog come from the same load (a browser start
        costs more than a second, so one start serves all three checks)."""
        self._visits += 1
        stem = self.workdir / f"visit-{self._visits}"
        png, log = stem.with_suffix(".png"), stem.with_suffix(".netlog.json")
        command = [
            self.binary,
            *CHROMIUM_FLAGS,
            f"--user-data-dir={stem}-profile",
            f"--window-size={width},{height}",
            f"--screenshot={png}",
            f"--log-net-log={log}",
            "--dump-dom",
            page.as_uri(),
        ]
        done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
        assert done.returncode == 0, f"chromium failed ({done.returncode}): {done.stderr[-2000:]}"
        return Visit(png, done.stdout, _page_requests(log))


def _page_requests(log: Path) -> list[str]:
    """URLs the *page* asked the network stack for, from Chromium's NetLog.

    The browser itself still calls update and account services despite the flags; those requests have
    no page origin ("not an origin"), while a page loaded from file:// gives its requests the opaque
    initiator "null" and a file:// network isolation key.
    """
    text = log.read_text(encoding="utf-8")
    try:
        events = json.loads(text)["events"]
    except json.JSONDecodeError:  # a log cut short at exit lacks its closing brackets
        events = json.loads(text.rstrip().rstrip(",") + "]}")["events"]
    urls: dict[int, str] = {}
    from_page: set[int] = set()
    for event in events:
        params, source = event.get("params") or {}, event["source"]["id"]
        if "url" in params:
            urls.setdefault(source, params["url"])
        if params.get("initiator") == "null" or "file://" in str(params.get("network_isolation_key", "")):
            from_page.add(source)
    return sorted({urls[s] for s in from_page if s in urls})


# Lays the report out in an iframe of exactly the screen's size (headless Chromium will not make a window
# narrower than 500 px, but an iframe can be any width, and its media queries follow it), measures it from the
# outer page and writes the findings into the outer DOM that --dump-dom returns. The report itself is embedded
# unchanged (srcdoc), so its own policy still forbids it any script.
_LAYOUT_PROBE = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><style>body { margin: 0; } iframe { border: 0; display: block; }</style></head>
<body>%(frames)s
<script>
window.addEventListener("load", () => {
  const within = (inner, outer) => inner.left >= outer.left - 1 && inner.right <= outer.right + 1
    && inner.top >= outer.top - 1 && inner.bottom <= outer.bottom + 1;
  const box = (r) => [r.left, r.top, r.right, r.bottom].map(Math.round);
  const name = (e) => `${e.tagName}#${e.id}.${e.className.baseVal ?? e.className}`;
  const found = {};
  for (const frame of document.querySelectorAll("iframe")) {
    const win = frame.contentWindow, doc = win.document;
    // wider than the screen, or scrolling sideways inside (a table or a block that scrolls is cut on a phone)
    const wide = [...doc.querySelectorAll("body *")].filter((e) => {
      const r = e.getBoundingClientRect();
      return r.width > 0 && r.right > win.innerWidth + 1;
    }).slice(0, 5).map(name);
    const scrolls = [...doc.querySelectorAll("body *")].filter((e) => e.scrollWidth > e.clientWidth + 1
      && ["auto", "scroll"].includes(win.getComputedStyle(e).overflowX)).slice(0, 5).map(name);
    const legends = [...doc.querySelectorAll("figure .legend, svg.figure g[id$='legend_1']")].map((e) => {
      const outer = e.closest("svg.figure") ?? e.closest("figure");
      const r = e.getBoundingClientRect();
      return {figure: e.closest("figure").id, inside: within(r, outer.getBoundingClientRect()),
              legend: box(r), frame: box(outer.getBoundingClientRect())};
    });
    const failing = [...doc.querySelectorAll("#failing li")].map((e) => ({
      text: e.textContent, bottom: Math.round(e.getBoundingClientRect().bottom)}));
    const panels = [...doc.querySelectorAll(".canary-panel svg")].map((e) => e.getBoundingClientRect().width);
    found[frame.id] = {
      viewport: [win.innerWidth, win.innerHeight],
      scrollWidth: doc.scrollingElement.scrollWidth, scrollHeight: doc.scrollingElement.scrollHeight, wide, scrolls,
      titles: [...doc.querySelectorAll("h2")].map((e) => e.textContent.trim()),
      details: [...doc.querySelectorAll("details")].map((e) => ({open: e.open,
                                                               summary: e.querySelector("summary").textContent})),
      legends, failing, panels,
    };
  }
  const out = document.createElement("pre");
  out.id = "layout-probe";
  out.textContent = JSON.stringify(found);
  document.body.append(out);
});
</script></body></html>
"""


def probed_pages(pages: dict[str, tuple[str, int, int]], path: Path) -> Path:
    """A page that shows each of ``pages`` (name → (html, width, height)) in a frame of that size and measures
    every frame's layout once all are loaded: one browser start for many reports."""
    frames = "".join(f'<iframe id="{name}" width="{width}" height="{height}" '
                     f'srcdoc="{html.escape(page, quote=True)}"></iframe>'
                     for name, (page, width, height) in pages.items())
    path.write_text(_LAYOUT_PROBE % {"frames": frames}, encoding="utf-8")
    return path


def probed_copy(page: str, path: Path, width: int, height: int) -> Path:
    """A page that shows ``page`` in a ``width`` × ``height`` frame and measures its layout once loaded."""
    return probed_pages({"report": (page, width, height)}, path)


def layouts_of(visit: Visit) -> dict[str, dict[str, Any]]:
    """Each frame's measurements, by frame name."""
    found = re.search(r'<pre id="layout-probe">(.*?)</pre>', visit.dom, re.S)
    assert found, "the layout probe did not run"
    return json.loads(html.unescape(found.group(1)))


def layout_of(visit: Visit) -> dict[str, Any]:
    return layouts_of(visit)["report"]


def assert_fits(layout: dict[str, Any], width: int, label: str) -> None:
    """Nothing wider than the screen or scrolling sideways, every legend inside its figure, section titles
    unique, detail folded away."""
    assert layout["scrollWidth"] <= width and not layout["wide"], f"{label}: wider than the screen: {layout['wide']}"
    assert not layout["scrolls"], f"{label}: scrolls sideways: {layout['scrolls']}"
    outside = [legend for legend in layout["legends"] if not legend["inside"]]
    assert not outside, f"{label}: legends outside their figure: {outside}"
    titles = layout["titles"]
    assert len(titles) == len(set(titles)), f"{label}: repeated section titles: {sorted(titles)}"
    assert not [d["summary"] for d in layout["details"] if d["open"]], f"{label}: details open"


@dataclass(frozen=True)
class LayoutProbe:
    copy: Callable[[str, Path, int, int], Path]
    read: Callable[[Visit], dict[str, Any]]


@pytest.fixture
def layout_probe() -> LayoutProbe:
    """Make a self-measuring copy of a report, and read the measurements from a visit of it."""
    return LayoutProbe(probed_copy, layout_of)


@pytest.fixture(scope="session")
def chromium(tmp_path_factory: pytest.TempPathFactory) -> Chromium:
    binary = _find_chromium()
    if binary is None:
        pytest.skip("no headless browser: install Chromium ('apt-get install chromium') to run the browser tests")
    return Chromium(binary, tmp_path_factory.mktemp("chromium"))


@pytest.fixture(scope="session")
def recorded_html() -> str:
    """The report of the recorded results, rendered once for every test that only reads it."""
    from fdp_audit.report import render_report

    return render_report(copy.deepcopy(_RESULTS))


@pytest.fixture(scope="session")
def recorded_visit(chromium: Chromium, recorded_html: str, tmp_path_factory: pytest.TempPathFactory) -> Visit:
    """The recorded report opened once in Chromium for all browser checks."""
    page = tmp_path_factory.mktemp("recorded") / "report.html"
    page.write_text(recorded_html, encoding="utf-8")
    return chromium.visit(page)
