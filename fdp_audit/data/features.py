"""Public maps Ψ (docs/accounting.md, docs/training.md): what of a record is public.

Every map turns encoded records ``(x, y)`` into a :class:`PublicView`, the only thing a public loss
ever receives. A view is built from the public columns alone, so the public loss cannot read a
protected value: it is not in the object it is given.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np
import torch

from fdp_audit.data.encoding import ColumnGroup, EncodedData
from fdp_audit.errors import BadInputError


@dataclass(frozen=True)
class PublicView:
    """Ψ(x) for a batch: public features and, when the label is public, the labels."""

    features: torch.Tensor
    labels: torch.Tensor | None

    def __len__(self) -> int:
        return self.features.shape[0]

    def take(self, rows: torch.Tensor) -> PublicView:
        """The view of the rows ``rows``.

        Args:
            rows: row indices (or a boolean mask) on the view's device.

        Returns:
            A new view holding those rows' features (and labels, when public).
        """
        return PublicView(self.features[rows], None if self.labels is None else self.labels[rows])


class PublicMap(Protocol):
    """Ψ: encoded records → :class:`PublicView`."""

    label_public: bool

    def __call__(self, x: torch.Tensor, y: torch.Tensor) -> PublicView: ...

    def spec(self) -> dict[str, Any]:
        """A JSON-able description stored in checkpoints and results.

        Returns:
            A dict with at least ``"kind"``, the map's kind.
        """
        ...


@dataclass(frozen=True)
class CanaryCandidates:
    """Records with one public image Ψ(x) (and label) and pairwise different protected parts: the candidate
    values of an audit game's canary. ``names`` says what tells each apart (``sex=Female``)."""

    records: torch.Tensor  # [V, d]
    names: tuple[str, ...]


@runtime_checkable
class CandidateMap(Protocol):
    """A Ψ from which the record-canary games build their candidates (docs/extending.md, "A public map")."""

    def canary_candidates(self, record: torch.Tensor, population: EncodedData, count: int) -> CanaryCandidates:
        """At most ``count`` records with ``Ψ(r) = Ψ(record)``, the same label, and pairwise different protected
        parts, the most typical of ``population`` first (so that a known prior over them is realistic); fewer
        when Ψ admits fewer.

        Args:
            record: the encoded record the candidates vary, shape ``[d]``.
            population: the records that tell which protected values are typical.
            count: the largest number of candidates wanted.

        Returns:
            The candidates (``records`` of shape ``[V, d]``, V <= ``count``) with their names.

        Raises:
            BadInputError: the protected part cannot be varied.
        """
        ...


@dataclass(frozen=True)
class ContinuousCanary:
    """A record whose protected part is k continuous input coordinates that Ψ does not read: every value there
    gives the same public image Ψ(x) and label. ``template`` holds the centre 0 there (the training mean of
    standardised columns); ``names`` are the protected features."""

    template: torch.Tensor  # [d]
    coordinates: tuple[int, ...]  # the k protected input coordinates
    names: tuple[str, ...]

    def with_values(self, values: torch.Tensor) -> torch.Tensor:
        """Records ``[N, d]``: the template with each row of ``values`` ``[N, k]`` in the protected coordinates.

        Args:
            values: the protected values, one row of k per record.

        Returns:
            A new tensor of shape ``[N, d]`` in the template's dtype and device.
        """
        records = self.template.repeat(len(values), 1)
        records[:, list(self.coordinates)] = values.to(records.dtype)
        return records


@runtime_checkable
class ContinuousCanaryMap(Protocol):
    """A Ψ whose protected part is continuous input coordinates (docs/extending.md, "A public map")."""

    def continuous_canary(self, record: torch.Tensor) -> ContinuousCanary:
        """``record`` with its protected coordinates at 0, and which coordinates they are; the reconstruction
        game draws its canaries' values there.

        Args:
            record: an encoded record, shape ``[d]``.

        Returns:
            The :class:`ContinuousCanary`.

        Raises:
            BadInputError: Ψ's protected part is not continuous coordinates.
        """
        ...


@runtime_checkable
class WidenableMap(Protocol):
    """A Ψ that extends to records with appended public columns (docs/extending.md, "A public map")."""

    def with_public_columns(self, groups: tuple[ColumnGroup, ...]) -> PublicMap:
        """Ψ of records widened by the given all-zero columns, which become public: Ψ'(x ⊕ z) = Ψ(x) ⊕ z. The
        gradient-canary games place their canary's coordinates there.

        Args:
            groups: the appended columns, numbered after the record's last column.

        Returns:
            The widened map.
        """
        ...


@dataclass(frozen=True)
class ColumnSplit:
    """Column-subset Ψ: every encoded column is public or protected by the raw feature it encodes.
    Ψ(x, y) = (x[public columns], y if the label is public)."""

    groups: tuple[ColumnGroup, ...]
    protected_features: tuple[str, ...]
    label_public: bool = True
    public_columns: torch.Tensor = field(init=False, repr=False)
    protected_columns: torch.Tensor = field(init=False, repr=False)

    def __post_init__(self) -> None:
        names = {g.feature for g in self.groups}
        unknown = [f for f in self.protected_features if f not in names]
        if unknown:
            raise BadInputError(f"protected column(s) {unknown} not among the features", "data.protected")
        public, protected = [], []
        for g in self.groups:
            (protected if g.feature in self.protected_features else public).extend(range(g.start, g.stop))
        object.__setattr__(self, "public_columns", torch.tensor(public, dtype=torch.long))
        object.__setattr__(self, "protected_columns", torch.tensor(protected, dtype=torch.long))

    @property
    def n_features(self) -> int:
        return self.groups[-1].stop if self.groups else 0

    @property
    def protected_groups(self) -> tuple[ColumnGroup, ...]:
        return tuple(g for g in self.groups if g.feature in self.protected_features)

    @property
    def public_groups(self) -> tuple[ColumnGroup, ...]:
        return tuple(g for g in self.groups if g.feature not in self.protected_features)

    def __call__(self, x: torch.Tensor, y: torch.Tensor) -> PublicView:
        features = x.index_select(-1, self.public_columns.to(x.device))
        return PublicView(features, y if self.label_public else None)

    def assemble(self, public: torch.Tensor, protected: torch.Tensor) -> torch.Tensor:
        """Model inputs from a public part and a protected part (the inverse of the column split).

        Args:
            public: the public columns, shape ``[..., number of public columns]``.
            protected: the protected columns, shape ``[..., number of protected columns]``.

        Returns:
            Records of shape ``[..., n_features]`` with each part in its columns.
        """
        x = public.new_empty((*public.shape[:-1], self.n_features))
        x[..., self.public_columns.to(x.device)] = public
        x[..., self.protected_columns.to(x.device)] = protected
        return x

    def canary_candidates(self, record: torch.Tensor, population: EncodedData, count: int) -> CanaryCandidates:
        """``record`` with each of the ``count`` most frequent categories (in ``population``) of the first
        protected attribute, which must be categorical; every other column, public or protected, unchanged.

        Args:
            record: the encoded record the candidates vary, shape ``[d]``.
            population: the records whose category frequencies order the candidates.
            count: the largest number of candidates wanted.

        Returns:
            The candidates, named ``feature=category``, most frequent first.

        Raises:
            BadInputError: there is no protected attribute, or the first is not categorical.
        """
        groups = self.protected_groups
        if not groups or groups[0].kind != "categorical":
            raise BadInputError("records with one public image and different protected values need a categorical "
                                "first protected attribute", "data.protected")
        group = groups[0]
        frequency = population.x[:, group.start:group.stop].sum(axis=0)
        chosen = np.argsort(-frequency, kind="stable")[:count]
        records = record.repeat(len(chosen), 1)
        records[:, group.start:group.stop] = 0.0
        records[torch.arange(len(chosen)), group.start + torch.as_tensor(chosen)] = 1.0
        return CanaryCandidates(records, tuple(f"{group.feature}={group.categories[c]}" for c in chosen))

    def continuous_canary(self, record: torch.Tensor) -> ContinuousCanary:
        """``record`` with every protected column at 0; every protected attribute must be numeric.

        Args:
            record: an encoded record, shape ``[d]``.

        Returns:
            The :class:`ContinuousCanary` over the protected columns.

        Raises:
            BadInputError: there is no protected attribute, or one is not numeric.
        """
        groups = self.protected_groups
        if not groups or any(g.kind != "numeric" for g in groups):
            raise BadInputError("records with continuous protected values need numeric protected features",
                                "data.protected")
        coordinates = tuple(int(j) for j in self.protected_columns.tolist())
        template = record.clone()
        template[list(coordinates)] = 0.0
        return ContinuousCanary(template, coordinates, tuple(g.feature for g in groups))

    def with_public_columns(self, groups: tuple[ColumnGroup, ...]) -> ColumnSplit:
        """Ψ'(x ⊕ z) = Ψ(x) ⊕ z: the same split over records widened by public columns.

        Args:
            groups: the appended columns, numbered after the record's last column.

        Returns:
            A new :class:`ColumnSplit` with the groups appended (public: they are not among the protected features).
        """
        return ColumnSplit(self.groups + groups, self.protected_features, self.label_public)

    def spec(self) -> dict[str, Any]:
        """A JSON-able description stored in checkpoints and results.

        Returns:
            ``{"kind": "column_subset", "protected": [...], "public": [...], "label_public": bool}``, features by name.
        """
        return {
            "kind": "column_subset",
            "protected": list(self.protected_features),
            "public": [g.feature for g in self.public_groups],
            "label_public": self.label_public,
        }


@dataclass(frozen=True)
class LabelOnlyPublicMap:
    """Label DP as FDP (docs/accounting.md): Ψ(x, y) = x, the label is the protected part."""

    label_public: bool = field(default=False, init=False)

    def __call__(self, x: torch.Tensor, y: torch.Tensor) -> PublicView:
        return PublicView(x, None)

    def with_public_columns(self, groups: tuple[ColumnGroup, ...]) -> LabelOnlyPublicMap:
        """Every column is public already, so wider records keep the map.

        Args:
            groups: the appended columns (not needed).

        Returns:
            This map.
        """
        return self

    def spec(self) -> dict[str, Any]:
        """A JSON-able description stored in checkpoints and results.

        Returns:
            ``{"kind": "label_only"}``.
        """
        return {"kind": "label_only"}


@dataclass(frozen=True)
class CallablePublicMap:
    """A user-supplied Ψ: ``function(x, y) -> public features``; the label is public if ``label_public``."""

    function: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
    name: str
    label_public: bool = True

    def __call__(self, x: torch.Tensor, y: torch.Tensor) -> PublicView:
        return PublicView(self.function(x, y), y if self.label_public else None)

    def spec(self) -> dict[str, Any]:
        """A JSON-able description stored in checkpoints and results.

        Returns:
            ``{"kind": "callable", "name": ..., "label_public": bool}``.
        """
        return {"kind": "callable", "name": self.name, "label_public": self.label_public}
