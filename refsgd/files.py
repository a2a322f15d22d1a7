"""Files: write-then-rename (no reader ever sees a half-written file), and HDF5 files opened
with one clear error."""

import contextlib
import os
import tempfile

import h5py

from refsgd import RefsgdError


@contextlib.contextmanager
def atomic_path(path):
    """Yield a temporary path beside ``path``; on success it becomes ``path`` (normal permissions,
    ``os.replace``), on any error it is removed and ``path`` is left as it was."""
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise RefsgdError(f"{path}: the folder {directory} does not exist")
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".tmp", dir=directory)
    os.close(fd)
    try:
        yield tmp
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def open_h5(path, what):
    """``h5py.File(path, "r")``, or a RefsgdError naming the file (``what``: the kind expected)."""
    if not os.path.exists(path):
        raise RefsgdError(f"{path}: no such file")
    if os.path.isdir(path):
        raise RefsgdError(f"{path}: is a directory, not {what}")
    try:
        return h5py.File(path, "r")
    except OSError as exc:
        try:
            is_h5 = h5py.is_hdf5(path)
        except OSError:
            is_h5 = False
        if not is_h5:
            raise RefsgdError(f"{path}: not an HDF5 file (expected {what})") from None
        raise RefsgdError(f"{path}: cannot read the HDF5 file ({exc})") from None
