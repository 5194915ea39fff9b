"""Public losses ℓ_pub∘Ψ (docs/training.md): the decomposition ℓ = (ℓ − ℓ_pub∘Ψ) + ℓ_pub∘Ψ.

A public loss is evaluated on model inputs that it builds from a :class:`PublicView` alone — the type of
:meth:`PublicLoss.inputs` admits nothing else — so it cannot read a protected value. Constructions:

* ``mask``: protected columns set to zero; ``mean``: set to their mean on the population split;
* ``gaussian_pad`` (Purchase100): protected columns replaced by N(0, 1) noise;
* ``impute``: protected columns predicted from the public ones by a model fitted on the population
  split (public data), probabilities for categorical columns;
* ``label_dp`` (Ψ(x, y) = x): ``ℓ_pub = logsumexp(wᵀx)``, label-free;
* ``public_image`` (images, docs/images.md): Ψ(x) rendered at full resolution — the blurred image, or the
  block means upsampled — is the model input, as in the FDP paper's public baseline.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from fdp_audit.data.encoding import EncodedData
from fdp_audit.data.features import ColumnSplit, LabelOnlyPublicMap, PublicMap, PublicView
from fdp_audit.data.image_psi import ImagePublicMap
from fdp_audit.errors import BadInputError


@dataclass(frozen=True)
class PublicLoss:
    """How ℓ_pub turns Ψ(x) into model inputs, and whether it uses the label."""

    name: str
    public_map: PublicMap
    fill: torch.Tensor | None = None  # per protected column, for mask / mean
    imputer: tuple[torch.Tensor, torch.Tensor, tuple[tuple[int, int, bool], ...]] | None = None

    @property
    def label_free(self) -> bool:
        return self.name == "label_dp"

    @property
    def pad_width(self) -> int:
        """Number of N(0, 1) draws per example (gaussian_pad only)."""
        if self.name == "gaussian_pad":
            return int(self.public_map.protected_columns.numel())
        return 0

    def inputs(self, view: PublicView, pad_noise: torch.Tensor | None = None) -> torch.Tensor:
        """Model inputs built from Ψ(x) only (``[..., n_inputs]``): the protected columns filled by the loss's
        construction (module docstring) and put back in place.

        Args:
            view: Ψ(x): its features, and the labels when they are public.
            pad_noise: N(0, 1) draws ``[..., pad_width]`` for ``gaussian_pad``; unused otherwise.

        Returns:
            The model inputs ``[..., n_inputs]``.
        """
        if self.name == "label_dp":
            return view.features
        if self.name == "public_image":
            assert isinstance(self.public_map, ImagePublicMap)
            return self.public_map.public_image(view.features)
        split = self.public_map
        assert isinstance(split, ColumnSplit)
        public = view.features
        if self.name == "gaussian_pad":
            assert pad_noise is not None
            protected = pad_noise.to(public.dtype)
        elif self.name == "impute":
            assert self.imputer is not None
            weight, bias, blocks = self.imputer
            scores = public @ weight.to(public.device).T + bias.to(public.device)
            parts = []
            for start, stop, categorical in blocks:
                block = scores[..., start:stop]
                parts.append(torch.softmax(block, dim=-1) if categorical else block)
            protected = torch.cat(parts, dim=-1)
        else:
            assert self.fill is not None
            protected = self.fill.to(public.device, public.dtype).expand(*public.shape[:-1], -1)
        return split.assemble(public, protected)


def _fit_imputer(split: ColumnSplit, population: EncodedData):
    """Per protected feature: multinomial logistic regression (categorical) or least squares (numeric)
    from the public columns, fitted on the population split."""
    from sklearn.linear_model import LinearRegression, LogisticRegression

    public = population.x[:, split.public_columns.numpy()]
    weights, biases, blocks, offset = [], [], [], 0
    for group in split.protected_groups:
        target = population.x[:, group.start:group.stop]
        if group.kind == "categorical":
            codes = target.argmax(axis=1)
            width = group.stop - group.start
            coef = np.zeros((width, public.shape[1]))
            intercept = np.full(width, -30.0)  # categories never seen in the population split get ~0
            present = np.unique(codes)
            if len(present) == 1:
                intercept[present[0]] = 0.0
            else:
                fit = LogisticRegression(max_iter=500).fit(public, codes)
                rows = fit.classes_
                if len(rows) == 2:  # sklearn stores one row for the binary case
                    coef[rows[1]], intercept[rows[1]], intercept[rows[0]] = fit.coef_[0], fit.intercept_[0], 0
                else:
                    coef[rows], intercept[rows] = fit.coef_, fit.intercept_
            blocks.append((offset, offset + width, True))
        else:
            fit = LinearRegression().fit(public, target[:, 0])
            coef, intercept = fit.coef_[None, :], np.array([fit.intercept_])
            blocks.append((offset, offset + 1, False))
        weights.append(coef)
        biases.append(intercept)
        offset = blocks[-1][1]
    return (torch.tensor(np.concatenate(weights), dtype=torch.float32),
            torch.tensor(np.concatenate(biases), dtype=torch.float32), tuple(blocks))


def build_public_loss(name: str, public_map: PublicMap, population: EncodedData | None = None) -> PublicLoss:
    """Construct a public loss; ``population`` is public data with protected values (mean, impute).

    Args:
        name: ``mask``, ``mean``, ``gaussian_pad``, ``impute``, ``label_dp`` or ``public_image``.
        public_map: the data's Ψ.
        population: the population split (needed by ``mean`` and ``impute``).

    Returns:
        The public loss (with its fill or fitted imputer).

    Raises:
        BadInputError: the loss is unknown, does not fit Ψ (label-only, image or column-subset map; a public
            label), or needs a population split that is missing.
    """
    if name == "label_dp":
        if not isinstance(public_map, LabelOnlyPublicMap):
            raise BadInputError("label_dp needs the label-only public map (label DP)", "mechanism.public_loss")
        return PublicLoss(name, public_map)
    if name == "public_image":
        if not isinstance(public_map, ImagePublicMap):
            raise BadInputError("public_image needs an image public map (data.public_map: blur or downsample)",
                                "mechanism.public_loss")
        return PublicLoss(name, public_map)
    if not isinstance(public_map, ColumnSplit):
        raise BadInputError(f"public loss {name!r} needs a column-subset public map", "mechanism.public_loss")
    if not public_map.label_public:
        raise BadInputError(f"public loss {name!r} uses the label, which is not public", "mechanism.public_loss")
    width = int(public_map.protected_columns.numel())
    if name == "mask":
        return PublicLoss(name, public_map, fill=torch.zeros(width))
    if name == "gaussian_pad":
        return PublicLoss(name, public_map)
    if population is None:
        raise BadInputError(f"public loss {name!r} needs a population split", "mechanism.public_loss")
    if name == "mean":
        mean = population.x[:, public_map.protected_columns.numpy()].mean(axis=0)
        return PublicLoss(name, public_map, fill=torch.tensor(mean, dtype=torch.float32))
    if name == "impute":
        return PublicLoss(name, public_map, imputer=_fit_imputer(public_map, population))
    raise BadInputError(f"unknown public loss {name!r}", "mechanism.public_loss")
