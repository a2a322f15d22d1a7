"""The ``refsgd`` command line: ``refsgd train | models | data | bench``.

Every user error (a bad flag value, a missing or malformed file, a spec that does not parse)
ends with one line ``refsgd: error: ...`` on stderr and exit code 2, never a traceback.
"""

import argparse
import difflib
import os
import re
import sys
import traceback
import warnings

import numpy as np

from refsgd import RankFailure, RefsgdError, Stopped, __version__, did_you_mean, failure

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


def _every(text):
    """--eval-every: "E" epochs or "Nit" iterations, kept as text (the configuration records it)."""
    t = text.strip()
    n = t[:-2] if t.endswith("it") else t
    if not n.isdigit() or int(n) < 1:
        raise argparse.ArgumentTypeError(f"expected E (epochs) or Nit (iterations), a positive integer, got {text!r}")
    return t


def _add_training_options(p):
    """The options of `refsgd train`: the method's (shared with golden) and the run's."""
    p.add_argument("--algo", default="ssgd", help="the method (default ssgd); --list shows them")
    p.add_argument("--list", action="store_true", help="list the methods with their paper and listing, and exit")
    _add_method_options(p, dtype="float32")
    p.add_argument("--epochs", type=_positive_int, default=10, help="passes over the training set (default 10)")
    p.add_argument("--iterations", type=_positive_int, default=None,
                   help="stop after this many iterations instead of --epochs")
    p.add_argument("--eval-every", type=_every, default="1",
                   help="evaluate the model on the test set every E epochs (E) or every N iterations (Nit), "
                        "and after the last iteration (default 1: every epoch)")
    p.add_argument("--log-every", type=_positive_int, default=10,
                   help="iterations between the progress updates and the all-rank loss check (default 10)")
    p.add_argument("--no-progress", dest="progress", action="store_false",
                   help="no progress display (the bar in a terminal; status lines when the output is a file "
                        "or a pipe, as under mpiexec)")
    p.add_argument("--blas-threads", type=_positive_int, default=None, metavar="N",
                   help="BLAS and Numba threads per rank (default: OMP_NUM_THREADS or the like if set, else "
                        "the cores available divided by the ranks on the node)")
    p.add_argument("--poll", action=argparse.BooleanOptionalAction, default=True,
                   help="call Test() on the requests in flight after every layer of the forward and the "
                        "backward pass, so that an MPI library without an asynchronous progress thread "
                        "(MPICH and Open MPI by default) advances them during computation; on by default, "
                        "--no-poll leaves progress to the MPI library (overlapped methods; timing only, the "
                        "numbers are the same; see README 'Overlap')")
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
                        "schema of implementers.md, installed with refsgd: --list prints where); costs 8 bytes (float64) x parameters x "
                        "state arrays per step and rank: use small models and a few hundred steps")
    p.add_argument("--timeline", nargs="?", const="default", default=None, metavar="SPEC",
                   help="record, on every rank and thread, the spans of a window of iterations (compute, idle, "
                        "each MPI call, codec, update, communication in flight, the --link model), each named by "
                        "the listing line it executes, into the --out file (needed); SPEC: START:COUNT "
                        "(iterations START..START+COUNT-1, also written it100:5), START, or :COUNT; default "
                        "3:5. Export or draw them with refsgd report --timeline / --timeline-plot")


def _add_method_options(p, dtype):
    from refsgd.optim import SCHEDULES
    p.add_argument("--model", default="digits_mlp",
                   help="bundled model name or path of a .toml spec (default: digits_mlp; "
                        "`refsgd models` lists them)")
    p.add_argument("--data", default=None,
                   help="dataset HDF5 file made by `refsgd data convert` "
                        "(default: the embedded 8x8 digits)")
    p.add_argument("--batch", type=_positive_int, default=None,
                   help="micro-batch size per worker (default 32; pp-asgd and asgd: 8, each gradient thread's "
                        "sub-batch)")
    p.add_argument("--tau", type=_positive_int, default=1,
                   help="micro-batches accumulated per iteration (gradient accumulation, default 1)")
    p.add_argument("--lr", type=_nonneg_float, default=None,
                   help="learning rate, or the schedule's peak. What it multiplies depends on the method: "
                        "the mean gradient over workers and samples (ssgd, ssgd-opt, dcs3gd, laga-*, daso); "
                        "one worker's mean gradient per push (dcasgd); the sum over workers of their mean "
                        "gradients (pipe-sgd, d-sync, ps-sync); the sum of the gradients over samples, "
                        "sub-batches and workers (ssgd-nag, pp-asgd, asgd). Default 0.05; 2e-5 for ssgd-nag, "
                        "3e-6 for pp-asgd and asgd")
    p.add_argument("--schedule", default="constant", help=SCHEDULE_HELP + ", ".join(SCHEDULES))
    g = p.add_argument_group("local optimizer U (the methods that have one; others refuse these)")
    g.add_argument("--momentum", type=_nonneg_float, default=None,
                   help="momentum mu (gamma in LAGA) in [0, 1); default 0, 0.9 for dcs3gd, laga-sgdm and "
                        "laga-sgdn, 0.99 for ssgd-nag, pp-asgd and asgd (the papers')")
    g.add_argument("--nesterov", action="store_true", default=None,
                   help="Nesterov momentum, PyTorch semantics (ssgd, ssgd-opt, daso)")
    g.add_argument("--momentum-form", choices=("pytorch", "mxnet"), default=None,
                   help="pytorch: b = mu*b + g, w -= lr*b; mxnet: v = mu*v - lr*g, w += v (ssgd, ssgd-opt, daso; "
                        "default pytorch; dcs3gd always uses mxnet's, its paper's toolkit)")
    g.add_argument("--weight-decay", type=_nonneg_float, default=None,
                   help="coupled L2 weight decay (default 0); never applied to frozen layers")
    p.add_argument("--seed", type=_nonneg_int, default=0,
                   help="seed of the initial weights and the sampler, an integer >= 0 (default 0)")
    g = p.add_argument_group("method-specific options (refused by the other methods)")
    g.add_argument("--lambda0", type=_nonneg_float, default=None,
                   help="dcs3gd: lambda_0 of the dynamic variance control, eq. 17 (default 0.2; 0 = no compensation)")
    g.add_argument("--lambda-norm", choices=("whole", "tensor"), default=None,
                   help="dcs3gd: eq. 17's norms over the whole parameter vector, or per tensor (each weight and "
                        "bias its own lambda, as MXNet's KVStore updates one tensor at a time); the paper does "
                        "not say (default whole)")
    g.add_argument("--wd-k", type=_nonneg_float, default=None,
                   help="dcs3gd: factor k on the weight decay, which follows the lr schedule (default 2.3)")
    g.add_argument("--dc-lambda", type=_nonneg_float, default=None,
                   help="dcasgd: lambda of the delay compensation (default 0.04), or lambda_0 with --dc-adaptive")
    g.add_argument("--dc-adaptive", action="store_true", default=None,
                   help="dcasgd: adaptive lambda_t = lambda_0 / sqrt(MeanSquare_t + 1e-7)")
    g.add_argument("--dc-ms-decay", type=_nonneg_float, default=None,
                   help="dcasgd with --dc-adaptive: decay m of MeanSquare (default 0.95)")
    g.add_argument("--ps-order", choices=("arrival", "round-robin"), default=None,
                   help="dcasgd: the server takes pushes as they arrive, or in the fixed order 1..N-1 "
                        "(deterministic, as the serial rendering; default arrival)")
    g.add_argument("--dependency", type=_positive_int, default=None, metavar="K",
                   help="pipe-sgd: iteration dependency K, each update applies the summed gradient of the "
                        "K-th last iteration (default 2, the paper's optimum; 1 is D-Sync); below the run's iterations, "
                        "and its 4 K copies of the model within the memory available")
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
                        "its sub-batches of --batch samples (default 2); ssgd-nag: the G sub-batches of a step, "
                        "computed by G threads (the same as --tau G; default 1)")
    g.add_argument("--staleness", type=_nonneg_int, default=None, metavar="S",
                   help="pp-asgd, asgd: deterministic mode, update t consumes one sub-batch per thread "
                        "computed at the w^ of update t-S-1, and f_S uses S (default: threaded, measured); below "
                        "the run's iterations")
    g.add_argument("--compress", choices=("none", "t16", "bf16", "fp16", "q8", "q8v"), default=None,
                   help="ssgd, ssgd-nag, pipe-sgd, d-sync: the gradient all-reduce carries t16 (upper 16 "
                        "bits of each float32, truncated), bf16 (bfloat16), fp16 (IEEE half, as Horovod's "
                        "fp16 compression), q8 (8 bits with a scale per block of 256) or q8v (8 bits with "
                        "one scale for the whole vector, Pipe-SGD's Q8), and every "
                        "reduction step decompresses, adds and compresses again (default none)")
    g.add_argument("--allreduce", choices=("mpi", "ring"), default=None,
                   help="every method but dcasgd and ps-sync: how the uncompressed sums over ranks are made. "
                        "mpi: the MPI library's MPI_Allreduce / MPI_Iallreduce with MPI_SUM, non-blocking where "
                        "the listing is (fastest; at 3 or more ranks the order of the additions is the "
                        "library's, so a trace matches its golden file to round-off); ring: refsgd's "
                        "Ring-AllReduce over point-to-point messages, blocking, the same bits under any MPI "
                        "library and as the serial renderings (golden files). Compressed sums always take the "
                        "ring (default mpi; refsgd golden: ring)")
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
                                   "time into compute, idle (blocked on communication), update (the "
                                   "method's step) and other, beside the time with communication in "
                                   "flight. "
                                   "Defaults train the embedded digits dataset in seconds.")
    _add_training_options(p)

    p = sub.add_parser("golden", help="write a golden trajectory from a method's serial rendering",
                       description="Run the serial rendering of a method (N workers in one process, "
                                   "no MPI, written from the paper's equations) for T steps and write "
                                   "its trace: the golden reference other implementations replay and "
                                   "verify against (implementers.md, installed with refsgd: "
                                   "`refsgd train --list` prints where).")
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

    p = sub.add_parser("report", help="print the summary of metrics files again, plot and export them",
                       description="Print the configuration, evaluations and per-rank time split of each "
                                   "run's metrics file (refsgd train --out), and with several files a table "
                                   "comparing them. --plot draws the loss, accuracy (and learning-rate) "
                                   "curves of all runs on shared axes and their time split (needs "
                                   "matplotlib); --csv and --json export the evaluations and a summary of "
                                   "each run (layouts in refsgd/report.py). Outputs are written atomically; "
                                   "an existing file is replaced only with --force.",
                       epilog="examples: refsgd report ssgd.h5 dcasgd.h5 --plot cmp.png --csv cmp.csv\n"
                              "  refsgd report run.h5 --timeline run.json          (a run of train --timeline, for "
                              "Perfetto)\n"
                              "  refsgd report ssgd.h5 laga.h5 pipe.h5 --timeline-plot t.png   (Gantt chart)",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("files", nargs="+", metavar="FILE", help="metrics file(s) written by refsgd train --out")
    p.add_argument("--plot", default=None, metavar="OUT.png",
                   help="draw the curves and time split into this image (.png, .pdf, .svg, ...)")
    p.add_argument("--csv", default=None, metavar="OUT.csv", help="write the evaluations, one row each, as CSV")
    p.add_argument("--json", default=None, metavar="OUT.json",
                   help="write each run's attributes, config, evaluations and time split as JSON")
    p.add_argument("--timeline", default=None, metavar="OUT.json",
                   help="export the spans of train --timeline (one file) in the Trace Event Format: one process per "
                        "rank, one track per thread and per lane of requests in flight, named by the listing's lines "
                        "(open in https://ui.perfetto.dev or chrome://tracing)")
    p.add_argument("--timeline-plot", default=None, metavar="OUT.png",
                   help="draw the spans of each file's train --timeline as a Gantt chart, one panel per run on a "
                        "common time axis of the same number of iterations (needs matplotlib)")
    p.add_argument("--force", action="store_true", help="replace existing --plot/--csv/--json/--timeline files")

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
                                    "to one HDF5 file in refsgd's layout (the README.md of the "
                                    "package refsgd.data, installed with refsgd).")
    c.add_argument("kind", choices=("mnist", "fashion-mnist", "cifar10", "cifar100"))
    c.add_argument("src", help="folder with the distribution's files (or the CIFAR .tar.gz)")
    c.add_argument("out", help="output .h5 file (written atomically)")
    c.add_argument("--force", action="store_true", help="replace an existing output file")
    i = dsub.add_parser("info", help="describe a dataset file")
    i.add_argument("file", nargs="?", default=None, help="HDF5 dataset (default: the embedded digits)")

    p = sub.add_parser("bench", help="measure speed: the network step against PyTorch, the methods against "
                                     "their timing models, predictions at scale, the whole table")
    bsub = p.add_subparsers(dest="bench_command", metavar="WHAT")
    s = bsub.add_parser("step", help="forward+backward time of a model against PyTorch on the same CPU",
                        description="Median time of one loss_and_grad of MODEL at BATCH, the same "
                                    "network in PyTorch if installed (same CPU, torch's default "
                                    "threads), timed in turn with it (A B A B ...), and the median of "
                                    "the pairs' ratios with their quartiles and range; the load average "
                                    "before and after.")
    s.add_argument("--model", default="mnist_mlp", help="model name or spec path (default mnist_mlp)")
    s.add_argument("--batch", type=_positive_int, default=100, help="batch size (default 100)")
    s.add_argument("--dtype", choices=("float32", "float64"), default="float32")
    s.add_argument("--repeat", type=_positive_int, default=20, help="timed repetitions (default 20)")
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
    o.add_argument("--model", default="mnist_mlp", help="model name or spec path (default mnist_mlp)")
    o.add_argument("--data", default=None, help="dataset HDF5 file (default: random inputs)")
    o.add_argument("--batch", type=_positive_int, default=64, help="micro-batch per worker (default 64)")
    o.add_argument("--tau", type=_positive_int, default=1, help="micro-batches per iteration (default 1)")
    o.add_argument("--iterations", type=_positive_int, default=60, help="iterations per method (default 60)")
    o.add_argument("--skip", type=int, default=10,
                   help="first iterations left out of the means (default 10; the last is left out too)")
    o.add_argument("--algos", default="ssgd,ssgd-opt,dcs3gd,laga-sgd",
                   help="comma-separated methods, run as train runs them (--poll on), each optionally "
                        "with +nopoll for --no-poll (e.g. dcs3gd+nopoll; +poll is accepted) and +CODEC for "
                        "--compress CODEC (ssgd, ssgd-nag, d-sync, pipe-sgd; e.g. pipe-sgd+q8): ssgd, "
                        "ssgd-nag, ssgd-opt, d-sync, dcs3gd, laga-sgd, laga-sgdm, laga-sgdn, pipe-sgd (K = 2), "
                        "daso (cycling from the first batch), ps-sync, dcasgd; default ssgd,ssgd-opt,dcs3gd,laga-sgd")
    o.add_argument("--link", default=None, metavar="LATENCY_US,GBIT_S", help="emulated link (see train --help)")
    o.add_argument("--ratio", default=None, metavar="R[,R...]",
                   help="emulated links whose all-reduce of the gradient takes R x t_C, one run of every "
                        "method per R (0: no link, the real network)")
    o.add_argument("--latency-us", type=_nonneg_float, default=50.0, help="latency of the --ratio link (default 50; lowered to a quarter of the all-reduce time where it would take half of it or more)")
    o.add_argument("--ranks-per-node", type=_positive_int, default=None, metavar="G",
                   help="daso: virtual nodes of G consecutive ranks (default: the ranks that share memory)")
    o.add_argument("--local-link", default=None, metavar="LATENCY_US,GBIT_S",
                   help="daso: emulated link within a node (default: the real one)")
    o.add_argument("--sync-every", type=_positive_int, default=None, metavar="B",
                   help="daso: batches between global syncs, B (default 4; W = max(1, B/4))")
    o.add_argument("--timeline-cost", type=_nonneg_int, default=0, metavar="PAIRS",
                   help="also time each method with train --timeline recording every timed iteration: PAIRS runs "
                        "without and with it, alternating, and print the iteration times (medians) and the cost")
    o.add_argument("--lr", type=_nonneg_float, default=0.001, help="learning rate of the timed runs (default 0.001)")
    o.add_argument("--seed", type=_nonneg_int, default=0)
    o.add_argument("--dtype", choices=("float32", "float64"), default="float32")
    o.add_argument("--codecs", action="store_true",
                   help="also time each codec (encode, decode, compressed all-reduce) in this world")
    o.add_argument("--codec-repeat", type=_positive_int, default=20, help="timed calls per codec operation")
    o.add_argument("--json", default=None, metavar="F.json", help="also write the results as JSON (rank 0)")
    o.add_argument("--force", action="store_true", help="replace an existing --json file")
    r = bsub.add_parser("codec", help="the ring all-reduce against MPI's (mpiexec): uncompressed and per codec",
                        description="Under `mpiexec -n P`: the uncompressed Ring-AllReduce of --allreduce ring "
                                    "against MPI_Allreduce with MPI_SUM (--allreduce mpi), then per codec the "
                                    "compressed Ring-AllReduce refsgd "
                                    "uses (MPI Sendrecv, the same bits under any MPI library) against the same "
                                    "reduction as an MPI user-defined operator (the library's order), with "
                                    "encode and decode; the median of the slowest rank.")
    r.add_argument("--values", type=_positive_int, default=4810,
                   help="float32 values per all-reduce (default 4810, digits_mlp's parameters)")
    r.add_argument("--repeat", type=_positive_int, default=50, help="timed all-reduces per codec (default 50)")
    c = bsub.add_parser("scale", help="predicted iteration time and speed-up over SSGD at 8 to 4096 ranks",
                        description="From t_C (measured here at one thread, or --t-c) and a modelled link, "
                                    "each method's iteration time and speed-up over SSGD (samples/s) at "
                                    "each world size, by the papers' timing models: Ring-AllReduce (Pipe-SGD "
                                    "eq. 5) for the flat methods, two tiers for DASO, a parameter server for "
                                    "DC-ASGD and PS-Sync (`python -c 'import refsgd.bench; "
                                    "help(refsgd.bench)'`). --check runs the methods with the same link "
                                    "EMULATED at 2 and 4 ranks (it launches mpiexec) and prints measured / "
                                    "predicted. Run it without mpiexec.")
    c.add_argument("--model", default="mnist_mlp", help="model name or spec path (default mnist_mlp)")
    c.add_argument("--batch", type=_positive_int, default=64, help="batch per worker (default 64)")
    c.add_argument("--dtype", choices=("float32", "float64"), default="float32")
    c.add_argument("--link", default="50,10", metavar="LATENCY_US,GBIT_S",
                   help="the link between nodes (default 50,10: 50 us, 10 Gbit/s)")
    c.add_argument("--ranks-per-node", type=_positive_int, default=4, metavar="G",
                   help="ranks per node, DASO's G (default 4)")
    c.add_argument("--local-link", default="5,100", metavar="LATENCY_US,GBIT_S",
                   help="the link within a node, DASO's local tier (default 5,100)")
    c.add_argument("--sync-every", type=_positive_int, default=4, metavar="B",
                   help="DASO's B, batches between global syncs (default 4; W = max(1, B/4))")
    c.add_argument("--t-c", type=float, default=None, metavar="SECONDS",
                   help="seconds of one forward+backward at --batch (default: measured here, one thread)")
    c.add_argument("--ranks", default=None, metavar="P,P,...",
                   help="world sizes (default 8,16,...,4096; each a multiple of --ranks-per-node)")
    c.add_argument("--plot", default=None, metavar="F.png", help="draw time and speed-up against the ranks")
    c.add_argument("--force", action="store_true", help="replace an existing --plot file")
    c.add_argument("--check", action="store_true",
                   help="compare with measured runs on an EMULATED link at 2 and 4 ranks (launches mpiexec)")
    c.add_argument("--iterations", type=_positive_int, default=60, help="iterations per method of --check (default 60)")
    a = bsub.add_parser("all", help="the whole performance table as markdown, CSV and a figure (a few minutes)",
                        description="Step against PyTorch and the BLAS peak; each method's iteration split "
                                    "against its timing model at ratios 0.5, 1 and 2 of an EMULATED link "
                                    "(2 ranks); codec throughput; framework overhead at 1 and 2 ranks. "
                                    "Launches `mpiexec -n 1` and `-n 2` ($MPIEXEC, or the one of mpi4py's "
                                    "MPI library) with "
                                    "one BLAS/Numba thread per rank; writes OUT/bench.md, bench.csv and "
                                    "bench.png and prints the markdown. Run it without mpiexec.")
    a.add_argument("--out", default="bench", metavar="DIR", help="output folder (default ./bench)")
    a.add_argument("--quick", action="store_true", help="fewer iterations and repeats (about a minute)")
    a.add_argument("--force", action="store_true", help="replace existing bench.md / .csv / .png in --out")
    r = sub.add_parser("reproduce", help="the papers' claims, run at small scale: the paper's number beside ours",
                       description="Run a claim of one of the five papers (or all of them) at small scale: its "
                                   "variants with one shared set of hyperparameters, once per seed, as `mpiexec -n "
                                   "RANKS refsgd train` runs (launched here: run it without mpiexec). Writes "
                                   "OUT_DIR/NAME.md (the paper's numbers beside refsgd's, mean and min-max over "
                                   "the seeds, a verdict computed from them), NAME.json (every number, the "
                                   "commands, versions, machine and load) and NAME.png, and rewrites OUT_DIR.md "
                                   "beside the folder: the index, one line per claim. --list shows the claims.",
                       epilog="example: refsgd reproduce laga-table1 --seeds 3 --out-dir results")
    r.add_argument("name", nargs="?", metavar="NAME", help="a claim (--list) or all")
    r.add_argument("--list", action="store_true", help="list the claims: name, paper, figure, claim, the paper's number")
    r.add_argument("--seeds", type=_positive_int, default=None, help="seeds per claim (default 3; 1 with --quick)")
    r.add_argument("--quick", action="store_true",
                   help="fewer epochs and iterations and one seed: a smoke test (all claims in minutes), not a result")
    r.add_argument("--data", default=None, help="MNIST or CIFAR-10 from `refsgd data convert` (default: the "
                                                "embedded digits)")
    r.add_argument("--ranks", type=_positive_int, default=2,
                   help="MPI ranks of each run (default 2; one per core, or timing claims mean nothing)")
    r.add_argument("--link", default=None, metavar="LATENCY_US,GBIT_S",
                   help="the emulated link of the timing claims (default: chosen from the measured compute, "
                        "as each claim says)")
    r.add_argument("--out-dir", default="reproduce", metavar="D", help="output folder (default ./reproduce)")
    r.add_argument("--force", action="store_true", help="replace existing outputs in --out-dir")

    return parser


def cmd_train(args):
    if args.list:
        from refsgd import docs
        from refsgd.algorithms import ALGORITHMS
        print(f"listings, equations and readings: {docs.path('algorithms.md')}\n"
              f"each method's exact step: {docs.path('implementers.md')}")
        for name, (_, what) in ALGORITHMS.items():
            print(f"{name:<10} {what}")
        return 0
    from refsgd import api
    api.run(args)
    return 0


def train_namespace(**kw):
    """The namespace of ``refsgd train`` with these options (refsgd.train's keywords), each value
    checked by the option's own parser: an unknown option or a bad value is a RefsgdError."""
    sub = next(a for a in build_parser()._subparsers._group_actions[0].choices.items() if a[0] == "train")[1]
    args = sub.parse_args([])
    actions = {a.dest: a for a in sub._actions if a.dest != "help"}
    for key, v in kw.items():
        a = actions.get(key)
        if a is None:
            close = difflib.get_close_matches(key, list(actions), 1)
            raise RefsgdError(f"unknown option {key!r}" + (f" (did you mean {close[0]!r}?)" if close else "") +
                              "; the options are those of `refsgd train --help`, with - written _")
        flag = a.option_strings[-1] if a.option_strings else key
        if v is not None and a.nargs == 0:  # a flag: True or False
            if not isinstance(v, bool):
                raise RefsgdError(f"{key}={v!r}: {flag} is a flag, give True or False")
            v = None if (v is False and a.default is None) else v  # False: not given
        elif v is not None:
            try:
                v = a.type(str(v)) if a.type is not None else str(v)
            except argparse.ArgumentTypeError as e:
                raise RefsgdError(f"{key}={v!r}: {e}") from None
            if a.choices is not None and v not in a.choices:
                raise RefsgdError(f"{key}={v!r}: expected one of {', '.join(map(str, a.choices))}")
        setattr(args, key, v)
    return args


def cmd_golden(args):
    from refsgd import api, datasets, trace
    from refsgd.nn import load_model
    from refsgd.options import config
    from refsgd.serial import RENDERINGS

    if args.algo not in RENDERINGS:
        raise RefsgdError(f"no serial rendering for --algo {args.algo!r}; available: {', '.join(RENDERINGS)}")
    from refsgd.algorithms import micro_batches, servers
    if args.algo == "dcasgd":  # the serial rendering serves the workers in turn
        if args.ps_order not in (None, "round-robin"):
            raise RefsgdError("the serial rendering of dcasgd serves the workers round-robin (1, 2, ..., N-1 in "
                              "every round): --ps-order arrival has no serial rendering")
        args.ps_order = "round-robin"
    from refsgd.options import APPLIES
    if args.allreduce == "mpi":
        raise RefsgdError("the serial renderings sum over workers in the Ring-AllReduce's order: refsgd golden "
                          "takes --allreduce ring (its default); a trace of --allreduce mpi verifies against it "
                          "within round-off")
    if "allreduce" in APPLIES.get(args.algo, ()):
        args.allreduce = "ring"
    api.method(args, args.workers)
    dtype = np.dtype(args.dtype)
    net = load_model(args.model, dtype=dtype)
    data = datasets.load(args.data, dtype=dtype)
    datasets.check_fits(data, net.input_shape, net.num_classes, model=net.name)
    schedule = api.parse_schedule(args.schedule, args.lr, api.per_epoch(args, data, args.workers - servers(args.algo)))
    from refsgd.files import check_distinct, check_output
    check_distinct([("--data", args.data), ("--model", args.model if os.path.isfile(args.model) else None)],
                   [("--out", args.out)])
    check_output(args.out, "--out", args.force)
    cfg = argparse.Namespace(**vars(args))
    cfg.tau = micro_batches(args)
    out = RENDERINGS[args.algo](net, data, cfg, schedule, args.workers, args.steps)
    trace.check_finite(out, f"the serial rendering of {args.algo}")
    trace.write(args.out, method=args.algo, source="serial", config=config(args, run=False, extra=("workers", "steps")),
                net=net, data=data, **out)
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
    from refsgd.comm.link import Link
    from refsgd.nn import load_model
    args.algos = [a.strip() for a in args.algos.split(",") if a.strip()]
    if not args.algos:
        raise RefsgdError("--algos names no method")
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
            why = " (PP-ASGD and ASGD have no per-iteration timing model: an update consumes however many " \
                  "gradients have arrived; help(refsgd.bench) says more)" if algo in ("pp-asgd", "asgd") else ""
            raise RefsgdError(f"--algos: {name!r} is not one of {', '.join(bench.OVERLAP_MODELS)} "
                              f"(optionally with +nopoll, or +CODEC for --compress){why}")
        compress = parts[2]
        from refsgd import options
        if compress != "none" and "compress" not in options.APPLIES[algo]:
            raise RefsgdError(f"--algos: {name!r}: --compress does not apply to {algo}")
        check(algo, bench.method_config(algo, batch=args.batch, tau=args.tau, iterations=args.iterations,
                                        lr=args.lr, seed=args.seed, ranks_per_node=args.ranks_per_node,
                                        local_link=bench.measure.str_link(args.local_link),
                                        sync_every=args.sync_every, dtype=args.dtype, compress=compress), world)
    if args.json:
        from refsgd.files import check_output
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
    return args


def cmd_bench(args, parser):
    from refsgd import bench
    if args.bench_command == "step":
        print(bench.format_step(bench.step(args.model, args.batch, np.dtype(args.dtype), args.repeat,
                                           use_torch=not args.no_torch)))
        return 0
    if args.bench_command == "overlap":
        from mpi4py import MPI

        from refsgd import api
        comm = MPI.COMM_WORLD
        api.on_every_rank(comm, lambda: _prepare_overlap(args, comm.Get_size()))
        result = bench.overlap(comm, args)
        if comm.Get_rank() == 0:
            print(bench.format_overlap(result))
            if args.json:
                import json

                from refsgd.files import atomic_path, write_bytes
                with atomic_path(args.json, "the JSON results") as tmp:
                    write_bytes(tmp, json.dumps(bench.overlap_json(result), indent=1).encode())
        return 0
    if args.bench_command == "codec":
        from mpi4py import MPI

        from refsgd import api
        comm = MPI.COMM_WORLD
        api.on_every_rank(comm, lambda: None)
        rows = bench.codec_costs(comm, args.values, repeat=args.repeat)
        if comm.Get_rank() == 0:
            print(bench.format_ring(rows, comm.Get_size(), args.values))
        return 0
    if args.bench_command == "scale":
        from refsgd import busy
        from refsgd.bench import scale
        scale.prepare_args(args)
        load_before = busy.load_average()
        inputs = scale.measure_inputs(args.model, args.batch, args.link, args.local_link, args.ranks_per_node,
                                      args.sync_every, args.t_c, np.dtype(args.dtype))
        table = scale.predict(inputs, args.ranks)
        print(scale.format_scale(inputs, args.ranks, table), flush=True)
        if args.plot:
            scale.plot(inputs, args.ranks, table, args.plot)
            print(f"plot written to {args.plot}")
        if args.check:
            print("", flush=True)
            rows = scale.check(inputs, iterations=args.iterations,
                               log=lambda line: print(line, flush=True))
            print(scale.format_check(rows, inputs))
        print(f"{busy.text(load_before, busy.load_average())}; t_C and the updates measured at one thread")
        crowded = busy.note(load_before, 1, 1)
        if crowded:
            print(f"note: {crowded}")
        return 0
    if args.bench_command == "all":
        from refsgd.bench import suite
        md = suite.run_all(args.out, quick=args.quick, force=args.force,
                           log=lambda line: failure.say(f"bench all: {line}"))
        print(md, end="")
        return 0
    parser.parse_args(["bench", "--help"])
    return 2


def cmd_reproduce(args, parser):
    from refsgd import reproduce
    if args.list:
        print(reproduce.list_text())
        return 0
    if not args.name:
        parser._innermost(args).error("give a claim's NAME, all, or --list")
    reproduce.names(args.name)  # an unknown name before anything runs
    if args.link:
        from refsgd.comm.link import Link
        Link.parse(args.link)
    setup = reproduce.Setup(ranks=args.ranks, data=args.data, link=args.link, quick=args.quick,
                            seeds=args.seeds or (1 if args.quick else 3))
    setup.kind  # a dataset reproduce cannot use is refused before anything runs
    results = reproduce.reproduce(args.name, setup, args.out_dir, force=args.force,
                                  log=lambda line: failure.say(f"reproduce: {line}"))
    for r in results:
        print(f"{r['name']:<18} {r['verdict']:<18} {r['why']}")
    return 0


def main(argv=None):
    try:  # whole lines reach a pipe (mpiexec, a file) as they are printed
        sys.stdout.reconfigure(line_buffering=True)
    except (AttributeError, ValueError):
        pass
    parser = build_parser()
    args = parser.parse_args(argv)
    # SIGINT/SIGTERM: stop together at the loss check, or end every rank (refsgd.entry installs
    # the handlers as its first instruction; a caller of main() without it gets them here)
    failure.install(mpi_command=_is_mpi_command(args))
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
            if _rank() == 0:  # an argparse error of another rank is already a whole line
                failure.say(str(e) if _ARGPARSE_ERROR.match(str(e)) else f"refsgd: error: {e}")
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
        from refsgd import report
        print(report.report(args.files, plot=args.plot, csv_out=args.csv, json_out=args.json, force=args.force,
                            timeline=args.timeline, timeline_plot=args.timeline_plot))
        return 0
    if args.command == "models":
        return cmd_models(args)
    if args.command == "data":
        return cmd_data(args, parser)
    if args.command == "bench":
        return cmd_bench(args, parser)
    if args.command == "reproduce":
        return cmd_reproduce(args, parser)
    parser.print_help()
    return 2


def _is_mpi_command(args):
    """Commands whose ranks communicate (their first collective is :func:`refsgd.api.on_every_rank`)."""
    return (args.command == "train" and not args.list) or \
        (args.command == "bench" and getattr(args, "bench_command", None) in ("overlap", "codec"))


def _rank():
    mpi = sys.modules.get("mpi4py.MPI")
    if mpi is not None and mpi.Is_initialized() and not mpi.Is_finalized():
        return mpi.COMM_WORLD.Get_rank()
    return failure.launcher_rank() or 0


#: an error argparse has already written out whole (``refsgd train: error: ...``)
_ARGPARSE_ERROR = re.compile(r"^refsgd( [a-z]+)*: error: ")


class _Parser(argparse.ArgumentParser):
    """argparse, with its errors printed once under mpiexec instead of once per rank.

    An MPI command (train, bench overlap) takes part in the ranks' first collective with its
    error, so that rank 0 prints it once, naming the ranks it came from (an MPMD launch may
    give one rank a bad flag), and every rank exits 2. Any other command prints on the
    launcher's rank 0 only. An unknown flag is reported by the command it was given to, with
    that command's usage, except an unrecognized one: one line naming the option it resembles
    ("did you mean --epochs?"). A flag is never taken for a longer one it abbreviates (``--epoch``
    is not ``--epochs``), so that a typo cannot silently mean another option."""

    def __init__(self, *a, **kw):
        kw.setdefault("allow_abbrev", False)
        super().__init__(*a, **kw)

    def parse_args(self, args=None, namespace=None):
        args = _negative_link_values(sys.argv[1:] if args is None else list(args))
        ns, extra = self.parse_known_args(args, namespace)
        if extra:
            p = self._innermost(ns)
            p._usage = False  # one line: the usage of ~40 options would hide the suggestion
            p.error("unrecognized arguments: " + " ".join(extra) + p._suggestion(extra))
        return ns

    def _suggestion(self, extra):
        """" (did you mean --epochs?)" for the first unknown option that resembles one of this
        command's options (difflib, as refsgd.train's keywords), and where the options are listed."""
        flags = [s for a in self._actions for s in a.option_strings if s.startswith("--")]
        for word in extra:
            if word.startswith("--") and len(word) > 2:
                close = did_you_mean(word.split("=", 1)[0], flags, cutoff=0.75)
                if close:
                    return close
        return f"; `{self.prog} --help` lists the options"

    def _innermost(self, ns):
        """The (sub)command parser that ``ns`` was parsed by: refsgd, refsgd bench, refsgd bench overlap, ..."""
        p = self
        for key in ("command", "bench_command", "data_command"):
            subs = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)]
            name = getattr(ns, key, None)
            if subs and name in subs[0].choices:
                p = subs[0].choices[name]
        return p

    _usage = True  # print the usage line(s) before an error

    def error(self, message):
        text = f"{self.prog}: error: {message}"
        if failure.launcher_size() not in (None, 1) and _argv_is_mpi_command(sys.argv[1:]):
            from mpi4py import MPI
            errors = MPI.COMM_WORLD.allgather(text)
            if MPI.COMM_WORLD.Get_rank() == 0:
                from refsgd.api import agreed_message
                if self._usage:
                    self.print_usage(sys.stderr)
                failure.say(agreed_message(errors))
            sys.exit(failure.EXIT_USER)
        if failure.launcher_rank() in (None, 0):
            if self._usage:
                self.print_usage(sys.stderr)
            failure.say(text)
        sys.exit(failure.EXIT_USER)


def _negative_link_values(argv):
    """``--link -5,1`` as ``--link=-5,1``: argparse takes "-5,1" for a flag ("expected one
    argument"); written with "=", the value reaches Link.parse, which names the negative latency."""
    out = []
    for a in argv:
        if out and out[-1] in ("--link", "--local-link") and re.match(r"^-[\d.]", a):
            out[-1] = f"{out[-1]}={a}"
        else:
            out.append(a)
    return out


def _argv_is_mpi_command(argv):
    from refsgd.entry import is_mpi_command
    return is_mpi_command(argv)


if __name__ == "__main__":
    sys.exit(main())
