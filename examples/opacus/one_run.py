"""An Opacus training script in the style of Opacus's tutorials, audited in one run: the lines marked
``# one-run audit`` and CANARIES are the audit (docs/one_run.md counts what else differs from train.py).

    python examples/opacus/one_run.py configs/opacus_one_run.yaml model.safetensors
    fdp-audit audit model.safetensors --config configs/opacus_one_run.yaml --canaries model.canaries.json

The config states the claim audited: z and C as given to ``make_private``, the sample rate Opacus's Poisson
loader uses (1 / the loader's length) and the steps of EPOCHS epochs, on the data set with its canaries."""

import sys

import torch
from model import make_model
from opacus import PrivacyEngine
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import fdp_audit  # one-run audit
from fdp_audit.config import load_config
from fdp_audit.data.prepare import prepare_data

EPOCHS = 2
BATCH_SIZE = 211  # 10 batches for 1,900 to 2,110 records: configs/opacus_one_run.yaml
LR = 0.5
NOISE_MULTIPLIER = 1.0
MAX_GRAD_NORM = 1.0
CANARIES = 1000


def load_train_set(config_path: str) -> TensorDataset:
    """The training records (here the config's data set, encoded; a real script loads its own)."""
    config = load_config(config_path)
    x, y = prepare_data(config.data, config.seed).tensors()
    return TensorDataset(x, y)


def main(config_path: str, out: str) -> None:
    train_set = load_train_set(config_path)
    canaries = fdp_audit.GradientCanaries.from_config(config_path, CANARIES)  # one-run audit
    train_set = canaries.add_to(train_set)  # one-run audit
    torch.manual_seed(0)
    x, y = train_set[:]
    model = make_model(x.shape[1], int(y.max()) + 1)
    model = canaries.wrap(model)  # one-run audit
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    loader = DataLoader(train_set, batch_size=BATCH_SIZE, generator=torch.Generator().manual_seed(0))
    privacy_engine = PrivacyEngine()
    model, optimizer, loader = privacy_engine.make_private(
        module=model, optimizer=optimizer, data_loader=loader, noise_multiplier=NOISE_MULTIPLIER,
        max_grad_norm=MAX_GRAD_NORM, noise_generator=torch.Generator().manual_seed(1))
    canaries.attach(optimizer)  # one-run audit
    criterion = nn.CrossEntropyLoss()
    for _ in range(EPOCHS):
        for inputs, labels in loader:
            optimizer.zero_grad()
            loss = criterion(model(inputs), labels)
            loss.backward()
            optimizer.step()
    print(f"claim: noise_multiplier {NOISE_MULTIPLIER}, sample_rate {1 / len(loader):.6g}, "
          f"steps {EPOCHS * len(loader)}, clip_norm {MAX_GRAD_NORM}")
    canaries.save(model, out)  # one-run audit: weights, release and manifest


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
