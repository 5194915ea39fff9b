"""The one claim object (fdp_audit/claim.py, docs/design.md): built once from a configuration and passed down, its
accountants chosen by the event the mechanism releases and built once per audit."""

from __future__ import annotations

import pytest

import fdp_audit
from fdp_audit import claim as claim_module
from fdp_audit.accounting import mechanism as accounting_mechanism
from fdp_audit.accounting.events import NonPrivateEvent, PublicOnlyEvent, SubsampledGaussianEvent
from fdp_audit.claim import Claim
from fdp_audit.config import config_from_dict
from fdp_audit.mechanisms import MECHANISMS
from tests.conftest import small_config


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> dict[str, list]:
    """Every accountant constructed and every claim built from here on (the accountants' cache emptied first)."""
    built: dict[str, list] = {"accountants": [], "claims": []}
    accounting_mechanism.accountant_for.cache_clear()
    init, of = accounting_mechanism.MechanismAccountant.__init__, Claim.of.__func__

    def counting_init(self, spec, discretization=None):
        built["accountants"].append(spec)
        init(self, spec, discretization)

    def counting_of(cls, mech, user_code=None):
        built["claims"].append(mech.name)
        return of(cls, mech, user_code)

    monkeypatch.setattr(accounting_mechanism.MechanismAccountant, "__init__", counting_init)
    monkeypatch.setattr(Claim, "of", classmethod(counting_of))
    return built


def test_following_a_config_through_an_audit_builds_its_claim_and_each_accountant_once(counted, tmp_path) -> None:
    """The audit (planning, games, gate, results, the mechanism and accounting sections) and writing its report
    (which judges the comparisons again): one claim of the configured mechanism, one accountant per neighbouring
    relation. The utility table's baselines (DP-SGD, public-only, non-private training) are claims of their own."""
    config = config_from_dict(small_config("fdp_sgd", audit={"trials": 24, "games": ["distinguishing", "attribute"],
                                                             "attacks": ["prior", "likelihood", "iterates"]}))
    result = fdp_audit.audit(config)
    result.write(tmp_path)
    assert counted["claims"].count("fdp_sgd") == 1
    claimed = [spec for spec in counted["accountants"] if spec.name == "fdp_sgd"]
    assert sorted(spec.relation for spec in claimed) == ["add_remove", "replace"]
    assert {spec.name for spec in counted["accountants"]} <= {"fdp_sgd", "dp_sgd", "public_only", "nonprivate"}
    assert result.verdict in ("PASS", "VIOLATION")


def test_the_gate_rebuilds_the_claim_a_results_file_states_once(counted, tmp_path) -> None:
    from fdp_audit.auditing.gate import judge, restate_limits

    config = config_from_dict(small_config("fdp_sgd"))
    results = fdp_audit.audit(config).to_dict()
    accounting_mechanism.accountant_for.cache_clear()
    counted["claims"].clear()
    counted["accountants"].clear()
    restate_limits(results)
    judge(results["comparisons"], 0.05)
    assert counted["claims"] == ["fdp_sgd"]
    assert [spec.relation for spec in counted["accountants"]] == ["add_remove", "replace"]


@pytest.mark.parametrize(("name", "event"), [("nonprivate", NonPrivateEvent), ("public_only", PublicOnlyEvent),
                                             ("dp_sgd", SubsampledGaussianEvent),
                                             ("dp_sgd_half_noise", SubsampledGaussianEvent)])
def test_the_claim_is_the_event_the_registry_row_releases(name: str, event: type) -> None:
    claim = Claim.of(config_from_dict(small_config(name)).mechanism)
    assert isinstance(claim.spec().event, event) and claim.claimed_as == MECHANISMS[name].claimed_as
    assert claim.accountant("replace") is claim.replace_one and claim.accountant("add_remove") is claim.add_remove
    with pytest.raises(ValueError, match="relation"):
        claim.accountant("swap")


def test_a_target_epsilon_is_calibrated_once_per_process(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    monkeypatch.setattr(claim_module, "_CALIBRATED", {})
    monkeypatch.setattr(claim_module, "calibrate_noise_multiplier", lambda *key: calls.append(key) or 2.5)
    mech = config_from_dict(small_config("dp_sgd", mechanism={"noise_multiplier": None, "target_epsilon": 2.0}))
    assert Claim.of(mech.mechanism).noise_multiplier == Claim.of(mech.mechanism).noise_multiplier == 2.5
    assert len(calls) == 1
