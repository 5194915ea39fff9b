"""Inline SVG for a self-contained report (docs/files.md).

Matplotlib's SVG is a standalone XML document: an XML prolog, a DOCTYPE and RDF metadata that name
w3.org, purl.org and matplotlib.org URLs, a ``<style>`` that inline would apply to the whole page, and
element ids that repeat from one figure to the next. Inside an HTML page none of that is needed, so it
is stripped, ids are made unique per figure, and the result is checked for anything that could make a
browser fetch or run something. The same path takes the free-form figures of the profile and CorrDP
sections, which come from other modules.
"""

from __future__ import annotations

import re

from markupsafe import Markup

_PROLOG = re.compile(r"\A.*?(?=<svg[\s>])", re.S)
# metadata names external URLs; a <style> element inside inline SVG would style the whole page
_DROPPED = re.compile(r"<(metadata|style)\b.*?</\1>", re.S)
_COMMENT = re.compile(r"<!--.*?-->", re.S)
_NAMESPACE = re.compile(r'\s+xmlns(?::\w+)?="[^"]*"')
# the root's fixed size would stop the figure from shrinking to a narrow screen or a print column; its
# width becomes a max-width instead, so every figure keeps its drawn font size where there is room
_ROOT_SIZE = re.compile(r'\s(width|height)="([^"]*)"')
_LENGTH = re.compile(r"\d+(?:\.\d+)?(?:pt|px)?")
_ID = re.compile(r'\bid="([^"]+)"')
_LOCAL_REF = re.compile(r'((?:xlink:)?href="#|url\(#)([^")]+)')
# what may still reach outside the figure or run code after the clean-up above
_UNSAFE = re.compile(
    r"<script|<foreignObject|<image|<iframe|\son\w+\s*=|(?:xlink:)?href=\"(?!#)|url\((?!#)|@import|//|javascript:",
    re.I,
)


class UnsafeSvgError(ValueError):
    """The SVG still refers to something outside itself after clean-up; it is left out of the report."""


def inline_svg(svg: str, prefix: str, label: str) -> Markup:
    """Return ``svg`` as an HTML-embeddable ``<svg>`` element with ids prefixed by ``prefix``: prolog, metadata,
    styles, comments and namespaces removed, the fixed size turned into a ``max-width``.

    Args:
        svg: a standalone SVG document (matplotlib's, or another module's).
        prefix: prepended to every id and local reference, unique per figure of the page.
        label: the accessible name (``aria-label``) of the figure.

    Returns:
        The ``<svg>`` element as safe markup.

    Raises:
        UnsafeSvgError: there is no ``<svg>`` element, or after clean-up it still refers to something outside
            itself (a script, an external link or image, an event handler).
    """
    text = _PROLOG.sub("", svg, count=1)
    if not text.startswith("<svg"):
        raise UnsafeSvgError("no <svg> element")
    text = _COMMENT.sub("", _DROPPED.sub("", text))
    head, rest = text.split(">", 1)
    width = dict(_ROOT_SIZE.findall(head)).get("width", "")
    text = _NAMESPACE.sub("", _ROOT_SIZE.sub("", head) + ">" + rest)
    text = _ID.sub(lambda m: f'id="{prefix}-{m.group(1)}"', text)
    text = _LOCAL_REF.sub(lambda m: f"{m.group(1)}{prefix}-{m.group(2)}", text)
    if _UNSAFE.search(text):
        raise UnsafeSvgError("it refers to content outside the report")
    attributes = Markup(' class="figure" role="img" aria-label="{}"').format(label)
    if _LENGTH.fullmatch(width):
        unit = "" if width.endswith(("pt", "px")) else "px"  # a bare SVG length is in user units, i.e. px
        attributes += Markup(' style="max-width: {}{}"').format(width, unit)
    return Markup(text.replace("<svg", "<svg" + str(attributes), 1))
