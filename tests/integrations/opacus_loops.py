"""Opacus training loops in the style of Opacus's tutorials, audited through ``mechanism.training`` with
``integration: opacus`` (tests/integrations/test_opacus.py, test_opacus_promise.py):

* ``train``: ``make_private_with_epsilon`` on a DataLoader of batch 10 (Poisson sampling at p = 1/len(loader)),
  cross-entropy, SGD, one epoch. Opacus scales the noisy sum by ``expected_batch_size = int(len(dataset) · p)``,
  which depends on the data set's size (Opacus issues 571 and 819): at n = 999 records it is 9 without the
  canary and 10 with it, at n = 995 it is 9 in both worlds.
* ``train_fixed_batch``: the same loop with the scale set to the planned batch of 10, whatever the size.
* ``train_twice``: the same loop trained for twice the epochs ``make_private_with_epsilon`` was calibrated for.
* ``train_twice_on_odd_seeds``: the promised epochs on even seeds, twice them on odd ones (a loop that keeps
  its promise only in some trainings).
"""

import torch
from opacus import PrivacyEngine
from torch import nn
from torch.utils.data import DataLoader

BATCH_SIZE = 10
EPOCHS = 1
LR = 0.5
TARGET_EPSILON = 4.0
TARGET_DELTA = 1e-5
MAX_GRAD_NORM = 1.0


def train(model, dataset, seed, fixed_batch=False, epochs=EPOCHS):
    loader = DataLoader(dataset, batch_size=BATCH_SIZE, generator=torch.Generator().manual_seed(seed))
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    privacy_engine = PrivacyEngine(accountant="rdp")
    model, optimizer, loader = privacy_engine.make_private_with_epsilon(
        module=model, optimizer=optimizer, data_loader=loader, epochs=EPOCHS, target_epsilon=TARGET_EPSILON,
        target_delta=TARGET_DELTA, max_grad_norm=MAX_GRAD_NORM)
    if fixed_batch:
        optimizer.expected_batch_size = BATCH_SIZE
    criterion = nn.CrossEntropyLoss()
    for _ in range(epochs):
        for x, y in loader:
            optimizer.zero_grad()
            criterion(model(x), y).backward()
            optimizer.step()
    return model


def train_fixed_batch(model, dataset, seed):
    return train(model, dataset, seed, fixed_batch=True)


def train_twice(model, dataset, seed):
    return train(model, dataset, seed, epochs=2 * EPOCHS)


def make_model(n_inputs, n_classes):
    """Logistic regression as a module: one logit per class. Its weights on the membership game's noise-only
    columns are the scaled noise itself, so the size leak's score has an exact law (docs/user_training.md, "How
    many trials"); the tutorial's MLP has the same fault, seen through a data-dependent hidden layer."""
    return nn.Linear(n_inputs, n_classes)


def train_twice_on_odd_seeds(model, dataset, seed):
    return train(model, dataset, seed, epochs=EPOCHS * (1 + seed % 2))
