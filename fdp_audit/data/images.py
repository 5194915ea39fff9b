"""Image data sets (docs/images.md): grey-scale images with class labels, pixel intensities in [0, 1].

* ``digits``: scikit-learn's bundled 8×8 digits (1,797 images, intensities 0–16 scaled to [0, 1]); the
  embedded default for demos and CI.
* ``fashion_mnist``: Fashion-MNIST (Xiao, Rasul & Vollgraf 2017; 28×28, 60,000 training and 10,000 test
  images, MIT licence) read from the standard IDX files, as Debian's ``dataset-fashion-mnist`` package
  installs them (:data:`FASHION_MNIST_DIR`), or from the folder ``data.path`` names.

Nothing is downloaded: a missing file is a :class:`~fdp_audit.errors.BadInputError` naming ``data.path``.
A new image set is a loader and one :func:`fdp_audit.data.catalog.register_dataset` line.
"""

from __future__ import annotations

import gzip
import hashlib
import math
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from fdp_audit.errors import BadInputError

FASHION_MNIST_DIR = Path("/usr/share/datasets/fashion-mnist")
FASHION_MNIST_CLASSES = ("t-shirt", "trouser", "pullover", "dress", "coat", "sandal", "shirt", "sneaker", "bag",
                         "ankle-boot")
FASHION_MNIST_FILES = {
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}
MAX_IDX_BYTES = 1 << 30
MAX_IDX_DIMENSIONS = 3  # images [N, H, W]; labels [N]
# IDX type codes (the third byte of the magic number) and their big-endian numpy types
IDX_TYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}


@dataclass(frozen=True)
class ImageSet:
    """``images`` ``[N, H, W]`` float32 in [0, 1], integer ``labels`` ``[N]`` indexing ``classes``."""

    name: str
    images: np.ndarray
    labels: np.ndarray
    classes: tuple[str, ...]

    def __post_init__(self) -> None:
        if self.images.ndim != 3 or len(self.images) != len(self.labels):
            raise ValueError(f"{self.name}: images must be [N, H, W] with one label each")

    @property
    def n_images(self) -> int:
        return self.images.shape[0]

    @property
    def height(self) -> int:
        return self.images.shape[1]

    @property
    def width(self) -> int:
        return self.images.shape[2]

    def take(self, rows: np.ndarray) -> ImageSet:
        """The images (and labels) ``rows``, as a new set of the same name and classes.

        Args:
            rows: image indices (or a boolean mask of length :attr:`n_images`).

        Returns:
            The subset.
        """
        return ImageSet(self.name, self.images[rows], self.labels[rows], self.classes)

    def flat(self) -> np.ndarray:
        """The images as rows of ``H·W`` pixels (row-major), the records' feature vectors.

        Returns:
            A float32 array of shape ``[N, H·W]``.
        """
        return self.images.reshape(self.n_images, -1)

    def fingerprint(self) -> str:
        """SHA-256 over the name, shape, pixels and labels: identifies the exact images a model saw.

        Returns:
            The hex digest (64 characters).
        """
        digest = hashlib.sha256(f"{self.name}:{self.images.shape}:".encode())
        digest.update(np.ascontiguousarray(self.images, dtype="<f4").tobytes())
        digest.update(np.ascontiguousarray(self.labels, dtype="<i8").tobytes())
        return digest.hexdigest()


def read_idx(path: Path) -> np.ndarray:
    """An IDX file (LeCun's MNIST format; gzip-compressed when its name ends in ``.gz``): magic ``0 0 type
    ndim``, ``ndim`` big-endian uint32 sizes, then the values in row-major order. Every malformation is bad
    input naming the file, the header's before anything is shaped: 1 to :data:`MAX_IDX_DIMENSIONS` dimensions,
    none empty, and exactly the bytes they state.

    Args:
        path: the IDX file.

    Returns:
        A read-only array of the header's shape and type (big-endian dtype).

    Raises:
        BadInputError: the file cannot be read or decompressed, is larger than :data:`MAX_IDX_BYTES`, or its
            header is malformed or disagrees with its size.
    """
    try:
        with (gzip.open(path, "rb") if path.suffix == ".gz" else path.open("rb")) as handle:
            raw = handle.read(MAX_IDX_BYTES + 1)
    except (OSError, EOFError, zlib.error) as err:
        raise BadInputError(f"cannot read IDX file {path}: {err}", "data.path") from None
    if len(raw) > MAX_IDX_BYTES:
        raise BadInputError(f"IDX file {path} is larger than {MAX_IDX_BYTES >> 20} MiB", "data.path")
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] not in IDX_TYPES:
        raise BadInputError(f"{path} is not an IDX file (bad magic number)", "data.path")
    ndim = raw[3]
    header = 4 + 4 * ndim
    if not 1 <= ndim <= MAX_IDX_DIMENSIONS:
        raise BadInputError(f"{path}: an IDX file of images or labels has 1 to {MAX_IDX_DIMENSIONS} dimensions, not "
                            f"{ndim}", "data.path")
    if len(raw) < header:
        raise BadInputError(f"{path}: truncated IDX header", "data.path")
    shape = tuple(int(v) for v in np.frombuffer(raw, dtype=">u4", count=ndim, offset=4))
    if min(shape) == 0:  # an empty dimension would let the others be as large as 2³²−1 over no data
        raise BadInputError(f"{path}: IDX header says {shape}, which holds nothing", "data.path")
    dtype = np.dtype(IDX_TYPES[raw[2]])
    expected = math.prod(int(size) for size in shape) * dtype.itemsize  # Python ints: no wrap-around
    if len(raw) - header != expected:
        raise BadInputError(f"{path}: IDX header says {shape} ({expected} bytes of data) but the file holds "
                            f"{len(raw) - header}", "data.path")
    return np.frombuffer(raw, dtype=dtype, offset=header).reshape(shape)


def _idx_file(folder: Path, stem: str) -> Path:
    """``stem`` or ``stem.gz`` in ``folder``; bad input naming the folder when neither exists."""
    for candidate in (folder / f"{stem}.gz", folder / stem):
        if candidate.is_file():
            return candidate
    raise BadInputError(f"Fashion-MNIST file {stem}(.gz) not found in {folder} (install Debian's "
                        "dataset-fashion-mnist package or point data.path at a folder holding the IDX files)",
                        "data.path")


def load_fashion_mnist(path: str | None = None, split: str = "train") -> ImageSet:
    """Fashion-MNIST's ``train`` or ``test`` split from the IDX files in ``path`` (default
    :data:`FASHION_MNIST_DIR`), intensities 0–255 scaled to [0, 1].

    Args:
        path: the folder holding the IDX files (each may be gzip-compressed), or None for the default.
        split: ``"train"`` (60,000 images) or ``"test"`` (10,000).

    Returns:
        The images ``[N, 28, 28]`` with labels 0–9 indexing :data:`FASHION_MNIST_CLASSES`.

    Raises:
        BadInputError: a file is missing or malformed, images and labels do not match, or they are not uint8 with
            labels 0–9.
    """
    folder = Path(path) if path is not None else FASHION_MNIST_DIR
    image_stem, label_stem = FASHION_MNIST_FILES[split]
    images, labels = read_idx(_idx_file(folder, image_stem)), read_idx(_idx_file(folder, label_stem))
    if images.ndim != 3 or labels.ndim != 1 or len(images) != len(labels):
        raise BadInputError(f"{folder}: Fashion-MNIST {split} images {images.shape} and labels {labels.shape} "
                            "do not match", "data.path")
    if images.dtype != np.uint8 or labels.dtype != np.uint8 or int(labels.max(initial=0)) >= 10:
        raise BadInputError(f"{folder}: Fashion-MNIST {split} files must hold uint8 pixels and labels 0–9",
                            "data.path")
    return ImageSet("fashion_mnist", images.astype(np.float32) / 255.0, labels.astype(np.int64),
                    FASHION_MNIST_CLASSES)


def load_digits_images(path: str | None = None, split: str = "train") -> ImageSet:
    """scikit-learn's bundled 8×8 digits, intensities 0–16 scaled to [0, 1] (``path`` is not used: the data
    ship with scikit-learn).

    Args:
        path: not used.
        split: not used: the digits have one split.

    Returns:
        The 1,797 images ``[N, 8, 8]`` with labels 0–9, classes ``"0"`` … ``"9"``.
    """
    from sklearn.datasets import load_digits

    bunch = load_digits()
    return ImageSet("digits", (bunch.images / 16.0).astype(np.float32), bunch.target.astype(np.int64),
                    tuple(str(d) for d in range(10)))
