"""How an MPI command of refsgd stops: together, or by ending every rank.

There are two ways for a rank to stop (see docs/guide/checkpoints.md, "Failures and signals"):

* **together**: every rank reaches the same decision at the same point (a bad input found by
  the check before the first collective, a non-finite loss found by the all-rank loss check, a
  stop requested by a signal and agreed at the loss check). Rank 0 prints the one message, every
  rank returns the exit code and MPI finalises normally.
* **alone**: anything else (an error on one rank, a bug, a failing thread, a signal outside
  the training loop). The rank prints its one line and calls ``MPI_Abort`` on COMM_WORLD with
  the exit code, which ends every rank at once: no rank is left blocked in a collective.
  MPICH's own "Abort(code) ..." line is silenced, so the user reads one message.

Exit codes: 1 a failure (a bug, a thread, a crash), 2 a user error (input, files), 130
interrupted (SIGINT), 143 terminated (SIGTERM: ``scancel``, a batch system's time limit), 138
pre-empted (SIGUSR1: a batch system's warning before the time limit or a pre-emption, e.g.
Slurm's ``sbatch --signal=USR1@60``).

SIGUSR1 is a warning, not an order: it never ends a command at once. It asks the training loop
to stop at the next loss check, where every rank agrees on it, writes the checkpoint (with
``--checkpoint``) and the files of the iterations done, and exits 138 together, before the
limit; a job script then requeues the job, whose ``--resume auto`` continues from that
checkpoint. Outside the loop (start-up, the last writes, a command without a loop) it is
remembered for the loop or ignored.

Signals: the handler is installed by the command's first instruction (:mod:`refsgd.entry`),
with a bound on the time to MPI_Init (:func:`bound_mpi_start`). Outside the loop the handler
raises :class:`Stopped` (a BaseException, so that no ``except Exception`` takes it for an error)
in the main thread's current frame; when that frame is a callback whose exceptions Python only
prints (a garbage-collector or weakref callback, a ``__del__``), the unraisable hook
(:meth:`_Stop.swallowed`) delivers the signal again once the callback has returned, and a
command still running :data:`UNWIND` s after the signal is ended with its code and line.

The launch environment (a launcher's size and rank, read without MPI) is :mod:`refsgd.launchenv`.
During the training loop the first SIGINT or SIGTERM only sets a flag; the loss check (every
``--log-every`` iterations, on every rank) agrees on it, writes the checkpoint (with
``--checkpoint``), the ``--out`` and ``--trace`` files of the iterations done (marked
interrupted), and every rank stops together with 130 or 143. If that check does not come within
:data:`GRACE` seconds, or a second signal arrives (more than :data:`REPEAT` s after the first),
or the signal arrives outside the loop, the rank ends the world at once (rank 0 prints the line;
another rank waits :data:`RANK0_FIRST` s for rank 0 to do it, so a signal to every rank gives
one line). Before MPI is initialised (the start-up of an MPI command under a launcher, or inside
``from mpi4py import MPI``) a rank must not leave alone: MPICH's launcher does not notice a rank
gone before MPI_Init, and the other ranks would wait for it there forever. The signal is then
acted on as soon as MPI is up (a watcher thread), which takes the start-up's imports, at most
:data:`GRACE` s.
"""

import _thread
import math
import os
import signal
import sys
import threading
import time

from refsgd.errors import Stopped
from refsgd.launchenv import launcher_rank, launcher_size

#: the exit codes of every command (the table of ``refsgd --help`` and docs/reference/exit-codes.md)
EXIT_CHECK = 1     # a check or comparison failed (verify's MISMATCH, a conformance check, a verdict)
EXIT_USER = 2      # bad usage or input (refsgd: error: ...)
EXIT_INTERNAL = 3  # an internal error: a bug of refsgd's (its traceback is printed)
EXIT_RANK = 4      # a rank or peer failed (a thread of a rank, a rank gone, a link down)
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143
EXIT_CODES = ((0, "ok"), (EXIT_CHECK, "a check or comparison failed (a mismatch, a failed verdict)"),
              (EXIT_USER, "bad usage or input"), (EXIT_INTERNAL, "internal error (a bug of refsgd's)"),
              (EXIT_RANK, "a rank or peer failed"), ("128+N", "ended by signal N (130 SIGINT, 143 SIGTERM)"))

#: seconds between a signal during the loop and the forced end of every rank
GRACE = 30.0
#: a second signal within this many seconds of the first is the same stop (launchers such as
#: mpiexec and srun forward a signal that the process group received too); later, it ends at once
REPEAT = 1.0
#: seconds between printing the one line and MPI_Abort (see abort_world)
LINE_GRACE = 0.3
#: seconds a rank other than 0 waits before ending the world on a signal: the signal usually
#: reaches every rank, and rank 0's line and MPI_Abort then come first (one line, not one per rank)
RANK0_FIRST = 1.0
#: the same wait under Open MPI when the signal is SIGTERM: once a rank has aborted, mpirun ends the
#: others with SIGTERM and, a moment later, SIGKILL; a rank that waits longer than that is ended
#: silently instead of printing a second line
RANK0_FIRST_OPENMPI_TERM = 3.0
#: seconds between two looks of the watcher that waits for MPI to be up (see _Stop.handler)
WATCH = 0.02
#: seconds between a stop that Python swallowed (see _Stop.swallowed) and its delivery again
AGAIN = 0.01
#: seconds a command has to unwind after a signal outside the loop (its clean-up: a launched job's
#: ranks get 10 s to end) before this process ends at once with the signal's code and line
UNWIND = 20.0

_NAMES = {signal.SIGINT: ("interrupted", "SIGINT"), signal.SIGTERM: ("terminated", "SIGTERM"),
          signal.SIGUSR1: ("pre-empted", "SIGUSR1")}
#: the batch system's warning (see the module docstring)
WARNING = signal.SIGUSR1
EXIT_PREEMPTED = 128 + int(WARNING)


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


def mpi_state():
    """Where this process stands with MPI, without initialising it: None (mpi4py not imported, or
    MPI not initialised), "importing" (``from mpi4py import MPI`` under way: the module exists but
    is not complete, and a signal handler may run in the middle of it), "up" or "finalized"."""
    mpi = sys.modules.get("mpi4py.MPI")
    if mpi is None:
        return None
    try:
        mpi.COMM_WORLD  # noqa: B018 the module is complete only once its last names are bound
        initialized, finalized = mpi.Is_initialized(), mpi.Is_finalized()
    except AttributeError:  # a partially initialised module
        return "importing"
    return "finalized" if finalized else "up" if initialized else None


def world_size():
    """COMM_WORLD's size if MPI is in use, else 1 (never initialises MPI)."""
    if mpi_state() != "up":
        return 1
    return sys.modules["mpi4py.MPI"].COMM_WORLD.Get_size()


def world_rank():
    """COMM_WORLD's rank if MPI is up, else the launcher's, else 0 (never initialises MPI)."""
    if mpi_state() == "up":
        return sys.modules["mpi4py.MPI"].COMM_WORLD.Get_rank()
    return launcher_rank() or 0


def _rank0_first(code):
    if code == 128 + int(signal.SIGTERM) and "OMPI_COMM_WORLD_SIZE" in os.environ:
        return RANK0_FIRST_OPENMPI_TERM
    return RANK0_FIRST


def abort_world(code, line=None, rank0_says=False):
    """Print ``line`` (one line) and end every rank with exit code ``code``. Returns ``code``
    only when there is no other rank to end (one process without MPI, or a world of one).
    ``rank0_says``: the cause (a signal) probably reached every rank; a rank other than 0 waits
    :data:`RANK0_FIRST` s, so that rank 0's line and abort come first."""
    if rank0_says and world_rank() != 0:
        time.sleep(_rank0_first(code))
    if line:
        say(line)
    if world_size() > 1:
        from mpi4py import MPI  # noqa: PLC0415 mpi4py: only when MPI runs (this module loads first, before it)
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


def exit_now(code):
    """End this process with ``code`` at once, its standard streams flushed, without the
    interpreter's finalisation (MPI finalised first where it is up)."""
    if mpi_state() == "up":
        try:
            sys.modules["mpi4py.MPI"].Finalize()
        except Exception:  # ending anyway: a failing Finalize must not keep the process
            pass
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
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
        self.mpi_command = False  # the command initialises MPI on every rank (train, bench overlap)
        self.late = False         # the command has returned: nothing left to unwind
        self.pending = None       # a signal that waits for MPI to be up (see the module docstring)
        self.ending = None        # the signal this rank is ending the world on (see leave)
        self.warned = False       # SIGUSR1 arrived: stop at the next loss check (module docstring)
        self.raised = None        # the signal whose Stopped this process is unwinding with (see leave)
        self.lost = None          # a signal whose Stopped Python swallowed, about to be delivered again
        self.watchdog = None      # ends this process if that unwinding does not end it (UNWIND)
        self.previous_hook = sys.unraisablehook
        self.in_hook = False      # the unraisable hook runs (see swallowed)
        self.again = threading.Event()  # a swallowed stop waits for _deliver_again
        self.redeliverer = None

    def handler(self, signum, frame):
        if signum == WARNING:
            self.warned = True
            return
        if self.ending is not None:
            # this rank is already ending the world on a signal and waits for rank 0's line and
            # abort (abort_world); a signal now is the launcher ending the job (Open MPI's mpirun
            # sends SIGTERM to the other ranks once one has aborted) or the same stop again: rank 0
            # says the one line, so another rank leaves without a second one
            if world_rank() != 0:
                os._exit(exit_code(self.ending))
            return
        if self.in_hook:  # never raise inside the unraisable hook (Python would print it, and it is lost)
            self.again.set()  # the swallowed stop's delivery came too soon: once more
            return
        again, self.lost = self.lost is not None, None  # again: a stop delivered once more (not a new signal)
        word, name = describe(signum)
        now = time.monotonic()
        if (self.signum is not None or self.pending is not None or self.raised is not None) \
                and now - self.since < REPEAT and not again:
            return  # the same stop, delivered twice (by the launcher and to the process group)
        self.since = now
        state = mpi_state()
        if state == "importing" or (state is None and self.mpi_command and (launcher_size() or 1) > 1):
            if self.pending is None:  # leaving now would leave the other ranks in MPI_Init
                self.pending = signum
                threading.Thread(target=self._leave_once_mpi_is_up, args=(signum,), daemon=True,
                                 name="refsgd-signal").start()
            return
        if self.signum is not None or not self.deferred:
            self.leave(signum, frame)
            return  # inside Numba's compiler: delivered again once it has returned (see leave)
        self.signum = signum
        # the loss check agrees on the stop; if it does not come in time, end everything
        self.timer = threading.Timer(GRACE, end_now, (exit_code(signum),
                                     f"refsgd: {word} ({name}); no iteration boundary within {GRACE:.0f} s"))
        self.timer.daemon = True
        self.timer.start()

    def leave(self, signum, frame=None):
        """End this command on a signal outside the loop: every rank when MPI is up, else unwind
        this process (Stopped: the command line prints the line and cleans up), or, once the
        command has returned, exit. Never inside Numba's compiler (:func:`_inside_compiler`): the
        stop waits there, delivered again every :data:`AGAIN` s, until the compiler has returned."""
        word, name = describe(signum)
        code, line = exit_code(signum), f"refsgd: {word} ({name})"
        if world_size() > 1:
            self.ending = signum
            abort_world(code, line, rank0_says=True)
        if self.late:
            if world_rank() == 0:
                say(line)
            os._exit(code)
        self.raised = signum
        if self.watchdog is None:
            self.watchdog = threading.Timer(UNWIND, end_now, (code, f"{line}; the command did not end within "
                                                                    f"{UNWIND:.0f} s"))
            self.watchdog.daemon = True
            self.watchdog.start()
        if _inside_compiler(frame):
            # an exception raised between one of llvmlite's C calls and the Python line that records
            # who owns the LLVM object it made leaves that object to be freed twice: a SIGSEGV when
            # the traceback is released, instead of 130 (the watchdog above still bounds the wait)
            self.raised, self.lost = None, signum
            self.again.set()
            return
        raise Stopped(code, f"{word} ({name})")

    def swallowed(self, unraisable):
        """sys.unraisablehook: a Stopped raised by this handler while the main thread ran a
        callback whose exceptions Python only prints ("Exception ignored in": a weakref's or the
        garbage collector's callback, a ``__del__``) is delivered again a moment later, once that
        callback has returned, instead of being lost (the command would run on and exit 0). Any
        other unraisable exception goes to the hook there was before."""
        exc = unraisable.exc_value
        if not (isinstance(exc, Stopped) and not exc.collective and self.raised is not None):
            return self.previous_hook(unraisable)
        self.in_hook = True
        try:
            self.lost, self.raised = self.raised, None
            self.again.set()  # the thread of _deliver_again; nothing here waits (a wait runs handlers)
        finally:
            self.in_hook = False
        return None

    def _deliver_again(self):
        """A thread (started with the handlers): AGAIN s after each swallowed stop, simulate its
        signal once (the handler runs in the main thread's next frame); a delivery that is
        swallowed again comes back here through the hook. One delivery per swallow: a second one
        would reach a command that has already stopped (two lines)."""
        while True:
            self.again.wait()
            self.again.clear()
            time.sleep(AGAIN)
            if (signum := self.lost) is not None:
                _thread.interrupt_main(signum)

    def unwound(self):
        """The command line has handled the Stopped: no watchdog (a caller of refsgd.cli.main in a
        process that goes on must not be ended later)."""
        if self.watchdog is not None:
            self.watchdog.cancel()
            self.watchdog = None
        self.raised = self.lost = None

    def swallowed_stop(self):
        """The signal of a Stopped raised and never handled (a command that caught it and went on
        to its end), or None."""
        return self.raised if self.raised is not None else self.lost

    def _leave_once_mpi_is_up(self, signum):
        """A watcher thread: once MPI is initialised, deliver the signal again, to be handled as
        any other (or, if MPI never comes up, end this process)."""
        deadline = time.monotonic() + GRACE
        while time.monotonic() < deadline and mpi_state() in (None, "importing"):
            time.sleep(WATCH)
        if mpi_state() in (None, "importing"):
            word, name = describe(signum)
            say(f"refsgd: {word} ({name}); MPI did not start within {GRACE:.0f} s")
            os._exit(exit_code(signum))
        self.pending, self.since = None, 0.0
        os.kill(os.getpid(), signum)  # the main thread's handler runs at its next instruction

    def cancel(self):
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None


def _inside_compiler(frame):
    """Whether a frame of Numba or llvmlite is on ``frame``'s stack (a compilation under way:
    running compiled code leaves no Python frame of theirs)."""
    homes = tuple(os.path.dirname(module.__file__) + os.sep for module in map(sys.modules.get, ("numba", "llvmlite"))
                  if getattr(module, "__file__", None))
    while frame is not None and homes:
        if frame.f_code.co_filename.startswith(homes):
            return True
        frame = frame.f_back
    return False


STOP = _Stop()


def start_timeout():
    """Seconds a rank of an MPI command has from its first instruction to MPI being up
    (REFSGD_MPI_START_TIMEOUT, default 300; :func:`refsgd.launchenv.environment_error` refuses a
    value that is not a positive number of seconds, at most ``MAX_START_TIMEOUT``), rounded up."""
    return math.ceil(float(os.environ.get("REFSGD_MPI_START_TIMEOUT", "300")))


def bound_mpi_start():
    """Kill this rank if MPI is not up within :func:`start_timeout` seconds.

    A rank that ends with an exit code before ``MPI_Init`` (an import that fails on one node, a
    Ctrl-C during the interpreter's start-up, before refsgd's first instruction, with ``python
    -m``) is not noticed by MPICH's launcher, and the other ranks wait for it in ``MPI_Init``
    forever, where neither a Python thread nor a Python signal handler can run (mpi4py holds the
    GIL there). SIGALRM's default action can: it ends the process, which the launcher notices
    (its banner names "Alarm clock") and ends the job. A thread cancels the alarm once MPI is up."""
    if not hasattr(signal, "alarm"):
        return
    signal.alarm(start_timeout())

    def cancel_when_up():
        while mpi_state() in (None, "importing"):
            time.sleep(0.1)
        signal.alarm(0)
    threading.Thread(target=cancel_when_up, daemon=True, name="refsgd-mpi-start").start()


def install(mpi_command=False):
    """Handle SIGINT, SIGTERM and SIGUSR1 as described in the module docstring (main thread only);
    ``mpi_command``: the command initialises MPI on every rank."""
    if threading.current_thread() is not threading.main_thread():
        return
    STOP.mpi_command = mpi_command
    for s in (signal.SIGINT, signal.SIGTERM, WARNING):
        signal.signal(s, STOP.handler)
    if sys.unraisablehook != STOP.swallowed:
        STOP.previous_hook, sys.unraisablehook = sys.unraisablehook, STOP.swallowed
    if STOP.redeliverer is None:  # started here, in the main thread's ordinary frames (see swallowed)
        STOP.redeliverer = threading.Thread(target=STOP._deliver_again, daemon=True, name="refsgd-signal-again")
        STOP.redeliverer.start()


def requested():
    """The signal number a stop was requested with on this rank (SIGUSR1 for the batch system's
    warning when no other signal came), or 0."""
    return int(STOP.signum or (WARNING if STOP.warned else 0))


class deferring:
    """Context: signals set the stop flag instead of ending the world (the training loop). A stop
    still set when the loop ends normally came after its last loss check, which no boundary is
    left to agree on: it ends the command here (every rank, when MPI is up), before any output is
    written, rather than be lost to an exit code 0."""

    def __enter__(self):
        STOP.deferred = True
        return self

    def __exit__(self, exc_type, *exc):
        STOP.deferred = False
        signum = STOP.signum
        if exc_type is None and signum is not None:
            STOP.cancel()
            STOP.leave(signum)
        return False
