"""Third-party mechanisms (docs/games.md): a training function outside fdp-audit, audited
unchanged — the shipped honest example passes, the leaky one is a violation — and every way of naming or
writing such a function wrongly is bad input."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
from scipy.stats import binom, norm

from fdp_audit.auditing import trials
from fdp_audit.auditing.third_party import load_mechanism, trial_seed
from fdp_audit.config import config_from_dict, load_config
from fdp_audit.errors import BadInputError

ROOT = Path(__file__).parents[2]
EXAMPLES = Path(__file__).parent / "third_party_mechanisms.py"


@pytest.fixture
def in_repository(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """The repository, from another working folder: the shipped configs name the example by a path relative to
    their own folder."""
    monkeypatch.chdir(tmp_path)
    return ROOT


@pytest.mark.slow
def test_honest_third_party_dp_sgd_passes(verdict_only_audit, in_repository) -> None:
    """At p = 1 Theorem 4 is tight, so the iterates attack sits on the bound Φ(√T/z) = 0.760: a false
    VIOLATION has probability ≤ α = 0.001 (the config's level). Its success must also match that optimum
    within the two-sided binomial interval at level 1e-3 — the audit really ran the user's DP-SGD."""
    results = verdict_only_audit(load_config(in_repository / "configs" / "third_party_dp_sgd.yaml"))
    assert results["verdict"]["status"] == "PASS", results["verdict"]["explanation"]
    assert results["mechanism"]["name"].endswith("third_party_mechanisms.py:honest_dp_sgd")
    assert results["mechanism"]["claimed_as"] == "dp_sgd"
    (row,) = [c for c in results["comparisons"] if c["id"] == "distinguishing-attribute/iterates"]
    optimum = norm.cdf(math.sqrt(2) / 2)
    assert binom.ppf(5e-4, row["trials"], optimum) <= row["successes"] <= binom.ppf(1 - 5e-4, row["trials"], optimum)


@pytest.mark.slow
def test_leaky_third_party_dp_sgd_is_a_violation(verdict_only_audit, in_repository) -> None:
    """Its real noise multiplier is z/150: the attack succeeds with probability Φ(150·√2/2) ≈ 1, so a miss
    (a lower confidence bound under 0.760 at level 0.001/3) is impossible in practice (< 1e-30)."""
    results = verdict_only_audit(load_config(in_repository / "configs" / "third_party_leaky.yaml"))
    assert results["verdict"]["status"] == "VIOLATION"
    assert "distinguishing-attribute/iterates" in results["verdict"]["violations"]


def test_final_model_only_plays_the_attribute_game(verdict_only_audit, small_config) -> None:
    raw = small_config("dp_sgd", mechanism={"third_party": f"{EXAMPLES}:final_model_only", "sample_rate": 1.0,
                                            "steps": 2, "noise_multiplier": 2.0},
                       audit={"trials": 24, "games": ["attribute"], "attacks": ["prior", "likelihood"]})
    results = verdict_only_audit(config_from_dict(raw))
    assert [c["id"] for c in results["comparisons"]] == ["attribute/likelihood"]
    raw["audit"] |= {"games": ["distinguishing"], "attacks": ["prior", "iterates"], "trials": 28}
    with pytest.raises(BadInputError, match="mechanism.third_party: the gradient-canary games need"):
        verdict_only_audit(config_from_dict(raw))


@pytest.mark.parametrize(("spec", "message"), [
    ("fdp_audit.no_such_module:train", "cannot import"),
    ("fdp_audit.auditing.stats:no_such_function", "has no function"),
    ("fdp_audit.auditing.stats:gdp_mu_lower_bound", "must take (problem, seed, canary)"),
    ("no/such/file.py:train", "no such file"),
])
def test_bad_function_names(spec: str, message: str) -> None:
    with pytest.raises(BadInputError, match="mechanism.third_party") as err:
        load_mechanism(spec)
    assert message in str(err.value)


def test_bad_function_name_exits_two(cli, one_line_error, small_config, write_yaml, tmp_path: Path) -> None:
    raw = small_config("dp_sgd", mechanism={"third_party": "fdp_audit.no_such_module:train"})
    result = cli("audit", write_yaml(tmp_path / "c.yaml", raw), "--out", tmp_path / "never")
    assert result.code == 2 and "mechanism.third_party" in one_line_error(result.err)
    assert not (tmp_path / "never").exists()


@pytest.mark.parametrize(("mechanism", "field"), [
    ({"third_party": "no-colon"}, "mechanism.third_party"),
    ({"third_party": "a.b:1abc"}, "mechanism.third_party"),
    ({"third_party": "a.b:train", "name": "dp_sgd_no_clip", "faulty": True}, "mechanism.name"),
    ({"third_party": "a.b:train", "name": "corrdp_sgd"}, "mechanism.name"),
])
def test_config_states_a_valid_claim(mechanism: dict, field: str) -> None:
    with pytest.raises(BadInputError, match=field):
        config_from_dict({"mechanism": {"name": "dp_sgd", **mechanism}})


def test_trial_seeds_are_distinct_and_reproducible() -> None:
    seeds = [trial_seed(0, i) for i in range(10_000)] + [trial_seed(1, i) for i in range(10_000)]
    assert len(set(seeds)) == len(seeds) and all(0 <= s < 2**63 for s in seeds)
    assert trial_seed(0, 5) == trial_seed(0, 5)


def test_non_finite_releases_are_bad_input(verdict_only_audit, small_config) -> None:
    raw = small_config("dp_sgd", mechanism={"third_party": f"{EXAMPLES}:nan_model", "sample_rate": 1.0,
                                            "steps": 2, "noise_multiplier": 2.0},
                       audit={"trials": 40, "games": ["attribute"], "attacks": ["prior", "likelihood"]})
    with pytest.raises(BadInputError, match="mechanism.third_party: returned parameter .* non-finite"):
        verdict_only_audit(config_from_dict(raw))


def test_a_module_that_fails_to_import_is_bad_input(tmp_path: Path) -> None:
    broken = tmp_path / "broken.py"
    broken.write_text("def train(problem, seed, canary):\n    return (\n", encoding="utf-8")
    with pytest.raises(BadInputError, match="mechanism.third_party: cannot import .*SyntaxError"):
        load_mechanism(f"{broken}:train")


def test_the_reconstruction_game_runs_the_third_party_function(verdict_only_audit) -> None:
    """Every game trains through the same trainer: the reconstruction game must call the user's function, not
    the built-in mechanism named as its claim."""
    raw = {"seed": 1, "device": "cpu",
           "data": {"dataset": "synthetic", "protected": ["protected-0"], "synthetic_rows": 60,
                    "synthetic_prior_kind": "gaussian"},
           "mechanism": {"name": "dp_sgd", "third_party": f"{EXAMPLES}:calls_raise", "sample_rate": 1.0,
                         "steps": 2, "noise_multiplier": 2.0},
           "audit": {"trials": 40, "games": ["reconstruction"], "attacks": ["prior", "reconstruction"],
                     "rho_grid": [0.1]}}
    with pytest.raises(BadInputError, match="third-party mechanism called"):
        verdict_only_audit(config_from_dict(raw))


def test_shadow_models_run_the_third_party_function(verdict_only_audit, small_config, monkeypatch) -> None:
    """The shadow attack's adversary runs the audited function itself, not the recipe it only claims: with a
    function that fails as soon as it is called, fitting the shadow attack fails (the trials, stubbed out,
    come after the attacks are fitted and are never reached)."""
    monkeypatch.setattr(trials, "trained_views", lambda *args, **kwargs: pytest.fail("the shadow models ran the claim"))
    config = config_from_dict(small_config(
        "dp_sgd", rows=50, mechanism={"third_party": f"{EXAMPLES}:calls_raise"},
        audit={"games": ["attribute"], "attacks": ["prior", "shadow"], "trials": 24}))
    with pytest.raises((RuntimeError, BadInputError), match="third-party mechanism called"):
        verdict_only_audit(config)


@pytest.mark.parametrize(("function", "message"), [
    ("exits_zero", r"failed on a trial \(seed \d+\): it called sys.exit\(0\)"),
    ("calls_raise", r"failed on a trial \(seed \d+\): RuntimeError: third-party mechanism called"),
])
def test_a_mechanism_that_exits_or_raises_is_bad_input(cli, small_config, write_yaml, tmp_path: Path,
                                                        function: str, message: str) -> None:
    """The reproduced defect: sys.exit(0) inside the user's function ended the audit with exit 0 and no
    results (a raise gave exit 3). The user's code failed: exit 2 with its error on the last line, above it the
    user's traceback (their function's frame, none of fdp-audit's), nothing written."""
    raw = small_config("dp_sgd", mechanism={"third_party": f"{EXAMPLES}:{function}", "sample_rate": 1.0,
                                            "steps": 2, "noise_multiplier": 2.0},
                       audit={"trials": 40, "games": ["attribute"], "attacks": ["prior", "likelihood"]})
    out = tmp_path / "out"
    result = cli("audit", write_yaml(tmp_path / "c.yaml", raw), "--out", out)
    *shown, line = result.err.strip().splitlines()
    assert result.code == 2 and line.startswith("fdp-audit: error: mechanism.third_party: ")
    assert re.search(message, line), line
    assert shown[0].startswith("Traceback of the user's code") and f"{EXAMPLES}\", line" in shown[1]
    assert f"in {function}" in shown[1] and not any("fdp_audit" in entry for entry in shown)
    assert not (out / "results.json").exists() and not (out / "report.html").exists()


def test_a_module_that_exits_on_import_is_bad_input(tmp_path: Path) -> None:
    exiting = tmp_path / "exiting.py"
    exiting.write_text("import sys\nsys.exit(0)\n", encoding="utf-8")
    with pytest.raises(BadInputError, match=r"cannot import .*sys.exit\(0\)"):
        load_mechanism(f"{exiting}:train")
