"""Image-classification data sets: one HDF5 layout, converters, and the sampler.

HDF5 layout
-----------
Every data set refsgd reads is a single HDF5 file with this layout::

    /train/images   uint8, shape (N, C, H, W)
    /train/labels   int64, shape (N,)
    /test/images    uint8, shape (M, C, H, W)
    /test/labels    int64, shape (M,)

    root attributes
      format          str    "refsgd-dataset"
      format_version  int    1
      name            str    e.g. "mnist", "cifar10", "digits"
      num_classes     int    labels lie in [0, num_classes)
      image_shape     int array [C, H, W]
      mean            float64 array of length C, per-channel mean of the
                      training images, in pixel units
      std             float64 array of length C, per-channel (population,
                      ddof=0) standard deviation of the training images, in
                      pixel units; a channel with zero variance stores 1.0
      provenance      str    where the data came from (source file names)
      licence         str
      citation        str

MNIST and Fashion-MNIST have C=1 and 28x28 images, CIFAR-10/100 C=3 and 32x32,
the embedded ``digits`` set 1x8x8 (values 0..16).  Files written by
:func:`write` store the image and label arrays gzip-compressed; any layout
choice h5py can read (chunked or not, compressed or not) is accepted by
:func:`load`.  Label arrays of another integer dtype are accepted and
converted to int64.  ``provenance``, ``licence`` and ``citation`` are
descriptive; when a file written by another tool lacks them they read as "".

Normalisation
-------------
:func:`load` returns ``x = (img - mean[c]) / std[c]`` for every pixel of
channel ``c``, using the ``mean``/``std`` attributes (i.e. statistics of the
training images, computed when the file was written).  The expression is
evaluated in float64 and then rounded once to the requested dtype, so it is
bit-reproducible.

Sampler
-------
Two pure functions (no hidden state: a resumed run reproduces the same
batches from ``seed`` and the position alone):

* :func:`epoch_batches` -- sampling without replacement, one permutation per
  epoch shared by all ranks, split into equal contiguous shards.
* :func:`randpick` -- sampling with replacement (the ``randpick`` of PP-ASGD),
  an independent stream per (seed, rank, step).

The exact formulas are given in their docstrings.

Converters
----------
:func:`convert` turns the standard distributions of MNIST, Fashion-MNIST
(IDX files, gzip-compressed or not), CIFAR-10 and CIFAR-100 (python pickle
batches, a directory or the original ``.tar.gz``) into the layout above.
Pickle files can run arbitrary code when loaded: only convert CIFAR files
that come from a trusted source.

All errors caused by the user's input raise :class:`refsgd.RefsgdError` with a
one-sentence message naming the file and what is wrong.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import pickle
import tarfile
import zlib
from pathlib import Path

import h5py
import numpy as np

from refsgd import RefsgdError, __version__
from refsgd.files import h5_written, open_h5

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "KINDS",
    "Dataset",
    "load",
    "check_fits",
    "write",
    "read_idx",
    "convert_mnist",
    "convert_cifar",
    "convert",
    "info",
    "epoch_batches",
    "randpick",
]

FORMAT = "refsgd-dataset"
FORMAT_VERSION = 1

#: The kinds :func:`convert` understands.
KINDS = ("mnist", "fashion-mnist", "cifar10", "cifar100")

# Images processed per block when computing statistics or normalising, so
# that no float64 copy of a whole data set is ever made.
_BLOCK = 4096

_REQUIRED_DATASETS = ("train/images", "train/labels", "test/images", "test/labels")
_REQUIRED_ATTRS = ("format", "format_version", "name", "num_classes", "image_shape", "mean", "std")
_TEXT_ATTRS = ("provenance", "licence", "citation")

#: the MD5s of the published gzipped IDX files (their sites, and torchvision's checks), to tell
#: MNIST's files from Fashion-MNIST's, which have the same names and shapes
_PUBLISHED_MD5 = {
    "mnist": {"train_images": "f68b3c2dcbeaaa9fbdd348bbdeb94873", "train_labels": "d53e105ee54ea40749a09fcbcd1e9432",
              "test_images": "9fb629c4189551a2d022fa330f9573f3", "test_labels": "ec29112dd5afa0611ce80d1b7f02629c"},
    "fashion-mnist": {"train_images": "8d4fb7e6c68d591d4c3dfef9ec88bf0d",
                      "train_labels": "25c81989df183df01b3e8a0aad5dffbe",
                      "test_images": "bef4ecab320f06d8554ea6380940ec79",
                      "test_labels": "bb300cfdad3c16e7a12a480ee83cd310"},
}

_META = {
    "mnist": {
        "title": "MNIST",
        "url": "http://yann.lecun.com/exdb/mnist/",
        "licence": (
            "No explicit licence is stated by the authors; widely redistributed for "
            "research use (commonly listed as CC BY-SA 3.0)."
        ),
        "citation": (
            'Y. LeCun, C. Cortes, C. J. C. Burges, "The MNIST database of handwritten '
            'digits", http://yann.lecun.com/exdb/mnist/'
        ),
    },
    "fashion-mnist": {
        "title": "Fashion-MNIST",
        "url": "https://github.com/zalandoresearch/fashion-mnist",
        "licence": "MIT (Copyright 2017 Zalando SE).",
        "citation": (
            'H. Xiao, K. Rasul, R. Vollgraf, "Fashion-MNIST: a Novel Image Dataset for '
            'Benchmarking Machine Learning Algorithms", arXiv:1708.07747, 2017.'
        ),
    },
    "cifar10": {
        "title": "CIFAR-10",
        "url": "https://www.cs.toronto.edu/~kriz/cifar.html",
        "licence": (
            "No explicit licence is stated by the author; distributed for research use "
            "(cite the technical report)."
        ),
        "citation": (
            'A. Krizhevsky, "Learning Multiple Layers of Features from Tiny Images", '
            "Technical Report, University of Toronto, 2009."
        ),
    },
    "cifar100": {
        "title": "CIFAR-100",
        "url": "https://www.cs.toronto.edu/~kriz/cifar.html",
        "licence": (
            "No explicit licence is stated by the author; distributed for research use "
            "(cite the technical report)."
        ),
        "citation": (
            'A. Krizhevsky, "Learning Multiple Layers of Features from Tiny Images", '
            "Technical Report, University of Toronto, 2009."
        ),
    },
}


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
        from importlib import resources

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
    wins over a file called ``digits`` in the working directory), otherwise the
    path of an HDF5 file in the layout of the module docstring.
    ``dtype``: a floating dtype for ``x_train``/``x_test`` (float32 or float64).
    Raises :class:`RefsgdError` on a missing or malformed file.
    """
    dtype = np.dtype(dtype)
    if dtype.kind != "f":
        raise RefsgdError(f"dtype {dtype} is not a floating-point type.")
    if path_or_name is None or (isinstance(path_or_name, str) and path_or_name == "digits"):
        path = _embedded_path()
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
    from refsgd.nn.spec import available_models, read_spec
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
# IDX (MNIST, Fashion-MNIST)
# ---------------------------------------------------------------------------

_IDX_KIND = {1: "label", 3: "image"}


def _read_bytes(path: str) -> bytes:
    """The file's content, decompressed if it starts with the gzip magic 1f 8b."""
    if not os.path.exists(path):
        raise RefsgdError(f"{path}: no such file.")
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
    except OSError as exc:
        raise RefsgdError(f"{path}: cannot read ({exc.strerror or exc}).") from None
    if raw[:2] != b"\x1f\x8b":
        return raw
    try:
        return gzip.decompress(raw)
    except EOFError:
        raise RefsgdError(f"{path}: truncated gzip stream (the compressed file ends "
                          f"before its end-of-stream marker).") from None
    except (OSError, zlib.error) as exc:
        raise RefsgdError(f"{path}: corrupt gzip data ({exc}).") from None


def read_idx(path, ndim=None) -> np.ndarray:
    """Read an IDX file of unsigned bytes (gzip-compressed or not) into a uint8 array.

    Layout: a big-endian 4-byte magic ``00 00 08 D`` (0x08 = unsigned byte,
    D = number of dimensions: 0x00000803 for 3-d image files, 0x00000801 for
    1-d label files), then D big-endian uint32 sizes, then the data in C
    order.  Compression is detected from the gzip magic bytes ``1f 8b``, not
    from the file name.  ``ndim``, if given, is the required number of
    dimensions.  A wrong magic, a truncated file or gzip stream and bytes after
    the data all raise :class:`RefsgdError`.
    """
    path = os.fspath(path)
    data = _read_bytes(path)
    if ndim is not None:
        expected = f"0x{0x0800 + ndim:08x}"
        what = f"an IDX {_IDX_KIND.get(ndim, f'{ndim}-d')} file"
    else:
        expected = "0x000008NN with 1 <= NN <= 4"
        what = "an IDX unsigned-byte file"
    if len(data) < 4:
        raise RefsgdError(f"{path}: not {what} (only {len(data)} bytes, too short for the "
                          f"4-byte magic number).")
    magic = int.from_bytes(data[:4], "big")
    dims = data[3]
    ok = data[:3] == b"\x00\x00\x08" and (dims == ndim if ndim is not None else 1 <= dims <= 4)
    if not ok:
        raise RefsgdError(f"{path}: not {what} (magic 0x{magic:08x}, expected {expected}).")
    header = 4 + 4 * dims
    if len(data) < header:
        raise RefsgdError(f"{path}: truncated IDX file (the header needs {header} bytes, "
                          f"the file has {len(data)}).")
    shape = tuple(int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(dims))
    need = int(np.prod(shape, dtype=np.int64))
    have = len(data) - header
    dims_txt = "x".join(map(str, shape))
    if have < need:
        raise RefsgdError(f"{path}: truncated IDX file (the header announces {dims_txt} = "
                          f"{need} data bytes, only {have} present).")
    if have > need:
        raise RefsgdError(f"{path}: {have - need} unexpected bytes after the IDX data "
                          f"(the header announces {dims_txt} = {need} data bytes).")
    return np.frombuffer(data, dtype=np.uint8, offset=header).reshape(shape).copy()


_MNIST_FILES = {
    "train_images": "train-images-idx3-ubyte",
    "train_labels": "train-labels-idx1-ubyte",
    "test_images": "t10k-images-idx3-ubyte",
    "test_labels": "t10k-labels-idx1-ubyte",
}


def _find_idx(src: str, base: str) -> str:
    # The standard names, with or without .gz; also the ".idx3-ubyte" spelling
    # used by some mirrors.
    alt = base.replace("-idx", ".idx")
    for cand in (base, base + ".gz", alt, alt + ".gz"):
        p = os.path.join(src, cand)
        if os.path.isfile(p):
            return p
    raise RefsgdError(f"{src}: no {base} or {base}.gz found in this directory.")


def _md5(path: str) -> str:
    h = hashlib.md5(usedforsecurity=False)
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def convert_mnist(src_dir, out, kind="mnist") -> str:
    """Convert MNIST or Fashion-MNIST IDX files in ``src_dir`` to the refsgd layout.

    ``src_dir`` holds train-images-idx3-ubyte, train-labels-idx1-ubyte,
    t10k-images-idx3-ubyte and t10k-labels-idx1-ubyte, each optionally with a
    ``.gz`` suffix (compression is detected from the content).  ``kind`` is
    ``"mnist"`` or ``"fashion-mnist"`` (name and metadata; the format is the
    same).  Images become (N, 1, 28, 28).  Returns ``out``.
    """
    if kind not in ("mnist", "fashion-mnist"):
        raise RefsgdError(f"convert_mnist: unknown kind {kind!r}, expected 'mnist' or "
                          f"'fashion-mnist'.")
    src = os.fspath(src_dir)
    if not os.path.isdir(src):
        what = "not a directory" if os.path.exists(src) else "no such directory"
        raise RefsgdError(f"{src}: {what} (expected a directory holding the four {kind} "
                          f"IDX files).")
    paths = {k: _find_idx(src, v) for k, v in _MNIST_FILES.items()}
    arrays = {}
    for split in ("train", "test"):
        ip, lp = paths[f"{split}_images"], paths[f"{split}_labels"]
        images = read_idx(ip, ndim=3)
        labels = read_idx(lp, ndim=1)
        if images.shape[0] != labels.shape[0]:
            raise RefsgdError(f"{ip}: {images.shape[0]} images but {labels.shape[0]} labels "
                              f"in {os.path.basename(lp)}.")
        arrays[split] = (images[:, None, :, :], labels.astype(np.int64))
    if arrays["train"][0].shape[1:] != arrays["test"][0].shape[1:]:
        raise RefsgdError(f"{paths['test_images']}: images are "
                          f"{'x'.join(map(str, arrays['test'][0].shape[2:]))} but training "
                          f"images {'x'.join(map(str, arrays['train'][0].shape[2:]))}.")
    for split in ("train", "test"):
        lab = arrays[split][1]
        if lab.size and lab.max() >= 10:
            raise RefsgdError(f"{paths[f'{split}_labels']}: label {lab.max()} is outside "
                              f"[0, 10).")
    meta = _META[kind]
    md5 = {k: _md5(p) for k, p in paths.items()}
    for other, known in _PUBLISHED_MD5.items():
        if other != kind and md5["train_images"] == known["train_images"]:
            raise RefsgdError(f"{paths['train_images']}: this is {_META[other]['title']}'s file (its MD5 is the "
                              f"published one), not {meta['title']}'s; convert it with "
                              f"`refsgd data convert {other}`.")
    files = ", ".join(f"{os.path.basename(paths[k])} (md5 {md5[k]})" for k in paths)
    provenance = (f"{meta['title']} ({meta['url']}), converted by refsgd {__version__} "
                  f"from the IDX files {files}.")
    return write(out, kind, arrays["train"][0], arrays["train"][1], arrays["test"][0],
                 arrays["test"][1], 10, provenance, meta["licence"], meta["citation"])


# ---------------------------------------------------------------------------
# CIFAR (python pickle batches)
# ---------------------------------------------------------------------------

_CIFAR = {
    "cifar10": {
        "folder": "cifar-10-batches-py",
        "train": [f"data_batch_{i}" for i in range(1, 6)],
        "test": ["test_batch"],
        "label_key": b"labels",
        "num_classes": 10,
    },
    "cifar100": {
        "folder": "cifar-100-python",
        "train": ["train"],
        "test": ["test"],
        "label_key": b"fine_labels",
        "num_classes": 100,
    },
}


def _get(d: dict, key: bytes):
    if key in d:
        return d[key]
    return d.get(key.decode("ascii"))


def _parse_batch(obj, where: str, label_key: bytes, num_classes: int):
    if not isinstance(obj, dict):
        raise RefsgdError(f"{where}: not a CIFAR batch (the pickle holds a "
                          f"{type(obj).__name__}, expected a dict).")
    data = _get(obj, b"data")
    labels = _get(obj, label_key)
    if data is None:
        raise RefsgdError(f"{where}: not a CIFAR batch (no b'data' entry).")
    if labels is None:
        raise RefsgdError(f"{where}: not a CIFAR batch (no {label_key!r} entry).")
    data = np.asarray(data)
    if data.ndim != 2 or data.shape[1] != 3072:
        raise RefsgdError(f"{where}: b'data' has shape {data.shape}, expected (n, 3072).")
    if data.dtype != np.uint8:
        if not np.issubdtype(data.dtype, np.integer) or (
                data.size and (data.min() < 0 or data.max() > 255)):
            raise RefsgdError(f"{where}: b'data' has dtype {data.dtype}, expected uint8.")
        data = data.astype(np.uint8)
    try:
        labels = np.asarray(labels)
    except (TypeError, ValueError):
        raise RefsgdError(f"{where}: {label_key!r} is not a list of integers.") from None
    if labels.ndim != 1 or (labels.size and not np.issubdtype(labels.dtype, np.integer)):
        raise RefsgdError(f"{where}: {label_key!r} is not a flat list of integers.")
    labels = labels.astype(np.int64)
    if labels.shape[0] != data.shape[0]:
        raise RefsgdError(f"{where}: {data.shape[0]} data rows but {labels.shape[0]} labels.")
    if labels.size and (labels.min() < 0 or labels.max() >= num_classes):
        bad = labels.min() if labels.min() < 0 else labels.max()
        raise RefsgdError(f"{where}: label {bad} is outside [0, {num_classes}).")
    # Each row: 1024 red, 1024 green, 1024 blue values, each a row-major 32x32 plane.
    return data.reshape(-1, 3, 32, 32), labels


def _unpickle(fh, where: str):
    try:
        return pickle.load(fh, encoding="bytes")
    except Exception as exc:  # any unpickling failure means "not a batch file"
        raise RefsgdError(f"{where}: not a readable python pickle ({type(exc).__name__}: "
                          f"{exc}).") from None


def _cifar_from_dir(src: str, spec: dict):
    base = src
    if not os.path.isfile(os.path.join(base, spec["train"][0])) and \
            os.path.isdir(os.path.join(base, spec["folder"])):
        base = os.path.join(base, spec["folder"])
    batches = {}
    for split in ("train", "test"):
        batches[split] = []
        for name in spec[split]:
            p = os.path.join(base, name)
            if not os.path.isfile(p):
                raise RefsgdError(f"{base}: no {name} found in this directory.")
            with open(p, "rb") as fh:
                batches[split].append((p, _unpickle(fh, p)))
    return batches, base


def _why_not_tar(src, exc):
    """One line on why tarfile could not open ``src`` (its own message lists every method tried)."""
    if not isinstance(exc, tarfile.ReadError):
        return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    try:
        with open(src, "rb") as f:
            head = f.read(6)
    except OSError as e:
        return e.strerror or str(e)
    for magic, kind in ((b"\x1f\x8b", "gzip"), (b"BZh", "bzip2"), (b"\xfd7zXZ", "xz")):
        if head.startswith(magic):
            return f"a {kind} file whose content is not a tar archive, or is truncated"
    return "neither a tar archive nor a gzip, bzip2 or xz-compressed one"


def _cifar_from_tar(src: str, spec: dict):
    try:
        tar = tarfile.open(src, "r:*")
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise RefsgdError(f"{src}: not a readable tar archive ({_why_not_tar(src, exc)}); expected a CIFAR "
                          "python tarball (cifar-10-python.tar.gz, cifar-100-python.tar.gz)") from None
    batches = {}
    with tar:
        try:
            members = {m.name.lstrip("./"): m for m in tar.getmembers() if m.isfile()}
        except (tarfile.TarError, OSError, EOFError, zlib.error) as exc:
            raise RefsgdError(f"{src}: truncated or corrupt tar archive ({exc}).") from None
        for split in ("train", "test"):
            batches[split] = []
            for name in spec[split]:
                key = f"{spec['folder']}/{name}"
                member = members.get(key) or members.get(name)
                if member is None:
                    raise RefsgdError(f"{src}: the archive has no member {key}.")
                where = f"{src}:{member.name}"
                try:
                    fh = tar.extractfile(member)
                    batches[split].append((where, _unpickle(fh, where)))
                except (tarfile.TarError, OSError, EOFError, zlib.error) as exc:
                    raise RefsgdError(f"{where}: truncated or corrupt archive member "
                                      f"({exc}).") from None
    return batches


def convert_cifar(src_dir, out, which) -> str:
    """Convert CIFAR-10 or CIFAR-100 (python version) to the refsgd layout.

    ``which`` is ``"cifar10"`` (files data_batch_1..5 and test_batch, labels
    under b'labels', 10 classes) or ``"cifar100"`` (files train and test,
    labels under b'fine_labels', 100 classes).  ``src_dir`` is the directory
    holding those files, its parent (containing cifar-10-batches-py or
    cifar-100-python), or the original ``.tar.gz``.  Each batch is a pickled
    dict whose b'data' is an (n, 3072) uint8 array, a row being 1024 red,
    1024 green and 1024 blue values, each a row-major 32x32 plane; any n is
    accepted.  Images become (N, 3, 32, 32).

    The batches are loaded with ``pickle.load(f, encoding="bytes")``, which
    can execute arbitrary code: only convert files from a trusted source.
    Returns ``out``.
    """
    if which not in _CIFAR:
        raise RefsgdError(f"convert_cifar: unknown kind {which!r}, expected 'cifar10' or "
                          f"'cifar100'.")
    spec = _CIFAR[which]
    src = os.fspath(src_dir)
    if os.path.isdir(src):
        batches, base = _cifar_from_dir(src, spec)
        origin = f"the directory {os.path.basename(os.path.normpath(base))}"
    elif os.path.isfile(src):
        batches = _cifar_from_tar(src, spec)
        origin = f"the archive {os.path.basename(src)} (md5 {_md5(src)})"
    else:
        raise RefsgdError(f"{src}: no such file or directory.")
    arrays = {}
    for split in ("train", "test"):
        parts = [_parse_batch(obj, where, spec["label_key"], spec["num_classes"])
                 for where, obj in batches[split]]
        arrays[split] = (np.concatenate([p[0] for p in parts]),
                         np.concatenate([p[1] for p in parts]))
    names = ", ".join(spec["train"] + spec["test"])
    meta = _META[which]
    provenance = (f"{meta['title']} python version ({meta['url']}), converted by refsgd "
                  f"{__version__} from {origin}, batches {names} "
                  f"({arrays['train'][0].shape[0]} training and {arrays['test'][0].shape[0]} "
                  f"test images).")
    return write(out, which, arrays["train"][0], arrays["train"][1], arrays["test"][0],
                 arrays["test"][1], spec["num_classes"], provenance, meta["licence"],
                 meta["citation"])


def convert(kind, src, out) -> str:
    """Convert a standard distribution: ``kind`` in ``KINDS``; returns ``out``."""
    if kind in ("mnist", "fashion-mnist"):
        return convert_mnist(src, out, kind)
    if kind in ("cifar10", "cifar100"):
        return convert_cifar(src, out, kind)
    raise RefsgdError(f"unknown dataset kind {kind!r}, expected one of {', '.join(KINDS)}.")


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


# ---------------------------------------------------------------------------
# Sampler
# ---------------------------------------------------------------------------


def _nonneg_int(value, what):
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise RefsgdError(f"{what} must be an integer, got {value!r}.")
    if value < 0:
        raise RefsgdError(f"{what} must be >= 0, got {value}.")
    return int(value)


def epoch_batches(seed, epoch, rank, world, batch, n) -> np.ndarray:
    """The mini-batches of one rank for one epoch (sampling without replacement).

    Exactly::

        perm = np.random.Generator(np.random.PCG64([seed, epoch])).permutation(n)
        num_batches = n // (world * batch)
        shard = perm[rank * num_batches * batch : (rank + 1) * num_batches * batch]
        return shard.reshape(num_batches, batch).astype(np.int64)

    All ranks draw the same permutation; the last ``n - num_batches*world*batch``
    entries are dropped so every rank gets the same number of batches, and the
    shards of different ranks are disjoint.  Row ``i`` is the ``i``-th
    mini-batch of that rank.  ``seed`` and ``epoch`` are non-negative integers;
    ``0 <= rank < world``.  Raises :class:`RefsgdError` if ``num_batches == 0``.
    """
    seed = _nonneg_int(seed, "seed")
    epoch = _nonneg_int(epoch, "epoch")
    rank = _nonneg_int(rank, "rank")
    world = _nonneg_int(world, "world")
    batch = _nonneg_int(batch, "batch")
    n = _nonneg_int(n, "n")
    if world < 1 or batch < 1:
        raise RefsgdError(f"world and batch must be >= 1, got world = {world}, "
                          f"batch = {batch}.")
    if rank >= world:
        raise RefsgdError(f"rank {rank} is outside [0, {world}).")
    num_batches = n // (world * batch)
    if num_batches == 0:
        raise RefsgdError(f"the training set has {n} samples, too few for world*batch = "
                          f"{world}*{batch} = {world * batch}.")
    perm = np.random.Generator(np.random.PCG64([seed, epoch])).permutation(n)
    per_rank = num_batches * batch
    shard = perm[rank * per_rank:(rank + 1) * per_rank]
    return np.ascontiguousarray(shard.reshape(num_batches, batch), dtype=np.int64)


def randpick(seed, rank, step, batch, n) -> np.ndarray:
    """One mini-batch drawn with replacement (PP-ASGD's ``randpick``).

    Exactly::

        np.random.Generator(np.random.PCG64([seed, rank, step])).integers(0, n, size=batch)

    returned as int64 of shape (batch,): an independent stream per
    (seed, rank, step), each index uniform in [0, n).  All arguments are
    non-negative integers, ``n >= 1``, ``batch >= 1``.
    """
    seed = _nonneg_int(seed, "seed")
    rank = _nonneg_int(rank, "rank")
    step = _nonneg_int(step, "step")
    batch = _nonneg_int(batch, "batch")
    n = _nonneg_int(n, "n")
    if n < 1:
        raise RefsgdError("the training set has 0 samples, cannot pick a batch.")
    if batch < 1:
        raise RefsgdError(f"batch must be >= 1, got {batch}.")
    gen = np.random.Generator(np.random.PCG64([seed, rank, step]))
    return gen.integers(0, n, size=batch).astype(np.int64, copy=False)
