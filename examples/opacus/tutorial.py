"""An Opacus training script as Opacus's tutorials write it: a DataLoader made private (Poisson sampling,
per-example clipping, noise), cross-entropy, SGD, a few epochs, the weights saved. one_run.py is this script with
the lines of a one-run audit added (each marked ``# one-run audit``; docs/one_run.md):

    python examples/opacus/tutorial.py configs/opacus_one_run.yaml model.pt
    python examples/opacus/one_run.py configs/opacus_one_run.yaml model.safetensors
    fdp-audit audit model.safetensors --config configs/opacus_one_run.yaml --canaries model.canaries.json

The data set is the config's (a real script loads its own); the config states the claim audited: z and C as given to
``make_private``, the sample rate Opacus's Poisson loader uses (1 / the loader's length, on the data set with its
canaries) and the steps of EPOCHS epochs."""

import sys

import torch
from model import make_model
from opacus import PrivacyEngine
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from fdp_audit.config import load_config
from fdp_audit.data.prepare import prepare_data

EPOCHS = 2
BATCH_SIZE = 211  # 10 batches for 1,900 to 2,110 records: configs/opacus_one_run.yaml
LR = 0.5
NOISE_MULTIPLIER = 1.0
MAX_GRAD_NORM = 1.0

config_path, out = sys.argv[1], sys.argv[2]
config = load_config(config_path)
x, y = prepare_data(config.data, config.seed).tensors()
train_set = TensorDataset(x, y)

torch.manual_seed(0)
model = make_model(x.shape[1], int(y.max()) + 1)
optimizer = torch.optim.SGD(model.parameters(), lr=LR)
loader = DataLoader(train_set, batch_size=BATCH_SIZE, generator=torch.Generator().manual_seed(0))

privacy_engine = PrivacyEngine()
model, optimizer, loader = privacy_engine.make_private(
    module=model, optimizer=optimizer, data_loader=loader, noise_multiplier=NOISE_MULTIPLIER,
    max_grad_norm=MAX_GRAD_NORM, noise_generator=torch.Generator().manual_seed(1))

criterion = nn.CrossEntropyLoss()
for epoch in range(EPOCHS):
    for inputs, labels in loader:
        optimizer.zero_grad()
        loss = criterion(model(inputs), labels)
        loss.backward()
        optimizer.step()
    print(f"epoch {epoch + 1}: loss {loss.item():.4f}")

print(f"claim: noise_multiplier {NOISE_MULTIPLIER}, sample_rate {1 / len(loader):.6g}, "
      f"steps {EPOCHS * len(loader)}, clip_norm {MAX_GRAD_NORM}")
torch.save(model._module.state_dict(), out)
