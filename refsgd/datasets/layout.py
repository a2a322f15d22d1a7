"""The HDF5 layout of a data set (see :mod:`refsgd.datasets`): reading and checking a file
(:func:`load`, normalised to the requested dtype), writing one (:func:`write`), describing one
(:func:`info`), and whether a data set fits a model (:func:`check_fits`)."""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

import h5py
import numpy as np

from refsgd.errors import RefsgdError
from refsgd.files import h5_written, open_h5
from refsgd.nn.spec import available_models, read_spec

from .cache import DOWNLOADABLE, named

FORMAT = "refsgd-dataset"

FORMAT_VERSION = 1

# Images processed per block when computing statistics or normalising, so
# that no float64 copy of a whole data set is ever made.
_BLOCK = 4096

_REQUIRED_DATASETS = ("train/images", "train/labels", "test/images", "test/labels")

_REQUIRED_ATTRS = ("format", "format_version", "name", "num_classes", "image_shape", "mean", "std")

_TEXT_ATTRS = ("provenance", "licence", "citation")


# ---------------------------------------------------------------------------
# Dataset and loading
# ---------------------------------------------------------------------------


class Dataset:
    """A loaded, normalised data set.

    Attributes
    ----------
    name : str
    num_classes : int
    image_shape : tuple (C, H, W)
    x_train, x_test : ndarray, shape (N, C, H, W), C-contiguous, normalised,
        of the dtype asked of :func:`load`
    y_train, y_test : int64 ndarray, shape (N,)
    mean, std : float64 ndarray, shape (C,), the statistics used to normalise
    provenance, licence, citation : str
    path : str, the HDF5 file it was read from
    """

    def __init__(self, *, name, num_classes, image_shape, x_train, y_train, x_test, y_test,
                 mean, std, provenance, licence, citation, path):
        self.name = name
        self.num_classes = int(num_classes)
        self.image_shape = tuple(int(d) for d in image_shape)
        self.x_train = x_train
        self.y_train = y_train
        self.x_test = x_test
        self.y_test = y_test
        self.mean = mean
        self.std = std
        self.provenance = provenance
        self.licence = licence
        self.citation = citation
        self.path = path

    @property
    def n_train(self) -> int:
        return int(self.x_train.shape[0])

    @property
    def n_test(self) -> int:
        return int(self.x_test.shape[0])

    def __repr__(self) -> str:
        return (f"Dataset(name={self.name!r}, train={self.n_train}, test={self.n_test}, "
                f"image_shape={self.image_shape}, num_classes={self.num_classes}, "
                f"dtype={self.x_train.dtype}, path={self.path!r})")


def _embedded_path() -> str:
    """Path of the embedded ``digits.h5`` (installed package first, then the repo)."""
    try:
        ref = resources.files("refsgd.data") / "digits.h5"
        if ref.is_file():
            # An installed package on the file system: a real path exists.
            return os.fspath(ref)
    except (ModuleNotFoundError, TypeError, AttributeError):
        pass
    repo = Path(__file__).resolve().parent.parent / "data" / "digits.h5"
    if repo.is_file():
        return str(repo)
    raise RefsgdError("the embedded dataset digits.h5 is missing from this installation "
                      "(regenerate it with python data/prepare_digits.py).")


def _text(value) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, np.ndarray) and value.shape == ():
        return _text(value[()])
    return str(value)


class _Header:
    """Validated metadata and labels of an open refsgd HDF5 file (filled by _read_header)."""


def _read_header(f: h5py.File, path: str) -> _Header:
    """Check the layout of an open file; read its attributes and labels (not the images)."""
    for key in _REQUIRED_DATASETS:
        obj = f.get(key)
        if obj is None:
            raise RefsgdError(f"{path}: not a refsgd dataset: missing /{key}.")
        if not isinstance(obj, h5py.Dataset):
            raise RefsgdError(f"{path}: not a refsgd dataset: /{key} is not an HDF5 dataset.")
    attrs = f.attrs
    for key in _REQUIRED_ATTRS:
        if key not in attrs:
            raise RefsgdError(f"{path}: not a refsgd dataset: missing root attribute {key!r}.")
    fmt = _text(attrs["format"])
    if fmt != FORMAT:
        raise RefsgdError(f"{path}: not a refsgd dataset: attribute format is {fmt!r}, "
                          f"expected {FORMAT!r}.")
    try:
        version = int(np.asarray(attrs["format_version"]).reshape(()))
    except (TypeError, ValueError):
        raise RefsgdError(f"{path}: attribute format_version is not an integer.") from None
    if version != FORMAT_VERSION:
        raise RefsgdError(f"{path}: format_version {version} is not supported "
                          f"(this refsgd reads version {FORMAT_VERSION}).")

    h = _Header()
    h.path = path
    h.name = _text(attrs["name"])
    try:
        h.num_classes = int(np.asarray(attrs["num_classes"]).reshape(()))
    except (TypeError, ValueError):
        raise RefsgdError(f"{path}: attribute num_classes is not an integer.") from None
    if h.num_classes < 1:
        raise RefsgdError(f"{path}: attribute num_classes is {h.num_classes}, expected >= 1.")
    shape = np.asarray(attrs["image_shape"])
    if shape.ndim != 1 or shape.size != 3 or not np.issubdtype(shape.dtype, np.integer) \
            or np.any(shape < 1):
        raise RefsgdError(f"{path}: attribute image_shape is {shape.tolist()}, "
                          f"expected three positive integers [C, H, W].")
    h.image_shape = tuple(int(d) for d in shape)
    c = h.image_shape[0]
    for key in ("mean", "std"):
        val = np.asarray(attrs[key], dtype=np.float64).reshape(-1)
        if val.size != c:
            raise RefsgdError(f"{path}: attribute {key} has {val.size} values but images have "
                              f"{c} channel{'s' if c != 1 else ''}.")
        if not np.all(np.isfinite(val)):
            raise RefsgdError(f"{path}: attribute {key} contains non-finite values.")
        setattr(h, key, val)
    if np.any(h.std <= 0):
        raise RefsgdError(f"{path}: attribute std must be positive, got {h.std.tolist()}.")
    for key in _TEXT_ATTRS:
        setattr(h, key, _text(attrs[key]) if key in attrs else "")

    for split in ("train", "test"):
        imgs = f[f"{split}/images"]
        labs = f[f"{split}/labels"]
        if imgs.dtype != np.uint8:
            raise RefsgdError(f"{path}: /{split}/images has dtype {imgs.dtype}, expected uint8.")
        if imgs.ndim != 4 or tuple(imgs.shape[1:]) != h.image_shape:
            raise RefsgdError(f"{path}: /{split}/images has shape {tuple(imgs.shape)}, expected "
                              f"(N, {', '.join(map(str, h.image_shape))}) from image_shape.")
        if labs.ndim != 1:
            raise RefsgdError(f"{path}: /{split}/labels has shape {tuple(labs.shape)}, "
                              f"expected a 1-d array.")
        if not np.issubdtype(labs.dtype, np.integer):
            raise RefsgdError(f"{path}: /{split}/labels has dtype {labs.dtype}, "
                              f"expected an integer type.")
        if labs.shape[0] != imgs.shape[0]:
            raise RefsgdError(f"{path}: /{split} has {imgs.shape[0]} images but "
                              f"{labs.shape[0]} labels.")
        y = np.ascontiguousarray(labs[()], dtype=np.int64)
        if y.size and (y.min() < 0 or y.max() >= h.num_classes):
            bad = y.min() if y.min() < 0 else y.max()
            raise RefsgdError(f"{path}: /{split}/labels contains {bad}, outside "
                              f"[0, {h.num_classes}) for num_classes = {h.num_classes}.")
        setattr(h, f"y_{split}", y)
        setattr(h, f"n_{split}", int(imgs.shape[0]))
    if h.n_train == 0:
        raise RefsgdError(f"{path}: /train/images is empty.")
    return h


def _normalise(images: h5py.Dataset, mean, std, dtype) -> np.ndarray:
    """(img - mean[c]) / std[c], evaluated in float64, rounded once to dtype, block by block."""
    n = images.shape[0]
    out = np.empty(images.shape, dtype=dtype)
    m = mean.reshape(1, -1, 1, 1)
    s = std.reshape(1, -1, 1, 1)
    for start in range(0, n, _BLOCK):
        stop = min(n, start + _BLOCK)
        block = images[start:stop].astype(np.float64)
        block -= m
        block /= s
        out[start:stop] = block
    return out


def load(path_or_name=None, dtype=np.float32) -> Dataset:
    """Load a data set and normalise its images.

    ``path_or_name``: None or ``"digits"`` for the embedded data set (the name
    wins over a file called ``digits`` in the working directory), ``"mnist"``,
    ``"fashion-mnist"`` or ``"cifar10"`` for the file ``refsgd data download``
    wrote into the cache folder (:mod:`.cache`; the names win likewise), otherwise
    the path of an HDF5 file in the layout of the module docstring.
    ``dtype``: a floating dtype for ``x_train``/``x_test`` (float32 or float64).
    Raises :class:`RefsgdError` on a missing or malformed file.
    """
    dtype = np.dtype(dtype)
    if dtype.kind != "f":
        raise RefsgdError(f"dtype {dtype} is not a floating-point type.")
    if path_or_name is None or (isinstance(path_or_name, str) and path_or_name == "digits"):
        path = _embedded_path()
    elif isinstance(path_or_name, str) and path_or_name in DOWNLOADABLE:
        path = named(path_or_name)  # what `refsgd data download` wrote into the cache folder
    else:
        path = os.fspath(path_or_name)
    with open_h5(path, "a refsgd dataset") as f:
        h = _read_header(f, path)
        try:
            x_train = _normalise(f["train/images"], h.mean, h.std, dtype)
            x_test = _normalise(f["test/images"], h.mean, h.std, dtype)
        except (OSError, ValueError) as e:  # e.g. a damaged compressed chunk
            raise RefsgdError(f"{path}: the images cannot be read, the file is damaged ({e})") from None
    for split, x in (("train", x_train), ("test", x_test)):
        if not np.all(np.isfinite(x)):
            raise RefsgdError(f"{path}: normalising /{split}/images with the file's mean and std gives non-finite "
                              f"values in {dtype.name} (std too small?): the dataset's statistics are wrong")
    return Dataset(name=h.name, num_classes=h.num_classes, image_shape=h.image_shape,
                   x_train=x_train, y_train=h.y_train, x_test=x_test, y_test=h.y_test,
                   mean=h.mean, std=h.std, provenance=h.provenance, licence=h.licence,
                   citation=h.citation, path=path)


def check_fits(dataset: Dataset, input_shape, num_classes, model=None) -> None:
    """Raise RefsgdError unless a model taking ``input_shape`` with ``num_classes``
    outputs can be trained on ``dataset``.

    The image shape must equal ``input_shape`` exactly; the data set may have
    fewer classes than the model has outputs, not more.  ``model`` is the
    model's name, used in the message only.
    """
    who = f"model {model}" if model else "the model"
    want = tuple(int(d) for d in input_shape)
    if tuple(dataset.image_shape) != want:
        raise RefsgdError(f"dataset {dataset.name} has images of shape "
                          f"{tuple(dataset.image_shape)} but {who} expects {want}{_models_that_fit(dataset)}.")
    if dataset.num_classes > int(num_classes):
        raise RefsgdError(f"dataset {dataset.name} has {dataset.num_classes} classes but "
                          f"{who} has only {int(num_classes)} outputs{_models_that_fit(dataset)}.")


def _models_that_fit(dataset):
    """"; the bundled models that fit it: --model a, --model b" (or that none does)."""
    fit = []
    for name in available_models():
        spec, _ = read_spec(name)
        if tuple(spec.get("input", ())) == tuple(dataset.image_shape) and \
                int(spec.get("classes", 0)) >= dataset.num_classes:
            fit.append(f"--model {name}")
    if not fit:
        return "; no bundled model fits it (give the path of a .toml spec with --model)"
    return f"; the bundled models that fit it: {', '.join(fit)}"


# ---------------------------------------------------------------------------
# Writing
# ---------------------------------------------------------------------------


def _channel_stats(images: np.ndarray):
    """Exact per-channel mean and population std of uint8 images (N, C, H, W)."""
    n, c = images.shape[:2]
    count = n * images.shape[2] * images.shape[3]
    s1 = np.zeros(c, dtype=np.int64)
    s2 = np.zeros(c, dtype=np.int64)
    for start in range(0, n, _BLOCK):
        block = images[start:start + _BLOCK].astype(np.int64)
        s1 += block.sum(axis=(0, 2, 3))
        s2 += (block * block).sum(axis=(0, 2, 3))
    mean = np.empty(c)
    std = np.empty(c)
    for ch in range(c):
        a, b = int(s1[ch]), int(s2[ch])
        mean[ch] = a / count
        var_num = count * b - a * a  # exact: count**2 * variance
        std[ch] = np.sqrt(var_num) / count if var_num > 0 else 1.0
    return mean, std


def _check_split(out, split, images, labels, num_classes):
    images = np.asarray(images)
    labels = np.asarray(labels)
    if images.dtype != np.uint8:
        raise RefsgdError(f"{out}: {split} images have dtype {images.dtype}, expected uint8.")
    if images.ndim != 4:
        raise RefsgdError(f"{out}: {split} images have shape {images.shape}, "
                          f"expected (N, C, H, W).")
    if labels.ndim != 1 or not np.issubdtype(labels.dtype, np.integer):
        raise RefsgdError(f"{out}: {split} labels must be a 1-d integer array, "
                          f"got shape {labels.shape} and dtype {labels.dtype}.")
    if labels.shape[0] != images.shape[0]:
        raise RefsgdError(f"{out}: {images.shape[0]} {split} images but "
                          f"{labels.shape[0]} {split} labels.")
    labels = labels.astype(np.int64)
    if labels.size and (labels.min() < 0 or labels.max() >= num_classes):
        bad = labels.min() if labels.min() < 0 else labels.max()
        raise RefsgdError(f"{out}: {split} label {bad} is outside [0, {num_classes}).")
    return np.ascontiguousarray(images), labels


def write(path, name, train_images, train_labels, test_images, test_labels, num_classes,
          provenance, licence, citation) -> str:
    """Write a data set in the refsgd layout, atomically; return the path.

    Images are uint8 arrays (N, C, H, W) with the same (C, H, W) for train and
    test; labels integer arrays (N,) in [0, num_classes).  ``mean`` and ``std``
    are computed per channel over ``train_images`` (exactly, from integer sums;
    population std, 1.0 for a constant channel).  The file is written to a
    temporary file in the same directory and renamed over ``path``, so a
    failure never leaves a half-written file.
    """
    out = os.fspath(path)
    num_classes = int(num_classes)
    if num_classes < 1:
        raise RefsgdError(f"{out}: num_classes is {num_classes}, expected >= 1.")
    if not isinstance(name, str) or not name:
        raise RefsgdError(f"{out}: the dataset name must be a non-empty string.")
    xtr, ytr = _check_split(out, "train", train_images, train_labels, num_classes)
    xte, yte = _check_split(out, "test", test_images, test_labels, num_classes)
    if xtr.shape[0] == 0:
        raise RefsgdError(f"{out}: the training set is empty.")
    if xtr.shape[1:] != xte.shape[1:]:
        raise RefsgdError(f"{out}: train images have shape {xtr.shape[1:]} but test images "
                          f"{xte.shape[1:]}.")
    mean, std = _channel_stats(xtr)

    with h5_written(out, what="the dataset") as f:
        for split, x, y in (("train", xtr, ytr), ("test", xte, yte)):
            g = f.create_group(split)
            opts = {"compression": "gzip", "compression_opts": 6} if x.shape[0] else {}
            g.create_dataset("images", data=x, **opts)
            g.create_dataset("labels", data=y, **opts)
        a = f.attrs
        a["format"] = FORMAT
        a["format_version"] = np.int64(FORMAT_VERSION)
        a["name"] = name
        a["num_classes"] = np.int64(num_classes)
        a["image_shape"] = np.asarray(xtr.shape[1:], dtype=np.int64)
        a["mean"] = mean
        a["std"] = std
        a["provenance"] = str(provenance)
        a["licence"] = str(licence)
        a["citation"] = str(citation)
    return out


# ---------------------------------------------------------------------------
# Summary
# ---------------------------------------------------------------------------


def _histogram_lines(labels: np.ndarray, num_classes: int, indent: str) -> list[str]:
    counts = np.bincount(labels, minlength=num_classes)
    width = max(len(str(num_classes - 1)), 1)
    cells = [f"{k:>{width}}:{int(c)}" for k, c in enumerate(counts)]
    return [indent + "  ".join(cells[i:i + 10]) for i in range(0, len(cells), 10)]


def info(path) -> str:
    """A human-readable multi-line summary of a refsgd HDF5 data set."""
    path = os.fspath(path)
    with open_h5(path, "a refsgd dataset") as f:
        h = _read_header(f, path)
    c, hh, ww = h.image_shape
    fmt = lambda v: ", ".join(f"{x:.4f}" for x in v)  # noqa: E731
    lines = [
        f"file:         {path} ({os.path.getsize(path):,} bytes)",
        f"name:         {h.name}",
        f"train:        {h.n_train} images",
        f"test:         {h.n_test} images",
        f"image shape:  {c} x {hh} x {ww} (C x H x W), uint8",
        f"classes:      {h.num_classes}",
        "train labels (class:count):",
        *_histogram_lines(h.y_train, h.num_classes, "  "),
        "test labels (class:count):",
        *(_histogram_lines(h.y_test, h.num_classes, "  ") if h.n_test else ["  (none)"]),
        f"mean:         {fmt(h.mean)} (per channel, pixel units)",
        f"std:          {fmt(h.std)} (per channel, pixel units)",
        f"provenance:   {h.provenance}",
        f"licence:      {h.licence}",
        f"citation:     {h.citation}",
    ]
    return "\n".join(lines)
