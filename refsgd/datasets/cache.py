"""The cache folder of ``refsgd data download``: where it is, and the data set a name stands for.

A name (``--data mnist``) means ``<cache>/<name>.h5``: :func:`refsgd.datasets.load` resolves it
here, and :mod:`.download` writes it."""

from __future__ import annotations

import os
from pathlib import Path

from refsgd.errors import RefsgdError

#: the data sets ``refsgd data download`` fetches (and ``--data`` takes by name)
DOWNLOADABLE = ("mnist", "fashion-mnist", "cifar10")


def cache_dir() -> Path:
    """The cache folder: env ``REFSGD_DATA_DIR``, else ``$XDG_CACHE_HOME/refsgd``, else
    ``~/.cache/refsgd`` (the XDG default, where torchvision's and pip's caches live too)."""
    if os.environ.get("REFSGD_DATA_DIR"):
        return Path(os.environ["REFSGD_DATA_DIR"]).expanduser()
    if os.environ.get("XDG_CACHE_HOME"):
        return Path(os.environ["XDG_CACHE_HOME"]).expanduser() / "refsgd"
    return Path.home() / ".cache" / "refsgd"


def h5_path(name, cache=None) -> Path:
    """``<cache>/<name>.h5``, whether it exists or not."""
    return Path(cache).expanduser() / f"{name}.h5" if cache is not None else cache_dir() / f"{name}.h5"


def named(name) -> str:
    """The downloaded file a dataset name stands for, or a RefsgdError saying how to get it."""
    path = h5_path(name)
    if not path.is_file():
        raise RefsgdError(f"--data {name}: {name} is not downloaded yet (no {path}); fetch it with "
                          f"`refsgd data download {name}` (the folder: env REFSGD_DATA_DIR, else "
                          f"$XDG_CACHE_HOME/refsgd or ~/.cache/refsgd)")
    return str(path)
