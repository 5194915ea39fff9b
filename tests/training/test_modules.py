"""Any nn.Module as a model (fdp_audit/training/modules.py): factories named by a config, the functional interface
the engine uses, the vmap-or-loop choice over models, and bad factories as bad input."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import torch
import yaml

from fdp_audit.config import load_config
from fdp_audit.data.prepare import prepare_data
from fdp_audit.errors import BadInputError
from fdp_audit.training.engine import train_models
from fdp_audit.training.models import Model
from fdp_audit.training.modules import ModelsMap, ModuleModel, build_module_model
from fdp_audit.training.run import build_problem
from tests.conftest import small_config

FACTORIES = Path(__file__).parent / "user_modules" / "factories.py"


def _config(tmp_path: Path, factory: str, **mechanism):
    """A config in ``tmp_path`` naming a factory file by a path relative to the config's folder."""
    relative = Path("..") / Path(*FACTORIES.relative_to(Path(__file__).parents[2]).parts)
    raw = small_config("dp_sgd", model={"factory": f"{relative.as_posix()}:{factory}", "kind": "module"},
                       mechanism={"noise_multiplier": 1.0, "sample_rate": 0.2, "steps": 8, "clip_norm": 0.5,
                                  **mechanism})
    repo_copy = tmp_path / "configs"
    repo_copy.mkdir(exist_ok=True)
    # the config sits one folder below a copy of the repository root, so `../tests/...` resolves from its folder
    (tmp_path / "tests").symlink_to(Path(__file__).parents[1], target_is_directory=True)
    path = repo_copy / "module.yaml"
    path.write_text(yaml.safe_dump(raw))
    return load_config(path)


def _builtin_params(module_model: ModuleModel, builtin: Model, keys_params: dict) -> dict:
    """The built-in MLP's parameters under the module's names (Sequential: 0 = first linear, 2 = second)."""
    names = {"layer0.weight": "0.weight", "layer0.bias": "0.bias", "layer1.weight": "2.weight",
             "layer1.bias": "2.bias"}
    return {names[k]: v for k, v in keys_params.items()}


def test_factory_resolved_from_config_folder_with_sibling_import(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path.parent)  # the working folder is not the config's
    config = _config(tmp_path, "in_place")
    assert config.model.kind == "module" and Path(config.model.factory.rpartition(":")[0]).is_absolute()
    data = prepare_data(config.data, 0)
    model = build_problem(config, data).model
    assert isinstance(model, ModuleModel)
    assert list(model.shapes()) == ["0.weight", "0.bias", "2.weight", "2.bias"]  # the module's own names


def test_module_training_equals_builtin_mlp(tmp_path):
    """The torch.func path on the user's module and the built-in MLP's ghost path train the same models from the
    same start: same clipping, sampling and noise streams (float rounding, 1e-5)."""
    config = _config(tmp_path, "mlp")
    data = prepare_data(config.data, 0)
    problem = build_problem(config, data)
    builtin = Model("mlp", problem.model.n_inputs, 2, (8,))
    builtin_problem = replace(problem, model=builtin)
    module_problem = replace(problem, model=_with_init(problem.model, builtin))
    (ours,) = train_models(module_problem, 3, range(5))
    (reference,) = train_models(builtin_problem, 3, range(5))
    renamed = _builtin_params(problem.model, builtin, reference.params)
    for name, value in ours.params.items():
        torch.testing.assert_close(value, renamed[name], atol=1e-5, rtol=1e-5)


def _with_init(model: ModuleModel, builtin: Model) -> ModuleModel:
    """The module model started from the built-in MLP's initialisation."""

    class Started(ModuleModel):
        def init(self, keys, device="cpu"):
            return _builtin_params(self, builtin, builtin.init(keys, device))

    return Started(model.kind, model.n_inputs, model.n_classes, factory=model.factory, module=model.module)


def test_in_place_module_loops_over_models_and_trains_the_same(tmp_path):
    """A module without a batching rule over stacked parameters is trained by the loop over models, to the same
    result as the vmapped module computing the same function."""
    config = _config(tmp_path, "in_place")
    data = prepare_data(config.data, 0)
    problem = build_problem(config, data)
    linear = build_module_model(config.model.factory.replace(":in_place", ":mlp"), problem.model.n_inputs, 2)
    start = problem.model.init(torch.zeros(3, 2, dtype=torch.int32) + torch.arange(3)[:, None].int())

    def started(model: ModuleModel) -> ModuleModel:
        class Started(ModuleModel):
            def init(self, keys, device="cpu"):
                return {k: v.clone() for k, v in start.items()}
        return Started(model.kind, model.n_inputs, model.n_classes, factory=model.factory, module=model.module)

    looped_problem = replace(problem, model=started(problem.model))
    (looped,) = train_models(looped_problem, 3, range(3))
    (batched,) = train_models(replace(problem, model=started(linear)), 3, range(3))
    for name in looped.params:
        torch.testing.assert_close(looped.params[name], batched.params[name], atol=1e-5, rtol=1e-5)


def test_init_depends_on_the_key_only(tmp_path):
    config = _config(tmp_path, "mlp")
    model = build_problem(config, prepare_data(config.data, 0)).model
    keys = torch.tensor([[1, 2], [3, 4], [1, 2]], dtype=torch.int32)
    params = model.init(keys)
    assert torch.equal(params["0.weight"][0], params["0.weight"][2])
    assert not torch.equal(params["0.weight"][0], params["0.weight"][1])


@pytest.mark.parametrize(("factory", "message"), [
    ("not_a_module", "not a torch.nn.Module"),
    ("wrong_output", "expected logits"),
    ("missing_function", "has no function"),
])
def test_bad_factories_are_bad_input(tmp_path, factory, message):
    config = _config(tmp_path, factory)
    with pytest.raises(BadInputError, match=message) as caught:
        build_problem(config, prepare_data(config.data, 0))
    assert caught.value.field == "model.factory"


@pytest.mark.parametrize("factory", ["sign_branch", "counting_buffer"])
def test_modules_torch_func_cannot_transform_are_bad_input_when_trained(tmp_path, factory):
    """They build, but neither vmap over models nor the per-model loop can differentiate them per example."""
    config = _config(tmp_path, factory)
    problem = build_problem(config, prepare_data(config.data, 0))
    with pytest.raises(BadInputError, match="per-example gradients with torch.func") as caught:
        list(train_models(problem, 0, range(2)))
    assert caught.value.field == "model.factory" and "\n" not in str(caught.value)


def test_factory_without_arguments(tmp_path):
    config = _config(tmp_path, "fixed")
    model = build_problem(config, prepare_data(config.data, 0)).model
    assert list(model.shapes()) == ["weight", "bias"]


def test_models_map_vmaps_where_it_can_and_loops_where_it_must(tmp_path):
    config = _config(tmp_path, "in_place")
    in_place = build_problem(config, prepare_data(config.data, 0)).model
    linear = build_module_model(config.model.factory.replace(":in_place", ":mlp"), in_place.n_inputs, 2)
    x = torch.randn(4, in_place.n_inputs)
    for model, looped in ((in_place, True), (linear, False)):
        params = model.init(torch.arange(6, dtype=torch.int32).reshape(3, 2))
        mapped = ModelsMap(model.forward, in_dims=(0, None))
        out = mapped(params, x)
        assert mapped.looped is looped
        torch.testing.assert_close(out[1], model.forward({k: v[1] for k, v in params.items()}, x))
