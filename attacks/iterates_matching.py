"""``iterates`` informed gradient matching on a record canary whose protected part is a subspace (docs/images.md),
after Hayes, Mahloujifar & Balle (NeurIPS 2023, "Bounding Training Data Reconstruction in DP-SGD") and the informed
adversary of Balle, Cherubin & Hayes (2022): the adversary knows every other record, the training procedure and
its starting point θ₀, sees every released noisy private sum ``y_t`` and public gradient, and reconstructs the
target ``x(a) = t + aᵀV`` (t its visible part, V an orthonormal basis of the protected subspace, a ~ N(0, s²I_m)).

1. **The trajectory.** SGD with heavy-ball momentum μ updates ``θ_{t+1} = θ_t − η_t b_t``,
   ``b_t = μ b_{t−1} + g_pub,t + c·y_t`` with c = w / (expected batch) unknown (it holds the sampling rate). The
   update is linear in c, so ``θ_t = A_t + c B_t`` with A run on the public gradients from θ₀ and B on the private
   sums from 0; the final parameters fix ``ĉ = ⟨θ_T − A_T, B_T⟩ / ‖B_T‖²``.
2. **The others' contribution.** ``S_t = Σ_{x' ∈ S∖{x}} clip_C(∇ℓ_priv(θ_t; x'))`` (ℓ_priv = ℓ − ℓ_pub∘Ψ for a
   decomposed recipe, ℓ otherwise). A Poisson batch contributes ``p S_t`` on average, so the rate is estimated by
   ``p̂ = Σ_t ⟨y_t, S_t⟩ / Σ_t ‖S_t‖²`` and the target's estimated gradient is ``ĝ_t = y_t − p̂ S_t``; the noise
   per coordinate (the mechanism's plus the others' sampling) by ``σ̂² = mean_{t,j} ĝ_{t,j}²``.
3. **The posterior.** With ``c_t(a) = clip_C(∇ℓ_priv(θ_t; x(a)))`` and ĝ_t ≈ b_t c_t(a) + N(0, σ̂²I), b_t ~
   Bernoulli(p̂) the target's own sampling, the log posterior of a is, up to a constant,

       Σ_t log[(1 − p̂) + p̂ exp((⟨ĝ_t, c_t(a)⟩ − ½‖c_t(a)‖²) / σ̂²)] − ‖a‖² / (2s²),

   maximised by Levenberg–Marquardt from the best of the prior's mean and a few fixed draws from the prior
   (:func:`search`), batched over trials and steps: every (trial, step) pair is one model of a batch on its own
   canary. Where the release says nothing
   (large noise) the prior term keeps the estimate at the prior's mean, whose success is Ball(ρ).

Nothing here reads the claimed noise multiplier or sampling rate: ĉ, p̂ and σ̂ come from the release. What it
assumes of the procedure is what a run is set up with: the optimiser (SGD; Adam and projections are refused),
the clip norm, the losses, and a starting point fixed before the data are seen (the game fixes it).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from attacks.base import Attack, AttackOutput, Knowledge, ProtectedSubspace, View
from fdp_audit.errors import BadInputError
from fdp_audit.training.interface import (
    TrainingProblem,
    clipped_private_sums,
    flatten,
    learning_rate,
    private_losses,
    unflatten,
)

ITERATIONS = 20  # Levenberg–Marquardt iterations on the posterior
PROBES = 32  # draws from the prior (and its mean) at which the posterior is evaluated before the search
STARTS = 3  # the best probes each trial's search starts from
PROBE_SEED = 0x5EED  # the probes are the same for every trial: they depend on nothing secret
INITIAL_DAMPING = 1e-2
DIFFERENCE_STEP = 1e-3  # forward differences of the float32 clipped gradient, in units of the prior's scale s
STEP_TOLERANCE = 1e-4  # iteration stops once no trial's proposed step is longer, in units of s
MIN_NOISE = 1e-12  # σ̂² floor: a noiseless release still gives finite scores


class IteratesGradientMatching(Attack):
    """The ``gradient_matching_iterates`` attack (every noisy update, informed; module docstring, docs/images.md):
    reconstructs an image canary's protected coordinates a by replaying the trajectory, estimating the target's
    clipped gradients, the sampling rate and the noise from the release, and maximising the log posterior
    ``Σ_t log[(1 − p̂) + p̂ exp((⟨ĝ_t, c_t(a)⟩ − ½‖c_t(a)‖²) / σ̂²)] − ‖a‖² / (2s²)`` by Levenberg–Marquardt."""

    name = "gradient_matching_iterates"
    title = "gradient matching on the released updates"
    threat_model = "iterates"
    supports = frozenset({"subspace"})
    needs = ("procedure", "protected_subspace", "clip_norm")

    def fit(self, knowledge: Knowledge) -> IteratesGradientMatching:
        """Check that the training procedure can be replayed (module docstring, step 1).

        Args:
            knowledge: a subspace target with the ``procedure``, ``protected_subspace`` and ``clip_norm``.

        Returns:
            The attack itself.

        Raises:
            BadInputError: a field it needs is missing, the optimiser is not SGD or projects, the starting point is
                not fixed before training (none given, or public pre-training), or the public loss pads with fresh
                noise.
        """
        super().fit(knowledge)
        procedure = knowledge.procedure
        assert procedure is not None
        hyper = procedure.hyper
        if hyper.optimizer.name != "sgd" or hyper.projection_radius is not None:
            raise BadInputError(f"attack {self.name!r} replays SGD without projection, not "
                                f"{hyper.optimizer.name}" + (" with a projection" if hyper.projection_radius else ""),
                                "mechanism.optimizer")
        if procedure.initial_params is None or (hyper.public_pretrain_steps and procedure.public_loss is not None):
            raise BadInputError(f"attack {self.name!r} needs the starting point fixed before training (no public "
                                "pre-training)", "mechanism.public_pretrain_steps")
        if procedure.public_loss is not None and procedure.public_loss.pad_width:
            raise BadInputError(f"attack {self.name!r} cannot replay a public loss with fresh padding noise",
                                "mechanism.public_loss")
        return self

    def infer(self, view: View) -> AttackOutput:
        """The MAP estimate of the target's subspace coordinates a: replay the trajectory, estimate ĉ, p̂ and σ̂²
        from the release, and maximise the log posterior (module docstring, steps 1-3).

        Args:
            view: the final parameters, the released noisy private sums and the public gradients ``[R, T, P]``.

        Returns:
            An estimate ``[R, m]`` (float64, on the CPU) of the coordinates in the protected subspace's basis.

        Raises:
            BadInputError: the view lacks the released iterates (the training releases only the final model).
        """
        if view.noisy_private_sums is None or view.public_gradients is None or view.params is None:
            raise BadInputError(f"attack {self.name!r} needs the released iterates (threat model 'iterates'); "
                                "this training releases only the final model", "audit.attacks")
        k = self.knowledge
        procedure, subspace = k.procedure, k.protected_subspace
        assert procedure is not None and subspace is not None and k.clip_norm is not None
        device = view.noisy_private_sums.device
        n_params = procedure.model.n_parameters
        released = view.noisy_private_sums[..., :n_params].to(device, torch.float64)  # [R, T, P]
        public = view.public_gradients[..., :n_params].to(device, torch.float64)
        final = flatten({name: view.params[name] for name in procedure.model.shapes()}, lead=1).to(device,
                                                                                                    torch.float64)
        thetas = replay_trajectory(procedure, released, public, final)  # [R, T, P]
        others = others_clipped_sums(procedure, thetas.float(), k.clip_norm).double()  # [R, T, P]
        rate = ((released * others).sum(dim=(1, 2)) / others.square().sum(dim=(1, 2)).clamp_min(1e-300)).clamp(
            1e-4, 1.0)  # [R]
        residual = released - rate[:, None, None] * others
        noise = residual.square().mean(dim=(1, 2)).clamp_min(MIN_NOISE)  # σ̂², [R]
        template = k.candidates[..., 0, :].to(device, torch.float64).reshape(-1)
        label = torch.as_tensor(k.label, device=device).reshape(())
        posterior = Posterior(procedure, subspace, template, label, thetas.float(), residual, rate, noise,
                              k.clip_norm)
        return AttackOutput(estimate=search(posterior).cpu())


def replay_trajectory(procedure: TrainingProblem, released: torch.Tensor, public: torch.Tensor,
                      final: torch.Tensor) -> torch.Tensor:
    """The parameters ``θ_t = A_t + ĉ B_t`` at which step t's gradients were taken, replayed by SGD with momentum from
    θ₀, with ``ĉ = ⟨θ_T − A_T, B_T⟩ / ‖B_T‖²`` (module docstring, step 1).

    Args:
        procedure: the training procedure (its optimiser, learning-rate schedule and starting point θ₀).
        released: the released noisy private sums ``[R, T, P]``.
        public: the released public gradients ``[R, T, P]``.
        final: the final parameters ``[R, P]``.

    Returns:
        ``θ_t`` for every trial and step ``[R, T, P]`` (float64).
    """
    hyper = procedure.hyper
    assert procedure.initial_params is not None
    trials, steps, _ = released.shape
    start = flatten({name: value[None] for name, value in procedure.initial_params.items()}, lead=1)
    visible = start.to(released.device, torch.float64).expand(trials, -1).clone()  # A_t
    scaled = torch.zeros_like(visible)  # B_t
    momentum_public, momentum_private = torch.zeros_like(visible), torch.zeros_like(visible)
    visibles, scaleds = [], []
    for t in range(steps):
        visibles.append(visible)
        scaleds.append(scaled)
        lr = learning_rate(hyper.optimizer, t, hyper.steps)
        momentum_public = hyper.optimizer.momentum * momentum_public + public[:, t]
        momentum_private = hyper.optimizer.momentum * momentum_private + released[:, t]
        visible, scaled = visible - lr * momentum_public, scaled - lr * momentum_private
    weight = ((final - visible) * scaled).sum(dim=1) / scaled.square().sum(dim=1).clamp_min(1e-300)  # ĉ, [R]
    return torch.stack(visibles, dim=1) + weight[:, None, None] * torch.stack(scaleds, dim=1)


def clip(gradient: torch.Tensor, clip_norm: float) -> torch.Tensor:
    """``g · min(1, C/‖g‖)`` along the last axis, differentiable at 0.

    Args:
        gradient: gradients ``[..., P]``.
        clip_norm: C > 0.

    Returns:
        The clipped gradients, of the same shape.
    """
    norm = (gradient.square().sum(dim=-1, keepdim=True) + 1e-30).sqrt()
    return gradient * (clip_norm / norm).clamp(max=1.0)


def others_clipped_sums(procedure: TrainingProblem, thetas: torch.Tensor, clip_norm: float) -> torch.Tensor:
    """``S_t = Σ_{x'∈S∖{x}} clip_C(∇ℓ_priv(θ_t; x'))`` for every trial and step (module docstring, step 2): one
    batched call per step over every trial (the engine's per-example norms).

    Args:
        procedure: the training procedure, holding the other records S∖{x} and the losses.
        thetas: the replayed parameters ``[R, T, P]``.
        clip_norm: C.

    Returns:
        ``[R, T, P]``.
    """
    model = procedure.model
    return torch.stack([clipped_private_sums(procedure, unflatten(thetas[:, t], model), clip_norm)
                        for t in range(thetas.shape[1])], dim=1)


@dataclass(frozen=True)
class Posterior:
    """The log posterior of the module docstring's step 3 for a chunk of trials: the replayed ``thetas``
    ``[R, T, P]``, the target's estimated gradients ``residual`` ``[R, T, P]``, the estimated rate ``[R]`` and
    noise ``[R]``, and what the canary image is made of."""

    procedure: TrainingProblem
    subspace: ProtectedSubspace
    template: torch.Tensor  # [d]
    label: torch.Tensor  # []
    thetas: torch.Tensor
    residual: torch.Tensor
    rate: torch.Tensor
    noise: torch.Tensor
    clip_norm: float

    def repeated(self, count: int) -> Posterior:
        """The same posterior with every trial repeated ``count`` times in a row (one search per start).

        Args:
            count: the repeats of each trial.

        Returns:
            A posterior over ``R·count`` trials.
        """
        def rows(t: torch.Tensor) -> torch.Tensor:
            return t.repeat_interleave(count, dim=0)

        return replace(self, thetas=rows(self.thetas), residual=rows(self.residual), rate=rows(self.rate),
                       noise=rows(self.noise))

    def clipped_gradients(self, a: torch.Tensor) -> torch.Tensor:
        """``c_t(a) = clip_C(∇ℓ_priv(θ_t; x(a)))`` for coordinates ``a`` ``[R, J, m]`` (J points per trial):
        ``[R, J, T, P]`` (float64). Every (trial, point, step) is one model of a batch on its own canary, so one
        backward pass of the summed loss gives every one's gradient; in the dtype of ``thetas`` (float32: the
        training's own precision, and the grouped convolutions' fast path).

        Args:
            a: subspace coordinates ``[R, J, m]``.

        Returns:
            The clipped gradients ``[R, J, T, P]`` (float64).
        """
        trials, points, _ = a.shape
        steps, n_params = self.thetas.shape[1:]
        count = trials * points * steps
        thetas = self.thetas[:, None].expand(trials, points, steps, n_params).reshape(count, n_params)
        leaves = {name: tensor.detach().requires_grad_(True)
                  for name, tensor in unflatten(thetas, self.procedure.model).items()}
        images = (self.template + a @ self.subspace.basis.to(a.dtype)).to(thetas.dtype)  # [R, J, d]
        x = images[:, :, None, None, :].expand(-1, -1, steps, 1, -1).reshape(count, 1, -1)
        with torch.enable_grad():
            losses = private_losses(self.procedure, leaves, x, self.label.expand(count, 1))
            gradient = torch.autograd.grad(losses.sum(), list(leaves.values()))
        flat = torch.cat([g.reshape(count, -1) for g in gradient], dim=1).double()
        return clip(flat, self.clip_norm).reshape(trials, points, steps, n_params)

    def step_evidence(self, c: torch.Tensor) -> torch.Tensor:
        """``u_t = (⟨ĝ_t, c_t⟩ − ½‖c_t‖²) / σ̂²``, the log-likelihood ratio of step t's residual with the target
        sampled against without it (module docstring, step 3).

        Args:
            c: clipped gradients ``[R, J, T, P]`` (:meth:`clipped_gradients`).

        Returns:
            ``[R, J, T]``.
        """
        return ((self.residual[:, None] * c).sum(dim=-1) - 0.5 * c.square().sum(dim=-1)) / self.noise[:, None, None]

    def value(self, a: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        """The log posterior ``Σ_t log[(1 − p̂) + p̂ e^{u_t}] − ‖a‖²/(2s²)`` up to a constant (module docstring,
        step 3).

        Args:
            a: subspace coordinates ``[R, J, m]``.
            u: their step evidence ``[R, J, T]`` (:meth:`step_evidence`).

        Returns:
            ``[R, J]``.
        """
        rate = self.rate[:, None, None]
        mixture = torch.logaddexp(torch.log1p(-rate.clamp(max=1 - 1e-12)), torch.log(rate) + u)
        mixture = torch.where(rate >= 1.0, u, mixture)
        return mixture.sum(dim=-1) - 0.5 * a.square().sum(dim=-1) / self.subspace.scale ** 2


def search(posterior: Posterior) -> torch.Tensor:
    """The MAP coordinates ``[R, m]``: the posterior is evaluated at the prior's mean and :data:`PROBES` draws from
    the prior, and Levenberg–Marquardt (:func:`maximise`) runs from each trial's best :data:`STARTS` of them; the
    end point with the highest posterior wins (the posterior is not concave in a: a clipped gradient's direction
    repeats over the subspace).

    Args:
        posterior: the log posterior of a chunk of R trials.

    Returns:
        The coordinates ``[R, m]`` (float64) in the protected subspace's basis.
    """
    trials, m = posterior.thetas.shape[0], posterior.subspace.dimension
    device = posterior.thetas.device
    draws = torch.randn(PROBES, m, generator=torch.Generator().manual_seed(PROBE_SEED), dtype=torch.float64)
    probes = torch.cat([torch.zeros(1, m, dtype=torch.float64), posterior.subspace.scale * draws]).to(device)
    probes = probes.expand(trials, -1, -1)
    values = posterior.value(probes, posterior.step_evidence(posterior.clipped_gradients(probes)))  # [R, PROBES + 1]
    best = values.topk(min(STARTS, probes.shape[1]), dim=1).indices  # [R, k]
    starts = probes.gather(1, best[..., None].expand(-1, -1, m))  # [R, k, m]
    k = starts.shape[1]
    ends, reached = maximise(posterior.repeated(k), starts.reshape(trials * k, m))
    winner = torch.where(torch.isnan(reached), -torch.inf, reached).reshape(trials, k).argmax(dim=1)
    return ends.reshape(trials, k, m)[torch.arange(trials, device=device), winner]


def maximise(posterior: Posterior, start: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The MAP coordinates ``[R, m]`` from ``start``, by Levenberg–Marquardt on the EM form of the posterior:
    with the responsibilities ``w_t = Pr[b_t = 1 | ĝ_t, a]`` at the current point, the log posterior's gradient
    is ``Σ_t w_t J_tᵀ(ĝ_t − c_t)/σ̂² − a/s²`` and its Gauss–Newton curvature ``Σ_t w_t J_tᵀJ_t/σ̂² + I/s²``, with
    J_t = ∂c_t/∂a by forward differences (the m + 1 points of a trial are one batch). A step is kept when it
    raises the log posterior; every trial has its own damping; at most :data:`ITERATIONS` steps.

    Args:
        posterior: the log posterior of R trials.
        start: the starting coordinates ``[R, m]``.

    Returns:
        The end points ``[R, m]`` (float64) and their log posterior ``[R]``.
    """
    a = start.to(torch.float64)
    trials, m = a.shape
    scale = posterior.subspace.scale
    damping = torch.full((trials,), INITIAL_DAMPING, dtype=torch.float64, device=a.device)
    difference = DIFFERENCE_STEP * scale
    offsets = torch.cat([torch.zeros(1, m, dtype=a.dtype, device=a.device),
                         difference * torch.eye(m, dtype=a.dtype, device=a.device)])  # [m + 1, m]
    current = None
    for _ in range(ITERATIONS):
        c = posterior.clipped_gradients(a[:, None] + offsets)  # [R, m + 1, T, P]
        u = posterior.step_evidence(c[:, :1])[:, 0]  # [R, T]
        if current is None:
            current = posterior.value(a[:, None], u[:, None])[:, 0]
        rate = posterior.rate[:, None]
        weight = torch.where(rate >= 1.0, torch.ones_like(u),
                             torch.sigmoid(torch.log(rate) - torch.log1p(-rate.clamp(max=1 - 1e-12)) + u))
        jacobian = (c[:, 1:] - c[:, :1]) / difference  # [R, m, T, P]
        scaled = jacobian * (weight / posterior.noise[:, None])[:, None, :, None]
        curvature = torch.einsum("ritp,rjtp->rij", scaled, jacobian)
        curvature = curvature + torch.eye(m, dtype=a.dtype, device=a.device) / scale ** 2
        slope = torch.einsum("ritp,rtp->ri", scaled, posterior.residual - c[:, 0]) - a / scale ** 2
        damped = curvature + damping[:, None, None] * torch.diag_embed(curvature.diagonal(dim1=1, dim2=2))
        proposal = a + torch.linalg.solve(damped, slope[..., None])[..., 0]
        c_new = posterior.clipped_gradients(proposal[:, None])
        value = posterior.value(proposal[:, None], posterior.step_evidence(c_new))[:, 0]
        better = value > current  # NaN: never
        settled = bool(torch.all((proposal - a).norm(dim=1) < STEP_TOLERANCE * scale))
        a = torch.where(better[:, None], proposal, a)
        current = torch.where(better, value, current)
        damping = torch.where(better, damping / 3, damping * 4).clamp(1e-9, 1e9)
        if settled:  # every trial at a stationary point, or stuck at maximal damping
            break
    return a, current
