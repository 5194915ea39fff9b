"""One registry pattern for every extensible kind (docs/extending.md, docs/design.md).

A :class:`Registry` maps names to entries of one kind: mechanisms, attacks, games, public maps Ψ, data sets,
executors, integrations, reproductions and command-line commands each have one. An entry carries its own name
(its ``name`` attribute) and its metadata (a game's report title, lead and layout; an attack's threat model and
title; a data set's needs), so whatever reads the registry reads the entry and names none of them. Registering
runs the registry's declarative checks of the entry (:class:`Has`, :class:`Unique`, :class:`Rule`); looking an
unknown name up is a one-line :class:`~fdp_audit.errors.BadInputError` naming the configuration field and the
known names.

Each kind's package exposes a public ``register_<kind>`` function (usable as a class decorator where entries
are classes) and the registry itself, a read-only mapping::

    from fdp_audit.auditing.games import GAMES, register_game

    @register_game
    class MyGame(Game): ...

    GAMES["my_game"]          # the class; GAMES["typo"] is bad input naming audit.games

An installed package extends the suite without an import by the user: an entry point in the group
:data:`PLUGIN_GROUP` names a module that registers its entries when imported, and :func:`load_plugins` (which the
command line calls before it builds its parser) imports every one::

    [project.entry-points."fdp_audit.plugins"]
    my_attacks = "my_package.fdp_plugin"

A configuration is checked against the registries when it is built (:func:`registry_of`): a field that names
entries (``data.dataset``, ``audit.games`` …) must name registered ones, the built-in entries, the installed
plugins' and those the user registered before building it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from fdp_audit.errors import BadInputError

T = TypeVar("T")


class Check:
    """A declarative check of an entry, run by :meth:`Registry.register`."""

    def problem(self, entry: Any, others: Mapping[str, Any]) -> str | None:
        """What is wrong with ``entry`` among the ``others`` already registered, or None.

        Args:
            entry: the entry being registered.
            others: the registered entries other than one of the same name.

        Returns:
            A short sentence saying what is wrong, or None when the entry passes.
        """
        raise NotImplementedError


@dataclass(frozen=True)
class Has(Check):
    """The entry has the attribute ``attribute`` of type ``kind`` (a bool is not an int), non-empty when a
    string, one of ``choices`` when given, and within ``[low, high)`` when given."""

    attribute: str
    kind: type | tuple[type, ...]
    choices: Collection[Any] | None = None
    low: float | None = None
    high: float | None = None
    optional: bool = False  # None is allowed

    def problem(self, entry: Any, others: Mapping[str, Any]) -> str | None:
        """What is wrong with ``entry``'s attribute: missing (unless optional), of the wrong type, an empty string, not
        one of the choices, or out of range.

        Args:
            entry: the entry being registered.
            others: the registered entries other than one of the same name (not used).

        Returns:
            A short sentence naming the attribute and what is wrong, or None when it passes.
        """
        value = getattr(entry, self.attribute, None)
        if value is None:
            return None if self.optional else f"needs {self.attribute}"
        kinds = self.kind if isinstance(self.kind, tuple) else (self.kind,)
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
            names = " or ".join(k.__name__ for k in kinds)
            return f"{self.attribute} must be {names}, got {value!r}"
        if isinstance(value, str) and not value.strip():
            return f"{self.attribute} must not be empty"
        if self.choices is not None and value not in self.choices:
            return f"{self.attribute} must be one of {', '.join(map(repr, self.choices))}, got {value!r}"
        if (self.low is not None and value < self.low) or (self.high is not None and value >= self.high):
            return f"{self.attribute} {value!r} is out of range [{self.low}, {self.high})"
        return None


@dataclass(frozen=True)
class Unique(Check):
    """No other registered entry has the same value of ``attribute`` (None values are not compared)."""

    attribute: str

    def problem(self, entry: Any, others: Mapping[str, Any]) -> str | None:
        """Which registered entry already has ``entry``'s value of the attribute.

        Args:
            entry: the entry being registered.
            others: the registered entries other than one of the same name, by name.

        Returns:
            ``"<attribute> <value> is '<name>'s"`` for the first other entry with the same value, or None.
        """
        value = getattr(entry, self.attribute, None)
        if value is None:
            return None
        for name, other in others.items():
            if getattr(other, self.attribute, None) == value:
                return f"{self.attribute} {value!r} is {name!r}'s"
        return None


@dataclass(frozen=True)
class Rule(Check):
    """``holds(entry, others)`` is true; ``message`` says what it demands."""

    holds: Callable[[Any, Mapping[str, Any]], bool]
    message: str

    def problem(self, entry: Any, others: Mapping[str, Any]) -> str | None:
        """The rule's message when ``holds(entry, others)`` is false.

        Args:
            entry: the entry being registered.
            others: the registered entries other than one of the same name, by name.

        Returns:
            :attr:`message`, or None when the rule holds.
        """
        return None if self.holds(entry, others) else self.message


class Registry(Mapping[str, T], Generic[T]):
    """Entries of one extensible kind by name, in registration order.

    A read-only mapping for its readers (``name in registry``, ``registry.items()``, ``list(registry)``);
    ``registry[name]`` of an unknown name raises a :class:`~fdp_audit.errors.BadInputError` that names
    ``field`` and the known names. Entries change only through :meth:`register` and :meth:`unregister`.
    """

    def __init__(self, kind: str, field: str | None = None, checks: Sequence[Check] = ()):
        """An empty registry.

        Args:
            kind: what an entry is, in words (``game``, ``attack``), for messages.
            field: the configuration field (or command-line argument) that names entries, for bad input.
            checks: declarative checks every entry must pass when registered, besides a non-empty ``name``.
        """
        self.kind = kind
        self.field = field
        self.checks = (Has("name", str), *checks)
        self._entries: dict[str, T] = {}

    def register(self, entry: T) -> T:
        """Add ``entry`` under its ``name``; registering the same entry again changes nothing.

        Args:
            entry: an object (often a class) with a ``name`` attribute and the metadata the checks ask for.

        Returns:
            ``entry`` itself, so that ``register`` works as a class decorator.

        Raises:
            ValueError: the name is another entry's, or a check fails; the message names the kind and entry.
        """
        name = getattr(entry, "name", None)
        if isinstance(name, str) and self._entries.get(name) is entry:
            return entry
        if isinstance(name, str) and name in self._entries:
            raise ValueError(f"a {self.kind} named {name!r} is already registered")
        for check in self.checks:
            problem = check.problem(entry, self._entries)
            if problem is not None:
                raise ValueError(f"{self.kind} {name!r}: {problem}")
        self._entries[name] = entry
        return entry

    def unregister(self, name: str) -> None:
        """Remove the entry ``name`` (an entry defined for one test, or a plugin replaced); an unknown name is
        ignored.

        Args:
            name: the entry's name.
        """
        self._entries.pop(name, None)

    def __getitem__(self, name: str) -> T:
        try:
            return self._entries[name]
        except (KeyError, TypeError):
            raise BadInputError(f"unknown {self.kind} {name!r} (known: {', '.join(self._entries)})",
                                self.field) from None

    def lookup(self, names: Sequence[str], field: str | None = None) -> list[T]:
        """The entries of ``names`` in their order; every unknown name in one error.

        Args:
            names: entry names, as a configuration lists them.
            field: the field that lists them, when not the registry's own.

        Returns:
            The entries, one per name.

        Raises:
            BadInputError: some names are unknown; the message lists them and the known names.
        """
        unknown = [name for name in names if name not in self]
        if unknown:
            plural = "" if len(unknown) == 1 else "s"
            raise BadInputError(f"unknown {self.kind}{plural} {', '.join(map(repr, unknown))} "
                                f"(known: {', '.join(self._entries)})", field or self.field)
        return [self._entries[name] for name in names]

    def get(self, name: str, default: Any = None) -> Any:
        """The entry ``name``, or ``default`` when there is none (no error: for readers that fall back).

        Args:
            name: an entry's name.
            default: what to return for an unknown name.

        Returns:
            The entry or ``default``.
        """
        try:
            return self._entries.get(name, default)
        except TypeError:
            return default

    def __contains__(self, name: object) -> bool:
        try:
            return name in self._entries
        except TypeError:
            return False

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._entries))

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}: {', '.join(self._entries)})"


PLUGIN_GROUP = "fdp_audit.plugins"


def load_plugins(group: str = PLUGIN_GROUP) -> list[str]:
    """Import every installed plugin: the modules that entry points of ``group`` name, each registering its
    entries (attacks, games, commands …) when imported.

    Args:
        group: the entry-point group.

    Returns:
        The names of the entry points loaded, in the order found.

    Raises:
        BadInputError: a plugin failed to import, or to register (the message names it and its error).
    """
    from importlib.metadata import entry_points

    from fdp_audit.user_code import failure

    loaded = []
    for point in entry_points(group=group):
        try:
            point.load()
        except Exception as err:  # noqa: BLE001 - whatever an installed plugin raises is its failure, not ours
            raise BadInputError(f"plugin {point.name!r} ({point.value}) failed to load: {failure(err)}",
                                group) from err
        loaded.append(point.name)
    return loaded


# The registry of each configuration field that names entries, as module:attribute: the module creates the
# registry and registers the built-in entries. Those modules sit above the configuration (they read it), so the
# configuration imports them only when it first checks such a field, by these names (tests/test_imports.py holds
# this table to the registries' own modules and fields).
CONFIG_REGISTRIES: dict[str, str] = {
    "data.dataset": "fdp_audit.data.catalog:DATASETS",
    "data.public_map": "fdp_audit.data.catalog:PUBLIC_MAPS",
    "mechanism.integration": "fdp_audit.integrations:INTEGRATIONS",
    "audit.games": "fdp_audit.auditing.games:GAMES",
    "audit.attacks": "attacks:ATTACKS",
    "audit.executor": "fdp_audit.execution:EXECUTORS",
}
_plugins = {"state": "not loaded"}


def registry_of(field: str) -> Registry[Any]:
    """The registry whose entries a configuration field names, with its built-in entries and, the first time,
    every installed plugin's (:func:`load_plugins`) registered.

    Args:
        field: a key of :data:`CONFIG_REGISTRIES`, e.g. ``"data.dataset"``.

    Returns:
        The registry.

    Raises:
        BadInputError: a plugin failed to load.
    """
    if _plugins["state"] == "not loaded":
        _plugins["state"] = "loading"  # a plugin that builds a configuration while it loads sees the others so far
        try:
            load_plugins()
        except BadInputError:
            _plugins["state"] = "not loaded"
            raise
        _plugins["state"] = "loaded"
    module, _, name = CONFIG_REGISTRIES[field].partition(":")
    return getattr(importlib.import_module(module), name)
