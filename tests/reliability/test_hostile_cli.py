"""The command line driven end to end with hostile configs, data, results files and trial journals. Whatever the
input, the properties that make the CI gate worth its PASS hold:

1. the exit code is 0, 1 or 2 — never 3 (a crash), never a traceback;
2. a PASS (exit 0 with verdict PASS) is never over zero comparisons, nor over comparisons that could not have
   failed: the same comparisons with a perfect attack (every trial won, no ROC error) must be a VIOLATION;
3. a refused run (exit 2) writes nothing: its output folder is absent if it was, or unchanged if it held an
   earlier run's outputs;
4. no file outside ``--out`` is created, changed or removed (the inputs and the working folder included).

Property-based (hypothesis): a failure is a counterexample, shrunk and printed, so the test has no error
probability of its own. Each example runs real audits (tiny models, a few trials), hence the small example
counts and the slow mark; the module takes about a minute on two cores.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import io
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from fdp_audit.audit.gate import judge
from fdp_audit.audit.results import write_results
from fdp_audit.cli import main

pytestmark = pytest.mark.slow

def examples(count: int) -> settings:
    return settings(max_examples=count, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

BASE: dict[str, Any] = {
    "name": "hostile", "seed": 0, "device": "cpu",
    "data": {"dataset": "synthetic", "protected": ["protected"], "synthetic_rows": 40},
    "model": {"kind": "logistic"},
    "mechanism": {"name": "fdp_sgd", "noise_multiplier": 1.0, "sample_rate": 0.2, "public_batch_size": 16,
                  "steps": 2, "clip_norm": 1.0, "delta": 1e-5, "optimizer": {"name": "sgd", "lr": 1.0}},
    "audit": {"trials": 12, "alpha": 0.05, "games": ["distinguishing"], "attacks": ["prior", "iterates"]},
}

# (path, hostile values): out of range, of the wrong type, degenerate, or merely unusual but valid
MUTATIONS: list[tuple[tuple[str, ...], list[Any]]] = [
    (("seed",), [-1, 2**64, 1.5, "0"]),
    (("mechanism", "noise_multiplier"), [-1.0, 0, 1e-300, 0.03, 1e300, None, "one", True]),
    (("mechanism", "target_epsilon"), [0.5, -1, 1e-9]),
    (("mechanism", "steps"), [0, -1, 10**20, 1, 2.5]),
    (("mechanism", "sample_rate"), [0, 1.5, 1e-300, 1.0]),
    (("mechanism", "optimizer", "lr"), [1e308, 1e-300, 0]),
    (("mechanism", "third_party"), ["nonexistent_file.py:train", "nonexistent_module_xyz:train", "x"]),
    (("model",), [{"kind": "mlp", "hidden": [-3]}, {"kind": "mlp", "hidden": [0]}, {"kind": "mlp", "hidden": [2]},
                  {"kind": "cnn"}]),
    (("audit", "trials"), [1, 2, 3, 40, 10**9, 0]),
    (("audit", "alpha"), [0, 1, 1e-300, 0.5]),
    (("audit", "games"), [[], ["attribute", "attribute"], ["attribute"], ["simulator"], ["reconstruction"]]),
    (("audit", "attacks"), [[], ["prior"], ["nope"], ["prior", "likelihood"]]),
    (("audit", "target_prior"), [[1.0, 0.0], [0.999, 0.001], [0.5, 0.5, 0.0]]),
    (("data", "synthetic_rows"), [10, 10**9, 11]),
    (("data", "protected"), [[], ["nope"], ["protected", "protected"]]),
    (("data", "population_fraction"), [1e-9, 0.999999]),
    (("report",), [{"out_dir": "/"}, {"out_dir": "../../escape"}]),
]


def _files(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` (links not followed) with a digest of its bytes, and every folder."""
    found: dict[str, str] = {}
    for root, dirs, files in os.walk(folder):
        for name in dirs:
            found[os.path.relpath(os.path.join(root, name), folder) + "/"] = "folder"
        for name in files:
            path = os.path.join(root, name)
            found[os.path.relpath(path, folder)] = hashlib.sha256(Path(path).read_bytes()).hexdigest()
    return found


def _perfect(comparisons: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The same comparisons as a perfect attack would have made them: every trial won, no ROC error."""
    won = copy.deepcopy(comparisons)
    for row in won:
        if isinstance(row, dict) and isinstance(row.get("trials"), int) and "successes" in row:
            row["successes"] = row["trials"]
        for key in ("false_positives", "false_negatives"):
            if isinstance(row, dict) and isinstance(row.get(key), list):
                row[key] = [0] * len(row[key])
    return won


@contextlib.contextmanager
def _workspace() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="fdp-hostile-") as folder:
        root = Path(folder)
        (root / "cwd").mkdir()
        previous = os.getcwd()
        os.chdir(root / "cwd")
        try:
            yield root
        finally:
            os.chdir(previous)


def run_and_check(argv: list[str], root: Path, out: Path, judged: Path | None = None) -> int:
    """Run the command line and assert the four properties; ``out`` is the folder the command may write,
    ``judged`` the results file whose comparisons a PASS is over (default: the results.json written in ``out``)."""
    outside_before = {k: v for k, v in _files(root).items() if not (root / k).resolve().is_relative_to(out)}
    out_before = _files(out) if out.exists() else None
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = main([str(a) for a in argv])
    assert code in (0, 1, 2), f"exit code {code} for {argv}"
    event(f"{argv[0]} exit {code}")
    outside_after = {k: v for k, v in _files(root).items() if not (root / k).resolve().is_relative_to(out)}
    assert outside_after == outside_before, "a file outside --out was touched"
    if code == 2:
        assert (_files(out) if out.exists() else None) == out_before, "a refused run wrote output"
    judged = judged or out / "results.json"
    if code == 0 and printed.getvalue().startswith("PASS") and argv[0] != "report":
        saved = json.loads(judged.read_text())
        comparisons = saved.get("comparisons")
        assert comparisons, "PASS over no comparison"
        perfect, _ = judge(_perfect(comparisons), saved["verdict"]["alpha"])
        assert perfect["status"] == "VIOLATION", "PASS over comparisons that could not have failed"
    return code


def _set(raw: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    node = raw
    for key in path[:-1]:
        node = node.setdefault(key, {})
    node[path[-1]] = value


@examples(20)
@example([(("audit", "trials"), 3)])  # a perfect attack's lower confidence bound stays below the bound: no power
@example([(("audit", "games"), ["attribute"]), (("audit", "target_prior"), [1.0, 0.0])])  # bound 1
@given(st.lists(st.sampled_from(MUTATIONS).flatmap(lambda m: st.tuples(st.just(m[0]), st.sampled_from(m[1]))),
                min_size=1, max_size=3))
def test_hostile_configs(mutations: list[tuple[tuple[str, ...], Any]]) -> None:
    raw = copy.deepcopy(BASE)
    for path, value in mutations:
        _set(raw, path, value)
    with _workspace() as root:
        config = root / "config.yaml"
        config.write_text(yaml.safe_dump(raw))
        run_and_check(["audit", config, "--out", root / "out"], root, root / "out")


clean_rows = st.tuples(st.sampled_from(["1", "2.5", "-3", "0", " 4 ", "7", '"5"']), st.sampled_from(["u", "v", "w"]),
                       st.sampled_from(["0", "1"]))
hostile_rows = st.tuples(st.sampled_from(["", "nan", "inf", "1e400", "x", "1"]),
                         st.sampled_from(["", "a;b", "U ", "u"]), st.sampled_from(["2", "", "1"]))


@examples(12)
@given(st.lists(clean_rows, min_size=0, max_size=80), st.lists(hostile_rows, max_size=2),
       st.sampled_from(["a,c,y"] * 4 + ["a;c;y", "a,c", "", "a,c,y,y"]))
def test_hostile_csv_data(rows: list[tuple[str, str, str]], hostile: list[tuple[str, str, str]], header: str) -> None:
    with _workspace() as root:
        data = root / "data.csv"
        data.write_text("\n".join([header, *(",".join(row) for row in hostile + rows)]) + "\n")
        raw = copy.deepcopy(BASE)
        raw["data"] = {"dataset": "csv", "path": "data.csv", "numeric": ["a"], "categorical": ["c", "y"],
                       "label": "y", "protected": ["c"]}
        config = root / "config.yaml"
        config.write_text(yaml.safe_dump(raw))
        run_and_check(["audit", config, "--out", root / "out"], root, root / "out")


@pytest.fixture(scope="module")
def finished_audit(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One finished tiny audit (results, report, journal) to be copied and tampered with."""
    folder = tmp_path_factory.mktemp("journaled")
    config = folder / "config.yaml"
    raw = copy.deepcopy(BASE)
    raw["audit"]["trials"] = 40
    config.write_text(yaml.safe_dump(raw))
    assert main(["audit", str(config), "--out", str(folder / "out")]) in (0, 1)
    return folder


hostile_values = st.sampled_from([-1, 0, 1, 10**30, 10**400, 1.5, 1e308, -1e-300, None, "x", [], {}, [0.5], True])


@examples(40)
@given(st.lists(st.tuples(st.sampled_from([0, 1]), st.sampled_from(
    ["trials", "successes", "bound", "ball", "kind", "thresholds", "false_positives", "false_negatives",
     "negatives", "positives", "delta", "epsilon_claimed", "id"]), hostile_values | st.just(KeyError)),
    min_size=0, max_size=2), st.sampled_from(["keep"] * 3 + ["empty", "drop", "one"]),
       st.none() | st.none() | st.none() | hostile_values)
def test_hostile_results_files(finished_audit: Path, edits: list[tuple[int, str, Any]], comparisons: str,
                               alpha: Any) -> None:
    """A real audit's results file edited and its checksum recomputed (as another tool could write it)."""
    data = json.loads((finished_audit / "out" / "results.json").read_text())
    data.pop("checksum", None)
    for index, key, value in edits:
        if value is KeyError:
            data["comparisons"][index].pop(key, None)
        else:
            data["comparisons"][index][key] = value
    if comparisons == "empty":
        data["comparisons"] = []
    elif comparisons == "drop":
        del data["comparisons"]
    elif comparisons == "one":
        data["comparisons"] = data["comparisons"][:1]
    if alpha is not None:
        data["verdict"]["alpha"] = alpha
    with _workspace() as root:
        try:
            results = write_results(root / "in" / "results.json", data)
        except (ValueError, TypeError):  # not JSON-serialisable as results (an integer of 400 digits is)
            return
        out = root / "out"
        run_and_check(["gate", results, "--junit", out / "junit.xml"], root, out, judged=results)
        run_and_check(["report", results, "-o", out / "report.html"], root, out)


def _tamper(lines: list[str], how: str) -> list[str]:
    if not lines:
        return lines
    rows = [json.loads(line) for line in lines]
    first = rows[0]
    if how == "swap scores" and len(first["scores"]) > 1:
        names = list(first["scores"])
        first["scores"][names[0]], first["scores"][names[1]] = first["scores"][names[1]], first["scores"][names[0]]
    elif how == "flip labels":
        first["labels"] = [1 - int(v) for v in first["labels"]]
    elif how == "huge index":
        first["indices"][0] = 10**30
    elif how == "scores not numbers":
        name = next(iter(first["scores"]))
        first["scores"][name] = ["x"] * len(first["scores"][name])
    elif how == "drop scores":
        first["scores"] = {}
    out = [json.dumps(row) for row in rows]
    if how == "torn last line":
        out[-1] = out[-1][: len(out[-1]) // 2]
    elif how == "garbage line":
        out.insert(0, "\x00\xff not json")
    return out


@examples(8)
@given(st.sampled_from(["swap scores", "flip labels", "huge index", "scores not numbers", "drop scores",
                        "torn last line", "garbage line", "none"]))
def test_hostile_journals(finished_audit: Path, how: str) -> None:
    with _workspace() as root:
        shutil.copytree(finished_audit, root / "run")
        journal = root / "run" / "out" / "journal.jsonl"
        lines = journal.read_text(encoding="utf-8", errors="replace").splitlines()
        journal.write_text("\n".join(_tamper(lines, how)) + "\n", encoding="utf-8", errors="replace")
        run_and_check(["audit", root / "run" / "config.yaml", "--out", root / "run" / "out"], root,
                      root / "run" / "out")
