"""refsgd: reference implementations of distributed SGD methods (MPI, NumPy, Numba)."""

__version__ = "0.1.0"


class RefsgdError(Exception):
    """An error caused by the user's input (a flag, a file, a spec).

    The command line prints its message alone (no traceback) and exits with code 2. Raised on
    one rank, it ends every rank (see :mod:`refsgd.failure`); ``collective = True`` marks an
    error that every rank raises at the same point (agreed on), which stops the ranks together.
    """

    collective = False


def did_you_mean(word, names, cutoff=0.6):
    """" (did you mean a, b or c?)": the few names that ``word`` begins (``laga``: the three LAGA
    variants), else the one closest to it (difflib, similarity >= ``cutoff``), else ""."""
    import difflib
    names = list(names)
    close = [n for n in names if n.startswith(word) and n != word]
    if not 0 < len(close) <= 4:
        close = difflib.get_close_matches(word, names, 1, cutoff)
    if not close:
        return ""
    return f" (did you mean {', '.join(close[:-1]) + ' or ' if len(close) > 1 else ''}{close[-1]}?)"


class AgreedError(RefsgdError):
    """A user error every rank raises at the same point, after agreeing on it (e.g. through a
    collective): the ranks stop together, rank 0 prints the message, the exit code is 2."""

    collective = True


class RankFailure(Exception):
    """A failure on this rank alone (e.g. an exception in a method's communication thread), while
    the other ranks may be blocked in a collective: the command line prints its message once, on
    this rank, and aborts every rank (``MPI.COMM_WORLD.Abort``) with exit code 1."""


class Stopped(Exception):
    """The run stops on a signal (SIGINT 130, SIGTERM 143): ``code`` is the exit code. With
    ``collective = True`` every rank stops at the same iteration boundary (agreed on); ``saved``
    lists what was written for the iterations done (a checkpoint, the metrics, the trace)."""

    def __init__(self, code, message, collective=False, saved=()):
        super().__init__(message)
        self.code = code
        self.message = message
        self.collective = collective
        self.saved = list(saved)

    def __str__(self):
        if not self.collective:
            return self.message
        if not self.saved:
            return f"{self.message} (no --checkpoint, --out or --trace: nothing saved)"
        return f"{self.message}; " + "; ".join(self.saved)


def train(algo="ssgd", **options):
    """Train with a distributed method from Python, as ``refsgd train`` does (the command line
    calls it); run it on every rank (``mpiexec -n N python script.py``)::

        import refsgd
        r = refsgd.train("laga-sgdm", model="digits_mlp", epochs=2, tau=2, out="laga.h5")
        r.model      # the final model (flat weights), on every rank
        r.evals      # the evaluations: iteration, epoch, train_loss, test_loss, test_acc, seconds
        r.metrics    # {field: (ranks, iterations) array} on rank 0 (None elsewhere)

    Every keyword is an option of ``refsgd train`` with ``-`` written ``_`` (``weight_decay=1e-4``,
    ``force=True``); ``refsgd train --help`` lists them. Each Python value is checked against its
    option's type and range (refsgd.options; ``epochs=0: expected a positive integer``, an unknown
    keyword gets a did-you-mean); the checks that need the method, model or data follow with the
    command line's messages, which name the flags (``--force`` is ``force=True``). Besides: ``comm``, the
    communicator whose ranks are the workers (default ``MPI.COMM_WORLD``); ``log``, a function
    receiving rank 0's lines (default print; None: silent); ``progress`` (default False).
    A bad input raises the same :class:`AgreedError` on every rank. Imported lazily:
    ``import refsgd`` starts no MPI. Returns a :class:`refsgd.api.Result`.
    """
    from refsgd.api import train as _train
    return _train(algo, **options)
