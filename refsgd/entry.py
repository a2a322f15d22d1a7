"""The ``refsgd`` command's first instructions (its console script and ``python -m refsgd``).

The signal handlers of :mod:`refsgd.failure` are installed before anything else is imported
(NumPy, Numba, mpi4py take a second or more), so that SIGINT or SIGTERM at any moment, from the
first instruction to the last, ends the command with 130 or 143 and one line, on every rank.
"""

import sys

from refsgd import cli, failure, launchenv  # refsgd/cli/__init__.py imports nothing: the parser comes later
from refsgd.cli.words import is_mpi_command
from refsgd.errors import Stopped


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    mpi_command = is_mpi_command(argv)
    try:  # the handlers' Stopped, from the moment they are in place
        failure.install(mpi_command=mpi_command)
        # before NumPy and Numba load: Numba reads NUMBA_NUM_THREADS at its import (0 or "abc" is
        # a traceback there, --version's included), the launcher's variables are read from here on
        bad = launchenv.environment_error()
        if bad:
            if launchenv.speaks():
                failure.say(f"refsgd: error: {bad}")
            code = failure.EXIT_USER
        else:
            if mpi_command and (launchenv.launcher_size() or 1) > 1:
                failure.bound_mpi_start()  # a rank gone before MPI_Init must not leave the others there forever
            code = cli.main(argv)  # imports the parser, NumPy and the rest: after the handlers
        lost = failure.STOP.swallowed_stop()
        if lost is not None:  # the command caught the stop and went on: it ends as the signal says
            raise Stopped(failure.exit_code(lost), "{} ({})".format(*failure.describe(lost)))
    except Stopped as e:  # a signal before the command line's own handling (during its imports)
        failure.STOP.unwound()
        code = e.code
        if failure.world_rank() == 0:
            failure.say(f"refsgd: {e}")
    except Exception:
        lost = failure.STOP.swallowed_stop()
        if lost is None:
            raise
        # the stop, raised inside C code that replaced it with an error of its own (NumPy's import
        # of its C extension: "PyCapsule_Import could not import module datetime")
        failure.STOP.unwound()
        code = failure.exit_code(lost)
        if failure.world_rank() == 0:
            failure.say("refsgd: {} ({})".format(*failure.describe(lost)))
    failure.STOP.late = True  # from here a signal exits at once (MPI finalises at interpreter exit)
    if code >= 128 and failure.world_size() <= 1:
        # a stopped process that is alone ends here, its line said and its outputs cleaned up: the
        # interpreter's finalisers would run on state the stop left half-way (a stop delivered
        # inside Numba's compiler: LLVM objects freed at exit ended one run in SIGSEGV, not 130)
        failure.exit_now(code)
    return code


if __name__ == "__main__":
    sys.exit(main())
