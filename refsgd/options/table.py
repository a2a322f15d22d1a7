"""The table of every option of a run: one :class:`Option` per option (see refsgd.options).

Which methods an option applies to, and each method's own default, are the registry's
(refsgd.registry: Method.optimizer, Method.options, Method.defaults): an option here is either
for every method (``ALL``) or for those whose Method names it (``OWN``)."""

import dataclasses

from refsgd import registry
from refsgd.options.kinds import Choice, Every, Flag, Float, Int, Kind, Text

#: the methods, in the order of --algo's list (refsgd.registry.METHODS)
METHODS = tuple(registry.METHODS)
ALL = None   # Option.methods: every method
OWN = "own"  # Option.methods: the methods whose registry entry names the option (Method.applies)

#: Option.record: recorded in every output and compared by verify / recorded only / neither;
#: ROUNDING: changes only the roundings of the trajectory, not its equations (the order of the sums
#: over ranks): recorded, and must match on resume, but not compared by verify
TRAJECTORY, RUN_ONLY, ROUNDING = "trajectory", "run", "rounding"


@dataclasses.dataclass(frozen=True)
class Option:
    """One option: its name (flag ``--name`` with - for _, keyword ``name=``), its kind (type and
    range), defaults, help, group, the methods it applies to and what a run records of it."""

    name: str
    kind: Kind
    default: object                 # where the method has none of its own (a method option: when it applies)
    help: str                       # the command line's; "%(default)s" is the command's default
    group: str = None               # None, "U" (the local optimizer) or "method" (method-specific)
    methods: tuple = ALL            # the methods it applies to (ALL: every method; OWN: the registry's)
    record: str = None              # TRAJECTORY, ROUNDING, RUN_ONLY or None (see the module docstring)
    per_method: dict = dataclasses.field(default_factory=dict)  # method -> its own default (the registry's)
    metavar: str = None
    flag: str = None                # the command-line flag when it is not --name (--no-progress)
    const: str = None               # the value of the flag given without one (nargs="?")

    @property
    def flags(self):
        return self.flag or "--" + self.name.replace("_", "-")

    @property
    def cli_default(self):
        """The command line's default: None where the method decides it (a method option, or a
        default per method), so that an option counts as given when it is not None."""
        return None if self.methods is not ALL or self.per_method else self.default


SCHEDULE_HELP = """\
learning-rate schedule, NAME or NAME:key=value,... (lengths may be given in epochs:
warmup_epochs, total_epochs, warmup_stop_epochs, milestone_epochs; lists with '/').
--lr gives the lr or peak. Examples: constant; warmup-step:warmup_epochs=5,milestone_epochs=30/60/80;
warmup-linear:warmup_epochs=2,total_epochs=20; plateau:factor=0.5,patience=2. Names: """

_OPTIONS = (
    # -- every method; shapes the trajectory
    Option("algo", Text(), "ssgd", "the method (default %(default)s); --list shows them", record=TRAJECTORY),
    Option("model", Text(path=True), "digits_mlp",
           "bundled model name or path of a .toml spec (default: digits_mlp; `refsgd models` lists them)",
           record=TRAJECTORY),
    Option("data", Text(path=True), None,
           "dataset HDF5 file made by `refsgd data convert`, or mnist, fashion-mnist, cifar10: the file "
           "`refsgd data download` put in the cache folder (default: the embedded 8x8 digits)", record=TRAJECTORY),
    Option("batch", Int(1), 32, "micro-batch size per worker (default 32)", record=TRAJECTORY),
    Option("tau", Int(1), 1, "micro-batches accumulated per iteration (gradient accumulation, default 1)",
           record=TRAJECTORY),
    Option("lr", Float(), 0.05,
           "learning rate, or the schedule's peak (default 0.05); what it multiplies depends on the method",
           record=TRAJECTORY),
    Option("schedule", Text(), "constant", SCHEDULE_HELP, record=TRAJECTORY),  # + the names (refsgd.cli.cmdoptions)
    Option("seed", Int(0), 0, "seed of the initial weights and the sampler, an integer >= 0 (default 0)",
           record=TRAJECTORY),
    Option("dtype", Choice(("float32", "float64")), "float32",
           "dtype of weights, activations and gradients (default %(default)s)", record=TRAJECTORY),
    # -- every method; the run's length and its outputs (recorded, or not, never compared)
    Option("epochs", Int(1), 10, "passes over the training set (default 10)", record=RUN_ONLY),
    Option("iterations", Int(1), None, "stop after this many iterations instead of --epochs", record=RUN_ONLY),
    Option("eval_every", Every(), "1",
           "evaluate the model on the test set every E epochs (E) or every N iterations (Nit), "
           "and after the last iteration (default 1: every epoch)", record=RUN_ONLY),
    Option("log_every", Int(1), 10,
           "iterations between the progress updates and the all-rank loss check (default 10)", record=RUN_ONLY),
    Option("progress", Flag(), True,
           "no progress display (the bar in a terminal; status lines when the output is a file "
           "or a pipe, as under mpiexec)", flag="--no-progress"),
    Option("blas_threads", Int(1), None,
           "BLAS and Numba threads per rank (default: OMP_NUM_THREADS or the like if set, else "
           "the cores available divided by the ranks on the node)", metavar="N"),
    Option("poll", Flag(negatable=True), True,
           "call Test() on the requests in flight after every layer of the forward and the "
           "backward pass, so that an MPI library without an asynchronous progress thread "
           "(MPICH and Open MPI by default) advances them during computation; on by default, "
           "--no-poll leaves progress to the MPI library (overlapped methods; timing only, the "
           "numbers are the same; see docs/guide/overlap.md)", record=RUN_ONLY),
    Option("link", Text(), None,
           "emulated link: every all-reduce completes no earlier than the Ring-AllReduce "
           "model (Pipe-SGD eq. 5) for its size; off by default, and every output says so",
           record=RUN_ONLY, metavar="LATENCY_US,GBIT_S"),
    Option("checkpoint", Text(path=True), None,
           "folder for checkpoints (each written atomically; DIR/latest names the newest)", metavar="DIR"),
    Option("checkpoint_every", Int(1), None,
           "write a checkpoint every K iterations and after the last (needs --checkpoint)", metavar="K"),
    Option("keep_checkpoints", Int(0), 3,
           "keep the N newest checkpoints, remove older ones (default 3; 0 keeps all)", metavar="N"),
    Option("resume", Text(path=True), None,
           "continue from a checkpoint (DIR or DIR/ckpt-T); the continued trajectory is "
           "identical to an uninterrupted run. Method, model, world size and every "
           "option that changes the trajectory must match. 'auto': the --checkpoint folder's "
           "latest checkpoint if there is one, else a fresh start (one job script for the first "
           "run and every requeue; a folder named auto is ./auto)", metavar="DIR|auto"),
    Option("out", Text(path=True), None,
           "write per-iteration times and losses of every rank, the evaluations and the "
           "final model (HDF5)", metavar="RUN.h5"),
    Option("force", Flag(), False,
           "replace an existing --out or --trace file, or a --checkpoint folder holding another "
           "run's checkpoints (refused otherwise)"),
    Option("trace", Text(path=True), None,
           "record every rank's state, loss and batch indices at every step (the golden "
           "schema of implementers.md, installed with refsgd: --list prints where); costs 8 bytes (float64) x "
           "parameters x state arrays per step and rank: use small models and a few hundred steps", metavar="F.h5"),
    Option("timeline", Text(), None,
           "record, on every rank and thread, the spans of a window of iterations (compute, idle, "
           "each MPI call, codec, update, communication in flight, the --link model), each named by "
           "the listing line it executes, into the --out file (needed); SPEC: START:COUNT "
           "(iterations START..START+COUNT-1, also written it100:5), START, or :COUNT; default "
           "3:5. Export or draw them with refsgd report --timeline / --timeline-plot", metavar="SPEC",
           const="default"),
    # -- the local optimizer U (refused by the methods without one)
    Option("momentum", Float(), 0.0,
           "momentum mu (gamma in LAGA) in [0, 1) (default 0; a method's own: its paper's)", "U", OWN, TRAJECTORY),
    Option("nesterov", Flag(), False, "Nesterov momentum, PyTorch semantics", "U", OWN, TRAJECTORY),
    Option("momentum_form", Choice(("pytorch", "mxnet")), "pytorch",
           "pytorch: b = mu*b + g, w -= lr*b; mxnet: v = mu*v - lr*g, w += v (default pytorch)", "U", OWN,
           TRAJECTORY),
    Option("weight_decay", Float(), 0.0, "coupled L2 weight decay (default 0); never applied to frozen layers",
           "U", OWN, TRAJECTORY),
    # -- method-specific (refused by the other methods)
    Option("wd_k", Float(), 2.3,
           "factor k on the weight decay, which follows the lr schedule (default 2.3)",
           "method", OWN, TRAJECTORY),
    Option("lambda0", Float(), 0.2,
           "lambda_0 of the dynamic variance control, eq. 17 (default 0.2; 0 = no compensation)",
           "method", OWN, TRAJECTORY),
    Option("lambda_norm", Choice(("whole", "tensor")), "whole",
           "eq. 17's norms over the whole parameter vector, or per tensor (each weight and "
           "bias its own lambda, as MXNet's KVStore updates one tensor at a time); the paper does "
           "not say (default whole)", "method", OWN, TRAJECTORY),
    Option("dc_lambda", Float(), 0.04,
           "lambda of the delay compensation (default 0.04), or lambda_0 with --dc-adaptive",
           "method", OWN, TRAJECTORY),
    Option("dc_adaptive", Flag(), False, "adaptive lambda_t = lambda_0 / sqrt(MeanSquare_t + 1e-7)",
           "method", OWN, TRAJECTORY),
    Option("dc_ms_decay", Float(), 0.95, "with --dc-adaptive: decay m of MeanSquare (default 0.95)",
           "method", OWN, TRAJECTORY),
    Option("ps_order", Choice(("arrival", "round-robin")), "arrival",
           "the server takes pushes as they arrive, or in the fixed order 1..N-1 "
           "(deterministic, as the serial rendering; default arrival)", "method", OWN, TRAJECTORY),
    Option("dependency", Int(1), 2,
           "iteration dependency K, each update applies the summed gradient of the "
           "K-th last iteration (default 2, the paper's optimum; 1 is D-Sync); below the run's iterations, "
           "and its 4 K copies of the model within the memory available", "method", OWN, TRAJECTORY,
           metavar="K"),
    Option("warmup_epochs", Int(0), 0,
           "the first E epochs, a warm-up phase", "method", OWN, TRAJECTORY, metavar="E"),
    Option("cooldown_epochs", Int(0), 1, "the last E epochs sync globally every batch, blocking (default 1)",
           "method", OWN, TRAJECTORY, metavar="E"),
    Option("sync_every", Int(1), 4, "steps between two syncs of the models", "method", OWN, TRAJECTORY, metavar="B"),
    Option("plateau_patience", Int(1), 2,
           "epochs in a row without improvement that make a plateau (default 2)",
           "method", OWN, TRAJECTORY, metavar="N"),
    Option("plateau_threshold", Float(), 0.05,
           "an epoch's training loss improves when below best * (1 - X) (default 0.05)",
           "method", OWN, TRAJECTORY, metavar="X"),
    Option("ranks_per_node", Int(1), None,
           "virtual nodes of G consecutive ranks (default: the ranks that share memory, "
           "MPI_COMM_TYPE_SHARED); lets 2 nodes x 2 ranks run on one machine",
           "method", OWN, TRAJECTORY, metavar="G"),
    # DASO's emulated node-local link: recorded, but timing only
    Option("local_link", Text(), None,
           "emulated link within a node (the node-local syncs), while --link is the "
           "link between nodes (default: the real one)", None, OWN, RUN_ONLY, metavar="LATENCY_US,GBIT_S"),
    # ssgd-nag: its threads are its --tau sub-batches (resolve sets one from the other)
    Option("threads", Int(1), 2,
           "gradient threads per process", "method", OWN,
           TRAJECTORY, metavar="G"),
    Option("staleness", Int(0), None,
           "deterministic mode, update t consumes one sub-batch per thread "
           "computed at the w^ of update t-S-1, and f_S uses S (default: threaded, measured); below "
           "the run's iterations", "method", OWN, TRAJECTORY, metavar="S"),
    Option("compress", Choice(("none", "t16", "bf16", "fp16", "q8", "q8v")), "none",
           "the gradient all-reduce carries t16 (upper 16 "
           "bits of each float32, truncated), bf16 (bfloat16), fp16 (IEEE half, as Horovod's "
           "fp16 compression), q8 (8 bits with a scale per block of 256) or q8v (8 bits with "
           "one scale for the whole vector, Pipe-SGD's Q8), and every "
           "reduction step decompresses, adds and compresses again (default none)",
           "method", OWN, TRAJECTORY),
    # the order of the sums over ranks: recorded and kept by a resume, not compared by verify (a
    # trace of either verifies against a golden file, bitwise with ring)
    Option("allreduce", Choice(("mpi", "ring")), "mpi",
           "how the uncompressed sums over ranks are made. "
           "mpi: the MPI library's MPI_Allreduce / MPI_Iallreduce with MPI_SUM, non-blocking where "
           "the listing is (fastest; at 3 or more ranks the order of the additions is the "
           "library's, so a trace matches its golden file to round-off); ring: refsgd's "
           "Ring-AllReduce over point-to-point messages, blocking, the same bits under any MPI "
           "library and as the serial renderings (golden files). Compressed sums always take the "
           "ring (default mpi; refsgd golden: ring)", "method",
           OWN, ROUNDING),
)


def _of_registry(o):
    """An option with the methods it applies to, their own defaults and what it means to each,
    from the registry (:func:`_help`)."""
    methods = o.methods if o.methods is not OWN else tuple(m.name for m in registry.METHODS.values()
                                                            if o.name in m.applies)
    per_method = {m.name: m.defaults[o.name] for m in registry.METHODS.values() if o.name in m.defaults}
    return dataclasses.replace(o, methods=methods, help=_help(o, methods), per_method=per_method)


def _help(o, methods):
    """The option's help: its own words (which name no method), then what the registry says of it
    per method -- Method.option_help (--lr: Method.lr_meaning) and Method.defaults -- the methods
    with the same words in one clause, then the methods it applies to where not every one does."""
    said = {}
    for m in registry.METHODS.values():
        if methods is not ALL and m.name not in methods:
            continue
        words = m.option_help.get(o.name) or (m.lr_meaning if o.name == "lr" else "")
        if o.name in m.defaults:
            words = f"{words} (default {m.defaults[o.name]})" if words else f"default {m.defaults[o.name]}"
        if words:
            said.setdefault(words.replace("%", "%%"), []).append(m.name)   # argparse formats the help
    parts = ([o.help] if o.help else []) + [f"{', '.join(names)}: {words}" for words, names in said.items()]
    if o.methods is OWN:
        parts.append(f"for {', '.join(methods)}")
    return "; ".join(parts)


OPTIONS = tuple(_of_registry(o) for o in _OPTIONS)
