"""refsgd: reference implementations of distributed SGD methods (MPI, NumPy, Numba)."""

from refsgd.errors import AgreedError, RankFailure, RefsgdError, Stopped, did_you_mean  # noqa: F401
from refsgd.version import __version__  # noqa: F401


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
    from refsgd.api import train as _train  # noqa: PLC0415 start-up: `import refsgd` (and the command's signal handlers, refsgd.entry) before NumPy
    return _train(algo, **options)
