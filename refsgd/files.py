"""Files: write-then-rename (no reader ever sees a half-written file), and HDF5 files opened
with one clear error."""

import contextlib
import io
import os
import secrets
import tempfile

import h5py

from refsgd.errors import RefsgdError


@contextlib.contextmanager
def atomic_path(path, what=None):
    """Yield a temporary path beside ``path``; on success it becomes ``path`` (normal permissions,
    ``os.replace``), on any error it is removed and ``path`` is left as it was. A failed write (a
    full disk, a read-only folder) becomes one RefsgdError saying so."""
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise RefsgdError(f"{path}: the folder {directory} does not exist")
    before = "the previous file is unchanged" if os.path.exists(path) else "nothing was written"
    tmp = None
    try:
        while tmp is None:
            # the name is known before the file exists: a stop raised the instant after its
            # creation (a signal lands in the open's system call) still removes it below
            tmp = os.path.join(directory, f".{os.path.basename(path)}.{secrets.token_hex(6)}.tmp")
            try:
                _create(tmp)
            except FileExistsError:
                tmp = None   # another file of that name: not ours to remove
        yield tmp
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException as e:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        if isinstance(e, OSError):
            reason = e.strerror or str(e).split("(")[0].strip() or type(e).__name__
            err = RefsgdError(f"could not write {what or path} to {path} ({reason}); {before}")
            err.reason = reason
            raise err from None
        raise


def _create(name):
    """A new empty file ``name``, readable by its owner only (it is renamed into place whole)."""
    os.close(os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))


@contextlib.contextmanager
def h5_written(path, what=None):
    """Yield a new ``h5py.File`` built in memory; when the block succeeds, its bytes are written
    to ``path`` through :func:`atomic_path`. HDF5 itself never writes to the disk, so a full disk
    is an ordinary failed write (one RefsgdError, the previous file kept), never a crash inside
    the HDF5 library."""
    buf = io.BytesIO()
    with h5py.File(buf, "w") as f:
        yield f
    with atomic_path(path, what) as tmp:
        write_bytes(tmp, buf.getbuffer())


def write_bytes(path, data):
    """Write ``data`` to ``path`` and make it durable (fsync) before it is renamed into place."""
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def write_text(path, text, what=None):
    """Write ``text`` (UTF-8, its newlines as they are) to ``path`` atomically (:func:`atomic_path`;
    ``what`` names the file in its errors)."""
    with atomic_path(path, what) as tmp:
        write_bytes(tmp, text.encode("utf-8"))


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


def read_array(f, name, advice=""):
    """``f[name][...]`` of an open HDF5 file, or a RefsgdError naming the file and the dataset when
    its bytes cannot be read (a damaged chunk: HDF5's "filter returned failure during read")."""
    try:
        return f[name][...]
    except (OSError, ValueError, TypeError, RuntimeError) as e:
        raise RefsgdError(f"{f.filename}: the dataset /{name.lstrip('/')} cannot be read, the file is damaged "
                          f"({e}){advice}") from None


def _probe(directory, what):
    """Create and remove a file in ``directory``: a read-only folder or file system is found
    before any work is done."""
    try:
        fd, probe = tempfile.mkstemp(prefix=".refsgd-probe-", dir=directory)
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise RefsgdError(f"{what}: cannot write in {directory} ({e.strerror or e})") from None


def check_output(path, flag, force=False):
    """An output file that ``atomic_path`` will write: not a folder, in an existing writable
    folder, and not an existing file unless ``force``."""
    if os.path.isdir(path):
        raise RefsgdError(f"{flag} {path}: is a folder; give the name of a file")
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise RefsgdError(f"{flag} {path}: the folder {directory} does not exist")
    if os.path.lexists(path) and not force:
        raise RefsgdError(f"{flag} {path}: the file exists; choose another name, or give --force to replace it")
    _probe(directory, f"{flag} {path}")


def check_folder(path, flag):
    """An output folder: not a file; it or its parent exists and is writable."""
    if os.path.lexists(path) and not os.path.isdir(path):
        raise RefsgdError(f"{flag} {path}: is a file, not a folder")
    if os.path.isdir(path):
        _probe(path, f"{flag} {path}")
        return
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise RefsgdError(f"{flag} {path}: the folder {parent} does not exist")
    _probe(parent, f"{flag} {path}")


def same_path(a, b):
    """Whether two paths name the same file or folder (links and hard links resolved)."""
    try:
        if os.path.exists(a) and os.path.exists(b):
            return os.path.samefile(a, b)
    except OSError:
        pass
    return os.path.realpath(a) == os.path.realpath(b)


def check_distinct(inputs, outputs):
    """Refuse an output that is an input or another output: ``inputs`` and ``outputs`` are
    [(flag, path or None)]."""
    outs = [(f, p) for f, p in outputs if p]
    for i, (flag, path) in enumerate(outs):
        for other_flag, other in [(f, p) for f, p in inputs if p] + outs[:i]:
            if same_path(path, other):
                raise RefsgdError(f"{flag} {path} is also {other_flag}: an output may not replace an input "
                                  "or another output")
