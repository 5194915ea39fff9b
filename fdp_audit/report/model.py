"""The report's view model (docs/files.md): sections of facts, tables and figures built from results.json.

Every displayed value is a :class:`Cell` that remembers the JSON pointers (RFC 6901) of the values it
shows; the template writes them into a ``data-fields`` attribute, so a test (or a sceptical reviewer)
can check in the browser that each number on screen is the stored one. :class:`Node` walks
results.json with its pointer, so malformed input names the offending field (docs/files.md).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from markupsafe import Markup

from fdp_audit.auditing.labels import threat_title
from fdp_audit.errors import BadInputError
from fdp_audit.report.format import interval, number
from fdp_audit.report.texts import Help


@dataclass(frozen=True)
class Node:
    """A value inside results.json and its JSON pointer."""

    value: Any
    pointer: str = ""

    @property
    def field(self) -> str:
        return self.pointer.lstrip("/") or "results"

    def bad(self, message: str) -> BadInputError:
        """The bad-input error for this value, naming its field.

        Args:
            message: what is wrong, in one line.

        Returns:
            A :class:`BadInputError` (to raise) whose field is this node's pointer.
        """
        return BadInputError(message, self.field)

    def _child(self, key: str | int) -> Node:
        token = str(key).replace("~", "~0").replace("/", "~1")
        return Node(self.value[key], f"{self.pointer}/{token}")

    def __getitem__(self, key: str | int) -> Node:
        """A required member (which may still be null); absent is bad input."""
        child = self.get(key)
        if child is None:
            where = f"{self.pointer}/{key}".lstrip("/")
            raise BadInputError("required but missing", where)
        return child

    def get(self, key: str | int) -> Node | None:
        """An optional member, None when absent.

        Args:
            key: an object member's name, or a list index.

        Returns:
            The member's node (its pointer extended by the key), or None.

        Raises:
            BadInputError: this value is not an object (for a name) or not a list (for an index).
        """
        if isinstance(key, int):
            return self._child(key) if 0 <= key < len(self.sequence()) else None
        return self._child(key) if key in self.mapping() else None

    def present(self, key: str) -> Node | None:
        """An optional member, None when absent or null: optional sections are simply omitted.

        Args:
            key: an object member's name.

        Returns:
            The member's node, or None.

        Raises:
            BadInputError: this value is not an object.
        """
        child = self.get(key)
        return None if child is None or child.value is None else child

    def mapping(self) -> dict[str, Any]:
        """The value as an object.

        Returns:
            The dict itself.

        Raises:
            BadInputError: the value is not an object.
        """
        if not isinstance(self.value, dict):
            raise self.bad("expected an object")
        return self.value

    def sequence(self) -> list[Any]:
        """The value as a list.

        Returns:
            The list itself.

        Raises:
            BadInputError: the value is not a list.
        """
        if not isinstance(self.value, list):
            raise self.bad("expected a list")
        return self.value

    def items(self) -> Iterator[tuple[str, Node]]:
        """The members of an object, in stored order.

        Yields:
            ``(name, node)`` pairs.

        Raises:
            BadInputError: the value is not an object.
        """
        for key in self.mapping():
            yield key, self._child(key)

    def elements(self) -> Iterator[Node]:
        """The elements of a list, in order.

        Yields:
            Each element's node.

        Raises:
            BadInputError: the value is not a list.
        """
        for index in range(len(self.sequence())):
            yield self._child(index)

    def number(self, nullable: bool = False) -> float | int | None:
        """The value as a finite number (a bool is not one).

        Args:
            nullable: accept null, returned as None.

        Returns:
            The int or float, or None for null when ``nullable``.

        Raises:
            BadInputError: anything else: a string, a bool, a non-finite number, or null when not ``nullable``.
        """
        value = self.value
        if value is None and nullable:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise self.bad(f"expected a finite number{' or null' if nullable else ''}, got {value!r}")
        return value

    def text(self) -> str:
        """The value as a string.

        Returns:
            The string.

        Raises:
            BadInputError: the value is not a string.
        """
        if not isinstance(self.value, str):
            raise self.bad(f"expected a string, got {self.value!r}")
        return self.value

    def choice(self, *allowed: str) -> str:
        """The value as one of the allowed strings.

        Args:
            allowed: the strings accepted.

        Returns:
            The string.

        Raises:
            BadInputError: the value is not a string or not one of ``allowed``.
        """
        value = self.text()
        if value not in allowed:
            raise self.bad(f"expected one of {', '.join(allowed)}, got {value!r}")
        return value


@dataclass(frozen=True)
class Cell:
    """Display text plus the stored values it shows, keyed by JSON pointer."""

    text: str
    fields: dict[str, Any] = field(default_factory=dict)
    css: str = ""
    note: str = ""  # a short explanation shown under the value, in the same cell


def num(node: Node, fmt: Callable[[object], str] = number, nullable: bool = False) -> Cell:
    """A number shown in a table cell.

    Args:
        node: the stored number.
        fmt: the display rounding (:func:`~fdp_audit.report.format.number`, or
            :func:`~fdp_audit.report.format.signed` for a margin).
        nullable: accept null (shown as a dash).

    Returns:
        A right-aligned (``num``) cell remembering the stored value.

    Raises:
        BadInputError: the value is not a finite number (nor null when ``nullable``).
    """
    value = node.number(nullable)
    return Cell(fmt(value), {node.pointer: value}, "num")


def text(node: Node) -> Cell:
    """A string shown as it is stored.

    Args:
        node: the stored string.

    Returns:
        A cell remembering the stored value.

    Raises:
        BadInputError: the value is not a string.
    """
    return Cell(node.text(), {node.pointer: node.value})


def worded(node: Node, words: str, note: str = "") -> Cell:
    """A stored id shown in words (the id stays in the cell's fields), with an optional note under it.

    Args:
        node: the stored id.
        words: what the reader sees.
        note: a short explanation under the value, or empty.

    Returns:
        The cell.
    """
    return Cell(words, {node.pointer: node.value}, note=note)


def threat_cell(threat_model: Node) -> Cell:
    """A stored threat model shown in words (:func:`~fdp_audit.auditing.labels.threat_title`), its id kept in the
    cell's fields.

    Args:
        threat_model: the stored threat model id.

    Returns:
        The cell.
    """
    return worded(threat_model, threat_title(threat_model.text()))


def status(node: Node) -> Cell:
    """A verdict or status word, styled by its value (CSS class ``status-<value in lower case>``).

    Args:
        node: the stored status string (``PASS``, ``VIOLATION``, ...).

    Returns:
        The cell.

    Raises:
        BadInputError: the value is not a string.
    """
    value = node.text()
    return Cell(value, {node.pointer: value}, f"status status-{value.lower()}")


def span(low: Node, high: Node) -> Cell:
    """An interval [low, high] shown in one cell.

    Args:
        low: the stored lower end (null allowed).
        high: the stored upper end (null allowed).

    Returns:
        A ``num`` cell remembering both values.

    Raises:
        BadInputError: an end is neither a finite number nor null.
    """
    lo, hi = low.number(nullable=True), high.number(nullable=True)
    return Cell(interval(lo, hi), {low.pointer: lo, high.pointer: hi}, "num")


def numbers(node: Node) -> Cell:
    """A short list of numbers (a discrete prior) in one cell.

    Args:
        node: the stored list.

    Returns:
        A ``num`` cell ``[a, b, …]`` remembering every element.

    Raises:
        BadInputError: the value is not a list of finite numbers.
    """
    values = {item.pointer: item.number() for item in node.elements()}
    return Cell("[" + ", ".join(number(v) for v in values.values()) + "]", values, "num")


def scalar(node: Node) -> Cell | None:
    """A free-form scalar (profile and CorrDP sections); None for what is not a scalar.

    Args:
        node: any stored value.

    Returns:
        A text cell for a string, a ``num`` cell for null, a bool or a finite number, else None.
    """
    value = node.value
    if isinstance(value, str):
        return text(node)
    if value is None or isinstance(value, bool) or isinstance(value, int | float) and math.isfinite(value):
        return Cell(number(value), {node.pointer: value}, "num")
    return None


@dataclass(frozen=True)
class Table:
    """A table of the report, every cell a stored value.

    Attributes:
        id: the table's HTML id.
        columns: the column headings.
        rows: the rows, one :class:`Cell` per column.
        caption: what the table shows.
        collapsed: detail (per-threshold rows, long lists) folded into a ``<details>`` element.
    """

    id: str
    columns: tuple[str, ...]
    rows: list[list[Cell]]
    caption: str = ""
    collapsed: bool = False  # detail (per-threshold rows, long lists): folded into <details>


@dataclass(frozen=True)
class FigureView:
    """A figure of the report.

    Attributes:
        id: the figure's HTML id.
        svg: the inline SVG; None when it was left out.
        caption: what the figure shows.
        omitted: why a supplied figure was left out; empty when it is shown.
    """

    id: str
    svg: Markup | None
    caption: str
    omitted: str = ""  # why a supplied figure was left out


@dataclass
class Section:
    """One report section. ``lead`` says which game (or part) it is; ``help`` explains its kind and is
    shown once per kind: later sections of the same kind point back with ``help_ref``."""

    id: str
    title: str
    help: Help
    lead: str = ""
    help_ref: Section | None = None
    facts: list[tuple[str, Cell]] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    figures: list[FigureView] = field(default_factory=list)
    blocks: list[tuple[str, Cell]] = field(default_factory=list)  # preformatted text: command, config
