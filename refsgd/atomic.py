"""Write, then rename: no reader ever sees a half-written file."""

import contextlib
import os
import tempfile

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
