"""One file per paper (and per baseline family); each ``train(run)`` is its listing.

``ALGORITHMS`` maps the ``--algo`` name to (train function, paper and listing); ``check`` runs a
method's own option checks and ``servers`` says how many ranks are parameter servers.
"""

from refsgd.algorithms import daso, dcasgd, dcs3gd, pipesgd, ppasgd
from refsgd.algorithms.laga import ALGORITHMS as _LAGA
from refsgd.algorithms.ssgd import ALGORITHMS as _SSGD
from refsgd.nn.network import model_copies
from refsgd.options import APPLIES, value

ALGORITHMS = dict(_SSGD)
ALGORITHMS["dcs3gd"] = (dcs3gd.train, "DC-S3GD, Rigazzi 2019 Algorithm 1 (eq. 7-12, 17); algorithms.md, section 'DC-S3GD and DC-ASGD'")
ALGORITHMS["dcasgd"] = (dcasgd.train, "DC-ASGD, Zheng et al. 2017, parameter server on rank 0 "
                                      "(the baseline of Rigazzi 2019); algorithms.md, section 'DC-S3GD and DC-ASGD'")
ALGORITHMS.update(_LAGA)
ALGORITHMS.update(pipesgd.ALGORITHMS)
ALGORITHMS.update(daso.ALGORITHMS)
ALGORITHMS.update(ppasgd.ALGORITHMS)

#: methods whose blocking all-reduce of gradients can carry a compressed wire format (--compress)
COMPRESSIBLE = tuple(name for name, keys in APPLIES.items() if "compress" in keys)


def check(name, args, world):
    """Method-specific validation of the options (every rank, before the first collective), after
    refsgd.options.resolve has refused the options that do not apply to the method."""
    module = {"dcs3gd": dcs3gd, "dcasgd": dcasgd, "pipe-sgd": pipesgd, "d-sync": pipesgd, "ps-sync": pipesgd,
              "daso": daso, "pp-asgd": ppasgd, "asgd": ppasgd}.get(name)
    if module is not None:
        module.check(args, world)


def check_sizes(name, args, net, total):
    """The options whose buffers are K copies of the model (pipe-sgd's --dependency, pp-asgd's
    --staleness and --threads): refused when they exceed what the run of ``total`` iterations can
    use (None: not known before the run), or the memory this machine has (every rank, before
    anything is allocated)."""
    module = {"pipe-sgd": pipesgd, "pp-asgd": ppasgd, "asgd": ppasgd}.get(name)
    if module is not None:
        module.check_sizes(args, net, total)
    if getattr(args, "trace", None) and total:  # every state array of every iteration, kept until the end
        model_copies(total, net, f"--trace of {total} iterations keeps at least one state array per iteration")


def micro_batches(args):
    """Micro-batches of one iteration per worker: --tau, or PP-ASGD's G threads' sub-batches."""
    if args.algo in ("pp-asgd", "asgd"):
        return value(args, "threads")
    return args.tau


def by_gradients(args):
    """Whether the method's iterations consume however many gradients have arrived (PP-ASGD and
    ASGD with free-running gradient threads): --epochs then counts gradients, not iterations."""
    return args.algo in ("pp-asgd", "asgd") and value(args, "staleness") is None


def servers(name):
    """How many leading ranks are servers without data (0 for the decentralised methods)."""
    return 1 if name in ("dcasgd", "ps-sync") else 0
