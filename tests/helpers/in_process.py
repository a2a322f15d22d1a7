"""``refsgd ARGS`` run in this process by :func:`refsgd.cli.main`, for a test whose subject is what
a command computes, prints or writes (a report's numbers, verify's verdict, a file's contents), not
the process: no interpreter's start-up, no import of NumPy, h5py and matplotlib per command. A test
whose subject is the process (the console script, one-line errors under mpiexec, exit codes of a
rank that fails, signals, the launcher) launches one: tests.helpers.launch.cli."""

import signal
import subprocess
import sys
import warnings

import numpy as np

from refsgd import failure
from refsgd.cli import main
from refsgd.cli.words import is_mpi_command


def refsgd(capfd, *args):
    """``refsgd ARGS`` by refsgd.cli.main in this process, as the CompletedProcess that
    tests.helpers.launch.cli returns: its exit code (argparse's SystemExit included), its standard
    output and error read with the test's ``capfd`` (failure.say writes to fd 2).

    An MPI command (train, bench overlap, bench codec) runs on every rank of the world that calls
    it (tests.helpers.world), as under mpiexec. Any other command runs as in a process of its own
    (`python -m refsgd report ...`): on a rank of a world session it sees a world of one
    (failure.world_size), so that its error is its exit code and one line, as there, not the end of
    every rank (refsgd.cli.app.main ends the world on an error of one rank of several).

    What main changes in the process is put back after it: the signal handlers and the unraisable
    hook it installs, NumPy's error state and the warning filters it sets (a later test of the same
    process must see NumPy's warnings as before)."""
    argv = [str(a) for a in args]
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, failure.WARNING)}
    hook, errors, world_size = sys.unraisablehook, np.geterr(), failure.world_size
    capfd.readouterr()  # the test's own output so far is not this command's
    if not is_mpi_command(argv):
        failure.world_size = lambda: 1
    try:
        with warnings.catch_warnings():
            try:
                code = main(argv)
            except SystemExit as e:  # argparse: a usage error, --help
                code = e.code if isinstance(e.code, int) else int(e.code is not None)
    finally:
        failure.world_size = world_size
        np.seterr(**errors)
        sys.unraisablehook = hook
        for s, h in handlers.items():
            signal.signal(s, h)
    out, err = capfd.readouterr()
    return subprocess.CompletedProcess(["refsgd", *argv], code, out, err)
