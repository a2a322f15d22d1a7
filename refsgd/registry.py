"""Every method of ``refsgd train --algo``, one :class:`Method` each: what the rest of refsgd knows
about a method is here, and every table keyed by a method's name derives from :data:`METHODS`.

A method is its ``--algo`` name, its paper and listing (a section of docs/algorithms.md), its
``train(run)`` entry point, its serial rendering and its own checks of its options (dotted paths
``module:function``, so that this module imports neither MPI nor NumPy), how many parameter
servers it takes, what makes up its micro-batches, the options that apply to it, what ``--lr``
multiplies, whether its backward pass polls a request in flight, the paper's defaults, its timing model (refsgd.bench.models), its
timeline schedule (refsgd.timeline.gantt), its colour in figures, and its golden configurations
(tests/golden). A method that has no timing model or no timeline schedule says why in ``lacks``.

Adding a method: docs/contributing.md. The generic checks of every entry are
tests/methods/test_registry_checks.py.
"""

import dataclasses
import enum
import importlib
import typing

from refsgd.errors import RefsgdError, did_you_mean

class MicroBatches(enum.Enum):
    """Method.micro_batches: the micro-batches of one iteration per worker."""

    TAU = "tau"             # --tau, accumulated
    ONE = "one"             # one (--tau 1 only)
    THREADS = "threads"     # --threads (PP-ASGD's gradient threads, one sub-batch each)


TAU, ONE, THREADS = MicroBatches


class Update(enum.Enum):
    """Method.update: its update's kind, as refsgd.bench.models.update_seconds times it (U is the
    local optimizer refsgd.optim.SGD, N the workers, B the batches between merges)."""

    U_OVER_N = "U/N"                     # U with the sum divided by N within the step (SSGD)
    U_OVER_N_MERGE = "U/N, merge/B"      # the same, and DASO's eq. 1 merge every B batches
    DIVIDE_U = "1/N, U"                  # 1/N before the send, then U (LAGA)
    DIVIDE_U_NESTEROV = "1/N, U Nesterov"  # the same with Nesterov's momentum
    U_MEAN = "U, mean/B"                 # U, no 1/N, and the mean of the models every B steps (local SGD)
    PREDICT = "predict"                  # Sato et al.'s momentum with parameter prediction
    FUSED = "fused"                      # w <- w - gamma g_sum, one fused pass (Pipe-SGD)
    CORRECTED = "corrected"              # DC-S3GD's corrected step
    COMPENSATED = "compensated"          # DC-ASGD's compensated step


class Timing(enum.Enum):
    """Method.timing_model: its model of one iteration's seconds (refsgd.bench.models.TIMINGS
    holds the function of each; the value is that function's name)."""

    SEQUENTIAL = "sequential"
    PER_LAYER = "per_layer"
    OVERLAPPED = "overlapped"
    PIPELINED = "pipelined"
    HIERARCHICAL = "hierarchical"
    PERIODIC = "periodic"
    PS_SYNC = "ps_sync"
    PS_ASYNC = "ps_async"


class Schedule(enum.Enum):
    """Method.schedule: how refsgd.timeline.gantt draws its modelled iteration."""

    BLOCKING = "blocking"      # compute, all-reduce, update
    LAGGED = "lagged"          # all-reduce iteration t-1's result while iteration t computes
    PIPELINED = "pipelined"    # Pipe-SGD's thread all-reduces while the computation runs K ahead

#: the options of the local optimizer U (refsgd.optim.SGD) and of the methods' own updates
MOMENTUM_U = ("momentum", "nesterov", "momentum_form", "weight_decay")


@dataclasses.dataclass(frozen=True)
class Golden:
    """One golden file of tests/golden: ``refsgd golden --algo NAME --workers W`` with ``options``
    (option name -> value, as the command line takes them; ``steps`` is golden's own), written to
    ``file``."""

    file: str
    workers: int
    options: dict

    def argv(self, algo):
        """The command line of ``refsgd golden`` that writes this file (less --out)."""
        out = ["--algo", algo, "--workers", str(self.workers)]
        for k, v in self.options.items():
            out += ["--" + k.replace("_", "-")] + ([] if v is True else [str(v)])
        return out


@dataclasses.dataclass(frozen=True, kw_only=True)
class Method:
    """Everything refsgd knows about one method (see the module docstring); keyword arguments only."""

    name: str                       # the --algo name
    summary: str                    # its line in `refsgd train --list`
    paper: str                      # the paper (short citation)
    listing: tuple                  # (section of docs/algorithms.md, the listing in the paper)
    train: str                      # "module:function", the MPI loop train(run)
    serial: str                     # "module:function", the serial rendering f(net, data, cfg, schedule, N, T)
    colour: str                     # its colour in figures (refsgd report --plot)
    check: str = None               # "module:function", its own checks of its options f(cfg, world), MPI-free
    servers: int = 0                # leading ranks that are parameter servers (no data)
    micro_batches: MicroBatches = TAU   # TAU, ONE or THREADS (see above)
    by_gradients: bool = False      # unless --staleness: its iterations consume the gradients that arrived
    optimizer: tuple = ()           # the options of its update among MOMENTUM_U
    options: tuple = ()             # its own options (refsgd.options.table, group "method" and the like)
    lr_meaning: str = "eta, times the mean gradient over workers and samples"   # what --lr multiplies
    polled: bool = False            # its backward pass has a request in flight (tested unless --no-poll)
    in_flight_at_boundary: bool = False  # its communication may still be in flight when an iteration ends (a
    #                                 request or a thread's collective): the run's loss check is then lagged
    compressed: bool = False        # its trajectory has a compressed all-reduce whatever --compress says
    defaults: dict = dataclasses.field(default_factory=dict)  # the paper's defaults (option -> value)
    option_help: dict = dataclasses.field(default_factory=dict)  # option shared with others -> what it is here
    hint: str = ""                  # why it has fewer options than one might expect (an error's hint)
    update_note: str = ""           # its update in the header's words, where the options do not say it
    no_allreduce: str = ""          # a method without --allreduce: why (its sums are its own)
    one_worker: str = ""            # why it is plain SGD with a server and one worker (2 ranks), if it is
    timing_model: Timing = None     # its model of one iteration's seconds (refsgd.bench.models)
    timing_text: str = ""           # that model in words, with its source
    update: Update = None           # its update's kind, as refsgd.bench.models.update_seconds times it
    lr_of_sum: bool = False         # --lr multiplies a sum over samples, sub-batches and workers (Sato et al.)
    schedule: Schedule = None       # its timeline schedule (refsgd.timeline.gantt)
    example: tuple = ()             # options of a short 2-rank run whose --timeline window communicates
    goldens: tuple = ()             # Golden files of tests/golden
    variant: dict = dataclasses.field(default_factory=dict)  # its choices in a train(run) that several methods share
    lacks: dict = dataclasses.field(default_factory=dict)  # piece ("timing_model", "schedule") -> why it has none

    @property
    def section(self):
        """Its section of docs/algorithms.md."""
        return self.listing[0]

    @property
    def applies(self):
        """Every option that applies to it besides those of every method."""
        return self.optimizer + self.options

    def micro_batches_of(self, cfg):
        """Micro-batches of one iteration per worker of the run ``cfg`` (resolved): --tau, or
        PP-ASGD's G threads' sub-batches."""
        return cfg.threads if self.micro_batches == THREADS else cfg.tau

    def iterations_per_epoch(self, cfg, n_train, workers):
        """Iterations of an epoch of ``n_train`` samples over ``workers`` workers (RefsgdError when
        the training set is too small for one)."""
        k = self.micro_batches_of(cfg)
        n = n_train // (workers * cfg.batch * k)
        if n == 0:
            raise RefsgdError(f"the training set has {n_train} samples: too few for {workers} workers x "
                              f"batch {cfg.batch} x {k} micro-batches")
        return n

    def counts_gradients(self, cfg):
        """Whether the run's iterations consume however many gradients have arrived (PP-ASGD and
        ASGD with free-running gradient threads): --epochs then counts gradients, not iterations."""
        return self.by_gradients and cfg.staleness is None


def _golden(file, workers, **options):
    return Golden(file, workers, options)


_SSGD = "SSGD, SSGD-OPT, D-Sync and SSGD-NAG"
_DC = "DC-S3GD and DC-ASGD"
_SATO_HELP = dict(batch="each gradient thread's sub-batch",
                  threads="each adding the summed gradient of its sub-batches of --batch samples (default 2)")
_SATO = dict(momentum=0.99, lr=3e-6, batch=8)   # Sato et al. 2017: mu = 0.99, lambda times a sum of gradients
_SATO_LR = "lambda, times the sum of the gradients over samples, sub-batches and processes (Sato Alg. 1)"
_PIPE_LR = "gamma, times the sum over workers of their mean gradients (Li et al. 2018{})"
_ASYNC = ("asynchronous threads: the update thread consumes whatever gradients arrived; bench "
          "overlap measures it, no formula models it")
_NO_DRAWING = "the Gantt chart draws the modelled schedule of the blocking, lagged and pipelined methods only"
_SUMS = ("allreduce",)          # --allreduce: the methods that sum over ranks

_LIST = [
    Method(name="ssgd", summary="SSGD, LAGA paper (Hakimi et al. 2021) Algorithms 1-2", paper="Hakimi et al. 2021",
           listing=(_SSGD, "Algorithms 1-2"), train="refsgd.algorithms.ssgd:train_ssgd",
           serial="refsgd.serial.ssgd:ssgd", colour="#1f77b4",
           optimizer=MOMENTUM_U, options=("compress",) + _SUMS,
           update=Update.U_OVER_N,
           timing_model=Timing.SEQUENTIAL, timing_text="tau t_C + T_AR + t_up (Rigazzi eq. 13, LAGA eq. 3)",
           schedule=Schedule.BLOCKING, example=("--tau", "2"),
           goldens=(_golden("ssgd-n2.h5", 2, steps=10, tau=2, momentum=0.9, lr=0.1, batch=16, model="digits_tiny",
                            seed=1),
                    _golden("ssgd-n4.h5", 4, steps=10, tau=1, lr=0.2, batch=8, model="digits_tiny", seed=2),
                    _golden("ssgd-fp16-n4.h5", 4, steps=10, compress="fp16", lr=0.2, batch=8, model="digits_tiny",
                            seed=11))),
    Method(name="ssgd-opt", summary="SSGD-OPT, per-layer non-blocking all-reduce in the backward pass (LAGA sections 1 "
           "and 5, PyTorch DDP)", paper="Hakimi et al. 2021", listing=(_SSGD, "SSGD-OPT (sections 1 and 5)"),
           train="refsgd.algorithms.ssgd:train_ssgd_opt", serial="refsgd.serial.ssgd:ssgd_opt", colour="#17becf",
           optimizer=MOMENTUM_U, options=_SUMS, polled=True,
           update=Update.U_OVER_N,
           timing_model=Timing.PER_LAYER, timing_text="tau t_C + max(R, T_AR - 2/3 t_C) + t_up (LAGA eq. 4)",
           example=("--tau", "2"), lacks={"schedule": _NO_DRAWING},
           goldens=(_golden("ssgd-opt-n2.h5", 2, steps=10, tau=2, momentum=0.9, nesterov=True, lr=0.1, batch=16,
                            model="digits_tiny", seed=15),)),
    Method(name="ssgd-nag", summary="SSGD with NAG, Sato et al. 2017 Algorithm 4", paper="Sato et al. 2017",
           listing=(_SSGD, "Algorithm 4"),
           train="refsgd.algorithms.ssgd:train_ssgd_nag", serial="refsgd.serial.ssgd:ssgd_nag", colour="#0b3d91",
           optimizer=("momentum",), options=("threads", "compress") + _SUMS,
           lr_of_sum=True,
           lr_meaning="lambda, times the sum of the gradients over samples, sub-batches and workers (Sato Alg. 4)",
           defaults=dict(momentum=0.99, lr=2e-5),
           option_help=dict(threads="the G sub-batches of a step, computed by G threads (the same as --tau G; "
                                    "default 1)"),
           hint=": its update is M = mu*M - lambda*D_A, w = w + M, w^ = w + mu*M (Sato Alg. 4)",
           update=Update.PREDICT,
           timing_model=Timing.SEQUENTIAL, timing_text="tau t_C + T_AR + t_up (Sato Alg. 4)", schedule=Schedule.BLOCKING,
           example=("--tau", "2", "--compress", "fp16"),
           goldens=(_golden("ssgd-nag-n2.h5", 2, steps=10, tau=1, momentum=0.9, lr=0.002, batch=16,
                            model="digits_tiny", seed=3),)),
    Method(name="dcs3gd", summary="DC-S3GD, Rigazzi 2019 Algorithm 1 (eq. 7-12, 17)", paper="Rigazzi 2019",
           listing=(_DC, "Algorithm 1"),
           train="refsgd.algorithms.dcs3gd:train", serial="refsgd.serial.dc:dcs3gd", colour="#ff7f0e",
           check="refsgd.options.checks:dcs3gd", micro_batches=ONE,
           optimizer=("momentum", "weight_decay"), options=("wd_k", "lambda0", "lambda_norm") + _SUMS, polled=True,
           defaults=dict(momentum=0.9),   # Rigazzi 2019: MXNet momentum 0.9
           hint=": its U is MXNet's momentum SGD, v = mu*v - eta*(g + wd*w), as in the paper",
           update_note="U: MXNet momentum v = mu*v - eta*(g + wd*w)",
           update=Update.CORRECTED,
           timing_model=Timing.OVERLAPPED, timing_text="max(t_C + R, T_AR) + t_up (Rigazzi eq. 14)", schedule=Schedule.LAGGED,
           goldens=tuple(_golden(f"dcs3gd{tag}-n4.h5", 4, steps=10, momentum=0.9, lr=0.1, lambda0=0.2, **norm,
                                 weight_decay=0.001, schedule="warmup-linear:warmup_iters=3,total_iters=10", batch=8,
                                 model="digits_tiny", seed=4)
                         for tag, norm in (("", {}), ("-tensor", dict(lambda_norm="tensor"))))),
    Method(name="dcasgd",
           summary="DC-ASGD, Zheng et al. 2017, parameter server on rank 0 (the baseline of Rigazzi 2019)",
           paper="Zheng et al. 2017", listing=(_DC, "DC-ASGD (server S1-S4, workers W1-W3)"),
           train="refsgd.algorithms.dcasgd:train", serial="refsgd.serial.dc:dcasgd", colour="#d62728",
           check="refsgd.options.checks:dcasgd", servers=1, micro_batches=ONE,
           optimizer=("weight_decay",), options=("dc_lambda", "dc_adaptive", "dc_ms_decay", "ps_order"),
           lr_meaning="eta, times one worker's mean gradient per push (Zheng et al. 2017)",
           no_allreduce="its server applies each worker's gradient in turn, nothing is summed over ranks",
           one_worker="one worker: no gradient is stale, the delay compensation is zero and dcasgd is plain SGD",
           update=Update.COMPENSATED,
           timing_model=Timing.PS_ASYNC, timing_text="max(t_C + 2 T_msg + t_up, (p-1)(2 T_msg + t_up)) (PS, async)",
           lacks={"schedule": _NO_DRAWING},
           goldens=(_golden("dcasgd-n3.h5", 3, steps=10, ps_order="round-robin", dc_lambda=0.04, lr=0.1, batch=16,
                            model="digits_tiny", seed=5),)),
    Method(name="laga-sgd",
           summary="LAGA-SGD, lagged non-blocking all-reduce with gradient accumulation, Hakimi et al. 2021 "
           "Algorithm 3", paper="Hakimi et al. 2021", listing=("LAGA", "Algorithm 3"),
           train="refsgd.algorithms.laga:train", serial="refsgd.serial.laga:laga_sgd", colour="#2ca02c",
           optimizer=("weight_decay",), options=_SUMS, polled=True,
           hint=": Algorithm 3 has no momentum (laga-sgdm and laga-sgdn have)",
           update=Update.DIVIDE_U,
           timing_model=Timing.OVERLAPPED, timing_text="max(tau t_C + R, T_AR) + t_up (LAGA eq. 6)", schedule=Schedule.LAGGED,
           in_flight_at_boundary=True,
           example=("--tau", "2"),
           goldens=(_golden("laga-sgd-n2.h5", 2, steps=10, tau=2, weight_decay=0.001, lr=0.1, batch=16,
                            model="digits_tiny", seed=16),)),
    Method(name="laga-sgdm", summary="LAGA-SGDM, LAGA with momentum, Hakimi et al. 2021 Algorithm 4",
           paper="Hakimi et al. 2021",
           listing=("LAGA", "Algorithm 4"), train="refsgd.algorithms.laga:train", serial="refsgd.serial.laga:laga_sgdm",
           colour="#7fbf3f", optimizer=("momentum", "weight_decay"), options=_SUMS, polled=True,
           variant=dict(momentum=True),
           defaults=dict(momentum=0.9),   # Hakimi et al. 2021: gamma = 0.9
           update=Update.DIVIDE_U,
           timing_model=Timing.OVERLAPPED, timing_text="max(tau t_C + R, T_AR) + t_up (LAGA eq. 6)", schedule=Schedule.LAGGED,
           in_flight_at_boundary=True,
           goldens=(_golden("laga-sgdm-n2.h5", 2, steps=10, tau=2, momentum=0.9, lr=0.1, batch=16,
                            model="digits_tiny", seed=6),)),
    Method(name="laga-sgdn", summary="LAGA-SGDN, LAGA with Nesterov momentum (y = x - eta*gamma*m), Hakimi et al. 2021 "
           "Algorithm 5", paper="Hakimi et al. 2021", listing=("LAGA", "Algorithm 5"),
           train="refsgd.algorithms.laga:train", serial="refsgd.serial.laga:laga_sgdn", colour="#bcbd22",
           optimizer=("momentum", "weight_decay"), options=_SUMS, polled=True, defaults=dict(momentum=0.9),
           variant=dict(momentum=True, nesterov=True),
           update=Update.DIVIDE_U_NESTEROV,
           timing_model=Timing.OVERLAPPED, timing_text="max(tau t_C + R, T_AR) + t_up (LAGA eq. 6)", schedule=Schedule.LAGGED,
           in_flight_at_boundary=True,
           goldens=(_golden("laga-sgdn-n4.h5", 4, steps=10, tau=2, momentum=0.9, lr=0.1, weight_decay=0.001,
                            batch=8, model="digits_tiny", seed=7),)),
    Method(name="pipe-sgd",
           summary="Pipe-SGD, pipelined all-reduce with iteration dependency K and a communication thread, "
           "Li et al. 2018 Algorithm 1", paper="Li et al. 2018", listing=("Pipe-SGD", "Algorithm 1"),
           train="refsgd.algorithms.pipesgd:train_pipe_sgd", serial="refsgd.serial.pipesgd:pipe_sgd", colour="#9467bd",
           check="refsgd.options.checks:pipe_sgd",
           micro_batches=ONE, options=("dependency", "warmup_epochs", "compress") + _SUMS, in_flight_at_boundary=True,
           lr_meaning=_PIPE_LR.format(", Alg. 1"),
           option_help=dict(warmup_epochs="with dependency 1 (D-Sync), as the paper trains AlexNet and ResNet "
                                          "(default 0)"),
           update=Update.FUSED,
           timing_model=Timing.PIPELINED, timing_text="max(t_up + t_C, T_AR), K = 2 (Pipe-SGD eq. 4, 5; one core per "
                                                 "rank: max(t_up + t_C + R, T_AR))",
           schedule=Schedule.PIPELINED, example=("--dependency", "2", "--compress", "t16"),
           goldens=(_golden("pipe-sgd-k2-n4.h5", 4, steps=10, dependency=2, lr=0.05, batch=8, model="digits_tiny",
                            seed=8),
                    _golden("pipe-sgd-k2-t16-n4.h5", 4, steps=10, dependency=2, compress="t16", lr=0.05, batch=8,
                            model="digits_tiny", seed=9),
                    _golden("pipe-sgd-k2-q8v-n4.h5", 4, steps=10, dependency=2, compress="q8v", lr=0.05, batch=8,
                            model="digits_tiny", seed=9))),
    Method(name="d-sync",
           summary="D-Sync, decentralized synchronous SGD with the summed gradient (Pipe-SGD's baseline)",
           paper="Li et al. 2018", listing=(_SSGD, "D-Sync (Pipe-SGD's baseline)"),
           train="refsgd.algorithms.pipesgd:train_d_sync", serial="refsgd.serial.pipesgd:d_sync", colour="#e377c2",
           check="refsgd.options.checks:pipe_sgd", micro_batches=ONE,
           options=("compress",) + _SUMS, lr_meaning=_PIPE_LR.format(""),
           update=Update.FUSED,
           timing_model=Timing.SEQUENTIAL, timing_text="t_C + T_AR + t_up (Pipe-SGD eq. 2, 5)", schedule=Schedule.BLOCKING,
           example=("--compress", "q8"),
           goldens=(_golden("d-sync-n2.h5", 2, steps=10, lr=0.05, batch=16, model="digits_tiny", seed=10),)),
    Method(name="ps-sync",
           summary="PS-Sync, synchronous SGD through a parameter server on rank 0 (Pipe-SGD's baseline)",
           paper="Li et al. 2018", listing=("Pipe-SGD", "PS-Sync (server S1-S4, workers W1-W3)"),
           train="refsgd.algorithms.pipesgd:train_ps_sync", serial="refsgd.serial.pipesgd:ps_sync", colour="#7f7f7f",
           check="refsgd.options.checks:pipe_sgd", servers=1,
           micro_batches=ONE, lr_meaning=_PIPE_LR.format(""),
           no_allreduce="its server sums the gathered gradients itself, in rank order (the same bits under any "
                        "MPI library)",
           one_worker="one worker: the server applies its one gradient, ps-sync is plain SGD",
           update=Update.FUSED,
           timing_model=Timing.PS_SYNC, timing_text="t_C + 2 T_PS + (p-2) n gamma + t_up (PS, Pipe-SGD's baseline)",
           lacks={"schedule": _NO_DRAWING},
           goldens=(_golden("ps-sync-n3.h5", 3, steps=10, lr=0.05, batch=16, model="digits_tiny", seed=17),)),
    Method(name="daso", summary="DASO, hierarchical syncs with rotating groups, bf16 blocking and eq.-1 stale syncs, "
           "Coquelin et al. 2022 section 3", paper="Coquelin et al. 2022", listing=("DASO", "section 3 (no listing)"),
           train="refsgd.algorithms.daso:train", serial="refsgd.serial.daso:daso", colour="#8c564b",
           check="refsgd.options.checks:daso", micro_batches=ONE,
           optimizer=MOMENTUM_U,
           options=("warmup_epochs", "cooldown_epochs", "sync_every", "plateau_patience", "plateau_threshold",
                    "ranks_per_node", "local_link") + _SUMS, polled=True, compressed=True, in_flight_at_boundary=True,
           defaults=dict(warmup_epochs=1),   # Coquelin et al. 2022: one epoch of blocking syncs
           option_help=dict(sync_every="B_max, B when cycling starts; the wait W starts at max(1, B/4), and both "
                                       "halve at each plateau (default 4, the paper's)",
                            warmup_epochs="sync globally every batch, blocking"),
           hint=": its blocking global syncs carry bf16 and its cycling syncs float32, by the method",
           update=Update.U_OVER_N_MERGE,
           timing_model=Timing.HIERARCHICAL,
           timing_text="t_C + T_loc + t_up + (T_bc + max(R_g, T_AR_g - W it))/B (DASO sec. 3)",
           example=("--ranks-per-node", "1", "--warmup-epochs", "0", "--cooldown-epochs", "0", "--sync-every", "2"),
           lacks={"schedule": _NO_DRAWING},
           goldens=(_golden("daso-2x2-n4.h5", 4, ranks_per_node=2, steps=35, momentum=0.9, lr=0.1, batch=64,
                            sync_every=2, plateau_patience=1, plateau_threshold=0.9, model="digits_tiny", seed=12),)),
    Method(name="pp-asgd",
           summary="PP-ASGD, gradient threads and an update thread, parameter prediction (eq. 2), Sato et al. "
           "2017 Algorithms 1-3", paper="Sato et al. 2017", listing=("PP-ASGD", "Algorithms 1-3"),
           train="refsgd.algorithms.ppasgd:train_pp_asgd", serial="refsgd.serial.ppasgd:pp_asgd", colour="#c51b7d",
           check="refsgd.options.checks:pp_asgd",
           micro_batches=THREADS, by_gradients=True, optimizer=("momentum",),
           options=("threads", "staleness") + _SUMS, lr_of_sum=True, lr_meaning=_SATO_LR, defaults=_SATO,
           option_help=_SATO_HELP,
           lacks={"timing_model": _ASYNC, "schedule": _NO_DRAWING}, example=("--threads", "2"),
           goldens=(_golden("pp-asgd-s3-n2.h5", 2, threads=2, staleness=3, steps=12, momentum=0.9, lr=0.002, batch=8,
                            model="digits_tiny", seed=13),)),
    Method(name="asgd", summary="naive ASGD, PP-ASGD without the prediction (w^ <- w), Sato et al. 2017's baseline",
           paper="Sato et al. 2017", listing=("PP-ASGD", "Algorithms 1-3 without eq. 2"),
           train="refsgd.algorithms.ppasgd:train_asgd", serial="refsgd.serial.ppasgd:asgd", colour="#f0a030",
           check="refsgd.options.checks:pp_asgd",
           micro_batches=THREADS, by_gradients=True, optimizer=("momentum",),
           options=("threads", "staleness") + _SUMS, lr_of_sum=True, lr_meaning=_SATO_LR, defaults=_SATO,
           option_help=_SATO_HELP,
           lacks={"timing_model": _ASYNC, "schedule": _NO_DRAWING}, example=("--threads", "2"),
           goldens=(_golden("asgd-s3-n2.h5", 2, threads=2, staleness=3, steps=12, momentum=0.9, lr=0.002, batch=8,
                            model="digits_tiny", seed=14),)),
    Method(name="local-sgd", summary="Local SGD, H local steps per worker, then the models averaged by one all-reduce, "
           "Lin et al. 2020 Algorithm 1", paper="Lin et al. 2020", listing=("Local SGD", "Algorithm 1"),
           train="refsgd.algorithms.localsgd:train", serial="refsgd.serial.localsgd:local_sgd", colour="#6b8e23",
           check="refsgd.options.checks:local_sgd", micro_batches=ONE,
           optimizer=MOMENTUM_U, options=("sync_every",) + _SUMS,
           option_help=dict(sync_every="H, the local steps of each worker between two averages of the models "
                                       "(default 4)"),
           update=Update.U_MEAN,
           timing_model=Timing.PERIODIC, timing_text="t_C + t_up + T_AR / H (Lin et al. 2020, one all-reduce per H steps)",
           schedule=Schedule.BLOCKING, example=("--sync-every", "2"),
           goldens=(_golden("local-sgd-n2.h5", 2, steps=12, sync_every=3, momentum=0.9, lr=0.1, batch=16,
                            model="digits_tiny", seed=18),)),
]

#: every method, by --algo name, in the order of `refsgd train --list`
METHODS = {m.name: m for m in _LIST}


class Requirement(typing.NamedTuple):
    """One file a new method needs, and the generic check that fails without it (a function of
    tests/methods/test_registry_checks.py, or ``FILE::TEST`` of another test file)."""

    file: str
    what: str
    check: str


#: the files a new method needs, each with the check that requires it: docs/contributing.md's
#: checklist is generated from this table (docs/_ext/refsgd_checklist.py), and
#: tests/methods/test_registry_checks.py fails when a generic check has no row here
REQUIREMENTS = (
    Requirement("refsgd/registry.py", "its `Method` (the template below): a line of `refsgd train --list` says its "
                "summary", "check_train_list"),
    Requirement("refsgd/registry.py", "its timing model (`Method.timing_model`, a `Timing` with a function in "
                "refsgd.bench.models.TIMINGS) and its update's kind (`Method.update`), or why none in "
                "`Method.lacks`", "check_timing_model"),
    Requirement("refsgd/registry.py", "its timeline schedule (`Method.schedule`, a `Schedule`), or why none "
                "in `Method.lacks`", "check_timeline_schedule"),
    Requirement("refsgd/algorithms/NAME.py", "its listing in the module docstring, `train(run)` (`Method.train`) "
                "with the listing's `# Ln` labels and the MPI calls visible", "check_entry_points"),
    Requirement("refsgd/algorithms/NAME.py", "`train` before its kernels and helpers (only `check` and other "
                "`train*` functions before it)", "check_train_comes_first"),
    Requirement("refsgd/serial/NAME.py", "its serial rendering (`Method.serial`), from the equations",
                "check_entry_points"),
    Requirement("refsgd/serial/NAME.py", "what the MPI run traces at its first golden configuration, in the world "
                "session of its size", "test_serial_equals_mpi"),
    Requirement("tests/golden/NAME-nN.h5", "its golden files (`Method.goldens`, written by "
                "`tests/golden/regenerate.sh NAME`)", "check_golden_files"),
    Requirement("tests/methods/test_NAME.py", "`REPLAY`: the outside replay of its golden file, an implementer's "
                "NumPy loop", "check_golden_files"),
    Requirement("docs/algorithms.md", "a section `## TITLE` (`Method.listing`) with the paper, the equations, "
                "every reading taken, `--algo NAME` and its listing's mark", "check_docs_section"),
    Requirement("docs/implementers.md", "a section `## NAME` (or one naming it among others): what an implementer "
                "of it must know to match the golden files", "check_implementers_section"),
    Requirement("docs/architecture.md", "its row of the table of loops against listings (what "
                "`python -m tests.helpers.loop_lines` prints)", "tests/test_loop_lines.py::test_the_table_is_the_measured_one"),
    Requirement("docs/timelines/NAME.png", "its timeline picture, drawn by `./run.sh docs --timelines NAME`",
                "tests/test_docs_pages.py::test_every_method_has_its_row_and_its_page"),
    Requirement("docs/pictures.json", "the commands that drew its picture (the build writes it with the picture)",
                "tests/test_docs_pages.py::test_every_picture_is_drawn_by_the_commands_its_page_shows"),
)


def method(name):
    """The Method of ``name``; an unknown name is one RefsgdError with a did-you-mean."""
    m = METHODS.get(name)
    if m is None:
        raise RefsgdError(f"unknown method --algo {name!r}{did_you_mean(str(name), METHODS)}; "
                          f"`refsgd train --list` shows {', '.join(METHODS)}")
    return m


def entry(dotted):
    """The function of a dotted path ``module:function`` (Method.train, Method.serial), imported."""
    module, _, name = dotted.partition(":")
    return getattr(importlib.import_module(module), name)
