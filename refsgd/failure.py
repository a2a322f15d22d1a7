"""How an MPI command of refsgd stops: together, or by ending every rank.

There are two ways for a rank to stop (see README, "Failures and signals"):

* **together**: every rank reaches the same decision at the same point (a bad input found by
  the check before the first collective, a non-finite loss found by the all-rank loss check, a
  stop requested by a signal and agreed at the loss check). Rank 0 prints the one message, every
  rank returns the exit code and MPI finalises normally.
* **alone**: anything else (an error on one rank, a bug, a failing thread, a signal outside
  the training loop). The rank prints its one line and calls ``MPI_Abort`` on COMM_WORLD with
  the exit code, which ends every rank at once: no rank is left blocked in a collective.
  MPICH's own "Abort(code) ..." line is silenced, so the user reads one message.

Exit codes: 1 a failure (a bug, a thread, a crash), 2 a user error (input, files), 130
interrupted (SIGINT), 143 terminated (SIGTERM).

Signals: during the training loop the first SIGINT or SIGTERM only sets a flag; the loss check
(every ``--log-every`` iterations, on every rank) agrees on it, writes a checkpoint when the run
has ``--checkpoint``, and every rank stops together with 130 or 143. If that check does not
come within :data:`GRACE` seconds, or a second signal arrives (more than :data:`REPEAT` s after
the first), or the signal arrives outside the loop, the rank ends the world at once.
"""

import os
import signal
import sys
import threading
import time

EXIT_FAILURE = 1
EXIT_USER = 2
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143

#: seconds between a signal during the loop and the forced end of every rank
GRACE = 30.0
#: a second signal within this many seconds of the first is the same stop (launchers such as
#: mpiexec and srun forward a signal that the process group received too); later, it ends at once
REPEAT = 1.0
#: seconds between printing the one line and MPI_Abort (see abort_world)
LINE_GRACE = 0.3

_NAMES = {signal.SIGINT: ("interrupted", "SIGINT"), signal.SIGTERM: ("terminated", "SIGTERM")}


def say(line):
    """Write one whole line to stderr at once (so lines of several ranks never interleave)."""
    try:
        sys.stdout.flush()
    except (OSError, ValueError):
        pass
    try:
        os.write(2, (line.rstrip("\n") + "\n").encode(errors="replace"))
    except OSError:
        pass


def world_size():
    """COMM_WORLD's size if MPI is in use, else 1 (never initialises MPI)."""
    mpi = sys.modules.get("mpi4py.MPI")
    if mpi is None or not mpi.Is_initialized() or mpi.Is_finalized():
        return 1
    return mpi.COMM_WORLD.Get_size()


def abort_world(code, line=None):
    """Print ``line`` (one line) and end every rank with exit code ``code``. Returns ``code``
    only when there is no other rank to end (one process without MPI, or a world of one)."""
    if line:
        say(line)
    if world_size() > 1:
        from mpi4py import MPI
        try:
            sys.stdout.flush()
        except (OSError, ValueError):
            pass
        # the launcher forwards a rank's stderr asynchronously and stops forwarding when the abort
        # ends the job: give it a moment to pass the line on
        time.sleep(LINE_GRACE)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 2)  # MPICH prints its own "Abort(code) on node ..." line: one message is enough
        MPI.COMM_WORLD.Abort(code)
    return code


def end_now(code, line=None):
    """abort_world, and end this process too when it is alone (from any thread)."""
    abort_world(code, line)
    os._exit(code)


def exit_code(signum):
    return 128 + int(signum)


def describe(signum):
    """("interrupted", "SIGINT") for a signal number."""
    return _NAMES.get(signum, ("stopped", signal.Signals(signum).name))


class _Stop:
    """The signal state of this process: the first signal seen and whether the loop defers it."""

    def __init__(self):
        self.signum = None
        self.deferred = False
        self.timer = None
        self.since = 0.0

    def handler(self, signum, frame):
        word, name = describe(signum)
        if self.signum is not None and time.monotonic() - self.since < REPEAT:
            return  # the same stop, delivered twice (by the launcher and to the process group)
        if self.signum is not None or not self.deferred:
            if world_size() > 1:
                abort_world(exit_code(signum), f"refsgd: {word} ({name})")
            from refsgd import Stopped
            raise Stopped(exit_code(signum), f"{word} ({name})")  # one process: unwind, files cleaned up
        self.signum = signum
        self.since = time.monotonic()
        # the loss check agrees on the stop; if it does not come in time, end everything
        self.timer = threading.Timer(GRACE, end_now, (exit_code(signum),
                                     f"refsgd: {word} ({name}); no iteration boundary within {GRACE:.0f} s"))
        self.timer.daemon = True
        self.timer.start()

    def cancel(self):
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None


STOP = _Stop()


def install():
    """Handle SIGINT and SIGTERM as described in the module docstring (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        return
    for s in (signal.SIGINT, signal.SIGTERM):
        signal.signal(s, STOP.handler)


def requested():
    """The signal number a stop was requested with on this rank, or 0."""
    return int(STOP.signum or 0)


class deferring:
    """Context: signals set the stop flag instead of ending the world (the training loop)."""

    def __enter__(self):
        STOP.deferred = True
        return self

    def __exit__(self, *exc):
        STOP.deferred = False
        return False


def launcher_rank():
    """This process's rank as the MPI launcher says (MPICH/Hydra, Open MPI, PMIx, Slurm), without
    initialising MPI; None when not launched by one."""
    for key in ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "SLURM_PROCID"):
        v = os.environ.get(key)
        if v is not None and v.strip().isdigit():
            return int(v)
    return None


def launcher_size():
    for key in ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS"):
        v = os.environ.get(key)
        if v is not None and v.strip().isdigit():
            return int(v)
    return None
