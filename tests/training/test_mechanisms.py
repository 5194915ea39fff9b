"""The mechanism registry (docs/training.md): one registry that the config schema, the accountant
and the engine agree on; known-faulty mechanisms are marked in code, config and accounting and are never
selected by accident; the public loss can only be given Ψ(x)."""

from __future__ import annotations

import inspect
import typing

import pytest
import torch

from fdp_audit.accounting.mechanism import KNOWN_FAULTY, MechanismSpec
from fdp_audit.config import MechanismConfig, config_from_dict
from fdp_audit.data.encoding import ColumnGroup
from fdp_audit.data.features import FeatureSplit, PublicView
from fdp_audit.errors import BadInputError
from fdp_audit.training.mechanisms import FAULTY_MECHANISMS, MECHANISMS
from fdp_audit.training.public_losses import PublicLoss
from fdp_audit.training.run import accountant, with_mechanism

# What each faulty recipe changes against the correct mechanism it claims to be (docs/training.md).
DOCUMENTED_FAULTS = {
    "fdp_sgd_shared_batch": ("fdp_sgd", {"public_batch": "shared"}),
    "dp_sgd_half_noise": ("dp_sgd", {"noise_factor": 0.5}),
    "dp_sgd_no_clip": ("dp_sgd", {"clip": False}),
    "fdp_sgd_leaky_public": ("fdp_sgd", {"public_reads_protected": True}),
    "dp_sgd_wrong_rate": ("dp_sgd", {"rate_factor": 4.0}),
}


def test_registry_config_and_accountant_name_the_same_mechanisms():
    assert set(MECHANISMS) == set(typing.get_args(typing.get_type_hints(MechanismConfig)["name"]))
    assert FAULTY_MECHANISMS == KNOWN_FAULTY == set(DOCUMENTED_FAULTS)


@pytest.mark.parametrize("name", sorted(DOCUMENTED_FAULTS))
def test_each_faulty_recipe_differs_from_its_claim_in_exactly_the_documented_way(name):
    claimed, fault = DOCUMENTED_FAULTS[name]
    recipe, correct = MECHANISMS[name].recipe, MECHANISMS[claimed].recipe
    differences = {field: getattr(recipe, field) for field in recipe.__dataclass_fields__
                   if getattr(recipe, field) != getattr(correct, field)}
    assert differences == fault
    assert MECHANISMS[name].faulty and MECHANISMS[name].description.startswith("FAULTY")
    assert MechanismSpec(name, 1.0, 0.01, 10).claimed_as == claimed


@pytest.mark.parametrize("name", sorted(DOCUMENTED_FAULTS))
def test_faulty_mechanisms_are_accounted_as_they_claim(name):
    claimed = DOCUMENTED_FAULTS[name][0]
    mech = MechanismConfig(name=name, faulty=True, noise_multiplier=1.1, sample_rate=0.02, steps=50)
    correct = MechanismConfig(name=claimed, noise_multiplier=1.1, sample_rate=0.02, steps=50)
    assert accountant(mech).epsilon(1e-5) == accountant(correct).epsilon(1e-5)


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
    split = FeatureSplit(groups, ("f1", "f3"))
    x = torch.arange(10.0).reshape(2, 5)
    view = split(x, torch.tensor([0, 1]))
    assert torch.equal(view.features, x[:, [0, 2, 4]])
