"""``refsgd golden``: a golden trajectory from a method's serial rendering (no MPI)."""

import dataclasses
import os

import numpy as np

from refsgd.errors import RefsgdError
from refsgd.cli import cmdoptions
from refsgd.cli.cmdoptions import positive_int
from refsgd.options import config
from refsgd.registry import METHODS, method


def add(sub):
    p = sub.add_parser("golden", help="write a golden trajectory from a method's serial rendering",
                       description="Run the serial rendering of a method (N workers in one process, "
                                   "no MPI, written from the paper's equations) for T steps and write "
                                   "its trace: the golden reference other implementations replay and "
                                   "verify against (implementers.md, installed with refsgd: "
                                   "`refsgd train --list` prints where).")
    groups = {}
    cmdoptions.add(p, "algo", help="the method (default ssgd)")
    p.add_argument("--workers", type=positive_int,
                   help="number of workers N (the MPI world size it stands for; dcasgd: server + N-1 workers)")
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
    from refsgd import api, datasets, trace  # noqa: PLC0415 start-up
    from refsgd.nn import load_model  # noqa: PLC0415 start-up
    from refsgd.serial import rendering  # noqa: PLC0415 mpi4py

    m = method(args.algo)
    workers, steps, out_path, force = args.workers, args.steps, args.out, args.force
    # the Namespace stops here; --out and --force are the golden file's, not a run's
    given = cmdoptions.config_of(args, leave=("out", "force"))
    if "ps_order" in m.options:  # the serial rendering serves the workers in turn
        if given.ps_order not in (None, "round-robin"):
            raise RefsgdError(f"the serial rendering of {m.name} serves the workers round-robin (1, 2, ..., N-1 in "
                              "every round): --ps-order arrival has no serial rendering")
        given = dataclasses.replace(given, ps_order="round-robin")
    if given.allreduce == "mpi":
        raise RefsgdError("the serial renderings sum over workers in the Ring-AllReduce's order: refsgd golden "
                          "takes --allreduce ring (its default); a trace of --allreduce mpi verifies against it "
                          "within round-off")
    if "allreduce" in m.options:
        given = dataclasses.replace(given, allreduce="ring")
    cfg = api.method(given, workers)
    dtype = np.dtype(cfg.dtype)
    net = load_model(cfg.model, dtype=dtype)
    data = datasets.load(cfg.data, dtype=dtype)
    datasets.check_fits(data, net.input_shape, net.num_classes, model=net.name)
    schedule = api.parse_schedule(cfg.schedule, cfg.lr, m.iterations_per_epoch(cfg, len(data.y_train), workers - m.servers))
    from refsgd.files import check_distinct, check_output  # noqa: PLC0415 start-up
    check_distinct([("--data", cfg.data), ("--model", cfg.model if os.path.isfile(cfg.model) else None)],
                   [("--out", out_path)])
    check_output(out_path, "--out", force)
    out = rendering(cfg.algo)(net, data, dataclasses.replace(cfg, tau=m.micro_batches_of(cfg)), schedule, workers,
                              steps)
    trace.check_finite(out, f"the serial rendering of {cfg.algo}")
    trace.write(out_path, method=cfg.algo, source="serial", net=net, data=data,
                config=config(cfg, run=False, extra=dict(workers=workers, steps=steps)), **out)
    print(f"golden trace of {cfg.algo}: {workers} workers x {steps} steps of {net.name} "
          f"({net.num_params:,d} parameters, {dtype.name}) written to {out_path}; final mean loss "
          f"{np.nanmean(out['loss'][-1]):.6f}")  # nan: a server computes no gradient
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
