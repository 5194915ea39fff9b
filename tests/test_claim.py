"""The one claim object (fdp_audit/claim.py, docs/design.md): built once from a configuration and passed down, its
accountants chosen by the event the mechanism releases and built once per audit."""

from __future__ import annotations

import pytest

import fdp_audit
from fdp_audit import claim as claim_module
from fdp_audit.accounting import mechanism as accounting_mechanism
from fdp_audit.accounting.events import NonPrivateEvent, PublicOnlyEvent, Relation, SubsampledGaussianEvent
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


def test_the_gate_judges_every_comparison_against_the_one_claim_a_results_file_states(counted, monkeypatch,
                                                                                      tmp_path) -> None:
    """The gate builds the claim once from the stated configuration and judges every comparison against its
    accountants: no comparison builds one of its own, and the judgements are those of each comparison's own
    stated claim."""
    from fdp_audit.auditing import gate

    config = config_from_dict(small_config("fdp_sgd"))
    results = fdp_audit.audit(config).to_dict()
    alone = gate.judge(results["comparisons"], 0.05)
    accounting_mechanism.accountant_for.cache_clear()
    counted["claims"].clear()
    counted["accountants"].clear()
    claim = gate.restate_limits(results)
    monkeypatch.setattr(gate, "accountant_for", None)  # a comparison building its own accountant would fail
    assert gate.judge(results["comparisons"], 0.05, claim) == alone
    assert counted["claims"] == ["fdp_sgd"]
    assert [spec.relation for spec in counted["accountants"]] == ["add_remove", "replace"]
    assert any(row["kind"] == "epsilon" for row in results["comparisons"])


def test_a_one_run_audit_tests_the_claims_curve_under_its_relation() -> None:
    """``Claim.one_run_curve`` is the claim's own accountant under the relation (ε, spec), one object for the same
    claimed numbers however the claim was built, and refused for a claim that is not a subsampled Gaussian."""
    config = config_from_dict(small_config("dp_sgd", mechanism={"noise_multiplier": 1.0, "sample_rate": 0.05,
                                                                 "steps": 100}))
    claim = Claim.from_config(config)
    curve = claim.one_run_curve("replace")
    assert curve is Claim.stated("dp_sgd", 1.0, 0.05, 100, claim.delta).one_run_curve("replace")
    assert curve.spec == claim.spec("replace") and curve.epsilon == claim.replace_one.epsilon(claim.delta)
    assert curve.family.start == 1.0 and curve.description == "dp_sgd z=1 p=0.05 T=100 (replace-one)"
    assert claim.one_run_curve("add_remove") is claim.one_run_curve(Relation.ADD_REMOVE) is not curve
    with pytest.raises(ValueError, match="subsampled Gaussian"):
        Claim.of(config_from_dict(small_config("nonprivate")).mechanism).one_run_curve("replace")


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
