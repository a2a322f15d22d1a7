"""Li et al. 2018 (Pipe-SGD): Figure 4's seven variants (PS-Sync, D-Sync, D-Sync+T/+Q, Pipe-SGD,
Pipe-SGD+T/+Q) on MNIST-MLP: final accuracy against D-Sync's, and the end-to-end time of the same
iterations next to eq. 2 and eq. 4; the 2.0-3.2x over D-Sync at the communication-to-computation
ratio it implies through eq. 2 and 4 (:func:`derive_ratio`), with K = 1 against K = 2; K = 4
against K = 2."""

from refsgd.comm import codecs
from refsgd.comm.link import Link, reduction_time
from refsgd.nn import load_model
from refsgd.reproduce.measure import (Claim, acc, curve, epochs, eval_every, link_for, per_iteration_ms, run_seconds,
                                      scale_speedups)
from refsgd.reproduce.verdict import MODEL, PAPER, SANITY, Check, emulated, near


VARIANTS = (("ps-sync", "ps-sync", "none"), ("d-sync", "d-sync", "none"), ("d-sync+T", "d-sync", "t16"),
                 ("d-sync+Q", "d-sync", "q8v"), ("pipe-sgd", "pipe-sgd", "none"), ("pipe-sgd+T", "pipe-sgd", "t16"),
                 ("pipe-sgd+Q", "pipe-sgd", "q8v"))


SETUP_TEXT = ("section 4, Metrics and Setup", "all benchmarks",
              "We measure the wall-clock time of end-to-end training, i.e., the same number of iterations for "
              "different settings. [...] For the setup, we use a cluster of four nodes, each of which consists of a "
              "Titan XP GPU [40] and a Xeon CPU E5-2640 [17]. We employ an additional node as the parameter server "
              "to support the conventional centralized design. All nodes are connected by 10Gb Ethernet.")
MLP_TEXT = ("section 4, Datasets", "MNIST",
            "We use a classical 3-layer perceptron, MNIST-MLP, with both hidden layers being 500-dimensional and "
            "with a global batch size of 100.")
SPEED_TEXT = ("section 4, Timing Breakdown", "MNIST-MLP, CIFAR100-Convex, AlexNet, ResNet18",
              "As a result, our approach achieves a speedup of 2.0 ~ 3.2x compared to D-Sync and 4.0 ~ 5.4x compared "
              "to PS-Sync for these benchmarks. Note that these speedups are based on the comparison between "
              "different approaches in the same cluster without scaling the cluster size.")
ACC_TEXT = ("section 4, Accuracy", "all four benchmarks",
            "Interestingly, in our optimal settings \"PipeSGD +T/Q,\" we find that only AlexNet drops top-1 accuracy "
            "by 0.005 compared to baseline D-Sync while all other benchmarks show slightly improved accuracies.")
FIG4_LABELS = ("Figure 4, right column, MNIST-MLP row (the final accuracies labelled on the bars)", "MNIST-MLP, MNIST",
               "0.9833 0.9833 0.9834 0.9830 0.9834 0.9836 0.9833")
EQ_TEXT = ("section 3.1, eq. 2 and 4", "any network",
           "ltotal_sync = T · (lup + lcomp + lcomm), (2)\n[...]\nltotal_pipe = T · max(lup + lcomp, lcomm), (4)\n"
           "where the total runtime is solely determined by either computation or communication resources, "
           "regardless of K (when K >= 2).")


def _hyper(setup):
    return {"model": setup.model("accuracy"), "batch": 100 // setup.ranks if 100 % setup.ranks == 0 else 50,
            "epochs": epochs(setup, (1, 2), (1, 2)), "lr": round(0.1 / setup.ranks, 6), "schedule": "constant",
            "dependency": 2, "warmup_epochs": 0, "link": "50,10",
            "note": "MNIST-MLP at the paper's global batch 100 (100 / ranks per worker) over an EMULATED 10 Gbit/s "
                    "link (50 us latency): the paper's 10GbE; lr multiplies the sum over workers of their mean "
                    "gradients (the paper's form) for all seven; no momentum (the paper's variants have none); K = 2 "
                    "from the first iteration; +T is t16 (16-bit truncation), +Q q8v (the paper's Q8: one range per "
                    "vector, section 3.2); ps-sync runs on ranks + 1 processes (a server and as many workers)"}


def _opts(setup, hp, codec="none", **extra):
    opts = dict(model=hp["model"], batch=hp["batch"], epochs=hp["epochs"], lr=hp["lr"], schedule=hp["schedule"],
                link=setup.link or hp["link"], eval_every=eval_every(setup, hp["batch"], setup.ranks, per_epoch=2))
    if codec != "none":
        opts["compress"] = codec
    return dict(opts, **extra)


def _measure(runs, setup, hp, seed):
    link = setup.link or hp["link"]
    r = {}
    for label, algo, codec in VARIANTS:
        opts = _opts(setup, hp, codec)
        if algo == "pipe-sgd":
            opts.update(dependency=hp["dependency"], warmup_epochs=hp["warmup_epochs"])
        # ps-sync: a server and as many workers as the others, so more processes than cores: untimed
        r[label] = runs.train(algo, seed, variant=label, ranks=setup.ranks + (label == "ps-sync"),
                              timed=label != "ps-sync", **opts)
    curves = {k: curve(v, x="seconds") for k, v in r.items()}
    n = {}
    for k, v in r.items():
        n[f"acc_{k}"] = acc(v)
        n[f"seconds_{k}"] = run_seconds(v)  # end-to-end: the same iterations for every variant
        n[f"ms_per_iteration_{k}"] = per_iteration_ms(v, "wall")
    # eq. 2 (synchronous: l_up + l_comp + l_comm) and eq. 4 (Pipe-SGD, K = 2: max(l_up + l_comp, l_comm))
    # with the run's own l_up and l_comp (compute + codec) and l_comm = X + R: the link's transfer of the
    # bytes the codec puts on the wire and eq. 5's reduction of float32 values
    lk, params = Link.parse(link), load_model(hp["model"]).num_params
    wire = {c: 4 * params if c == "none" else codecs.get(c).wire_bytes(params) for _, _, c in VARIANTS}
    split = {}
    for label, algo, codec in VARIANTS:
        v = r[label]
        l_up, compute, codec_ms = (per_iteration_ms(v, part) for part in ("update", "compute", "codec"))
        l_comp = compute + codec_ms
        p = v.world
        # a parameter server's link carries the gradients up and the weights down
        l_comm = 1e3 * (2 * lk.ps_time(wire[codec], p) if algo == "ps-sync"
                        else lk.time(wire[codec], p) + reduction_time(4 * params, p, "float32"))
        model = max(l_up + l_comp, l_comm) if algo == "pipe-sgd" else l_up + l_comp + l_comm
        n[f"model_ms_{label}"] = model
        n[f"measured_over_model_{label}"] = n[f"ms_per_iteration_{label}"] / model
        wall = n[f"ms_per_iteration_{label}"]
        split[label] = {"compute": compute, "codec": codec_ms, "update": l_up,
                        "communication": max(0.0, wall - compute - codec_ms - l_up), "measured": wall,
                        "l_comm (X + R)": l_comm, "model": model,
                        "model is": "eq. 4 max(l_up + l_comp, l_comm)" if algo == "pipe-sgd"
                        else "eq. 2 l_up + l_comp + l_comm"}
    for c in ("T", "Q"):
        n[f"pipe{c}_minus_dsync_acc"] = n[f"acc_pipe-sgd+{c}"] - n["acc_d-sync"]
        n[f"speedup_pipe{c}_vs_dsync"] = n["seconds_d-sync"] / n[f"seconds_pipe-sgd+{c}"]
        n[f"model_speedup_pipe{c}_vs_dsync"] = n["model_ms_d-sync"] / n[f"model_ms_pipe-sgd+{c}"]
        n[f"speedup_over_model_pipe{c}"] = n[f"speedup_pipe{c}_vs_dsync"] / n[f"model_speedup_pipe{c}_vs_dsync"]
    return n, {"test accuracy (%) against seconds of training": curves,
               "ms per iteration, measured split | model (eq. 2 sync, eq. 4 pipe)": split}


def _scale(setup, hp, numbers):
    """bench scale at the paper's 4 workers, 10 GbE (per iteration, uncompressed: the models have no codec)."""
    return (scale_speedups(hp["model"], hp["batch"], 4, ("pipe-sgd",), G=1, base="d-sync",
                           paper={"pipe-sgd": "2.0-3.2 (Pipe-SGD+T/+Q over D-Sync, four benchmarks)"})
            + scale_speedups(hp["model"], hp["batch"], 4, ("pipe-sgd",), G=1, base="ps-sync",
                             paper={"pipe-sgd": "4.0-5.4 (Pipe-SGD+T/+Q over PS-Sync, four benchmarks)"}))


def _checks():
    out = []
    for c, paper in (("T", 0.03), ("Q", 0.0)):
        out.append(near(f"pipe{c}_minus_dsync_acc", paper, 0.3, f"Pipe-SGD+{c} minus D-Sync final accuracy (pp)",
                        f"Figure 4's MNIST-MLP labels: {paper:+.2f} pp ({'0.9836' if c == 'T' else '0.9833'} - 0.9833); "
                        "+-0.3 pp (the seeds' spread of the committed runs, 0.18 pp; 30 of 10,000 test images): an "
                        "equivalence", partial_tol=1.0, kind=PAPER, null=0.0))
    out.append(near("measured_over_model_d-sync", 1.0, 0.25, "d-sync's iteration over eq. 2",
                    "eq. 2 at the run's own l_up, l_comp, l_comm, +-25 % (the spread of the committed runs' "
                    "measured over model, up to 21 %): baseline sanity, shown", partial_tol=0.6, timing=True,
                    kind=SANITY, model="model_ms_d-sync"))
    return tuple(out)


# ------------------------------------------------------------------ the speed-up, at the ratio it implies
#: the compression of each codec on the wire: t16 halves a float32, q8v quarters it (the paper's +T, +Q)
SQUEEZE = {"T": 2.0, "Q": 4.0}
PAPER_SPEEDUP = {"T": 2.0, "Q": 3.2}  # the ends of the paper's 2.0-3.2x, each given to the codec that can reach it


def derive_ratio(s, k):
    """rho = l_comm / (l_up + l_comp) at which eq. 2 (D-Sync, uncompressed: 1 + rho) over eq. 4
    (Pipe-SGD with a codec squeezing the wire by k: max(1, rho / k)) is ``s``: where rho <= k the
    pipeline hides the whole transfer, s = 1 + rho, so rho = s - 1 (s <= k + 1: +T reaches at most
    3x, +Q 5x)."""
    if s > k + 1:
        raise ValueError(f"a speed-up of {s} needs a compression beyond {k}")
    return s - 1


RHO = {c: derive_ratio(PAPER_SPEEDUP[c], SQUEEZE[c]) for c in SQUEEZE}


def speed_derivation(link="the emulated link"):
    return ("eq. 2 gives D-Sync's iteration l_up + l_comp + l_comm and eq. 4 Pipe-SGD's max(l_up + l_comp, l_comm'), "
            "l_comm' = l_comm / k with a codec squeezing the wire by k (+T: k = 2, +Q: k = 4); with rho = l_comm / "
            "(l_up + l_comp) the speed-up is (1 + rho) / max(1, rho / k), which is 1 + rho for rho <= k. The paper's "
            f"2.0x (its low end) gives rho = {RHO['T']:g} (+T, and +Q alike); its 3.2x (its high end) rho = "
            f"{RHO['Q']:g}, reachable by +Q only (+T tops out at 3x; at rho = {RHO['Q']:g} eq. 2/4 give +T "
            f"{(1 + RHO['Q']) / max(1, RHO['Q'] / 2):.3g}x). The runs set l_comm = rho x the measured compute on "
            f"{link}")


def _speed_hyper(setup):
    return {"model": setup.model("timing"), "batch": 50, "iterations": 30 if setup.quick else 100, "lr": 0.01,
            "momentum": 0.0, "dependency": 2,
            # --quick: the low end's ratio only
            "ratios": {"T": RHO["T"]} if setup.quick else dict(RHO),
            "note": "D-Sync and Pipe-SGD (K = 2; K = 1 as the pipeline's null) with and without the codecs, no "
                    "momentum (the paper's variants have none), batch 50 per worker (the paper's global 100 on 2)",
            "link": "EMULATED: one float32 all-reduce = rho x t_C (t_C from an ssgd run without a link), rho derived "
                    "from the paper's 2.0x and 3.2x (the page says how), unless --link"}


CODEC = {"T": "t16", "Q": "q8v"}  # the paper's +T and +Q
SPEED_VARIANTS = (("d-sync", "d-sync", "none", 1), ("pipe-sgd K=1", "pipe-sgd", "none", 1),
                  ("pipe-sgd", "pipe-sgd", "none", 2), ("pipe-sgd+T", "pipe-sgd", "t16", 2),
                  ("pipe-sgd+Q", "pipe-sgd", "q8v", 2))


def speed_variants(c):
    """The variants run at codec ``c``'s ratio: (label, algo, codec, K), uncompressed and with ``c``'s codec."""
    return [v for v in SPEED_VARIANTS if v[2] in ("none", CODEC[c])]


def speed_options(hp, algo, codec, K, **link):
    """train's options of a variant: the claim's set, ``link`` (``link=`` the emulated one, or none), the codec, K."""
    opts = dict(model=hp["model"], batch=hp["batch"], iterations=hp["iterations"], lr=hp["lr"], **link,
                eval_every=f"{hp['iterations']}it")
    if codec != "none":
        opts["compress"] = codec
    if algo == "pipe-sgd":
        opts.update(dependency=K, warmup_epochs=0)
    return opts


def speed_numbers(n, bars, c, rho, runs, t_comm, where):
    """Into ``n`` (and ``bars``, labelled ``where``) the numbers of codec ``c``'s ratio ``rho``: each run
    of ``runs`` ({label: run}) against eq. 2 (D-Sync, K = 1) or eq. 4 (K = 2) at its own l_up + l_comp
    and ``t_comm`` (s, an uncompressed all-reduce, which a codec squeezes by SQUEEZE; None: D-Sync's
    as measured), the measured ratio, the speed-up and K = 1 over K = 2. Returns {label: l_up + l_comp
    in ms}."""
    g = f"_{c}"
    ms = {label: per_iteration_ms(v, "wall") for label, v in runs.items()}
    comp = {label: sum(per_iteration_ms(v, part) for part in ("update", "compute", "codec"))
            for label, v in runs.items()}
    # l_comm as D-Sync measured it: its iteration beyond its compute and update
    l_comm = ms["d-sync"] - comp["d-sync"]
    t_ms = l_comm if t_comm is None else 1e3 * t_comm
    for label, algo, codec, K in speed_variants(c):
        wire = SQUEEZE[c] if codec != "none" else 1.0
        model = comp[label] + t_ms / wire if algo == "d-sync" or K == 1 else max(comp[label], t_ms / wire)
        n[f"over_model_{label}{g}"] = ms[label] / model
        bars[f"{label}, {where}"] = [ms[label], model]
    n[f"ratio_derived{g}"] = rho
    n[f"ratio_measured{g}"] = l_comm / comp["d-sync"]  # l_comm / (l_up + l_comp), as D-Sync measured it
    n[f"speedup_pipe{c}{g}"] = ms["d-sync"] / ms[f"pipe-sgd+{c}"]
    n[f"K1_over_K2{g}"] = ms["pipe-sgd K=1"] / ms["pipe-sgd"]
    return comp


def _speed_measure(runs, setup, hp, seed):
    n, bars = {}, {}
    for c, rho in hp["ratios"].items():
        link, t_c, t_comm = link_for(runs, setup, hp, seed, ratio=rho)
        r = {label: runs.train(algo, seed, variant=f"{label}, rho {rho:g}", **speed_options(hp, algo, codec, K,
                                                                                         link=link))
             for label, algo, codec, K in speed_variants(c)}
        speed_numbers(n, bars, c, rho, r, t_comm, f"rho {rho:g}")
    return n, {"ms per iteration: measured | model (eq. 2 sync and K = 1, eq. 4 pipe) at rho derived from the "
               "paper's speed-ups": bars}


def speed_checks(codecs=tuple(RHO), link="model conformance (the link charges no CPU)", sanity=True):
    """Each of ``codecs``' ratio: D-Sync on eq. 2 (baseline sanity, shown, where ``sanity``), Pipe-SGD on
    eq. 4 and K = 1 over K = 2 (model conformance, ``link`` says on which link), and the paper's
    speed-up where the measured ratio is near the derived one."""
    out = []
    for c in codecs:
        rho, g = RHO[c], f"_{c}"
        s = PAPER_SPEEDUP[c]
        null_pipe = (1 + rho) / max(1.0, rho)  # Pipe-SGD as slow as D-Sync (eq. 2), over eq. 4
        if sanity:
            out.append(near(f"over_model_d-sync{g}", 1.0, 0.25, f"D-Sync's iteration over eq. 2, rho {rho:g}",
                            "eq. 2 at the run's own l_up + l_comp and l_comm, +-25 % (the spread of the committed "
                            "runs' measured over model, up to 21 %): baseline sanity, shown", timing=True, kind=SANITY))
        out.append(near(f"over_model_pipe-sgd{g}", 1.0, 0.25, f"Pipe-SGD's (K = 2) iteration over eq. 4, rho {rho:g}",
                        f"eq. 4 at the run's own l_up + l_comp and l_comm, +-25 % (the spread of the committed runs' "
                        f"measured over model, up to 21 %): {link}", timing=True, kind=MODEL, null=null_pipe))
        out.append(near(f"K1_over_K2{g}", 1 + min(rho, 1 / rho), 0.2, f"Pipe-SGD's iteration at K = 1 over K = 2, "
                        f"rho {rho:g}", "eq. 2 over eq. 4: (1 + rho) / max(1, rho), +-20 % (the seeds' spread of two "
                        f"iteration times): {link}", relative=True, timing=True, kind=MODEL, null=1.0))
        # the paper's number: d ln (1 + rho) / d ln rho = rho / (1 + rho) x a 10 % error of rho, beside 10 %
        sens = rho / (1 + rho)
        tol = ((0.1 * sens) ** 2 + 0.1 ** 2) ** 0.5
        out.append(near(f"speedup_pipe{c}{g}", s, tol, f"Pipe-SGD+{c} over D-Sync, per iteration, rho {rho:g}",
                        f"the paper's {s:g} (the {'low' if c == 'T' else 'high'} end of its 2.0-3.2x, four "
                        f"benchmarks), relative +-{100 * tol:.0f} %: eq. 2/4 move it {sens:.2f}x a ratio's error, 10 "
                        "%, beside the measurement's 10 %", relative=True, timing=True, kind=PAPER, null=1.0,
                        needs=(f"ratio_measured{g}", rho / 1.2, rho * 1.2),
                        needs_why=f"l_comm / (l_up + l_comp) measured within 20 % of the derived {rho:g} (a --link "
                                  "of your own sets another)"))
    return tuple(out)


K_TEXT = ("section 3.1, after eq. 4", "any network, limited resources",
          "Also, since gradient updates are always delayed by (K - 1) iterations, increasing K > 2 only harms, i.e., "
          "the optimal value of K = 2 for Pipe-SGD with limited resources. Hence, the staleness of gradients is "
          "limited to 1 iteration, i.e., the minimal staleness achievable in asynchronous updates.")


def _k_measure(runs, setup, hp, seed):
    # K = 2 is pipesgd-fig4's uncompressed Pipe-SGD run, the same command (run once)
    r = {K: runs.train("pipe-sgd", seed, variant=f"pipe-sgd K={K}",
                       **_opts(setup, hp, dependency=K, warmup_epochs=hp["warmup_epochs"])) for K in (2, 4)}
    n = {f"acc_K{K}": acc(v) for K, v in r.items()}
    n.update({f"seconds_K{K}": run_seconds(v) for K, v in r.items()})
    n["acc_K2_minus_K4"] = n["acc_K2"] - n["acc_K4"]
    n["seconds_K4_over_K2"] = n["seconds_K4"] / n["seconds_K2"]
    return n, {"test accuracy (%) against epochs": {f"K = {K}": curve(v) for K, v in r.items()}}


PAPER_NODES = 4  # "a cluster of four nodes"


def dsync_over_ps_comm(p):
    """D-Sync's all-reduce time over PS-Sync's communication, in refsgd's link model without latency:
    the ring's 2 (p - 1) / p messages of the gradient per rank against the server's one link carrying
    the p - 1 workers' gradients up and the weights down, 2 (p - 1): 1 / p."""
    return (2 * (p - 1) / p) / (2 * (p - 1))


def over_ps_sync(c, ps_comm):
    """Pipe-SGD with codec ``c`` over PS-Sync by eq. 2 and 4 at the ratio RHO[c] derived from the
    paper's speed-up over D-Sync, PS-Sync's communication being ``ps_comm`` x D-Sync's: eq. 2's
    1 + ps_comm rho over eq. 4's max(1, rho / k)."""
    rho = RHO[c]
    return (1 + ps_comm * rho) / max(1.0, rho / SQUEEZE[c])


def _ps_prediction():
    link, paper = 1 / dsync_over_ps_comm(PAPER_NODES), 2.0
    return (f"Pipe-SGD+T {over_ps_sync('T', link):.1f}x, +Q {over_ps_sync('Q', link):.1f}x with PS-Sync's "
            f"communication at the link model's {link:g}x D-Sync's ({PAPER_NODES} nodes); {over_ps_sync('T', paper):.1f}x "
            f"and {over_ps_sync('Q', paper):.1f}x at the paper's own 2x (its 50 % reduction); eq. 2 and 4 at the "
            "ratios derived from its 2.0x and 3.2x (a model prediction)")


PS_SYNC = (("\"4.0 ~ 5.4x compared to PS-Sync for these benchmarks\" (section 4, Timing Breakdown)",
            "not testable here: PS-Sync takes a server process beside the workers (3 processes on 2 cores: its "
            "times measure time-slicing; pipesgd-fig4 runs it untimed), and on the emulated link its communication "
            "would be the link model's own number", _ps_prediction()),
           ("\"the comparison between centralized and decentralized designs shows 50% reduction in uncompressed "
            "communication time\" (section 4, Timing Breakdown)",
            "not testable here: PS-Sync's communication time is a timing of 3 processes on 2 cores, as above",
            f"{1 - dsync_over_ps_comm(PAPER_NODES):.0%} reduction at the paper's {PAPER_NODES} nodes (refsgd's link "
            "model, latency left out: D-Sync's ring over a server's one link is 1 / p); the paper's 50 % says its "
            "server's traffic is not all on one link"))

CLAIMS = [
    Claim("pipesgd-fig4", "Li et al. 2018 (Pipe-SGD)", "section 4, Figure 4 (MNIST-MLP)",
          "Pipe-SGD with truncation or quantisation keeps D-Sync's accuracy, and every variant's end-to-end time "
          "follows eq. 2 (synchronous) or eq. 4 (pipelined).",
          "MNIST-MLP final accuracies 0.9830-0.9836 for the seven variants; Pipe-SGD+T/+Q 2.0-3.2x faster than "
          "D-Sync and 4.0-5.4x than PS-Sync over four benchmarks (4 nodes, 10GbE)",
          _checks(), _hyper, _measure, "curves",
          quotes=(SETUP_TEXT, MLP_TEXT, SPEED_TEXT, ACC_TEXT, FIG4_LABELS, EQ_TEXT),
          regime="MNIST, the paper's MNIST-MLP at its global batch 100 over an EMULATED 10 Gbit/s link (the "
                 "paper's 10GbE), end-to-end time of the same iterations; 2 ranks, one per core, where the paper "
                 "has 4 GPU nodes, so l_comm / l_comp is about 0.15 here, where eq. 2/4 allow at most 1.15x: the "
                 "paper's 2.0-3.2x is tested by pipesgd-speedup at the ratio it implies; here the accuracies (an "
                 "equivalence: the null passes it, so it cannot carry a verdict) and D-Sync on eq. 2 (shown). "
                 "PS-Sync (3 processes on 2 cores) enters no timing check",
          ours="the bands; reading Figure 4's MNIST-MLP labels in the legend's order (PS-Sync, D-Sync, D-Sync+T, "
               "D-Sync+Q, Pipe-SGD, Pipe-SGD+T, Pipe-SGD+Q) is ours",
          paper_values={"pipeT_minus_dsync_acc": "+0.03 (0.9836 - 0.9833)", "pipeQ_minus_dsync_acc": "0.00 (0.9833 - "
                        "0.9833)", "speedup_pipeT_vs_dsync": "2.0-3.2 (four benchmarks; pipesgd-speedup tests it)"},
          at_scale="the paper's 4 GPU nodes on 10GbE; here 2 CPU ranks on one machine", scale=_scale,
          tuning="shared: the paper's seven variants train the same network at the same global batch (100 for "
                 "MNIST-MLP) with the same rate; the paper does not say it tuned any variant",
          data="mnist", axes=("seconds of training", "test accuracy (%)"), budget=(30, 65)),
    Claim("pipesgd-speedup", "Li et al. 2018 (Pipe-SGD)", "section 4, Timing Breakdown (eq. 2 and 4)",
          "Pipe-SGD with truncation or quantisation is 2.0-3.2x faster than D-Sync, as eq. 2 and 4 predict at the "
          "communication-to-computation ratio those speed-ups imply; K = 2 beats K = 1 as eq. 4 beats eq. 2.",
          "Pipe-SGD+T/+Q 2.0-3.2x faster than D-Sync over four benchmarks (4 nodes, 10GbE)",
          emulated(speed_checks(), "pipesgd-speedup-cluster"), _speed_hyper, _speed_measure, "bars",
          quotes=(SPEED_TEXT, EQ_TEXT, SETUP_TEXT),
          regime="l_comm / (l_up + l_comp) derived from the paper's 2.0x and 3.2x through eq. 2 and 4 (below), set on "
                 "an EMULATED link, 2 ranks, the digits CNN, the same iterations for every variant. The emulated link "
                 "charges no CPU for a transfer: the measured-over-model checks are model conformance",
          ours="the derivation of rho from the paper's speed-ups (our arithmetic with its equations); each end of "
               "2.0-3.2x given to the codec that can reach it; the tolerances (their basis beside each)",
          paper_values={"speedup_pipeT_T": "2.0 (the low end of 2.0-3.2)",
                        "speedup_pipeQ_Q": "3.2 (the high end of 2.0-3.2)"},
          at_scale="the paper's 4 GPU nodes on 10GbE; here the ratio they imply, on 2 CPU ranks", scale=_scale,
          tuning="a timing measurement: every variant shares one set (no momentum: the paper's variants have none)",
          axes=("", "ms per iteration"), budget=(10, 15), derivation=speed_derivation(), untested=PS_SYNC),
    Claim("pipesgd-k", "Li et al. 2018 (Pipe-SGD)", "section 3.1, eq. 4 (K = 2 is optimal)",
          "With limited resources the time of Pipe-SGD does not depend on K >= 2 (eq. 4), so K > 2 only adds "
          "staleness: K = 2 is optimal.",
          "\"the optimal value of K = 2\" (no measured number)",
          (near("seconds_K4_over_K2", 1.0, 0.15, "end-to-end time at K = 4 over K = 2",
                "eq. 4: \"regardless of K (when K >= 2)\", +-15 % (the seeds' spread of two run times, up to 4 %, "
                "and a shared machine's): an equivalence, shown", partial_tol=0.4, timing=True, kind=SANITY),
           Check("acc_K2_minus_K4", 0.3, 2.0, "final accuracy at K = 2 minus K = 4 (pp)",
                 "\"increasing K > 2 only harms\" (no number): K = 4 below K = 2 by more than the seeds' spread of "
                 "such a gap (0.24 pp in the committed runs), at most 2 pp: model conformance with the paper's "
                 "staleness argument", partial=(0.1, 5.0), kind=MODEL, null=0.0)),
          _hyper, _k_measure, "curves", quotes=(EQ_TEXT, K_TEXT),
          regime="pipesgd-fig4's: MNIST, MNIST-MLP at global batch 100 over an EMULATED 10 Gbit/s link, 2 ranks",
          ours="the bands (the paper gives no number)",
          tuning="shared with pipesgd-fig4", data="mnist", axes=("epochs", "test accuracy (%)"), budget=(6, 10)),
]
