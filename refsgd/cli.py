"""The ``refsgd`` command line: ``refsgd train | models | data | bench``.

Every user error (a bad flag value, a missing or malformed file, a spec that does not parse)
ends with one line ``refsgd: error: ...`` on stderr and exit code 2, never a traceback.
"""

import argparse
import hashlib
import json
import os
import sys
import traceback
import warnings

import numpy as np

from refsgd import RankFailure, RefsgdError, Stopped, __version__, failure

SCHEDULE_HELP = """\
learning-rate schedule, NAME or NAME:key=value,... (lengths may be given in epochs:
warmup_epochs, total_epochs, warmup_stop_epochs, milestone_epochs; lists with '/').
--lr gives the lr or peak. Examples: constant; warmup-step:warmup_epochs=5,milestone_epochs=30/60/80;
warmup-linear:warmup_epochs=2,total_epochs=20; plateau:factor=0.5,patience=2. Names: """


def _int_at_least(lowest, what):
    """An argparse type: an integer >= lowest (``what`` names it in the error)."""
    def parse(text):
        try:
            v = int(text)
        except ValueError:
            v = None
        if v is None or v < lowest:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}")
        return v
    return parse


_positive_int = _int_at_least(1, "a positive integer")
_nonneg_int = _int_at_least(0, "an integer >= 0")


def _nonneg_float(text):
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not np.isfinite(v) or v < 0:
        raise argparse.ArgumentTypeError(f"expected a finite number >= 0, got {text!r}")
    return v


def _value(text):
    if "/" in text:
        return [_value(t) for t in text.split("/")]
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text


def parse_schedule(text, lr, iters_per_epoch):
    """``NAME[:key=value,...]`` -> a schedule object; ``lr`` fills ``lr`` or ``peak``."""
    from refsgd.optim import make_schedule
    name, _, rest = text.partition(":")
    kwargs = {}
    for item in filter(None, rest.split(",")):
        key, eq, val = item.partition("=")
        if not eq:
            raise RefsgdError(f"--schedule {text}: expected key=value, got {item!r}")
        key, val = key.strip(), _value(val.strip())
        if key in kwargs:
            raise RefsgdError(f"--schedule {text}: {key} is given twice")
        if key in ("milestones", "milestone_epochs") and not isinstance(val, list):
            val = [val]
        kwargs[key] = val
    if name in ("constant", "plateau"):
        kwargs.setdefault("lr", lr)
    else:
        kwargs.setdefault("peak", lr)
    return make_schedule(name, iters_per_epoch=iters_per_epoch, **kwargs)


def _add_training_options(p):
    """The options of `refsgd train`: the method's (shared with golden) and the run's."""
    p.add_argument("--algo", default="ssgd", help="the method (default ssgd); --list shows them")
    p.add_argument("--list", action="store_true", help="list the methods with their paper and listing, and exit")
    _add_method_options(p, dtype="float32")
    p.add_argument("--epochs", type=_positive_int, default=10, help="passes over the training set (default 10)")
    p.add_argument("--iterations", type=_positive_int, default=None,
                   help="stop after this many iterations instead of --epochs")
    p.add_argument("--eval-every", type=_positive_int, default=1,
                   help="evaluate on the test set every this many epochs (default 1)")
    p.add_argument("--log-every", type=_positive_int, default=10,
                   help="iterations between the progress updates and the all-rank loss check (default 10)")
    p.add_argument("--no-progress", dest="progress", action="store_false", help="no progress bar")
    p.add_argument("--poll", action="store_true",
                   help="call Test() on the requests in flight at every layer boundary of the backward "
                        "pass, so that an MPI library without an asynchronous progress thread advances "
                        "them during computation (overlapped methods; see README 'Overlap')")
    p.add_argument("--link", default=None, metavar="LATENCY_US,GBIT_S",
                   help="emulated link: every all-reduce completes no earlier than the Ring-AllReduce "
                        "model (Pipe-SGD eq. 5) for its size; off by default, and every output says so")
    p.add_argument("--local-link", default=None, metavar="LATENCY_US,GBIT_S",
                   help="daso: emulated link within a node (the node-local syncs), while --link is the "
                        "link between nodes (default: the real one)")
    p.add_argument("--checkpoint", default=None, metavar="DIR",
                   help="folder for checkpoints (each written atomically; DIR/latest names the newest)")
    p.add_argument("--checkpoint-every", type=_positive_int, default=None, metavar="K",
                   help="write a checkpoint every K iterations and after the last (needs --checkpoint)")
    p.add_argument("--keep-checkpoints", type=_nonneg_int, default=3, metavar="N",
                   help="keep the N newest checkpoints, remove older ones (default 3; 0 keeps all)")
    p.add_argument("--resume", default=None, metavar="DIR",
                   help="continue from a checkpoint (DIR or DIR/ckpt-T); the continued trajectory is "
                        "identical to an uninterrupted run. Method, model, world size and every "
                        "option that changes the trajectory must match")
    p.add_argument("--out", default=None, metavar="RUN.h5",
                   help="write per-iteration times and losses of every rank, the evaluations and the "
                        "final model (HDF5)")
    p.add_argument("--force", action="store_true",
                   help="replace an existing --out or --trace file, or a --checkpoint folder holding another "
                        "run's checkpoints (refused otherwise)")
    p.add_argument("--trace", default=None, metavar="F.h5",
                   help="record every rank's state, loss and batch indices at every step (the golden "
                        "schema, README 'For implementers'); costs 8 bytes (float64) x parameters x "
                        "state arrays per step and rank: use small models and a few hundred steps")


def _add_method_options(p, dtype):
    from refsgd.optim import SCHEDULES
    p.add_argument("--model", default="digits_mlp",
                   help="bundled model name or path of a .toml spec (default: digits_mlp; "
                        "`refsgd models` lists them)")
    p.add_argument("--data", default=None,
                   help="dataset HDF5 file made by `refsgd data convert` "
                        "(default: the embedded 8x8 digits)")
    p.add_argument("--batch", type=_positive_int, default=32, help="micro-batch size per worker (default 32)")
    p.add_argument("--tau", type=_positive_int, default=1,
                   help="micro-batches accumulated per iteration (gradient accumulation, default 1)")
    p.add_argument("--lr", type=_nonneg_float, default=0.05,
                   help="learning rate, or the schedule's peak (default 0.05); it multiplies the mean "
                        "gradient over workers, except in ssgd-nag (the sum over samples and workers) and "
                        "pipe-sgd, d-sync, ps-sync (the sum over workers of their mean gradients)")
    p.add_argument("--schedule", default="constant", help=SCHEDULE_HELP + ", ".join(SCHEDULES))
    p.add_argument("--momentum", type=_nonneg_float, default=0.0, help="momentum mu in [0, 1) (default 0)")
    p.add_argument("--nesterov", action="store_true", help="Nesterov momentum (PyTorch semantics)")
    p.add_argument("--momentum-form", choices=("pytorch", "mxnet"), default="pytorch",
                   help="pytorch: b = mu*b + g, w -= lr*b; mxnet: v = mu*v - lr*g, w += v (default pytorch)")
    p.add_argument("--weight-decay", type=_nonneg_float, default=0.0, help="coupled L2 weight decay (default 0)")
    p.add_argument("--seed", type=_nonneg_int, default=0,
                   help="seed of the initial weights and the sampler, an integer >= 0 (default 0)")
    g = p.add_argument_group("method-specific options")
    g.add_argument("--lambda0", type=_nonneg_float, default=0.2,
                   help="dcs3gd: lambda_0 of the dynamic variance control, eq. 17 (default 0.2; 0 = no compensation)")
    g.add_argument("--wd-k", type=_nonneg_float, default=2.3,
                   help="dcs3gd: factor k on the weight decay, which follows the lr schedule (default 2.3)")
    g.add_argument("--dc-lambda", type=_nonneg_float, default=0.04,
                   help="dcasgd: lambda of the delay compensation (default 0.04), or lambda_0 with --dc-adaptive")
    g.add_argument("--dc-adaptive", action="store_true",
                   help="dcasgd: adaptive lambda_t = lambda_0 / sqrt(MeanSquare_t)")
    g.add_argument("--dc-ms-decay", type=_nonneg_float, default=0.95,
                   help="dcasgd: decay m of MeanSquare for --dc-adaptive (default 0.95)")
    g.add_argument("--ps-order", choices=("arrival", "round-robin"), default="arrival",
                   help="dcasgd: the server takes pushes as they arrive, or in the fixed order 1..N-1 "
                        "(deterministic, as the serial rendering; default arrival)")
    g.add_argument("--dependency", type=_positive_int, default=None, metavar="K",
                   help="pipe-sgd: iteration dependency K, each update applies the summed gradient of the "
                        "K-th last iteration (default 2, the paper's optimum; 1 is D-Sync)")
    g.add_argument("--warmup-epochs", type=_nonneg_int, default=None, metavar="E",
                   help="pipe-sgd: the first E epochs with dependency 1 (D-Sync), as the paper trains AlexNet "
                        "and ResNet (default 0); daso: the first E epochs sync globally every batch, "
                        "blocking (default 1)")
    g.add_argument("--cooldown-epochs", type=_nonneg_int, default=None, metavar="E",
                   help="daso: the last E epochs sync globally every batch, blocking (default 1)")
    g.add_argument("--sync-every", type=_positive_int, default=None, metavar="B",
                   help="daso: B_max, batches between global syncs when cycling starts; the wait W "
                        "starts at max(1, B/4), and both halve at each plateau (default 4, the paper's)")
    g.add_argument("--plateau-patience", type=_positive_int, default=None, metavar="N",
                   help="daso: epochs in a row without improvement that make a plateau (default 2)")
    g.add_argument("--plateau-threshold", type=_nonneg_float, default=None, metavar="X",
                   help="daso: an epoch's training loss improves when below best * (1 - X) (default 0.05)")
    g.add_argument("--ranks-per-node", type=_positive_int, default=None, metavar="G",
                   help="daso: virtual nodes of G consecutive ranks (default: the ranks that share memory, "
                        "MPI_COMM_TYPE_SHARED); lets 2 nodes x 2 ranks run on one machine")
    g.add_argument("--threads", type=_positive_int, default=None, metavar="G",
                   help="pp-asgd, asgd: gradient threads per process, each adding the summed gradient of "
                        "its sub-batches of --batch samples (default 2)")
    g.add_argument("--staleness", type=_nonneg_int, default=None, metavar="S",
                   help="pp-asgd, asgd: deterministic mode, update t consumes one sub-batch per thread "
                        "computed at the w^ of update t-S-1, and f_S uses S (default: threaded, measured)")
    g.add_argument("--compress", choices=("none", "t16", "bf16", "fp16", "q8"), default="none",
                   help="ssgd, ssgd-nag, pipe-sgd, d-sync: the gradient all-reduce carries t16 (upper 16 "
                        "bits of each float32, truncated), bf16 (bfloat16), fp16 (IEEE half, as Horovod's "
                        "fp16 compression) or q8 (8 bits with a scale per block of 256), and every "
                        "reduction step decompresses, adds and compresses again (default none)")
    p.add_argument("--dtype", choices=("float32", "float64"), default=dtype,
                   help=f"dtype of weights, activations and gradients (default {dtype})")


def build_parser():
    parser = _Parser(
        prog="refsgd",
        description="Reference implementations of distributed SGD methods (MPI, NumPy, Numba).")
    parser.add_argument("--version", action="version", version=f"refsgd {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("train", help="train a model with a distributed method (mpiexec -n N refsgd train ...)",
                       description="Train a model with a distributed SGD method, one worker per MPI "
                                   "rank: `mpiexec -n 4 refsgd train --algo ssgd`. Rank 0 shows "
                                   "progress, the evaluations and a summary with each rank's split of "
                                   "time into compute, idle (blocked on communication) and other. "
                                   "Defaults train the embedded digits dataset in seconds.")
    _add_training_options(p)

    p = sub.add_parser("golden", help="write a golden trajectory from a method's serial rendering",
                       description="Run the serial rendering of a method (N workers in one process, "
                                   "no MPI, written from the paper's equations) for T steps and write "
                                   "its trace: the golden reference other implementations replay and "
                                   "verify against (README 'For implementers').")
    p.add_argument("--algo", default="ssgd", help="the method (default ssgd)")
    p.add_argument("--workers", type=_positive_int, required=True,
                   help="number of workers N (the MPI world size it stands for; dcasgd: server + N-1 workers)")
    p.add_argument("--steps", type=_positive_int, required=True, help="number of steps T")
    _add_method_options(p, dtype="float64")
    p.add_argument("--out", required=True, metavar="F.h5", help="the golden file (written atomically)")
    p.add_argument("--force", action="store_true", help="replace an existing --out file")

    p = sub.add_parser("verify", help="compare two traces step by step",
                       description="Compare two traces (refsgd train --trace, refsgd golden, or another "
                                   "implementation's file in the same schema): first the configuration, "
                                   "the initial weights and the batches, then every step and worker. "
                                   "Prints the first step and worker where they differ and the size of "
                                   "the difference; exit code 1 on a mismatch.")
    p.add_argument("a", help="trace A")
    p.add_argument("b", help="trace B (the reference: relative differences are taken against it)")
    p.add_argument("--rtol", type=_nonneg_float, default=1e-10, help="relative tolerance (default 1e-10)")
    p.add_argument("--atol", type=_nonneg_float, default=1e-12, help="absolute tolerance (default 1e-12)")
    p.add_argument("--prefix", action="store_true",
                   help="compare only the steps both traces have (default: a different length is a mismatch)")

    p = sub.add_parser("report", help="print the summary of a metrics file again (and plot it)",
                       description="Print the configuration, evaluations and per-rank time split of a "
                                   "run's metrics file (refsgd train --out); --plot draws the loss and "
                                   "accuracy curves and the time split (needs matplotlib).")
    p.add_argument("file", help="metrics file written by refsgd train --out")
    p.add_argument("--plot", default=None, metavar="OUT.png", help="also draw the curves into this image")

    p = sub.add_parser("models", help="list the bundled models, or describe one",
                       description="Without NAME, list the bundled model specs; with NAME (or a "
                                   ".toml path), print its layers and parameter counts.")
    p.add_argument("name", nargs="?", help="model name or spec path")
    p.add_argument("--dtype", choices=("float32", "float64"), default="float32")

    p = sub.add_parser("data", help="convert datasets to refsgd's HDF5 layout, or describe one")
    dsub = p.add_subparsers(dest="data_command", metavar="ACTION")
    c = dsub.add_parser("convert", help="convert a standard distribution to HDF5",
                        description="Convert MNIST / Fashion-MNIST (IDX files, .gz or not) or "
                                    "CIFAR-10 / CIFAR-100 (python pickle batches, folder or .tar.gz) "
                                    "to one HDF5 file in refsgd's layout (data/README.md).")
    c.add_argument("kind", choices=("mnist", "fashion-mnist", "cifar10", "cifar100"))
    c.add_argument("src", help="folder with the distribution's files (or the CIFAR .tar.gz)")
    c.add_argument("out", help="output .h5 file (written atomically)")
    c.add_argument("--force", action="store_true", help="replace an existing output file")
    i = dsub.add_parser("info", help="describe a dataset file")
    i.add_argument("file", nargs="?", default=None, help="HDF5 dataset (default: the embedded digits)")

    p = sub.add_parser("bench", help="measure speed: the network step against PyTorch, the methods against "
                                     "their timing models")
    bsub = p.add_subparsers(dest="bench_command", metavar="WHAT")
    s = bsub.add_parser("step", help="forward+backward time of a model against PyTorch on the same CPU",
                        description="Median time of one loss_and_grad of MODEL at BATCH, the same "
                                    "network in PyTorch if installed (same CPU, torch's default "
                                    "threads), and the ratio.")
    s.add_argument("--model", default="mnist_mlp", help="model name or spec path (default mnist_mlp)")
    s.add_argument("--batch", type=_positive_int, default=100, help="batch size (default 100)")
    s.add_argument("--dtype", choices=("float32", "float64"), default="float32")
    s.add_argument("--repeat", type=_positive_int, default=20, help="timed repetitions (default 20)")
    s.add_argument("--no-torch", action="store_true", help="do not time PyTorch even if installed")
    o = bsub.add_parser("overlap", help="each method's iteration time against its paper's timing model (mpiexec)",
                        description="Under `mpiexec -n P`: measure t_C (one micro-batch's forward+backward, "
                                    "ssgd without a link) and T_comm (a blocking all-reduce of the gradient "
                                    "through the link), then run each method and print its iteration time "
                                    "split into compute, idle and other, next to its paper's model: compute "
                                    "+ all-reduce for SSGD (Rigazzi eq. 13, LAGA eq. 3), max of the two for "
                                    "DC-S3GD (eq. 14) and LAGA (eq. 6). Without --link or --ratio the "
                                    "network is the real one (on a cluster, the real overlap); with them "
                                    "an emulated link, and the output says so. Random inputs of the "
                                    "model's shape unless --data is given (timing does not depend on "
                                    "values). Run with one BLAS thread per rank.")
    o.add_argument("--model", default="mnist_mlp", help="model name or spec path (default mnist_mlp)")
    o.add_argument("--data", default=None, help="dataset HDF5 file (default: random inputs)")
    o.add_argument("--batch", type=_positive_int, default=64, help="micro-batch per worker (default 64)")
    o.add_argument("--tau", type=_positive_int, default=1, help="micro-batches per iteration (default 1)")
    o.add_argument("--iterations", type=_positive_int, default=60, help="iterations per method (default 60)")
    o.add_argument("--skip", type=int, default=10, help="first iterations left out of the means (default 10)")
    o.add_argument("--algos", default="ssgd,ssgd-opt,dcs3gd,laga-sgd",
                   help="comma-separated methods, each optionally with +poll (e.g. dcs3gd+poll); "
                        "default ssgd,ssgd-opt,dcs3gd,laga-sgd")
    o.add_argument("--link", default=None, metavar="LATENCY_US,GBIT_S", help="emulated link (see train --help)")
    o.add_argument("--ratio", type=_nonneg_float, default=None,
                   help="choose an emulated link whose all-reduce of the gradient takes RATIO x t_C")
    o.add_argument("--latency-us", type=_nonneg_float, default=50.0, help="latency of the --ratio link (default 50)")
    o.add_argument("--lr", type=_nonneg_float, default=0.001, help="learning rate of the timed runs (default 0.001)")
    o.add_argument("--seed", type=int, default=0)
    o.add_argument("--dtype", choices=("float32", "float64"), default="float32")
    return parser


#: the method-specific options, recorded in every configuration
METHOD_KEYS = ("lambda0", "wd_k", "dc_lambda", "dc_adaptive", "dc_ms_decay", "ps_order", "dependency",
               "warmup_epochs", "compress", "cooldown_epochs", "sync_every", "plateau_patience",
               "plateau_threshold", "ranks_per_node", "threads", "staleness")


def _config(args):
    keys = ("algo", "model", "data", "epochs", "iterations", "batch", "tau", "lr", "schedule", "momentum",
            "nesterov", "momentum_form", "weight_decay", "seed", "dtype", "eval_every", "log_every", "link",
            "local_link", "poll") + METHOD_KEYS
    return {k: getattr(args, k) for k in keys}


def _prepare(args, comm):
    """Everything that can fail on bad input, done identically on every rank before any collective."""
    from refsgd import datasets
    from refsgd.algorithms import ALGORITHMS, check, micro_batches, servers
    from refsgd.nn import load_model

    if args.algo not in ALGORITHMS:
        raise RefsgdError(f"unknown method --algo {args.algo!r}; `refsgd train --list` shows "
                          f"{', '.join(ALGORITHMS)}")
    if args.momentum >= 1:
        raise RefsgdError(f"--momentum must be in [0, 1), got {args.momentum}")
    check(args.algo, args, comm.Get_size())
    link = None
    if args.link:
        from refsgd.comm.link import Link
        link = Link.parse(args.link)
    if args.local_link:
        from refsgd.comm.link import Link
        Link.parse(args.local_link, "--local-link")
    dtype = np.dtype(args.dtype)
    net = load_model(args.model, dtype=dtype)
    data = datasets.load(args.data, dtype=dtype)
    datasets.check_fits(data, net.input_shape, net.num_classes, model=net.name)
    if len(data.y_test) == 0:
        raise RefsgdError(f"dataset {data.name} has no test samples: refsgd train evaluates the model on the test set")
    world = comm.Get_size()
    workers = world - servers(args.algo)
    per_epoch = len(data.y_train) // (workers * args.batch * micro_batches(args))
    if per_epoch == 0:
        raise RefsgdError(
            f"the training set has {len(data.y_train)} samples: too few for {workers} workers x batch "
            f"{args.batch} x {micro_batches(args)} micro-batches")
    schedule = parse_schedule(args.schedule, args.lr, per_epoch)
    if args.checkpoint_every and not args.checkpoint:
        raise RefsgdError("--checkpoint-every needs --checkpoint DIR")
    if args.checkpoint and not args.checkpoint_every:
        raise RefsgdError("--checkpoint DIR needs --checkpoint-every K")
    if args.trace and args.resume:
        raise RefsgdError("--trace records a run from its first step: it cannot be combined with --resume")
    _check_outputs(args)
    restorer = None
    if args.resume:
        from refsgd import checkpoint
        folder, meta = checkpoint.read_meta(args.resume, _config(args), world, net.num_params)
        restorer = checkpoint.Restorer(folder, comm.Get_rank(), meta["t"])
    return ALGORITHMS[args.algo][0], link, net, data, schedule, restorer


def _check_outputs(args):
    """Every output of `train` can be written, collides with no input or other output, and
    replaces no file and no other run's checkpoints unless --force (before any work)."""
    from refsgd.files import check_distinct, check_folder, check_output, same_path
    model_file = args.model if os.path.isfile(args.model) else None
    check_distinct([("--data", args.data), ("--model", model_file), ("--resume", args.resume)],
                   [("--out", args.out), ("--trace", args.trace)])
    # --checkpoint may be the folder --resume reads (the run goes on there)
    check_distinct([("--data", args.data), ("--model", model_file), ("--out", args.out), ("--trace", args.trace)],
                   [("--checkpoint", args.checkpoint)])
    for flag, path in (("--out", args.out), ("--trace", args.trace)):
        if path:
            check_output(path, flag, args.force)
    if args.checkpoint:
        check_folder(args.checkpoint, "--checkpoint")
        if _holds_other_run(args) and not args.force:
            raise RefsgdError(f"--checkpoint {args.checkpoint} holds the checkpoints of another run; continue that "
                              f"run with --resume {args.checkpoint}, choose another folder, or give --force to "
                              "replace them")
        for flag, path in (("--data", args.data), ("--model", model_file)):
            if path and same_path(os.path.dirname(os.path.abspath(path)), args.checkpoint):
                raise RefsgdError(f"{flag} {path} is inside --checkpoint {args.checkpoint}, whose content refsgd "
                                  "replaces")


def _holds_other_run(args):
    """Whether --checkpoint holds checkpoints that are not the ones this run resumes from."""
    from refsgd import checkpoint
    from refsgd.files import same_path
    root = args.checkpoint
    if not root or not (checkpoint.checkpoints(root) or os.path.exists(os.path.join(root, "latest"))):
        return False
    return not (args.resume and (same_path(args.resume, root) or
                                 same_path(os.path.dirname(os.path.abspath(args.resume)), root)))


def _on_every_rank(comm, prepare, fingerprint=None):
    """prepare() on every rank; None on every rank (and one message from rank 0) if it raised a
    RefsgdError anywhere, or if the ranks' fingerprint(prepared) differ (ranks launched with
    different options, models or data). These are the first collectives, so a bad input never
    leaves a rank waiting in another."""
    try:
        prepared, err = prepare(), None
    except RefsgdError as e:
        prepared, err = None, str(e)
    errors = comm.allgather(err)
    if any(errors):
        if comm.Get_rank() == 0:
            _report_errors(errors)
        return None
    if fingerprint is not None:
        differ = _differences(comm.allgather(fingerprint(prepared)))
        if differ:
            if comm.Get_rank() == 0:
                failure.say("refsgd: error: the ranks were launched with different settings, so their "
                            "replicas would not be the same run: " + "; ".join(differ))
            return None
    return prepared


def _fingerprint(args, net, data):
    """What every rank of a run must agree on: every option (paths of the data and a model spec
    excepted, which may differ between nodes), the model and the dataset's content."""
    from refsgd.trace import dataset_sha256
    options = {k: v for k, v in vars(args).items() if k not in ("data", "model", "progress")}
    model = f"{net.name} ({net.num_params:,d} parameters, spec {_sha(json.dumps(net.spec, sort_keys=True))})"
    content = dataset_sha256(data, net.dtype, test=True)
    return dict(options=options, model=model, data=f"{args.data or 'the embedded digits'} (sha256 {content[:12]})",
                data_sha=content, version=__version__)


def _sha(text):
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def _differences(prints):
    """Human-readable differences between the ranks' fingerprints (empty when they agree)."""
    def by_value(values):
        groups = {}
        for r, v in enumerate(values):
            groups.setdefault(repr(v), []).append(r)
        return groups

    def shown(values, fmt):
        groups = by_value(values)
        return ", ".join(f"{fmt(values[ranks[0]])} on rank(s) {_ranges(ranks)}" for ranks in groups.values())

    out = []
    keys = sorted(set().union(*(p["options"] for p in prints)))
    for k in keys:
        values = [p["options"].get(k) for p in prints]
        if len(by_value(values)) > 1:
            out.append(f"--{k.replace('_', '-')} is " + shown(values, repr))
    for key, what in (("model", "the model is"), ("data_sha", "the dataset is"), ("version", "refsgd is")):
        values = [p[key] for p in prints]
        if len(by_value(values)) > 1:
            shown_key = "data" if key == "data_sha" else key
            out.append(what + " " + shown([p[shown_key] for p in prints], str))
    return out


def cmd_train(args):
    from mpi4py import MPI

    from refsgd import metrics
    from refsgd.algorithms import ALGORITHMS, micro_batches
    from refsgd.run import Run

    if args.list:
        for name, (_, what) in ALGORITHMS.items():
            print(f"{name:<10} {what}")
        return 0
    world_comm = MPI.COMM_WORLD
    rank = world_comm.Get_rank()
    prepared = _on_every_rank(world_comm, lambda: _prepare(args, world_comm),
                              lambda p: _fingerprint(args, p[2], p[3]))
    if prepared is None:
        return 2
    algo, link, net, data, schedule, restorer = prepared
    if rank == 0 and args.force and _holds_other_run(args):
        from refsgd import checkpoint
        checkpoint.clear(args.checkpoint)  # --force: this folder now belongs to this run
    from refsgd.comm.link import Traffic, wrap
    comm = wrap(world_comm, link, traffic=Traffic())  # delayed by --link if given, its payload counted
    cfg = argparse.Namespace(**vars(args))
    cfg.tau = micro_batches(args)  # PP-ASGD: the G threads' sub-batches of an update
    ckpt = (args.checkpoint, args.checkpoint_every, _config(args), args.keep_checkpoints) if args.checkpoint else None
    from refsgd.algorithms import servers
    run = Run(comm, net, data, cfg, schedule, restorer=restorer, checkpoint=ckpt, servers=servers(args.algo))
    run.log(f"refsgd {__version__}: {args.algo} on {run.world} rank(s), {net.name} ({net.num_params:,d} parameters, "
            f"{net.dtype.name}), {data.name} ({len(data.y_train)} train / {len(data.y_test)} test)")
    run.log(f"  batch {args.batch} x tau {cfg.tau} per worker, {run.iters_per_epoch} iterations per epoch, "
            f"{run.total} iterations, schedule {schedule.describe()}, seed {args.seed}")
    if link:
        run.log(f"  {link} -- EMULATED, not the real network")
    if restorer:
        run.log(f"  resumed from {restorer.path.rsplit(os.sep, 1)[0]} at iteration {run.t}")
    algo(run)
    model = run.final_model()  # on every rank: it may be a collective (an average of the workers)
    if args.trace:
        run.write_trace(args.trace, _config(args))
        run.log(f"trace written to {args.trace}")
    rec = metrics.gather(run)
    if rank == 0:
        rec, nodes = rec
        shown = link
        if args.local_link:  # DASO: two tiers
            from refsgd.comm.link import Link
            shown = (f"between nodes: {link or 'the real network'}; within nodes: "
                     f"{Link.parse(args.local_link, '--local-link')}")
        print(metrics.summary(run.evals, rec, run.wall, shown))
        if args.out:
            metrics.write(args.out, run, rec, nodes, _config(args), shown, model=model)
            print(f"metrics written to {args.out}")
    return 0


def cmd_golden(args):
    from refsgd import datasets, trace
    from refsgd.nn import load_model
    from refsgd.serial import RENDERINGS

    if args.algo not in RENDERINGS:
        raise RefsgdError(f"no serial rendering for --algo {args.algo!r}; available: {', '.join(RENDERINGS)}")
    if args.momentum >= 1:
        raise RefsgdError(f"--momentum must be in [0, 1), got {args.momentum}")
    from refsgd.algorithms import check, micro_batches, servers
    check(args.algo, args, args.workers)
    dtype = np.dtype(args.dtype)
    net = load_model(args.model, dtype=dtype)
    data = datasets.load(args.data, dtype=dtype)
    datasets.check_fits(data, net.input_shape, net.num_classes, model=net.name)
    workers = args.workers - servers(args.algo)
    per_epoch = len(data.y_train) // (workers * args.batch * micro_batches(args))
    if per_epoch == 0:
        raise RefsgdError(f"the training set has {len(data.y_train)} samples: too few for {workers} "
                          f"workers x batch {args.batch} x {micro_batches(args)} micro-batches")
    schedule = parse_schedule(args.schedule, args.lr, per_epoch)
    from refsgd.files import check_distinct, check_output
    check_distinct([("--data", args.data), ("--model", args.model if os.path.isfile(args.model) else None)],
                   [("--out", args.out)])
    check_output(args.out, "--out", args.force)
    cfg = argparse.Namespace(**vars(args))
    cfg.tau = micro_batches(args)
    out = RENDERINGS[args.algo](net, data, cfg, schedule, args.workers, args.steps)
    config = {k: getattr(args, k) for k in ("algo", "model", "data", "batch", "tau", "lr", "schedule", "momentum",
                                            "nesterov", "momentum_form", "weight_decay", "seed", "dtype",
                                            "workers", "steps") + METHOD_KEYS}
    trace.check_finite(out, f"the serial rendering of {args.algo}")
    trace.write(args.out, method=args.algo, source="serial", config=config, net=net, data=data, **out)
    print(f"golden trace of {args.algo}: {args.workers} workers x {args.steps} steps of {net.name} "
          f"({net.num_params:,d} parameters, {dtype.name}) written to {args.out}; final mean loss "
          f"{np.nanmean(out['loss'][-1]):.6f}")  # nan: a server computes no gradient
    return 0


def cmd_models(args):
    from refsgd.nn import available_models, load_model, read_spec
    if args.name is None:
        for name in available_models():
            spec, _ = read_spec(name)
            print(f"{name:<18} {spec.get('description', '')}")
        return 0
    net = load_model(args.name, dtype=np.dtype(args.dtype))
    print(net.summary())
    for key in ("source", "notes"):
        if net.spec.get(key):
            print(f"{key}: {net.spec[key]}")
    return 0


def cmd_data(args, parser):
    from refsgd import datasets
    if args.data_command == "convert":
        from refsgd.files import check_distinct, check_output
        check_distinct([("SRC", args.src)], [("OUT", args.out)])
        check_output(args.out, "OUT", args.force)
        out = datasets.convert(args.kind, args.src, args.out)
        print(datasets.info(out))
        return 0
    if args.data_command == "info":
        print(datasets.info(args.file if args.file else datasets._embedded_path()))
        return 0
    parser.parse_args(["data", "--help"])
    return 2


def _prepare_overlap(args, world):
    """Check every option of `bench overlap` (every rank, before the first collective)."""
    from refsgd import bench, datasets
    from refsgd.algorithms import check
    from refsgd.nn import load_model
    args.algos = [a.strip() for a in args.algos.split(",") if a.strip()]
    for name in args.algos:
        algo, _, flag = name.partition("+")
        if algo not in bench.OVERLAP_MODELS or flag not in ("", "poll"):
            raise RefsgdError(f"--algos: {name!r} is not one of {', '.join(bench.OVERLAP_MODELS)} "
                              "(optionally with +poll)")
        check(algo, argparse.Namespace(algo=algo, tau=args.tau, nesterov=False, momentum_form="pytorch",
                                       momentum=0.0), world)
    if not 0 <= args.skip < args.iterations:
        raise RefsgdError(f"--skip {args.skip} leaves no iteration of --iterations {args.iterations} to measure")
    if args.link and args.ratio is not None:
        raise RefsgdError("give --link or --ratio, not both")
    if args.link:
        from refsgd.comm.link import Link
        args.link = Link.parse(args.link)
    if args.ratio is not None and world == 1:
        raise RefsgdError("--ratio needs an all-reduce to emulate: run under mpiexec -n 2 or more")
    args.net = load_model(args.model, dtype=np.dtype(args.dtype))
    if args.data:
        args.dataset = datasets.load(args.data, dtype=args.net.dtype)
        datasets.check_fits(args.dataset, args.net.input_shape, args.net.num_classes, model=args.net.name)
        if len(args.dataset.y_train) < world * args.batch * args.tau:
            raise RefsgdError(f"the training set has {len(args.dataset.y_train)} samples: too few for {world} "
                              f"workers x batch {args.batch} x tau {args.tau}")
    else:
        args.dataset = bench.synthetic_data(args.net, world * args.batch * args.tau * 4)
    return args


def cmd_bench(args, parser):
    from refsgd import bench
    if args.bench_command == "step":
        print(bench.format_step(bench.step(args.model, args.batch, np.dtype(args.dtype), args.repeat,
                                           use_torch=not args.no_torch)))
        return 0
    if args.bench_command == "overlap":
        from mpi4py import MPI
        comm = MPI.COMM_WORLD
        if _on_every_rank(comm, lambda: _prepare_overlap(args, comm.Get_size())) is None:
            return 2
        result = bench.overlap(comm, args)
        if comm.Get_rank() == 0:
            print(bench.format_overlap(result, args))
        return 0
    parser.parse_args(["bench", "--help"])
    return 2


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    if _is_mpi_command(args):
        failure.install()  # SIGINT/SIGTERM: stop together at the loss check, or end every rank
    np.seterr(all="ignore")  # non-finite values are detected and reported by refsgd itself, once
    warnings.filterwarnings("ignore", category=RuntimeWarning)
    try:
        return _dispatch(args, parser)
    except Stopped as e:
        if e.collective:  # every rank stops at the same boundary
            if _rank() == 0:
                failure.say(f"refsgd: {e}")
            return e.code
        return failure.abort_world(e.code, f"refsgd: {e}")
    except RefsgdError as e:
        if e.collective or failure.world_size() == 1:
            if _rank() == 0:
                failure.say(f"refsgd: error: {e}")
            return failure.EXIT_USER
        # this rank alone: the others may be waiting in a collective, so end them all
        return failure.abort_world(failure.EXIT_USER, f"refsgd: error: {e} (rank {_rank()})")
    except RankFailure as e:
        return failure.abort_world(failure.EXIT_FAILURE, f"refsgd: error: {e}")
    except KeyboardInterrupt:  # a command without MPI (golden, verify, ...)
        failure.say("refsgd: interrupted")
        return failure.EXIT_INTERRUPTED
    except BrokenPipeError:  # output piped into `head` and the like: stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except SystemExit as e:  # a rank leaving on its own while the others may wait for it
        if failure.world_size() > 1:
            code = e.code if isinstance(e.code, int) and e.code else failure.EXIT_FAILURE
            return failure.abort_world(code, f"refsgd: error: rank {_rank()} exited on its own (code {e.code})")
        raise
    except Exception:
        # a bug on one rank must not leave the others waiting in a collective forever
        traceback.print_exc()
        return failure.abort_world(failure.EXIT_FAILURE, f"refsgd: internal error on rank {_rank()} (traceback above)"
                                   if failure.world_size() > 1 else None)


def _dispatch(args, parser):
    if args.command == "train":
        return cmd_train(args)
    if args.command == "golden":
        return cmd_golden(args)
    if args.command == "verify":
        from refsgd import trace
        ok, lines = trace.verify(args.a, args.b, rtol=args.rtol, atol=args.atol, prefix=args.prefix)
        print("\n".join(lines))
        return 0 if ok else 1
    if args.command == "report":
        from refsgd import metrics
        print(metrics.report(args.file, args.plot))
        return 0
    if args.command == "models":
        return cmd_models(args)
    if args.command == "data":
        return cmd_data(args, parser)
    if args.command == "bench":
        return cmd_bench(args, parser)
    parser.print_help()
    return 2


def _is_mpi_command(args):
    """Commands whose ranks communicate (their first collective is :func:`_on_every_rank`)."""
    return (args.command == "train" and not args.list) or \
        (args.command == "bench" and getattr(args, "bench_command", None) == "overlap")


def _rank():
    mpi = sys.modules.get("mpi4py.MPI")
    if mpi is not None and mpi.Is_initialized() and not mpi.Is_finalized():
        return mpi.COMM_WORLD.Get_rank()
    return failure.launcher_rank() or 0


class _Parser(argparse.ArgumentParser):
    """argparse, with its errors printed once under mpiexec instead of once per rank.

    An MPI command (train, bench overlap) takes part in the ranks' first collective with its
    error, so that rank 0 prints it once, naming the ranks it came from (an MPMD launch may
    give one rank a bad flag), and every rank exits 2. Any other command prints on the
    launcher's rank 0 only."""

    def error(self, message):
        text = f"{self.prog}: error: {message}"
        if failure.launcher_size() not in (None, 1) and _argv_is_mpi_command(sys.argv[1:]):
            from mpi4py import MPI
            errors = MPI.COMM_WORLD.allgather(text)
            if MPI.COMM_WORLD.Get_rank() == 0:
                self.print_usage(sys.stderr)
                _report_errors(errors)
            sys.exit(failure.EXIT_USER)
        if failure.launcher_rank() in (None, 0):
            self.print_usage(sys.stderr)
            failure.say(text)
        sys.exit(failure.EXIT_USER)


def _argv_is_mpi_command(argv):
    words = [a for a in argv if not a.startswith("-")]
    if not words:
        return False
    if words[0] == "train":
        return "--list" not in argv
    return words[0] == "bench" and len(words) > 1 and words[1] == "overlap"


def _report_errors(errors):
    """Rank 0: print the first error and the ranks it (or another) came from."""
    bad = [r for r, e in enumerate(errors) if e]
    first = errors[bad[0]]
    where = "" if len(bad) == len(errors) else f" (on rank(s) {_ranges(bad)})"
    line = first if first.startswith("refsgd") else f"refsgd: error: {first}"
    failure.say(line + where)


def _ranges(ranks):
    """[0, 1, 2, 5] -> '0-2, 5'."""
    out, start = [], None
    for i, r in enumerate(ranks):
        if start is None:
            start = r
        if i + 1 == len(ranks) or ranks[i + 1] != r + 1:
            out.append(str(start) if start == r else f"{start}-{r}")
            start = None
    return ", ".join(out)


if __name__ == "__main__":
    sys.exit(main())
