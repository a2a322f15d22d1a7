"""``./run.sh test [--quick] [PYTEST ARGS]``: the whole suite as parts, each printing its own
report (a failing test's name and traceback where it failed):

1. plain pytest: the tests that need no MPI, those that launch processes (the CLI, signals,
   failures, the launcher, namespaces) and the ``world(1)`` tests (MPI's singleton), in
   :func:`workers` pytest-xdist workers (``--dist loadgroup``: the tests marked
   ``xdist_group(NAME)`` run on one worker, one at a time; ``-n 0`` runs the part in one process);
2. one pytest-mpi session per world size N (2, 3, 4): ``mpiexec -n N python -m pytest --with-mpi``
   runs the tests marked ``world(..., N, ...)`` in-process on COMM_WORLD (tests.helpers.world),
   every test under a time limit that ends the world (pytest-timeout, thread method) and the
   session under one of its own, so a hang fails, never hangs;
3. when the whole suite runs (no path given), Slurm's tests (:data:`BESIDE`, which mostly wait: a
   requeued job's hold, a time limit of a minute) run beside parts 1 and 2 from the start, their
   report printed whole at their end.

The PYTEST ARGS go to every part (paths, -k, -x, --durations=30 ...), but pytest-xdist's (``-n``,
``--dist`` ...), which go to the plain part only; a part that selects no test passes.
``--quick`` runs what launches no process (:data:`QUICK`) and the world of 2 ranks only (every
method's MPI = serial at 2 ranks). The closing line of every part is printed again at the
end; the exit status is the first failing part's (0 if every part passed).
"""

import math
import os
import re
import signal
import subprocess
import sys
import threading

from tests.helpers.launch import scaled

from refsgd import busy

WORLDS = (2, 3, 4)
#: a test's limit in a world session (seconds on idle cores, scaled by the load at the start)
TEST_LIMIT = 300
#: a world session's limit (seconds on idle cores, scaled): a hang the per-test limit missed
SESSION_LIMIT = 1800
CLOSING = re.compile(r"^=*\s*(\d+ (passed|failed|error|errors|skipped|deselected)|no tests ran).*")
NO_TESTS = 5  # pytest's exit status when it selected no test
#: --quick: the tests that launch no process (mpi_launch: mpiexec; cluster: namespaces, Slurm) and
#: are not marked slow
QUICK = "not mpi_launch and not cluster and not slow"
#: the plain part's pytest-xdist workers per usable core: a test keeps about half a core busy on
#: average (its processes wait for mpiexec's start-up, a signal's grace period, a time limit, their
#: peers), so more workers than cores overlap those waits with the tests that compute; but past
#: the cores' worth of work, MPI ranks spin for peers that wait for a core, and the CPU grows
#: (measured on 2 cores, whole suite: 3 workers 10 min 59 s and 1,014 s of the tests' CPU, 4
#: workers 11 min 43 s and 1,084 s; docs/contributing/testing.md)
WORKERS_PER_CORE = 1.5
#: pytest-xdist's options that take a value: they go to the plain part only (a world session is
#: one process per rank, Slurm's tests share one Slurm)
XDIST = ("-n", "--numprocesses", "--maxprocesses", "--dist")


def workers():
    """The plain part's pytest-xdist workers: :data:`WORKERS_PER_CORE` per usable core (rounded
    up), at least 2."""
    return max(2, math.ceil(WORKERS_PER_CORE * busy.usable_cores()))


def split_xdist(args):
    """(pytest-xdist's options among ``args``, the other arguments)."""
    xdist, rest = [], []
    it = iter(args)
    for a in it:
        if a.split("=", 1)[0] in XDIST:
            xdist.append(a)
            value = None if "=" in a else next(it, None)
            if value is not None:
                xdist.append(value)
        elif a.startswith("-n") and not a.startswith("--"):   # -n4, -nauto
            xdist.append(a)
        else:
            rest.append(a)
    return xdist, rest


def _end(p, ended):
    """A part past its limit: SIGTERM to its process group (refsgd.mpilib hands it to the ranks),
    SIGKILL 30 s later."""
    ended.append(True)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(p.pid, sig)
            p.wait(30)
            return
        except subprocess.TimeoutExpired:
            continue
        except ProcessLookupError:
            return


class Part:
    """One pytest of the suite, started with :meth:`start` and waited for with :meth:`finish`:
    its output streamed as it comes, or (``beside``: a part that runs beside the others) kept and
    printed whole at its end, so that two parts' lines never interleave."""

    def __init__(self, name, cmd, limit=None, beside=False):
        self.name, self.cmd, self.limit, self.beside = name, cmd, limit, beside
        self.lines, self.closing, self.ended = [], "", []

    def start(self):
        print(f"\nrun.sh test: {self.name}{' (beside the others, its report at its end)' if self.beside else ''}: "
              f"{' '.join(self.cmd)}", flush=True)
        self.p = subprocess.Popen(self.cmd, stdout=subprocess.PIPE, text=True, start_new_session=True)
        self.timer = threading.Timer(self.limit, _end, (self.p, self.ended)) if self.limit else None
        if self.timer:
            self.timer.daemon = True
            self.timer.start()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        return self

    def _read(self):
        for line in self.p.stdout:
            if self.beside:
                self.lines.append(line)
            else:
                sys.stdout.write(line)
                sys.stdout.flush()
            if CLOSING.match(line.strip()):
                self.closing = line.strip().strip("= ")

    def finish(self):
        """Wait for the part; (its exit status, its closing line)."""
        rc = self.p.wait()
        self.reader.join()
        if self.timer:
            self.timer.cancel()
        if self.beside:
            print(f"\nrun.sh test: {self.name}, its report:", flush=True)
            sys.stdout.write("".join(self.lines))
        if self.ended:
            return rc or 1, f"ended after {self.limit:.0f} s (a hang?)"
        return rc, self.closing or f"exit status {rc}"


#: what mostly waits (Slurm's requeue hold, a time limit of a minute, scancel): run beside the
#: CPU-bound parts when the whole suite runs (no path given), not after them
BESIDE = "tests/mpiexec/test_slurm.py"


def main(argv):
    quick = "--quick" in argv
    xdist, args = split_xdist(a for a in argv if a != "--quick")
    if not any(a.endswith("no:xdist") for a in args):     # -p no:xdist: the plain part in one process
        if not any(a.startswith(("-n", "--numprocesses")) for a in xdist):
            xdist = ["-n", str(workers()), *xdist]
        if not any(a.startswith("--dist") for a in xdist):
            xdist += ["--dist", "loadgroup"]
    if quick and not any(a == "-m" or a.startswith("-m") and not a.startswith("--") for a in args):
        args = ["-m", QUICK, *args]
    py = sys.executable
    whole = not quick and not any(os.path.exists(a.split("::")[0]) for a in args)
    parts = []
    if whole:
        parts.append(Part("Slurm's tests", [py, "-m", "pytest", "-q", "-rs", *args, BESIDE], beside=True))
    parts.append(Part("serial and process tests", [py, "-m", "pytest", "-q", "-rs", *xdist, *args,
                                                   *(["--ignore", BESIDE] if whole else [])]))
    per_test = f"{scaled(TEST_LIMIT):.0f}"
    for n in (2,) if quick else WORLDS:
        # --color=no: Open MPI's mpirun hands the ranks a terminal, and a coloured closing line
        # would not be read as one
        cmd = [py, "-m", "refsgd.mpilib", "-n", str(n), py, "-m", "pytest", "--with-mpi", "-q", "-rs",
               "--color=no", "-p", "no:cacheprovider", "-p", "tests.helpers.world", "--timeout", per_test, "--timeout-method",
               "thread", *args]
        parts.append(Part(f"world of {n} ranks", cmd, scaled(SESSION_LIMIT)))
    beside = [part.start() for part in parts if part.beside]
    results = {}
    for part in parts:
        if not part.beside:
            results[part.name] = part.start().finish()
    for part in beside:
        results[part.name] = part.finish()
    print()
    for part in parts:
        rc, closing = results[part.name]
        print(f"run.sh test: {part.name}: {closing}" + ("" if rc in (0, NO_TESTS) else f" (exit status {rc})"))
    failed = [rc for rc, _ in results.values() if rc not in (0, NO_TESTS)]
    if failed:
        return failed[0]
    return NO_TESTS if all(rc == NO_TESTS for rc, _ in results.values()) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
