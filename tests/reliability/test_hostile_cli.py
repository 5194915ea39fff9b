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
counts and the slow mark; the module takes about three minutes on two busy cores.
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

from fdp_audit.auditing.gate import judge
from fdp_audit.auditing.results import write_results
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
    # 16 trials: the fewest at which a perfect attack could exceed the distinguishing game's limit (fewer are refused)
    "audit": {"trials": 16, "alpha": 0.05, "games": ["distinguishing"], "attacks": ["prior", "iterates"]},
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


# -- the user's code in a config --------------------------------------------------------------------------------

USER_MODEL = "from torch import nn\n\ndef make(n_inputs, n_classes):\n    return nn.Linear(n_inputs, n_classes)\n"
USER_STEP = ("import copy, os, sys, threading, time\nimport torch\nimport torch.nn.functional as F\n"
             "from torch import nn\n\n"
             "def step(module, dataset):\n"
             "    optimizer = torch.optim.SGD(module.parameters(), lr=0.1)\n"
             "    x, y = dataset[:]\n"
             "    loss = F.cross_entropy(module(x), y)\n"
             "    optimizer.zero_grad()\n    loss.backward()\n    optimizer.step()\n\n"
             "def train(module, dataset, seed):\n")
# what the training function does (the body of train), honest or not; none of it writes a file or ends the process
USER_BODIES = {
    "trains": "    step(module, dataset)\n    return module",
    "raises": "    raise ValueError('no GPU here')",
    "raises BaseException": "    raise BaseException('not an Exception')",
    "sys.exit(0)": "    sys.exit(0)",
    "returns None": "    step(module, dataset)",
    "returns a fresh module": "    fresh = copy.deepcopy(module)\n    step(module, dataset)\n    return fresh",
    "returns it wrapped": "    step(module, dataset)\n    return nn.Sequential(module)",
    "returns a dict": "    step(module, dataset)\n    return dict(module.named_parameters())",
    "edits its inputs": "    dataset.tensors[0].mul_(0.0)\n    dataset.tensors[1].zero_()\n    step(module, dataset)\n"
                        "    return module",
    "changes folder": "    os.chdir('..')\n    step(module, dataset)\n    return module",
    "no optimizer step": "    return module",
    "NaN weights": "    step(module, dataset)\n    with torch.no_grad():\n        module.weight.fill_(float('nan'))\n"
                   "    return module",
    "sleeps": "    time.sleep(3)\n    step(module, dataset)\n    return module",
    "spins": "    while True:\n        pass",
    "daemon thread": "    threading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n"
                     "    step(module, dataset)\n    return module",
    "edits the global seed": "    torch.manual_seed(0)\n    step(module, dataset)\n    return module",
}


@examples(10)
@example("sleeps", ["attribute"], 0.5)
@example("spins", ["distinguishing"], None)
@example("edits its inputs", ["attribute"], None)
@example("trains", ["attribute"], None)
@given(st.sampled_from(sorted(USER_BODIES)), st.sampled_from([["attribute"], ["distinguishing"]]),
       st.sampled_from([None, None, 2.0, 1e-9, -1, "x", 1e300]))
def test_hostile_user_code(body: str, games: list[str], timeout: Any) -> None:
    """Training functions (``mechanism.training``) that fail, lie or misbehave, under hostile time limits."""
    if body in ("spins", "sleeps") and not (isinstance(timeout, float) and 0 < timeout < 10):
        timeout = 0.5  # a loop that never ends needs a limit that ends it; trials of 3 s, one that keeps CI short
    raw = copy.deepcopy(BASE)
    raw["model"] = {"kind": "module", "factory": "model.py:make"}
    raw["mechanism"] |= {"name": "dp_sgd", "training": "train.py:train"}
    raw["audit"] |= {"games": games, "attacks": ["prior", "likelihood" if games == ["attribute"] else "iterates"],
                     "trial_timeout": timeout}
    with _workspace() as root:
        (root / "model.py").write_text(USER_MODEL)
        (root / "train.py").write_text(USER_STEP + USER_BODIES[body] + "\n")
        config = root / "config.yaml"
        config.write_text(yaml.safe_dump(raw))
        event(f"user code: {body}")
        code = run_and_check(["audit", config, "--out", root / "out"], root, root / "out")
        assert Path.cwd() == root / "cwd"
    if body in ("trains", "edits its inputs", "changes folder") and timeout is None and games == ["attribute"]:
        assert code == 0, f"{body}: an audit of a function that returns its trained module must run"


# -- weights trained elsewhere ----------------------------------------------------------------------------------


def _weights(how: str, zip_bomb: Any) -> tuple[str, bytes]:
    """A state_dict of ``nn.Linear(7, 2)`` (the synthetic table's 7 encoded columns, 2 classes), written as a
    hostile file would be: (suffix, bytes)."""
    import pickle
    import struct

    import torch
    from safetensors.torch import save as safetensors_bytes

    good = {"weight": torch.full((2, 7), 0.1), "bias": torch.zeros(2)}
    tensors = {
        "prefixed": {f"_module.{k}": v for k, v in good.items()},
        "wrong shape": {**good, "weight": torch.zeros(7, 2)},
        "missing": {"weight": good["weight"]},
        "extra": {**good, "extra.weight": torch.zeros(3)},
        "NaN": {**good, "weight": torch.full((2, 7), float("nan"))},
        "integers": {**good, "weight": torch.zeros(2, 7, dtype=torch.int64)},
        "half": {k: v.half() for k, v in good.items()},
        "stride 0": {**good, "weight": torch.zeros(1, 1).expand(2, 7)},
        "huge stride 0": {**good, "extra": torch.zeros(1).expand(1 << 40)},
    }.get(how, good)
    if how.startswith("safetensors"):
        raw = safetensors_bytes({k: v.contiguous() for k, v in good.items()})
        length = struct.unpack("<Q", raw[:8])[0]
        if how == "safetensors":
            return ".safetensors", raw
        if how == "safetensors lying header":
            header = raw[8:8 + length].replace(b"[2,7]", b"[2000,7000]")
            return ".safetensors", struct.pack("<Q", len(header)) + header + raw[8 + length:]
        if how == "safetensors huge header length":
            return ".safetensors", struct.pack("<Q", 1 << 62) + raw[8:]
        return ".safetensors", raw[: len(raw) // 2]
    buffer = io.BytesIO()
    if how == "legacy format":
        torch.save(tensors, buffer, _use_new_zipfile_serialization=False)
    elif how == "pickle":
        return ".pt", pickle.dumps(tensors)
    elif how == "zip bomb":
        return ".pt", zip_bomb(good, (1 << 30) + (16 << 20))
    else:
        torch.save({"nested": tensors} if how == "nested" else tensors, buffer)
    raw = buffer.getvalue()
    if how == "truncated":
        raw = raw[: len(raw) * 2 // 3]
    return (".bin" if how == "bin" else ".pt"), raw


WEIGHTS = ["good", "prefixed", "wrong shape", "missing", "extra", "NaN", "integers", "half", "stride 0",
           "huge stride 0", "safetensors", "safetensors lying header", "safetensors huge header length",
           "safetensors truncated", "legacy format", "pickle", "zip bomb", "nested", "truncated", "bin"]


@examples(12)
@example("zip bomb")
@example("huge stride 0")
@given(st.sampled_from(WEIGHTS))
def test_hostile_external_weights(zip_bomb, how: str) -> None:
    """``audit WEIGHTS --config CONFIG`` on state_dicts that are malformed, lie about their sizes or inflate."""
    raw = copy.deepcopy(BASE)
    raw["model"] = {"kind": "module", "factory": "model.py:make"}
    with _workspace() as root:
        (root / "model.py").write_text(USER_MODEL)
        config = root / "config.yaml"
        config.write_text(yaml.safe_dump(raw))
        suffix, content = _weights(how, zip_bomb)
        weights = root / f"weights{suffix}"
        weights.write_bytes(content)
        event(f"weights: {how}")
        run_and_check(["audit", weights, "--config", config, "--out", root / "out"], root, root / "out")


# -- image files ------------------------------------------------------------------------------------------------


def _idx(array: Any, type_code: int = 0x08) -> bytes:
    import struct

    return bytes([0, 0, type_code, array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape) + array.tobytes()


IDX_EDITS = {
    "none": lambda raw: raw,
    "magic": lambda raw: b"\x01" + raw[1:],
    "type code": lambda raw: raw[:2] + b"\x42" + raw[3:],
    "float pixels": lambda raw: raw[:2] + b"\x0d" + raw[3:],
    "ndim 0": lambda raw: raw[:3] + b"\x00" + raw[4:],
    "ndim 255": lambda raw: raw[:3] + b"\xff" + raw[4:],
    "ndim 4": lambda raw: raw[:3] + b"\x04" + raw[4:],
    "empty count": lambda raw: raw[:4] + bytes(4) + raw[8:],
    "huge sizes": lambda raw: raw[:4] + bytes(4) + b"\xff" * 8 + raw[16:],
    "truncated body": lambda raw: raw[:-5],
    "truncated header": lambda raw: raw[:7],
    "extra bytes": lambda raw: raw + b"\x00" * 3,
}


@examples(12)
@example("ndim 255", "none")
@example("huge sizes", "none")
@given(st.sampled_from(sorted(IDX_EDITS)), st.sampled_from(["none", "none", "magic", "ndim 4", "labels ≥ 10",
                                                           "fewer labels", "gzip garbage"]))
def test_hostile_image_files(images: str, labels: str) -> None:
    """Fashion-MNIST IDX files whose headers lie (dimensions, sizes, types) or whose labels do not match."""
    import gzip

    import numpy as np

    rng = np.random.default_rng(0)
    with _workspace() as root:
        folder = root / "fashion"
        folder.mkdir()
        for split, n in (("train", 40), ("t10k", 8)):
            pixels = _idx(rng.integers(0, 256, (n, 8, 8), dtype=np.uint8))
            (folder / f"{split}-images-idx3-ubyte").write_bytes(IDX_EDITS[images](pixels))
            values = (np.arange(n - (labels == "fewer labels")) % (12 if labels == "labels ≥ 10" else 10))
            label_bytes = _idx(values.astype(np.uint8))
            label_bytes = IDX_EDITS.get(labels, lambda raw: raw)(label_bytes)
            target = folder / f"{split}-labels-idx1-ubyte"
            if labels == "gzip garbage":
                target = target.with_name(target.name + ".gz")
                label_bytes = gzip.compress(label_bytes)[:20]
            target.write_bytes(label_bytes)
        raw = copy.deepcopy(BASE)
        raw["data"] = {"dataset": "fashion_mnist", "path": "fashion", "protected": [], "public_map": "downsample",
                       "downsample_factor": 2}
        raw["model"] = {"kind": "cnn", "hidden": [2, 2]}
        raw["mechanism"] |= {"name": "dp_sgd", "public_loss": "public_image"}
        raw["audit"] |= {"games": ["image_record_canary"], "attacks": ["prior", "likelihood"], "trials": 12}
        config = root / "config.yaml"
        config.write_text(yaml.safe_dump(raw))
        event(f"images: {images}, labels: {labels}")
        run_and_check(["audit", config, "--out", root / "out"], root, root / "out")


# -- one-run manifests and releases ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def caught_one_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A training without clipping, its 400 gradient canaries' manifest and release: caught (VIOLATION) as written."""
    from tests.conftest import small_config

    folder = tmp_path_factory.mktemp("one-run")
    config = folder / "config.yaml"
    config.write_text(yaml.safe_dump(small_config("dp_sgd_no_clip", mechanism={
        "noise_multiplier": 2.0, "sample_rate": 0.2, "steps": 30})))
    assert main(["train", str(config), "--canaries", "400", "--out", str(folder / "model.pt")]) == 0
    return folder


MANIFEST_KEYS = ["format", "version", "kind", "game", "k", "count", "seed", "mechanism", "secrets", "null",
                 "magnitude", "release", "release_sha256", "steps", "checkpoint_sha256"]
MANIFEST_VALUES = st.sampled_from([-1, 0, 1, 2, 3, 401, 10**30, 1.5, 1e308, float("nan"), None, "x", "",
                                   "../model.pt", "/etc/passwd", [], [0] * 400, [2] * 400, {}, True])


def _release_edit(release: Path, how: str) -> None:
    data = release.read_bytes()
    if how == "truncated":
        release.write_bytes(data[: len(data) // 2])
    elif how == "garbage":
        release.write_bytes(b"\x00\xff not a release" * 64)
    elif how == "empty":
        release.write_bytes(b"")
    elif how == "removed":
        release.unlink()


@examples(10)
@example([("secrets", [0] * 400)], "none")
@example([("count", 401)], "none")
@example([], "truncated")
@given(st.lists(st.tuples(st.sampled_from(MANIFEST_KEYS), MANIFEST_VALUES | st.just(KeyError)), max_size=2),
       st.sampled_from(["none", "none", "none", "truncated", "garbage", "empty", "removed"]))
def test_hostile_one_run_manifests(caught_one_run: Path, edits: list[tuple[str, Any]], release: str) -> None:
    """A caught one-run training's manifest edited (keys removed or given hostile values) and its release damaged:
    besides the four properties, the training stays caught or the audit is refused — an edit never makes a
    training without clipping PASS."""
    with _workspace() as root:
        folder = root / "trained"
        shutil.copytree(caught_one_run, folder)
        manifest = json.loads((folder / "model.canaries.json").read_text())
        for key, value in edits:
            if value is KeyError:
                manifest.pop(key, None)
            else:
                manifest[key] = value
        (folder / "model.canaries.json").write_text(json.dumps(manifest))
        _release_edit(folder / "model.canary-release.pt", release)
        event(f"release {release}, manifest edits {[key for key, _ in edits]}")
        code = run_and_check(["audit", folder / "model.pt", "--canaries", folder / "model.canaries.json",
                              "--out", root / "out"], root, root / "out")
    assert code in (1, 2), f"the caught training passed after {edits}, release {release}"
