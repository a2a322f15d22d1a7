"""Rigazzi et al. 2019 (DC-S3GD): accuracy against SSGD at equal epochs (section IV-C, Table I)
and the iteration time of eq. 13 / eq. 14 over a sweep of t_ARed / t_C on an emulated link, and at
t_ARed / t_C near 1 across scripts/cluster's real link (:mod:`refsgd.reproduce.cluster`)."""

from refsgd.reproduce import cluster
from refsgd.reproduce.measure import (Claim, _bundled, acc, curve, epochs, eval_every, fmt, link_for, per_iteration_ms,
                                      shared)
from refsgd.datasets import load
from refsgd.reproduce.verdict import MODEL, PAPER, SANITY, Check, near

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


#: Table I's 16k as a share of ImageNet-1k's 1,281,167 training images, applied to MNIST's 60,000 (as BATCHES)
BATCH_16K = 768


def _acc_hyper(setup):
    e = epochs(setup, (1, 6), (1, 6))
    return {"model": setup.model("accuracy"), "batch": BATCH_16K // setup.ranks, "epochs": e,
            "lr": round(0.02 * BATCH_16K / 256, 6), "momentum": 0.9, "weight_decay": 0.0,
            "schedule": f"warmup-linear:warmup_epochs={e / 2:g},warmup_stop_epochs={e * 15 / 90:.4g},total_epochs={e}",
            "note": f"Table I's 16k as the same share of the training set: a global batch of {BATCH_16K} (split over "
                    "the workers), 6 epochs (78 updates an epoch: 468 in all, where the paper's 16k run has 90 x 78 = 7,000); lr 0.02 "
                    "per 256 samples at the global batch (eq. 16 with VGG-16's base, as dcs3gd-batch: MNIST-MLP has "
                    "no batch normalisation), momentum 0.9, the paper's schedule (section IV-A: a warm-up planned "
                    "over half the run, stopped after 15/90 of it, then linear decay), both methods alike"}


def _acc_measure(runs, setup, hp, seed):
    common = shared(hp, "model", "batch", "epochs", "lr", "schedule", "weight_decay")
    every = eval_every(setup, hp["batch"], setup.ranks, per_epoch=2)
    r = {"ssgd": runs.train("ssgd", seed, momentum=hp["momentum"], eval_every=every, **common),
         "dcs3gd": runs.train("dcs3gd", seed, momentum=hp["momentum"], eval_every=every, **common)}
    n = {f"acc_{k}": acc(v) for k, v in r.items()}
    n["dcs3gd_minus_ssgd"] = n["acc_dcs3gd"] - n["acc_ssgd"]
    # the regime of Table I's gap: the global batch as a share of the training set
    n["global_batch_share"] = setup.ranks * hp["batch"] / load(setup.data).n_train
    return n, {"test accuracy (%) against epochs": {k: curve(v) for k, v in r.items()}}


#: Table I's global batches as a fraction of ImageNet-1k's 1,281,167 training images, applied to MNIST's
#: 60,000 (ours): 32k -> 1535, 64k -> 3069, 128k -> 6139, rounded to a multiple of 2 x 256
BATCHES = {"32k": 1536, "64k": 3072, "128k": 6144}
IMAGENET_TRAIN = 1281167
SHARE_16K = 16384 / IMAGENET_TRAIN  # Table I's smallest global batch as a share of ImageNet-1k's training set


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
    # the updates the shortest run (the largest batch) makes: the regime the checks need
    n["updates_128k"] = float(hp["epochs"] * (load(setup.data).n_train // max(hp["global_batches"].values())))
    return n, {"test accuracy (%) against epochs, per global batch": curves}


#: the paper's runs at 128k have 90 epochs x 9.8 updates = 880 updates; the large-batch loss needs
#: hundreds of updates to show, so the batch checks need at least half the paper's
MIN_UPDATES = 440
UPDATES = ("updates_128k", MIN_UPDATES, 1e9)
UPDATES_WHY = f"at least {MIN_UPDATES} updates at the 128k-equivalent batch, half the paper's 880 (90 epochs)"
#: the band beyond the paper's own spread: the seeds' spread in dcs3gd-batch's runs (up to 0.6 pp) and
#: MNIST's test-set resolution (0.01 pp an image)
TOL = "+-0.5 pp beyond the paper's spread (the seeds' spread, up to 0.6 pp; 50 of MNIST's 10,000 test images)"


def _batch_checks():
    src = "Table I: DC-S3GD minus its SSGD reference on ResNet-50, {}; {}"
    kw = dict(kind=PAPER, null=0.0, needs=UPDATES, needs_why=UPDATES_WHY)
    return (
        Check("gap_fall_32k_to_128k", 4.1, 10.1, "the fall of DC-S3GD's accuracy relative to SSGD's from the 32k- to "
              "the 128k-equivalent batch (pp)", src.format("a fall of 7.1 pp (+1.8 at 32k on 64 nodes, -5.3 at 128k)",
                                                            "+-3 pp (the sum of three gaps' spreads)"),
              paper_value=7.1, **kw),
        Check("gap_32k", 1.3, 2.5, "DC-S3GD minus SSGD at the 32k-equivalent batch (pp)",
              src.format("+1.8 to +2.0 pp at 32k (77.2 - 75.4, 77.4 - 75.4)", TOL), paper_value=1.9, **kw),
        Check("gap_64k", -1.6, -0.1, "DC-S3GD minus SSGD at the 64k-equivalent batch (pp)",
              src.format("-0.6 to -1.1 pp at 64k (75.6 - 76.2, 75.1 - 76.2)", TOL), paper_value=-0.85, **kw),
        Check("gap_128k", -7.8, -2.8, "DC-S3GD minus SSGD at the 128k-equivalent batch (pp)",
              src.format("-5.3 pp at 128k (69.7 - 75.0, against K-FAC)", "+-2.5 pp (ours: the gap is 10x the "
                         "others, its spread unknown)"), paper_value=-5.3, **kw),
    )


RATIOS = (0.5, 1.0, 2.0)  # t_ARed / t_C: compute-bound, balanced, communication-bound

EQ13_14 = ("section III-D 1), eq. 13 and 14", "any network, N nodes",
           "We can approximate the time taken by SSGD to complete an iteration over a mini-batch B over N "
           "nodes as\nt_SSGD = t_C(B) + t_ARed(g, N) (13)\n[...] For our method, a similar approximation "
           "can be made, and it yields\nt_DC-S3GD = max(t_C(B), t_ARed(g, N)) (14)\nwhich is an obvious "
           "consequence of the fact that the computation and all-reduce operations run concurrently in "
           "our setting.")

#: what the emulated link (refsgd.comm.linkcomm: the real collective over shared memory, then a wait
#: until the model's time) leaves out of a real network
LEFT_OUT = ("The emulated link leaves out what a real network costs beside its bandwidth: the CPU of a "
            "transfer (TCP's copies, checksums and protocol on the cores that compute), the MPI library's "
            "progress (a real non-blocking all-reduce moves only inside MPI calls, here the polls between "
            "layers; the emulated one completes on time whatever the caller does), the protocol's ramp-up, "
            "bursts and jitter; so its overlap is the best case")


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
        _eq13_eq14(n, bars, f"_r{rho:g}", f"ratio {rho:g}", s, d, t_c, t_ared)
    return n, {"ms per iteration: measured | model (eq. 13, 14) at t_ARed / t_C = ratio": bars}


def _eq13_eq14(n, bars, tag, label, s, d, t_c, t_ared):
    """Into ``n`` and ``bars``: an ssgd run ``s`` and a dcs3gd run ``d`` against eq. 13 and 14, the
    models evaluated with each run's own compute (time-slicing on a loaded machine, and on a real
    link the CPU a transfer takes, included) and ``t_ared`` (s); ``t_c`` (s) the calibration's."""
    cs, cd = per_iteration_ms(s, "compute") / 1e3, per_iteration_ms(d, "compute") / 1e3
    n.update({f"t_c_ms{tag}": 1e3 * t_c, f"t_ared_ms{tag}": 1e3 * t_ared, f"ssgd_ms{tag}": per_iteration_ms(s, "wall"),
              f"dcs3gd_ms{tag}": per_iteration_ms(d, "wall"), f"eq13_ms{tag}": 1e3 * (cs + t_ared),
              f"eq14_ms{tag}": 1e3 * max(cd, t_ared)})
    n[f"speedup{tag}"] = n[f"ssgd_ms{tag}"] / n[f"dcs3gd_ms{tag}"]
    n[f"model_speedup{tag}"] = n[f"eq13_ms{tag}"] / n[f"eq14_ms{tag}"]
    n[f"ssgd_over_eq13{tag}"] = n[f"ssgd_ms{tag}"] / n[f"eq13_ms{tag}"]
    n[f"dcs3gd_over_eq14{tag}"] = n[f"dcs3gd_ms{tag}"] / n[f"eq14_ms{tag}"]
    bars[f"ssgd, {label}"] = [n[f"ssgd_ms{tag}"], n[f"eq13_ms{tag}"]]
    bars[f"dcs3gd, {label}"] = [n[f"dcs3gd_ms{tag}"], n[f"eq14_ms{tag}"]]
    return cs, cd


def _time_checks(points=tuple((f"_r{rho:g}", f"at t_ARed/t_C = {rho:g}", rho) for rho in RATIOS),
                 link="model conformance (the link charges no CPU)"):
    """eq. 13 and 14 at each point (tag, where in words, t_ARed / t_C): measured over the model,
    +-20 %. SSGD on eq. 13 is baseline sanity (shown); DC-S3GD on eq. 14 is model conformance,
    whose null (DC-S3GD no faster than SSGD: eq. 13's time) is (1 + ratio) / max(1, ratio)."""
    out = []
    for tag, where, rho in points:
        out.append(near(f"ssgd_over_eq13{tag}", 1.0, 0.2, f"measured iteration over eq. 13 {where}",
                        "eq. 13 at the run's own t_C and t_ARed, +-20 % (the run-to-run spread of an iteration's "
                        "time on 2 shared cores): baseline sanity, shown", partial_tol=0.5, timing=True, kind=SANITY))
        out.append(near(f"dcs3gd_over_eq14{tag}", 1.0, 0.2, f"measured iteration over eq. 14 {where}",
                        f"eq. 14 at the run's own t_C and t_ARed, +-20 % (the run-to-run spread of an iteration's "
                        f"time on 2 shared cores): {link}", partial_tol=0.3, timing=True, kind=MODEL,
                        null=(1 + rho) / max(1.0, rho)))
    return tuple(out)


# ------------------------------------------------------------------ the same checks across a real link
REAL = "_real"


def _real_hyper(setup):
    digits = setup.kind == "digits"
    return {"model": _bundled("dcs3gd_digits_wide.toml") if digits else setup.model("timing"), "batch": 256,
            "iterations": 30 if setup.quick else 100, "lr": 0.01, "momentum": 0.9,
            "link": "REAL: scripts/cluster, one node (network namespace) per rank, joined by veth pairs shaped with "
                    "tc tbf at the rate of the emulated link whose all-reduce takes t_C (--link: its bandwidth); "
                    "t_C and t_ARed then MEASURED on that link",
            "note": ("a 64-1000-500-10 perceptron on the digits (570,510 parameters: a 2.3 MB gradient, far beyond "
                     "tbf's 128 KiB bucket, where digits_cnn's 34 KiB would pass as one burst)" if digits else
                     "the timing model of the data") + "; batch 256, so that the rate is a few hundred Mbit/s"}


def _real_measure(runs, setup, hp, seed):
    common = dict(model=hp["model"], batch=hp["batch"], iterations=hp["iterations"], lr=hp["lr"],
                  eval_every=f"{hp['iterations']}it")
    # across a cluster at the rate of the emulated link whose all-reduce takes t_C (t_C measured here first);
    # t_C and t_ARed measured on the real link by a run of ssgd, whose blocking all-reduce is its idle time
    rate, t_c0, (cal, s, d) = cluster.across(runs, setup, hp, seed, 1.0, [
        ("ssgd", "calibration (t_C, t_ARed: the real link)", dict(momentum=0.0, **common)),
        ("ssgd", "ssgd, the real link", dict(momentum=hp["momentum"], **common)),
        ("dcs3gd", "dcs3gd, the real link", dict(momentum=hp["momentum"], **common))],
        measured=lambda run: per_iteration_ms(run, "idle") / per_iteration_ms(run, "compute"))
    t_c, t_ared = per_iteration_ms(cal, "compute") / 1e3, per_iteration_ms(cal, "idle") / 1e3
    n, bars = {"rate_mbit": rate, "t_c_no_link_ms": 1e3 * t_c0}, {}
    cs, cd = _eq13_eq14(n, bars, REAL, "the real link", s, d, t_c, t_ared)
    # eq. 14 as the paper writes it: t_C(B) the compute alone, measured with no transfer in flight
    n[f"eq14_tc_ms{REAL}"] = 1e3 * max(t_c, t_ared)
    n[f"dcs3gd_over_eq14_tc{REAL}"] = n[f"dcs3gd_ms{REAL}"] / n[f"eq14_tc_ms{REAL}"]
    n["ratio_measured"] = t_ared / t_c
    # the CPU the transfer takes: DC-S3GD's compute runs while its all-reduce is in flight, SSGD's does not
    n["compute_inflation"] = cd / cs
    # the share of min(t_C, t_ARed), the time eq. 14 hides, that the overlap did hide (1: eq. 14; 0: eq. 13)
    n["overlap_achieved"] = (n[f"ssgd_ms{REAL}"] - n[f"dcs3gd_ms{REAL}"]) / (1e3 * min(t_c, t_ared))
    return n, {"ms per iteration on the real link: measured | model (eq. 13, 14) at the measured t_C, t_ARed": bars}


def _real_discussion(hp, m):
    return (f"On the real link (tbf at {fmt(m['rate_mbit'])} Mbit/s each way) the all-reduce took "
            f"{fmt(m['t_ared_ms_real'])} ms against t_C = {fmt(m['t_c_ms_real'])} ms (t_ARed / t_C = "
            f"{fmt(m['ratio_measured'])}, measured by a calibration run of ssgd across the cluster). DC-S3GD's "
            f"compute took {fmt(m['compute_inflation'])}x SSGD's: every byte crosses the kernel's TCP stack on the "
            "same cores, and MPICH moves an MPI_Iallreduce forward only inside MPI calls (the polls between "
            "layers), both of which the emulated link leaves out. Eq. 13 and 14 are evaluated at each run's own "
            "compute (dcs3gd_over_eq14_real, which lets the grown compute in) and eq. 14 also at the compute alone "
            f"(dcs3gd_over_eq14_tc_real: {fmt(m['dcs3gd_over_eq14_tc_real'])}, the paper's t_C(B)); the overlap "
            f"hid {fmt(m['overlap_achieved'])} of the min(t_C, t_ARed) that eq. 14 hides (1: full overlap, 0: "
            f"none): a speed-up of {fmt(m['speedup_real'])} against eq. 13/14's {fmt(m['model_speedup_real'])} "
            "(means over the seeds).")


CLAIMS = [
    Claim("dcs3gd-accuracy", "Rigazzi et al. 2019 (DC-S3GD)", "section IV-C, Table I",
          "At Table I's 16k-32k DC-S3GD's validation accuracy is 1.8-2.2 pp above synchronous SGD's reference at "
          "the same batch (\"state-of-the-art accuracy on up to 64 nodes\"); at larger batches it falls below.",
          "ResNet-50: 77.2-77.5 % against SSGD's 75.3-75.4 % at 16k-32k; 75.1-75.6 % against 76.2 % at 64k; "
          "69.7 % against K-FAC's 75.0 % at 128k (Table I, whole on the page)",
          (Check("dcs3gd_minus_ssgd", 1.3, 2.7, "DC-S3GD's final test accuracy minus SSGD's (pp)",
                 "Table I: +2.2 (16k: 77.5 - 75.3), +2.0 and +1.8 (32k: 77.4 - 75.4, 77.2 - 75.4); " + TOL,
                 kind=PAPER, null=0.0, paper_value=2.0, needs=("global_batch_share", SHARE_16K, 1.0),
                 needs_why=f"a global batch of at least {100 * SHARE_16K:.2f} % of the training set, Table I's 16k "
                           "of ImageNet's 1,281,167 images (dcs3gd-batch runs Table I's batches)"),
           Check("dcs3gd_minus_ssgd", -0.5, 0.5, "DC-S3GD's final test accuracy minus SSGD's (pp), a small batch",
                 "equal within 0.5 pp (the seeds' spread; 50 of MNIST's 10,000 test images): baseline sanity at a "
                 "batch far below the paper's, shown", kind=SANITY)),
          _acc_hyper, _acc_measure, "curves",
          quotes=(("Table I", "ResNet-50/101/152, VGG-16 on ImageNet-1k, 32-128 CPU nodes", TABLE_I), RESNET50),
          regime=f"MNIST, MNIST-MLP (784-500-500-10), a global batch of {BATCH_16K}: Table I's 16k as the same "
                 "share of the training set (dcs3gd-batch maps 32k-128k alike), 6 epochs, both methods with the same "
                 "settings; the check is Table I's +1.8 to +2.2 pp at 16k-32k. Results before issue 42 ran a global "
                 "batch of 64, where the gap cannot appear: not testable",
          ours="the band (equal within 0.5 pp); the paper compares with SSGD numbers from other papers ([23], [9]) "
               "at the same batch, we run SSGD with the same settings",
          paper_values={"dcs3gd_minus_ssgd": "+2.2 (16k), +2.0 and +1.8 (32k); -0.6 and -1.1 (64k); -5.3 against K-FAC "
                                               "(128k)"},
          tuning="the paper tunes its own runs (\"for each combination ... the run which reached the lowest "
                 "validation error\") and takes SSGD's numbers from other papers at the same batch; here both "
                 "share one set, untuned",
          data="mnist", axes=("epochs", "test accuracy (%)"), budget=(15, 20)),
    Claim("dcs3gd-batch", "Rigazzi et al. 2019 (DC-S3GD)", "section IV-C 1), Table I (ResNet-50 rows)",
          "DC-S3GD's accuracy relative to SSGD at the same global batch falls as the batch grows: equal or better "
          "up to 32k, below at 64k, well below at 128k.",
          "ResNet-50, DC-S3GD minus the SSGD reference: +2.2 (16k), +2.0/+1.8 (32k), -0.6/-1.1 (64k), -5.3 (128k, "
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
          data="mnist", axes=("epochs", "test accuracy (%)"), budget=(30, 35)),
    Claim("dcs3gd-iteration", "Rigazzi et al. 2019 (DC-S3GD)", "section III-D 1), eq. 13 and 14",
          "An iteration of DC-S3GD takes max(compute, all-reduce) where SSGD's takes their sum.",
          "t_SSGD = t_C + t_ARed (eq. 13), t_DC-S3GD = max(t_C, t_ARed) (eq. 14); the paper gives no measured "
          "ratio",
          _time_checks(), _time_hyper, _time_measure, "bars",
          quotes=(EQ13_14,),
          regime="a sweep of t_ARed / t_C over 0.5, 1, 2 (the paper reports no ratio) on an EMULATED link; "
                 "digits CNN, 2 ranks. " + LEFT_OUT + " (dcs3gd-iteration-cluster runs the same checks across "
                 "scripts/cluster's real link)",
          ours="the speed-up 2x at t_C = t_ARed is our derivation from eq. 13/14, not a number of the paper; "
               "the tolerance +-20 % is ours",
          paper_values={"model_speedup_r1": "2 at t_C = t_ARed (ours, from eq. 13/14)"},
          tuning="a timing model: the hyperparameters do not enter it; both methods share one set",
          axes=("", "ms per iteration"), budget=(10, 15)),
    Claim("dcs3gd-iteration-cluster", "Rigazzi et al. 2019 (DC-S3GD)", "section III-D 1), eq. 13 and 14",
          "An iteration of DC-S3GD takes max(compute, all-reduce) where SSGD's takes their sum: on a real link.",
          "t_SSGD = t_C + t_ARed (eq. 13), t_DC-S3GD = max(t_C, t_ARed) (eq. 14); the paper gives no measured "
          "ratio",
          _time_checks(((REAL, "on the real link", 1.0),), "model conformance on a real link") + (
              near(f"dcs3gd_over_eq14_tc{REAL}", 1.0, 0.2, "measured DC-S3GD iteration over eq. 14 at t_C measured "
                   "with no transfer in flight (the calibration's, the paper's t_C(B)), on the real link",
                   "eq. 14 at the calibration's t_C and t_ARed, +-20 % (the run-to-run spread): the CPU the "
                   "transfer takes from the compute counts against the overlap", partial_tol=0.3, timing=True,
                   kind=MODEL, null=2.0),),
          _real_hyper, _real_measure, "bars",
          quotes=(EQ13_14,),
          regime="a REAL link: scripts/cluster, 2 nodes (network namespaces of this machine; one per --ranks) x 1 "
                 "rank, TCP through veth pairs shaped with tc tbf at the bandwidth that makes the all-reduce take "
                 "t_C (t_C measured first without a link), so t_ARed / t_C near 1 (the point where eq. 14 hides the "
                 "most), then t_C and t_ARed MEASURED on that link by a calibration run of ssgd (compute; its "
                 "blocking all-reduce) and the ratio reported; a 64-1000-500-10 perceptron on the digits (a 2.3 MB "
                 "gradient; with --data, the data's timing model), batch 256. The transfer costs CPU on the same "
                 "cores as the compute, and MPICH progresses DC-S3GD's MPI_Iallreduce only inside MPI calls (the "
                 "polls between layers): the overlap is partial, not eq. 14's. Needs root (network namespaces): "
                 "otherwise not testable here",
          ours="the rate chosen for t_ARed / t_C near 1 (the paper reports no ratio); the tolerance +-20 % (partly "
               "+-50 %) around eq. 13 and 14; overlap_achieved, the share of min(t_C, t_ARed) hidden, is ours",
          paper_values={"model_speedup_real": "2 at t_C = t_ARed (ours, from eq. 13/14)",
                        "overlap_achieved": "1 (eq. 14: the all-reduce hidden wholly behind the compute)"},
          tuning="a timing model: the hyperparameters do not enter it; both methods share one set",
          axes=("", "ms per iteration"), budget=(10, 15), untestable=cluster.untestable,
          requires=cluster.REQUIRES,
          discussion=_real_discussion),
]
