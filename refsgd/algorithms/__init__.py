"""One file per paper (and per baseline family); each ``train(run)`` is its listing.

What is known about each method (its paper and listing, its entry point, its servers ...) is its
entry in :mod:`refsgd.registry`; here, the method's own checks of its options, found in the
module of its ``train``: ``check(cfg, world)`` (what only an MPI run can check; the options' own
checks are refsgd.options.checks) and ``check_sizes(cfg, net, total)`` where it has them.
"""

import importlib

from refsgd import registry
from refsgd.nn.network import model_copies
from refsgd.options import checks


def train_of(name):
    """The ``train(run)`` function of method ``name``."""
    return registry.entry(registry.method(name).train)


def _module(name):
    return importlib.import_module(registry.method(name).train.partition(":")[0])


def warm_of(name):
    """The warm-up of method ``name``'s own kernels, ``warm(dtype)`` of its module (None where it
    has none): the Run calls it before its clock starts, with refsgd.optim.warm."""
    return getattr(_module(name), "warm", None)


def check(name, cfg, world):
    """Every check of method ``name``'s options before the first collective: its own
    (refsgd.options.checks, MPI-free, as refsgd golden does them) and :func:`check_mpi`."""
    checks.check(cfg, world)
    check_mpi(name, cfg, world)


def check_mpi(name, cfg, world):
    """What only an MPI run can check of method ``name`` (every rank, before the first collective;
    the MPI library's thread level): the ``check`` of its module, where it has one."""
    own = getattr(_module(name), "check", None)
    if own is not None:
        own(cfg, world)


def check_sizes(name, cfg, net, total):
    """The options whose buffers are K copies of the model (pipe-sgd's --dependency, pp-asgd's
    --staleness and --threads): refused when they exceed what the run of ``total`` iterations can
    use (None: not known before the run), or the memory this machine has (every rank, before
    anything is allocated)."""
    own = getattr(_module(name), "check_sizes", None)
    if own is not None:
        own(cfg, net, total)
    if cfg.trace and total:  # every state array of every iteration, kept until the end
        model_copies(total, net, f"--trace of {total} iterations keeps at least one state array per iteration")
