"""One file per paper (and per baseline family); each ``train(run)`` is its listing.

``ALGORITHMS`` maps the ``--algo`` name to (train function, paper and listing); ``check`` runs a
method's own option checks and ``servers`` says how many ranks are parameter servers.
"""

from refsgd import RefsgdError
from refsgd.algorithms import dcasgd, dcs3gd, laga, pipesgd
from refsgd.algorithms.laga import ALGORITHMS as _LAGA
from refsgd.algorithms.ssgd import ALGORITHMS as _SSGD

ALGORITHMS = dict(_SSGD)
ALGORITHMS["dcs3gd"] = (dcs3gd.train, "DC-S3GD, Rigazzi 2019 Algorithm 1 (eq. 7-12, 17); docs/algorithms.md, section DC-S3GD")
ALGORITHMS["dcasgd"] = (dcasgd.train, "DC-ASGD, Zheng et al. 2017, parameter server on rank 0 "
                                      "(the baseline of Rigazzi 2019); docs/algorithms.md, section DC-S3GD")
ALGORITHMS.update(_LAGA)
ALGORITHMS.update(pipesgd.ALGORITHMS)

#: methods whose all-reduce of gradients can carry a compressed wire format (--compress)
COMPRESSIBLE = ("pipe-sgd", "d-sync")


def check(name, args, world):
    """Method-specific validation of the options (every rank, before the first collective)."""
    module = {"dcs3gd": dcs3gd, "dcasgd": dcasgd, "laga-sgd": laga, "laga-sgdm": laga, "laga-sgdn": laga,
              "pipe-sgd": pipesgd, "d-sync": pipesgd, "ps-sync": pipesgd}.get(name)
    if module is not pipesgd and getattr(args, "compress", "none") != "none":
        raise RefsgdError(f"--compress applies to the gradient all-reduce of {', '.join(COMPRESSIBLE)}, "
                          f"not to {name}")
    if name != "pipe-sgd" and (getattr(args, "dependency", None) is not None
                               or getattr(args, "warmup_epochs", None) is not None):
        raise RefsgdError(f"--dependency and --warmup-epochs apply to --algo pipe-sgd only, not {name}")
    if module is not None:
        module.check(args, world)


def servers(name):
    """How many leading ranks are servers without data (0 for the decentralised methods)."""
    return 1 if name in ("dcasgd", "ps-sync") else 0
