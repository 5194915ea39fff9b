"""Record canaries: ordinary input-space records inserted into the training data, audited by final-model attacks.

Canary i copies a population record (the population split is disjoint from the training data and owned by the
adversary) and sets its first categorical protected attribute to one of the k most frequent categories.

* ``value`` game (FDP, replace-one): every canary is in the data set; its value is uniform over the k
  candidates and everything else (Ψ and the label) is fixed. The attack scores each candidate by the model's
  log-likelihood of the canary's label, ``log P(y | Ψ(x), v)`` — the black-box likelihood attack.
* ``inclusion`` game (DP, add/remove): each canary is in the data set with probability ½ (its value is the first
  candidate); the attack scores membership by the canary's loss against the median loss of all canaries.

What they audit: leakage of protected values (or membership) through the *final model*, the realistic release of
a model trained once, and the same thing the attribute game's final-model attacks measure across many trainings.
On tabular logistic models final-model attacks are weak, so expect PASS with an empirical ε near 0 for correct
mechanisms; gradient canaries (:mod:`fdp_audit.audit.one_run.canaries`) are the tight audit of the mechanism.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import torch

from fdp_audit.data.encoding import ColumnGroup, EncodedData
from fdp_audit.data.prepare import PreparedData
from fdp_audit.errors import BadInputError
from fdp_audit.training.models import Model, Params, example_loss


def secret_group(data: PreparedData) -> ColumnGroup:
    """The first protected attribute, which must be categorical."""
    groups = data.column_split().protected_groups
    if not groups or groups[0].kind != "categorical":
        raise BadInputError("record canaries need a categorical first protected attribute", "data.protected")
    return groups[0]


def candidate_columns(data: PreparedData, k: int) -> np.ndarray:
    """One-hot columns (offsets within the attribute) of its k most frequent categories in the population."""
    group = secret_group(data)
    if not 2 <= k <= group.stop - group.start:
        raise BadInputError(f"{group.feature!r} has {group.stop - group.start} categories", "--canary-values")
    frequency = data.population.x[:, group.start:group.stop].sum(axis=0)
    return np.argsort(-frequency, kind="stable")[:k]


def canary_records(data: PreparedData, rows: np.ndarray, columns: np.ndarray) -> np.ndarray:
    """``[M, k, d]``: population rows ``rows`` with the secret attribute set to each candidate."""
    group = secret_group(data)
    base = np.repeat(data.population.x[rows][:, None, :], len(columns), axis=1)
    base[:, :, group.start:group.stop] = 0.0
    base[:, np.arange(len(columns)), group.start + columns] = 1.0
    return base


def with_records(data: PreparedData, records: np.ndarray, labels: np.ndarray) -> PreparedData:
    """The data set S with the canary records appended (the rest of the preparation, Ψ included, unchanged)."""
    train = data.train
    x = np.concatenate([train.x, records.astype(train.x.dtype)])
    y = np.concatenate([train.y, labels.astype(train.y.dtype)])
    return replace(data, train=EncodedData(x, y, train.groups, train.classes, train.label, train.fingerprint))


def record_scores(model: Model, params: Params, game: str, records: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """``[M, k]`` candidate scores of the final model (module doc)."""
    m, k, d = records.shape
    x = torch.as_tensor(records.reshape(m * k, d), dtype=torch.float32)
    y = torch.as_tensor(np.repeat(labels, k))
    with torch.no_grad():
        losses = example_loss(model.forward(params, x), y).reshape(m, k).double().numpy()
    if game == "inclusion":
        centred = losses[:, 0] - np.median(losses[:, 0])
        return np.stack([np.zeros(m), -centred], axis=1)
    return -losses
