"""Each method's own checks of its options (Method.check in refsgd.registry), MPI-free, so that
``refsgd golden`` (the serial renderings, no MPI) and ``refsgd train`` (every rank, before the
first collective) refuse the same configurations. What only an MPI run can check (the MPI
library's thread level) is the ``check`` of the method's module in refsgd.algorithms.

Each ``check(cfg, world)`` takes the resolved options and the world size (servers included);
:func:`check` calls the one of ``cfg.algo``, after refsgd.options.resolve has refused the options
that do not apply to the method.
"""

from refsgd import registry
from refsgd.errors import RefsgdError


def check(cfg, world):
    """The checks of method ``cfg.algo`` (none where its Method.check is None)."""
    m = registry.method(cfg.algo)
    if m.check is not None:
        registry.entry(m.check)(cfg, world)


def daso(cfg, world):
    if cfg.tau != 1:
        raise RefsgdError("--algo daso takes one batch per iteration (--tau 1): L1 is one forward/backward pass")
    G = cfg.ranks_per_node
    if G is not None and world % G:
        raise RefsgdError(f"--ranks-per-node {G} does not divide the {world} ranks into equal nodes")
    if not 0 <= cfg.plateau_threshold < 1:
        raise RefsgdError(f"--plateau-threshold must be in [0, 1), got {cfg.plateau_threshold}")


def dcasgd(cfg, world):
    if world < 2:
        raise RefsgdError("dcasgd needs a server and at least one worker: run it with mpiexec -n 2 or more")
    if cfg.tau != 1:
        raise RefsgdError("dcasgd pushes one micro-batch's gradient per iteration (--tau 1)")
    if cfg.momentum or cfg.nesterov:
        raise RefsgdError("dcasgd's update has no momentum (--momentum 0)")
    decay = cfg.dc_ms_decay
    if not 0 <= decay < 1:
        raise RefsgdError(f"--dc-ms-decay is the decay m of MeanSquare and must be in [0, 1), got {decay:g}")


def dcs3gd(cfg, world):
    if cfg.tau != 1:
        raise RefsgdError("dcs3gd takes one micro-batch per iteration (--tau 1): the paper does not accumulate")
    if cfg.nesterov:
        raise RefsgdError("dcs3gd uses momentum SGD in MXNet's form; --nesterov does not apply")


def local_sgd(cfg, world):
    if cfg.tau != 1:
        raise RefsgdError("--algo local-sgd takes one mini-batch per local step (--tau 1): L2 is one "
                          "forward/backward pass")


def pipe_sgd(cfg, world):
    """pipe-sgd, d-sync and ps-sync."""
    algo = cfg.algo
    if cfg.tau != 1:
        raise RefsgdError(f"--algo {algo} takes one batch per iteration (--tau 1), as the paper's listing")
    if algo == "ps-sync":
        if world < 2:
            raise RefsgdError("ps-sync needs a server and at least one worker: run it with mpiexec -n 2 or more")
        if cfg.compress != "none":
            raise RefsgdError("--compress applies to the all-reduce of pipe-sgd and d-sync; ps-sync sends "
                              "uncompressed gradients, as in the paper")


def pp_asgd(cfg, world):
    """pp-asgd and asgd."""
    if cfg.tau != 1:
        raise RefsgdError(f"--algo {cfg.algo}: each gradient thread takes sub-batches of --batch samples; "
                          "--tau does not apply (use --threads)")
