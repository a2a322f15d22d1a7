"""The papers' claims: what each says, the paper's number, the runs that test it at small scale,
the numbers taken from them and the checks that make the verdict.

Each claim's ``measure(runs, setup, hp, seed)`` launches its runs (:class:`runner.Runs`) with one
set of hyperparameters ``hp`` shared by the variants of the figure (``hyper(setup)``; printed by
every output) and returns ``(numbers, series)``: the numbers (floats, one per key) the checks and
the table use, and the curves the figure draws (``{panel: {label: [x, y]}}``).
"""

import dataclasses
import math

import numpy as np

from refsgd.reproduce.verdict import Check


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
    paper_values: dict = dataclasses.field(default_factory=dict)  # number key -> the paper's value (text)
    labels: dict = dataclasses.field(default_factory=dict)  # number key -> what it is
    at_scale: str = None  # why a laptop cannot show the claim, where it cannot
    scale: object = None  # (setup, hp, numbers) -> {text: value}: bench scale's prediction at the paper's scale


# ------------------------------------------------------------------------------ helpers
def check_matplotlib():
    """Before any run: the figures need matplotlib."""
    from refsgd.report import plot_format
    plot_format("x.png")


def acc(run):
    """Final test accuracy in %."""
    return 100.0 * run.evals[-1]["test_acc"] if run.evals else math.nan


def best_acc(run):
    return 100.0 * max(e["test_acc"] for e in run.evals) if run.evals else math.nan


def train_seconds(run, iteration):
    """Seconds of training in the first ``iteration`` iterations, mean over ranks: the iterations'
    wall times, without evaluations, checkpoints or Numba's compiling (which metrics files of
    version 1-2 count within the wall time, version 3 apart)."""
    it = int(iteration)
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
    a = np.asarray(run.rec[part], dtype=np.float64)
    if run.algo in ("ps-sync", "dcasgd") and a.shape[0] > 1:
        a = a[1:]
    t = a.shape[1]
    skip = max(1, t // 5) if skip is None else skip
    return 1e3 * float(a[:, skip:max(skip + 1, t - 1)].mean())


def run_seconds(run):
    """Training time of the whole run (:func:`train_seconds`)."""
    return train_seconds(run, run.iterations)


def eval_every(setup, batch, workers, per_epoch=4):
    """--eval-every that evaluates about ``per_epoch`` times an epoch (time to accuracy needs more
    points than one an epoch)."""
    from refsgd.datasets import load
    iterations = max(1, load(setup.data).n_train // (batch * workers))
    return f"{max(1, iterations // per_epoch)}it"


def epochs(setup, digits, other):
    e = digits if setup.kind == "digits" else other
    return e[0] if setup.quick else e[1]


def link_for(runs, setup, hp, seed, ratio, model=None, tau=1):
    """(link text, t_C of one micro-batch in s, T_comm in s): setup.link, or an EMULATED link whose
    all-reduce of the model's gradient takes ``ratio`` x t_C, t_C measured by a short ssgd run
    without a link at the claim's batch (the same processes and oversubscription as the runs)."""
    from refsgd.comm.link import Link
    from refsgd.nn import load_model
    model = model or hp["model"]
    base = runs.train("ssgd", seed, model=model, batch=hp["batch"], iterations=hp["iterations"], lr=hp["lr"],
                      eval_every=f"{hp['iterations']}it")
    t_c = per_iteration_ms(base, "compute") / 1e3
    nbytes = load_model(model).num_params * 4
    if setup.link:
        link = Link.parse(setup.link)
    else:
        link = Link.for_time(ratio * t_c, nbytes, setup.ranks, latency_us=min(50.0, 1e6 * ratio * t_c / 8))
    return f"{link.latency_us:g},{link.gbit_s:g}", t_c, link.time(nbytes, setup.ranks)


def shared(hp, *keys):
    return {k: hp[k] for k in keys if k in hp}


# ------------------------------------------------------------------------------ DC-S3GD
def _dc_hyper(setup):
    e = epochs(setup, (3, 15), (1, 5))
    return {"model": setup.model("accuracy"), "batch": 32, "epochs": e, "lr": 0.3, "momentum": 0.9,
            "schedule": f"warmup-linear:warmup_epochs={e / 2:g},warmup_stop_epochs={e / 6:.4g},total_epochs={e}",
            "note": "the schedule is the paper's section IV-A (a warm-up planned over half the run, stopped after "
                    "a sixth of it, then linear decay); dcasgd has no momentum (its paper has none); it runs on "
                    "ranks + 1 processes (a server and as many workers as the others)"}


def _dc_measure(runs, setup, hp, seed):
    common = shared(hp, "model", "batch", "epochs", "lr", "schedule")
    r = {"ssgd": runs.train("ssgd", seed, momentum=hp["momentum"], **common),
         "dcs3gd": runs.train("dcs3gd", seed, momentum=hp["momentum"], **common),
         "dcasgd": runs.train("dcasgd", seed, ranks=setup.ranks + 1, **common)}
    n = {f"acc_{k}": acc(v) for k, v in r.items()}
    n["dcs3gd_minus_ssgd"] = n["acc_dcs3gd"] - n["acc_ssgd"]
    n["dcs3gd_minus_dcasgd"] = n["acc_dcs3gd"] - n["acc_dcasgd"]
    return n, {"test accuracy (%) against epochs": {k: curve(v) for k, v in r.items()}}


def _dc_time_hyper(setup):
    return {"model": setup.model("timing"), "batch": 64, "iterations": 30 if setup.quick else 150, "lr": 0.01,
            "momentum": 0.9, "link": "EMULATED, one all-reduce of the gradient = t_C (chosen from an ssgd run "
                                     "without a link) unless --link"}


def _dc_time_measure(runs, setup, hp, seed):
    link, t_c, t_ared = link_for(runs, setup, hp, seed, ratio=1.0)
    common = dict(model=hp["model"], batch=hp["batch"], iterations=hp["iterations"], lr=hp["lr"],
                  momentum=hp["momentum"], link=link, eval_every=f"{hp['iterations']}it")
    s, d = runs.train("ssgd", seed, **common), runs.train("dcs3gd", seed, **common)
    # the models evaluated with each run's own compute (time-slicing on a loaded machine included)
    cs, cd = per_iteration_ms(s, "compute") / 1e3, per_iteration_ms(d, "compute") / 1e3
    n = {"t_c_ms": 1e3 * t_c, "t_ared_ms": 1e3 * t_ared, "ssgd_compute_ms": 1e3 * cs, "dcs3gd_compute_ms": 1e3 * cd,
         "ssgd_ms": per_iteration_ms(s, "wall"), "dcs3gd_ms": per_iteration_ms(d, "wall"),
         "eq13_ms": 1e3 * (cs + t_ared), "eq14_ms": 1e3 * max(cd, t_ared)}
    n["speedup"] = n["ssgd_ms"] / n["dcs3gd_ms"]
    n["model_speedup"] = n["eq13_ms"] / n["eq14_ms"]
    n["dcs3gd_over_eq14"] = n["dcs3gd_ms"] / n["eq14_ms"]
    n["ssgd_over_eq13"] = n["ssgd_ms"] / n["eq13_ms"]
    bars = {"ssgd": [n["ssgd_ms"], n["eq13_ms"]], "dcs3gd": [n["dcs3gd_ms"], n["eq14_ms"]]}
    return n, {"ms per iteration: measured | model (eq. 13, 14)": bars}


# ------------------------------------------------------------------------------ LAGA
def _laga_acc_hyper(setup):
    e = epochs(setup, (3, 20), (1, 3))
    return {"model": setup.model("accuracy"), "batch": 32, "epochs": e, "lr_per_256": 0.2, "momentum": 0.9,
            "weight_decay": 1e-4, "schedule": f"warmup-linear:warmup_epochs={e / 6:.4g},total_epochs={e}",
            "note": "micro-batch 32 per worker, tau micro-batches per iteration; the learning rate scales with "
                    "the global batch (lr_per_256 x ranks x 32 x tau / 256), as the paper's rule; ssgd with "
                    "the same momentum 0.9 (the paper's SSGD is SGD with momentum)"}


def _laga_acc_measure(runs, setup, hp, seed):
    n, curves = {}, {}
    for tau in (1, 4):
        lr = hp["lr_per_256"] * setup.ranks * hp["batch"] * tau / 256
        for algo in ("ssgd", "laga-sgdm", "laga-sgdn"):
            r = runs.train(algo, seed, model=hp["model"], batch=hp["batch"], tau=tau, epochs=hp["epochs"],
                           lr=f"{lr:g}", momentum=hp["momentum"], weight_decay=hp["weight_decay"],
                           schedule=hp["schedule"])
            n[f"acc_{algo}_tau{tau}"] = acc(r)
            curves[f"{algo} tau={tau}"] = curve(r)
    n["ssgd_minus_sgdm_tau4"] = n["acc_ssgd_tau4"] - n["acc_laga-sgdm_tau4"]
    n["sgdn_minus_ssgd_tau4"] = n["acc_laga-sgdn_tau4"] - n["acc_ssgd_tau4"]
    n["sgdm_drop_tau1_to_4"] = n["acc_laga-sgdm_tau1"] - n["acc_laga-sgdm_tau4"]
    return n, {"test accuracy (%) against epochs": curves}


def _laga_time_hyper(setup):
    return {"model": setup.model("timing"), "batch": 32, "iterations": 30 if setup.quick else 120, "lr": 0.01,
            "link": "EMULATED, one all-reduce of the gradient = 2 x T_comp (one micro-batch's compute, from an "
                    "ssgd run without a link) unless --link"}


def _laga_idle_measure(runs, setup, hp, seed):
    link, t_c, t_comm = link_for(runs, setup, hp, seed, ratio=2.0)
    tau = 4
    common = dict(model=hp["model"], batch=hp["batch"], iterations=hp["iterations"], lr=hp["lr"], link=link,
                  tau=tau, eval_every=f"{hp['iterations']}it")
    s, lg = runs.train("ssgd", seed, **common), runs.train("laga-sgd", seed, **common)
    n = {"t_comp_ms": 1e3 * t_c, "t_comm_ms": 1e3 * t_comm, "idle_ssgd_ms": per_iteration_ms(s, "idle"),
         "idle_laga_ms": per_iteration_ms(lg, "idle"), "eq3_idle_ssgd_ms": 1e3 * t_comm,
         "eq6_idle_laga_ms": 1e3 * max(0.0, t_comm - tau * t_c)}
    n["idle_ratio"] = n["idle_ssgd_ms"] / max(n["idle_laga_ms"], 1e-3)
    bars = {"ssgd": [n["idle_ssgd_ms"], n["eq3_idle_ssgd_ms"]], "laga-sgd": [n["idle_laga_ms"], n["eq6_idle_laga_ms"]]}
    return n, {"idle ms per iteration at tau = 4: measured | model (eq. 3, 6)": bars}


def _laga_speed_measure(runs, setup, hp, seed):
    link, t_c, t_comm = link_for(runs, setup, hp, seed, ratio=2.0)
    common = dict(model=hp["model"], batch=hp["batch"], iterations=hp["iterations"], lr=hp["lr"], link=link,
                  eval_every=f"{hp['iterations']}it")
    base = per_iteration_ms(runs.train("ssgd", seed, tau=1, **common), "wall")
    n = {"t_comp_ms": 1e3 * t_c, "t_comm_ms": 1e3 * t_comm, "ssgd_tau1_ms": base}
    xs, ys, model = [], [], []
    for tau in (1, 2, 4):
        wall = per_iteration_ms(runs.train("laga-sgd", seed, tau=tau, **common), "wall")
        n[f"laga_tau{tau}_ms"] = wall
        n[f"speedup_tau{tau}"] = tau * base / wall  # samples per second against ssgd at tau = 1
        n[f"model_speedup_tau{tau}"] = tau * (t_c + t_comm) / max(tau * t_c, t_comm)
        xs.append(tau), ys.append(n[f"speedup_tau{tau}"]), model.append(n[f"model_speedup_tau{tau}"])
    n["speedup_growth"] = n["speedup_tau4"] / n["speedup_tau1"]
    return n, {"speed-up over SSGD (tau = 1) in samples/s against tau": {"laga-sgd measured": [xs, ys],
                                                                        "model": [xs, model]}}


def _laga_scale(setup, hp, numbers):
    """bench scale's model at the paper's 8 workers: LAGA-SGD at tau over SSGD at tau = 1, in
    samples per second (link 50 us, 10 Gbit/s; t_C measured here)."""
    from refsgd.bench import models, scale
    from refsgd.comm.link import Link
    inputs = scale.measure_inputs(hp["model"], hp["batch"], Link.parse("50,10"), Link.parse("5,100"), 1, repeat=5)
    net, p = inputs.network(), 8
    base = models.iteration_time("ssgd", inputs.costs(), net, p)
    return {f"laga-sgd at tau = {tau} over ssgd at tau = 1, {p} ranks (predicted, link 50 us / 10 Gbit/s)":
            tau * base / models.iteration_time("laga-sgd", dataclasses.replace(inputs.costs(), tau=tau), net, p)
            for tau in (1, 2, 4)}


# ------------------------------------------------------------------------------ PP-ASGD
def _pp2_hyper(setup):
    digits = setup.kind == "digits"
    return {"model": setup.model("accuracy"), "ranks": 1, "threads": 2, "batch": 32 if digits else 64,
            "lr": 1e-5 if digits else 1e-6, "momentum": 0.99, "epochs": epochs(setup, (4, 20), (2, 10)),
            "evals_per_epoch": 4,
            "note": "the deterministic mode (--staleness S): update t uses gradients computed at the w^ of "
                    "update t-S-1, so the numbers count updates, as the paper's Figure 2; one process of G = 2 "
                    "gradient threads (the staleness is imposed, not made by the world size)"}


def _pp2_measure(runs, setup, hp, seed):
    from refsgd.datasets import load
    n_train = load(setup.data).n_train
    per_epoch = max(1, n_train // (hp["batch"] * hp["threads"]))
    every = max(1, per_epoch // hp["evals_per_epoch"])
    n, panels = {}, {}
    for S in (3, 9, 27):
        r = {algo: runs.train(algo, seed, ranks=hp["ranks"], model=hp["model"], threads=hp["threads"],
                              batch=hp["batch"], lr=hp["lr"], momentum=hp["momentum"], epochs=hp["epochs"],
                              staleness=S, eval_every=f"{every}it")
             for algo in ("pp-asgd", "asgd")}
        curves = {a: error_curve(v) for a, v in r.items()}
        target = max(min(c[1]) for c in curves.values())  # the best error both reach
        reach = {a: first_reach(*c, target, higher=False) for a, c in curves.items()}
        n[f"err_ppasgd_S{S}"] = curves["pp-asgd"][1][-1]
        n[f"err_asgd_S{S}"] = curves["asgd"][1][-1]
        n[f"target_err_S{S}"] = target
        n[f"updates_ratio_S{S}"] = reach["asgd"] / reach["pp-asgd"]
        panels[f"S = {S}: test error (%) against updates"] = curves
    return n, panels


def _pp3_hyper(setup):
    digits = setup.kind == "digits"
    return {"model": "digits_cnn" if digits else _bundled("ppasgd_mnist_cnn.toml"), "ranks": 1, "threads": 8,
            "batch": 256 if not digits else 128, "lr": 5e-7 if not digits else 5e-6, "momentum": 0.99,
            "iterations": 300 if setup.quick else 1200, "warm_up": 100 if setup.quick else 300,
            "note": "threaded mode (the staleness is measured), one process; a model with few parameters (a "
                    "small --trace) whose gradient is long next to an update, as the paper's CNNs; E(S) = mean_t "
                    "||w_{t+S0+1} - f_S(w_t, M_t)|| from the trace after the warm-up, S0 = floor(S_bar); "
                    "S = -1 is naive ASGD's prediction w^ = w"}


def _bundled(name):
    import os
    return os.path.join(os.path.dirname(__file__), name)


def _horizon(mu, S):
    """sum_{s=1}^{S+1} mu^s (eq. 2); 0 for S = -1 (naive ASGD: w^ = w)."""
    return float(sum(mu ** s for s in range(1, S + 2)))


def _pp3_measure(runs, setup, hp, seed):
    import h5py
    r = runs.train("pp-asgd", seed, ranks=hp["ranks"], trace=True, model=hp["model"], threads=hp["threads"],
                   batch=hp["batch"], lr=hp["lr"], momentum=hp["momentum"], iterations=hp["iterations"],
                   eval_every=f"{hp['iterations']}it")
    with h5py.File(r.trace_path, "r") as f:
        w = f["state"]["w"][:, 0, :].astype(np.float64)
        M = f["state"]["M"][:, 0, :].astype(np.float64)
    S_bar = float(np.asarray(r.rec["S_bar"])[0, -1])
    S0 = int(math.floor(S_bar))
    mu, warm = hp["momentum"], min(hp["warm_up"], len(w) // 3)
    ts = np.arange(warm, len(w) - S0 - 1)
    target = w[ts + S0 + 1]
    S_range = list(range(-1, max(2 * S0, 4) + 1))
    E = [float(np.linalg.norm(target - (w[ts] + _horizon(mu, S) * M[ts]), axis=1).mean()) for S in S_range]
    best = S_range[1 + int(np.argmin(E[1:]))]
    n = {"S_bar": S_bar, "S0": float(S0), "argmin_S": float(best), "argmin_minus_S0": float(abs(best - S0)),
         "E_S0_over_E_asgd": E[S_range.index(S0)] / E[0], "acc_ppasgd": acc(r)}
    return n, {"prediction error E(S) / E_ASGD against S": {"PP-ASGD's trajectory": [S_range[1:],
                                                                                      [e / E[0] for e in E[1:]]]}}


def _pp_sync_hyper(setup):
    digits = setup.kind == "digits"
    return {"model": setup.model("timing"), "ranks": 1, "threads": 2, "batch": 32, "lr": 3e-5 if digits else 3e-6,
            "momentum": 0.99, "epochs": epochs(setup, (6, 20), (1, 5)),
            "note": "pp-asgd in its threaded mode (G gradient threads per process) against the synchronous "
                    "ssgd-nag with --threads G (the G sub-batches of a rank computed by G threads, Sato Alg. 4), "
                    "the same lambda (a sum of gradients) and mu; time to the best test accuracy both reach; one "
                    "process"}


def _pp_sync_measure(runs, setup, hp, seed):
    common = dict(model=hp["model"], batch=hp["batch"], lr=hp["lr"], momentum=hp["momentum"], epochs=hp["epochs"],
                  eval_every=eval_every(setup, hp["batch"] * hp["threads"], hp["ranks"]))
    r = {"pp-asgd": runs.train("pp-asgd", seed, ranks=hp["ranks"], threads=hp["threads"], **common),
         "ssgd-nag": runs.train("ssgd-nag", seed, ranks=hp["ranks"], tau=hp["threads"], **common)}
    curves = {a: curve(v, x="seconds") for a, v in r.items()}
    target = min(max(c[1]) for c in curves.values())
    t = {a: first_reach(*c, target) for a, c in curves.items()}
    n = {"target_acc": target, "seconds_ppasgd": t["pp-asgd"], "seconds_ssgdnag": t["ssgd-nag"],
         "acc_ppasgd": acc(r["pp-asgd"]), "acc_ssgdnag": acc(r["ssgd-nag"])}
    n["time_ratio"] = t["ssgd-nag"] / t["pp-asgd"]
    return n, {"test accuracy (%) against seconds": curves}


# ------------------------------------------------------------------------------ DASO
def _daso_hyper(setup):
    G = setup.ranks // 2 if setup.ranks >= 4 and setup.ranks % 2 == 0 else 1
    return {"model": setup.model("timing"), "batch": 32, "epochs": epochs(setup, (3, 10), (3, 6)), "lr": 0.05,
            "momentum": 0.9, "ranks_per_node": G, "warmup_epochs": 1, "cooldown_epochs": 1, "sync_every": 4,
            "link": "EMULATED between nodes: SSGD's float32 all-reduce = 3 x t_C (from an ssgd run without a "
                    "link) unless --link; within a node 1/10 the latency and 10x the bandwidth",
            "note": f"{setup.ranks // G} (virtual) nodes of {G} rank(s); with one rank per node DASO's node-local "
                    "sync is empty and its traffic saving comes from B alone"}


def _daso_measure(runs, setup, hp, seed):
    from refsgd.comm.link import Link
    link, t_c, _ = link_for(runs, setup, dict(hp, iterations=30), seed, ratio=3.0)
    g = Link.parse(link)
    local = f"{g.latency_us / 10:g},{g.gbit_s * 10:g}"
    common = dict(model=hp["model"], batch=hp["batch"], epochs=hp["epochs"], lr=hp["lr"], momentum=hp["momentum"],
                  link=link, eval_every=eval_every(setup, hp["batch"], setup.ranks))
    r = {"ssgd": runs.train("ssgd", seed, **common),
         "ssgd+fp16": runs.train("ssgd", seed, compress="fp16", **common),
         "daso": runs.train("daso", seed, ranks_per_node=hp["ranks_per_node"], local_link=local,
                            warmup_epochs=hp["warmup_epochs"], cooldown_epochs=hp["cooldown_epochs"],
                            sync_every=hp["sync_every"], **common)}
    secs = {k: run_seconds(v) for k, v in r.items()}
    gb = {k: float(np.asarray(v.rec["global_bytes"]).sum(axis=1).mean()) for k, v in r.items()}
    n = {"acc_ssgd": acc(r["ssgd"]), "acc_fp16": acc(r["ssgd+fp16"]), "acc_daso": acc(r["daso"]),
         "seconds_ssgd": secs["ssgd"], "seconds_fp16": secs["ssgd+fp16"], "seconds_daso": secs["daso"],
         "global_mb_ssgd": gb["ssgd"] / 1e6, "global_mb_fp16": gb["ssgd+fp16"] / 1e6,
         "global_mb_daso": gb["daso"] / 1e6}
    n["daso_minus_ssgd_acc"] = n["acc_daso"] - n["acc_ssgd"]
    n["time_saved_vs_fp16_pct"] = 100 * (1 - secs["daso"] / secs["ssgd+fp16"])
    n["time_saved_vs_ssgd_pct"] = 100 * (1 - secs["daso"] / secs["ssgd"])
    n["traffic_ratio_vs_fp16"] = gb["ssgd+fp16"] / max(gb["daso"], 1.0)
    return n, {"test accuracy (%) against seconds": {k: curve(v, x="seconds") for k, v in r.items()}}


def _daso_scale(setup, hp, numbers):
    return _scale_speedups(hp["model"], hp["batch"], 128, ("daso",), G=4)


def _scale_speedups(model, batch, p, methods, G=4, base="ssgd"):
    """bench scale's predicted speed-up of ``methods`` over ``base`` at ``p`` ranks (link 50 us,
    10 Gbit/s between nodes, 5 us, 100 Gbit/s within; t_C measured here at one thread)."""
    from refsgd.bench import models, scale
    from refsgd.comm.link import Link
    inputs = scale.measure_inputs(model, batch, Link.parse("50,10"), Link.parse("5,100"), G, repeat=5)
    costs, net = inputs.costs(), inputs.network()
    return {f"{m} over {base} at {p} ranks (predicted, link 50 us / 10 Gbit/s)":
            models.speedup(m, costs, net, p, batch, base=base) for m in methods}


# ------------------------------------------------------------------------------ Pipe-SGD
PIPE_VARIANTS = (("ps-sync", "ps-sync", "none"), ("d-sync", "d-sync", "none"), ("d-sync+T", "d-sync", "t16"),
                 ("d-sync+Q", "d-sync", "q8"), ("pipe-sgd", "pipe-sgd", "none"), ("pipe-sgd+T", "pipe-sgd", "t16"),
                 ("pipe-sgd+Q", "pipe-sgd", "q8"))


def _pipe_hyper(setup):
    return {"model": setup.model("timing"), "batch": 32, "epochs": epochs(setup, (3, 10), (1, 3)),
            "lr_sum": round(0.1 / setup.ranks, 6),
            "link": "EMULATED: one float32 all-reduce of the gradient = 2 x t_C (from an ssgd run without a link) "
                    "unless --link",
            "note": "--lr multiplies the sum over workers of their mean gradients (the paper's form) for all seven; "
                    "no momentum (the paper's variants have none); pipe-sgd with K = 2 from the first iteration; "
                    "ps-sync runs on ranks + 1 processes (a server and as many workers as the others)"}


def _pipe_measure(runs, setup, hp, seed):
    link, t_c, t_comm = link_for(runs, setup, dict(hp, iterations=30, lr=0.01), seed, ratio=2.0)
    r, every = {}, eval_every(setup, hp["batch"], setup.ranks)  # ps-sync: as many workers as the others
    for label, algo, codec in PIPE_VARIANTS:
        opts = dict(model=hp["model"], batch=hp["batch"], epochs=hp["epochs"], lr=hp["lr_sum"], link=link,
                    eval_every=every)
        if codec != "none":
            opts["compress"] = codec
        r[label] = runs.train(algo, seed, ranks=setup.ranks + (label == "ps-sync"), **opts)
    curves = {k: curve(v, x="seconds") for k, v in r.items()}
    target = min(max(c[1]) for c in curves.values())
    t = {k: first_reach(*c, target) for k, c in curves.items()}
    n = {"t_c_ms": 1e3 * t_c, "t_comm_ms": 1e3 * t_comm, "target_acc": target}
    for k, v in r.items():
        n[f"acc_{k}"] = acc(v)
        n[f"seconds_{k}"] = t[k]
        n[f"ms_per_iteration_{k}"] = per_iteration_ms(v, "wall")
    # the time split next to eq. 2 (synchronous: l_up + l_comp + l_comm) and eq. 4 (Pipe-SGD, K = 2:
    # max(l_up + l_comp, l_comm)), l_comm the link's time for the bytes the codec puts on the wire
    from refsgd.comm.link import Link
    from refsgd.nn import load_model
    lk, params = Link.parse(link), load_model(hp["model"]).num_params
    wire = {"none": 4 * params, "t16": 2 * params, "q8": 260 * -(-params // 256)}
    bars = {}
    for label, algo, codec in PIPE_VARIANTS:
        v = r[label]
        l_up = per_iteration_ms(v, "update")
        l_comp = per_iteration_ms(v, "compute") + per_iteration_ms(v, "codec")
        p = v.world
        # a parameter server's link carries the gradients up and the weights down
        l_comm = 1e3 * (2 * lk.ps_time(wire[codec], p) if algo == "ps-sync" else lk.time(wire[codec], p))
        model = max(l_up + l_comp, l_comm) if algo == "pipe-sgd" else l_up + l_comp + l_comm
        n[f"model_ms_{label}"] = model
        n[f"measured_over_model_{label}"] = n[f"ms_per_iteration_{label}"] / model
        bars[label] = [n[f"ms_per_iteration_{label}"], model]
    finals = [n[f"acc_{k}"] for k in r]
    n["acc_spread"] = max(finals) - min(finals)
    best_pipe = min(t["pipe-sgd+T"], t["pipe-sgd+Q"])
    n["speedup_vs_dsync"] = t["d-sync"] / best_pipe
    n["speedup_vs_pssync"] = t["ps-sync"] / best_pipe
    n["fastest_is_pipe_compressed"] = float(min(t, key=lambda k: t[k] if math.isfinite(t[k]) else math.inf)
                                            in ("pipe-sgd+T", "pipe-sgd+Q"))
    return n, {"test accuracy (%) against seconds": curves,
               "ms per iteration: measured | model (eq. 2 sync, eq. 4 pipe)": bars}


def _pipe_scale(setup, hp, numbers):
    out = _scale_speedups(hp["model"], hp["batch"], 4, ("pipe-sgd",), G=1, base="d-sync")
    out.update(_scale_speedups(hp["model"], hp["batch"], 4, ("pipe-sgd",), G=1, base="ps-sync"))
    return out


# ------------------------------------------------------------------------------ the list
CLAIMS = [
    Claim("dcs3gd-accuracy", "Rigazzi et al. 2019 (DC-S3GD)", "section IV, Table I",
          "DC-S3GD reaches the accuracy of synchronous SGD at equal epochs and does better than DC-ASGD.",
          "ResNet-50 on ImageNet: 77.2-77.5 % validation accuracy at 32-64 nodes against SSGD's 75.3-75.4 % "
          "reference at the same batch",
          (Check("dcs3gd_minus_ssgd", ">=", -1.0, -3.0, "DC-S3GD's final accuracy minus SSGD's (pp)"),
           Check("dcs3gd_minus_dcasgd", ">=", 0.0, -1.0, "DC-S3GD's final accuracy minus DC-ASGD's (pp)")),
          _dc_hyper, _dc_measure, "curves",
          paper_values={"dcs3gd_minus_ssgd": "+1.8 to +2.1 (77.2-77.5 against 75.3-75.4)"}),
    Claim("dcs3gd-iteration", "Rigazzi et al. 2019 (DC-S3GD)", "eq. 13 and 14",
          "An iteration of DC-S3GD takes max(compute, all-reduce) where SSGD's takes their sum.",
          "t_SSGD = t_C + t_ARed (eq. 13), t_DC-S3GD = max(t_C, t_ARed) (eq. 14): 2x at t_C = t_ARed",
          (Check("speedup", ">=", 1.6, 1.15, "SSGD's iteration over DC-S3GD's"),
           Check("dcs3gd_over_eq14", "<=", 1.25, 1.6, "DC-S3GD's iteration over eq. 14")),
          _dc_time_hyper, _dc_time_measure, "bars", paper_values={"speedup": "2.0 (eq. 13 / eq. 14 at t_C = t_ARed)"}),
    Claim("laga-table1", "Hakimi et al. 2021 (LAGA)", "Table 1",
          "As tau grows to 4, LAGA-SGDM falls behind SSGD while LAGA-SGDN keeps SSGD's accuracy.",
          "ResNet-50 ImageNet at tau = 4: SSGD 76.23 %, LAGA-SGDM 75.63 %, LAGA-SGDN 76.28 %",
          (Check("ssgd_minus_sgdm_tau4", ">=", 0.2, 0.0, "SSGD minus LAGA-SGDM at tau = 4 (pp)"),
           Check("sgdn_minus_ssgd_tau4", ">=", -0.5, -1.5, "LAGA-SGDN minus SSGD at tau = 4 (pp)")),
          _laga_acc_hyper, _laga_acc_measure, "curves",
          paper_values={"ssgd_minus_sgdm_tau4": "0.60", "sgdn_minus_ssgd_tau4": "+0.05",
                        "sgdm_drop_tau1_to_4": "0.81"}),
    Claim("laga-idle", "Hakimi et al. 2021 (LAGA)", "section 5.1 (Figure 4, eq. 3 and 6)",
          "At tau = 4 LAGA's idle time is several times smaller than SSGD's.",
          "5.24x less idle time than SSGD (4.54x less than SSGD-OPT) at tau = 4",
          (Check("idle_ratio", ">=", 5.24, 1.5, "SSGD's idle over LAGA-SGD's at tau = 4"),),
          _laga_time_hyper, _laga_idle_measure, "bars", paper_values={"idle_ratio": "5.24"},
          at_scale="the paper's ratio comes from its T_comm / T_comp on 8 GPUs; here the ratio follows from the "
                   "emulated link (eq. 6 predicts no idle for LAGA when T_comm <= tau x T_comp)"),
    Claim("laga-speedup", "Hakimi et al. 2021 (LAGA)", "Figure 6",
          "LAGA's speed-up over SSGD without accumulation grows with tau.",
          "up to 2.96x at tau = 4 (ImageNet), saturating at tau = 4",
          (Check("speedup_growth", ">=", 1.5, 1.1, "speed-up at tau = 4 over speed-up at tau = 1"),
           Check("speedup_tau4", ">=", 2.96, 1.5, "LAGA-SGD's speed-up at tau = 4")),
          _laga_time_hyper, _laga_speed_measure, "lines", paper_values={"speedup_tau4": "2.96"},
          at_scale="the paper's 8 GPUs share one machine's PCIe; here 2 ranks over an EMULATED link, so the "
                   "speed-up follows from the link's T_comm / T_comp", scale=_laga_scale),
    Claim("ppasgd-fig2", "Sato et al. 2017 (PP-ASGD)", "Figure 2 (S = 3, 9, 27)",
          "With the parameter prediction, asynchronous SGD needs fewer updates than naive ASGD to reach the "
          "same error, the more so the larger the staleness.",
          "roughly 5x fewer updates at S = 27 to reach error 0.3 (CIFAR-10)",
          (Check("updates_ratio_S27", ">=", 5.0, 1.2, "ASGD's updates over PP-ASGD's to the same error at S = 27"),
           Check("updates_ratio_S3", ">=", 0.9, 0.7, "the same at S = 3 (the paper: similar)")),
          _pp2_hyper, _pp2_measure, "logx", paper_values={"updates_ratio_S27": "about 5"}),
    Claim("ppasgd-fig3", "Sato et al. 2017 (PP-ASGD)", "Figure 3 (right)",
          "The prediction error is smallest at the true staleness, well below naive ASGD's.",
          "at S = 7 the discrepancy is 42 % of ASGD's",
          (Check("S0", ">=", 3.0, 1.0, "S0, the measured staleness (floor of S_bar): the prediction matters"),
           Check("argmin_minus_S0", "<=", 0.0, 1.0, "|argmin_S E(S) - S0|"),
           Check("E_S0_over_E_asgd", "<=", 0.42, 0.8, "E(S0) / E_ASGD")),
          _pp3_hyper, _pp3_measure, "lines", paper_values={"E_S0_over_E_asgd": "0.42", "S0": "7"},
          at_scale="the staleness is what the G gradient threads of one process make on this machine: on the "
                   "embedded digits a gradient is so cheap that S_bar stays near 1 (Python's GIL); with --data "
                   "MNIST a 9,098-parameter CNN gives S_bar of about 6 on 2 cores"),
    Claim("ppasgd-vs-ssgd", "Sato et al. 2017 (PP-ASGD)", "section 4.3 (ImageNet, 256 GPUs)",
          "PP-ASGD reaches a target accuracy faster than synchronous SGD.",
          "1.9x less time to the same accuracy with 256 GPUs",
          (Check("time_ratio", ">=", 1.9, 1.0, "SSGD-NAG's time to the target over PP-ASGD's"),),
          _pp_sync_hyper, _pp_sync_measure, "curves", paper_values={"time_ratio": "1.9"},
          at_scale="the paper's gain comes from 256 GPUs, where a synchronous update waits for the slowest of "
                   "them; at 2 processes on a laptop the asynchronous update rate has little to win"),
    Claim("daso", "Coquelin et al. 2022 (DASO)", "section 4 (Figures 6 and 7)",
          "DASO keeps SSGD's accuracy in less time, with less traffic between nodes than SSGD+fp16 (Horovod).",
          "up to 25 % (ResNet-50) and 34 % less training time than Horovod, similar accuracy up to 128 GPUs",
          (Check("daso_minus_ssgd_acc", ">=", -1.0, -3.0, "DASO minus SSGD final accuracy (pp)"),
           Check("time_saved_vs_fp16_pct", ">=", 25.0, 5.0, "time saved against SSGD+fp16 (%)"),
           Check("traffic_ratio_vs_fp16", ">=", 2.0, 1.2, "SSGD+fp16's traffic between nodes over DASO's")),
          _daso_hyper, _daso_measure, "curves", paper_values={"time_saved_vs_fp16_pct": "25-34"},
          at_scale="the paper runs 4 GPUs per node on up to 64 nodes; here virtual nodes on one machine and an "
                   "EMULATED link between them", scale=_daso_scale),
    Claim("pipesgd-fig4", "Li et al. 2018 (Pipe-SGD)", "Figure 4 (MNIST-MLP)",
          "All seven variants reach about the same accuracy, and Pipe-SGD with truncation or quantisation is "
          "the fastest to it.",
          "accuracy within 0.005; Pipe-SGD+T/+Q 2.0-3.2x faster than D-Sync and 4.0-5.4x than PS-Sync "
          "(4 nodes, 10 GbE)",
          (Check("acc_spread", "<=", 1.0, 3.0, "max - min final accuracy of the seven (pp)"),
           Check("fastest_is_pipe_compressed", ">=", 1.0, None, "Pipe-SGD+T or +Q fastest to the target (1 = yes)"),
           Check("speedup_vs_dsync", ">=", 2.0, 1.1, "D-Sync's time to the target over Pipe-SGD+T/+Q's"),
           Check("speedup_vs_pssync", ">=", 4.0, 1.1, "PS-Sync's time to the target over Pipe-SGD+T/+Q's")),
          _pipe_hyper, _pipe_measure, "curves",
          paper_values={"acc_spread": "0.5", "speedup_vs_dsync": "2.0-3.2", "speedup_vs_pssync": "4.0-5.4"},
          at_scale="the paper's 4 nodes have 10 GbE between them; here 2 ranks share one machine over an "
                   "EMULATED link", scale=_pipe_scale),
]
BY_NAME = {c.name: c for c in CLAIMS}
