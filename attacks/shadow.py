"""``black_box`` meta-classifier on shadow models (docs/games.md).

The adversary runs the target's mechanism itself on data it owns (``Knowledge.shadow_problem``, the
population split), ``shadow_models`` times, each time inserting the target completed with a *known* value:
value ``j mod V`` for shadow j, so every value is equally represented. A shadow model's outputs on all V
candidate completions (the log-probability of every class, ``V·C`` features) are what a black-box adversary
can observe; a multinomial logistic regression learns from them the value that was inserted. Each class's
log-probabilities are centred on their mean over the candidates: the inserted value moves how a model ranks
the completions, while the common level is set by the rest of the training data, which differs between the
adversary's population split and the target's data. (Uncentred, a classifier fitted on shadows extrapolated
that level arbitrarily: seeded 200-trial games on a 16-row table scored 0, 88 and 200 successes where the
likelihood attack scored 93, 88 and 108.) Trained on
balanced values, it estimates ``Pr[v | outputs]`` under a uniform prior, i.e. the likelihood up to a
constant, so the score adds the log prior: ``score_v = log Pr_uniform[v | outputs] + log Pr[v | u]``.

The shadow models run the audited mechanism itself: the configured recipe and settings, or an audited
third-party function (``Knowledge.shadow_trainer``), never the recipe a third party only claims. The
audit fits the scores' decision rule (orientation, per-value offsets) on a selection split of the trials.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from attacks.base import Attack, AttackOutput, Knowledge, View
from fdp_audit.errors import BadInputError
from fdp_audit.training.interface import Canaries, Model, Params, predict_logits, train_models


def output_features(model: Model, params: Params, candidates: torch.Tensor) -> np.ndarray:
    """Every model's class log-probabilities on every candidate, each class's centred on its mean over the
    candidates (module docstring), flattened: the meta-classifier's features.

    Args:
        model: the architecture.
        params: the models' parameters ``[R, ...]``.
        candidates: the target's candidate completions ``[V, d]``.

    Returns:
        ``[R, V·C]`` float64 features (C classes; a one-logit model has C = 2).
    """
    logits = predict_logits(model, params, candidates.to(next(iter(params.values())).device)).double()
    if logits.shape[-1] == 1:  # one logit: the two classes' log-probabilities
        log_probabilities = torch.stack([F.logsigmoid(-logits[..., 0]), F.logsigmoid(logits[..., 0])], dim=-1)
    else:
        log_probabilities = F.log_softmax(logits, dim=-1)
    log_probabilities = log_probabilities - log_probabilities.mean(dim=1, keepdim=True)
    return log_probabilities.flatten(1).detach().cpu().numpy()


class ShadowModelAttack(Attack):
    """The ``shadow`` attack (black box; module docstring, docs/games.md): infers the protected attribute with a
    multinomial logistic regression fitted on shadow models the adversary trains with the audited mechanism on its
    population split, each with a known inserted value, reading every candidate completion's centred class
    log-probabilities; ``score_v = log Pr_uniform[v | outputs] + log Pr[v | u]``."""

    name = "shadow"
    title = "meta-classifier on shadow models"
    threat_model = "black_box"
    needs = ("shadow_problem",)
    per_trial = False

    def fit(self, knowledge: Knowledge) -> ShadowModelAttack:
        """Train ``shadow_models`` models of ``shadow_problem``, shadow j with the target completed with value
        ``j mod V``, and fit a multinomial logistic regression from their :func:`output_features` to that value.

        Args:
            knowledge: one target (candidates ``[V, d]``) with ``shadow_problem`` and the shadows' count and seed
                (and ``shadow_trainer``, the audited mechanism, when it is third-party code).

        Returns:
            The attack itself, fitted.

        Raises:
            BadInputError: ``shadow_problem`` is missing, the knowledge has one target per trial, or there are
                fewer than two shadow models per candidate value.
        """
        super().fit(knowledge)
        if knowledge.per_trial:
            raise BadInputError(f"attack {self.name!r} trains shadow models for one target, not one per trial",
                                "audit.attacks")
        values = knowledge.candidates.shape[0]
        if knowledge.shadow_models < 2 * values:
            raise BadInputError(f"needs at least two shadow models per candidate value ({2 * values}), got "
                                f"{knowledge.shadow_models}", "shadow_models")
        problem = knowledge.shadow_problem
        inserted = torch.arange(knowledge.shadow_models) % values
        canaries = Canaries(knowledge.candidates[inserted].to(problem.x.dtype),
                            torch.full((knowledge.shadow_models,), int(knowledge.label), dtype=torch.long),
                            torch.ones(knowledge.shadow_models, dtype=torch.bool),
                            torch.ones(knowledge.shadow_models, dtype=torch.bool))
        indices = range(knowledge.shadow_models)
        trained = (knowledge.shadow_trainer(problem, knowledge.shadow_seed, indices, canaries)
                   if knowledge.shadow_trainer is not None
                   else (chunk.params for chunk in train_models(problem, knowledge.shadow_seed, indices, canaries,
                                                                 device=problem.x.device, progress="shadow models")))
        features = np.concatenate([output_features(knowledge.model, params, knowledge.candidates)
                                   for params in trained])
        # scikit-learn takes seconds to import: only the processes fitting this attack pay for it
        from sklearn.linear_model import LogisticRegression
        from sklearn.pipeline import make_pipeline
        from sklearn.preprocessing import StandardScaler

        self.classifier = make_pipeline(StandardScaler(), LogisticRegression(max_iter=5000))
        self.classifier.fit(features, inserted.numpy())
        return self

    def infer(self, view: View) -> AttackOutput:
        """``score_v = log Pr_uniform[v | outputs] + log Pr[v | u]`` from the meta-classifier (module docstring).

        Args:
            view: the final parameters ``[R, ...]`` (queried on the candidates only).

        Returns:
            Scores ``[R, V]`` (float64, on the CPU).
        """
        k = self.knowledge
        assert view.params is not None
        # a posterior of exactly 0 (a confident classifier) stays a finite, very low score
        posterior = self.classifier.predict_proba(output_features(k.model, view.params, k.candidates))
        log_posterior = np.log(np.maximum(posterior, np.finfo(float).tiny))
        scores = torch.as_tensor(log_posterior, dtype=torch.float64)  # classes 0..V-1, all seen in training
        return AttackOutput(scores + torch.log(k.prior.double().clamp_min(1e-300)).cpu())
