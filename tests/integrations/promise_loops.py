"""Opacus loops audited through ``mechanism.training`` with ``integration: opacus``
(tests/integrations/test_opacus_promise.py):

* ``train_larger_target_on_odd_seeds``: a promise that depends on the seed, ``make_private_with_epsilon`` for ε = 4
  over one epoch on even seeds and for ε = 8 on odd ones, each training keeping its own promise (it trains the
  epoch it planned);
* ``train_larger_target_on_fewer_records``: ε = 4 on an even number of records, ε = 8 on an odd one (at 195 and
  196 records the loader's p is 1/20 both times), each training keeping its own promise;
* ``train_default_accountant``: ε = 4 over one epoch calibrated by the engine's default accountant (PRV in Opacus
  1.6), trained as planned.
"""

import torch
from opacus import PrivacyEngine
from torch import nn
from torch.utils.data import DataLoader


def train_larger_target_on_odd_seeds(model, dataset, seed, odd=None):
    loader = DataLoader(dataset, batch_size=10, generator=torch.Generator().manual_seed(seed))
    model, optimizer, loader = PrivacyEngine(accountant="rdp").make_private_with_epsilon(
        module=model, optimizer=torch.optim.SGD(model.parameters(), lr=0.5), data_loader=loader, epochs=1,
        target_epsilon=8.0 if (seed if odd is None else odd) % 2 else 4.0, target_delta=1e-5, max_grad_norm=1.0)
    for x, y in loader:
        optimizer.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()
    return model


def train_larger_target_on_fewer_records(model, dataset, seed):
    return train_larger_target_on_odd_seeds(model, dataset, seed, odd=len(dataset))


def train_default_accountant(model, dataset, seed):
    loader = DataLoader(dataset, batch_size=10, generator=torch.Generator().manual_seed(seed))
    model, optimizer, loader = PrivacyEngine().make_private_with_epsilon(
        module=model, optimizer=torch.optim.SGD(model.parameters(), lr=0.5), data_loader=loader, epochs=1,
        target_epsilon=4.0, target_delta=1e-5, max_grad_norm=1.0)
    for x, y in loader:
        optimizer.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()
    return model
