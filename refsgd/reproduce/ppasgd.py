"""Sato et al. 2017 (PP-ASGD): Figure 2 (updates to an error at S = 3, 9, 27), Figure 3 right (the
prediction error against S) and the time to a target accuracy against synchronous SGD (section 3.2)."""

import math

import h5py
import numpy as np

from refsgd.datasets import load
from refsgd.reproduce.measure import (Claim, _bundled, acc, curve, epochs, error_curve, first_reach,
                                      per_iteration_ms)
from refsgd.reproduce.verdict import PAPER, Check, near


FIG2_TEXT = ("section 3.1", "CIFAR-10, a CCPCPCPFFF CNN, one GPU, staleness generated artificially",
             "CIFAR-10 Figure 2 shows classification error rate curves of PP-ASGD and ASGD with staleness values "
             "S = 3, 9, 27. For S = 3 the error rate of PP-ASGD at a given point in epoch is lower than or similar "
             "to that of ASGD. For S = 9 the error rates of PP-ASGD in the interval of first 7 epochs is clearly "
             "lower than that of ASGD. The most notable speed-up is observed for S = 27 by roughly 5x to reach the "
             "same error rate 0.3. As for generalization ability, PP-ASGD produces a much lower error rate than ASGD "
             "for S = 27. For the case of S = 3 or S = 9, though the error rate curve fluctuates time-to-time, the "
             "model accuracy produced by PP-ASGD is by and large equal to that produced by ASGD.")
SETUP_TEXT = ("section 3", "all experiments",
              "All CIFAR-10 experiments were conducted in a single node with one GPU with a program written in "
              "MATLAB. To test (PP-)ASGD on CIFAR-10, nonzero staleness was artificially generated. [...] In all "
              "experiments the same momentum rate 0.99 is used.")


def _fig2_hyper(setup):
    digits = setup.kind == "digits"
    return {"model": setup.model("accuracy"), "ranks": 1, "threads": 2, "batch": 32 if digits else 64,
            "lr": 1e-5 if digits else 1e-6, "momentum": 0.99, "epochs": epochs(setup, (1, 6), (1, 3)),
            "evals_per_epoch": 4, "schedule": "constant", "target_error_pct": 30.0,
            "staleness": (27,) if setup.quick else (3, 9, 27),
            "note": "the deterministic mode (--staleness S): update t uses gradients computed at the w^ of "
                    "update t-S-1, so the numbers count updates, as the paper's Figure 2; one process of G = 2 "
                    "gradient threads (the staleness is imposed, as the paper's CIFAR-10 runs); the target error "
                    "is the paper's 0.3, fixed before the runs"}


def _fig2_measure(runs, setup, hp, seed):
    n_train = load(setup.data).n_train
    per_epoch = max(1, n_train // (hp["batch"] * hp["threads"]))
    every = max(1, per_epoch // hp["evals_per_epoch"])
    n, panels = {}, {}
    target = hp["target_error_pct"]
    for S in hp["staleness"]:
        r = {algo: runs.train(algo, seed, ranks=hp["ranks"], model=hp["model"], threads=hp["threads"],
                              batch=hp["batch"], lr=hp["lr"], momentum=hp["momentum"], epochs=hp["epochs"],
                              schedule=hp["schedule"], staleness=S, eval_every=f"{every}it")
             for algo in ("pp-asgd", "asgd")}
        curves = {a: error_curve(v) for a, v in r.items()}
        reach = {a: first_reach(*c, target, higher=False) for a, c in curves.items()}
        last = {a: c[1][-1] if c[1] else math.nan for a, c in curves.items()}
        n[f"err_ppasgd_S{S}"], n[f"err_asgd_S{S}"] = last["pp-asgd"], last["asgd"]
        n[f"updates_ppasgd_S{S}"], n[f"updates_asgd_S{S}"] = reach["pp-asgd"], reach["asgd"]
        n[f"updates_ratio_S{S}"] = reach["asgd"] / reach["pp-asgd"]
        n[f"final_err_gap_S{S}"] = last["asgd"] - last["pp-asgd"]
        # the prediction's cost: PP-ASGD's update pass (M, w and w^ <- f_S(w, M)) less naive ASGD's (M, w
        # and w^ <- w), the same pass but for the prediction's term, as a share of PP-ASGD's iteration
        n[f"prediction_cost_share_S{S}"] = ((per_iteration_ms(r["pp-asgd"], "update")
                                             - per_iteration_ms(r["asgd"], "update"))
                                            / per_iteration_ms(r["pp-asgd"], "wall"))
        panels[f"S = {S} (target error {target:g} %)"] = curves
    n["prediction_cost_share"] = n[f"prediction_cost_share_S{max(hp['staleness'])}"]
    n.update(_fig2_numbers(panels, hp))
    return n, panels


def _fig2_numbers(series, hp, numbers=None):
    """From the curves alone: whether each S's target crossing is resolved (1) or not (0): both
    methods still above the target error at their first evaluation, so that the updates to reach it
    are measured, not the first evaluation's iteration for both (S = 3's 117 / 117 on every seed
    before issue 42); and at S = 9 the share of the evaluations within the paper's first 7 epochs
    where PP-ASGD's error is below ASGD's (the paper: "clearly lower" there)."""
    target = hp["target_error_pct"]
    out = {}
    for S in hp["staleness"]:
        curves = series.get(f"S = {S} (target error {target:g} %)", {})
        out[f"resolved_S{S}"] = float(bool(curves) and all(c[1] and c[1][0] > target for c in curves.values()))
    nine = series.get(f"S = 9 (target error {target:g} %)")
    if nine and nine["pp-asgd"][0] == nine["asgd"][0] and nine["asgd"][0]:
        xs = nine["asgd"][0]
        cut = xs[-1] * min(1.0, FIRST_EPOCHS / hp["epochs"])  # the paper's first 7 epochs, or the whole run
        pairs = [(p, a) for x, p, a in zip(xs, nine["pp-asgd"][1], nine["asgd"][1]) if 0 < x <= cut]
        out["lower_share_S9"] = sum(p < a for p, a in pairs) / len(pairs) if pairs else math.nan
    return out


FIRST_EPOCHS = 7  # the paper's interval at S = 9 ("the interval of first 7 epochs")


def _fig3_hyper(setup):
    digits = setup.kind == "digits"
    return {"model": "digits_cnn" if digits else _bundled("ppasgd_mnist_cnn.toml"), "ranks": 1, "threads": 8,
            "batch": 256 if not digits else 128, "lr": 5e-7 if not digits else 5e-6, "momentum": 0.99,
            "iterations": 150 if setup.quick else 1200, "warm_up": 50 if setup.quick else 300,
            "note": "threaded mode (the staleness is measured), one process; a model with few parameters (a "
                    "small --trace) whose gradient is long next to an update, as the paper's CNNs; E(S) = mean_t "
                    "||w_{t+S0+1} - f_S(w_t, M_t)|| from the trace after the warm-up, S0 = floor(S_bar); "
                    "S = -1 is naive ASGD's prediction w^ = w"}


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


def _left_hyper(setup):
    h = _fig3_hyper(setup)
    h.update(iterations=40 if setup.quick else 1500, target_error_pct=10.0, evals=4 if setup.quick else 15,
             note="threaded mode, one process of G = 8 gradient threads (the staleness is what they make, "
                  "measured: S_bar), the CNN of ppasgd-fig3; PP-ASGD and ASGD share every setting; the target "
                  "error (10 %) is ours, fixed before the runs (the paper's top-5 error 0.2 on ImageNet-32 has no "
                  "MNIST counterpart)")
    h.pop("warm_up")
    return h


def _left_measure(runs, setup, hp, seed):
    every = f"{max(1, hp['iterations'] // hp['evals'])}it"
    r = {a: runs.train(a, seed, ranks=hp["ranks"], model=hp["model"], threads=hp["threads"], batch=hp["batch"],
                       lr=hp["lr"], momentum=hp["momentum"], iterations=hp["iterations"], schedule="constant",
                       eval_every=every) for a in ("pp-asgd", "asgd")}
    curves = {a: [curve(v, x="seconds")[0], error_curve(v)[1]] for a, v in r.items()}
    series = {f"test error (%) against seconds (target {hp['target_error_pct']:g} %)": curves}
    n = {"S_bar": float(np.asarray(r["pp-asgd"].rec["S_bar"])[0, -1]) if "S_bar" in r["pp-asgd"].rec else math.nan}
    n.update(_left_numbers(series, hp))
    return n, series


#: the targets the time ratio is reported over: the ratio depends on the target chosen
TARGETS = (10.0, 15.0, 20.0, 25.0, 30.0)


def _left_numbers(series, hp, numbers=None):
    """The times to the target error and their ratio, from the curves alone (so that a result
    written before these numbers existed can be judged again from its curves), at the target fixed
    before the runs and over TARGETS, with the smallest ratio over them."""
    curves = next(iter(series.values()))
    t = {a: first_reach(*c, hp["target_error_pct"], higher=False) for a, c in curves.items()}
    n = {"seconds_ppasgd": t["pp-asgd"], "seconds_asgd": t["asgd"], "time_ratio": t["asgd"] / t["pp-asgd"]}
    for target in TARGETS:
        t = {a: first_reach(*c, target, higher=False) for a, c in curves.items()}
        n[f"time_ratio_err{target:g}"] = t["asgd"] / t["pp-asgd"]
    n["time_ratio_min"] = min(n[f"time_ratio_err{target:g}"] for target in TARGETS)
    return n


def _no_runs(runs, setup, hp, seed):
    """A claim that is never run here (:attr:`Claim.untestable`)."""
    return {}, {}


def _sync_hyper(setup):
    return {"model": "the paper's CCPCPCPCPCF CNN (none of ours)", "note": "nothing is run: not testable here"}


def _not_at_256_gpus(setup):
    return ("the paper's 1.8-1.9x comes from up to 256 GPUs on ImageNet-1000, where a synchronous update waits "
            "for the slowest of them; one machine's 2 cores have no stragglers to avoid. It needs tens to "
            "hundreds of workers; `refsgd bench scale` has no model of an asynchronous method's time to accuracy "
            "(it depends on the staleness the run makes), so there is no prediction to put beside the paper's "
            "number")


FIG3_CAPTION = ("Fig. 3 caption", "ImageNet-32, a CPCPCPCPCPCPCCF CNN, 32 GPUs",
                "Fig. 3. Left: classification error rate curves of PP-ASGD and ASGD on the ImageNet-32 validation "
                "dataset. Right: plot of ||w_{t+S_0+1} - f_S(w_t)||_2 for S = 0, 1, ..., 13 with measured staleness "
                "S_0 = 7. Each point is an average of 100 measurements right after 1 epoch. CNN architecture: "
                "CPCPCPCPCPCPCCF. We used 32 GPUs to train each model.")
FIG3_RIGHT = ("section 3.1 (Fig. 3 right)", "ImageNet-32, 32 GPUs",
              "From this experiment ||w_{t+S_0+1} - f_S(w_t)||_2 has a minimum at S = S_0, indicating that the "
              "coefficient in the stale momentum term of the proposed prediction model is indeed appropriate. [...] "
              "The latter discrepancy (by PP-ASGD) is 42% of the former discrepancy (by ASGD).")
FIG3_LEFT = ("section 3.1 (Fig. 3 left)", "ImageNet-32, 32 GPUs (4 nodes x 8 GPUs)",
             "We used 32 GPUs (4 nodes x 8 GPUs) in each training. The time-average staleness is about 8.5 for both "
             "cases. Note that the computational time for the parameter prediction part is negligible. It is evident "
             "from the left side of Fig. 3 that PP-ASGD outperforms ASGD in training speed approximately by a factor "
             "of two to reach the same top-5 error rate, say 0.2.")
SYNC_TEXT = ("section 3.2 (Fig. 4)", "ImageNet-1000, a CCPCPCPCPCF CNN, up to 256 GPUs",
             "We ran each training a couple of times with different learning rates, and show the best performing "
             "results. The learning rates used for the results shown in Fig. 4 are ranged from 1e-4 to 8e-4. [...] "
             "From the figure it is observed that PP-ASGD consistently outperforms SSGD in training speed by a "
             "factor of 1.8-1.9 when the same number of GPUs are used. It is also observed that PP-ASGD exhibits a "
             "near-linear speed-up behavior with respect to the number of GPUs up to 256-GPU, while SSGD exhibits a "
             "sublinear behavior.")
FIG4_CAPTION = ("Fig. 4 caption", "ImageNet-1000",
                "Fig. 4. (a) Classification error rate curves of PP-ASGD and SSGD on the ImageNet-1000 validation "
                "dataset. Numbers in parentheses indicate #GPUs. (b) Relative speeds to reach 0.6 top-1 validation "
                "error rate. Black lines indicate ideal linear speed-up lines.")

PAPER_S0 = ("S0", 5.0, 9.0)

CLAIMS = [
    Claim("ppasgd-fig2", "Sato et al. 2017 (PP-ASGD)", "section 3.1, Figure 2 (S = 3, 9, 27)",
          "With the parameter prediction, asynchronous SGD needs fewer updates than naive ASGD to reach the "
          "same error, the more so the larger the staleness.",
          "roughly 5x fewer updates at S = 27 to reach error 0.3 (CIFAR-10); similar at S = 3; clearly lower error "
          "over the first 7 epochs at S = 9; the prediction's time negligible (section 3.1)",
          (near("updates_ratio_S27", 5.0, 0.5, "ASGD's updates over PP-ASGD's to error 30 % at S = 27",
                "the paper's \"roughly 5x\" (Figure 2, read off a log-scale plot), relative +-50 % (the reading of "
                "\"roughly\" on a log axis)", relative=True, kind=PAPER, null=1.0, needs=("resolved_S27", 1.0, 1.0),
                needs_why="both methods above the target at their first evaluation: the crossing measured"),
           Check("updates_ratio_S3", 0.8, 1.25, "the same at S = 3",
                 "the paper's \"lower than or similar\" at S = 3, read as 0.8-1.25 (a quarter either way: "
                 "one evaluation interval in four): an equivalence", partial=(0.6, 2.0), kind=PAPER, null=1.0,
                 paper_value=1.0, needs=("resolved_S3", 1.0, 1.0),
                 needs_why="both methods above the target at their first evaluation: the crossing measured"),
           Check("lower_share_S9", 0.75, 1.0, "the share of the evaluations within the first 7 epochs where "
                 "PP-ASGD's test error is below ASGD's, at S = 9",
                 "the paper's \"clearly lower\" over the first 7 epochs at S = 9 (every evaluation: 1), read as at "
                 "least 3 in 4 (partly 0.6); the null (two equal methods) is below at about half the evaluations "
                 "by their noise", partial=(0.6, 1.0), kind=PAPER, null=0.5, paper_value=1.0),
           Check("prediction_cost_share", -0.05, 0.05, "PP-ASGD's update pass less naive ASGD's (the prediction's "
                 "term alone), over PP-ASGD's iteration, at the largest S",
                 "the paper's \"the computational time for the parameter prediction part is negligible\" (section "
                 "3.1), read as within 5 % of an iteration (ours): an equivalence", kind=PAPER, null=0.0,
                 paper_value=0.0, timing=True)),
          _fig2_hyper, _fig2_measure, "logx", quotes=(FIG2_TEXT, SETUP_TEXT, FIG3_LEFT), from_series=_fig2_numbers,
          untested=(("\"PP-ASGD produces a much lower error rate than ASGD for S = 27\" (Figure 2c)",
                     "measured (final_err_gap_S27: ASGD's final error less PP-ASGD's, in pp), not judged: the paper "
                     "prints no number for \"much lower\" (Figure 2c is a plot), and a band of ours around our own "
                     "runs would rest on no number of the paper", ""),),
          regime="MNIST, MNIST-MLP, one process with the staleness imposed (as the paper's CIFAR-10 runs, which "
                 "are one GPU with staleness generated artificially); the paper's CNN on CIFAR-10 is not run",
          ours="the bands; the target error 0.3 is the paper's",
          paper_values={"updates_ratio_S27": "about 5", "final_err_gap_S27": "much lower (Fig. 2c)",
                        "lower_share_S9": "clearly lower (1)", "prediction_cost_share": "negligible"},
          tuning="the paper gives one momentum (0.99) for every run and no learning rates for CIFAR-10; here "
                 "PP-ASGD and ASGD share one set at every S",
          data="mnist", axes=("updates", "test error (%)"), budget=(15, 50)),
    Claim("ppasgd-fig3", "Sato et al. 2017 (PP-ASGD)", "section 3.1, Fig. 3 (right)",
          "The prediction error is smallest at the true staleness, well below naive ASGD's.",
          "a minimum at S = S0 = 7; the discrepancy there is 42 % of ASGD's",
          (Check("argmin_minus_S0", 0.0, 0.0, "|argmin_S E(S) - S0|", "the paper: \"a minimum at S = S_0\" "
                 "(the null, no prediction, has its minimum at S = 0: |0 - S0|, 7 at the paper's S0)",
                 partial=(0.0, 1.0), kind=PAPER, null=7.0, paper_value=0.0),
           near("E_S0_over_E_asgd", 0.42, 0.15, "E(S0) / E_ASGD", "the paper's 42 % at S0 = 7, +-0.15 (the "
                "seeds' spread of E(S0) / E_ASGD in the committed runs, 0.02, and its dependence on S0 near 7)",
                partial_tol=0.3, needs=PAPER_S0, needs_why="a measured staleness near the paper's S0 = 7",
                kind=PAPER, null=1.0)),
          _fig3_hyper, _fig3_measure, "lines", quotes=(FIG3_CAPTION, FIG3_RIGHT),
          regime="MNIST, a 9,098-parameter CNN, one process of 8 gradient threads (the staleness is measured, "
                 "S0 = floor(S_bar)); the 42 % is compared only where S0 is near the paper's 7",
          ours="the band +-0.15 and the S0 window 5-9",
          paper_values={"E_S0_over_E_asgd": "0.42", "S0": "7"},
          tuning="one run (the prediction error is read from PP-ASGD's own trajectory)",
          data="mnist", axes=("S (the staleness the prediction assumes)", "E(S) / E_ASGD"), budget=(8, 35)),
    Claim("ppasgd-fig3-left", "Sato et al. 2017 (PP-ASGD)", "section 3.1, Fig. 3 (left)",
          "At the staleness its workers make, PP-ASGD reaches a target error in about half ASGD's time.",
          "approximately 2x faster than ASGD to top-5 error 0.2 (ImageNet-32, 32 GPUs, staleness about 8.5)",
          (near("time_ratio", 2.0, 0.25, "ASGD's time to the target error over PP-ASGD's",
                "the paper's \"approximately by a factor of two\", relative +-25 % (the ratio's spread over "
                "targets 10-15 % error in the committed runs, 1.67-1.89)", relative=True, kind=PAPER, null=1.0,
                timing=True, needs=("S_bar", 4.0, 13.0), needs_why="a measured staleness near the paper's 8.5"),
           near("time_ratio_min", 2.0, 0.25, "the smallest of the same ratios at the target errors "
                + ", ".join(f"{t:g}" for t in TARGETS) + " %", "the paper's \"approximately by a factor of two\" "
                "(its one target, top-5 error 0.2), relative +-25 % as above: the factor must not hang on the target "
                "chosen", relative=True, kind=PAPER, null=1.0, timing=True, needs=("S_bar", 4.0, 13.0),
                needs_why="a measured staleness near the paper's 8.5")),
          _left_hyper, _left_measure, "curves", quotes=(FIG3_CAPTION, FIG3_LEFT), from_series=_left_numbers,
          regime="MNIST, the CNN of ppasgd-fig3, one process of 8 gradient threads (the staleness measured, "
                 "compared only within 4-13 around the paper's 8.5); the time to a target error fixed before the runs",
          ours="the target error 10 % and the band",
          paper_values={"time_ratio": "about 2"},
          tuning="shared: the paper gives one momentum (0.99) and no learning rate for ImageNet-32",
          data="mnist", axes=("seconds of training", "test error (%)"), budget=(10, 75)),
    Claim("ppasgd-vs-ssgd", "Sato et al. 2017 (PP-ASGD)", "section 3.2, Fig. 4(b) (ImageNet-1000, up to 256 GPUs)",
          "PP-ASGD reaches a target error faster than synchronous SGD on as many GPUs.",
          "1.8-1.9x faster to top-1 error 0.6 at the same number of GPUs (up to 256)",
          (near("time_ratio", 1.85, 0.3, "SSGD's time to the target over PP-ASGD's",
                "the paper's 1.8-1.9 (Fig. 4(b)), relative +-30 % (the spread of time to a target over seeds and "
                "targets, as ppasgd-fig3-left's)", relative=True, timing=True, kind=PAPER, null=1.0),),
          _sync_hyper, _no_runs, "curves", quotes=(SYNC_TEXT, FIG4_CAPTION),
          regime="not run: the paper's regime is tens to 256 GPUs with stragglers",
          ours="the band", paper_values={"time_ratio": "1.8-1.9"},
          tuning="the paper tunes per method (\"we ran each training a couple of times with different learning "
                 "rates, and show the best performing results\", 1e-4 to 8e-4)",
          untestable=_not_at_256_gpus, budget=(0, 0)),
]
