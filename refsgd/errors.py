"""The errors of refsgd and how an MPI command stops on each (see :mod:`refsgd.failure`), and the
"did you mean" of their messages. Below every other module, which imports them from here; the
package re-exports them (``refsgd.RefsgdError``)."""

import difflib


class RefsgdError(Exception):
    """An error caused by the user's input (a flag, a file, a spec).

    The command line prints its message alone (no traceback) and exits with code 2. Raised on
    one rank, it ends every rank (see :mod:`refsgd.failure`); ``collective = True`` marks an
    error that every rank raises at the same point (agreed on), which stops the ranks together.
    ``quiet = True``: this process says nothing (another process of the launch prints the line).
    """

    collective = False
    quiet = False


def did_you_mean(word, names, cutoff=0.6):
    """" (did you mean a, b or c?)": the few names that ``word`` begins (``laga``: the three LAGA
    variants), else the one closest to it (difflib, similarity >= ``cutoff``), else ""."""
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
    this rank, and aborts every rank (``MPI.COMM_WORLD.Abort``) with exit code 4
    (failure.EXIT_RANK)."""


class Stopped(BaseException):
    """The run stops on a signal (SIGINT 130, SIGTERM 143): ``code`` is the exit code. A
    BaseException, as KeyboardInterrupt, so that no ``except Exception`` (a loader's "not a batch
    file", a backend's own error) takes a stop for a failure and carries on. With
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
