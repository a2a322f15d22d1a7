"""``refsgd golden``: a golden trajectory from a method's serial rendering (no MPI)."""

import os

import numpy as np

from refsgd.errors import RefsgdError
from refsgd.cli import cmdoptions
from refsgd.cli.cmdoptions import positive_int
from refsgd.registry import METHODS


def add(sub):
    p = sub.add_parser("golden", help="write a golden trajectory from a method's serial rendering",
                       description="Run the serial rendering of a method (N workers in one process, "
                                   "no MPI, written from the paper's equations) for T steps and write "
                                   "its trace: the golden reference other implementations replay and "
                                   "verify against (implementers.md, installed with refsgd: "
                                   "`refsgd train --list` prints where).")
    groups = {}
    cmdoptions.add(p, "algo", help="the method (default %(default)s)")
    p.add_argument("--workers", type=positive_int,
                   help="number of workers N (the MPI world size it stands for; "
                        f"{', '.join(m.name for m in METHODS.values() if m.servers)}: server + N-1 workers)")
    p.add_argument("--steps", type=positive_int, help="number of steps T")
    cmdoptions.add_method_options(p, "float64", groups)
    p.add_argument("--out", metavar="F.h5", help="the golden file (written atomically)")
    p.add_argument("--force", action="store_true", help="replace an existing --out file")
    p.add_argument("--regenerate", metavar="DIR",
                   help="write every golden file of refsgd's methods (refsgd.registry: tests/golden) into DIR, "
                        "replacing those there; no other option but --only")
    p.add_argument("--only", metavar="NAME,...", help="with --regenerate: only the golden files of these methods")


def run(args, parser):
    if args.regenerate is not None:
        return regenerate(args, parser)
    if args.only is not None:
        parser.error("--only goes with --regenerate")
    missing = [flag for flag, v in (("--workers", args.workers), ("--steps", args.steps), ("--out", args.out))
               if v is None]
    if missing:
        parser.error(f"the following arguments are required: {', '.join(missing)}")
    # here, not above: they load NumPy, Numba and h5py, which `refsgd --help` does without
    from refsgd import golden  # noqa: PLC0415 start-up: NumPy, Numba and h5py
    # the Namespace stops here; --out and --force are the golden file's, not a run's
    given = cmdoptions.config_of(args, leave=("out", "force"))
    g = golden.render(given, args.workers, args.steps, args.out, args.force)
    print(f"golden trace of {g.cfg.algo}: {args.workers} workers x {args.steps} steps of {g.net.name} "
          f"({g.net.num_params:,d} parameters, {g.net.dtype.name}) written to {args.out}; final mean loss "
          f"{np.nanmean(g.fields['loss'][-1]):.6f}")  # nan: a server computes no gradient
    return 0


def regenerate(args, parser):
    """``--regenerate DIR``: every Golden of every method of the registry, as its own command."""
    given = [a for a in parser.parse_args(["golden", "--regenerate", args.regenerate]).__dict__.items()
             if a[1] != vars(args)[a[0]] and a[0] != "only"]
    if given:
        raise RefsgdError(f"--regenerate takes no other option (given: {', '.join('--' + k for k, _ in given)})")
    if not os.path.isdir(args.regenerate):
        raise RefsgdError(f"--regenerate {args.regenerate}: not a folder")
    only = args.only.split(",") if args.only else list(METHODS)
    unknown = [name for name in only if name not in METHODS]
    if unknown:
        raise RefsgdError(f"--only: unknown method {unknown[0]!r}; the methods: {', '.join(METHODS)}")
    for m in (METHODS[name] for name in only):
        for g in m.goldens:
            run(parser.parse_args(["golden", *g.argv(m.name), "--out", os.path.join(args.regenerate, g.file),
                                   "--force"]), parser)
    return 0
