"""The Opacus integration (fdp_audit/integrations/opacus.py): whatever computes Opacus's per-example gradients
(hooks, functorch, ghost clipping; Poisson or shuffled batches), the canary reaches the release as ±C; the claim is
read from the engine; the tutorial-style loop passes its audit and its misuse is caught."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader

from fdp_audit.audit.user_training import UserTrainer
from fdp_audit.integrations.opacus import calibration_cached, engine_claim, recording_engines
from fdp_audit.training.modules import ModuleModel

opacus = pytest.importorskip("opacus")
REPO = Path(__file__).resolve().parents[2]


def _factory(n_inputs: int, n_classes: int) -> nn.Module:
    return nn.Sequential(nn.Linear(n_inputs, 6), nn.ReLU(), nn.Linear(6, n_classes))


def _loop(mode: str, poisson: bool, noise: float | None, epochs: int = 3, target_epsilon: float | None = None):
    """A tutorial-style Opacus loop with the given per-example gradient engine."""

    def train(module, dataset, seed):
        loader = DataLoader(dataset, batch_size=16, shuffle=not poisson,
                            generator=torch.Generator().manual_seed(seed))
        optimizer = torch.optim.SGD(module.parameters(), lr=0.3)
        engine = opacus.PrivacyEngine(accountant="rdp")
        criterion = nn.CrossEntropyLoss()
        kwargs = {"module": module, "optimizer": optimizer, "data_loader": loader, "max_grad_norm": 0.7,
                  "poisson_sampling": poisson, "grad_sample_mode": "ghost" if mode == "ghost" else "hooks"}
        if mode == "functorch":
            kwargs["force_functorch"] = True
        if mode == "ghost":
            kwargs["criterion"] = criterion
        if target_epsilon is None:
            made = engine.make_private(noise_multiplier=noise, **kwargs)
        else:
            made = engine.make_private_with_epsilon(target_epsilon=target_epsilon, target_delta=1e-5, epochs=epochs,
                                                    **kwargs)
        if mode == "ghost":
            module, optimizer, criterion, loader = made
        else:
            module, optimizer, loader = made
        for _ in range(epochs):
            for x, y in loader:
                optimizer.zero_grad()
                criterion(module(x), y).backward()
                optimizer.step()
        return module

    return train


def _trainer(train, n: int = 64) -> UserTrainer:
    generator = torch.Generator().manual_seed(0)
    model = ModuleModel("module", 5, 2, factory=_factory, module=_factory(5, 2), logits=2)
    return UserTrainer(train, model, torch.randn(n, 5, generator=generator),
                       torch.randint(0, 2, (n,), generator=generator), 0.7, 10.0, 13.0)  # Opacus: int(65 · ⅕)


@pytest.mark.parametrize("mode", ["hooks", "functorch", "ghost"])
@pytest.mark.parametrize("poisson", [True, False])
def test_canary_is_released_as_plus_minus_c(mode, poisson):
    """Without noise, every step's release on w₀ is 0 or s·C·(scale): exactly C·s per step the canary was in the
    batch, whatever engine computed its per-example gradient; the noise coordinates stay 0."""
    trainer = _trainer(_loop(mode, poisson, noise=0.0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for sign in (-1.0, 1.0):
            outcome = trainer.run(3, None, None, sign)
            release = outcome.release
            assert release.shape == (3 * 5, 16)  # 3 epochs of ⌈65/16⌉ = 5 batches
            assert torch.count_nonzero(release[:, 1:]) == 0
            steps_with_canary = torch.isclose(release[:, 0], torch.tensor(sign * 0.7), atol=1e-5)
            assert bool((steps_with_canary | (release[:, 0] == 0)).all())
            assert int(steps_with_canary.sum()) == outcome.marked > 0


@pytest.mark.parametrize("poisson", [True, False])
def test_claim_read_from_make_private(poisson):
    trainer = _trainer(_loop("hooks", poisson, noise=1.3, epochs=2))
    with recording_engines() as record, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer.run(0, None, None, None)
    claim = engine_claim(record)
    assert (claim.noise_multiplier, claim.sample_rate, claim.steps, claim.clip_norm) == (1.3, 1 / 4, 8, 0.7)
    assert claim.accountant == "rdp" and claim.loss_reduction == "mean" and claim.target is None


def test_claim_read_from_make_private_with_epsilon():
    """z is the one Opacus calibrates for the target (computed once per distinct target under the cache)."""
    from opacus.accountants.utils import get_noise_multiplier

    trainer = _trainer(_loop("hooks", True, noise=None, epochs=2, target_epsilon=3.0))
    with recording_engines() as record, calibration_cached(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer.run(0, None, None, None)
    claim = engine_claim(record)
    expected = get_noise_multiplier(target_epsilon=3.0, target_delta=1e-5, sample_rate=1 / 4, epochs=2,
                                    accountant="rdp")
    assert claim.noise_multiplier == pytest.approx(expected) and claim.steps == 8
    assert claim.target == {"target_epsilon": 3.0, "target_delta": 1e-5, "epochs": 2}


@pytest.mark.slow
def test_tutorial_loop_passes(cli, tmp_path):
    """configs/opacus_dp_sgd.yaml (distinguishing with the iterates attack, attribute with final-model attacks):
    a correct mechanism fails the gate with probability at most α = 0.05."""
    result = cli("audit", str(REPO / "configs" / "opacus_dp_sgd.yaml"), "--trials", "120", "--out", str(tmp_path))
    assert result.code == 0, result.err
    assert result.out.startswith("PASS") or "\nPASS" in result.out


@pytest.mark.slow
def test_misuse_is_caught(cli, tmp_path):
    """configs/opacus_misuse.yaml: 0.3 of the promised noise multiplier (0.3 against 1.23) — caught by the iterates
    attack's ε lower bound (13.9 against 4.84 at 200 trials in the last run)."""
    result = cli("audit", str(REPO / "configs" / "opacus_misuse.yaml"), "--trials", "120", "--out", str(tmp_path))
    assert result.code == 1, result.err
    assert "VIOLATION" in result.out
