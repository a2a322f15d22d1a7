"""The CIFAR-10 and CIFAR-100 converter: the python pickle batches (a directory or the original
``.tar.gz``) into the HDF5 layout. Pickle files can run arbitrary code when loaded: only convert
files that come from a trusted source."""

from __future__ import annotations

import os
import pickle
import tarfile
import zlib

import numpy as np

from refsgd.errors import RefsgdError
from refsgd.version import __version__

from .layout import write
from .sources import _META
from .mnist import _md5

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
