"""An Opacus training loop in the style of Opacus's tutorials: make_private_with_epsilon on a DataLoader
(Poisson sampling), cross-entropy, SGD, a few epochs. ``train_misuse`` is the same loop with a common mistake:
after make_private_with_epsilon has calibrated the noise to the target ε, the noise multiplier is overwritten
with a hard-coded value (a leftover of a script that used make_private), so the model gets 0.3 of the noise
behind the ε it reports."""

import torch
from opacus import PrivacyEngine
from torch import nn
from torch.utils.data import DataLoader

EPOCHS = 2
BATCH_SIZE = 32
LR = 0.5
TARGET_EPSILON = 4.0
TARGET_DELTA = 1e-5
MAX_GRAD_NORM = 1.0


def train(model, dataset, seed, noise_multiplier=None):
    loader = DataLoader(dataset, batch_size=BATCH_SIZE, generator=torch.Generator().manual_seed(seed))
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    privacy_engine = PrivacyEngine(accountant="rdp")
    model, optimizer, loader = privacy_engine.make_private_with_epsilon(
        module=model, optimizer=optimizer, data_loader=loader, epochs=EPOCHS,
        target_epsilon=TARGET_EPSILON, target_delta=TARGET_DELTA, max_grad_norm=MAX_GRAD_NORM)
    if noise_multiplier is not None:
        optimizer.noise_multiplier = noise_multiplier
    criterion = nn.CrossEntropyLoss()
    for _ in range(EPOCHS):
        for x, y in loader:
            optimizer.zero_grad()
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
    return model


def train_misuse(model, dataset, seed):
    return train(model, dataset, seed, noise_multiplier=0.3)
