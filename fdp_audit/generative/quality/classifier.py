"""The feature extractor of the sample-quality distance: a small CNN classifier trained on the real training images
(docs/generative.md), in place of Inception-v3, whose weights this suite does not download.

Architecture: conv 3×3 (16) → ReLU → conv 3×3 stride 2 (32) → ReLU → conv 3×3 stride 2 (32) → ReLU → flatten →
linear to ``features`` → ReLU → linear to the classes. The features are the penultimate linear layer's outputs
before its ReLU (full rank, where post-ReLU features have exact zeros). Trained with Adam on cross-entropy over
uniform minibatches; its test accuracy is reported beside the distances (a classifier that does not separate the
classes would make every distance meaningless).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F


class FeatureClassifier(nn.Module):
    """The small CNN whose penultimate features the sample-quality distance is measured in (module docstring):
    three 3×3 convolutions (16, 32 and 32 channels, the last two of stride 2), a linear layer to ``features``
    outputs and a linear head to ``n_classes`` logits, for images of ``channels`` channels and ``side`` pixels a
    side."""

    def __init__(self, channels: int, side: int, n_classes: int, features: int = 16):
        super().__init__()
        self.convs = nn.ModuleList([nn.Conv2d(channels, 16, 3, padding=1), nn.Conv2d(16, 32, 3, stride=2, padding=1),
                                    nn.Conv2d(32, 32, 3, stride=2, padding=1)])
        reduced = ((side + 1) // 2 + 1) // 2  # two stride-2 convolutions with padding 1
        self.embed = nn.Linear(32 * reduced * reduced, features)
        self.head = nn.Linear(features, n_classes)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """The features of images: the penultimate linear layer's outputs, before its ReLU (module docstring).

        Args:
            x: images ``[n, C, H, W]``.

        Returns:
            The features ``[n, features]``.
        """
        h = x
        for conv in self.convs:
            h = F.relu(conv(h))
        return self.embed(h.flatten(1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Class logits of images.

        Args:
            x: images ``[n, C, H, W]``.

        Returns:
            Logits ``[n, n_classes]``.
        """
        return self.head(F.relu(self.features(x)))


@dataclass
class TrainedClassifier:
    """A trained :class:`FeatureClassifier` with its accuracy (:func:`train_classifier`).

    Attributes:
        model: the trained classifier.
        test_accuracy: its accuracy on the held-out test images, in [0, 1], reported beside the distances.
    """

    model: FeatureClassifier
    test_accuracy: float

    @torch.no_grad()
    def embed(self, images: torch.Tensor, batch: int = 2048) -> np.ndarray:
        """``[n, features]`` float64 features of images ``[n, C, H, W]`` in [-1, 1].

        Args:
            images: the images, on any device (moved to the classifier's device ``batch`` at a time).
            batch: images embedded together.

        Returns:
            The features as a float64 NumPy array ``[n, features]``.
        """
        self.model.eval()
        device = next(self.model.parameters()).device
        parts = [self.model.features(images[i:i + batch].to(device)) for i in range(0, len(images), batch)]
        return torch.cat(parts).double().cpu().numpy()


def train_classifier(images: torch.Tensor, labels: torch.Tensor, test_images: torch.Tensor,
                     test_labels: torch.Tensor, n_classes: int, seed: int, steps: int = 600, batch: int = 128,
                     features: int = 16, learning_rate: float = 2e-3) -> TrainedClassifier:
    """Train the feature classifier on ``images`` (module doc) and measure its accuracy on the test images.

    Args:
        images: training images ``[n, C, H, W]`` (square).
        labels: their classes ``[n]``.
        test_images: test images ``[m, C, H, W]``.
        test_labels: their classes ``[m]``.
        n_classes: the number of classes.
        seed: the seed of the initialisation and of the minibatches.
        steps: Adam steps.
        batch: images per minibatch (drawn uniformly with replacement).
        features: the feature width.
        learning_rate: Adam's learning rate.

    Returns:
        The classifier (in eval mode) and its test accuracy.
    """
    device = images.device
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = FeatureClassifier(images.shape[1], images.shape[-1], n_classes, features).to(device)
    generator = torch.Generator(device=device)
    generator.manual_seed(seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=learning_rate)
    for _ in range(steps):
        idx = torch.randint(0, len(images), (batch,), generator=generator, device=device)
        optimizer.zero_grad(set_to_none=True)
        F.cross_entropy(model(images[idx]), labels[idx]).backward()
        optimizer.step()
    model.eval()
    with torch.no_grad():
        predicted = torch.cat([model(test_images[i:i + 2048]).argmax(1) for i in range(0, len(test_images), 2048)])
    return TrainedClassifier(model, float((predicted == test_labels).float().mean()))
