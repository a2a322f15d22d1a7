"""Hooks of the whole suite: what the suite's killed jobs leave in /dev/shm is removed at its end.

MPICH removes a job's shared-memory segment (``/dev/shm/mpich_shm_*``, about 2 MB a node) in
``MPI_Finalize``. ``python -m refsgd.mpilib`` removes an aborted job's (refsgd.mpiranks.Segments),
but a job launched by mpiexec itself leaves them, and the suite kills ranks on purpose (kill -9,
signals, timeouts): without this, every run of the suite left tens of segments, memory that
only a reboot gave back. Removed at the end of the outermost pytest: the segments created since
it started that no process maps any more and that are over 10 seconds old (a segment being set up
by a job that runs beside the suite is mapped within microseconds of its creation). Under
pytest-xdist (./run.sh test runs the plain tests in parallel workers, tests/helpers/suite.py) the
controller removes them once every worker has ended, never a worker whose neighbours still run jobs.

And the sessions of the in-process MPI tests (tests.helpers.world): ``mpiexec -n N python -m
pytest --with-mpi`` keeps the tests marked ``world(..., N, ...)`` and deselects the rest; plain
pytest deselects the ``world`` tests but those of one rank (``./run.sh test`` runs both).

And what must never run twice at once under pytest-xdist: the tests marked ``cluster`` (network
namespaces, mounts and a Slurm of their own, scripts/cluster, whose clean-up undoes machine-wide
state when it finds no other cluster) share the group ``cluster`` (``--dist loadgroup``: one worker
runs them, one after another); and a test marked ``alone`` (it times something that a neighbour
would stretch) runs while no other test runs."""

import fcntl
import glob
import os
import sys
import time
from pathlib import Path

import pytest

from refsgd import mpiranks

_STARTED = []
_IN_A_JOB = ("PMI_RANK", "PMIX_RANK", "OMPI_COMM_WORLD_RANK")  # a pytest that mpiexec started: not the outermost


def _in_world(config):
    return config.getoption("--with-mpi", default=False)


#: the slow tests that launch no mpiexec (marker slow, left out by ./run.sh test --quick): each a
#: fresh process's first compile, a download server, a round trip through processes, threads
SLOW = ("tests/test_one_off_costs.py", "tests/test_download.py",
        "tests/test_conformance.py::test_export_and_check_round_trip",
        "tests/test_conformance.py::test_the_pytest_plugin_generates_one_test_per_configuration",
        "tests/test_layers.py::test_gradients_do_not_depend_on_the_thread_count")


def pytest_collection_modifyitems(config, items):
    """A world session keeps the ``world`` tests of its size; plain pytest keeps the others and the
    ``world(1, ...)`` tests (its COMM_WORLD is MPI's singleton, of one rank). Marks :data:`SLOW`."""
    for item in items:
        if item.nodeid.startswith(SLOW):
            item.add_marker("slow")
    world_size = None
    if _in_world(config):
        from tests.helpers import world
        world_size = world.comm().Get_size()
    keep, drop = [], []
    for item in items:
        mark = item.get_closest_marker("world")
        if mark is None:
            kept = world_size is None
        else:
            kept = (world_size or 1) in mark.args
        (keep if kept else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


@pytest.hookimpl(tryfirst=True, specname="pytest_collection_modifyitems")
def pytest_collection_modifyitems_xdist_groups(items):
    """Marks every ``cluster`` test ``xdist_group("cluster")``, before pytest-xdist's worker reads
    the groups (its own hook of the same name, which tryfirst precedes)."""
    for item in items:
        if item.get_closest_marker("cluster"):
            item.add_marker(pytest.mark.xdist_group("cluster"))


def pytest_configure(config):
    """``--dist loadgroup`` of pytest-xdist 3.8 or older groups nothing under pytest 9.2 (it writes
    the group into the node id, which pytest 9.2 no longer reads: pytest-xdist issue 1386), and
    tests that must not run at once would: one line instead (setup.cfg's test extra takes an
    older pytest)."""
    xdist = sys.modules.get("xdist")
    if config.getoption("dist", "no") != "loadgroup" or xdist is None or pytest.version_tuple < (9, 2):
        return
    if tuple(int(v) for v in xdist.__version__.split(".")[:2]) <= (3, 8):
        raise pytest.UsageError(f"--dist loadgroup groups no test under pytest {pytest.__version__} with "
                                f"pytest-xdist {xdist.__version__} (pytest-xdist issue 1386): install pytest<9.2, "
                                "as setup.cfg's test extra says (./run.sh setup), or run with -n 0")


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_protocol(item):
    """Under pytest-xdist, a test marked ``alone`` runs, fixtures and all, while no other worker
    runs a test: two locks in the folder the workers share (their controller's basetemp). Every
    other test holds ``alone.lock`` shared while it runs, taken through ``alone.gate``; a test
    marked alone closes the gate (no test starts after), then takes the lock whole (those running
    have ended). Outermost (tryfirst), so that the wait is no part of the test's time limit."""
    if not hasattr(item.config, "workerinput") or item.config.option.basetemp is None:
        return (yield)
    folder = Path(item.config.option.basetemp).parent
    with open(folder / "alone.gate", "a") as gate, open(folder / "alone.lock", "a") as lock:
        if item.get_closest_marker("alone"):
            fcntl.flock(gate, fcntl.LOCK_EX)
            fcntl.flock(lock, fcntl.LOCK_EX)
        else:
            fcntl.flock(gate, fcntl.LOCK_SH)
            fcntl.flock(lock, fcntl.LOCK_SH)
            fcntl.flock(gate, fcntl.LOCK_UN)
        try:
            return (yield)
        finally:    # at once, even where a process the test forked still holds the files open
            fcntl.flock(lock, fcntl.LOCK_UN)
            fcntl.flock(gate, fcntl.LOCK_UN)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    if _in_world(item.config):
        from tests.helpers import world
        world.agree(outcome.get_result())


def pytest_sessionstart(session):
    _STARTED.append(time.time())


def pytest_sessionfinish(session, exitstatus):
    worker = hasattr(session.config, "workerinput")   # a pytest-xdist worker: its controller cleans
    if not _STARTED or worker or any(v in os.environ for v in _IN_A_JOB):
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
