"""Every public function and method of ``fdp_audit``, and of the ``attacks`` package beside it, carries the
Google-style sections its signature calls for (docs/reference.md is generated from them): ``Args:`` when it takes
parameters other than ``self``/``cls``, ``Returns:`` (or ``Yields:``) when its return annotation is not ``None``;
and every public class at a module's top level has a docstring.

Public means no leading underscore, at a module's top level or a method of a public top-level class; a property is
an attribute and is exempt. The check reads the source with ``ast`` (nothing is imported), so it names functions
that the reference page does not list too."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "fdp_audit"
ATTACKS = PACKAGE.parent / "attacks"  # the attack registry and its attacks, a top-level package beside fdp_audit

# Every sub-package and top-level module of fdp_audit, so that a new one is checked without being listed.
PARTS = sorted(path.name for path in PACKAGE.iterdir()
               if path.suffix == ".py" or (path / "__init__.py").is_file())


def missing_sections(source: str) -> list[str]:
    """The public functions and methods of one module whose docstring lacks a section its signature calls for, and
    its public top-level classes without a docstring.

    Args:
        source: the module's Python source.

    Returns:
        One ``name: no Args section, no Returns section`` line per incomplete function (``Class.method`` for a
        method) and one ``Class: no docstring`` line per undocumented class, in source order; empty when the module
        is complete.
    """
    problems: list[str] = []

    def walk(node: ast.AST, prefix: str, public: bool, depth: int) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                if depth == 0 and not child.name.startswith("_") and not ast.get_docstring(child):
                    problems.append(f"{child.name}: no docstring")
                walk(child, f"{prefix}{child.name}.", public and not child.name.startswith("_"), depth + 1)
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) and depth <= 1:
                if child.name.startswith("_") or not public:
                    continue
                if isinstance(node, ast.ClassDef) and any(isinstance(d, ast.Name) and d.id == "property"
                                                          for d in child.decorator_list):
                    continue
                doc = ast.get_docstring(child) or ""
                takes = [a for a in child.args.args + child.args.kwonlyargs if a.arg not in ("self", "cls")]
                returns = child.returns is not None and not (isinstance(child.returns, ast.Constant)
                                                             and child.returns.value is None)
                missing = [section for section, needed in (("Args", bool(takes) and "Args:" not in doc),
                                                           ("Returns", returns and "Returns:" not in doc
                                                            and "Yields:" not in doc)) if needed]
                if missing:
                    problems.append(f"{prefix}{child.name}: " + ", ".join(f"no {s} section" for s in missing))

    walk(ast.parse(source), "", True, 0)
    return problems


def _problems(path: Path) -> list[str]:
    modules = sorted(path.rglob("*.py")) if path.is_dir() else [path]
    return [f"{module.relative_to(PACKAGE.parent)}: {problem}"
            for module in modules for problem in missing_sections(module.read_text(encoding="utf-8"))]


def test_every_part_of_the_package_is_checked():
    assert {"auditing", "accounting", "report", "api.py", "claim.py"} <= set(PARTS)


@pytest.mark.parametrize("part", PARTS)
def test_every_public_function_of_the_package_has_its_sections(part):
    problems = _problems(PACKAGE / part)
    assert not problems, "incomplete docstrings of public functions and classes:\n" + "\n".join(problems)


def test_every_public_function_of_the_attacks_package_has_its_sections():
    problems = _problems(ATTACKS)
    assert not problems, "incomplete docstrings of public functions and classes:\n" + "\n".join(problems)


def test_the_check_flags_a_missing_section_and_accepts_a_complete_docstring():
    source = '''
def complete(x: int) -> int:
    """Twice x.

    Args:
        x: a number.

    Returns:
        2x.
    """


def no_returns(x: int) -> int:
    """Twice x.

    Args:
        x: a number.
    """


def undocumented(x) -> None:
    pass


def generator() -> Iterator[int]:
    """Numbers.

    Yields:
        0, 1, 2.
    """


def _private(x):
    pass


class Public:
    """A documented class."""

    def method(self, y: float) -> float:
        """Half y."""

    @property
    def size(self) -> int:
        return 1

    def takes_nothing(self) -> None:
        pass

    class Nested:
        def deeper(self, z): pass


class _Private:
    def method(self, y): pass


class Undocumented:
    x: int
'''
    assert missing_sections(source) == ["no_returns: no Returns section", "undocumented: no Args section",
                                        "Public.method: no Args section, no Returns section",
                                        "Undocumented: no docstring"]
