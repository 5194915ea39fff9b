"""Config schema and validation (docs/files.md): every bad config is one line naming the dotted field,
and the command line turns it into exit code 2 without a traceback."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from fdp_audit.cli import main
from fdp_audit.config import Config, MechanismConfig, config_from_dict, load_config
from fdp_audit.errors import BadInputError

BUILT_IN_COMMANDS = ("demo", "train", "account", "calibrate", "audit", "gate", "profile", "report", "corrdp")

# (YAML text or raw bytes, text the one-line message must contain: the dotted field, or for problems
# with the file itself, what is wrong with it)
BAD_CONFIGS = {
    "unknown top-level key": ("bogus: 1\n", "bogus: unknown key"),
    "unknown nested key": ("mechanism:\n  bogus: 1\n", "mechanism.bogus: unknown key"),
    "unknown doubly nested key": ("mechanism:\n  optimizer:\n    beta: 1\n", "mechanism.optimizer.beta"),
    "wrong type": ("mechanism:\n  steps: ten\n", "mechanism.steps: must be an integer"),
    "bool for a number": ("mechanism:\n  clip_norm: true\n", "mechanism.clip_norm: must be a number"),
    "section not a mapping": ("mechanism: 5\n", "mechanism: must be a mapping"),
    "z = 0": ("mechanism:\n  noise_multiplier: 0\n", "mechanism.noise_multiplier: must be > 0"),
    "z < 0": ("mechanism:\n  noise_multiplier: -1.5\n", "mechanism.noise_multiplier: must be > 0"),
    "z not finite": ("mechanism:\n  noise_multiplier: .nan\n", "mechanism.noise_multiplier"),
    "sample rate > 1": ("mechanism:\n  sample_rate: 1.5\n", "mechanism.sample_rate: must be <= 1"),
    "sample rate 0": ("mechanism:\n  sample_rate: 0\n", "mechanism.sample_rate: must be > 0"),
    "delta = 0": ("mechanism:\n  delta: 0\n", "mechanism.delta: must be > 0"),
    "delta = 1": ("mechanism:\n  delta: 1\n", "mechanism.delta: must be < 1"),
    "negative steps": ("mechanism:\n  steps: -5\n", "mechanism.steps: must be >= 1"),
    "nested range": ("mechanism:\n  optimizer:\n    lr: -0.1\n", "mechanism.optimizer.lr: must be >= 0"),
    "faulty mechanism without faulty": ("mechanism:\n  name: fdp_sgd_shared_batch\n", "mechanism.faulty"),
    "faulty flag on a correct mechanism": ("mechanism:\n  faulty: true\n", "mechanism.faulty"),
    "unknown mechanism": ("mechanism:\n  name: magic\n", "mechanism.name: must be one of"),
    "public/protected overlap": ("data:\n  public: [age]\n  protected: [age]\n", "data.public"),
    "duplicate protected": ("data:\n  protected: [sex, sex]\n", "data.protected: duplicate"),
    "prior not summing to 1": ("data:\n  synthetic_prior: [0.5, 0.6]\n", "data.synthetic_prior"),
    "negative prior": ("audit:\n  target_prior: [1.2, -0.2]\n", "audit.target_prior"),
    "one-point prior": ("audit:\n  target_prior: [1.0]\n", "audit.target_prior"),
    "list element type": ("audit:\n  rho_grid: [0.5, big]\n", "audit.rho_grid[1]: must be a number"),
    "zero trials": ("audit:\n  trials: 0\n", "audit.trials: must be >= 1"),
    "empty rho grid": ("audit:\n  rho_grid: []\n", "audit.rho_grid: must list distinct finite radii"),
    "negative radius": ("audit:\n  rho_grid: [-1]\n", "audit.rho_grid"),
    "duplicate radii": ("audit:\n  rho_grid: [0.5, 0.5]\n", "audit.rho_grid"),
    "no noise and no target": ("mechanism:\n  noise_multiplier: null\n", "mechanism.noise_multiplier"),
    "negative seed": ("seed: -1\n", "seed: must be >= 0"),
    "non-mapping top level": ("- 1\n- 2\n", "config: must be a mapping"),
    "malformed YAML": ("mechanism:\n  steps: [1, 2\n", "malformed YAML at line"),
    "not UTF-8": (b"name: \xff\xfe\n", "not UTF-8"),
    # silent surprises: PyYAML keeps the last of two equal keys; target_epsilon overrode an explicit z; a game
    # or attack listed twice was judged twice and counted twice in the Bonferroni correction
    "duplicate key": ("seed: 1\nname: a\nseed: 2\n", "duplicate key 'seed' at line 3"),
    "duplicate nested key": ("mechanism:\n  steps: 5\n  steps: 6\n", "duplicate key 'steps' at line 3"),
    "target ε and z": ("mechanism:\n  noise_multiplier: 2.0\n  target_epsilon: 1.0\n", "mechanism.target_epsilon: "
                      "give noise_multiplier or target_epsilon, not both"),
    "duplicate game": ("audit:\n  games: [attribute, attribute]\n", "audit.games: lists ['attribute'] more"),
    "duplicate attack": ("audit:\n  attacks: [prior, iterates, prior]\n", "audit.attacks: lists ['prior'] more"),
    # values that crashed (exit 3) or exhausted memory instead of being refused
    "negative hidden width": ("model:\n  kind: mlp\n  hidden: [-3]\n", "model.hidden: must be >= 1, got -3"),
    "zero hidden width": ("model:\n  kind: mlp\n  hidden: [0]\n", "model.hidden: must be >= 1, got 0"),
    "a billion synthetic rows": ("data:\n  synthetic_rows: 1000000000\n", "data.synthetic_rows: must be <= 1000000"),
    "a blur wider than any image": ("data:\n  blur_sigma: 1.0e7\n", "data.blur_sigma: must be <= 256"),
    "too many generated cells": ("data:\n  synthetic_rows: 1000000\n  synthetic_public_features: 5000\n",
                                 "data.synthetic_rows: 1000000 rows × 5001 columns exceed"),
    "no workers": ("audit:\n  executor: dask\n  workers: 0\n", "audit.workers: must be >= 1"),
    "corrdp cells": ("corrdp:\n  dataset: synthetic\n  synthetic_rows: 1000000\n  synthetic_features: 10000\n",
                     "corrdp.synthetic_rows"),
}


def write_config(tmp_path: Path, content: str | bytes) -> Path:
    path = tmp_path / "config.yaml"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


@pytest.mark.parametrize(("content", "expected"), BAD_CONFIGS.values(), ids=BAD_CONFIGS.keys())
def test_bad_config_names_the_field(tmp_path, content, expected):
    with pytest.raises(BadInputError) as info:
        load_config(write_config(tmp_path, content))
    assert expected in str(info.value)
    assert "\n" not in str(info.value)


def test_missing_config_file_names_the_path(tmp_path):
    with pytest.raises(BadInputError, match="config file not found: .*absent.yaml"):
        load_config(tmp_path / "absent.yaml")


def assert_one_line_exit_2(capsys, argv: list[str], expected: str) -> None:
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err
    assert err.endswith("\n") and err.count("\n") == 1, err
    assert expected in err, err


@pytest.mark.parametrize(("content", "expected"), BAD_CONFIGS.values(), ids=BAD_CONFIGS.keys())
def test_cli_train_bad_config_exit_2_one_line(tmp_path, capsys, content, expected):
    # `train` loads and validates its config before doing anything else (docs/files.md)
    assert_one_line_exit_2(capsys, ["train", str(write_config(tmp_path, content))], expected)


def test_cli_train_missing_config_exit_2_one_line(tmp_path, capsys):
    assert_one_line_exit_2(capsys, ["train", str(tmp_path / "absent.yaml")], "not found")


def test_cli_help_lists_every_built_in_command(capsys):
    with pytest.raises(SystemExit) as info:
        main(["--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    for command in BUILT_IN_COMMANDS:
        assert re.search(rf"^\s+{command}\b", out, re.MULTILINE), f"{command} missing from --help"


def test_cli_unknown_command_is_one_line_exit_2(capsys):
    assert_one_line_exit_2(capsys, ["frobnicate"], "invalid choice")


def test_defaults_are_valid_and_round_trip():
    config = config_from_dict({})
    assert config == Config()
    assert config_from_dict(config.to_dict()) == config


def test_good_config_file_with_exponent_floats(tmp_path):
    # YAML 1.1 (PyYAML) would read 1e-5 and 2.5e0 as strings; a config must be able to write them.
    text = (
        "name: demo\nseed: 3\n"
        "data:\n  dataset: synthetic\n  protected: [protected]\n  synthetic_prior: [0.25, 0.75]\n"
        "mechanism:\n  name: fdp_sgd\n  noise_multiplier: 2.5e0\n  delta: 1e-5\n  sample_rate: 0.01\n"
        "  optimizer: {name: adam, lr: 1E-3}\n"
        "audit:\n  rho_grid: [0.5, 1]\n"
    )
    config = load_config(write_config(tmp_path, text))
    assert config.mechanism.delta == 1e-5 and config.mechanism.noise_multiplier == 2.5
    assert config.mechanism.optimizer.lr == 1e-3
    assert config.data.protected == ("protected",) and config.data.synthetic_prior == (0.25, 0.75)
    assert config.audit.rho_grid == (0.5, 1.0) and isinstance(config.audit.rho_grid[1], float)


def test_optional_sections_and_faulty_mechanism_when_declared():
    config = config_from_dict({"mechanism": {"name": "dp_sgd_half_noise", "faulty": True},
                               "profile": {"epsilons": [1, 2]}})
    assert config.mechanism == MechanismConfig(name="dp_sgd_half_noise", faulty=True)
    assert config.profile.epsilons == (1.0, 2.0) and config.corrdp is None


def test_oversized_config_is_rejected(tmp_path):
    path = write_config(tmp_path, "name: x\n" + "#" * 1_000_001 + "\n")
    with pytest.raises(BadInputError, match="larger than"):
        load_config(path)


def test_merge_keys_may_override_and_target_epsilon_alone_leaves_z_to_calibration(tmp_path):
    """A merged mapping's key overridden by an explicit one is intended YAML, not a duplicate; a target ε given
    alone leaves the noise multiplier unset (calibrated), and the config round-trips through its dict."""
    text = "mechanism:\n  <<: {name: dp_sgd, steps: 5}\n  steps: 7\n  target_epsilon: 2.0\n"
    config = load_config(write_config(tmp_path, text))
    assert config.mechanism.name == "dp_sgd" and config.mechanism.steps == 7
    assert config.mechanism.noise_multiplier is None and config.mechanism.target_epsilon == 2.0
    assert config_from_dict(config.to_dict()) == config


SHIPPED = sorted((Path(__file__).parents[1] / "configs").rglob("*.yaml"))


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
def test_a_config_without_overrides_derives_itself(path):
    config = load_config(path)
    assert config.with_overrides({}) == config


def test_overrides_are_parsed_and_validated_as_the_same_yaml_would_be(tmp_path):
    raw = {"mechanism": {"steps": 7, "noise_multiplier": 2}, "model": {"kind": "mlp", "hidden": [4, 3]}}
    path = tmp_path / "c.yaml"
    path.write_text("mechanism: {steps: 7, noise_multiplier: 2}\nmodel: {kind: mlp, hidden: [4, 3]}\n")
    derived = Config().with_overrides({"mechanism.steps": 7, "mechanism.noise_multiplier": 2, "model.kind": "mlp",
                                       "model.hidden": (4, 3)})
    assert derived == load_config(path) == config_from_dict(raw)
    assert isinstance(derived.mechanism.noise_multiplier, float) and derived.model.hidden == (4, 3)


@pytest.mark.parametrize(("overrides", "field", "message"), [
    ({"mechanism.steps": 0}, "mechanism.steps", "must be >= 1"),
    ({"mechanism.name": "dp_sgd_no_clip"}, "mechanism.faulty", "known-faulty"),  # cross-field rules too
    ({"mechanism.stepz": 3}, "mechanism.stepz", "no such field"),
    ({"profile.rows": 3}, "profile.rows", "no such field"),  # the section is absent
    ({"audit.trials": "many"}, "audit.trials", "must be an integer"),
])
def test_an_override_that_a_config_file_could_not_hold_is_bad_input(overrides, field, message):
    with pytest.raises(BadInputError, match=message) as caught:
        Config().with_overrides(overrides)
    assert caught.value.field == field


def test_an_override_error_names_the_flag_it_came_from():
    with pytest.raises(BadInputError) as caught:
        Config().with_overrides({"seed": -1}, {"seed": "--seed"})
    assert str(caught.value) == "--seed: must be >= 0, got -1"


def test_a_target_epsilon_override_replaces_the_noise_multiplier_and_vice_versa():
    calibrated = Config().with_overrides({"mechanism.target_epsilon": 2.0})
    assert calibrated.mechanism.noise_multiplier is None and calibrated.mechanism.target_epsilon == 2.0
    fixed = calibrated.with_overrides({"mechanism.noise_multiplier": 0.8})
    assert fixed.mechanism.noise_multiplier == 0.8 and fixed.mechanism.target_epsilon is None
    with pytest.raises(BadInputError, match="not both"):  # both at once is the config file's conflict
        Config().with_overrides({"mechanism.target_epsilon": 2.0, "mechanism.noise_multiplier": 0.8})


def test_a_users_loop_plays_an_add_remove_game_by_default() -> None:
    """Without audit.games, a config naming the user's training or a third-party mechanism plays the membership
    (add/remove) game beside the default ones, so that a normalisation by the data set's size is seen; a stated
    list is kept, and the built-in mechanisms keep theirs."""
    from fdp_audit.config import USER_LOOP_GAMES

    base = {"data": {"dataset": "synthetic", "protected": ["protected"]}, "mechanism": {"name": "dp_sgd"}}
    loop = {**base, "model": {"factory": "model.py:make"}, "mechanism": {"name": "dp_sgd", "training": "t.py:train"}}
    third_party = {**base, "mechanism": {"name": "dp_sgd", "third_party": "t.py:train"}}
    assert USER_LOOP_GAMES == ("attribute", "distinguishing", "membership")
    for raw in (loop, third_party):
        assert config_from_dict(raw).audit.games == USER_LOOP_GAMES
        assert config_from_dict({**raw, "audit": {"games": ["simulator"]}}).audit.games == ("simulator",)
    assert config_from_dict(base).audit.games == ("attribute", "distinguishing")


@pytest.mark.parametrize("field", ["training", "third_party"])
def test_every_file_a_config_names_is_read_from_its_folder(tmp_path, monkeypatch, field: str) -> None:
    """model.factory, mechanism.training and mechanism.third_party alike, from any working folder."""
    folder = tmp_path / "configs"
    folder.mkdir()
    code = "../code/loop.py:train"
    mechanism = {"name": "dp_sgd", field: code}
    model = {"factory": "../code/model.py:make"} if field == "training" else {"kind": "logistic"}
    (folder / "c.yaml").write_text(yaml.safe_dump({"data": {"dataset": "synthetic", "protected": ["protected"]},
                                                   "model": model, "mechanism": mechanism}))
    monkeypatch.chdir(tmp_path)
    config = load_config(folder / "c.yaml")
    assert getattr(config.mechanism, field) == f"{tmp_path / 'code' / 'loop.py'}:train"
    if field == "training":
        assert config.model.factory == f"{tmp_path / 'code' / 'model.py'}:make"


REGISTERED_FIELDS = {  # a configuration field that names registry entries: an unknown name built in Python
    "data.dataset": {"data": {"dataset": "no_such"}},
    "data.public_map": {"data": {"public_map": "no_such"}},
    "mechanism.integration": {"mechanism": {"integration": "no_such"}},
    "audit.games": {"audit": {"games": ["attribute", "no_such"]}},
    "audit.attacks": {"audit": {"attacks": ["prior", "no_such"]}},
    "audit.executor": {"audit": {"executor": "no_such"}},
}


@pytest.mark.parametrize("field", sorted(REGISTERED_FIELDS))
def test_an_unknown_registered_name_is_refused_when_the_config_is_built(field):
    """Whichever way the config is built (Python, a mapping, dataclasses.replace), before any data are read: one
    line naming the field, the unknown name and the registered ones."""
    import dataclasses

    from fdp_audit.registry import registry_of

    section, key = field.split(".")
    for build in (lambda: Config(**REGISTERED_FIELDS[field]), lambda: config_from_dict(REGISTERED_FIELDS[field]),
                  lambda: dataclasses.replace(Config(), **{section: REGISTERED_FIELDS[field][section]})):
        with pytest.raises(BadInputError) as error:
            build()
        assert error.value.field == field and "'no_such'" in str(error.value)
        assert all(name in str(error.value) for name in registry_of(field))


def test_entries_registered_before_the_config_is_built_are_accepted():
    from fdp_audit.execution import EXECUTORS, Executor, register_executor

    @register_executor
    class Nowhere(Executor):
        name = "nowhere"

        def map_unordered(self, task, chunks):
            return iter(())

    try:
        assert Config(audit={"executor": "nowhere"}).audit.executor == "nowhere"
    finally:
        EXECUTORS.unregister("nowhere")
    with pytest.raises(BadInputError, match="nowhere"):
        Config(audit={"executor": "nowhere"})


def test_installed_plugins_are_loaded_before_the_first_check(tmp_path, monkeypatch):
    """A plugin's entries are accepted by a config built in Python without importing it, as on the command line."""
    import importlib.metadata
    import sys

    from fdp_audit import registry
    from fdp_audit.auditing.games import GAMES

    (tmp_path / "coin_plugin.py").write_text("from fdp_audit.auditing.games import GAMES, register_game\n"
                                            "register_game(type(GAMES['attribute'])('Coin', (GAMES['attribute'],), "
                                            "{'name': 'coin_plugin', 'stream_block': 91}))\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    point = importlib.metadata.EntryPoint("coin", "coin_plugin", registry.PLUGIN_GROUP)
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda group: [point] if group == point.group else [])
    monkeypatch.setitem(registry._plugins, "state", "not loaded")
    try:
        assert Config(audit={"games": ["coin_plugin"]}).audit.games == ("coin_plugin",)
    finally:
        GAMES.unregister("coin_plugin")
        sys.modules.pop("coin_plugin", None)
    assert registry._plugins["state"] == "loaded"


def test_every_config_field_that_names_entries_is_checked_against_its_registry():
    """registry.CONFIG_REGISTRIES names, for each field, the registry that holds that field (a new registry named
    by a config field must be listed there and marked on the field, or a typo would only be found when data are
    read); mechanism.name's registry sits below the configuration and is read directly."""
    import dataclasses
    import typing

    from fdp_audit.registry import CONFIG_REGISTRIES, registry_of

    marked = {}

    def walk(cls, prefix):
        hints = typing.get_type_hints(cls)
        for spec in dataclasses.fields(cls):
            inner = [a for a in (hints[spec.name], *typing.get_args(hints[spec.name])) if dataclasses.is_dataclass(a)]
            if inner:
                walk(inner[0], f"{prefix}{spec.name}.")
            elif "registered" in spec.metadata:
                marked[f"{prefix}{spec.name}"] = spec.metadata["registered"]

    walk(Config, "")
    assert marked == {field: field for field in CONFIG_REGISTRIES} == {field: field for field in REGISTERED_FIELDS}
    assert all(registry_of(field).field == field for field in CONFIG_REGISTRIES)
