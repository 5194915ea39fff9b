"""Input canaries: records inserted into the training data, audited by final-model attacks on the canaries' losses.

**Crafted canaries** (``crafted``): records that a training without privacy memorises, as black-box one-run
audits use (Steinke, Nasr & Jagielski 2023, input-space canaries). Canary i's input lies off the data manifold —
``b·s_i``, with ``s_i`` a random sign vector over every encoded column and ``b`` above every magnitude of the
data, so that canaries are far from the records and nearly orthogonal to each other — and its label is drawn
uniformly: only memorisation fits it. Both are drawn from the manifest's seed (a stream of their own).

* ``inclusion`` game (DP, add/remove): each canary is in the data set with probability ½; a member's loss is low
  where the model memorised it, a non-member's is whatever the model extrapolates.
* ``value`` game (FDP, replace-one; Ψ a column subset): every canary is in; its protected columns hold
  ``b·u_v·s_i`` for its secret value v of k (``u_v = 2v/(k−1) − 1``), its public columns and label are fixed.

Such canaries audit what the final model keeps of each record, noise, clipping and sampling included: a
training without noise memorises them and fails the audit from its final weights alone.

**Population copies** (``record``): canary i copies a population record (the population split is disjoint from
the training data and owned by the adversary) and sets its first protected attribute (which must be categorical)
to one of its k most frequent categories.

* ``value`` game (FDP, replace-one): every canary is in the data set; its value is uniform over the k
  candidates and everything else (Ψ and the label) is fixed. The attack scores each candidate by the model's
  log-likelihood of the canary's label, ``log P(y | Ψ(x), v)`` — the black-box likelihood attack.
* ``inclusion`` game (DP, add/remove): each canary is in the data set with probability ½ (its value is the first
  candidate); the attack scores membership by the canary's loss against the median loss of all canaries.

What they audit: leakage of protected values (or membership) through the *final model*, the realistic release of
a model trained once, and the same thing the attribute game's final-model attacks measure across many trainings.
A model that generalises keeps almost nothing that singles such a record out, so these canaries carry no signal
about noise, clipping or sampling: a training without noise passes them as well as a correct one. An audit with
them is therefore INFORMATIONAL unless it finds a violation (docs/one_run.md); crafted canaries or gradient
canaries (:mod:`fdp_audit.auditing.one_run.canaries`) test the mechanism.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import torch

from fdp_audit.auditing.canary_head import CanaryInputs
from fdp_audit.auditing.one_run.guesser import candidate_pattern
from fdp_audit.data.encoding import ColumnGroup, EncodedData
from fdp_audit.data.features import ColumnSplit
from fdp_audit.data.prepare import PreparedData
from fdp_audit.errors import BadInputError
from fdp_audit.training.models import Model, Params, example_loss


def secret_group(data: PreparedData) -> ColumnGroup:
    """The first protected attribute, which must be categorical.

    Args:
        data: the prepared data.

    Returns:
        The attribute's one-hot column group.

    Raises:
        BadInputError: the first protected attribute is missing or not categorical.
    """
    groups = data.column_split().protected_groups
    if not groups or groups[0].kind != "categorical":
        raise BadInputError("record canaries need a categorical first protected attribute", "data.protected")
    return groups[0]


def candidate_columns(data: PreparedData, k: int) -> np.ndarray:
    """One-hot columns (offsets within the attribute) of its k most frequent categories in the population.

    Args:
        data: the prepared data (its population split is counted).
        k: the number of candidates, 2 … the attribute's number of categories.

    Returns:
        The k offsets, most frequent first, int array of shape (k,).

    Raises:
        BadInputError: k is outside that range.
    """
    group = secret_group(data)
    if not 2 <= k <= group.stop - group.start:
        raise BadInputError(f"{group.feature!r} has {group.stop - group.start} categories", "--canary-values")
    frequency = data.population.x[:, group.start:group.stop].sum(axis=0)
    return np.argsort(-frequency, kind="stable")[:k]


def canary_records(data: PreparedData, rows: np.ndarray, columns: np.ndarray) -> np.ndarray:
    """``[M, k, d]``: population rows ``rows`` with the secret attribute set to each candidate.

    Args:
        data: the prepared data.
        rows: the population rows copied, shape (M,).
        columns: the candidates' one-hot offsets within the attribute, shape (k,).

    Returns:
        The encoded candidate records, shape (M, k, d).
    """
    group = secret_group(data)
    base = np.repeat(data.population.x[rows][:, None, :], len(columns), axis=1)
    base[:, :, group.start:group.stop] = 0.0
    base[:, np.arange(len(columns)), group.start + columns] = 1.0
    return base


def population_rows(seed: int, n_rows: int, count: int) -> np.ndarray:
    """The population rows that ``count`` record canaries copy, drawn from ``seed`` (sorted).

    Args:
        seed: the manifest's seed.
        n_rows: the population's number of rows (at least ``count``).
        count: the number of canaries M.

    Returns:
        M distinct row indices, sorted.
    """
    return np.sort(np.random.default_rng(seed).choice(n_rows, count, replace=False))


CRAFTED_STREAM = 0xC4A5  # the crafted canaries' own generator, apart from the population copies' rows


def crafted_records(data: PreparedData, seed: int, count: int, game: str, k: int) -> tuple[np.ndarray, np.ndarray]:
    """``([M, k', d], [M])``: the crafted canaries' candidate records (k' = 1 for inclusion, k for a protected
    value) and labels (module doc).

    Args:
        data: the prepared data (its training split sets the magnitude b, the width d and the classes).
        seed: the manifest's seed.
        count: the number of canaries M.
        game: ``"inclusion"`` or ``"value"``.
        k: the number of candidate values (used by the value game).

    Returns:
        The records and labels.

    Raises:
        BadInputError: the value game with a Ψ that is not a column subset.
    """
    rng = np.random.default_rng([CRAFTED_STREAM, seed])
    train = data.train
    magnitude = CanaryInputs.base_above(float(np.abs(train.x).max()) if train.n_rows else 0.0)
    base = magnitude * rng.choice(np.array([-1.0, 1.0]), size=(count, train.n_features))
    labels = rng.integers(0, train.n_classes, size=count)
    if game == "inclusion":
        return base[:, None, :].astype(train.x.dtype), labels
    if not isinstance(data.public_map, ColumnSplit):
        raise BadInputError("crafted canaries in the value game need a column-subset Ψ (data.public_map: columns)",
                            "data.public_map")
    protected = np.concatenate([np.arange(g.start, g.stop) for g in data.column_split().protected_groups])
    records = np.repeat(base[:, None, :], k, axis=1)
    records[:, :, protected] = base[:, None, protected] * candidate_pattern(game, k)[None, :, None]
    return records.astype(train.x.dtype), labels


def with_records(data: PreparedData, records: np.ndarray, labels: np.ndarray) -> PreparedData:
    """The data set S with the canary records appended (the rest of the preparation, Ψ included, unchanged).

    Args:
        data: the prepared data.
        records: the records to append, shape (n, d), encoded as the training split.
        labels: their labels, shape (n,).

    Returns:
        The prepared data with the longer training split.
    """
    train = data.train
    x = np.concatenate([train.x, records.astype(train.x.dtype)])
    y = np.concatenate([train.y, labels.astype(train.y.dtype)])
    return replace(data, train=EncodedData(x, y, train.groups, train.classes, train.label, train.fingerprint))


def record_scores(model: Model, params: Params, game: str, records: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """``[M, k]`` candidate scores of the final model (module doc).

    Args:
        model: the trained model's architecture.
        params: its final parameters.
        game: ``"inclusion"`` or ``"value"``.
        records: the candidate records, shape (M, k, d) (inclusion scores the first candidate).
        labels: the canaries' labels, shape (M,).

    Returns:
        The scores, shape (M, k): a protected value's ``−loss`` per candidate; for inclusion, 0 for "out" and the
        loss's distance below the canaries' median loss for "in".
    """
    m, k, d = records.shape
    x = torch.as_tensor(records.reshape(m * k, d), dtype=torch.float32)
    y = torch.as_tensor(np.repeat(labels, k))
    with torch.no_grad():
        losses = example_loss(model.forward(params, x), y).reshape(m, k).double().numpy()
    if game == "inclusion":
        centred = losses[:, 0] - np.median(losses[:, 0])
        return np.stack([np.zeros(m), -centred], axis=1)
    return -losses
