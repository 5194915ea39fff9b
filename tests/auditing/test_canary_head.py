"""The canary head (fdp_audit/auditing/canary_head.py): M canaries recognised by input in O(B·D), each whose per-example
gradient is g_i·e_i on its own head coordinate whatever computes per-example gradients (torch.func, Opacus hooks,
functorch, ghost clipping), empty batches and batches of many canaries included."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.func import functional_call, grad, vmap

from fdp_audit.auditing.canary_head import AuditedModule, CanaryHead, CanaryInputs, UpdateObserver
from fdp_audit.errors import BadInputError


def test_ten_thousand_canaries_are_recognised_exactly_and_no_record_is():
    inputs = CanaryInputs(10_000, (3, 4), 7.0)
    every = torch.arange(10_000)
    x = inputs.inputs(every)
    assert x.shape == (10_000, 3, 4) and len(torch.unique(x.reshape(10_000, -1), dim=0)) == 10_000
    torch.testing.assert_close(inputs.indices(x), every)
    records = torch.randn(500, 3, 4) * 3
    near = x[:50].clone()
    near[:, 1, 2] += 0.5  # one value off: not a canary
    assert (inputs.indices(torch.cat([records, near])) == -1).all()
    assert inputs.indices(torch.zeros(0, 3, 4)).shape == (0,)
    for dtype in (torch.float16, torch.float64):
        torch.testing.assert_close(inputs.indices(inputs.inputs(every[:300], dtype)), every[:300])


def test_recognition_holds_no_tensor_that_grows_with_the_canaries():
    """O(B·D) recognition: the inputs' description is a few numbers and the digits' powers, whatever M."""
    for count in (1, 100_000):
        inputs = CanaryInputs(count, (784,), 2.0)
        held = sum(v.numel() for v in vars(inputs).values() if isinstance(v, torch.Tensor))
        assert held == inputs.digits <= 5


def test_inputs_too_small_for_the_canaries_are_refused():
    with pytest.raises(BadInputError, match="do not fit"):
        CanaryInputs(100, (1,), 2 ** 24)
    assert CanaryInputs(1000, (1,), 3.0).radix >= 1000  # one coordinate: one digit of a large radix


def _audited(count: int, n_logits: int, seed: int = 0) -> tuple[AuditedModule, torch.Tensor]:
    torch.manual_seed(seed)
    module = nn.Sequential(nn.Linear(6, 5), nn.ReLU(), nn.Linear(5, n_logits))
    gradients = torch.linspace(-3.0, 4.0, count)
    return AuditedModule(module, CanaryInputs(count, (6,), 9.0), CanaryHead(gradients, 7)), gradients


def _batch(audited: AuditedModule, canaries: list[int], records: int) -> tuple[torch.Tensor, torch.Tensor]:
    x = torch.cat([torch.randn(records, 6), audited.canary_inputs.inputs(torch.tensor(canaries, dtype=torch.long))])
    y = torch.cat([torch.randint(0, 2, (records,)), torch.zeros(len(canaries), dtype=torch.long)])
    return x, y


def _loss(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    if out.shape[-1] == 1:
        return nn.functional.binary_cross_entropy_with_logits(out[:, 0], y.float())
    return nn.functional.cross_entropy(out, y)


@pytest.mark.parametrize("n_logits", [1, 2, 5])
def test_torch_func_gives_each_canary_its_gradient_on_its_coordinate(n_logits):
    audited, gradients = _audited(40, n_logits)
    canaries = [3, 17, 39, 0, 22]
    x, y = _batch(audited, canaries, records=4)
    params = {k: v.detach() for k, v in audited.named_parameters()}
    grads = vmap(grad(lambda p, xi, yi: _loss(functional_call(audited, p, (xi[None],)), yi[None])),
                 in_dims=(None, 0, 0))(params, x, y)
    head = grads["fdp_audit_canary.weight"]
    expected = torch.zeros(9, 47)
    expected[torch.arange(4, 9), canaries] = gradients[canaries]
    torch.testing.assert_close(head, expected)
    for name, g in grads.items():
        if name != "fdp_audit_canary.weight":
            assert torch.count_nonzero(g[4:]) == 0 and torch.count_nonzero(g[:4]) > 0
    assert audited.marked == 5 and audited.marks[canaries].tolist() == [1] * 5


@pytest.mark.parametrize("mode", ["hooks", "functorch", "ghost"])
def test_opacus_clips_and_sums_each_canary_on_its_coordinate(mode):
    """Opacus's per-example engines (the registered grad and norm samplers, its functorch fallback, ghost clipping)
    clip each canary's gradient to C on its coordinate: a mixed batch, a batch of canaries only, an empty batch."""
    from opacus import PrivacyEngine
    from torch.utils.data import DataLoader, TensorDataset

    audited, gradients = _audited(30, 2)
    canaries = list(range(0, 30, 2))
    x, y = _batch(audited, canaries, records=3)
    clip = 1.5
    batches = [list(range(len(x))), list(range(3, len(x)))]
    loader = DataLoader(TensorDataset(x, y), batch_sampler=batches)
    criterion = nn.CrossEntropyLoss(reduction="sum")
    extra = {"criterion": criterion} if mode == "ghost" else {}
    made = PrivacyEngine().make_private(
        module=audited, optimizer=torch.optim.SGD(audited.parameters(), lr=1.0), data_loader=loader,
        noise_multiplier=0.0, max_grad_norm=clip, poisson_sampling=False, loss_reduction="sum",
        grad_sample_mode="ghost" if mode == "ghost" else mode, **extra)
    model, optimizer = made[0], made[1]
    criterion = made[2] if mode == "ghost" else criterion
    head = audited.head.weight
    for batch in [*loader, (x[:0], y[:0])]:
        before = head.detach().clone()
        optimizer.zero_grad()
        criterion(model(batch[0]), batch[1]).backward()
        optimizer.step()
        expected = torch.zeros(37)
        if len(batch[0]):
            expected[canaries] = gradients[canaries].clamp(-clip, clip)
        torch.testing.assert_close(before - head.detach(), expected, atol=1e-5, rtol=1e-5)


def test_observer_releases_the_update_in_units_of_the_noisy_sum():
    """Plain SGD: −Δw/lr·B; momentum SGD: the gradient it consumed; steps of optimizers without the head are
    ignored; releases gathered across flushes keep their order."""
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
        for i in range(300):
            head.grad = torch.full((3,), float(i))
            momentum.step()
    plain.step()  # after the block: not observed
    releases = observer.releases
    torch.testing.assert_close(releases[0], torch.tensor([4.0, -8.0, 2.0]))
    torch.testing.assert_close(releases[1], torch.tensor([8.0, 0.0, 0.0]))
    torch.testing.assert_close(releases[2:, 0], 4.0 * torch.arange(300.0))
    assert observer.steps == 302


@pytest.mark.parametrize("optimizer", ["lbfgs", "adam_with_closure", "adam_without_gradient", "noised_inside_step"])
def test_a_step_whose_release_cannot_be_read_is_refused_never_zeros(optimizer):
    """The release of a non-linear optimizer is the gradient the head held when step() began: a step that had
    none, computed it in a closure (LBFGS, Adam.step(closure)) or changed it inside step() is refused naming
    the field, instead of released as zeros (a non-private LBFGS loop passed with an all-zero release)."""
    head = nn.Parameter(torch.zeros(3))

    def closure():
        head.grad = torch.ones(3)
        return torch.tensor(0.0)

    class NoisedInside(torch.optim.Optimizer):  # a hand-written "private" optimizer noising inside step()
        def __init__(self, params):
            super().__init__(params, {"lr": 0.1})

        @torch.no_grad()
        def step(self, closure=None):
            for parameter in self.param_groups[0]["params"]:
                parameter.grad.add_(torch.randn_like(parameter))
                parameter.sub_(0.1 * parameter.grad)

    observer = UpdateObserver(head, field="mechanism.training")
    with observer.active():
        if optimizer == "lbfgs":
            torch.optim.LBFGS([head], max_iter=2).step(closure)
        elif optimizer == "adam_with_closure":
            head.grad = torch.zeros(3)
            torch.optim.Adam([head]).step(closure)
        elif optimizer == "adam_without_gradient":
            torch.optim.Adam([head]).step()
        else:
            head.grad = torch.zeros(3)
            NoisedInside([head]).step()
    assert observer.steps == 1
    with pytest.raises(BadInputError, match=r"cannot be read") as refused:
        _ = observer.releases
    assert refused.value.field == "mechanism.training"


def test_observer_counts_every_change_of_the_head_outside_the_observed_steps():
    """The head must move only in the steps read: a change before the first (steps before the observation), between
    two (``p -= lr·p.grad`` by hand) or after the last is counted; a correct loop, with a non-linear optimizer too,
    counts none."""
    for moves in ((), ("before",), ("between",), ("after",), ("before", "between", "after")):
        head = nn.Parameter(torch.zeros(3))
        observer = UpdateObserver(head)
        adam = torch.optim.Adam([head], lr=0.1)
        head.grad = torch.ones(3)
        if "before" in moves:
            adam.step()  # not observed yet
        with observer.active():
            for step in range(4):
                if step == 2 and "between" in moves:
                    with torch.no_grad():
                        head -= 0.1 * head.grad
                head.grad = torch.full((3,), float(step + 1))
                adam.step()
            if "after" in moves:
                with torch.no_grad():
                    head[0] -= 0.5
        assert observer.steps == 4 and observer.unobserved_changes == len(moves), moves
