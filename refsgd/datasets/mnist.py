"""The MNIST and Fashion-MNIST converter: the IDX files (gzip-compressed or not) into the HDF5
layout; the published MD5s tell the two sets apart (same file names and shapes)."""

from __future__ import annotations

import gzip
import hashlib
import os
import zlib

import numpy as np

from refsgd.errors import RefsgdError
from refsgd.version import __version__

from .layout import write
from .sources import _META, _PUBLISHED_MD5

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
