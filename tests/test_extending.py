"""docs/extending.md's recipes, each imported as written and put to work: a new attack plays a game and attacks
checkpoints, a new public map and data set train, a new mechanism is configured, accounted and trained, a new
reproduction and a new command run from the command line, a new integration reads a hand-written loop's claim, a
new accountant accounts a new kind of release exactly.
(The game and executor recipes are exercised by tests/auditing/games/test_registry.py.)"""

from __future__ import annotations

import json
import re
from pathlib import Path

import fdp_audit
from attacks import ATTACKS, checkpoint_attacks, unregister_attack
from fdp_audit.api import as_config
from fdp_audit.auditing.runner import run_audit
from fdp_audit.claim import Claim
from fdp_audit.cli import COMMANDS, build_parser
from fdp_audit.config import DataConfig, config_from_dict
from fdp_audit.data.catalog import DATASETS, PUBLIC_MAPS
from fdp_audit.data.prepare import prepare_data
from fdp_audit.integrations import INTEGRATIONS
from fdp_audit.mechanisms import MECHANISMS
from fdp_audit.reproduce import REPRODUCTIONS
from fdp_audit.training.run import train_one
from tests.conftest import EXTENDING, recipe


def test_the_attack_recipe_plays_a_game_and_attacks_checkpoints(tmp_path, small_config):
    with recipe("attack", tmp_path) as module:
        try:
            assert ATTACKS["loss"] is module.LossAttack and checkpoint_attacks()[-1] == "loss"
            raw = small_config("dp_sgd", rows=200, mechanism={"noise_multiplier": 4.0, "steps": 4, "sample_rate": 1.0},
                               audit={"games": ["attribute"], "attacks": ["prior", "loss"], "trials": 40})
            results = run_audit(config_from_dict(raw), None)
        finally:
            unregister_attack("loss")
    (row,) = [c for c in results["comparisons"] if c["attack"] == "loss"]
    assert row["game"] == "attribute" and row["threat_model"] == "black_box" and row["trials"] == 20


def test_the_accountant_recipe_accounts_randomized_response_exactly(tmp_path):
    """Randomised response at ε is pure ε-DP: δ(ε) = 0 and, below ε, δ(ε') = (e^ε − e^ε') / (1 + e^ε) (its
    hockey-stick divergence), so ε(δ) = log(e^ε − δ (1 + e^ε)); at Ball 1/2 Theorem 4's bound is
    1 − f(1/2) = 1 − e^−ε / 2."""
    import math

    import pytest

    from fdp_audit.accounting.mechanism import ACCOUNTANTS, MechanismSpec, accountant_for, unregister_accountant

    with recipe("accountant", tmp_path) as module:
        try:
            epsilon = 1.5
            accountant = accountant_for(MechanismSpec("randomized_response", module.RandomizedResponseEvent(epsilon)))
            assert isinstance(accountant, module.RandomizedResponseAccountant)
            assert list(ACCOUNTANTS)[-1] == "randomized_response"
            assert accountant.delta(epsilon) == pytest.approx(0.0, abs=1e-12)
            assert accountant.delta(1.0) == pytest.approx((math.exp(epsilon) - math.e) / (1 + math.exp(epsilon)))
            assert accountant.epsilon(0.1) == pytest.approx(math.log(math.exp(epsilon) - 0.1 * (1 + math.exp(epsilon))))
            assert accountant.bound(0.5) == pytest.approx(1 - math.exp(-epsilon) / 2)
        finally:
            unregister_accountant("randomized_response")
    assert "randomized_response" not in ACCOUNTANTS


def test_the_public_map_recipe_protects_every_categorical_feature_and_trains(tmp_path, small_config):
    with recipe("public_map", tmp_path):
        try:
            data = prepare_data(DataConfig(dataset="german", protected=(), public_map="numeric_columns"), 0)
            raw = small_config("fdp_sgd", data={"dataset": "german", "protected": [], "public_map": "numeric_columns"})
            trained = train_one(config_from_dict(raw), data)
        finally:
            PUBLIC_MAPS.unregister("numeric_columns")
    split = data.column_split()
    categorical = {g.feature for g in data.train.groups if g.kind == "categorical"}
    assert set(split.protected_features) == categorical and "purpose" in categorical and "duration" not in categorical
    assert trained.metadata["mechanism"] == "fdp_sgd"


def test_the_data_set_recipe_loads_splits_and_trains(tmp_path, small_config):
    with recipe("dataset", tmp_path):
        try:
            data = prepare_data(DataConfig(dataset="breast_cancer", protected=("size",)), 0)
            raw = small_config("fdp_sgd", data={"dataset": "breast_cancer", "protected": ["size"]})
            trained = train_one(config_from_dict(raw), data)
        finally:
            DATASETS.unregister("breast_cancer")
    assert data.train.n_rows + data.population.n_rows == 569 and data.train.label == "diagnosis"
    assert data.column_split().protected_features == ("size",)
    assert trained.metadata["dataset_fingerprint"] == data.fingerprint


def test_the_mechanism_recipe_is_configured_accounted_as_it_claims_and_trained(tmp_path, small_config):
    with recipe("mechanism", tmp_path):
        try:
            faulty = config_from_dict(small_config("dp_sgd_tenth_noise"))
            honest = config_from_dict(small_config("dp_sgd"))
            claimed = Claim.of(faulty.mechanism).epsilon
            trained = train_one(faulty, prepare_data(faulty.data, faulty.seed))
        finally:
            MECHANISMS.unregister("dp_sgd_tenth_noise")
    assert faulty.mechanism.faulty and claimed == Claim.of(honest.mechanism).epsilon
    assert trained.metadata["mechanism"] == "dp_sgd_tenth_noise"


def test_the_reproduction_recipe_runs_from_the_command_line(tmp_path, cli):
    with recipe("reproduction", tmp_path):
        try:
            result = cli("reproduce", "gaussian_steps", "--quick", "--out", tmp_path / "out")
        finally:
            REPRODUCTIONS.unregister("gaussian_steps")
    assert result.code == 0, result.err
    rows = json.loads((tmp_path / "out" / "gaussian_steps.json").read_text())["rows"]
    assert [row[:2] for row in rows] == [[2.0, 10], [2.0, 100], [8.0, 10], [8.0, 100]]
    assert rows[0][2] > rows[2][2] and "gaussian_steps: z = 2, T = 100" in result.out


def test_the_command_recipe_is_listed_and_runs(tmp_path, cli):
    with recipe("command", tmp_path):
        try:
            listed = build_parser().format_help()
            result = cli("mechanisms")
        finally:
            COMMANDS.unregister("mechanisms")
    assert "mechanisms" in listed and result.code == 0, result.err
    assert result.out.splitlines()[2].split()[0] == "dp_sgd" and "FAULTY" in result.out


def test_the_integration_recipe_reads_the_claim_from_the_loop_and_audits_it(tmp_path):
    """configs/plain_dp_sgd.yaml states the constants of examples/plain_dp_sgd/train.py; with the recipe's
    integration and none of them stated, the audit reads them from the loop's module: the same claim, judged."""
    stated = as_config("configs/plain_dp_sgd.yaml")
    raw = stated.to_dict()
    for name in ("noise_multiplier", "target_epsilon", "sample_rate", "steps", "clip_norm"):
        del raw["mechanism"][name]
    raw["mechanism"]["integration"] = "module_constants"
    with recipe("integration", tmp_path):
        try:
            read = fdp_audit.audit(raw, trials=32).to_dict()
        finally:
            INTEGRATIONS.unregister("module_constants")
    assert read["reproducibility"]["module_constants_engine"] == {"noise_multiplier": 1.0, "sample_rate": 0.2,
                                                                 "steps": 10, "clip_norm": 1.0}
    assert read["mechanism"] == Claim.from_config(stated).section() and "promise" not in read
    assert read["verdict"]["status"] == "PASS" and read["comparisons"]


def test_every_kind_has_a_recipe_that_a_test_runs():
    """Each section of docs/extending.md has one recipe, and a test imports each recipe by its kind."""
    text = EXTENDING.read_text(encoding="utf-8")
    kinds = re.findall(r"<!-- recipe: (\w+) -->", text)
    assert len(kinds) == len(set(kinds)) == len(re.findall(r"^## An? ", text, flags=re.M))
    tests = "".join(path.read_text(encoding="utf-8") for path in Path(__file__).parent.rglob("test_*.py"))
    assert {kind for kind in kinds if f'recipe("{kind}"' not in tests} == set()
