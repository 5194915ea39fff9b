"""The README's configuration reference is generated from the schema and must match it."""

from pathlib import Path

from fdp_audit.config import config_reference_markdown

README = Path(__file__).resolve().parents[1] / "README.md"


def test_config_reference_is_current():
    text = README.read_text(encoding="utf-8")
    start = text.index("<!-- config-reference:start -->") + len("<!-- config-reference:start -->")
    end = text.index("<!-- config-reference:end -->")
    assert text[start:end].strip() == config_reference_markdown().strip()


def test_readme_shows_the_two_commands_first():
    text = README.read_text(encoding="utf-8")
    assert text.index("make demo") < text.index("## A five-minute tour")
    assert "make test" in text
