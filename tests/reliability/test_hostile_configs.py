"""Configs are untrusted input (docs/files.md): random and mutated YAML reaches the loader and the command
line, and the only outcomes are a valid :class:`Config` (success) or a one-line :class:`BadInputError`
(exit code 2) — never a traceback, a hang or an output file.

Property-based with hypothesis; the example counts keep the module under ten seconds. A property test has no
error probability of its own: a failure is a counterexample, which hypothesis shrinks and prints.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import subprocess
import sys
import typing
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fdp_audit.cli import main
from fdp_audit.config import Config, config_from_dict, load_config
from fdp_audit.errors import BadInputError

SETTINGS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def schema_fields(cls: type = Config, prefix: tuple[str, ...] = ()) -> dict[tuple[str, ...], Any]:
    """Every field of the schema, nested sections included, as a path → annotation map."""
    out: dict[tuple[str, ...], Any] = {}
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        tp = hints[f.name]
        section = next((a for a in (tp, *typing.get_args(tp)) if dataclasses.is_dataclass(a)), None)
        out[(*prefix, f.name)] = tp
        if section is not None:
            out.update(schema_fields(section, (*prefix, f.name)))
    return out


FIELDS = schema_fields()
SECTIONS = [()] + [path for path, tp in FIELDS.items()
                   if any(dataclasses.is_dataclass(a) for a in (tp, *typing.get_args(tp)))]
LEAVES = [path for path in FIELDS if path not in SECTIONS]
FLOAT_LEAVES = [path for path in LEAVES if float in (FIELDS[path], *typing.get_args(FIELDS[path]))]

scalars = (st.none() | st.booleans() | st.integers(min_value=-(10**30), max_value=10**30)
           | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=30))
junk = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                    | st.dictionaries(st.text(max_size=10), inner, max_size=4), max_leaves=25)


@pytest.fixture(scope="module")
def valid(small_config) -> dict[str, Any]:
    """A valid config for a tiny CPU run, with the optional sections present so that they are mutated too."""
    raw = small_config("fdp_sgd", rows=60, mechanism={"steps": 2})
    raw["profile"] = {"columns": ["public-0"], "rows": 20, "samples": 4}
    raw["corrdp"] = {"dataset": "synthetic", "steps": 2, "seeds": 1}
    assert config_from_dict(raw)
    return raw


def set_path(raw: dict[str, Any], path: tuple[str, ...], value: Any) -> dict[str, Any]:
    """A copy of ``raw`` with ``value`` at ``path`` (sections created on the way)."""
    raw = copy.deepcopy(raw)
    node = raw
    for key in path[:-1]:
        if not isinstance(node.get(key), dict):
            node[key] = {}
        node = node[key]
    node[path[-1]] = value
    return raw


def write(folder: Path, text: str | bytes) -> Path:
    path = folder / "config.yaml"
    path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
    return path


def load_or_refuse(path: Path, assert_refused) -> Config | None:
    """The loader's contract: a Config that round-trips through its own validation, or a one-line refusal."""
    try:
        config = load_config(path)
    except BadInputError as err:
        assert_refused(err)
        return None
    assert isinstance(config, Config)
    assert config_from_dict(config.to_dict()) == config
    return config


# -- what the loader does with anything --------------------------------------------------------------------------

@SETTINGS
@given(path=st.sampled_from(LEAVES + SECTIONS[1:]), value=junk)
def test_any_value_in_any_field(tmp_path: Path, valid, assert_refused, path: tuple[str, ...], value: Any) -> None:
    load_or_refuse(write(tmp_path, yaml.safe_dump(set_path(valid, path, value))), assert_refused)


@SETTINGS
@given(section=st.sampled_from(SECTIONS), key=st.text(min_size=1, max_size=40), value=junk)
def test_unknown_key_anywhere_is_refused(tmp_path: Path, valid, assert_refused, section: tuple[str, ...], key: str,
                                         value: Any) -> None:
    known = {path[-1] for path in FIELDS if path[:-1] == section}
    config = load_or_refuse(write(tmp_path, yaml.safe_dump(set_path(valid, (*section, key), value))), assert_refused)
    if key not in known:
        assert config is None


@SETTINGS
@given(path=st.sampled_from(FLOAT_LEAVES), value=st.sampled_from([math.nan, math.inf, -math.inf]))
def test_non_finite_numbers_are_refused_naming_the_field(tmp_path: Path, valid, assert_refused,
                                                          path: tuple[str, ...], value: float) -> None:
    with pytest.raises(BadInputError) as caught:
        load_config(write(tmp_path, yaml.safe_dump(set_path(valid, path, value))))
    assert_refused(caught.value)
    assert ".".join(path) in str(caught.value)


@SETTINGS
@given(text=st.text(max_size=300))
def test_random_text(tmp_path: Path, assert_refused, text: str) -> None:
    load_or_refuse(write(tmp_path, text), assert_refused)


@SETTINGS
@given(data=st.data())
def test_mutated_bytes_of_a_valid_config(tmp_path: Path, valid, assert_refused, data: st.DataObject) -> None:
    """Truncation, byte flips and insertions of a valid file: still a Config, or a clean refusal."""
    good = bytearray(yaml.safe_dump(valid).encode())
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, len(good)))
        action = data.draw(st.sampled_from(["truncate", "flip", "insert", "delete"]))
        if action == "truncate":
            del good[at:]
        elif action == "insert":
            good[at:at] = data.draw(st.binary(min_size=1, max_size=8))
        elif at < len(good):
            if action == "flip":
                good[at] ^= data.draw(st.integers(1, 255))
            else:
                del good[at]
    load_or_refuse(write(tmp_path, bytes(good)), assert_refused)


# -- the command line: exit code 2, one line, no output -----------------------------------------------------------

COMMANDS = {
    "train": lambda config, out: ["train", config, "--out", out / "model.pt"],
    "audit": lambda config, out: ["audit", config, "--out", out],
    "profile": lambda config, out: ["profile", config, "--out", out],
    "corrdp": lambda config, out: ["corrdp", "tv", config, "--out", out],
}


# (path, value) pairs that no schema accepts: an unknown key, a mapping where a value belongs, a non-finite number
invalid_changes = (
    st.tuples(st.sampled_from(SECTIONS).map(lambda section: (*section, "not_a_field")), junk)
    | st.tuples(st.sampled_from(LEAVES), junk.map(lambda value: {"x": value}))
    | st.tuples(st.sampled_from(FLOAT_LEAVES), st.sampled_from([math.nan, math.inf, -math.inf]))
)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(change=invalid_changes, command=st.sampled_from(sorted(COMMANDS)))
def test_cli_refuses_invalid_configs_cleanly(tmp_path: Path, capsys: pytest.CaptureFixture[str], valid,
                                             assert_one_line, files_under, change: tuple[tuple[str, ...], Any],
                                             command: str) -> None:
    config = write(tmp_path, yaml.safe_dump(set_path(valid, *change)))
    out = tmp_path / "out"
    capsys.readouterr()
    code = main([str(a) for a in COMMANDS[command](config, out)])
    captured = capsys.readouterr()
    assert code == 2, captured.err
    assert_one_line(captured.err)
    assert captured.err.startswith("fdp-audit: error: ") and captured.out == ""
    assert files_under(out) == []


# -- known hostile files (regressions of bugs these tests found) -------------------------------------------------

def billion_laughs() -> str:
    """Nine levels of ten aliases: 10^9 list elements held by reference in a 300-byte file."""
    anchors, previous = ["&a [x, x, x, x, x, x, x, x, x, x]"], "a"
    for name in "bcdefghi":
        anchors.append(f"&{name} [" + ", ".join([f"*{previous}"] * 10) + "]")
        previous = name
    return "name: [" + ", ".join(anchors) + "]\n"


HOSTILE = {
    "billion laughs in an error message": (billion_laughs(), "name: must be a string"),
    "nesting deeper than the recursion limit": ("name: " + "[" * 100_000 + "]" * 100_000 + "\n", "nested too deeply"),
    "an integer of 5000 digits": ("seed: " + "9" * 5000 + "\n", "cannot be read"),
    "an impossible date": ("name: 2001-13-45\n", "cannot be read"),
    "a megabyte string value": ("name: [" + "x" * 900_000 + "]\n", "name: must be a string"),
    "a megabyte key": ("x" * 1000 + ": 1\n", "unknown key"),
    "a python object tag": ("name: !!python/object/apply:os.system [echo hi]\n", "malformed YAML"),
    "a data path too long for the system": (None, "data.path: cannot look up data file"),
}


@pytest.mark.parametrize(("text", "expected"), HOSTILE.values(), ids=HOSTILE.keys())
def test_hostile_config_files(tmp_path: Path, cli, one_line_error, files_under, valid, text: str | None,
                              expected: str) -> None:
    if text is None:
        text = yaml.safe_dump(set_path(valid, ("data",), {"dataset": "csv", "path": "d" * 5000, "numeric": ["a"]}))
    config = write(tmp_path, text)
    result = cli("train", config, "--out", tmp_path / "out" / "model.pt")
    assert result.code == 2
    line = one_line_error(result.err)
    assert expected in line and len(line) < 1000
    assert files_under(tmp_path / "out") == []


@pytest.mark.slow
@pytest.mark.parametrize("case", ["billion laughs", "csv with infinity", "output folder is a file"])
def test_real_processes_exit_2_with_one_line(tmp_path: Path, valid, files_under, case: str) -> None:
    """The installed entry point in a fresh interpreter (no in-process exception handling to lean on)."""
    out = tmp_path / "out"
    if case == "billion laughs":
        config = write(tmp_path, billion_laughs())
    elif case == "csv with infinity":
        (tmp_path / "d.csv").write_text("a,y\n1,p\ninf,q\n")
        config = write(tmp_path, yaml.safe_dump(set_path(valid, ("data",), {
            "dataset": "csv", "path": str(tmp_path / "d.csv"), "numeric": ["a"], "categorical": ["y"],
            "label": "y", "protected": ["a"]})))
    else:
        config, out = write(tmp_path, yaml.safe_dump(valid)), tmp_path / "config.yaml" / "out"
    done = subprocess.run([sys.executable, "-m", "fdp_audit", "audit", str(config), "--out", str(out)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and done.stdout == ""
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("fdp-audit: error: "), done.stderr[-2000:]
    assert files_under(tmp_path) in (["config.yaml"], ["config.yaml", "d.csv"])
