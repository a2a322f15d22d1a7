"""What every claim is made of and the helpers its measurements share.

A claim (:class:`Claim`) says what a paper claims and its number, and how refsgd tests it at
small scale: ``hyper(setup)`` gives the one set of hyperparameters that every variant of the
claim's figure shares (printed by every output), ``measure(runs, setup, hp, seed)`` launches the
runs (:class:`runner.Runs`) and returns ``(numbers, series)``: the numbers (floats, one per key)
the checks and the table use, and the curves the figure draws (``{panel: {label: [x, y]}}``).
The claims themselves are in one module per paper (dcs3gd, laga, ppasgd, daso, pipesgd) and
listed by :mod:`refsgd.reproduce.claims`.
"""

import dataclasses
import math
import os

import numpy as np

from refsgd.bench import models, scale
from refsgd.comm.link import Link, reduction_time
from refsgd.datasets import load
from refsgd.nn import load_model
from refsgd.report import plot_format
from refsgd.registry import METHODS


@dataclasses.dataclass
class Claim:
    name: str
    paper: str
    where: str
    sentence: str
    paper_number: str
    checks: tuple
    hyper: object  # setup -> dict
    measure: object  # (runs, setup, hp, seed) -> (numbers, series)
    figure: str  # how the figure draws the series: "curves", "logx", "bars", "lines"
    #: the paper's own words, verbatim: [(where: section, figure or table, what it is about: network
    #: and data, the text)]; a table whole, its unfavourable rows included
    quotes: tuple = ()
    regime: str = ""  # the regime the claim runs in and where it comes from (the paper's, or ours and why)
    ours: str = ""  # what we derive from the paper (a band's tolerance, a model's number), labelled as ours
    data: str = None  # "mnist": an accuracy claim that needs data resolving its effects; None: any (timing)
    axes: tuple = ("", "")  # (x label, y label) of every panel, with units
    #: (setup) -> a reason the claim cannot be tested here at all (the scale it needs), or None
    untestable: object = None
    #: what the claim needs of the machine (root for scripts/cluster), where ``untestable`` checks a
    #: machine rather than a scale it never has
    requires: str = None
    paper_values: dict = dataclasses.field(default_factory=dict)  # number key -> the paper's value (text)
    labels: dict = dataclasses.field(default_factory=dict)  # number key -> what it is
    tuning: str = ""  # how the paper chose the variants' hyperparameters (shared, or tuned per method)
    budget: tuple = (60, 120)  # seconds per seed on 2 idle cores (--quick, full): the full one measured by `all`, +20 %,
    #: rounded up to 5 s; under a minute a claim runs 5 seeds by default (runner.default_seeds), 3 beyond
    at_scale: str = None  # why a laptop cannot show the claim, where it cannot
    scale: object = None  # (setup, hp, numbers) -> [(what, predicted, the paper's number)]: bench scale
    discussion: object = None  # (hp, numbers) -> text: why the numbers are what they are, where that needs saying
    #: how the regime follows from the paper's own numbers through its own model (equation numbers), in words
    #: made by the code that sets the regime, so that page and code agree
    derivation: str = ""
    #: (series of one seed, hp, that seed's numbers) -> numbers the claim computes from its curves, its
    #: hyperparameters and its other numbers alone: a result written before these numbers existed is judged
    #: again (reproduce --rejudge) from what it holds
    from_series: object = None
    #: the paper's headlines that the claim's runs do not test, each (headline as the paper prints it, the
    #: kind of check it can be here and why not more, refsgd's model prediction at the paper's scale or "")
    untested: tuple = ()


def fmt(v):
    """How a number is written in the markdown (the JSON holds it unrounded)."""
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "n/a"
    if abs(v) < 1e-9:  # a difference of equal accuracies is 0, not its rounding error (-4.7e-15)
        return "0"
    return f"{v:.4g}"


def check_matplotlib():
    """Before any run: the figures need matplotlib."""
    plot_format("x.png")


def acc(run):
    """Final test accuracy in %."""
    return 100.0 * run.evals[-1]["test_acc"] if run.evals else math.nan


def train_seconds(run, iteration):
    """Seconds of training in the first ``iteration`` iterations, mean over ranks: the iterations'
    wall times, without evaluations, checkpoints or Numba's compiling (which metrics files of
    version 1-2 count within the wall time, version 3 apart)."""
    it = int(iteration)
    if "wall" not in run.rec:  # a run that diverged
        return math.nan
    t = float(np.asarray(run.rec["wall"], dtype=np.float64)[:, :it].sum(axis=1).mean())
    if "compile" in run.rec and isinstance(run.format_version, int) and run.format_version < 3:
        t -= float(np.asarray(run.rec["compile"], dtype=np.float64)[:, :it].sum(axis=1).mean())
    return t


def curve(run, x="epoch", y="test_acc"):
    """[x, y] of the evaluations; x "seconds" is the training time before each (:func:`train_seconds`)."""
    xs = [train_seconds(run, e["iteration"]) if x == "seconds" else float(e[x]) for e in run.evals]
    ys = [100.0 * e[y] if y == "test_acc" else float(e[y]) for e in run.evals]
    return [xs, ys]


def error_curve(run):
    return [[float(e["iteration"]) for e in run.evals], [100.0 * (1 - e["test_acc"]) for e in run.evals]]


def first_reach(xs, ys, target, higher=True):
    """The x where ys first reaches ``target`` (linear interpolation between evaluations); nan if
    never."""
    prev = None
    for x, y in zip(xs, ys):
        if (y >= target) if higher else (y <= target):
            if prev is None:
                return float(x)
            (x0, y0) = prev
            return float(x0 + (x - x0) * (target - y0) / (y - y0)) if y != y0 else float(x)
        prev = (x, y)
    return math.nan


def per_iteration_ms(run, part, skip=None):
    """Mean over ranks and iterations (the first fifth and the last left out) of a per-iteration
    time, in ms; a parameter server's rank 0 is left out where it computes nothing."""
    if part not in run.rec:  # a run that diverged
        return math.nan
    a = np.asarray(run.rec[part], dtype=np.float64)
    servers = METHODS[run.algo].servers
    if servers and a.shape[0] > servers:
        a = a[servers:]
    t = a.shape[1]
    skip = max(1, t // 5) if skip is None else skip
    return 1e3 * float(a[:, skip:max(skip + 1, t - 1)].mean())


def run_seconds(run):
    """Training time of the whole run (:func:`train_seconds`)."""
    return train_seconds(run, run.iterations)


def eval_every(setup, batch, workers, per_epoch=4):
    """--eval-every that evaluates about ``per_epoch`` times an epoch (time to accuracy needs more
    points than one an epoch)."""
    iterations = max(1, load(setup.data).n_train // (batch * workers))
    return f"{max(1, iterations // per_epoch)}it"


def epochs(setup, digits, other):
    e = digits if setup.kind == "digits" else other
    return e[0] if setup.quick else e[1]


def link_for(runs, setup, hp, seed, ratio, model=None):
    """(link text, t_C of one micro-batch in s, T_comm in s): setup.link, or an EMULATED link whose
    all-reduce transfer X of the model's float32 gradient takes ``ratio`` x t_C, t_C measured by a
    short ssgd run without a link at the claim's batch (the same processes and oversubscription as
    the runs); T_comm = X + R, the link holding an all-reduce for its reduction R too (eq. 5)."""
    model = model or hp["model"]
    base = runs.train("ssgd", seed, variant="calibration (t_C, no link)", model=model, batch=hp["batch"],
                      iterations=hp["iterations"], lr=hp["lr"], momentum=0.0, eval_every=f"{hp['iterations']}it")
    t_c = per_iteration_ms(base, "compute") / 1e3
    nbytes = load_model(model).num_params * 4
    if setup.link:
        link = Link.parse(setup.link)
    else:
        link = Link.for_time(ratio * t_c, nbytes, setup.ranks, latency_us=min(50.0, 1e6 * ratio * t_c / 8))
    return (f"{link.latency_us:g},{link.gbit_s:g}", t_c,
            link.time(nbytes, setup.ranks) + reduction_time(nbytes, setup.ranks, "float32"))


def _bundled(name):
    """The path of a model spec that comes with refsgd.reproduce (a claim's own network)."""
    return os.path.join(os.path.dirname(__file__), name)


def shared(hp, *keys):
    return {k: hp[k] for k in keys if k in hp}


def scale_speedups(model, batch, p, methods, G=4, base="ssgd", paper=None):
    """bench scale's predicted speed-up of ``methods`` over ``base`` at ``p`` ranks (link 50 us,
    10 Gbit/s between nodes, 5 us, 100 Gbit/s within; t_C measured here at one thread), as rows
    (what, predicted, the paper's number from ``paper[method]``)."""
    inputs = scale.measure_inputs(model, batch, Link.parse("50,10"), Link.parse("5,100"), G, repeat=5)
    costs, net = inputs.costs(), inputs.network()
    return [(f"{m} over {base} at {p} ranks ({G} per node), link 50 us / 10 Gbit/s",
             models.speedup(m, costs, net, p, batch, base=base), (paper or {}).get(m, "")) for m in methods]
