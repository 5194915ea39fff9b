"""The one registry pattern (fdp_audit/registry.py): entries by name with declarative checks, bad input naming the
field and the known names, and installed plugins that register entries before the command line parses."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from fdp_audit.cli import COMMANDS
from fdp_audit.errors import BadInputError
from fdp_audit.registry import PLUGIN_GROUP, Has, Registry, Rule, Unique, load_plugins


@dataclass(frozen=True)
class Entry:
    name: str
    block: int = 0
    title: str = "a title"


def registry() -> Registry[Entry]:
    return Registry("widget", "config.widgets", (
        Has("block", int, low=0, high=10), Unique("block"), Has("title", str, choices=("a title", "another")),
        Rule(lambda entry, others: not entry.name.startswith("_"), "its name must not start with '_'")))


def test_entries_are_found_by_name_in_registration_order_and_removed():
    widgets = registry()
    first, second = widgets.register(Entry("b", 1)), widgets.register(Entry("a", 2))
    assert list(widgets) == ["b", "a"] and widgets["a"] is second and widgets.get("b") is first
    assert "a" in widgets and "c" not in widgets and 3 not in widgets and [] not in widgets
    assert widgets.lookup(["a", "b"]) == [second, first]
    widgets.unregister("a")
    widgets.unregister("never-registered")
    assert list(widgets.items()) == [("b", first)] and len(widgets) == 1


def test_register_is_a_class_decorator_and_idempotent_for_the_same_entry():
    classes: Registry[type] = Registry("thing")

    @classes.register
    class Thing:
        name = "thing"

    assert classes["thing"] is Thing and classes.register(Thing) is Thing and len(classes) == 1


@pytest.mark.parametrize(("entry", "message"), [
    (Entry("a", 1), "a widget named 'a' is already registered"),
    (Entry("b", 1), "widget 'b': block 1 is 'a''s"),
    (Entry("b", 10), r"widget 'b': block 10 is out of range \[0, 10\)"),
    (Entry("b", True), "widget 'b': block must be int, got True"),
    (Entry("b", 2, "other"), "widget 'b': title must be one of 'a title', 'another', got 'other'"),
    (Entry("b", 2, " "), "widget 'b': title must not be empty"),
    (Entry("_b", 2), "widget '_b': its name must not start with '_'"),
    (Entry(None, 2), "widget None: needs name"),  # type: ignore[arg-type]
])
def test_checks_refuse_an_entry_with_one_line_naming_it(entry, message):
    widgets = registry()
    widgets.register(Entry("a", 1))
    with pytest.raises(ValueError, match=f"^{message}$"):
        widgets.register(entry)
    assert list(widgets) == ["a"]


def test_unknown_names_are_one_line_of_bad_input_naming_the_field_and_the_known_names():
    widgets = registry()
    widgets.register(Entry("a", 1))
    widgets.register(Entry("b", 2))
    with pytest.raises(BadInputError) as caught:
        widgets["c"]
    assert str(caught.value) == "config.widgets: unknown widget 'c' (known: a, b)"
    assert caught.value.field == "config.widgets"
    with pytest.raises(BadInputError) as caught:
        widgets.lookup(["a", "x", "y"], field="other.field")
    assert str(caught.value) == "other.field: unknown widgets 'x', 'y' (known: a, b)"
    with pytest.raises(BadInputError, match="unknown widget"):
        widgets[["unhashable"]]  # type: ignore[index]
    assert widgets.get(["unhashable"]) is None  # type: ignore[arg-type]


def plugin_distribution(folder: Path, module: str, source: str) -> None:
    """An installed distribution on ``folder`` whose entry point in fdp_audit.plugins names ``module``."""
    (folder / f"{module}.py").write_text(source)
    info = folder / "fdp_audit_test_plugin-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fdp-audit-test-plugin\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[{PLUGIN_GROUP}]\ntest_plugin = {module}\n")


def test_an_installed_plugin_registers_its_entries_before_the_command_line_parses(tmp_path, monkeypatch, cli):
    plugin_distribution(tmp_path, "fdp_test_plugin", '''
from fdp_audit.cli import EXIT_OK, Command, register_command

def register(subparsers):
    subparsers.add_parser("hello", help="say hello").set_defaults(handler=lambda args: print("hello") or EXIT_OK)

register_command(Command("hello", __name__))
''')
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        result = cli("hello")
        assert result.code == 0 and result.out == "hello\n"
        assert load_plugins() == ["test_plugin"]  # loading again registers nothing twice
    finally:
        COMMANDS.unregister("hello")
        sys.modules.pop("fdp_test_plugin", None)


def test_a_plugin_that_fails_to_load_is_one_line_of_bad_input(tmp_path, monkeypatch, cli, one_line_error):
    plugin_distribution(tmp_path, "fdp_broken_plugin", "raise RuntimeError('no GPU here')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    result = cli("--version")
    assert result.code == 2
    assert one_line_error(result.err) == ("fdp-audit: error: fdp_audit.plugins: plugin 'test_plugin' "
                                          "(fdp_broken_plugin) failed to load: RuntimeError: no GPU here")


def test_an_unregistered_integration_is_one_line_of_bad_input_naming_the_registered_ones(small_config):
    from fdp_audit.api import audit

    raw = small_config("dp_sgd", model={"kind": "module", "factory": "examples/opacus/model.py:make_model"},
                       mechanism={"training": "examples/opacus/train.py:train", "integration": "tensorflow_privacy"})
    with pytest.raises(BadInputError) as caught:
        audit(raw)
    assert str(caught.value) == ("mechanism.integration: unknown integration 'tensorflow_privacy' "
                                 "(known: opacus)")
