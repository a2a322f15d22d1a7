"""Which options shape which method, their defaults, and the configuration a run records.

Every method reads the options every run has (``COMMON``) and its own (``APPLIES``); an option
that does not apply to the method is refused when given (:func:`resolve`), so that a command
line never means something it does not do, and the configuration written to every output
(metrics, traces, golden files, checkpoints) holds only the options that apply
(:func:`config`). ``refsgd verify`` compares only those (:func:`trajectory_keys`).

Defaults come from the papers where the method has its own (``METHOD_DEFAULTS``): LAGA's
momentum methods use gamma = 0.9, DC-S3GD mu = 0.9, and SSGD-NAG, PP-ASGD and ASGD mu = 0.99 with
a learning rate lambda that multiplies a *sum* of gradients over samples, sub-batches and workers
(Sato et al. 2017, Algorithms 1 and 4), hence a small default.

No MPI here: ``verify`` and ``golden`` use this module without starting MPI.
"""

from refsgd import RefsgdError

#: options of every method that shape its trajectory
COMMON = ("algo", "model", "data", "batch", "tau", "lr", "schedule", "seed", "dtype")

#: options of a run that do not change its trajectory (recorded, never compared by verify)
RUN = ("epochs", "iterations", "eval_every", "log_every", "link", "poll")

#: the methods whose backward pass has a request in flight, tested between layers unless --no-poll
POLLED = ("ssgd-opt", "dcs3gd", "laga-sgd", "laga-sgdm", "laga-sgdn", "daso")

_U = ("momentum", "nesterov", "momentum_form", "weight_decay")  # the local optimizer U (refsgd.optim.SGD)
_A = ("allreduce",)  # the methods that sum over ranks (not the parameter servers dcasgd and ps-sync)

#: method -> the options that apply to it besides COMMON
APPLIES = {
    "ssgd": _U + ("compress",) + _A,
    "ssgd-opt": _U + _A,
    "ssgd-nag": ("momentum", "compress", "threads") + _A,
    "dcs3gd": ("momentum", "weight_decay", "wd_k", "lambda0", "lambda_norm") + _A,
    "dcasgd": ("weight_decay", "dc_lambda", "dc_adaptive", "dc_ms_decay", "ps_order"),
    "laga-sgd": ("weight_decay",) + _A,
    "laga-sgdm": ("momentum", "weight_decay") + _A,
    "laga-sgdn": ("momentum", "weight_decay") + _A,
    "pipe-sgd": ("dependency", "warmup_epochs", "compress") + _A,
    "d-sync": ("compress",) + _A,
    "ps-sync": (),
    "daso": _U + ("warmup_epochs", "cooldown_epochs", "sync_every", "plateau_patience", "plateau_threshold",
                  "ranks_per_node", "local_link") + _A,
    "pp-asgd": ("momentum", "threads", "staleness") + _A,
    "asgd": ("momentum", "threads", "staleness") + _A,
}

#: the defaults of the learning rate and the batch where the method has none of its own
LR, BATCH = 0.05, 32

#: every method option, with its default where the method has none of its own
DEFAULTS = dict(momentum=0.0, nesterov=False, momentum_form="pytorch", weight_decay=0.0,
                lambda0=0.2, lambda_norm="whole", wd_k=2.3, dc_lambda=0.04, dc_adaptive=False, dc_ms_decay=0.95,
                ps_order="arrival", dependency=2, warmup_epochs=0, cooldown_epochs=1, sync_every=4,
                plateau_patience=2, plateau_threshold=0.05, ranks_per_node=None, local_link=None, threads=2,
                staleness=None, compress="none", allreduce="mpi")

#: the papers' own defaults
METHOD_DEFAULTS = {
    "ssgd-nag": dict(lr=2e-5, momentum=0.99),       # Sato et al.: mu = 0.99; lambda times a sum of gradients
    "pp-asgd": dict(lr=3e-6, momentum=0.99, batch=8),  # and small sub-batches (b = 1 on ImageNet)
    "asgd": dict(lr=3e-6, momentum=0.99, batch=8),
    "dcs3gd": dict(momentum=0.9),                   # Rigazzi 2019: MXNet momentum 0.9, lambda_0 0.2
    "laga-sgdm": dict(momentum=0.9),                # Hakimi et al. 2021: gamma = 0.9
    "laga-sgdn": dict(momentum=0.9),
    "daso": dict(warmup_epochs=1),                  # Coquelin et al. 2022: one epoch of blocking syncs
}

#: what --lr multiplies, per method (shown by the header, --help and the README)
LR_MEANING = {
    "ssgd-nag": "lambda, times the sum of the gradients over samples, sub-batches and workers (Sato Alg. 4)",
    "pp-asgd": "lambda, times the sum of the gradients over samples, sub-batches and processes (Sato Alg. 1)",
    "asgd": "lambda, times the sum of the gradients over samples, sub-batches and processes (Sato Alg. 1)",
    "pipe-sgd": "gamma, times the sum over workers of their mean gradients (Li et al. 2018, Alg. 1)",
    "d-sync": "gamma, times the sum over workers of their mean gradients (Li et al. 2018)",
    "ps-sync": "gamma, times the sum over workers of their mean gradients (Li et al. 2018)",
    "dcasgd": "eta, times one worker's mean gradient per push (Zheng et al. 2017)",
}
LR_MEANING_DEFAULT = "eta, times the mean gradient over workers and samples"

_FLAGS = {k: "--" + k.replace("_", "-") for k in DEFAULTS}

#: why a method has fewer options than one might expect
HINTS = {
    "daso": ": its blocking global syncs carry bf16 and its cycling syncs float32, by the method",
    "dcs3gd": ": its U is MXNet's momentum SGD, v = mu*v - eta*(g + wd*w), as in the paper",
    "laga-sgd": ": Algorithm 3 has no momentum (laga-sgdm and laga-sgdn have)",
    "ssgd-nag": ": its update is M = mu*M - lambda*D_A, w = w + M, w^ = w + mu*M (Sato Alg. 4)",
}

#: why --allreduce does not apply to the parameter-server methods: their sums are refsgd's own
_NO_SUM = {
    "dcasgd": "its server applies each worker's gradient in turn, nothing is summed over ranks",
    "ps-sync": "its server sums the gathered gradients itself, in rank order (the same bits under any "
               "MPI library)",
}


def default(algo, name):
    """The default of option ``name`` (a method option, "lr" or "batch") for method ``algo``."""
    return METHOD_DEFAULTS.get(algo, {}).get(name, {"lr": LR, "batch": BATCH}.get(name) or DEFAULTS.get(name))


def value(cfg, name):
    """Option ``name`` of a configuration namespace, or the method's default when it is absent or
    None (configurations built by hand, e.g. in tests, need not list every option)."""
    v = getattr(cfg, name, None)
    return default(getattr(cfg, "algo", None), name) if v is None else v


def lr_meaning(algo):
    return LR_MEANING.get(algo, LR_MEANING_DEFAULT)


def resolve(args):
    """Refuse the options given that do not apply to ``args.algo``, and fill the others' defaults
    (in place; returns args). An option counts as given when it is not None (the command line's
    defaults are None)."""
    algo = args.algo
    applies = APPLIES[algo]
    given = [k for k in DEFAULTS if k not in applies and getattr(args, k, None) not in (None, False)]
    if given == ["allreduce"] and algo in _NO_SUM:
        raise RefsgdError(f"--allreduce does not apply to --algo {algo}: {_NO_SUM[algo]}")
    if given:
        flags = ", ".join(_FLAGS[k] for k in given)
        own = ", ".join(_FLAGS[k] for k in applies) or "none"
        where = "; ".join(f"{_FLAGS[k]} applies to --algo {', '.join(m for m in APPLIES if k in APPLIES[m])}"
                          for k in given)
        raise RefsgdError(f"{flags} {'does' if len(given) == 1 else 'do'} not apply to --algo {algo}"
                          f"{HINTS.get(algo, '')} ({where}; the options of {algo}: {own})")
    if algo == "ssgd-nag":  # --threads G: the G sub-batches of a step in G threads, i.e. --tau G
        G, tau = getattr(args, "threads", None), getattr(args, "tau", 1) or 1
        if G is not None and tau not in (1, G):
            raise RefsgdError(f"--threads {G} and --tau {tau}: ssgd-nag computes its --tau sub-batches of a step "
                              "in as many threads (Sato Alg. 4), so --threads is --tau; give one of them")
        args.threads = args.tau = G or tau
    if algo == "dcasgd" and getattr(args, "dc_ms_decay", None) is not None and not getattr(args, "dc_adaptive", None):
        raise RefsgdError("--dc-ms-decay is the decay of MeanSquare in the adaptive lambda: it needs --dc-adaptive")
    for k in DEFAULTS:  # those that do not apply too, so that no code path meets a None
        if getattr(args, k, None) is None:
            setattr(args, k, default(algo, k))
    for k in ("lr", "batch"):
        if getattr(args, k, None) is None:
            setattr(args, k, default(algo, k))
    return args


def config(args, extra=(), run=True):
    """The configuration a run records: COMMON, RUN (unless not ``run``: a golden file), ``extra``
    and the method's own options."""
    run_keys = tuple(k for k in RUN if k != "poll" or args.algo in POLLED) if run else ()
    keys = COMMON + run_keys + tuple(extra) + APPLIES[args.algo]
    return {k: getattr(args, k, None) for k in keys}


#: method options that do not change the trajectory either (DASO's emulated node-local link)
_TIMING_ONLY = {"local_link"}

#: method options that change only the roundings of the trajectory, not its equations: the order of
#: the sums over ranks (--allreduce mpi: the MPI library's; ring: the serial renderings'). verify
#: does not compare it (a trace of either verifies against a golden file within round-off, bitwise
#: with ring), and names it when the two sides differ (refsgd.trace.verify)
ROUNDING_ONLY = {"allreduce"}


def trajectory_keys(algo, config=None):
    """The configuration entries that shape ``algo``'s trajectory (what verify compares); given
    the recorded ``config`` (a dict), less those its other entries make irrelevant (dcasgd's
    MeanSquare decay without the adaptive lambda)."""
    keys = (set(COMMON) | set(APPLIES.get(algo, ()))) - _TIMING_ONLY - ROUNDING_ONLY
    if algo == "ssgd-nag":  # its threads are its tau sub-batches: tau says it (and golden files made before)
        keys.discard("threads")
    if config is not None and not config.get("dc_adaptive"):
        keys.discard("dc_ms_decay")
    return keys


#: the parameter-server methods that are plain SGD with one worker (nothing is stale, no one waits)
_ONE_WORKER = {
    "dcasgd": "one worker: no gradient is stale, the delay compensation is zero and dcasgd is plain SGD",
    "ps-sync": "one worker: the server applies its one gradient, ps-sync is plain SGD",
}


def one_worker_note(algo, world):
    """Why a parameter-server method on 2 ranks (a server and one worker) is plain SGD, or None."""
    return _ONE_WORKER.get(algo) if world == 2 else None
