"""One file per paper (and per baseline family); each ``train(run)`` is its listing.

``ALGORITHMS`` maps the ``--algo`` name to (train function, paper and listing); ``check`` runs a
method's own option checks and ``servers`` says how many ranks are parameter servers.
"""

from refsgd import RefsgdError
from refsgd.algorithms import daso, dcasgd, dcs3gd, laga, pipesgd, ppasgd
from refsgd.algorithms.laga import ALGORITHMS as _LAGA
from refsgd.algorithms.ssgd import ALGORITHMS as _SSGD

ALGORITHMS = dict(_SSGD)
ALGORITHMS["dcs3gd"] = (dcs3gd.train, "DC-S3GD, Rigazzi 2019 Algorithm 1 (eq. 7-12, 17); docs/algorithms.md, section DC-S3GD")
ALGORITHMS["dcasgd"] = (dcasgd.train, "DC-ASGD, Zheng et al. 2017, parameter server on rank 0 "
                                      "(the baseline of Rigazzi 2019); docs/algorithms.md, section DC-S3GD")
ALGORITHMS.update(_LAGA)
ALGORITHMS.update(pipesgd.ALGORITHMS)
ALGORITHMS.update(daso.ALGORITHMS)
ALGORITHMS.update(ppasgd.ALGORITHMS)

#: methods whose blocking all-reduce of gradients can carry a compressed wire format (--compress)
COMPRESSIBLE = ("ssgd", "ssgd-nag", "pipe-sgd", "d-sync")

#: options that belong to some methods only: option -> (methods, how the flag is spelled)
_ONLY = {"dependency": (("pipe-sgd",), "--dependency"),
         "warmup_epochs": (("pipe-sgd", "daso"), "--warmup-epochs"),
         "cooldown_epochs": (("daso",), "--cooldown-epochs"),
         "sync_every": (("daso",), "--sync-every"),
         "plateau_patience": (("daso",), "--plateau-patience"),
         "plateau_threshold": (("daso",), "--plateau-threshold"),
         "ranks_per_node": (("daso",), "--ranks-per-node"),
         "local_link": (("daso",), "--local-link"),
         "threads": (("pp-asgd", "asgd"), "--threads"),
         "staleness": (("pp-asgd", "asgd"), "--staleness")}


def check(name, args, world):
    """Method-specific validation of the options (every rank, before the first collective)."""
    module = {"dcs3gd": dcs3gd, "dcasgd": dcasgd, "laga-sgd": laga, "laga-sgdm": laga, "laga-sgdn": laga,
              "pipe-sgd": pipesgd, "d-sync": pipesgd, "ps-sync": pipesgd, "daso": daso,
              "pp-asgd": ppasgd, "asgd": ppasgd}.get(name)
    if name not in COMPRESSIBLE and getattr(args, "compress", "none") not in (None, "none"):
        extra = " (its blocking global syncs carry bf16, its cycling syncs float32, by the method)" \
            if name == "daso" else ""
        raise RefsgdError(f"--compress applies to the gradient all-reduce of {', '.join(COMPRESSIBLE)}, "
                          f"not to {name}{extra}")
    for key, (methods, flag) in _ONLY.items():
        if name not in methods and getattr(args, key, None) is not None:
            raise RefsgdError(f"{flag} applies to --algo {' and '.join(methods)} only, not {name}")
    if module is not None:
        module.check(args, world)


def micro_batches(args):
    """Micro-batches of one iteration per worker: --tau, or PP-ASGD's G threads' sub-batches."""
    if args.algo in ("pp-asgd", "asgd"):
        return getattr(args, "threads", None) or ppasgd.DEFAULT_THREADS
    return args.tau


def servers(name):
    """How many leading ranks are servers without data (0 for the decentralised methods)."""
    return 1 if name in ("dcasgd", "ps-sync") else 0
