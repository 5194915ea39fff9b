"""The generated reference pages (fdp_audit/reference.py): docs/reference.md and docs/configuration.md hold what the
code generates, and every public function of the reference has the Args/Returns sections its signature calls for."""

from __future__ import annotations

from fdp_audit.reference import api_markdown, main, undocumented


def test_the_generated_pages_are_current(capsys):
    assert main(["--check"]) == 0, capsys.readouterr().err


def test_every_public_function_of_the_reference_documents_its_arguments_and_result():
    assert undocumented() == []


def test_the_api_page_lists_every_kind_with_its_registered_names():
    page = api_markdown()
    for registry in ("MECHANISMS", "ATTACKS", "GAMES", "DATASETS", "PUBLIC_MAPS", "EXECUTORS", "REPRODUCTIONS",
                     "COMMANDS"):
        assert f"### `{registry}`" in page
    assert "registered: `prior`, `likelihood`" in page and "#### `Game.setup(config, data)`" in page


def test_the_api_page_covers_every_name_the_package_exports():
    import fdp_audit

    page = api_markdown()
    for name in fdp_audit.__all__:
        if not name.startswith("_"):
            assert f"### `{name}(" in page or f"### class `{name}(" in page or f"### `{name}`" in page, name
    assert "#### `Config.with_overrides(overrides, names=None)`" in page
    assert "#### `GradientCanaries.save(module, path)`" in page
