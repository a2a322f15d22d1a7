"""``refsgd golden``: a golden trajectory from a method's serial rendering (no MPI)."""

import dataclasses
import os

import numpy as np

from refsgd.errors import RefsgdError
from refsgd.cli import cmdoptions
from refsgd.cli.cmdoptions import positive_int
from refsgd.options import APPLIES, config


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
    # here, not above: they load h5py, the models and (the serial renderings) mpi4py, which
    # `refsgd --help` does without
    from refsgd import api, datasets, trace  # noqa: PLC0415 start-up
    from refsgd.nn import load_model  # noqa: PLC0415 start-up
    from refsgd.serial import RENDERINGS  # noqa: PLC0415 mpi4py

    if args.algo not in RENDERINGS:
        raise RefsgdError(f"no serial rendering for --algo {args.algo!r}; available: {', '.join(RENDERINGS)}")
    from refsgd.algorithms import micro_batches, servers  # noqa: PLC0415 mpi4py
    workers, steps, out_path, force = args.workers, args.steps, args.out, args.force
    # the Namespace stops here; --out and --force are the golden file's, not a run's
    given = cmdoptions.config_of(args, leave=("out", "force"))
    if given.algo == "dcasgd":  # the serial rendering serves the workers in turn
        if given.ps_order not in (None, "round-robin"):
            raise RefsgdError("the serial rendering of dcasgd serves the workers round-robin (1, 2, ..., N-1 in "
                              "every round): --ps-order arrival has no serial rendering")
        given = dataclasses.replace(given, ps_order="round-robin")
    if given.allreduce == "mpi":
        raise RefsgdError("the serial renderings sum over workers in the Ring-AllReduce's order: refsgd golden "
                          "takes --allreduce ring (its default); a trace of --allreduce mpi verifies against it "
                          "within round-off")
    if "allreduce" in APPLIES.get(given.algo, ()):
        given = dataclasses.replace(given, allreduce="ring")
    cfg = api.method(given, workers)
    dtype = np.dtype(cfg.dtype)
    net = load_model(cfg.model, dtype=dtype)
    data = datasets.load(cfg.data, dtype=dtype)
    datasets.check_fits(data, net.input_shape, net.num_classes, model=net.name)
    schedule = api.parse_schedule(cfg.schedule, cfg.lr, api.per_epoch(cfg, data, workers - servers(cfg.algo)))
    from refsgd.files import check_distinct, check_output  # noqa: PLC0415 start-up
    check_distinct([("--data", cfg.data), ("--model", cfg.model if os.path.isfile(cfg.model) else None)],
                   [("--out", out_path)])
    check_output(out_path, "--out", force)
    out = RENDERINGS[cfg.algo](net, data, dataclasses.replace(cfg, tau=micro_batches(cfg)), schedule, workers, steps)
    trace.check_finite(out, f"the serial rendering of {cfg.algo}")
    trace.write(out_path, method=cfg.algo, source="serial", net=net, data=data,
                config=config(cfg, run=False, extra=dict(workers=workers, steps=steps)), **out)
    print(f"golden trace of {cfg.algo}: {workers} workers x {steps} steps of {net.name} "
          f"({net.num_params:,d} parameters, {dtype.name}) written to {out_path}; final mean loss "
          f"{np.nanmean(out['loss'][-1]):.6f}")  # nan: a server computes no gradient
    return 0

