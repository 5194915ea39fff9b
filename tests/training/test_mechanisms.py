"""The mechanism registry (docs/training.md): one table that the config schema, the accountant and the engine
read, so a registered row is all a new mechanism needs; known-faulty mechanisms are marked in code, config and
accounting and are never selected by accident; the public loss can only be given Ψ(x)."""

from __future__ import annotations

import dataclasses
import inspect
import typing

import pytest
import torch

from fdp_audit.accounting.events import SubsampledGaussianEvent
from fdp_audit.claim import Claim
from fdp_audit.config import MechanismConfig, config_from_dict
from fdp_audit.data.encoding import ColumnGroup
from fdp_audit.data.features import ColumnSplit, PublicView
from fdp_audit.data.prepare import prepare_data
from fdp_audit.errors import BadInputError
from fdp_audit.mechanisms import MECHANISMS, Mechanism, Recipe, faulty_mechanisms, register_mechanism
from fdp_audit.training.public_losses import PublicLoss
from fdp_audit.training.run import train_one, with_mechanism

# What each faulty recipe changes against the correct mechanism it claims to be (docs/training.md).
DOCUMENTED_FAULTS = {
    "fdp_sgd_shared_batch": ("fdp_sgd", {"public_batch": "shared"}),
    "dp_sgd_half_noise": ("dp_sgd", {"noise_factor": 0.5}),
    "dp_sgd_no_clip": ("dp_sgd", {"clip": False}),
    "fdp_sgd_leaky_public": ("fdp_sgd", {"public_reads_protected": True}),
    "dp_sgd_wrong_rate": ("dp_sgd", {"rate_factor": 4.0}),
}


def test_the_faulty_set_is_read_from_the_registry():
    assert faulty_mechanisms() == set(DOCUMENTED_FAULTS)
    assert all(MECHANISMS[name].releases is SubsampledGaussianEvent for name in faulty_mechanisms())


@pytest.fixture
def registered():
    """Register rows for one test only."""
    rows: list[str] = []

    def add(row: Mechanism) -> Mechanism:
        rows.append(row.name)
        return register_mechanism(row)
    yield add
    for name in rows:
        MECHANISMS.unregister(name)


def test_one_registry_row_is_a_new_mechanism_for_the_config_the_accountant_and_the_trainer(registered, small_config):
    registered(Mechanism("dp_sgd_renamed", Recipe("full", "none"), "DP-SGD under another name."))
    config = config_from_dict(small_config("dp_sgd_renamed"))
    reference = with_mechanism(config, "dp_sgd")
    assert Claim.of(config.mechanism).epsilon == Claim.of(reference.mechanism).epsilon
    data = prepare_data(config.data, config.seed)
    trained, expected = train_one(config, data), train_one(reference, data)
    assert all(torch.equal(trained.params[key], expected.params[key]) for key in expected.params)
    assert trained.metadata["mechanism"] == "dp_sgd_renamed"


def test_a_registered_faulty_row_is_refused_without_the_flag_and_accounted_as_it_claims(registered, small_config):
    registered(Mechanism("dp_sgd_tenth_noise", Recipe("full", "none", noise_factor=0.1), "FAULTY: z/10.",
                         claims="dp_sgd"))
    assert "dp_sgd_tenth_noise" in faulty_mechanisms()
    with pytest.raises(BadInputError, match="known-faulty"):
        config_from_dict(small_config("dp_sgd_tenth_noise", mechanism={"faulty": False}))
    config = config_from_dict(small_config("dp_sgd_tenth_noise"))
    assert Claim.of(config.mechanism).claimed_as == "dp_sgd"
    assert Claim.of(config.mechanism).epsilon == Claim.of(with_mechanism(config, "dp_sgd").mechanism).epsilon


def test_unregistered_names_are_bad_input_and_rows_are_checked_on_registration():
    with pytest.raises(BadInputError, match="must be one of 'nonprivate'") as caught:
        config_from_dict({"mechanism": {"name": "dp_sgd_typo"}})
    assert caught.value.field == "mechanism.name"
    with pytest.raises(ValueError, match="already registered"):
        register_mechanism(dataclasses.replace(MECHANISMS["dp_sgd"], description="DP-SGD again."))
    with pytest.raises(ValueError, match="correct mechanism"):
        register_mechanism(Mechanism("claims_a_fault", Recipe("full", "none"), "A fault's fault.",
                                     claims="dp_sgd_no_clip"))
    with pytest.raises(ValueError, match="correct mechanism"):
        register_mechanism(Mechanism("claims_nothing_known", Recipe("full", "none"), "Claims nothing.",
                                     claims="no_such"))


@pytest.mark.parametrize("name", sorted(DOCUMENTED_FAULTS))
def test_each_faulty_recipe_differs_from_its_claim_in_exactly_the_documented_way(name):
    claimed, fault = DOCUMENTED_FAULTS[name]
    recipe, correct = MECHANISMS[name].recipe, MECHANISMS[claimed].recipe
    differences = {field: getattr(recipe, field) for field in recipe.__dataclass_fields__
                   if getattr(recipe, field) != getattr(correct, field)}
    assert differences == fault
    assert MECHANISMS[name].faulty and MECHANISMS[name].description.startswith("FAULTY")
    assert MECHANISMS[name].claimed_as == claimed


@pytest.mark.parametrize("name", sorted(DOCUMENTED_FAULTS))
def test_faulty_mechanisms_are_accounted_as_they_claim(name):
    claimed = DOCUMENTED_FAULTS[name][0]
    mech = MechanismConfig(name=name, faulty=True, noise_multiplier=1.1, sample_rate=0.02, steps=50)
    correct = MechanismConfig(name=claimed, noise_multiplier=1.1, sample_rate=0.02, steps=50)
    assert Claim.of(mech).add_remove.epsilon(1e-5) == Claim.of(correct).add_remove.epsilon(1e-5)


@pytest.mark.parametrize("name", sorted(DOCUMENTED_FAULTS))
def test_faulty_mechanisms_need_an_explicit_flag(name):
    with pytest.raises(BadInputError, match="known-faulty") as caught:
        config_from_dict({"mechanism": {"name": name}})
    assert caught.value.field == "mechanism.faulty"
    assert config_from_dict({"mechanism": {"name": name, "faulty": True}}).mechanism.faulty


def test_utility_comparisons_never_inherit_the_faulty_flag():
    config = config_from_dict({"mechanism": {"name": "dp_sgd_half_noise", "faulty": True}})
    assert with_mechanism(config, "dp_sgd").mechanism.faulty is False


def test_the_public_loss_is_typed_to_receive_only_the_public_view():
    hints = typing.get_type_hints(PublicLoss.inputs)
    assert list(inspect.signature(PublicLoss.inputs).parameters) == ["self", "view", "pad_noise"]
    assert hints["view"] is PublicView
    assert set(PublicView.__dataclass_fields__) == {"features", "labels"}
    # Ψ of a column split keeps exactly the public columns
    groups = tuple(ColumnGroup(f"f{i}", "numeric", i, i + 1) for i in range(5))
    split = ColumnSplit(groups, ("f1", "f3"))
    x = torch.arange(10.0).reshape(2, 5)
    view = split(x, torch.tensor([0, 1]))
    assert torch.equal(view.features, x[:, [0, 2, 4]])
