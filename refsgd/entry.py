"""The ``refsgd`` command's first instructions (its console script and ``python -m refsgd``).

The signal handlers of :mod:`refsgd.failure` are installed before anything else is imported
(NumPy, Numba, mpi4py take a second or more), so that SIGINT or SIGTERM at any moment, from the
first instruction to the last, ends the command with 130 or 143 and one line, on every rank.
"""

import sys

from refsgd.errors import Stopped
from refsgd import failure


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    mpi_command = is_mpi_command(argv)
    failure.install(mpi_command=mpi_command)
    if mpi_command and (failure.launcher_size() or 1) > 1:
        failure.bound_mpi_start()  # a rank gone before MPI_Init must not leave the others there forever
    try:
        from refsgd import cli
        code = cli.main(argv)
    except Stopped as e:  # a signal before the command line's own handling (during its imports)
        code = e.code
        if failure.world_rank() == 0:
            failure.say(f"refsgd: {e}")
    failure.STOP.late = True  # from here a signal exits at once (MPI finalises at interpreter exit)
    return code


def is_mpi_command(argv):
    """Whether ``refsgd ARGV`` initialises MPI on every rank (train, bench overlap, bench codec); from the
    words alone, before the parser is imported."""
    words = [a for a in argv if not a.startswith("-")]
    if not words:
        return False
    if words[0] == "train":
        return "--list" not in argv and "-h" not in argv and "--help" not in argv
    return words[0] == "bench" and len(words) > 1 and words[1] in ("overlap", "codec")


if __name__ == "__main__":
    sys.exit(main())
