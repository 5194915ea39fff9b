"""The checkpoint audit (docs/games.md): the estimated prior against the exact one of the
synthetic generator, the per-record attacks against the attacks run one target at a time, and the section's
numbers against their definitions."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.special import expit

from attacks import (
    ATTACKS,
    Attack,
    AttackOutput,
    Knowledge,
    View,
    checkpoint_attacks,
    register_attack,
    unregister_attack,
)
from fdp_audit.auditing.checkpoint_audit import (
    attribute_prior,
    checkpoint_data,
    checkpoint_section,
    expected_calibration_error,
    read_checkpoint,
    record_scores,
    secret_attribute,
)
from fdp_audit.claim import Claim
from fdp_audit.config import config_from_dict
from fdp_audit.data.prepare import prepare_data
from fdp_audit.data.synthetic import label_logit, prior_for_config
from fdp_audit.training.checkpoint import save_checkpoint
from fdp_audit.training.run import train_one


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory, small_config):
    config = config_from_dict(small_config("fdp_sgd", rows=600, mechanism={"sample_rate": 0.1, "steps": 30}))
    data = prepare_data(config.data, config.seed)
    trained = train_one(config, data)
    path = save_checkpoint(tmp_path_factory.mktemp("checkpoint") / "model.pt", trained.params, trained.metadata)
    return read_checkpoint(path)


def test_a_checkpoint_trained_for_a_target_epsilon_is_read(tmp_path, small_config) -> None:
    """The config of a run calibrated to a target ε states no z (the demo's case); the z it trained with is
    in the metadata. Reading it once failed with "give noise_multiplier or target_epsilon"."""
    raw = small_config("fdp_sgd", rows=300, mechanism={"noise_multiplier": None, "target_epsilon": 4.0, "steps": 5})
    config = config_from_dict(raw)
    data = prepare_data(config.data, config.seed)
    trained = train_one(config, data)
    path = save_checkpoint(tmp_path / "model.pt", trained.params, trained.metadata)
    loaded = read_checkpoint(path)
    assert loaded.config.mechanism.target_epsilon is None
    assert loaded.config.mechanism.noise_multiplier == pytest.approx(trained.metadata["noise_multiplier"])


def exact_posterior(data, config) -> np.ndarray:
    """``Pr[v | u, y] ∝ π_v Pr[y | u, v]`` of the synthetic generator, for the training records."""
    prior = prior_for_config(config.data)
    public = np.column_stack([data.train.x[:, g.start] * g.scale + g.mean
                              for g in data.public_map.public_groups])
    codes = np.arange(len(prior.probabilities))
    p_one = expit(np.stack([label_logit(public, np.full(len(public), v), prior) for v in codes], axis=1))
    likelihood = np.where(data.train.y[:, None] == 1, p_one, 1 - p_one)
    joint = likelihood * np.asarray(prior.probabilities)[None, :]
    return joint / joint.sum(axis=1, keepdims=True)


def test_estimated_ball_matches_the_generator(small_config) -> None:
    """The synthetic protected value is independent of u but moves the label, so the adversary's exact
    posterior given (u, y) is known in closed form. A logistic regression on 1,333 population rows,
    temperature-scaled on 667 more, recovers it within 0.05 on average (measured 0.026: the true log-odds are
    not linear in (u, y)) and its mean Ball within 0.02 (measured 0.005). Deterministic: every seed is fixed."""
    config = config_from_dict(small_config("fdp_sgd", rows=4000, data={"synthetic_prior": [0.7, 0.3]}))
    data = prepare_data(config.data, config.seed)
    estimated = attribute_prior(data, secret_attribute(data), config.seed)
    exact = exact_posterior(data, config)
    assert estimated.probabilities.shape == exact.shape
    assert np.allclose(estimated.probabilities.sum(axis=1), 1.0)
    assert np.abs(estimated.probabilities - exact).mean() < 0.05
    assert abs(estimated.probabilities.max(axis=1).mean() - exact.max(axis=1).mean()) < 0.02
    assert 0.2 < estimated.temperature < 5 and estimated.calibration_error < 0.1


def test_expected_calibration_error_known_answers() -> None:
    probabilities = np.array([[0.9, 0.1]] * 10)
    assert expected_calibration_error(probabilities, np.array([0] * 9 + [1])) == pytest.approx(0.0)
    assert expected_calibration_error(probabilities, np.array([0] * 5 + [1] * 5)) == pytest.approx(0.4)


def test_per_record_attacks_equal_one_target_at_a_time(checkpoint) -> None:
    """Scoring every record in one call (per-trial targets, the one model broadcast) gives exactly the scores
    of the attacks fitted on one record at a time, as the game audit fits them."""
    data = checkpoint_data(checkpoint)
    group = secret_attribute(data)
    x, y = data.tensors()
    rows = torch.arange(7)
    candidates = x[rows, None, :].repeat(1, 2, 1)
    candidates[:, :, group.start:group.stop] = torch.eye(2)
    prior = torch.softmax(torch.randn(7, 2, generator=torch.Generator().manual_seed(0)), dim=1)
    batched = record_scores(checkpoint.model, checkpoint.params, candidates, y[rows], prior,
                            ("prior", "likelihood", "gradient"))
    one_model = View({k: v[None] for k, v in checkpoint.params.items()})
    for name, scores in batched.items():
        for r in range(7):
            knowledge = Knowledge(checkpoint.model, candidates[r], int(y[r]), prior[r])
            alone = ATTACKS[name]().fit(knowledge).infer(one_model).scores[0].double().numpy()
            np.testing.assert_allclose(scores[r], alone, rtol=1e-5, atol=1e-6)


def test_section_numbers_follow_their_definitions(checkpoint) -> None:
    data = checkpoint_data(checkpoint)
    section, comparisons = checkpoint_section(checkpoint, data, alpha=0.05, gate=False)
    assert comparisons == [] and section["gated"] is False
    assert section["records"] == data.train.n_rows and section["attribute"] == "protected"
    prior = attribute_prior(data, secret_attribute(data), checkpoint.config.seed)
    balls = prior.probabilities.max(axis=1)
    assert section["estimated_ball"] == pytest.approx(balls.mean())
    bounds = Claim.of(checkpoint.config.mechanism).add_remove.bound(balls)
    assert section["estimated_bound"] == pytest.approx(np.mean(bounds))
    assert section["estimated_ball"] <= section["estimated_bound"] <= 1
    rates = {a["attack"]: a for a in section["attacks"]}
    assert list(rates) == ["prior", "likelihood", "gradient"]
    for row in rates.values():
        assert row["successes"] / row["trials"] == row["rate"] and row["ci_low"] <= row["rate"] <= row["ci_high"]
        assert row["advantage_over_prior"] == pytest.approx(row["rate"] - rates["prior"]["rate"])
        assert row["status"] == "info"
    gated, comparisons = checkpoint_section(checkpoint, data, alpha=0.05, gate=True)
    assert [c["id"] for c in comparisons] == ["checkpoint/likelihood", "checkpoint/gradient"]
    assert all(c["bound"] == section["estimated_bound"] and c["trials"] == section["records"] for c in comparisons)


class ConstantAttack(Attack):
    """A final-model attack defined only here: it prefers the last candidate value, whatever the model."""

    name = "constant_last"
    title = "the last candidate value"
    threat_model = "black_box"

    def infer(self, view: View) -> AttackOutput:
        k = self.knowledge
        trials, values = (k.candidates.shape[0], k.candidates.shape[1]) if k.per_trial else (1, len(k.prior))
        return AttackOutput(torch.arange(values, dtype=torch.float64).expand(trials, values))


def test_a_registered_final_model_attack_is_run_on_the_checkpoint_with_no_other_edit(checkpoint) -> None:
    """One register_attack line makes the checkpoint audit attack the real records with it too; attacks that
    need more knowledge (shadow models, the other records) or a canary are left out by what they declare."""
    assert checkpoint_attacks() == ("prior", "likelihood", "gradient")
    register_attack(ConstantAttack)
    try:
        assert checkpoint_attacks() == ("prior", "likelihood", "gradient", "constant_last")
        section, _ = checkpoint_section(checkpoint, checkpoint_data(checkpoint), alpha=0.05, gate=False)
    finally:
        unregister_attack(ConstantAttack.name)
    row = {a["attack"]: a for a in section["attacks"]}["constant_last"]
    truth = checkpoint_data(checkpoint).train.x[:, secret_attribute(checkpoint_data(checkpoint)).stop - 1]
    assert row["successes"] == int(truth.sum()) and row["threat_model"] == "black_box"


def test_the_library_replays_a_checkpoints_recipe_and_names_its_keyword(checkpoint, tmp_path) -> None:
    """``fdp_audit.api.replay_checkpoint``, which ``audit CKPT --games N`` calls: the checkpoint's pinned config with
    N trials; a bad count or a recipe that names code is refused naming ``games`` (the command line's ``--games``)."""
    from fdp_audit.api import replay_checkpoint
    from fdp_audit.errors import BadInputError
    from fdp_audit.training.checkpoint import load_checkpoint

    replayed = replay_checkpoint(checkpoint.path, 24)
    assert replayed == checkpoint.config.with_overrides({"audit.trials": 24})
    with pytest.raises(BadInputError) as raised:
        replay_checkpoint(checkpoint.path, 0)
    assert raised.value.field == "games"
    params, metadata, _ = load_checkpoint(checkpoint.path)
    metadata["config"]["mechanism"]["third_party"] = f"{tmp_path / 'never_run.py'}:train"
    named = save_checkpoint(tmp_path / "named.pt", params, metadata)
    with pytest.raises(BadInputError, match="names code") as raised:
        replay_checkpoint(named, 24)
    assert raised.value.field == "games"
