"""User CNNs through the layer plan (fdp_audit/training/layer_plan.py, conv_ghost.py): per-example norms and clipped
sums of planned modules equal torch.func's per-example gradients (ℓ_priv = ℓ − ℓ_pub∘Ψ and DP-SGD's ℓ, both conv
routes, batched over models); a module the plan cannot cover falls back to torch.func and trains the same models;
BatchNorm is bad input; ``fdp-audit train`` with a user CNN takes the fast path."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from fdp_audit.cli import main
from fdp_audit.config import OptimizerConfig, load_config
from fdp_audit.data.image_psi import DownsamplePublicMap
from fdp_audit.data.prepare import prepare_data
from fdp_audit.errors import BadInputError
from fdp_audit.mechanisms import MECHANISMS
from fdp_audit.training import conv_ghost, engine, layer_plan, modules
from fdp_audit.training.cnn import cnn_model
from fdp_audit.training.engine import Hyperparameters, TrainingProblem, train_models
from fdp_audit.training.layer_plan import AlongDim, Channelwise, Conv, GroupNorm, LayerNorm, Linear
from fdp_audit.training.modules import ModuleModel, build_module_model
from fdp_audit.training.public_losses import build_public_loss
from fdp_audit.training.run import build_problem
from tests.conftest import small_config, write_yaml
from tests.training.test_conv_ghost import _materialised, _params, assert_clips_as_torch_func

CNNS = Path(__file__).parent / "user_modules" / "cnns.py"
PSI = DownsamplePublicMap(8, 8, factor=2)


def _module(name: str, n_classes: int = 3) -> ModuleModel:
    return build_module_model(f"{CNNS}:{name}", 64, n_classes)


def _case(model: ModuleModel, decomposed: bool, r: int = 3, k: int = 6, seed: int = 0):
    generator = torch.Generator().manual_seed(seed + 1)
    x = torch.rand(r, k, 64, generator=generator, dtype=torch.float64)
    y = torch.randint(0, model.n_classes, (r, k), generator=generator)
    public_inputs = PSI.public_image(PSI(x, y).features) if decomposed else None
    return _params(model, r, seed), x, y, public_inputs


MODULES = {"strided": lambda: _module("strided"), "layer-norm": lambda: _module("layer_norm", 2),
           "dilated": lambda: _module("dilated", 10), "grouped": lambda: _module("grouped"),
           "idioms": lambda: _module("idioms"), "tutorial": lambda: _module("tutorial"),
           "builtin-cnn": lambda: cnn_model(64, 10, (4, 8))}


@pytest.mark.parametrize("name", sorted(MODULES))
@pytest.mark.parametrize("decomposed", [False, True], ids=["dp-sgd", "fdp"])
@pytest.mark.parametrize("route", ["ghost", "direct"])
def test_planned_modules_clip_as_torch_func_does(name, decomposed, route):
    """Float64, three models batched: norms and clipped sums (about half the examples clipped) to 1e-10. In-place
    activations after recorded layers (``idioms``) gave every norm wrong before the plan ran them out of place."""
    model = MODULES[name]()
    assert conv_ghost.supports(model), model.unplanned
    params, x, y, public_inputs = _case(model, decomposed)
    assert_clips_as_torch_func(model, params, x, y, public_inputs, route, padded=1)
    weights = torch.rand(x.shape[:2], dtype=torch.float64)
    public_gradient = torch.einsum("rk,rkp->rp", weights, _materialised(model, params, x, y, None))
    torch.testing.assert_close(conv_ghost.gradient_sum(model, params, x, y, weights), public_gradient, rtol=1e-10,
                               atol=1e-10)


def test_the_plans_hold_the_layers_the_modules_name():
    steps = [p.step for p in _module("strided").plan.steps]
    convs = [s for s in steps if isinstance(s, Conv)]
    assert [(c.kernel, c.stride, c.padding) for c in convs] == [((5, 5), (2, 2), (2, 2)), ((3, 3), (1, 1), (1, 1))]
    assert sum(isinstance(s, Linear) for s in steps) == 2
    assert any(isinstance(s, Channelwise) and isinstance(s.fn, torch.nn.MaxPool2d) for s in steps)
    layer_norm = [p.step for p in _module("layer_norm").plan.steps]
    assert [s.bias for s in layer_norm if isinstance(s, (Conv, Linear))] == [False, False]
    assert any(isinstance(s, LayerNorm) and s.shape == (3, 8, 8) for s in layer_norm)
    dilated = [p.step for p in _module("dilated").plan.steps if isinstance(p.step, Conv)]
    assert dilated[0].padding == (2, 2) and dilated[0].dilation == (2, 2)
    grouped = [p.step for p in _module("grouped").plan.steps]
    assert [s.groups for s in grouped if isinstance(s, Conv)] == [1, 4, 1]
    assert [(s.groups, s.channels) for s in grouped if isinstance(s, GroupNorm)] == [(8, 8)]  # the InstanceNorm
    idioms = _module("idioms")
    relu = next(p.step.fn for p in idioms.plan.steps if isinstance(getattr(p.step, "fn", None), torch.nn.ReLU))
    assert not relu.inplace and idioms.module.act.inplace  # the plan's copy runs out of place; the module is kept


def _image_problem(model, mechanism: str = "fdp_sgd", start=None) -> TrainingProblem:
    generator = torch.Generator().manual_seed(3)
    x = torch.rand(48, 64, generator=generator)
    y = torch.randint(0, model.n_classes, (48,), generator=generator)
    hyper = Hyperparameters(noise_multiplier=0.8, sample_rate=0.25, steps=4, clip_norm=0.5, public_batch_size=8,
                            optimizer=OptimizerConfig(lr=0.2))
    return TrainingProblem(model, x, y, PSI, build_public_loss("public_image", PSI), MECHANISMS[mechanism].recipe,
                           hyper, start)


@pytest.mark.parametrize("mechanism", ["fdp_sgd", "dp_sgd"])
def test_a_module_without_a_plan_falls_back_to_torch_func_and_trains_the_same_models(monkeypatch, capsys, mechanism):
    """``padded`` is ``strided`` with its first padding as a ZeroPad2d layer, which has no plan: it is trained by
    torch.func (a line on stderr names the layer), from the same start to the same models (float32, 1e-5)."""
    monkeypatch.setattr(modules, "_REPORTED", set())
    fallback = _module("padded")
    assert fallback.plan is None and "ZeroPad2d" in fallback.unplanned
    assert "no per-layer norms for 1 (ZeroPad2d)" in capsys.readouterr().err
    planned = _module("strided")
    start = {name: value[0] for name, value in planned.init(torch.tensor([[1, 2]], dtype=torch.int32)).items()}
    renamed = dict(zip(fallback.shapes(), start.values(), strict=True))
    slow_problem, fast_problem = _image_problem(fallback, mechanism, renamed), _image_problem(planned, mechanism, start)
    assert engine.private_path(slow_problem) == "materialised" and engine.private_path(fast_problem) == "conv"
    (slow,) = train_models(slow_problem, 5, range(3), record_iterates=True)
    (fast,) = train_models(fast_problem, 5, range(3), record_iterates=True)
    assert fast.iterates.private_batch_sizes.sum() > 0
    torch.testing.assert_close(fast.iterates.noisy_private_sums, slow.iterates.noisy_private_sums, rtol=1e-5,
                               atol=1e-5)
    for (name, value), slow_value in zip(fast.params.items(), slow.params.values(), strict=True):
        torch.testing.assert_close(value, slow_value, rtol=1e-5, atol=1e-5, msg=name)


def test_a_residual_connection_or_a_softmax_across_the_batch_has_no_plan():
    model = _module("residual")
    assert model.plan is None and "not a chain" in model.unplanned
    assert engine.private_path(_image_problem(model)) == "materialised"
    assert "softmax along dim=0" in _module("batch_softmax").unplanned
    (along,) = [p.step for p in _module("tutorial").plan.steps if isinstance(p.step, AlongDim)]
    assert along.dim == 1


@pytest.mark.parametrize("name", ["no_grad", "detached", "gradient_scaled"])
def test_a_module_whose_gradient_code_torch_fx_drops_falls_back_to_torch_func(monkeypatch, capsys, name):
    """torch.fx drops a ``torch.no_grad()`` block and module hooks, so the traced layers give the module's outputs
    but not its gradients: these modules were planned, and their norms clipped as if the convolution learned (the
    frozen ones) or at full gradient (the hook halves it). Now the plan's check compares gradients and refuses them;
    torch.func's per-example gradients, which the engine takes instead, honour the module's gradient code."""
    monkeypatch.setattr(modules, "_REPORTED", set())
    model = _module(name)
    assert model.plan is None and "gradients are not the module's" in model.unplanned
    assert "no per-layer norms for the traced layers" in capsys.readouterr().err
    assert engine.private_path(_image_problem(model)) == "materialised"
    params, x, y, _ = _case(model, decomposed=False)
    gradients = _materialised(model, params, x, y, None)
    conv = sum(v[0].numel() for v in list(params.values())[:2])  # the convolution's weight and bias come first
    if name == "gradient_scaled":
        plain = _module(name)
        plain.module[1]._forward_hooks.clear()
        torch.testing.assert_close(gradients[..., :conv], 0.5 * _materialised(plain, params, x, y, None)[..., :conv],
                                   rtol=1e-10, atol=1e-12)
    else:
        assert gradients[..., :conv].abs().max() == 0 and gradients[..., conv:].abs().max() > 0


def test_layers_applied_to_activations_of_another_rank_have_no_plan():
    """A linear layer over the last axis of ``[B, C, L]`` crashed the plan's batched matrix product (``fdp-audit
    train`` exited 3); a 2-D pooling of ``[B, C, L]`` (torch reads one unbatched image) matched by coincidence."""
    assert _module("linear_over_positions", 10).unplanned == (
        "mix (a linear layer on per-example inputs of shape [4, 64], not 1-D)")
    assert "a 2-D pooling on per-example inputs of shape [4, 64], not 3-D" in _module("pool_over_positions").unplanned


def test_a_plan_whose_forward_pass_fails_is_refused(monkeypatch):
    """Whatever call the walk may misread in future, its failure leaves the module on torch.func, not a crash."""

    def misread(*args, **kwargs):
        raise RuntimeError("batch1 must be a 3D tensor")

    monkeypatch.setattr(layer_plan, "run_step", misread)
    with pytest.raises(layer_plan.Unsupported, match="forward pass fails: RuntimeError: batch1 must be a 3D tensor"):
        layer_plan.trace(_module("strided").module, 64)


def test_batch_norm_is_bad_input():
    with pytest.raises(BadInputError, match="BatchNorm layer .*BatchNorm2d.*mix the records") as caught:
        _module("batch_norm")
    assert caught.value.field == "model.factory"


def _digits_config(tmp_path: Path, factory: str) -> Path:
    raw = small_config("fdp_sgd", data={"dataset": "digits", "protected": [], "public_map": "downsample",
                                        "downsample_factor": 2, "population_fraction": 0.3},
                       model={"kind": "module", "factory": f"{CNNS}:{factory}"},
                       mechanism={"public_loss": "public_image", "sample_rate": 0.05, "steps": 4,
                                  "optimizer": {"name": "sgd", "lr": 0.1}},
                       report={"out_dir": str(tmp_path)})
    return write_yaml(tmp_path / "cnn.yaml", raw)


def test_train_cli_refuses_batch_norm_with_one_line_and_exit_2(tmp_path, capsys):
    assert main(["train", str(_digits_config(tmp_path, "batch_norm"))]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "model.factory" in err and "BatchNorm" in err
    assert not (tmp_path / "model.pt").exists()


def test_train_cli_trains_a_user_cnn_on_the_fast_path(tmp_path, capsys, monkeypatch):
    """``fdp-audit train`` with ``kind: module`` naming a CNN factory: every private step clips through the layer
    plan (conv_ghost), none through torch.func, and a checkpoint is written."""
    config = _digits_config(tmp_path, "strided")
    calls = {"conv": 0}
    planned_sum = conv_ghost.clipped_private_sum

    def counted(*args, **kwargs):
        calls["conv"] += 1
        return planned_sum(*args, **kwargs)

    def refused(*args, **kwargs):
        raise AssertionError("the torch.func path was taken")

    monkeypatch.setattr(conv_ghost, "clipped_private_sum", counted)
    monkeypatch.setattr(engine._Step, "_materialised_sum", refused)
    assert main(["train", str(config), "--out", str(tmp_path / "model.pt")]) == 0
    out = capsys.readouterr()
    assert "no per-layer norms" not in out.err and (tmp_path / "model.pt").is_file()
    assert calls["conv"] == 4  # one per private step
    loaded = load_config(config)
    model = build_problem(loaded, prepare_data(loaded.data, 0)).model
    assert conv_ghost.supports(model)


def test_train_cli_trains_a_linear_over_positions_by_torch_func(tmp_path, capsys, monkeypatch):
    """The module that crashed ``fdp-audit train`` (exit 3, in the plan's batched matrix product) trains by
    torch.func: exit 0, a checkpoint, and stderr naming the layer."""
    monkeypatch.setattr(modules, "_REPORTED", set())
    config = _digits_config(tmp_path, "linear_over_positions")
    assert main(["train", str(config), "--out", str(tmp_path / "model.pt")]) == 0
    assert "no per-layer norms for mix (a linear layer" in capsys.readouterr().err
    assert (tmp_path / "model.pt").is_file()
