"""Sato et al. 2017 (PP-ASGD): Figure 2 (updates to an error at S = 3, 9, 27), Figure 3 right (the
prediction error against S) and the time to a target accuracy against synchronous SGD (section 3.2)."""

import math
import os

import h5py
import numpy as np

from refsgd.datasets import load
from refsgd.reproduce.measure import Claim, acc, curve, epochs, error_curve, eval_every, first_reach, fmt
from refsgd.reproduce.verdict import Check


def _fig2_hyper(setup):
    digits = setup.kind == "digits"
    return {"model": setup.model("accuracy"), "ranks": 1, "threads": 2, "batch": 32 if digits else 64,
            "lr": 1e-5 if digits else 1e-6, "momentum": 0.99, "epochs": epochs(setup, (4, 60), (2, 10)),
            "evals_per_epoch": 4, "schedule": "constant", "lr_x_discussion": 0.25,
            "note": "the deterministic mode (--staleness S): update t uses gradients computed at the w^ of "
                    "update t-S-1, so the numbers count updates, as the paper's Figure 2; one process of G = 2 "
                    "gradient threads (the staleness is imposed, not made by the world size); at S = 27 a second "
                    "pair of runs at lr_x_discussion x lr shows how the ratio depends on lambda (not in the verdict)"}


def _fig2_measure(runs, setup, hp, seed):
    n_train = load(setup.data).n_train
    per_epoch = max(1, n_train // (hp["batch"] * hp["threads"]))
    every = max(1, per_epoch // hp["evals_per_epoch"])
    n, panels = {}, {}
    lr_x = hp["lr_x_discussion"]
    for S, factor, tag in ((3, 1, ""), (9, 1, ""), (27, 1, ""), (27, lr_x, f"_lr{lr_x:g}x")):
        r = {algo: runs.train(algo, seed, ranks=hp["ranks"], model=hp["model"], threads=hp["threads"],
                              batch=hp["batch"], lr=f"{hp['lr'] * factor:g}", momentum=hp["momentum"],
                              epochs=hp["epochs"], schedule=hp["schedule"], staleness=S, eval_every=f"{every}it")
             for algo in ("pp-asgd", "asgd")}
        curves = {a: error_curve(v) for a, v in r.items()}
        # the error both reach, read where the curves still fall (the paper's 0.3 on CIFAR-10 is about 1.5x
        # its best errors): the worse best error, or 1.5x the better one if that is higher (at the very
        # end of a run on a 297-image test set the time to an error is one image's noise)
        best = {a: min(c[1]) for a, c in curves.items()}
        target = max(max(best.values()), 1.5 * min(best.values()))
        reach = {a: first_reach(*c, target, higher=False) for a, c in curves.items()}
        n[f"err_ppasgd_S{S}{tag}"] = curves["pp-asgd"][1][-1]
        n[f"err_asgd_S{S}{tag}"] = curves["asgd"][1][-1]
        n[f"asgd_best_err_S{S}{tag}"] = best["asgd"]
        n[f"target_err_S{S}{tag}"] = target
        n[f"updates_ratio_S{S}{tag}"] = reach["asgd"] / reach["pp-asgd"]
        n[f"final_err_gap_S{S}{tag}"] = n[f"err_asgd_S{S}{tag}"] - n[f"err_ppasgd_S{S}{tag}"]
        where = f", lambda x {factor}" if factor != 1 else ""
        panels[f"S = {S}{where}: test error (%) against updates"] = curves
    return n, panels


def _fig2_discussion(hp, numbers):
    """Why the ratio at S = 27 is what it is, from the numbers (the means over the seeds)."""
    g = numbers.get
    lr_x = hp["lr_x_discussion"]
    r1, rx = g("updates_ratio_S27"), g(f"updates_ratio_S27_lr{lr_x:g}x")
    e_pp, e_a = g("err_ppasgd_S27"), g("err_asgd_S27")
    best_a = g("asgd_best_err_S27")
    smaller = rx is not None and r1 is not None and rx < r1
    return (f"At S = 27 the ratio is read, as in the paper, at an error that ASGD reaches: "
            f"{fmt(g('target_err_S27'))} % (ASGD's best, {fmt(best_a)} %, or 1.5x PP-ASGD's best if that is "
            f"higher), where ASGD needs {fmt(r1)}x PP-ASGD's updates. Below ASGD's best the ratio is unbounded: "
            f"ASGD ends the run at {fmt(e_a)} % error and "
            f"PP-ASGD at {fmt(e_pp)} % (the paper's second observation at S = 27, \"a much lower error rate\"). "
            "So the number depends on where ASGD stalls, and that depends on lambda: a gradient S + 1 updates "
            "stale was taken about (S + 1) |M| from where it is applied, |M| up to lambda / (1 - mu) = 100 lambda "
            "gradient sums at mu = 0.99; at a small lambda the stale gradient is nearly the current one and the "
            "ratio tends to 1, near the rate where delayed momentum SGD oscillates ASGD stalls early and "
            f"PP-ASGD, whose w^ is where the weights will be, does not. At {lr_x:g} x lambda the ratio is "
            f"{fmt(rx)}x ({'smaller, as that predicts' if smaller else 'not smaller: the run does not show it'}). "
            "The paper gives no lambda for its CIFAR-10 runs (only mu = 0.99) and reads its 5x off a log-scale "
            "plot, so its number is one point of that dependence and ours is another; the embedded digits with "
            "a small MLP and a 297-image test set (one image is 0.34 %) add noise that the paper's CIFAR-10 "
            "does not have.")


def _fig3_hyper(setup):
    digits = setup.kind == "digits"
    return {"model": "digits_cnn" if digits else _bundled("ppasgd_mnist_cnn.toml"), "ranks": 1, "threads": 8,
            "batch": 256 if not digits else 128, "lr": 5e-7 if not digits else 5e-6, "momentum": 0.99,
            "iterations": 300 if setup.quick else 1200, "warm_up": 100 if setup.quick else 300,
            "note": "threaded mode (the staleness is measured), one process; a model with few parameters (a "
                    "small --trace) whose gradient is long next to an update, as the paper's CNNs; E(S) = mean_t "
                    "||w_{t+S0+1} - f_S(w_t, M_t)|| from the trace after the warm-up, S0 = floor(S_bar); "
                    "S = -1 is naive ASGD's prediction w^ = w"}


def _bundled(name):
    return os.path.join(os.path.dirname(__file__), name)


def _horizon(mu, S):
    """sum_{s=1}^{S+1} mu^s (eq. 2); 0 for S = -1 (naive ASGD: w^ = w)."""
    return float(sum(mu ** s for s in range(1, S + 2)))


def _fig3_measure(runs, setup, hp, seed):
    r = runs.train("pp-asgd", seed, ranks=hp["ranks"], trace=True, model=hp["model"], threads=hp["threads"],
                   batch=hp["batch"], lr=hp["lr"], momentum=hp["momentum"], iterations=hp["iterations"],
                   schedule="constant", eval_every=f"{hp['iterations']}it")
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


def _sync_hyper(setup):
    digits = setup.kind == "digits"
    return {"model": setup.model("timing"), "ranks": 1, "threads": 2, "batch": 32, "lr": 3e-5 if digits else 3e-6,
            "momentum": 0.99, "epochs": epochs(setup, (6, 20), (1, 5)), "schedule": "constant",
            "note": "pp-asgd in its threaded mode (G gradient threads per process) against the synchronous "
                    "ssgd-nag with --threads G (the G sub-batches of a rank computed by G threads, Sato Alg. 4), "
                    "the same lambda (a sum of gradients) and mu; time to the best test accuracy both reach; one "
                    "process"}


def _sync_measure(runs, setup, hp, seed):
    common = dict(model=hp["model"], batch=hp["batch"], lr=hp["lr"], momentum=hp["momentum"], epochs=hp["epochs"],
                  schedule=hp["schedule"], eval_every=eval_every(setup, hp["batch"] * hp["threads"], hp["ranks"]))
    r = {"pp-asgd": runs.train("pp-asgd", seed, ranks=hp["ranks"], threads=hp["threads"], **common),
         "ssgd-nag": runs.train("ssgd-nag", seed, ranks=hp["ranks"], threads=hp["threads"], **common)}
    curves = {a: curve(v, x="seconds") for a, v in r.items()}
    target = min(max(c[1]) for c in curves.values())
    t = {a: first_reach(*c, target) for a, c in curves.items()}
    n = {"target_acc": target, "seconds_ppasgd": t["pp-asgd"], "seconds_ssgdnag": t["ssgd-nag"],
         "acc_ppasgd": acc(r["pp-asgd"]), "acc_ssgdnag": acc(r["ssgd-nag"])}
    n["time_ratio"] = t["ssgd-nag"] / t["pp-asgd"]
    return n, {"test accuracy (%) against seconds": curves}


CLAIMS = [
    Claim("ppasgd-fig2", "Sato et al. 2017 (PP-ASGD)", "Figure 2 (S = 3, 9, 27)",
          "With the parameter prediction, asynchronous SGD needs fewer updates than naive ASGD to reach the "
          "same error, the more so the larger the staleness.",
          "roughly 5x fewer updates at S = 27 to reach error 0.3 (CIFAR-10), and a much lower final error",
          (Check("updates_ratio_S27", ">=", 5.0, 1.2, "ASGD's updates over PP-ASGD's to the same error at S = 27"),
           Check("updates_ratio_S3", ">=", 0.9, 0.7, "the same at S = 3 (the paper: similar)"),
           Check("final_err_gap_S27", ">=", 5.0, 1.0, "ASGD's final error minus PP-ASGD's at S = 27 (pp)")),
          _fig2_hyper, _fig2_measure, "logx", paper_values={"updates_ratio_S27": "about 5",
                                                             "final_err_gap_S27": "much lower (Fig. 2c)"},
          tuning="the paper gives one momentum (0.99) for every run and no learning rates for CIFAR-10; here "
                 "PP-ASGD and ASGD share one set at every S",
          discussion=_fig2_discussion, budget=(15, 25)),
    Claim("ppasgd-fig3", "Sato et al. 2017 (PP-ASGD)", "Figure 3 (right)",
          "The prediction error is smallest at the true staleness, well below naive ASGD's.",
          "at S = 7 the discrepancy is 42 % of ASGD's",
          (Check("S0", ">=", 3.0, 1.0, "S0, the measured staleness (floor of S_bar): the prediction matters"),
           Check("argmin_minus_S0", "<=", 0.0, 1.0, "|argmin_S E(S) - S0|"),
           Check("E_S0_over_E_asgd", "<=", 0.42, 0.8, "E(S0) / E_ASGD")),
          _fig3_hyper, _fig3_measure, "lines", paper_values={"E_S0_over_E_asgd": "0.42", "S0": "7"},
          tuning="one run (the prediction error is read from PP-ASGD's own trajectory)", budget=(10, 20),
          at_scale="the staleness is what the G gradient threads of one process make on this machine: on the "
                   "embedded digits a gradient is so cheap that S_bar stays near 1 (Python's GIL); with --data "
                   "MNIST a 9,098-parameter CNN gives S_bar of about 6 on 2 cores"),
    Claim("ppasgd-vs-ssgd", "Sato et al. 2017 (PP-ASGD)", "section 4.3 (ImageNet, 256 GPUs)",
          "PP-ASGD reaches a target accuracy faster than synchronous SGD.",
          "1.9x less time to the same accuracy with 256 GPUs",
          (Check("time_ratio", ">=", 1.9, 1.0, "SSGD-NAG's time to the target over PP-ASGD's"),),
          _sync_hyper, _sync_measure, "curves", paper_values={"time_ratio": "1.9"},
          tuning="the paper tunes per method (\"we ran each training a couple of times with different learning "
                 "rates, and show the best performing results\", 1e-4 to 8e-4); here both share one lambda, untuned",
          budget=(6, 8),
          at_scale="the paper's gain comes from 256 GPUs, where a synchronous update waits for the slowest of "
                   "them; at 2 processes on a laptop the asynchronous update rate has little to win; `refsgd bench "
                   "scale` has no model of an asynchronous method's time to accuracy (it depends on the staleness "
                   "the run makes), so there is no prediction at 256 GPUs to put beside the paper's 1.9x"),
]
