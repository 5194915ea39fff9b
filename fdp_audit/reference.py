"""Reference pages generated from the code, so that they cannot drift (docs/README.md):

* ``docs/reference.md``, the Python API: the public functions, the base class and ``register_*`` function of every
  extensible kind, and every registry with the names it holds, from their signatures and docstrings
  (:func:`api_markdown`);
* ``docs/configuration.md``'s table, every configuration key with its type and default, from the schema
  (:func:`configuration_markdown`).

``python -m fdp_audit.reference`` writes both; ``--check`` exits 1 when a page differs from what it would write, and
a test runs that check. :func:`undocumented` lists the public functions whose docstrings lack the ``Args:`` or
``Returns:`` section their signature calls for.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import inspect
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from fdp_audit.registry import Registry

DOCS = Path(__file__).resolve().parents[1] / "docs"
API_PAGE = DOCS / "reference.md"
CONFIGURATION_PAGE = DOCS / "configuration.md"
CONFIGURATION_MARKERS = ("<!-- config-reference:start -->", "<!-- config-reference:end -->")

# (section title, module, public names in the order the page lists them)
API: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("The library", "fdp_audit.api", ("audit", "audit_checkpoint", "replay_checkpoint", "account", "gate",
                                      "AuditResult", "WrittenFiles", "GateResult", "checkpoint_claim",
                                      "check_gaussian_parameters", "as_config", "shipped_config_path", "demo",
                                      "demo_config", "train", "Training", "calibrate", "profile", "corrdp",
                                      "report")),
    ("The configuration", "fdp_audit.config", ("Config", "load_config", "config_from_dict")),
    ("The claim", "fdp_audit.claim", ("Claim", "noise_multiplier", "adopt_noise_multiplier")),
    ("One-run audits of the user's own training", "fdp_audit.auditing.one_run.loop", ("GradientCanaries",)),
    ("One-run audits with record canaries", "fdp_audit.auditing.one_run.canaries", ("insert_record_canaries",)),
    ("Privacy events and their accountants", "fdp_audit.accounting",
     ("PrivacyEvent", "SubsampledGaussianEvent", "PublicOnlyEvent", "NonPrivateEvent", "Segment", "MechanismSpec",
      "MechanismAccountant", "ACCOUNTANTS", "accountant_for", "register_accountant", "unregister_accountant")),
    ("Registries", "fdp_audit.registry", ("Registry", "Check", "Has", "Unique", "Rule", "load_plugins")),
    ("Mechanisms", "fdp_audit.mechanisms",
     ("Mechanism", "Recipe", "MECHANISMS", "register_mechanism", "faulty_mechanisms")),
    ("Attacks", "attacks", ("Attack", "Knowledge", "View", "AttackOutput", "ATTACKS", "register_attack",
                            "unregister_attack", "checkpoint_attacks")),
    ("Games", "fdp_audit.auditing.games", ("Game", "ReportView", "GAMES", "register_game", "unregister_game",
                                        "configured_games", "report_view", "comparison_view")),
    ("Data sets and public maps", "fdp_audit.data.catalog",
     ("DataSet", "PublicMapKind", "DATASETS", "PUBLIC_MAPS", "register_dataset", "register_public_map",
      "build_public_map", "checked_public_map", "load_images", "read_as_images")),
    ("Executors", "fdp_audit.execution", ("Executor", "EXECUTORS", "register_executor", "make_executor",
                                          "executor_for")),
    ("Integrations", "fdp_audit.integrations", ("Integration", "Promised", "INTEGRATIONS", "register_integration",
                                                "integrated_claim")),
    ("Reproductions", "fdp_audit.reproduce", ("Reproduction", "REPRODUCTIONS", "register_reproduction",
                                              "run_reproduction")),
    ("Commands", "fdp_audit.cli", ("Command", "COMMANDS", "register_command")),
)

PACKAGE_SECTION = "Other names of the package"


def api_sections() -> tuple[tuple[str, str, tuple[str, ...]], ...]:
    """The sections of the API reference: :data:`API`, and a last section for any name of ``fdp_audit.__all__``
    that no section of :data:`API` lists, so that the reference and its docstring check cover every public name.

    Returns:
        ``(section title, module, names)`` triples in the order the page lists them.
    """
    import fdp_audit

    listed = {id(getattr(importlib.import_module(module), name)) for _, module, names in API for name in names}
    missing = tuple(name for name in fdp_audit.__all__ if not name.startswith("_")
                    and id(getattr(fdp_audit, name)) not in listed)
    return API + ((PACKAGE_SECTION, "fdp_audit", missing),) if missing else API


_ROLES = re.compile(r":(?:class|func|meth|attr|data|mod|obj):`~?([^`]+)`")


def configuration_markdown() -> str:
    """The configuration reference: every dotted key with its type and default.

    Returns:
        A markdown table; fields that name a registry's entries list the registered names.
    """
    from fdp_audit.config import config_reference_markdown
    from fdp_audit.data.catalog import DATASETS, PUBLIC_MAPS
    from fdp_audit.execution import EXECUTORS
    from fdp_audit.integrations import INTEGRATIONS

    return config_reference_markdown({"data.dataset": DATASETS, "data.public_map": PUBLIC_MAPS,
                                      "audit.executor": EXECUTORS, "mechanism.integration": ["none", *INTEGRATIONS]})


def api_markdown() -> str:
    """The Python API reference page.

    Returns:
        Markdown: one section per extensible kind, each object with its signature and docstring.
    """
    lines = ["# Python API reference", "",
             "Generated from the docstrings by `python -m fdp_audit.reference` (a test checks it is current). "
             "[extending.md](extending.md) shows each kind at work.", ""]
    for title, module_name, names in api_sections():
        module = importlib.import_module(module_name)
        lines += [f"## {title}", "", f"`{module_name}`", ""]
        for name in names:
            lines += _entry(name, getattr(module, name))
    return "\n".join(lines).rstrip() + "\n"


def undocumented() -> list[str]:
    """The public functions and methods of the reference whose docstring is missing, or lacks the ``Args:``
    section their parameters call for or the ``Returns:`` section their return annotation calls for.

    Returns:
        One ``module.name: what is missing`` line each; empty when every docstring is complete.
    """
    problems = []
    for _, module_name, names in api_sections():
        module = importlib.import_module(module_name)
        for name in names:
            for qualified, function in _functions(name, getattr(module, name)):
                missing = _missing_sections(function)
                if missing:
                    problems.append(f"{module_name}.{qualified}: {missing}")
    return problems


def _functions(name: str, value: Any) -> Iterator[tuple[str, Callable[..., Any]]]:
    if inspect.isclass(value):
        for attribute, member in _methods(value):
            yield f"{name}.{attribute}", member
    elif inspect.isfunction(value):
        yield name, value


def _methods(cls: type) -> list[tuple[str, Callable[..., Any]]]:
    """The public methods ``cls`` defines itself, and a constructor it writes itself (properties are attributes;
    a dataclass's generated constructor is documented by the class)."""
    return [(attribute, member) for attribute, member in vars(cls).items()
            if (not attribute.startswith("_") or attribute == "__init__") and inspect.isfunction(member)
            and not (attribute == "__init__" and (dataclasses.is_dataclass(cls)
                                                  or not member.__qualname__.startswith(cls.__qualname__)))]


def _missing_sections(function: Callable[..., Any]) -> str | None:
    doc = inspect.getdoc(function)
    if not doc:
        return "no docstring"
    signature = inspect.signature(function)
    takes = [p for p in signature.parameters.values() if p.name not in ("self", "cls")]
    returns = signature.return_annotation not in (inspect.Signature.empty, None, "None")
    missing = [section for section, needed in (("Args:", bool(takes)), ("Returns:", returns))
               if needed and section not in doc]
    return ", ".join(f"no {section[:-1]} section" for section in missing) or None


def _entry(name: str, value: Any) -> list[str]:
    if isinstance(value, Registry):
        names = ", ".join(f"`{entry}`" for entry in value) or "none"
        return [f"### `{name}`", "", f"The {value.kind} registry (`Registry`), named by `{value.field}`; "
                f"registered: {names}.", ""]
    if inspect.isclass(value):
        bases = ", ".join(f"`{base.__name__}`" for base in value.__bases__ if base is not object)
        lines = [f"### class `{name}{_signature(value)}`", ""] + ([f"Bases: {bases}", ""] if bases else [])
        lines += _docstring(value)
        for attribute, member in _methods(value):
            if attribute != "__init__":
                lines += [f"#### `{name}.{attribute}{_signature(member)}`", ""]
            lines += _docstring(member)
        return lines
    return [f"### `{name}{_signature(value)}`", ""] + _docstring(value)


def _signature(function: Callable[..., Any]) -> str:
    """``(a, b=1)``: the parameters without annotations (the docstring says what each is)."""
    try:
        signature = inspect.signature(function)
    except ValueError:  # a class whose constructor Python cannot introspect
        return ""
    parameters = [p.replace(annotation=inspect.Parameter.empty)
                  for p in signature.parameters.values() if p.name not in ("self", "cls")]
    return str(signature.replace(parameters=parameters, return_annotation=inspect.Signature.empty))


def _docstring(value: Any) -> list[str]:
    """The docstring as markdown: Sphinx roles and double backquotes as code; ``Args:`` and ``Raises:`` as bold
    headings over one list item per name, ``Returns:`` as a bold heading over its paragraph."""
    doc = inspect.getdoc(value) if value.__doc__ else None
    if not doc:
        return []
    text = _ROLES.sub(lambda m: f"`{m.group(1).split('.')[-1] if m.group(1).count('.') > 1 else m.group(1)}`",
                      doc).replace("``", "`")
    lines: list[str] = []
    section = None
    for line in text.splitlines():
        if line in ("Args:", "Returns:", "Raises:", "Yields:"):
            lines += (["", f"**{line[:-1]}**", ""] if lines and lines[-1] else [f"**{line[:-1]}**", ""])
            section = line[:-1]
        elif section is not None and line.startswith("    "):
            item = line.strip()
            if section in ("Args", "Raises") and re.match(r"\*{0,2}\w+:", item) and not line.startswith("     "):
                lines.append("* " + re.sub(r"^\*+", lambda stars: "\\" + "\\".join(stars.group()), item))
            elif lines and lines[-1]:
                lines[-1] += " " + item
            else:
                lines.append(item)
        else:
            section = None
            lines.append(line)
    return [*"\n".join(lines).strip().splitlines(), ""]


def _replace_between(text: str, markers: tuple[str, str], content: str) -> str:
    start, end = text.index(markers[0]) + len(markers[0]), text.index(markers[1])
    return f"{text[:start]}\n{content.strip()}\n{text[end:]}"


def pages() -> dict[Path, str]:
    """Every generated page with the text it should hold.

    Returns:
        Path → full text.
    """
    configuration = _replace_between(CONFIGURATION_PAGE.read_text(encoding="utf-8"), CONFIGURATION_MARKERS,
                                     configuration_markdown())
    return {API_PAGE: api_markdown(), CONFIGURATION_PAGE: configuration}


def main(argv: list[str] | None = None) -> int:
    """Write the generated pages, or with ``--check`` report those that differ.

    Args:
        argv: the command-line arguments (``sys.argv[1:]`` when None).

    Returns:
        The exit code: 0, or 1 when ``--check`` found a page out of date.
    """
    parser = argparse.ArgumentParser(prog="python -m fdp_audit.reference", description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a page is out of date")
    args = parser.parse_args(argv)
    stale = [path for path, text in pages().items()
             if not path.exists() or path.read_text(encoding="utf-8") != text]
    if args.check:
        for path in stale:
            print(f"{path.relative_to(DOCS.parent)} is out of date: run python -m fdp_audit.reference",
                  file=sys.stderr)
        return 1 if stale else 0
    from fdp_audit.atomic_io import atomic_write_text

    for path in stale:
        atomic_write_text(path, pages()[path])
        print(f"wrote {path.relative_to(DOCS.parent)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
