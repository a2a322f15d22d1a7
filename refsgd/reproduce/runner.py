"""The runs of a claim: ``mpiexec -n P refsgd train ... --out F.h5`` through the project's
launcher (:func:`refsgd.bench.suite.launch`: the MPI library's own mpiexec, one BLAS/Numba
thread per rank), each read back with :func:`refsgd.report.load`, with the machine's load
before and after it. Identical commands within one ``refsgd reproduce`` run once (a calibration
run that two claims share)."""

import dataclasses
import functools
import os
import re
import time

from refsgd import report
from refsgd.bench import suite
from refsgd.errors import RefsgdError
from refsgd.busy import load_average
from refsgd.busy import usable_cores as cores  # noqa: F401 -- refsgd.reproduce's warnings use it
from refsgd.datasets import load
from refsgd.datasets.download import cached


#: at most this many ranks per usable core (a claim's runs take ranks + 1 processes with a server):
#: past one per core timing claims mean nothing, past this the runs only time-slice, and a typo
#: (--ranks 100000) would start processes by the thousand
MAX_RANKS_PER_CORE = 4
#: --quick: a run given in epochs stops after at most this many iterations and this many samples per
#: worker (at least 2 iterations): a smoke test of every claim's path, within 5 minutes for `all`
#: on 2 cores with MNIST cached; not a result
QUICK_ITERATIONS = 40
QUICK_SAMPLES = 1280
#: at most this many seeds: each runs every variant of a claim again (about 10 minutes per seed
#: for `all` on 2 idle cores)
MAX_SEEDS = 20
#: the seeds of a claim without --seeds: DEFAULT_SEEDS, FAST_SEEDS for a claim that takes under
#: FAST_BUDGET s per seed (enough seeds that the spread beside each band shows), one with --quick
DEFAULT_SEEDS, FAST_SEEDS, FAST_BUDGET = 3, 5, 60


def default_seeds(claim, quick):
    """A claim's seeds when --seeds is not given (see DEFAULT_SEEDS)."""
    if quick:
        return 1
    return FAST_SEEDS if claim.budget[1] < FAST_BUDGET else DEFAULT_SEEDS


@dataclasses.dataclass
class Setup:
    """What every claim of one ``refsgd reproduce`` call shares (its counts checked: at most
    MAX_RANKS_PER_CORE ranks per usable core, at most MAX_SEEDS seeds)."""

    ranks: int = 2
    data: str = None  # None: the embedded digits
    link: str = None  # --link for the timing claims; None: one chosen from the measured compute
    quick: bool = False
    seeds: int = None  # None: each claim's default_seeds
    workdir: str = "."
    timeout: int = 900
    log: object = None
    #: the 1/5/15-minute load averages when the command started (before its first run): a claim's
    #: own earlier runs keep the load average up for a minute, so the load is judged here once
    load_at_start: list = None
    data_missing: str = None  # why a claim's data is not here (Setup.for_claim)

    def for_claim(self, claim):
        """The setup a claim runs with: an accuracy claim (``claim.data`` "mnist") without --data
        takes MNIST from the download cache (``refsgd data download mnist``), ``data_missing`` set
        where the cache has none; a timing claim keeps the setup's data (default the embedded digits:
        its timing model depends on the network's compute and size, not on the images)."""
        s = dataclasses.replace(self)
        s.data_missing = None
        if s.seeds is None:
            s.seeds = default_seeds(claim, s.quick)
        if claim.data and self.data is None:
            path = cached_data(claim.data)
            if path is None:
                s.__dict__["kind"] = claim.data  # its hyperparameters are those it would run with
                s.data_missing = (f"{claim.data.upper()} is not in the download cache, and this claim needs data "
                                  f"that resolves its effects: run `refsgd data download {claim.data}` (or give "
                                  "--data)")
            s.data = path
        return s

    def __post_init__(self):
        most = MAX_RANKS_PER_CORE * cores()
        if not 1 <= self.ranks <= most:
            raise RefsgdError(f"--ranks {self.ranks}: reproduce runs at most {most} ranks here ({MAX_RANKS_PER_CORE} "
                              f"per core on {cores()} usable cores; one per core for the timing claims)")
        if self.seeds is not None and not 1 <= self.seeds <= MAX_SEEDS:
            raise RefsgdError(f"--seeds {self.seeds}: give 1 .. {MAX_SEEDS} (each seed runs every variant of "
                              "a claim again)")

    def say(self, line):
        if self.log:
            self.log(line)

    @functools.cached_property
    def kind(self):
        """"digits", "mnist" (any 1 x 28 x 28 set) or "cifar10"."""
        if self.data is None:
            return "digits"
        d = load(self.data)
        shape = d.image_shape
        if shape == (1, 28, 28):
            return "mnist"
        if shape == (3, 32, 32) and d.num_classes == 10:
            return "cifar10"
        raise RefsgdError(f"--data {self.data}: reproduce knows MNIST-like (1x28x28) and CIFAR-10 datasets, "
                          f"not images of shape {shape}")

    def model(self, role):
        """The model of a claim: ``role`` "accuracy" (cheap, learns) or "timing" (a gradient long
        enough next to the per-iteration overhead for a timing model to mean something)."""
        kind = self.kind
        if kind == "digits":
            return "digits_mlp" if role == "accuracy" else "digits_cnn"
        return "mnist_mlp" if kind == "mnist" else "cifar10_cnn"


def cached_data(name):
    """The path of dataset ``name`` in ``refsgd data download``'s cache, or None."""
    path = cached(name)
    return str(path) if path else None


class Runs:
    """Launches training runs and keeps what a claim's JSON records of each."""

    def __init__(self, setup):
        self.setup = setup
        self.records = []  # every run launched for the current claim, in order
        self._done = {}  # (ranks, trace, argv without --out) -> (path, trace path, record)
        self._used = set()  # the keys read at least once
        self._count = 0

    def start_claim(self):
        self.records = []

    def train(self, algo, seed, ranks=None, trace=False, variant=None, timed=True, cluster=None, **options):
        """Run ``refsgd train --algo ALGO`` on ``ranks`` (default the setup's) with ``options``
        (train's options, ``_`` for ``-``; True for a flag) and return its :class:`report.Run`
        (with ``.trace_path`` when ``trace``). ``variant`` names the run in the outputs (default
        the method with its --compress, --tau, --staleness); ``timed`` False: no timing check reads
        the run (its time-slicing then does not make the claim's timing checks untestable);
        ``cluster`` (:class:`refsgd.reproduce.cluster.Cluster`): across its nodes, one rank per
        node, instead of this machine's mpiexec."""
        ranks = ranks or self.setup.ranks
        if self.setup.quick:
            options = self._quick(options, ranks)
        argv = ["train", "--algo", algo, "--seed", str(seed)]
        if self.setup.data is not None and "data" not in options:
            argv += ["--data", self.setup.data]
        for k, v in options.items():
            if v is None or v is False:
                continue
            argv += [f"--{k.replace('_', '-')}"] + ([] if v is True else [str(v)])
        argv += ["--no-progress"]
        key = (ranks, trace, tuple(argv), str(cluster or ""))
        if key not in self._done:
            self._count += 1
            path = os.path.join(self.setup.workdir, f"run{self._count:03d}-{algo}.h5")
            extra = ["--out", path, "--force"]
            tpath = None
            if trace:
                tpath = path[:-3] + ".trace.h5"
                extra += ["--trace", tpath]
            shown = (f"scripts/cluster run --name {cluster.name} -- -n {ranks} -ppn 1" if cluster else
                     f"mpiexec -n {ranks}") + f" refsgd {' '.join(argv)}"
            self.setup.say(f"running {shown}")
            before, t0 = load_average(), time.perf_counter()
            diverged = None
            try:
                suite.launch(ranks, argv + extra, timeout=self.setup.timeout, via=cluster and cluster.command,
                             shown=shown)
            except RefsgdError as e:
                diverged = _divergence(str(e))
                if diverged is None:
                    raise
                self.setup.say(f"diverged ({diverged}): recorded, the claim goes on")
            record = {"command": shown, "ranks": ranks, "seconds": round(time.perf_counter() - t0, 3),
                      "load_before": before, "load_after": load_average(), "diverged": diverged,
                      **({"cluster": str(cluster)} if cluster else {})}
            self._done[key] = (path, tpath, record)
        path, tpath, record = self._done[key]
        if variant is None:
            variant = algo + "".join(f" {k}={options[k]}" for k in ("compress", "tau", "staleness") if k in options)
        # a run that this or an earlier claim launched before is read again, not run again
        self.records.append(dict(record, shared=key in self._used, variant=variant, algo=algo, ranks=ranks, timed=timed,
                                 options={k: v for k, v in options.items() if v is not None and v is not False}))
        self._used.add(key)
        if record["diverged"]:
            return Diverged(algo, ranks, record["diverged"])
        run = report.load(path)
        run.trace_path = tpath
        run.diverged = None
        return run


    def _quick(self, options, ranks):
        """--quick: ``options`` with --epochs replaced by --iterations N where the epochs are
        longer (an epoch of MNIST at 2 x 32 samples is 937 iterations): N = QUICK_ITERATIONS, fewer
        where an iteration takes more than 32 samples per worker (QUICK_SAMPLES), at least 2 and
        at least --staleness + QUICK_ITERATIONS / 2; evaluating twice."""
        if not options.get("epochs"):
            return options
        per_worker = int(options.get("batch", 32)) * int(options.get("tau", 1))
        per_epoch = load(self.setup.data).n_train // (per_worker * ranks)
        # a deterministic staleness S needs more than S iterations (PP-ASGD's S = 27)
        stale = int(options.get("staleness", 0))
        n = max(2, stale + QUICK_ITERATIONS // 2 if stale else 2, min(QUICK_ITERATIONS, QUICK_SAMPLES // per_worker))
        if per_epoch * int(options["epochs"]) <= n:
            return options
        out = dict(options, epochs=None, iterations=n)
        if "eval_every" in out:
            out["eval_every"] = f"{n // 2}it"
        return out


def _divergence(message):
    """What a failed run's error says of a divergence ("at iteration N: ..."), or None when it
    failed otherwise (then the claim stops: a crash is not a result)."""
    m = re.search(r"(?:became non-finite at|is not finite after) iteration (\d+)", message)
    return f"the loss or the weights became non-finite at iteration {m.group(1)}" if m else None


class Diverged:
    """A run that diverged: a result (its settings and the iteration are in the claim's record),
    with no evaluations and no per-iteration times; the claim's numbers read NaN from it."""

    def __init__(self, algo, world, why):
        self.algo, self.world, self.diverged = algo, world, why
        self.evals, self.rec, self.iterations, self.trace_path = [], {}, 0, None
