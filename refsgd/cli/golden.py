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
    cmdoptions.add(p, "out", metavar="F.h5", help="the golden file (written atomically)")
    cmdoptions.add(p, "force", help="replace an existing --out file")
    cmdoptions.deprecated(p, "--regenerate", "refsgd golden regenerate DIR", "regenerate")
    cmdoptions.deprecated(p, "--only", "refsgd golden regenerate DIR --algo NAME,...", "only")
    gsub = p.add_subparsers(dest="golden_command", metavar="regenerate")
    r = gsub.add_parser("regenerate", help="write every golden file of refsgd's methods into DIR",
                        description="Write every golden file of refsgd's methods (refsgd.registry: tests/golden) "
                                    "into DIR, replacing those there, each as its own `refsgd golden` command. "
                                    "No option of `refsgd golden` itself.")
    r.add_argument("dir", metavar="DIR", help="the folder (it exists)")
    cmdoptions.add_algos(r, help="only the golden files of these methods (default: every method's)")


def run(args, parser):
    if args.golden_command == "regenerate":
        return regenerate(args, parser)
    if getattr(args, "regenerate", None) is not None:  # the spelling of the release before
        defaults = vars(parser.parse_args(["golden"]))
        given = [k for k, v in vars(args).items() if k not in ("regenerate", "only") and v != defaults.get(k)]
        if given:
            raise RefsgdError(f"--regenerate takes no other option (given: {', '.join('--' + k for k in given)})")
        only = getattr(args, "only", None)
        return regenerate(parser.parse_args(["golden", "regenerate", args.regenerate, *(["--algo", only] if only else [])]),
                          parser)
    if getattr(args, "only", None) is not None:
        parser.error("--only goes with --regenerate (write `refsgd golden regenerate DIR --algo NAME,...`)")
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
    """``golden regenerate DIR [--algo NAME,...]``: every Golden of every method of the registry
    (or of those named), each as its own command."""
    defaults = vars(parser.parse_args(["golden", "regenerate", args.dir]))
    given = [k for k, v in vars(args).items() if k != "algo" and v != defaults.get(k)]
    if given:
        raise RefsgdError(f"golden regenerate takes no option of golden (given: {', '.join('--' + k for k in given)})")
    if not os.path.isdir(args.dir):
        raise RefsgdError(f"golden regenerate {args.dir}: not a folder")
    only = cmdoptions.algos(args.algo, [",".join(METHODS)])
    unknown = [name for name in only if name not in METHODS]
    if unknown:
        raise RefsgdError(f"--algo: unknown method {unknown[0]!r}; the methods: {', '.join(METHODS)}")
    for m in (METHODS[name] for name in only):
        for g in m.goldens:
            run(parser.parse_args(["golden", *g.argv(m.name), "--out", os.path.join(args.dir, g.file),
                                   "--force"]), parser)
    return 0
