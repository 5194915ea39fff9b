"""The README is part of the product: a front page whose links (and the docs' links) resolve, and whose shell
snippets marked as runnable work word for word from a fresh clone."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
MAX_README_LINES = 250


def test_the_readme_is_a_front_page():
    """What it is, the two commands, the tour, the threat models, links: measured tables, errata and the
    configuration reference live in docs/."""
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= MAX_README_LINES
    assert "| threat model |" in text and "<!-- config-reference:start -->" not in text


def test_every_relative_link_of_the_docs_names_a_file_that_exists():
    pages = [README, *sorted((ROOT / "docs").glob("*.md"))]
    for page in pages:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text(encoding="utf-8")):
            if "://" not in target:
                assert (page.parent / target).exists(), f"{page.name} links to {target}, which does not exist"


def test_readme_shows_the_two_commands_first():
    text = README.read_text(encoding="utf-8")
    assert text.index("make demo") < text.index("## A five-minute tour")
    assert "make test" in text


def runnable_snippets(text: str) -> list[str]:
    """Shell blocks that follow a `<!-- runnable -->` marker: the README promises they work word for word."""
    return re.findall(r"<!-- runnable -->\s*```sh\n(.*?)```", text, flags=re.S)


def test_runnable_marker_is_found():
    assert runnable_snippets("<!-- runnable -->\n```sh\necho hi\n```\n```sh\nnot me\n```") == ["echo hi\n"]


@pytest.mark.slow
@pytest.mark.parametrize("index", range(len(runnable_snippets(README.read_text(encoding="utf-8")))))
def test_readme_runnable_snippet(index, tmp_path):
    """Run each runnable snippet with `bash -e` in a copy of the tracked files, as a fresh clone would after
    `make test` created `.venv` (here: a link to the interpreter's own virtual environment)."""
    if sys.prefix == sys.base_prefix:
        pytest.skip("the snippets activate .venv; this interpreter is not in a virtual environment")
    repo = README.parent
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=repo, capture_output=True, check=False)
    if tracked.returncode != 0:
        pytest.skip("not a git checkout")
    clone = tmp_path / "clone"
    for name in tracked.stdout.decode().split("\0"):
        if name and (repo / name).is_file():
            (clone / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(repo / name, clone / name)
    (clone / ".venv").symlink_to(sys.prefix, target_is_directory=True)
    snippet = runnable_snippets(README.read_text(encoding="utf-8"))[index]
    done = subprocess.run(["bash", "-e", "-c", snippet], cwd=clone, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, (f"snippet {index} failed:\n{snippet}\n--- stdout\n{done.stdout}\n"
                                  f"--- stderr\n{done.stderr}")
