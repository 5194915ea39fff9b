"""What produced an audit's trials (docs/files.md): the key under which the trial journal stores them.

A journal line is reused only by a run that would have computed the same line. That depends on the
configuration, and also on the code that draws the secrets, trains the models and scores the attacks, and
on the libraries it runs on: a journal written before an upgrade (or any edit of the random streams) holds
scores of models trained for other secrets, and pairing them with this run's secrets yields a meaningless
success rate, a PASS where the mechanism leaks. So the key digests the source of the packages that run a
trial (``fdp_audit`` and ``attacks``), the data, the library versions, and the file a third-party
mechanism's spec names. Every journal line of a third-party mechanism also lists the digests of every
source file loaded from outside the standard library and the installed packages when its trials were done
(:func:`user_source_digests`: the spec's file and every module it imports, directly or not, at load time or
when called); a line is reused only while all of them are unchanged (:class:`fdp_audit.auditing.journal.Journal`).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import importlib.util
import inspect
import json
import marshal
import platform
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import torch

import attacks
import fdp_audit
from fdp_audit.auditing.third_party import load_mechanism
from fdp_audit.config import EXECUTION_FIELDS, Config
from fdp_audit.data.prepare import PreparedData
from fdp_audit.user_code import code_roots

PACKAGES = (fdp_audit, attacks)


def file_digest(path: Path) -> str:
    """SHA-256 of a file's bytes, or ``missing`` for a file that is not there (any more).

    Args:
        path: the file.

    Returns:
        The hex digest, or ``"missing"``.
    """
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "missing"


@functools.lru_cache(maxsize=1)
def source_digest() -> str:
    """SHA-256 over every Python file of the packages that run a trial, each named by its path inside its
    package, in sorted order.

    Returns:
        The hex digest (computed once per process).
    """
    digest = hashlib.sha256()
    for package in PACKAGES:
        root = Path(package.__file__).parent
        for path in sorted(root.rglob("*.py")):
            digest.update(f"{package.__name__}/{path.relative_to(root).as_posix()}\0".encode())
            digest.update(file_digest(path).encode())
    return digest.hexdigest()


def third_party_digest(spec: str) -> str | None:
    """SHA-256 of the file a third-party mechanism's spec names (``file.py:function``, or the module file of
    ``module:function``; None for a module without one). Resolving the spec first gives its usual error.

    Args:
        spec: the third-party mechanism's spec.

    Returns:
        The hex digest, or None.

    Raises:
        BadInputError: the spec does not resolve to a function.
    """
    load_mechanism(spec)
    location = spec.rpartition(":")[0]
    if location.endswith(".py"):
        return file_digest(Path(location).resolve())
    module_spec = importlib.util.find_spec(location)
    origin = None if module_spec is None else module_spec.origin
    return file_digest(Path(origin)) if origin and Path(origin).is_file() else None


def _library_roots() -> tuple[Path, ...]:
    """Folders of the standard library and of installed packages, and of the packages digested above."""
    ours, libraries = code_roots()
    return ours + libraries


@functools.cache
def _outside_libraries(file: str) -> bool:
    """Whether a module's file lies outside :func:`_library_roots` (kept per file: resolving the files of a few
    thousand loaded modules takes 0.4 s, and a driver asks once per game it sends to a cluster)."""
    resolved = Path(file).resolve()
    return not any(resolved.is_relative_to(root) for root in _library_roots())


def user_modules() -> list[ModuleType]:
    """Every loaded module whose file lies outside the standard library, the installed packages and the packages
    digested by :func:`source_digest`: a third-party mechanism's own modules, whatever imported them.

    Returns:
        The modules.
    """
    return [module for module in list(sys.modules.values())
            if isinstance(getattr(module, "__file__", None), str) and _outside_libraries(module.__file__)]


def user_source_digests() -> dict[str, str]:
    """SHA-256 of the source file of every :func:`user_modules` module. A file that has gone is digested as
    ``missing``.

    Returns:
        Resolved path → hex digest, sorted by path.
    """
    found = {}
    for module in user_modules():
        path = str(Path(module.__file__).resolve())
        if path not in found:
            found[path] = file_digest(Path(path))
    return dict(sorted(found.items()))


def journal_key(config: Config, versions: dict[str, str], data: PreparedData) -> str:
    """The journal key of a run (16 hex digits): configuration (less the settings of where its trials run, so an
    audit interrupted on a cluster resumes in-process and vice versa, and of how long a trial may take), library
    versions, the data's fingerprints (a CSV path names a file whose rows may change), and the digests above. The
    modules a third-party file imports are checked per journal line instead (:func:`user_source_digests`), since
    which of them are loaded when the key is computed depends on what the process did before.

    Args:
        config: the validated configuration.
        versions: the library versions (:func:`versions`).
        data: the prepared data.

    Returns:
        The key.

    Raises:
        BadInputError: a third-party spec that does not resolve.
    """
    third_party = config.mechanism.third_party
    settings = config.to_dict()
    for name in (*EXECUTION_FIELDS, "trial_timeout"):  # a run stopped by its time limit resumes under another
        del settings["audit"][name]
    content: dict[str, Any] = {
        "config": settings, "versions": versions, "source": source_digest(),
        "third_party_source": None if third_party is None or callable(third_party) else third_party_digest(third_party),
        "data": [data.train.fingerprint, data.population.fingerprint]}
    functions = function_digests(config)
    if functions:  # a notebook's functions have no file for user_source_digests to read
        content["functions"] = functions
    return hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()[:16]


def function_digests(config: Config) -> dict[str, str]:
    """SHA-256 of the source of each function of the user's code a configuration holds (rather than names), by
    field; a function whose source cannot be read (defined at an interactive prompt) is digested by its compiled
    code.

    Args:
        config: the configuration.

    Returns:
        The digests, empty when the configuration names its code by ``module:function``.
    """
    fields = {"model.factory": config.model.factory, "mechanism.training": config.mechanism.training,
              "mechanism.third_party": config.mechanism.third_party}
    digests = {}
    for field, function in fields.items():
        if callable(function):
            try:
                source = inspect.getsource(function).encode()
            except (OSError, TypeError):
                source = marshal.dumps(function.__code__)
            digests[field] = hashlib.sha256(source).hexdigest()
    return digests


def versions() -> dict[str, str]:
    """The versions of the package and of the libraries a trial's numbers depend on. scikit-learn's and
    dp_accounting's come from their installed metadata: importing scikit-learn takes seconds that a process
    needing no shadow classifier would waste, and dp_accounting has no ``__version__``.

    Returns:
        Name → version string.
    """
    import scipy

    return {"fdp_audit": fdp_audit.__version__, "python": platform.python_version(), "torch": torch.__version__,
            "numpy": np.__version__, "scipy": scipy.__version__,
            "scikit-learn": importlib.metadata.version("scikit-learn"),
            "dp_accounting": importlib.metadata.version("dp-accounting")}
