"""``refsgd golden``: a golden trajectory from a method's serial rendering (no MPI)."""

import numpy as np

from refsgd.cli import cmdoptions
from refsgd.cli.cmdoptions import positive_int


def add(sub):
    p = sub.add_parser("golden", help="write a golden trajectory from a method's serial rendering",
                       description="Run the serial rendering of a method (N workers in one process, "
                                   "no MPI, written from the paper's equations) for T steps and write "
                                   "its trace: the golden reference other implementations replay and "
                                   "verify against (implementers.md, installed with refsgd: "
                                   "`refsgd train --list` prints where).")
    groups = {}
    cmdoptions.add(p, "algo", help="the method (default ssgd)")
    p.add_argument("--workers", type=positive_int, required=True,
                   help="number of workers N (the MPI world size it stands for; dcasgd: server + N-1 workers)")
    p.add_argument("--steps", type=positive_int, required=True, help="number of steps T")
    cmdoptions.add_method_options(p, "float64", groups)
    p.add_argument("--out", required=True, metavar="F.h5", help="the golden file (written atomically)")
    p.add_argument("--force", action="store_true", help="replace an existing --out file")


def run(args, parser):
    # here, not above: they load NumPy, Numba and h5py, which `refsgd --help` does without
    from refsgd import golden
    # the Namespace stops here; --out and --force are the golden file's, not a run's
    given = cmdoptions.config_of(args, leave=("out", "force"))
    g = golden.render(given, args.workers, args.steps, args.out, args.force)
    print(f"golden trace of {g.cfg.algo}: {args.workers} workers x {args.steps} steps of {g.net.name} "
          f"({g.net.num_params:,d} parameters, {g.net.dtype.name}) written to {args.out}; final mean loss "
          f"{np.nanmean(g.fields['loss'][-1]):.6f}")  # nan: a server computes no gradient
    return 0
