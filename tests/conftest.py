"""Hooks of the whole suite: what the suite's killed jobs leave in /dev/shm is removed at its end.

MPICH removes a job's shared-memory segment (``/dev/shm/mpich_shm_*``, about 2 MB a node) in
``MPI_Finalize``. ``python -m refsgd.mpilib`` removes an aborted job's (refsgd.mpiranks.Segments),
but a job launched by mpiexec itself leaves them, and the suite kills ranks on purpose (kill -9,
signals, timeouts): without this, every run of the suite left tens of segments, memory that
only a reboot gave back. Removed at the end of the outermost pytest: the segments created since
it started that no process maps any more and that are over 10 seconds old (a segment being set up
by a job that runs beside the suite is mapped within microseconds of its creation)."""

import glob
import os
import time

from refsgd import mpiranks

_STARTED = []
_IN_A_JOB = ("PMI_RANK", "PMIX_RANK", "OMPI_COMM_WORLD_RANK")  # a pytest that mpiexec started: not the outermost


def pytest_sessionstart(session):
    _STARTED.append(time.time())


def pytest_sessionfinish(session, exitstatus):
    if not _STARTED or any(v in os.environ for v in _IN_A_JOB):
        return
    now = time.time()
    mapped = {path for maps in glob.glob("/proc/[0-9]*/maps") for path in mpiranks.shared_segments(maps)}
    for path in glob.glob("/dev/shm/mpich_shm_*"):
        try:
            created = os.stat(path).st_ctime
            if path not in mapped and _STARTED[0] <= created < now - 10:
                os.unlink(path)
        except OSError:
            continue
