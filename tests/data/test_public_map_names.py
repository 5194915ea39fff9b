"""One name per concept for Ψ: ``PublicMap`` (the map, a kind of which ``data.public_map`` names, implemented by
``ColumnSplit``, ``LabelOnlyPublicMap``, ``ImagePublicMap``'s subclasses and ``CallablePublicMap``) and
``ColumnSplit`` (the split of the columns into public and protected); the names they replaced appear nowhere."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# built from parts so that this file is not a hit of the search it makes
OLD = ["Feature" + "Map", "Feature" + "Split", "Image" + "Map", "LabelOnly" + "Map", "Callable" + "Map",
       "Downsample" + "Map", "Blur" + "Map", "feature" + "_split", "feature" + "_map"]


def test_the_replaced_names_of_the_public_map_appear_nowhere():
    pattern = re.compile(r"\b(" + "|".join(OLD) + r")\b")
    files = [*(ROOT / "fdp_audit").rglob("*.py"), *(ROOT / "tests").rglob("*.py"), *(ROOT / "benchmarks").rglob("*.py"),
             *(ROOT / "examples").rglob("*.py"), *(ROOT / "docs").glob("*.md"), ROOT / "README.md"]
    hits = [f"{path.relative_to(ROOT)}:{number}: {match.group(0)}" for path in files
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
            for match in pattern.finditer(line)]
    assert hits == []


def test_the_public_map_of_prepared_data_is_the_configured_kind():
    from fdp_audit.config import DataConfig
    from fdp_audit.data.features import ColumnSplit, LabelOnlyPublicMap
    from fdp_audit.data.image_psi import DownsamplePublicMap, ImagePublicMap
    from fdp_audit.data.prepare import prepare_data

    columns = prepare_data(DataConfig(dataset="adult", protected=("marital-status",)), 0)
    assert isinstance(columns.public_map, ColumnSplit) and columns.column_split() is columns.public_map
    images = prepare_data(DataConfig(dataset="digits", protected=(), public_map="downsample"), 0)
    assert isinstance(images.public_map, DownsamplePublicMap) and isinstance(images.public_map, ImagePublicMap)
    labels = prepare_data(DataConfig(dataset="digits", protected=(), public_map="label_only", label_public=False), 0)
    assert isinstance(labels.public_map, LabelOnlyPublicMap)
