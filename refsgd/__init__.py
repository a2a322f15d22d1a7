"""refsgd: reference implementations of distributed SGD methods (MPI, NumPy, Numba)."""

__version__ = "0.1.0"


class RefsgdError(Exception):
    """An error caused by the user's input (a flag, a file, a spec).

    The command line prints its message alone (no traceback) and exits with code 2.
    """
