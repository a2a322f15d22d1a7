"""Rigazzi et al. 2019 (DC-S3GD): accuracy against SSGD at equal epochs (section IV-C, Table I)
and the iteration time of eq. 13 / eq. 14 over a sweep of t_ARed / t_C."""

from refsgd.reproduce.measure import Claim, acc, curve, epochs, eval_every, link_for, per_iteration_ms, shared
from refsgd.reproduce.verdict import Check, near

TABLE_I = """Network | |β| | #Nodes | Train Accuracy | Val. Accuracy | Speed [img/sec] | Reference Val. Acc.
ResNet-50 | 16k | 32 | 80.7% | 77.5% | 2078 | 75.3% [23], SSGD
ResNet-50 | 32k | 32 | 80.3% | 77.4% | 2144 | 75.4% [23], SSGD
ResNet-50 | 32k | 64 | 78.5% | 77.2% | 3815 | 75.4% [23], SSGD
ResNet-50 | 64k | 64 | 76.6% | 75.6% | 4245 | 76.2% [9], SSGD
ResNet-50 | 64k | 128 | 75.6% | 75.1% | 7340 | 76.2% [9], SSGD
ResNet-50 | 128k | 128 | 70.0% | 69.7% | 8201 | 75.0% [17], K-FAC
ResNet-101 | 64k | 64 | 78.3% | 77.2% | 2578 |
ResNet-152 | 32k | 64 | 80.9% | 78.7% | 1768 |
VGG-16 | 16k | 64 | 63.03% | 69.2% | 1206 |

Table I: Average validation accuracy and processing speed for parallel training of CNNs with DC-S3GD. The last
columns shows reference results for the training of ResNet-50 with synchronous methods for the same batch size."""

RESNET50 = ("section IV-C 1)", "ResNet-50, ImageNet-1k",
            "From the achieved accuracy values, shown in Table I, it can be seen that we manage to reach "
            "state-of-the-art accuracy on up to 64 nodes, with a batch size of 32k samples: the total training time, "
            "not considering network setup, is of 503 minutes. Keeping the number of nodes at 64 and using a larger "
            "batch size results in a slight loss of accuracy and a speed-up of 10%. [...] From the reported results, "
            "we can see that employing a larger batch size on 128 nodes results in a large loss of accuracy.")


def _acc_hyper(setup):
    e = epochs(setup, (1, 3), (1, 3))
    return {"model": setup.model("accuracy"), "batch": 32, "epochs": e, "lr": round(0.1 * setup.ranks * 32 / 256, 6),
            "momentum": 0.9,
            "weight_decay": 0.0,
            "schedule": f"warmup-linear:warmup_epochs={e / 2:g},warmup_stop_epochs={e / 6:.4g},total_epochs={e}",
            "note": "the schedule is the paper's section IV-A (a warm-up planned over half the run, stopped after "
                    "a sixth of it, then linear decay); lr 0.1 per 256 samples at the global batch (the paper's "
                    "reference for ResNet, eq. 16), momentum 0.9"}


def _acc_measure(runs, setup, hp, seed):
    common = shared(hp, "model", "batch", "epochs", "lr", "schedule", "weight_decay")
    every = eval_every(setup, hp["batch"], setup.ranks, per_epoch=2)
    r = {"ssgd": runs.train("ssgd", seed, momentum=hp["momentum"], eval_every=every, **common),
         "dcs3gd": runs.train("dcs3gd", seed, momentum=hp["momentum"], eval_every=every, **common)}
    n = {f"acc_{k}": acc(v) for k, v in r.items()}
    n["dcs3gd_minus_ssgd"] = n["acc_dcs3gd"] - n["acc_ssgd"]
    return n, {"test accuracy (%) against epochs": {k: curve(v) for k, v in r.items()}}


#: Table I's global batches as a fraction of ImageNet-1k's 1,281,167 training images, applied to MNIST's
#: 60,000 (ours): 32k -> 1535, 64k -> 3069, 128k -> 6139, rounded to a multiple of 2 x 256
BATCHES = {"32k": 1536, "64k": 3072, "128k": 6144}
IMAGENET_TRAIN = 1281167


def _batch_hyper(setup):
    e = epochs(setup, (1, 3), (1, 3))
    # --quick: the two ends of the sweep
    batches = {k: b for k, b in BATCHES.items() if k != "64k" or not setup.quick}
    per = {k: b // setup.ranks for k, b in batches.items()}
    return {"model": setup.model("accuracy"), "global_batches": batches, "batch_per_worker": per,
            "epochs": e, "lr_per_256": 0.02, "momentum": 0.9, "weight_decay": 0.0,
            # the paper stops the warm-up after 15 of 90 epochs up to 64k, after 20 at 128k (section IV-A)
            "schedules": {k: f"warmup-linear:warmup_epochs={e / 2:g},warmup_stop_epochs="
                            f"{e * (20 if k == '128k' else 15) / 90:.4g},total_epochs={e}" for k in BATCHES},
            "note": "both methods at every batch: lr 0.02 per 256 samples at the global batch (eq. 16 with the "
                    "paper's base for VGG-16, which like MNIST-MLP has no batch normalisation: at ResNet's 0.1 SSGD "
                    "diverged at 3072 and 6144, iterations 37 and 13, seed 0), momentum 0.9, the paper's schedule (section IV-A: a linear "
                    "warm-up planned over half the run, stopped after 15/90 of it, 20/90 at 128k, then a linear "
                    "decrease), equal epochs; the global batch split over the workers"}


def _batch_measure(runs, setup, hp, seed):
    n, curves = {}, {}
    for k, b in hp["global_batches"].items():
        per = b // setup.ranks
        common = dict(model=hp["model"], batch=per, epochs=hp["epochs"], lr=f"{hp['lr_per_256'] * b / 256:g}",
                      momentum=hp["momentum"], weight_decay=hp["weight_decay"], schedule=hp["schedules"][k],
                      eval_every=eval_every(setup, per, setup.ranks, per_epoch=1))
        for algo in ("ssgd", "dcs3gd"):
            r = runs.train(algo, seed, variant=f"{algo}, global batch {b} ({k} on ImageNet)", **common)
            n[f"acc_{algo}_{k}"] = acc(r)
            curves[f"{algo} {b}"] = curve(r)
        n[f"gap_{k}"] = n[f"acc_dcs3gd_{k}"] - n[f"acc_ssgd_{k}"]
    n["gap_fall_32k_to_128k"] = n["gap_32k"] - n["gap_128k"]
    return n, {"test accuracy (%) against epochs, per global batch": curves}


def _batch_checks():
    src = ("Table I: DC-S3GD minus its SSGD reference at the same batch on ResNet-50 {}; our band: {} (ours, "
           "at MNIST's resolution of 0.01 pp per image)")
    return (
        Check("gap_fall_32k_to_128k", 1.0, 10.0, "the fall of DC-S3GD's accuracy relative to SSGD's from the 32k- to "
              "the 128k-equivalent batch (pp)", src.format("falls by 7.1 pp (+1.8 at 32k on 64 nodes, -5.3 at 128k)",
                                                            "a fall of 1 to 10 pp, partly 0.3 to 15"),
              partial=(0.3, 15.0)),
        Check("gap_32k", -0.5, 2.5, "DC-S3GD minus SSGD at the 32k-equivalent batch (pp)",
              src.format("is +1.8 to +2.0 pp at 32k (\"state-of-the-art accuracy\")",
                         "equal or better, -0.5 to +2.5 pp, partly -1.5 to +3.5"), partial=(-1.5, 3.5)),
        Check("gap_64k", -2.5, -0.3, "DC-S3GD minus SSGD at the 64k-equivalent batch (pp)",
              src.format("is -0.6 to -1.1 pp at 64k (\"a slight loss of accuracy\")",
                         "below, -2.5 to -0.3 pp, partly -4 to 0"), partial=(-4.0, 0.0)),
        Check("gap_128k", -10.0, -2.0, "DC-S3GD minus SSGD at the 128k-equivalent batch (pp)",
              src.format("is -5.3 pp at 128k, against K-FAC (\"a large loss of accuracy\")",
                         "well below, -10 to -2 pp, partly -15 to -0.5"), partial=(-15.0, -0.5)),
    )


RATIOS = (0.5, 1.0, 2.0)  # t_ARed / t_C: compute-bound, balanced, communication-bound


def _time_hyper(setup):
    return {"model": setup.model("timing"), "batch": 64, "iterations": 30 if setup.quick else 300, "lr": 0.01,
            "momentum": 0.9, "ratios": RATIOS,
            "link": "EMULATED: one all-reduce of the gradient = ratio x t_C (t_C from an ssgd run without a link) "
                    "unless --link"}


def _time_measure(runs, setup, hp, seed):
    n, bars = {}, {}
    for rho in hp["ratios"]:
        link, t_c, t_ared = link_for(runs, setup, hp, seed, ratio=rho)
        common = dict(model=hp["model"], batch=hp["batch"], iterations=hp["iterations"], lr=hp["lr"],
                      momentum=hp["momentum"], link=link, eval_every=f"{hp['iterations']}it")
        s, d = runs.train("ssgd", seed, **common), runs.train("dcs3gd", seed, **common)
        # the models evaluated with each run's own compute (time-slicing on a loaded machine included)
        cs, cd = per_iteration_ms(s, "compute") / 1e3, per_iteration_ms(d, "compute") / 1e3
        tag = f"_r{rho:g}"
        n.update({f"t_c_ms{tag}": 1e3 * t_c, f"t_ared_ms{tag}": 1e3 * t_ared, f"ssgd_ms{tag}": per_iteration_ms(s, "wall"),
                  f"dcs3gd_ms{tag}": per_iteration_ms(d, "wall"), f"eq13_ms{tag}": 1e3 * (cs + t_ared),
                  f"eq14_ms{tag}": 1e3 * max(cd, t_ared)})
        n[f"speedup{tag}"] = n[f"ssgd_ms{tag}"] / n[f"dcs3gd_ms{tag}"]
        n[f"model_speedup{tag}"] = n[f"eq13_ms{tag}"] / n[f"eq14_ms{tag}"]
        n[f"ssgd_over_eq13{tag}"] = n[f"ssgd_ms{tag}"] / n[f"eq13_ms{tag}"]
        n[f"dcs3gd_over_eq14{tag}"] = n[f"dcs3gd_ms{tag}"] / n[f"eq14_ms{tag}"]
        bars[f"ssgd, ratio {rho:g}"] = [n[f"ssgd_ms{tag}"], n[f"eq13_ms{tag}"]]
        bars[f"dcs3gd, ratio {rho:g}"] = [n[f"dcs3gd_ms{tag}"], n[f"eq14_ms{tag}"]]
    return n, {"ms per iteration: measured | model (eq. 13, 14) at t_ARed / t_C = ratio": bars}


def _time_checks():
    out = []
    for rho in RATIOS:
        for key, eq in (("ssgd_over_eq13", "eq. 13"), ("dcs3gd_over_eq14", "eq. 14")):
            out.append(near(f"{key}_r{rho:g}", 1.0, 0.2, f"measured iteration over {eq} at t_ARed/t_C = {rho:g}",
                            f"{eq} at the run's own t_C and t_ARed, +-20 % (ours)", partial_tol=0.5, timing=True))
    return tuple(out)


CLAIMS = [
    Claim("dcs3gd-accuracy", "Rigazzi et al. 2019 (DC-S3GD)", "section IV-C, Table I",
          "DC-S3GD reaches the validation accuracy of synchronous SGD at the same batch (up to 32k samples on 64 "
          "nodes); at larger batches it falls below.",
          "ResNet-50: 77.2-77.5 % against SSGD's 75.3-75.4 % at 16k-32k; 75.1-75.6 % against 76.2 % at 64k; "
          "69.7 % against K-FAC's 75.0 % at 128k (Table I, whole on the page)",
          (Check("dcs3gd_minus_ssgd", -0.5, 0.5, "DC-S3GD's final test accuracy minus SSGD's (pp)",
                 "ours: \"reach state-of-the-art accuracy\" read as equal to SSGD within 0.5 pp (50 of MNIST's "
                 "10,000 test images; the paper's own differences span -5.3 to +2.1 pp over its batches)",
                 partial=(-1.5, 1.5)),),
          _acc_hyper, _acc_measure, "curves",
          quotes=(("Table I", "ResNet-50/101/152, VGG-16 on ImageNet-1k, 32-128 CPU nodes", TABLE_I), RESNET50),
          regime="MNIST, MNIST-MLP (784-500-500-10), 2 workers x 32 = 64 samples: the paper's regime (global "
                 "batch up to 32k, where it matches SSGD) is far off; the check is the small-batch end of its "
                 "Table I, equal accuracy at equal epochs",
          ours="the band (equal within 0.5 pp); the paper compares with SSGD numbers from other papers ([23], [9]) "
               "at the same batch, we run SSGD with the same settings",
          paper_values={"dcs3gd_minus_ssgd": "+2.0 to +2.1 (16k-32k); -0.6 to -1.1 (64k); -5.3 against K-FAC (128k)"},
          tuning="the paper tunes its own runs (\"for each combination ... the run which reached the lowest "
                 "validation error\") and takes SSGD's numbers from other papers at the same batch; here both "
                 "share one set, untuned",
          data="mnist", axes=("epochs", "test accuracy (%)"), budget=(15, 60)),
    Claim("dcs3gd-batch", "Rigazzi et al. 2019 (DC-S3GD)", "section IV-C 1), Table I (ResNet-50 rows)",
          "DC-S3GD's accuracy relative to SSGD at the same global batch falls as the batch grows: equal or better "
          "up to 32k, below at 64k, well below at 128k.",
          "ResNet-50, DC-S3GD minus the SSGD reference: +2.1 (16k), +2.0/+1.8 (32k), -0.6/-1.1 (64k), -5.3 (128k, "
          "against K-FAC) pp (Table I, whole on the page)",
          _batch_checks(), _batch_hyper, _batch_measure, "curves",
          quotes=(("Table I", "ResNet-50/101/152, VGG-16 on ImageNet-1k, 32-128 CPU nodes", TABLE_I), RESNET50),
          regime="MNIST, MNIST-MLP (784-500-500-10), 2 workers; global batches 1536, 3072, 6144: Table I's 32k, "
                 "64k and 128k as the same fraction of the training set (batch / 1,281,167 ImageNet images x "
                 "60,000 MNIST images, ours), so an epoch has as many updates as the paper's (39, 20, 10); 3 epochs "
                 "where the paper trains 90, so a run has 27 to 117 updates where the paper's have 880 to 3,500; "
                 "the paper's lr rule (eq. 16, \"for VGG, the base learning rate was 0.02\") and schedule for both "
                 "methods",
          ours="the mapping of the batches by fraction of the training set; the bands (the paper gives no "
               "tolerance); SSGD run here with DC-S3GD's settings, where the paper takes it from other papers",
          paper_values={"gap_fall_32k_to_128k": "7.1 (ResNet-50)", "gap_32k": "+1.8 to +2.0", "gap_64k": "-0.6 to "
                        "-1.1", "gap_128k": "-5.3 (against K-FAC)"},
          tuning="the paper tunes its own runs (the lowest validation error per combination) and takes SSGD's "
                 "numbers from other papers ([23], [9]; K-FAC [17] at 128k); here both methods share one set per "
                 "batch, untuned",
          data="mnist", axes=("epochs", "test accuracy (%)"), budget=(30, 90)),
    Claim("dcs3gd-iteration", "Rigazzi et al. 2019 (DC-S3GD)", "section III-D 1), eq. 13 and 14",
          "An iteration of DC-S3GD takes max(compute, all-reduce) where SSGD's takes their sum.",
          "t_SSGD = t_C + t_ARed (eq. 13), t_DC-S3GD = max(t_C, t_ARed) (eq. 14); the paper gives no measured "
          "ratio",
          _time_checks(), _time_hyper, _time_measure, "bars",
          quotes=(("section III-D 1), eq. 13 and 14", "any network, N nodes",
                   "We can approximate the time taken by SSGD to complete an iteration over a mini-batch B over N "
                   "nodes as\nt_SSGD = t_C(B) + t_ARed(g, N) (13)\n[...] For our method, a similar approximation "
                   "can be made, and it yields\nt_DC-S3GD = max(t_C(B), t_ARed(g, N)) (14)\nwhich is an obvious "
                   "consequence of the fact that the computation and all-reduce operations run concurrently in "
                   "our setting."),),
          regime="a sweep of t_ARed / t_C over 0.5, 1, 2 (the paper reports no ratio) on an EMULATED link; "
                 "digits CNN, 2 ranks. The emulated link charges no CPU for a transfer (on a real link compute "
                 "slows while the all-reduce runs), so the overlap is at its best case",
          ours="the speed-up 2x at t_C = t_ARed is our derivation from eq. 13/14, not a number of the paper; "
               "the tolerance +-20 % is ours",
          paper_values={"model_speedup_r1": "2 at t_C = t_ARed (ours, from eq. 13/14)"},
          tuning="a timing model: the hyperparameters do not enter it; both methods share one set",
          axes=("", "ms per iteration"), budget=(20, 40)),
]
