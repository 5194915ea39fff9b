"""Package boundaries (docs/design.md): every module of ``fdp_audit`` and ``attacks`` imports on its own in a
fresh process, the module import graph has no cycle (imports inside functions, modules imported by name and a lazy
package's names count), and ``attacks`` reaches the core only through ``fdp_audit.training.interface`` (and the
error type and the generic registry)."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("fdp_audit", "attacks")
# Third-party libraries the child processes inherit already imported, so that each of the ~150 imports costs
# only the project's own code; none of them imports the project.
PRELOAD = ("numpy", "scipy.stats", "scipy.optimize", "scipy.special", "torch", "yaml", "jinja2", "sklearn.linear_model",
           "matplotlib.pyplot", "dp_accounting", "statsmodels.api", "safetensors.torch")

# Run in a fresh interpreter that has imported none of the project: it preloads the third-party libraries, then
# forks one child per module, so each module is imported into a process where no module of the project has
# ever been loaded, as on the first import of a user's script. Prints {module: error} as JSON.
_FORK_EACH = r"""
import importlib, json, os, sys, traceback
sys.path.insert(0, sys.argv[1])
modules, preload = json.loads(sys.argv[2]), json.loads(sys.argv[3])
import matplotlib
matplotlib.use("Agg")
for name in preload:
    try:
        importlib.import_module(name)
    except ImportError:
        pass
assert not any(m.split(".")[0] in ("fdp_audit", "attacks") for m in sys.modules)
failures, running = {}, {}
def reap():
    pid, status = os.wait()
    name, read = running.pop(pid)
    message = os.read(read, 1 << 16).decode(errors="replace")
    os.close(read)
    if status != 0:
        failures[name] = message or f"exit status {status}"
for name in modules:
    while len(running) >= 2:
        reap()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        try:
            importlib.import_module(name)
        except BaseException:
            os.write(write, traceback.format_exc()[-4000:].encode())
            os._exit(1)
        os._exit(0)
    os.close(write)
    running[pid] = (name, read)
while running:
    reap()
print(json.dumps(failures))
"""


def project_modules() -> dict[str, Path]:
    """Dotted name → source file of every module of the project's packages."""
    modules = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def _deferred_nodes(tree: ast.Module) -> set[int]:
    """The nodes of a package's functions that Python runs only when a name is read from the package, never on
    import: a module-level ``__getattr__`` (PEP 562)."""
    roots = [node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == "__getattr__"]
    return {id(node) for root in roots for node in ast.walk(root)}


def _targets(name: str, path: Path, tree: ast.Module, modules: dict[str, Path], skip: set[int]) -> list[str]:
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    targets = []
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            targets += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[:len(package) - node.level + 1] + ([base] if base else []))
            targets += [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
        elif (named := _named_module(name, node, modules)) is not None:
            targets.append(named)
    return targets


def _named_module(name: str, node: ast.AST, modules: dict[str, Path]) -> str | None:
    """The project module a string names, as code imports it by name (``importlib.import_module``, a registry
    entry's ``module:function``): the whole string, or its part before ``:``, is a module's dotted name (a bare
    word such as ``attacks`` is not read as one); an f-string may start with the module's own ``{__name__}``."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        text = node.value
    elif (isinstance(node, ast.JoinedStr) and len(node.values) == 2 and isinstance(node.values[0], ast.FormattedValue)
          and ast.unparse(node.values[0].value) == "__name__" and isinstance(node.values[1], ast.Constant)):
        text = name + str(node.values[1].value)
    else:
        return None
    module, colon, _ = text.partition(":")
    if not colon and "." not in module:  # a bare word ("attacks" is also a key of the results) names nothing
        return None
    return module if module in modules and module != name else None


def _edges(name: str, targets: list[str], modules: dict[str, Path]) -> set[str]:
    edges = set()
    for target in targets:
        parts = target.split(".")
        for end in range(1, len(parts) + 1):
            candidate = ".".join(parts[:end])
            # a module's own enclosing packages are already running when it is imported: not an edge
            if candidate in modules and candidate != name and not name.startswith(candidate + "."):
                edges.add(candidate)
    return edges


def _type_only(tree: ast.Module) -> set[int]:
    return {id(node) for test in ast.walk(tree) if isinstance(test, ast.If)
            and "TYPE_CHECKING" in ast.unparse(test.test) for stmt in test.body for node in ast.walk(stmt)}


def _defined_names(tree: ast.Module) -> set[str]:
    """The names a module binds at import time (not those its ``__getattr__`` provides)."""
    names = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n.id for target in targets for n in ast.walk(target) if isinstance(n, ast.Name)}
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return names


def deferred_modules(name: str, path: Path, modules: dict[str, Path], read: list[str]) -> set[str]:
    """The project modules a package imports lazily (:func:`_deferred_nodes`) when one of the names ``read``
    from it is not one it binds on import; they are run by whoever reads such a name, not by importing it."""
    if path.name != "__init__.py":
        return set()
    tree = ast.parse(path.read_text(encoding="utf-8"))
    lazy = set(read) - _defined_names(tree)
    if not lazy:
        return set()
    deferred = _deferred_nodes(tree)
    skip = {id(node) for node in ast.walk(tree) if id(node) not in deferred} | _type_only(tree)
    provided = _provided_by(name, tree, modules)
    named = {provided[n] for n in lazy if n in provided}
    return _edges(name, _targets(name, path, tree, modules, skip), modules) | named


def _provided_by(name: str, tree: ast.Module, modules: dict[str, Path]) -> dict[str, str]:
    """A lazy package's table of which submodule provides each name (``{"tradeoff": ("compose_gaussian", …)}``,
    which its ``__getattr__`` imports by name): lazy name → that submodule."""
    provided = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if (isinstance(key, ast.Constant) and f"{name}.{key.value}" in modules
                        and isinstance(value, ast.Tuple | ast.List)):
                    provided |= {item.value: f"{name}.{key.value}" for item in value.elts
                                 if isinstance(item, ast.Constant) and isinstance(item.value, str)}
    return provided


def imported_modules(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The project modules that importing ``name`` executes directly: every import statement, also inside
    functions (an import hidden in a function still runs, and hiding one is how a cycle is usually dodged),
    except under ``if TYPE_CHECKING``; importing ``a.b.c`` also runs the packages ``a`` and ``a.b``. A package's
    lazy imports (:func:`deferred_modules`) count for the modules that read a name from it
    (``from package import name``), which is when they run."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    edges = _edges(name, _targets(name, path, tree, modules, _type_only(tree) | _deferred_nodes(tree)), modules)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module in modules and not node.level:
            lazy = [a.name for a in node.names if f"{node.module}.{a.name}" not in modules]
            if lazy and node.module != name:
                edges |= deferred_modules(node.module, modules[node.module], modules, lazy) - {name}
    return edges


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each a set of mutually importing
    modules."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in sorted(graph[node]):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return cycles


def test_the_cycle_finder_finds_a_cycle_and_only_cycles():
    assert import_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert import_cycles({"a": {"b"}, "b": set(), "c": {"a", "b"}}) == []


def test_lazy_imports_of_a_package_count_for_the_modules_that_read_its_names(tmp_path):
    """``fdp_audit.__getattr__`` imports the library when a name is read: a module that reads such a name at
    import time runs those imports."""
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("def __getattr__(name):\n    from pkg import heavy\n    return heavy\n")
    (package / "heavy.py").write_text("import pkg.user\n")
    (package / "user.py").write_text("from pkg import thing\n")
    (package / "other.py").write_text("import pkg.heavy\n")
    modules = {"pkg": package / "__init__.py", "pkg.heavy": package / "heavy.py", "pkg.user": package / "user.py",
               "pkg.other": package / "other.py"}
    graph = {name: imported_modules(name, path, modules) for name, path in modules.items()}
    assert graph["pkg"] == set() and graph["pkg.user"] == {"pkg.heavy"}
    assert import_cycles(graph) == [["pkg.heavy", "pkg.user"]]
    modules.pop("pkg.user")
    assert import_cycles({name: imported_modules(name, path, modules) for name, path in modules.items()}) == []


def test_every_module_imports_on_its_own_in_a_fresh_process():
    modules = sorted(name for name in project_modules() if not name.endswith(".__main__"))  # running, not importing
    assert len(modules) > 100 and "fdp_audit.auditing.gate" in modules and "attacks.base" in modules
    env = {**os.environ, "MPLBACKEND": "Agg", "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-c", _FORK_EACH, str(ROOT), json.dumps(modules), json.dumps(PRELOAD)],
                          capture_output=True, text=True, timeout=300, env=env, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    failures = json.loads(done.stdout.strip().splitlines()[-1])
    assert not failures, "\n".join(f"{name}:\n{error}" for name, error in failures.items())


def test_the_attacks_package_uses_only_the_public_surface_of_the_core():
    modules = project_modules()
    allowed = {"fdp_audit", "fdp_audit.errors", "fdp_audit.registry", "fdp_audit.training",
               "fdp_audit.training.interface"}
    for name, path in modules.items():
        if name.split(".")[0] == "attacks":
            reached = {m for m in imported_modules(name, path, modules) if m.split(".")[0] == "fdp_audit"}
            assert reached <= allowed, f"{name} imports {sorted(reached - allowed)}"


def checked_registries() -> set[str]:
    """The modules that checking a configuration imports by name: each registry a configuration field names."""
    from fdp_audit.registry import CONFIG_REGISTRIES

    return {spec.partition(":")[0] for spec in CONFIG_REGISTRIES.values()}


def test_the_module_import_graph_has_no_cycles():
    modules = project_modules()
    graph = {name: imported_modules(name, path, modules) for name, path in modules.items()}
    assert graph["fdp_audit.auditing.runner"] and graph["attacks.base"]  # the parser sees imports
    assert "fdp_audit.reproduce.gate_proof" in graph["fdp_audit.reproduce"]  # and modules named by strings
    assert "fdp_audit.accounting.tradeoff" in graph["fdp_audit.auditing.stats"]  # and a lazy package's names
    # The one arrow up the layers: a configuration's registered names (data.dataset, audit.games …) are checked
    # against registries that sit above it; it imports them when it first checks one, never on import
    # (test_importing_the_configuration_runs_no_registry).
    assert checked_registries() <= graph["fdp_audit.registry"]
    graph["fdp_audit.registry"] -= checked_registries()
    assert import_cycles(graph) == []


def test_importing_the_configuration_runs_no_registry():
    """Importing the schema (and the registry pattern) runs neither the registries above it nor a heavy library:
    they load when a configuration is first checked."""
    heavy = ("torch", "scipy", "sklearn", "matplotlib", "dp_accounting", "jinja2", "numpy", "statsmodels")
    code = ("import sys, json, fdp_audit.config, fdp_audit.registry; "
            f"print(json.dumps(sorted(m for m in {sorted(checked_registries() | set(heavy))!r} if m in sys.modules)))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert json.loads(done.stdout) == []
