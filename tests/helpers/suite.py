"""``./run.sh test [--quick] [PYTEST ARGS]``: the whole suite as parts, one after the other, each
printing its own report as it runs (a failing test's name and traceback where it failed):

1. plain pytest: the tests that need no MPI, those that launch processes (the CLI, signals,
   failures, the launcher, Slurm, namespaces) and the ``world(1)`` tests (MPI's singleton);
2. one pytest-mpi session per world size N (2, 3, 4): ``mpiexec -n N python -m pytest --with-mpi``
   runs the tests marked ``world(..., N, ...)`` in-process on COMM_WORLD (tests.helpers.world),
   every test under a time limit that ends the world (pytest-timeout, thread method) and the
   session under one of its own, so a hang fails, never hangs.

The PYTEST ARGS go to every part (paths, -k, -x, --durations=30 ...); a part that selects no test
passes. ``--quick`` leaves out the tests marked ``slow`` and runs the world of 2 ranks only
(every method's MPI = serial at 2 ranks). The closing line of every part is printed again at the
end; the exit status is the first failing part's (0 if every part passed).
"""

import os
import re
import signal
import subprocess
import sys
import threading

from tests.helpers.launch import scaled

WORLDS = (2, 3, 4)
#: a test's limit in a world session (seconds on idle cores, scaled by the load at the start)
TEST_LIMIT = 300
#: a world session's limit (seconds on idle cores, scaled): a hang the per-test limit missed
SESSION_LIMIT = 1800
CLOSING = re.compile(r"^=*\s*(\d+ (passed|failed|error|errors|skipped|deselected)|no tests ran).*")
NO_TESTS = 5  # pytest's exit status when it selected no test


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


def run_part(name, cmd, limit=None):
    """Run one part, streaming its output; (its exit status, its closing line)."""
    print(f"\nrun.sh test: {name}: {' '.join(cmd)}", flush=True)
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, start_new_session=True)
    ended = []
    timer = threading.Timer(limit, _end, (p, ended)) if limit else None
    if timer:
        timer.daemon = True
        timer.start()
    closing = ""
    for line in p.stdout:
        sys.stdout.write(line)
        sys.stdout.flush()
        if CLOSING.match(line.strip()):
            closing = line.strip().strip("= ")
    rc = p.wait()
    if timer:
        timer.cancel()
    if ended:
        return rc or 1, f"ended after {limit:.0f} s (a hang?)"
    return rc, closing or f"exit status {rc}"


def main(argv):
    quick = "--quick" in argv
    args = [a for a in argv if a != "--quick"]
    if quick and not any(a == "-m" or a.startswith("-m") and not a.startswith("--") for a in args):
        args = ["-m", "not slow", *args]
    py = sys.executable
    parts = [("serial and process tests", [py, "-m", "pytest", "-q", "-rs", *args], None)]
    per_test = f"{scaled(TEST_LIMIT):.0f}"
    for n in (2,) if quick else WORLDS:
        cmd = [py, "-m", "refsgd.mpilib", "-n", str(n), py, "-m", "pytest", "--with-mpi", "-q", "-rs",
               "-p", "no:cacheprovider", "-p", "tests.helpers.world", "--timeout", per_test, "--timeout-method", "thread", *args]
        parts.append((f"world of {n} ranks", cmd, scaled(SESSION_LIMIT)))
    results = [(name, *run_part(name, cmd, limit)) for name, cmd, limit in parts]
    print()
    for name, rc, closing in results:
        print(f"run.sh test: {name}: {closing}" + ("" if rc in (0, NO_TESTS) else f" (exit status {rc})"))
    failed = [rc for _, rc, _ in results if rc not in (0, NO_TESTS)]
    if failed:
        return failed[0]
    return NO_TESTS if all(rc == NO_TESTS for _, rc, _ in results) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
