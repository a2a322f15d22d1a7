"""``refsgd bench step | overlap | codec | scale | all``: measured speed (refsgd.bench)."""

import json

import numpy as np

from refsgd import busy, failure, options
from refsgd.errors import RefsgdError
from refsgd.cli import cmdoptions
from refsgd.cli.cmdoptions import nonneg_float, nonneg_int, positive_int
from refsgd.comm.link import Link
from refsgd.registry import METHODS

#: bench overlap's methods without --algo
OVERLAP_ALGOS = "ssgd,ssgd-opt,dcs3gd,laga-sgd"


def add(sub):
    p = sub.add_parser("bench", help="measure speed: the network step against PyTorch, the methods against "
                                     "their timing models, predictions at scale, the whole table")
    bsub = p.add_subparsers(dest="bench_command", metavar="WHAT")
    s = bsub.add_parser("step", help="forward+backward time of a model against PyTorch on the same CPU",
                        description="Median time of one loss_and_grad of MODEL at BATCH, the same "
                                    "network in PyTorch if installed (same CPU, torch's default "
                                    "threads), timed in turn with it (A B A B ...), and the median of "
                                    "the pairs' ratios with their quartiles and range; the load average "
                                    "before and after.")
    cmdoptions.add(s, "model", default="mnist_mlp", help="model name or spec path (default mnist_mlp)")
    cmdoptions.add(s, "batch", default=100, help="batch size (default 100)")
    cmdoptions.add(s, "dtype", help=None)
    s.add_argument("--repeat", type=positive_int, default=20, help="timed repetitions (default 20)")
    s.add_argument("--no-torch", action="store_true", help="do not time PyTorch even if installed")
    o = bsub.add_parser("overlap", help="each method's iteration time against its paper's timing model (mpiexec)",
                        description="Under `mpiexec -n P`: measure t_C (one micro-batch's forward+backward, "
                                    "ssgd without a link), the real all-reduce and each method's update, "
                                    "and T_comm (a blocking all-reduce of the gradient through the link), "
                                    "then run each method and print its iteration time split into compute, "
                                    "idle and other, next to its timing model (the formulas and their "
                                    "papers: `python -c 'import refsgd.bench; help(refsgd.bench)'`). "
                                    "Without --link or --ratio the network is the real one (on a cluster, "
                                    "the real overlap); with them an emulated link, and the output says so. "
                                    "Random inputs of the model's shape unless --data is given (timing does "
                                    "not depend on values). Run with one BLAS thread per rank.")
    cmdoptions.add(o, "model", default="mnist_mlp", help="model name or spec path (default mnist_mlp)")
    cmdoptions.add(o, "data", default=None, help="dataset HDF5 file (default: random inputs)")
    cmdoptions.add(o, "batch", default=64, help="micro-batch per worker (default 64)")
    cmdoptions.add(o, "tau", default=1, help="micro-batches per iteration (default 1)")
    cmdoptions.add(o, "iterations", default=60, help="iterations per method (default 60)")
    o.add_argument("--skip", type=int, default=10,
                   help="first iterations left out of the means (default 10; the last is left out too)")
    cmdoptions.add_algos(o, help="the methods, run as train runs them (--poll on), each optionally "
                         "with +nopoll for --no-poll (e.g. NAME+nopoll; +poll is accepted) and +CODEC for "
                         "--compress CODEC (the methods that take it: "
                         f"{', '.join(m.name for m in METHODS.values() if 'compress' in m.options)}): "
                         f"{', '.join(m.name for m in METHODS.values() if m.timing_model)} (Pipe-SGD with K = 2, "
                         "DASO cycling from the first batch); default: the synchronous baseline, its "
                         "overlapped twin and two of the papers' overlapping methods")
    cmdoptions.deprecated(o, "--algos", "--algo", "algo", append=True)
    cmdoptions.add(o, "link", default=None, help="emulated link (see train --help)")
    o.add_argument("--ratio", default=None, metavar="R[,R...]",
                   help="emulated links whose all-reduce of the gradient takes R x t_C, one run of every "
                        "method per R (0: no link, the real network)")
    o.add_argument("--latency-us", type=nonneg_float, default=50.0, help="latency of the --ratio link (default 50; lowered to a quarter of the all-reduce time where it would take half of it or more)")
    cmdoptions.add(o, "ranks_per_node", default=None,
                   help="DASO's virtual nodes of G consecutive ranks (default: the ranks that share memory)")
    cmdoptions.add(o, "local_link", default=None,
                   help="DASO's emulated link within a node (default: the real one)")
    cmdoptions.add(o, "sync_every", default=None,
                   help="DASO's batches between global syncs, B (default 4; W = max(1, B/4))")
    o.add_argument("--timeline-cost", type=nonneg_int, default=0, metavar="PAIRS",
                   help="also time each method with train --timeline recording every timed iteration: PAIRS runs "
                        "without and with it, alternating, and print the iteration times (medians) and the cost")
    cmdoptions.add(o, "lr", default=0.001, help="learning rate of the timed runs (default 0.001)")
    cmdoptions.add(o, "seed", help=None)
    cmdoptions.add(o, "dtype", help=None)
    o.add_argument("--codecs", action="store_true",
                   help="also time each codec (encode, decode, compressed all-reduce) in this world")
    o.add_argument("--codec-repeat", type=positive_int, default=20, help="timed calls per codec operation")
    o.add_argument("--json", default=None, metavar="F.json", help="also write the results as JSON (rank 0)")
    o.add_argument("--force", action="store_true", help="replace an existing --json file")
    r = bsub.add_parser("codec", help="the ring all-reduce against MPI's (mpiexec): uncompressed and per codec",
                        description="Under `mpiexec -n P`: the uncompressed Ring-AllReduce of --allreduce ring "
                                    "against MPI_Allreduce with MPI_SUM (--allreduce mpi), then per codec the "
                                    "compressed Ring-AllReduce refsgd "
                                    "uses (MPI Sendrecv, the same bits under any MPI library) against the same "
                                    "reduction as an MPI user-defined operator (the library's order), with "
                                    "encode and decode; the median of the slowest rank.")
    r.add_argument("--values", type=positive_int, default=4810,
                   help="float32 values per all-reduce (default 4810, digits_mlp's parameters)")
    r.add_argument("--repeat", type=positive_int, default=50, help="timed all-reduces per codec (default 50)")
    c = bsub.add_parser("scale", help="predicted iteration time and speed-up over SSGD at 8 to 4096 ranks",
                        description="From t_C (measured here at one thread, or --t-c) and a modelled link, "
                                    "each method's iteration time and speed-up over SSGD (samples/s) at "
                                    "each world size, by the papers' timing models: Ring-AllReduce (Pipe-SGD "
                                    "eq. 5) for the flat methods, two tiers for DASO, a parameter server for "
                                    "DC-ASGD and PS-Sync (`python -c 'import refsgd.bench; "
                                    "help(refsgd.bench)'`). --check runs the methods with the same link "
                                    "EMULATED at 2 and 4 ranks, those with a core each here (it launches mpiexec), "
                                    "and prints measured / "
                                    "predicted. Run it without mpiexec.")
    cmdoptions.add(c, "model", default="mnist_mlp", help="model name or spec path (default mnist_mlp)")
    cmdoptions.add(c, "batch", default=64, help="batch per worker (default 64)")
    cmdoptions.add(c, "dtype", help=None)
    cmdoptions.add(c, "link", default="50,10", metavar="LATENCY_US,GBIT_S",
                   help="the link between nodes (default 50,10: 50 us, 10 Gbit/s)")
    cmdoptions.add(c, "ranks_per_node", default=4,
                   help="ranks per node, DASO's G (default 4)")
    cmdoptions.add(c, "local_link", default="5,100", metavar="LATENCY_US,GBIT_S",
                   help="the link within a node, DASO's local tier (default 5,100)")
    cmdoptions.add(c, "sync_every", default=4,
                   help="DASO's B, batches between global syncs (default 4; W = max(1, B/4))")
    c.add_argument("--t-c", type=float, default=None, metavar="SECONDS",
                   help="seconds of one forward+backward at --batch (default: measured here, one thread)")
    c.add_argument("--ranks", default=None, metavar="P,P,...",
                   help="world sizes (default 8,16,...,4096; each a multiple of --ranks-per-node)")
    c.add_argument("--plot", default=None, metavar="F.png", help="draw time and speed-up against the ranks")
    c.add_argument("--force", action="store_true", help="replace an existing --plot file")
    c.add_argument("--check", action="store_true",
                   help="compare with measured runs on an EMULATED link at 2 and 4 ranks, those that have a "
                        "core each here (launches mpiexec)")
    cmdoptions.add(c, "iterations", default=60, help="iterations per method of --check (default 60)")
    a = bsub.add_parser("all", help="the whole performance table as markdown, CSV and a figure (a few minutes)",
                        description="Step against PyTorch and the BLAS peak; each method's iteration split "
                                    "against its timing model at ratios 0.5, 1 and 2 of an EMULATED link "
                                    "(2 ranks); codec throughput; framework overhead at 1 and 2 ranks. "
                                    "Launches `mpiexec -n 1` and `-n 2` ($MPIEXEC, or the one of mpi4py's "
                                    "MPI library) with "
                                    "one BLAS/Numba thread per rank; writes DIR/bench.md, bench.csv and "
                                    "bench.png and prints the markdown. Run it without mpiexec.")
    cmdoptions.add_out_dir(a, "output folder (default ./bench)", default="bench")
    cmdoptions.deprecated(a, "--out", "--out-dir", "out_dir")
    a.add_argument("--quick", action="store_true", help="fewer iterations and repeats (about a minute)")
    a.add_argument("--force", action="store_true", help="replace existing bench.md / .csv / .png in --out-dir")


# The imports inside the functions below keep `refsgd --help` and `refsgd bench step` from
# starting MPI (mpi4py.MPI initialises it; noqa "mpi4py") and from loading the methods, h5py or
# matplotlib (noqa "start-up").


def _prepare_overlap(args, world):
    """Check every option of `bench overlap` (every rank, before the first collective); returns what
    it measures, a frozen :class:`refsgd.bench.measure.OverlapSpec` (the Namespace stops here)."""
    from refsgd import bench, datasets  # noqa: PLC0415 start-up: the benchmarks, h5py
    from refsgd.algorithms import check  # noqa: PLC0415 mpi4py
    from refsgd.nn import load_model  # noqa: PLC0415 start-up
    args.algos = cmdoptions.algos(args.algo, [OVERLAP_ALGOS])
    if not args.algos:
        raise RefsgdError("--algo names no method")
    if not 0 <= args.skip < args.iterations:
        raise RefsgdError(f"--skip {args.skip} leaves no iteration of --iterations {args.iterations} to measure")
    if args.link and args.ratio is not None:
        raise RefsgdError("give --link or --ratio, not both")
    args.link = Link.parse(args.link) if args.link is not None else None
    args.local_link = Link.parse(args.local_link, "--local-link") if args.local_link is not None else None
    args.ratios = None
    if args.ratio is not None:
        args.ratios = bench.measure.parse_ratios(args.ratio)
        if world == 1:
            raise RefsgdError("--ratio needs an all-reduce to emulate: run under mpiexec -n 2 or more")
    for name in args.algos:
        parts = bench.measure.split_method(name)
        algo = name.partition("+")[0]
        if algo not in bench.OVERLAP_MODELS or parts is None:
            lacks = METHODS[algo].lacks.get("timing_model") if algo in METHODS else None
            why = f" ({algo} has no per-iteration timing model: {lacks}; help(refsgd.bench) says more)" if lacks else ""
            raise RefsgdError(f"--algo: {name!r} is not one of {', '.join(bench.OVERLAP_MODELS)} "
                              f"(optionally with +nopoll, or +CODEC for --compress){why}")
        compress = parts[2]
        if compress != "none" and "compress" not in options.APPLIES[algo]:
            raise RefsgdError(f"--algo: {name!r}: --compress does not apply to {algo}")
        check(algo, bench.method_config(algo, batch=args.batch, tau=args.tau, iterations=args.iterations,
                                        lr=args.lr, seed=args.seed, ranks_per_node=args.ranks_per_node,
                                        local_link=bench.measure.str_link(args.local_link),
                                        sync_every=args.sync_every, dtype=args.dtype, compress=compress), world)
    if args.json:
        from refsgd.files import check_output  # noqa: PLC0415 start-up: h5py
        check_output(args.json, "--json", args.force)
    args.net = load_model(args.model, dtype=np.dtype(args.dtype))
    if args.data:
        args.dataset = datasets.load(args.data, dtype=args.net.dtype)
        datasets.check_fits(args.dataset, args.net.input_shape, args.net.num_classes, model=args.net.name)
        if len(args.dataset.y_train) < world * args.batch * args.tau:
            raise RefsgdError(f"the training set has {len(args.dataset.y_train)} samples: too few for {world} "
                              f"workers x batch {args.batch} x tau {args.tau}")
    else:
        args.dataset = bench.synthetic_data(args.net, bench.synthetic_size(args.net, world, args.batch, args.tau,
                                                                           args.iterations))
    spec = bench.measure.OverlapSpec
    values = {k: getattr(args, k) for k in spec.fields()}
    values["algos"] = tuple(values["algos"])
    values["ratios"] = tuple(values["ratios"]) if values["ratios"] is not None else None
    return spec(**values)


def run(args, parser):
    from refsgd import bench  # noqa: PLC0415 start-up
    if args.bench_command == "step":
        print(bench.format_step(bench.step(args.model, args.batch, np.dtype(args.dtype), args.repeat,
                                           use_torch=not args.no_torch)))
        return 0
    if args.bench_command == "overlap":
        from mpi4py import MPI  # noqa: PLC0415 mpi4py

        from refsgd import api  # noqa: PLC0415 start-up: NumPy, h5py
        comm = MPI.COMM_WORLD
        spec = api.on_every_rank(comm, lambda: _prepare_overlap(args, comm.Get_size()))
        result = bench.overlap(comm, spec)
        if comm.Get_rank() == 0:
            print(bench.format_overlap(result))
            if args.json:

                from refsgd.files import write_text  # noqa: PLC0415 start-up: h5py
                write_text(args.json, json.dumps(bench.overlap_json(result), indent=1), "the JSON results")
        return 0
    if args.bench_command == "codec":
        from mpi4py import MPI  # noqa: PLC0415 mpi4py

        from refsgd import api  # noqa: PLC0415 start-up: NumPy, h5py
        comm = MPI.COMM_WORLD
        api.on_every_rank(comm, lambda: None)
        rows = bench.codec_costs(comm, args.values, repeat=args.repeat)
        if comm.Get_rank() == 0:
            print(bench.format_ring(rows, comm.Get_size(), args.values))
        return 0
    if args.bench_command == "scale":
        from refsgd.bench import scale  # noqa: PLC0415 start-up
        # the Namespace stops here: the checked links and world sizes as values
        link, local_link, ranks = scale.prepare(args.model, args.dtype, args.link, args.local_link, args.t_c,
                                                args.ranks_per_node, args.ranks, args.plot, args.force)
        load_before = busy.load_average()
        inputs = scale.measure_inputs(args.model, args.batch, link, local_link, args.ranks_per_node,
                                      args.sync_every, args.t_c, np.dtype(args.dtype))
        table = scale.predict(inputs, ranks)
        print(scale.format_scale(inputs, ranks, table), flush=True)
        if args.plot:
            scale.plot(inputs, ranks, table, args.plot)
            print(f"plot written to {args.plot}")
        if args.check:
            print("", flush=True)
            rows = scale.check(inputs, iterations=args.iterations,
                               log=lambda line: print(line, flush=True))
            if rows:
                print(scale.format_check(rows, inputs))
        print(f"{busy.text(load_before, busy.load_average())}; t_C and the updates measured at one thread")
        crowded = busy.note(load_before, 1, 1)
        if crowded:
            print(f"note: {crowded}")
        return 0
    if args.bench_command == "all":
        from refsgd.bench import suite  # noqa: PLC0415 start-up
        md = suite.run_all(args.out_dir, quick=args.quick, force=args.force,
                           log=lambda line: failure.say(f"bench all: {line}"))
        print(md, end="")
        return 0
    parser.parse_args(["bench", "--help"])
    return 2

