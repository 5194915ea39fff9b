"""The user's own training code (fdp_audit/auditing/user_training.py): the canary head gives a marked record the
per-example gradient s·K·C whatever computes per-example gradients, the release is observed through the optimizer,
and the shipped plain PyTorch loop passes its audit."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import torch
from torch import nn
from torch.func import functional_call, grad, vmap

from fdp_audit.auditing.canary_head import AuditedModule, CanaryHead, CanaryInputs, unwrap
from fdp_audit.errors import BadInputError

REPO = Path(__file__).resolve().parents[2]
INPUTS = CanaryInputs(1, (5,), 9.0)
CANARY = INPUTS.inputs(torch.tensor([0]))[0]


def _audited(sign: float, n_outputs: int = 2, raw_norm: float = 10.0) -> AuditedModule:
    torch.manual_seed(0)
    module = nn.Sequential(nn.Linear(5, 4), nn.ReLU(), nn.Linear(4, n_outputs))
    return AuditedModule(module, INPUTS, CanaryHead(torch.tensor([sign * raw_norm]), 15))


@pytest.mark.parametrize("n_outputs", [1, 2, 3])
@pytest.mark.parametrize("sign", [-1.0, 1.0])
def test_marked_record_has_gradient_on_the_head_only(sign, n_outputs):
    """torch.func per-example gradients: the canary's is s·K on w₀ and zero on every other parameter; the other
    records' gradients never reach the head."""
    audited = _audited(sign, n_outputs)
    x = torch.cat([torch.randn(3, 5), CANARY[None]])
    y = torch.tensor([0, 1, 0, 0])
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


def test_plain_pytorch_dp_sgd_passes(cli, tmp_path):
    """configs/plain_dp_sgd.yaml: the hand-written DP-SGD loop, distinguishing (iterates) and attribute games.
    A correct mechanism fails the gate with probability at most α = 0.05 (the gate's guarantee)."""
    result = cli("audit", str(REPO / "configs" / "plain_dp_sgd.yaml"), "--trials", "120", "--out", str(tmp_path))
    assert result.code == 0, result.err
    assert "PASS" in result.out


def _user_loop_config(tmp_path: Path, training: str) -> Path:
    """A config auditing ``train.py:train`` (written here from ``training``) on a linear module."""
    (tmp_path / "model.py").write_text("from torch import nn\n\ndef make(n, k):\n    return nn.Linear(n, k)\n")
    (tmp_path / "train.py").write_text(training)
    config = tmp_path / "c.yaml"
    config.write_text("data: {dataset: synthetic, protected: [protected], synthetic_rows: 200}\n"
                      "model: {factory: model.py:make}\n"
                      "mechanism: {name: dp_sgd, training: train.py:train, noise_multiplier: 1.0, sample_rate: 0.2,"
                      " steps: 5}\n"
                      "audit: {trials: 100, games: [distinguishing], attacks: [prior, iterates]}\n")
    return config


SGD_LOOP = """import torch
from torch import nn

def train(module, dataset, seed):
    x, y = dataset[:]
    optimizer = torch.optim.SGD(module.parameters(), lr=0.1)
    loss = nn.functional.cross_entropy(module(x), y)
    loss.backward()
    optimizer.step()
    return module
"""


def test_failing_training_function_shows_the_users_traceback(cli, tmp_path):
    """Exit 2, the one-line error last, and above it the user's own frames (the line that raised), none of
    fdp-audit's."""
    config = _user_loop_config(tmp_path, "def train(module, dataset, seed):\n    helper()\n\n"
                                         "def helper():\n    raise RuntimeError('no GPU here')\n")
    result = cli("audit", str(config), "--out", str(tmp_path / "out"))
    assert result.code == 2
    lines = result.err.strip().splitlines()
    assert lines[-1].startswith("fdp-audit: error: mechanism.training: the training function failed on a trial")
    assert lines[-1].endswith("RuntimeError: no GPU here")
    shown = result.err[result.err.index("Traceback of the user's code"):]
    assert f'{tmp_path / "train.py"}", line 2, in train' in shown and "line 5, in helper" in shown
    assert "fdp_audit" not in shown.replace(lines[-1], "")


def test_a_failure_of_fdp_audit_inside_the_users_loop_is_not_blamed_on_them(cli, tmp_path, monkeypatch):
    """The canary wrapper's forward is fdp-audit's code, called back from the user's loop: its failure is an
    internal error (exit 3) naming neither the user's field nor their code; FDP_AUDIT_DEBUG=1 prints fdp-audit's
    traceback. (The bug is simulated by breaking a helper the wrapper's forward calls: the failing frame is
    fdp-audit's.)"""
    from fdp_audit.auditing import canary_head

    monkeypatch.setattr(canary_head, "_unwrapped", None)
    config = _user_loop_config(tmp_path, SGD_LOOP)
    result = cli("audit", str(config), "--out", str(tmp_path / "out"))
    assert result.code == 3 and "mechanism.training" not in result.err and "Traceback" not in result.err
    assert result.err.strip().splitlines()[-1].startswith("fdp-audit: internal error: TypeError:")
    monkeypatch.setenv("FDP_AUDIT_DEBUG", "1")
    result = cli("audit", str(config), "--out", str(tmp_path / "out"))
    assert result.code == 3 and "Traceback (most recent call last)" in result.err
    assert 'fdp_audit/auditing/canary_head.py", line' in result.err and ", in forward" in result.err


def test_the_users_module_failing_on_their_batch_is_theirs_though_the_wrapper_called_it(cli, tmp_path):
    """A float64 batch into the user's float32 nn.Linear fails inside torch, called by the canary wrapper's
    forward (fdp-audit's): exit 2 naming mechanism.training with their traceback (their loop's line, torch's
    frames), not an internal error."""
    config = _user_loop_config(tmp_path, SGD_LOOP.replace("module(x)", "module(x.double())"))
    result = cli("audit", str(config), "--out", str(tmp_path / "out"))
    assert result.code == 2, result.err
    lines = result.err.strip().splitlines()
    assert lines[-1].startswith("fdp-audit: error: mechanism.training: the training function failed on a trial")
    assert "must have the same dtype" in lines[-1]
    shown = result.err[result.err.index("Traceback of the user's code"):]
    assert f'{tmp_path / "train.py"}", line 7, in train' in shown and "F.linear" in shown
    assert "fdp_audit" not in shown.replace(lines[-1], "")


def test_a_loop_whose_optimizer_computes_the_gradient_inside_step_is_refused(cli, tmp_path):
    """Full-batch LBFGS without noise (its closure computes the gradient inside step()): the release cannot be
    read, exit 2 naming mechanism.training and nothing written (it passed with an all-zero release)."""
    loop = SGD_LOOP.replace("""optimizer = torch.optim.SGD(module.parameters(), lr=0.1)
    loss = nn.functional.cross_entropy(module(x), y)
    loss.backward()
    optimizer.step()""", """optimizer = torch.optim.LBFGS(module.parameters(), lr=0.1, max_iter=3)

    def closure():
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(module(x), y)
        loss.backward()
        return loss

    optimizer.step(closure)""")
    assert "LBFGS" in loop
    result = cli("audit", str(_user_loop_config(tmp_path, loop)), "--out", str(tmp_path / "out"))
    assert result.code == 2, result.err
    assert result.err.strip().splitlines()[-1].startswith(
        "fdp-audit: error: mechanism.training: the canary head had no gradient when LBFGS.step() began")
    assert not (tmp_path / "out" / "results.json").exists()


def test_a_factory_without_the_input_width_is_refused_by_the_default_games_before_any_training(cli, tmp_path):
    """A zero-argument factory (documented) on the synthetic table's 7 columns: the default games of a user's loop
    include the membership game, which adds columns; refused in one line naming model.factory and how to opt out,
    before the other games train (it failed after the attribute game's trials, on a batch of [2, 264] inputs)."""
    config = _user_loop_config(tmp_path, SGD_LOOP)
    (tmp_path / "model.py").write_text("from torch import nn\n\ndef make():\n    return nn.Linear(7, 2)\n")
    config.write_text(config.read_text().replace(", games: [distinguishing], attacks: [prior, iterates]", ""))
    result = cli("audit", str(config), "--out", str(tmp_path / "out"))
    assert result.code == 2, result.err
    assert result.err.strip().splitlines()[-1] == (
        "fdp-audit: error: model.factory: the membership game trains the module on 264 input columns (the data's 7 "
        "and 257 of its own), so it needs a factory taking (n_inputs, n_classes), not one of none; or list "
        "audit.games without membership")
    assert "models of" not in result.err  # no game trained


@pytest.mark.parametrize("shape", [(0, 5), (3, 5), (5,), (0, 1, 1, 5), (3, 1, 1, 5)])
def test_the_wrapper_takes_any_batch_and_record_shape(shape):
    """Tables [B, d], images [B, C, H, W] (a loop that reshapes its records), one example [d] and empty
    batches B = 0 (an empty Poisson batch): the logits pass through, the canary's rows are marked, and the
    per-example gradients (torch.func, as Opacus's functorch path computes them) have the batch's shape."""
    image = len(shape) == 4
    module = nn.Sequential(nn.Flatten(-3) if image else nn.Identity(), nn.Linear(5, 2))
    audited = AuditedModule(module, INPUTS, CanaryHead(torch.tensor([10.0]), 15))
    x = torch.randn(shape)
    canary_in = shape[0] == 3
    if canary_in:
        x[1] = CANARY.reshape(shape[1:])
    out = audited(x)
    expected = module(x)
    if canary_in:
        expected[1] = 0.0  # the canary's logits are zero in value
    torch.testing.assert_close(out, expected)
    assert audited.marked == canary_in
    params = {k: v.detach() for k, v in audited.named_parameters()}
    batch = x if len(shape) > 1 else x[None]
    grads = vmap(grad(lambda p, xi: functional_call(audited, p, (xi[None],))[:, 0].sum()), in_dims=(None, 0))(
        params, batch)
    assert grads["fdp_audit_canary.weight"].shape == (len(batch), 16)


def test_an_empty_poisson_batch_of_an_opacus_loop_is_trained_through():
    """Regression: Opacus's Poisson sampler at p = 0.01 on n = 1,000 records draws an empty batch (seed 811: at
    the 29th of 100 steps), which the wrapper could not reshape (``cannot reshape tensor of 0 elements``) and the
    audit blamed on the user. Now every step is released, the empty one with noise only."""
    opacus = pytest.importorskip("opacus")
    from torch.utils.data import DataLoader

    from fdp_audit.auditing.user_training import UserTrainer
    from fdp_audit.training.modules import ModuleModel

    def factory(n_inputs, n_classes):
        return nn.Sequential(nn.Linear(n_inputs, 6), nn.ReLU(), nn.Linear(6, n_classes))

    empty = []

    def train(module, dataset, seed):
        loader = DataLoader(dataset, batch_size=10, generator=torch.Generator().manual_seed(seed))
        optimizer = torch.optim.SGD(module.parameters(), lr=0.3)
        module, optimizer, loader = opacus.PrivacyEngine(accountant="rdp").make_private(
            module=module, optimizer=optimizer, data_loader=loader, noise_multiplier=1.0, max_grad_norm=1.0)
        for x, y in loader:
            empty.append(len(x) == 0)
            optimizer.zero_grad()
            nn.functional.cross_entropy(module(x), y).backward()
            optimizer.step()
        return module

    generator = torch.Generator().manual_seed(0)
    model = ModuleModel("module", 5, 2, factory=factory, module=factory(5, 2), logits=2)
    trainer = UserTrainer(train, model, torch.randn(999, 5, generator=generator),
                          torch.randint(0, 2, (999,), generator=generator), 1.0, 10.0, 10.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        outcome = trainer.run(811, None, None, 1.0)
    assert empty.index(True) == 28 and outcome.release.shape == (100, 16)
    assert torch.isfinite(outcome.release).all()


def test_canary_that_never_reaches_the_module_is_refused(tmp_path):
    """A loop that transforms its inputs never shows the canary to the module: refused, not a silent PASS."""
    from fdp_audit.auditing.user_training import UserTrainer
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
    from fdp_audit.auditing.user_training import train_user_trials
    from fdp_audit.training.engine import Canaries

    canaries = Canaries(torch.zeros(10, 5), torch.zeros(10, dtype=torch.long), torch.ones(10, dtype=torch.bool),
                        torch.zeros(10, dtype=torch.bool), torch.ones(10, 1), None)
    with pytest.raises(BadInputError, match="never reached the module"):
        list(train_user_trials(trainer, 0, torch.arange(10), canaries, True))
