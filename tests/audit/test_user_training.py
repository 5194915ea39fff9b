"""The user's own training code (fdp_audit/audit/user_training.py): the canary head gives a marked record the
per-example gradient s·K·C whatever computes per-example gradients, the release is observed through the optimizer,
and the shipped plain PyTorch loop passes its audit."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn
from torch.func import functional_call, grad, vmap

from fdp_audit.audit.user_training import AuditedModule, UpdateObserver, head_scale, unwrap
from fdp_audit.errors import BadInputError

REPO = Path(__file__).resolve().parents[2]
CANARY = torch.full((5,), 9.0)


def _audited(sign: float, n_outputs: int = 2, raw_norm: float = 10.0) -> AuditedModule:
    torch.manual_seed(0)
    module = nn.Sequential(nn.Linear(5, 4), nn.ReLU(), nn.Linear(4, n_outputs))
    return AuditedModule(module, CANARY, head_scale(sign, raw_norm, n_outputs))


@pytest.mark.parametrize("n_outputs", [1, 2, 3])
@pytest.mark.parametrize("sign", [-1.0, 1.0])
def test_marked_record_has_gradient_on_the_head_only(sign, n_outputs):
    """torch.func per-example gradients: the canary's is s·K on w₀ and zero on every other parameter; the other
    records' gradients never reach the head."""
    audited = _audited(sign, n_outputs)
    x = torch.cat([torch.randn(3, 5), CANARY[None]])
    y = torch.tensor([0, 1, 0, 1 if n_outputs == 1 else 0])
    params = {k: v.detach() for k, v in audited.named_parameters()}

    def loss(p, xi, yi):
        out = functional_call(audited, p, (xi[None],))
        if n_outputs == 1:
            return nn.functional.binary_cross_entropy_with_logits(out[:, 0], yi[None].float())
        return nn.functional.cross_entropy(out, yi[None])

    grads = vmap(grad(loss), in_dims=(None, 0, 0))(params, x, y)
    head = grads["fdp_audit_canary.weight"]
    expected = torch.zeros(4, 16)
    expected[3, 0] = sign * 10.0
    torch.testing.assert_close(head, expected)
    for name, g in grads.items():
        if name != "fdp_audit_canary.weight":
            assert torch.count_nonzero(g[3]) == 0 and torch.count_nonzero(g[:3]) > 0
    assert audited.marked == 1  # counted through the per-example vmap


def test_audited_module_keeps_the_modules_attributes_and_outputs():
    audited = _audited(1.0)
    x = torch.randn(6, 5)
    torch.testing.assert_close(audited(x), audited.module(x))
    audited.module.classes = ("no", "yes")
    assert audited.classes == ("no", "yes") and getattr(audited, "0") is audited.module[0]
    assert unwrap(audited) is audited


def test_observer_releases_the_update_in_units_of_the_noisy_sum():
    """Plain SGD: −Δw/lr·B; momentum SGD: the gradient it consumed; steps of optimizers without the head are
    ignored."""
    head = nn.Parameter(torch.zeros(3))
    other = nn.Parameter(torch.zeros(2))
    observer = UpdateObserver(head, scale=4.0)
    with observer.active():
        plain = torch.optim.SGD([head], lr=0.5, weight_decay=0.1)
        head.grad = torch.tensor([1.0, -2.0, 0.5])
        plain.step()
        momentum = torch.optim.SGD([head], lr=0.5, momentum=0.9)
        head.grad = torch.tensor([2.0, 0.0, 0.0])
        momentum.step()
        unrelated = torch.optim.SGD([other], lr=1.0)
        other.grad = torch.ones(2)
        unrelated.step()
    plain.step()  # after the block: not observed
    torch.testing.assert_close(observer.releases[0], torch.tensor([4.0, -8.0, 2.0]))
    torch.testing.assert_close(observer.releases[1], torch.tensor([8.0, 0.0, 0.0]))
    assert len(observer.releases) == 2


def test_plain_pytorch_dp_sgd_passes(cli, tmp_path):
    """configs/plain_dp_sgd.yaml: the hand-written DP-SGD loop, distinguishing (iterates) and attribute games.
    A correct mechanism fails the gate with probability at most α = 0.05 (the gate's guarantee)."""
    result = cli("audit", str(REPO / "configs" / "plain_dp_sgd.yaml"), "--trials", "120", "--out", str(tmp_path))
    assert result.code == 0, result.err
    assert "PASS" in result.out


def test_failing_training_function_is_bad_input(cli, tmp_path):
    (tmp_path / "model.py").write_text("from torch import nn\n\ndef make(n, k):\n    return nn.Linear(n, k)\n")
    (tmp_path / "train.py").write_text("def train(module, dataset, seed):\n    raise RuntimeError('no GPU here')\n")
    config = tmp_path / "c.yaml"
    config.write_text("data: {dataset: synthetic, protected: [protected], synthetic_rows: 200}\n"
                      "model: {factory: model.py:make}\n"
                      "mechanism: {name: dp_sgd, training: train.py:train, noise_multiplier: 1.0, sample_rate: 0.2,"
                      " steps: 5}\n"
                      "audit: {trials: 100, games: [distinguishing], attacks: [prior, iterates]}\n")
    result = cli("audit", str(config), "--out", str(tmp_path / "out"))
    assert result.code == 2
    assert "mechanism.training" in result.err and "no GPU here" in result.err and "Traceback" not in result.err


def test_canary_that_never_reaches_the_module_is_refused(tmp_path):
    """A loop that transforms its inputs never shows the canary to the module: refused, not a silent PASS."""
    from fdp_audit.audit.user_training import UserTrainer
    from fdp_audit.training.modules import build_module_model

    (tmp_path / "model.py").write_text("from torch import nn\n\ndef make(n, k):\n    return nn.Linear(n, k)\n")
    model = build_module_model(f"{tmp_path / 'model.py'}:make", 5, 2)

    def standardising(module, dataset, seed):
        x, y = dataset[:]
        optimizer = torch.optim.SGD(module.parameters(), lr=0.1)
        for _ in range(3):
            loss = nn.functional.cross_entropy(module((x - x.mean(0)) / (x.std(0) + 1)), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        return module

    trainer = UserTrainer(standardising, model, torch.randn(30, 5), torch.randint(0, 2, (30,)), 1.0, 10.0, 6.0)
    from fdp_audit.audit.user_training import train_user_trials
    from fdp_audit.training.engine import Canaries

    canaries = Canaries(torch.zeros(10, 5), torch.zeros(10, dtype=torch.long), torch.ones(10, dtype=torch.bool),
                        torch.zeros(10, dtype=torch.bool), torch.ones(10, 1), None)
    with pytest.raises(BadInputError, match="never reached the module"):
        list(train_user_trials(trainer, 0, torch.arange(10), canaries, True))
