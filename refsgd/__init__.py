"""refsgd: reference implementations of distributed SGD methods (MPI, NumPy, Numba)."""

__version__ = "0.1.0"


class RefsgdError(Exception):
    """An error caused by the user's input (a flag, a file, a spec).

    The command line prints its message alone (no traceback) and exits with code 2.
    """


class RankFailure(Exception):
    """A failure on this rank alone (e.g. an exception in a method's communication thread), while
    the other ranks may be blocked in a collective: the command line prints its message once, on
    this rank, and aborts every rank (``MPI.COMM_WORLD.Abort``) with exit code 1."""
