"""The tests that run in-process on ``MPI.COMM_WORLD`` (pytest-mpi): one pytest per world size,
``mpiexec -n N python -m pytest --with-mpi`` (``./run.sh test`` starts them), so that the
start-up and the Numba compile are paid once per world size rather than once per test.

A test for such a session carries the marker ``world(N, ...)``: the world sizes it runs at (the
session of another size deselects it; plain pytest too). Every rank runs every test, and a
collective left waiting by one rank's failure must not hang the others: after each phase of a
test (setup, call, teardown) the ranks meet on a communicator of their own (:func:`agree`),
each learns which ranks failed and how, and every rank's report fails with the failing ranks'
tracebacks (rank 0's report, the one printed, names them all). A rank that the others do not
meet within :data:`MEET` seconds (stretched by the load) is stuck in a collective that a failed
rank left: the failed rank prints its traceback and ends the world (MPI_Abort), never a hang.
"""

import os
import sys
import time

from tests.helpers.launch import scaled

from refsgd import failure, launchenv

#: seconds (on idle cores; scaled by the load) that a rank waits for the others to end a test's phase
#: ($REFSGD_WORLD_MEET: tests/mpiexec/test_world.py shortens it)
MEET = float(os.environ.get("REFSGD_WORLD_MEET", 120))

_COMM = []   # the communicator the ranks meet on after each phase (a Dup of COMM_WORLD: no test's traffic)


def comm():
    from mpi4py import MPI
    return MPI.COMM_WORLD


def _meeting():
    if not _COMM:
        _COMM.append(comm().Dup())
    return _COMM[0]


def quiet_other_ranks():
    """Ranks other than 0 of a world session write their standard output (pytest's report) to
    /dev/null. Called as this module is imported as a plugin (``-p tests.helpers.world``, as ./run.sh
    test starts a world session), before pytest's capture takes its copy of the output. The ranks
    agree on every outcome (:func:`agree`), so rank 0's report says what failed on any rank, once;
    their standard error (a failure's traceback, a timeout's stacks) stays."""
    if "--with-mpi" in sys.argv and launchenv.launcher_rank() not in (None, 0):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.close(devnull)


quiet_other_ranks()


def _wait(req, what, report):
    """``req.Test()`` until it completes, or end the world after MEET seconds (scaled), this rank's
    failure (``report``) printed first."""
    deadline = time.monotonic() + scaled(MEET)
    pause = 1e-4
    while not req.Test():
        if time.monotonic() > deadline:
            me = comm().Get_rank()
            if report.failed:
                sys.stderr.write(f"rank {me}: {what} failed:\n{report.longreprtext}\n")
            sys.stderr.write(f"rank {me}: the other ranks did not end {what} within "
                             f"{scaled(MEET):.0f} s (stuck in a collective a failed rank left): ending the world\n")
            sys.stderr.flush()
            # the launcher forwards stderr asynchronously and stops when the abort ends the job:
            # give it a moment to pass the lines on (as refsgd.failure.abort_world does)
            time.sleep(scaled(failure.LINE_GRACE))
            comm().Abort(1)
        time.sleep(pause)
        pause = min(0.05, 2 * pause)


def agree(report):
    """Collective, after each phase of each test (conftest's pytest_runtest_makereport): the ranks
    meet, and a phase that failed on any rank fails on every rank, its report carrying the
    tracebacks of the ranks where it failed."""
    me = comm().Get_rank()
    what = f"{report.nodeid} ({report.when})"
    m = _meeting()
    _wait(m.Ibarrier(), what, report)
    texts = m.allgather(report.longreprtext if report.failed else None)
    failed = [(r, t) for r, t in enumerate(texts) if t is not None]
    if not failed:
        return
    others = "\n".join(f"---- rank {r} of {len(texts)}:\n{t}" for r, t in failed if r != me)
    if report.failed:
        if others:
            report.sections.append(("the other ranks that failed", others))
    else:
        report.outcome = "failed"
        report.longrepr = f"failed on rank(s) {', '.join(str(r) for r, _ in failed)}, not on rank {me}:\n{others}"


def all_ranks(ok, message=""):
    """Collective assertion: every rank learns whether ``ok`` held on every rank, and all raise
    (naming the ranks where it failed, with their ``message``) if it failed on one."""
    oks = comm().allgather((bool(ok), str(message)))
    bad = [(r, msg) for r, (o, msg) in enumerate(oks) if not o]
    assert not bad, "; ".join(f"rank {r}: {msg}" for r, msg in bad)


def shared_path(tmp_path):
    """Rank 0's ``tmp_path`` on every rank (a run's output paths are the same on every rank)."""
    from pathlib import Path
    return Path(comm().bcast(str(tmp_path)))


def parse(argv):
    """The refsgd.options.Config of ``refsgd ARGV`` (``train ...`` or ``golden ...``) as the command
    line builds it (its parser, then the Namespace to the Config), without a process."""
    from refsgd.cli import app, cmdoptions
    args = app.build_parser().parse_args(argv)
    return cmdoptions.config_of(args, leave=("out", "force") if argv[0] == "golden" else ())


def train(*argv, log=None):
    """``refsgd train ARGV`` on every rank of COMM_WORLD, in this process; its refsgd.api.Result."""
    from refsgd import api
    return api.run(parse(["train", *argv]), comm(), log=log)


def mpi_equals_serial(tmp_path, options, steps, rtol=1e-10, serial_options=None):
    """Collective. `refsgd train OPTIONS --trace` on every rank of COMM_WORLD (N ranks), `refsgd
    golden` of N workers (of ``serial_options`` if given: the tests of this check) and `refsgd
    verify` at ``rtol`` (0: bitwise, atol 0) in float64 on rank 0, in this process, as
    tests.helpers.launch.verify_mpi_against_serial does through processes; every rank asserts
    verify's verdict. Returns verify's lines."""
    from refsgd import golden, trace
    path = shared_path(tmp_path)
    n, rank = comm().Get_size(), comm().Get_rank()
    if rank == 0:
        path.mkdir(parents=True, exist_ok=True)
    comm().Barrier()
    mpi_h5, serial_h5 = path / "mpi.h5", path / "serial.h5"
    train(*options, "--dtype", "float64", "--iterations", str(steps), "--no-progress", "--trace", str(mpi_h5))
    verdict = None
    if rank == 0:
        try:
            golden.render(parse(["golden", *(serial_options or options), "--workers", str(n), "--steps", str(steps)]), n, steps, serial_h5)
            rtol = float(rtol)
            verdict = trace.verify(str(mpi_h5), str(serial_h5), rtol=rtol, **({"atol": 0.0} if rtol == 0 else {}))
        except Exception as e:  # noqa: BLE001 -- every rank must learn it, not only rank 0
            verdict = (False, [f"rank 0: the serial rendering or verify raised {type(e).__name__}: {e}"])
    ok, lines = comm().bcast(verdict)
    text = "\n".join(lines)
    assert ok and f"OK: {steps} steps x {n} workers agree" in text, text
    return text
