"""Hakimi et al. 2021 (LAGA): Table 1 (accuracy as tau grows), the idle time against SSGD and
SSGD-OPT (section 5.1, eq. 3, 4 and 6) and the speed-up against tau (Figure 6). The timing
claims run at the T_comm / T_comp the paper's own numbers imply through its own equations
(:func:`derive_idle`, :func:`derive_speedup`: VGG-16's 5.24x and 4.54x at tau = 4, Wide
ResNet's and ResNet-50's tau = 1 numbers, Figure 6's 2.96x), set on an emulated link."""

import dataclasses

from refsgd.bench import models, scale
from refsgd.comm.link import Link
from refsgd.reproduce.measure import Claim, acc, curve, epochs, eval_every, link_for, per_iteration_ms
from refsgd.reproduce.verdict import MODEL, PAPER, SANITY, emulated, near

TABLE_1 = """TABLE 1: ResNet-50 ImageNet Final Test Accuracy
#Accumulations | SSGD | LAGA-SGDM | LAGA-SGDN
1 | 76.4% | 76.44% | 76.3%
2 | 76.24% | 75.95% | 76.28%
4 | 76.23% | 75.63% | 76.28%"""

TABLE_TEXT = ("section 5.2", "ResNet-50, ImageNet",
              "When tau = 1 LAGA-SGDM is on par with SSGD and LAGA-SGDN, and even slightly outperforms them. "
              "However, when trained with more gradient accumulations, the final accuracy of LAGA-SGDM starts to "
              "deteriorate. Conversely, SSGD and LAGA-SGDN maintain high final accuracy even when tau grows.")

HYPER_TEXT = ("section 5.2", "ResNet-50, ImageNet, 8 workers",
              "Each worker computes the gradient on a batch size of 32 and the batches are shuffled after each epoch. "
              "The initial learning-rate is 0.1 (when tau = 1) and is scaled linearly with respect to tau. "
              "Furthermore, the learning-rate is gradually warmed-up during the early iterations (first 5 epochs) "
              "and is decayed by 0.1 at epochs 30, 60, and 80. The training is spanned across 90 epochs in total, "
              "with a momentum coefficient of 0.9 and a weight-decay coefficient of 1e - 4.")

IDLE_TEXT = ("section 5.1 (Figure 4)", "VGG-16, Wide ResNet-101-2, ResNet-50; ImageNet; 8 RTX 2080 Ti GPUs",
             "On Wide ResNet-101-2 [57] with tau = 1, LAGA has 3.89x less idle time than SSGD and 2.67x less than "
             "SSGD-OPT. Increasing tau on communication intensive neural architecture, such as VGG-16, results in "
             "even higher gains for LAGA, where in the VGG-16 neural architecture with tau = 4, LAGA has 5.24x and "
             "4.54x fewer idle time compared to SSGD and SSGD-OPT respectively. Finally, on the highly popular and "
             "communication friendly ResNet-50 neural architecture with tau = 1 (as demonstrated in Figure 3), LAGA "
             "reduces the idle time by 2.3x and 1.45x compared to SSGD and SSGD-OPT respectively.")

EQ_TEXT = ("section 3, eq. 3; section 4.1, eq. 6", "any network",
           "psi_SSGD(tau) = T_comm / (tau T_comp + T_comm) (3)\n"
           "psi_LAGA(tau) = 0 if T_comm <= tau T_comp; (T_comm - tau T_comp) / (tau T_comp + T_comm) otherwise (6)")

EQ4_TEXT = ("section 3, eq. 4", "any network",
            "Next we analyse the communication overhead of SSGD-OPT psi_OPT(tau) which overlaps the communication "
            "with the backpropagation compute time T_bwd of the last micro-batch.\n"
            "psi_OPT(tau) = 0 if T_comm <= T_bwd; (T_comm - T_bwd) / (tau T_comp + T_comm) otherwise (4)")
FIG4_TEXT = ("Figure 4 caption", "various networks, ImageNet, tau = 1, 2, 4",
             "Figure 4: The idle time (ms) due to communication overhead. Increasing tau reduces the idle time for "
             "all algorithms and neural architectures, where LAGA is the least idle in all the settings.")

SPEED_TEXT = ("section 5.1 (Figure 6)", "ImageNet, 8 RTX 2080 Ti GPUs (the network is not named)",
              "Figure 6 shows the speedup gains of LAGA on different tau compared to SSGD without accumulations. As "
              "tau increases the speedup gains of LAGA grow as well, reaching a speedup of up to 2.96x. Notice that "
              "when tau = 4 the speedup gains of LAGA start to saturates since LAGA is near linear scalability and "
              "the amount of gradient accumulations is already close to tau_LAGA.")

FIG3_TEXT = ("section 3 (Figure 3 caption)", "8 workers, micro-batch 32",
             "Figure 3: The computation and communications wall clock time of SSGD. For each of these neural "
             "architectures we ran 5000 iterations on eight workers with a micro-batch size of 32.")


def _acc_hyper(setup):
    e = epochs(setup, (1, 4), (1, 4))
    return {"model": setup.model("accuracy"), "batch": 32, "epochs": e, "lr_per_256": 0.1, "momentum": 0.9,
            "weight_decay": 1e-4,
            "schedule": f"warmup-step:warmup_epochs={e * 5 / 90:.3g},milestone_epochs="
                        f"{e * 30 / 90:.3g}/{e * 60 / 90:.3g}/{e * 80 / 90:.3g},gamma=0.1",
            "note": "the paper's: micro-batch 32 per worker, tau micro-batches per iteration, lr 0.1 per 256 "
                    "samples at tau = 1 scaled linearly with tau (lr_per_256 x ranks x 32 x tau / 256), momentum "
                    "0.9, weight decay 1e-4, warm-up over 5/90 of the run and x0.1 at 30, 60 and 80 of 90, "
                    "scaled to the run's epochs; ssgd with the same momentum (the paper's SSGD is SGD with momentum)"}


def _acc_measure(runs, setup, hp, seed):
    n, curves = {}, {}
    for tau in (1, 4):
        lr = hp["lr_per_256"] * setup.ranks * hp["batch"] * tau / 256
        every = eval_every(setup, hp["batch"] * tau, setup.ranks, per_epoch=2)
        for algo in ("ssgd", "laga-sgdm", "laga-sgdn"):
            r = runs.train(algo, seed, model=hp["model"], batch=hp["batch"], tau=tau, epochs=hp["epochs"],
                           lr=f"{lr:g}", momentum=hp["momentum"], weight_decay=hp["weight_decay"],
                           schedule=hp["schedule"], eval_every=every)
            n[f"acc_{algo}_tau{tau}"] = acc(r)
            curves[f"{algo} tau={tau}"] = curve(r)
    n["ssgd_minus_sgdm_tau4"] = n["acc_ssgd_tau4"] - n["acc_laga-sgdm_tau4"]
    n["sgdn_minus_ssgd_tau4"] = n["acc_laga-sgdn_tau4"] - n["acc_ssgd_tau4"]
    n["sgdm_drop_tau1_to_4"] = n["acc_laga-sgdm_tau1"] - n["acc_laga-sgdm_tau4"]
    return n, {"test accuracy (%) against epochs": curves}


# ------------------------------------------------------------------ the regimes the paper's numbers imply
#: section 5.1's idle reductions: network -> (SSGD's idle over LAGA's, SSGD-OPT's over LAGA's, tau)
IDLE_PAPER = {"vgg16": (5.24, 4.54, 4), "wrn": (3.89, 2.67, 1), "resnet50": (2.3, 1.45, 1)}
NETWORK = {"vgg16": "VGG-16", "wrn": "Wide ResNet-101-2", "resnet50": "ResNet-50"}
SPEEDUP_PAPER = 2.96  # Figure 6: LAGA at tau = 4 over SSGD at tau = 1 (samples/s)
T_BWD = 2 / 3  # our network's backward pass as a share of a forward + backward (as bench scale's per-layer model)
#: the error to which a run holds T_comm / T_comp (SSGD's measured iteration is within 2-17 % of eq. 3's)
RATIO_ERROR = 0.10
#: the error of a measured idle or speed-up at a fixed ratio (the seeds' spread of the committed runs)
MEASURE_ERROR = 0.10


def derive_idle(x, y, tau):
    """(r, b) = (T_comm / T_comp, T_bwd / T_comp) that eq. 3, 4 and 6 give for the paper's idle
    reductions ``x`` (SSGD's idle over LAGA's) and ``y`` (SSGD-OPT's over LAGA's) at ``tau``:
    eq. 3 / eq. 6 = T_comm / (T_comm - tau T_comp) = r / (r - tau) = x, so r = tau x / (x - 1);
    eq. 4 / eq. 6 = (r - b) / (r - tau) = y, so b = r - y (r - tau)."""
    r = tau * x / (x - 1)
    return r, r - y * (r - tau)


def derive_speedup(s, tau=4):
    """r that eq. 3 and 6 give for LAGA's speed-up ``s`` at ``tau`` over SSGD at tau = 1, in samples
    per second: tau (T_comp + T_comm) / max(tau T_comp, T_comm) = s. Where T_comm <= tau T_comp
    (LAGA hides the whole all-reduce) s = 1 + r, so r = s - 1: the only root where s <= tau (above,
    s = tau (1 + r) / r lies between tau and tau + 1)."""
    if s > tau:
        raise ValueError(f"a speed-up of {s} at tau = {tau} has two ratios: give it with one of them")
    return s - 1


def tolerance(sensitivity):
    """A relative tolerance: the model's number moves by ``sensitivity`` x a relative error of r
    (d ln number / d ln r), RATIO_ERROR of it, with MEASURE_ERROR beside it."""
    return ((RATIO_ERROR * sensitivity) ** 2 + MEASURE_ERROR ** 2) ** 0.5


DERIVED = {net: derive_idle(*v) for net, v in IDLE_PAPER.items()}
SPEED_RATIO = derive_speedup(SPEEDUP_PAPER)


def derivations(link="the emulated link"):
    """The derivations in words, with the numbers the code uses (the pages print this); ``link``:
    where the runs set the ratio."""
    lines = []
    for net, (x, y, tau) in IDLE_PAPER.items():
        r, b = DERIVED[net]
        lines.append(f"{NETWORK[net]}, tau = {tau}: eq. 3 / eq. 6 = r / (r - tau) = {x:g} gives T_comm / T_comp = r "
                     f"= {tau} x {x:g} / ({x:g} - 1) = {r:.3f}; eq. 4 / eq. 6 = (r - b) / (r - tau) = {y:g} gives "
                     f"T_bwd / T_comp = b = r - {y:g} (r - {tau}) = {b:.3f}")
    lines.append(f"Figure 6, tau = 4: eq. 3 and 6 give LAGA's speed-up 4 (1 + r) / max(4, r) = {SPEEDUP_PAPER:g}, so "
                 f"(r < 4) 1 + r = {SPEEDUP_PAPER:g}, r = {SPEED_RATIO:.3f}; ResNet-50's r = "
                 f"{DERIVED['resnet50'][0]:.3f} would give {1 + DERIVED['resnet50'][0]:.3f}")
    return "; ".join(lines) + f". The runs set T_comm / T_comp = r on {link}; our network's T_bwd / T_comp " \
        f"is {T_BWD:.3f} (as bench scale's), near VGG-16's and ResNet-50's derived b, not Wide ResNet's, whose " \
        "SSGD-OPT number is shown, not checked."


def _time_hyper(setup):
    return {"model": setup.model("timing"), "batch": 32, "iterations": 30 if setup.quick else 200, "lr": 0.01,
            "momentum": 0.0,
            # --quick: VGG-16's regime only
            "networks": ("vgg16",) if setup.quick else tuple(IDLE_PAPER),
            "note": "laga-sgd (Algorithm 3) has no momentum: ssgd and ssgd-opt run without it too",
            "link": "EMULATED, one all-reduce of the gradient = r x T_comp (one micro-batch's compute, from an "
                    "ssgd run without a link), r derived from the paper's numbers (the page says how), unless --link"}


def _timed(runs, setup, hp, seed, ratio, algo, tau):
    link, t_c, t_comm = link_for(runs, setup, hp, seed, ratio=ratio)
    run = runs.train(algo, seed, model=hp["model"], batch=hp["batch"], iterations=hp["iterations"], lr=hp["lr"],
                     link=link, tau=tau, eval_every=f"{hp['iterations']}it",
                     **({"momentum": hp["momentum"]} if algo in ("ssgd", "ssgd-opt") else {}))
    return run, t_c, t_comm


def _ratio(run, tau):
    """T_comm / T_comp as a run of ssgd measured it: its idle (the blocking all-reduce) over one
    micro-batch's compute."""
    return per_iteration_ms(run, "idle") / (per_iteration_ms(run, "compute") / tau)


def idle_numbers(n, bars, net, s, opt, lg, t_c, t_comm, where):
    """Into ``n`` (and ``bars``: measured | model, labelled ``where``) the idle of ``net``'s regime: the
    runs of ssgd, ssgd-opt and laga-sgd (``s``, ``opt``, ``lg``) against eq. 3, 4 and 6 at ``t_c``
    (T_comp, one micro-batch) and ``t_comm`` (s), the ratios the paper prints, and T_comm / T_comp
    as the ssgd run measured it beside the derived one."""
    (r, _), tau, g = DERIVED[net], IDLE_PAPER[net][2], f"_{net}"
    # eq. 3, 4 and 6 as idle per iteration: T_comm; max(0, T_comm - T_bwd); max(0, T_comm - tau T_comp)
    model = {"ssgd": t_comm, "ssgd-opt": max(0.0, t_comm - T_BWD * t_c), "laga": max(0.0, t_comm - tau * t_c)}
    n.update({f"t_comp_ms{g}": 1e3 * t_c, f"t_comm_ms{g}": 1e3 * t_comm, f"ratio_derived{g}": r,
              f"ratio_measured{g}": _ratio(s, tau)})
    for name, run in (("ssgd", s), ("ssgd-opt", opt), ("laga", lg)):
        n[f"idle_{name}_ms{g}"] = per_iteration_ms(run, "idle")
        n[f"model_idle_{name}_ms{g}"] = 1e3 * model[name]
        n[f"idle_{name}_over_model{g}"] = (n[f"idle_{name}_ms{g}"] / n[f"model_idle_{name}_ms{g}"]
                                           if model[name] > 0 else float("inf"))
        bars[f"{name}, {where}"] = [n[f"idle_{name}_ms{g}"], n[f"model_idle_{name}_ms{g}"]]
    n[f"idle_ratio{g}"] = n[f"idle_ssgd_ms{g}"] / max(n[f"idle_laga_ms{g}"], 1e-3)
    n[f"idle_ratio_opt{g}"] = n[f"idle_ssgd-opt_ms{g}"] / max(n[f"idle_laga_ms{g}"], 1e-3)


def _idle_measure(runs, setup, hp, seed):
    n, bars = {}, {}
    for net in hp["networks"]:
        (r, _), tau = DERIVED[net], IDLE_PAPER[net][2]
        s, t_c, t_comm = _timed(runs, setup, hp, seed, r, "ssgd", tau)
        opt, _, _ = _timed(runs, setup, hp, seed, r, "ssgd-opt", tau)
        lg, _, _ = _timed(runs, setup, hp, seed, r, "laga-sgd", tau)
        idle_numbers(n, bars, net, s, opt, lg, t_c, t_comm, f"{NETWORK[net]}'s regime (tau {tau})")
    return n, {"idle per iteration: measured | model (eq. 3 SSGD, 4 SSGD-OPT, 6 LAGA) at T_comm / T_comp derived "
               "from the paper's numbers": bars}


SPEED_TAUS = (1, 2, 4)


def _speed_measure(runs, setup, hp, seed):
    rho = SPEED_RATIO
    s, t_c, t_comm = _timed(runs, setup, hp, seed, rho, "ssgd", 1)
    lagas = {tau: _timed(runs, setup, hp, seed, rho, "laga-sgd", tau)[0] for tau in SPEED_TAUS}
    return speed_numbers(s, lagas, t_c, t_comm, "")


def speed_numbers(s, lagas, t_c, t_comm, where):
    """laga-speedup's numbers and its panel from the run of ssgd at tau = 1 (``s``) and those of
    laga-sgd at each tau of SPEED_TAUS (``lagas``), against eq. 3 and 6 at ``t_c`` (one
    micro-batch's compute) and ``t_comm`` (s); ``where``: the link, in the panel's labels."""
    n, panel, rho = {}, {}, SPEED_RATIO
    base = per_iteration_ms(s, "wall")
    n.update({"t_comp_ms": 1e3 * t_c, "t_comm_ms": 1e3 * t_comm, "ssgd_tau1_ms": base, "ratio_derived": rho,
              "ratio_measured": _ratio(s, 1)})
    xs, ys, model = [], [], []
    for tau in SPEED_TAUS:
        wall = per_iteration_ms(lagas[tau], "wall")
        n[f"laga_tau{tau}_ms"] = wall
        n[f"speedup_tau{tau}"] = tau * base / wall  # samples per second against ssgd at tau = 1
        # eq. 6's LAGA iteration max(tau T_comp, T_comm) against eq. 3's SSGD iteration T_comp + T_comm
        n[f"model_speedup_tau{tau}"] = tau * (t_c + t_comm) / max(tau * t_c, t_comm)
        n[f"speedup_over_model_tau{tau}"] = n[f"speedup_tau{tau}"] / n[f"model_speedup_tau{tau}"]
        xs.append(tau), ys.append(n[f"speedup_tau{tau}"]), model.append(n[f"model_speedup_tau{tau}"])
    n["saturation_tau4_over_tau2"] = n["speedup_tau4"] / n["speedup_tau2"]
    panel[f"laga-sgd measured, r = {rho:.3g}{where}"] = [xs, ys]
    panel[f"model (eq. 3, 6), r = {rho:.3g}"] = [xs, model]
    return n, {f"speed-up over SSGD (tau = 1) in samples/s against tau, at T_comm / T_comp = r derived from "
               f"2.96x{where}": panel}


def _scale(setup, hp, numbers):
    """bench scale's model at the paper's 8 workers: LAGA-SGD at tau over SSGD at tau = 1, in
    samples per second (link 50 us, 10 Gbit/s; t_C measured here)."""
    inputs = scale.measure_inputs(hp["model"], hp["batch"], Link.parse("50,10"), Link.parse("5,100"), 1, repeat=5)
    net, p = inputs.network(), 8
    base = models.iteration_time("ssgd", inputs.costs(), net, p)
    paper = {1: "about 1 (Figure 6)", 2: "", 4: "2.96 (ImageNet, Figure 6)"}
    return [(f"laga-sgd at tau = {tau} over ssgd at tau = 1, {p} ranks, link 50 us / 10 Gbit/s, {hp['model']}",
             tau * base / models.iteration_time("laga-sgd", dataclasses.replace(inputs.costs(), tau=tau), net, p),
             paper[tau]) for tau in (1, 2, 4)]


def _near_ratio(key, r):
    """The regime a paper check needs: the run's measured T_comm / T_comp within 2 RATIO_ERROR of r."""
    return dict(needs=(key, r / (1 + 2 * RATIO_ERROR), r * (1 + 2 * RATIO_ERROR)),
                needs_why=f"T_comm / T_comp measured within {200 * RATIO_ERROR:.0f} % of the derived {r:.3f} "
                          "(a --link of your own sets another)")


def idle_checks(nets=tuple(IDLE_PAPER), link="model conformance (the link charges no CPU)",
                baselines=("ssgd", "ssgd-opt")):
    """The checks of each network's regime in ``nets``: the ``baselines`` on eq. 3 and 4 (baseline
    sanity, shown), LAGA on eq. 6 (model conformance, ``link`` says on which link), and the paper's
    idle ratios where the measured T_comm / T_comp is near the derived one."""
    out = []
    for net in nets:
        (x, y, tau), (r, b), g = IDLE_PAPER[net], DERIVED[net], f"_{net}"
        where = f"{NETWORK[net]}'s regime (tau = {tau}, r = {r:.3f})"
        for name, eq in (("ssgd", "eq. 3"), ("ssgd-opt", "eq. 4")):
            if name not in baselines:
                continue
            out.append(near(f"idle_{name}_over_model{g}", 1.0, 0.25, f"{name}'s measured idle over {eq}'s, {where}",
                            f"{eq} at the run's T_comm and T_comp, +-25 % (the seeds' spread of the committed runs, "
                            "up to 17 %): baseline sanity, shown", partial_tol=0.6, timing=True, kind=SANITY,
                            model=f"model_idle_{name}_ms{g}"))
        # null: LAGA idle as SSGD (T_comm), over eq. 6's T_comm - tau T_comp
        out.append(near(f"idle_laga_over_model{g}", 1.0, 0.25, f"laga's measured idle over eq. 6's, {where}",
                        "eq. 6 at the run's T_comm and T_comp, +-25 % (the seeds' spread of the committed runs, up to "
                        f"25 %): {link}", partial_tol=0.4, timing=True,
                        kind=MODEL, null=r / (r - tau), model=f"model_idle_laga_ms{g}"))
        sens = tau / (r - tau)  # |d ln (r / (r - tau)) / d ln r|
        out.append(near(f"idle_ratio{g}", x, tolerance(sens), f"SSGD's idle over LAGA-SGD's, {where}",
                        f"the paper's {x:g} ({NETWORK[net]}, section 5.1), relative +-{100 * tolerance(sens):.0f} %: "
                        f"eq. 3 / eq. 6 moves {sens:.2f}x a ratio's error, {100 * RATIO_ERROR:.0f} %, beside the "
                        f"measurement's {100 * MEASURE_ERROR:.0f} %", relative=True, timing=True, kind=PAPER,
                        null=1.0, **_near_ratio(f"ratio_measured{g}", r)))
        if abs(b - T_BWD) < 0.1:  # SSGD-OPT's idle depends on T_bwd, which is our network's, not set by a link
            sens = abs(r / (r - b) - r / (r - tau))
            out.append(near(f"idle_ratio_opt{g}", y, tolerance(sens), f"SSGD-OPT's idle over LAGA-SGD's, {where}",
                            f"the paper's {y:g} ({NETWORK[net]}, section 5.1), relative +-{100 * tolerance(sens):.0f} "
                            f"%: eq. 4 / eq. 6 moves {sens:.2f}x a ratio's error, {100 * RATIO_ERROR:.0f} %, beside "
                            f"the measurement's {100 * MEASURE_ERROR:.0f} %", relative=True, timing=True, kind=PAPER,
                            null=(r - b) / r, **_near_ratio(f"ratio_measured{g}", r)))
    return tuple(out)


def speed_checks(link="model conformance (the link charges no CPU)"):
    """laga-speedup's checks (``link`` says on which link the model ones are judged): the measured
    speed-up over eq. 3 and 6's at tau = 2 and 4, its saturation, and the paper's 2.96x."""
    r, out = SPEED_RATIO, []
    for tau in (2, 4):
        # null: LAGA no faster than SSGD at tau (tau T_comp + T_comm), over the model's max(tau T_comp, T_comm)
        out.append(near(f"speedup_over_model_tau{tau}", 1.0, 0.2, f"measured speed-up at tau = {tau} over the "
                        f"model's, r = {r:.3f}", "eq. 3 and 6 at the run's T_comm and T_comp, +-20 % (the seeds' "
                        f"spread of the committed runs, up to 10 %): {link}",
                        partial_tol=0.3, timing=True, kind=MODEL, null=max(tau, r) / (tau + r),
                        model=f"model_speedup_tau{tau}"))
    out.append(near("saturation_tau4_over_tau2", 1.0, 0.15, "the speed-up at tau = 4 over that at tau = 2",
                    "eq. 3 and 6: saturated (1) once tau T_comp >= T_comm, the paper's \"start to saturate\" at "
                    f"tau = 4; +-15 % (the seeds' spread of two speed-ups): {link}", timing=True,
                    kind=MODEL, null=(4 * (1 + r) / (4 + r)) / (2 * (1 + r) / (2 + r))))
    sens = r / (1 + r)  # d ln (1 + r) / d ln r
    out.append(near("speedup_tau4", SPEEDUP_PAPER, tolerance(sens), "LAGA-SGD's speed-up at tau = 4",
                    f"the paper's {SPEEDUP_PAPER:g} (Figure 6), relative +-{100 * tolerance(sens):.0f} %: eq. 3 and 6 "
                    f"move it {sens:.2f}x a ratio's error, {100 * RATIO_ERROR:.0f} %, beside the measurement's "
                    f"{100 * MEASURE_ERROR:.0f} %", relative=True, timing=True, kind=PAPER,
                    null=4 * (1 + r) / (4 + r), **_near_ratio("ratio_measured", r)))
    return tuple(out)


TIME_REGIME = ("T_comm / T_comp derived from the paper's own numbers through its own model (eq. 3, 4, 6; the "
               "derivation below), set on an EMULATED link, 2 ranks, the digits CNN. The emulated link charges no "
               "CPU for a transfer (on scripts/cluster's real link compute slows while a transfer runs, the README "
               "shows 2.4-2.8x), so every overlap runs in its best case: the measured-over-model checks are model "
               "conformance. ")

def scalability(net, tau):
    """Figure 5's scalability (the wall-clock time of a linearly scaling algorithm over the method's)
    of SSGD, SSGD-OPT and LAGA at ``tau`` by eq. 3, 4 and 6 at ``net``'s derived T_comm / T_comp
    and T_bwd / T_comp (in units of T_comp): tau over tau plus each method's idle time."""
    r, b = DERIVED[net]
    return {"ssgd": tau / (tau + r), "ssgd-opt": tau / (tau + r - b), "laga": tau / (tau + max(0.0, r - tau))}


def _fig5_prediction():
    return "; ".join(f"VGG-16 at tau = {tau}: " + ", ".join(f"{m} {v:.2f}" for m, v in scalability("vgg16", tau).items())
                     for tau in (2, 4)) + " (eq. 3, 4, 6 at VGG-16's derived ratios; a model prediction)"


FIG5 = (("Figure 5: the scalability (wall-clock time over a linearly scaling algorithm's) at tau = 2 and 4, LAGA "
         "\"near linear\" on certain networks and above SSGD and SSGD-OPT, all improving with tau",
         "not testable here: scalability needs the node count varied (the paper's 8 GPUs against one), where one "
         "machine's 2 cores give 2 ranks; the paper prints no number (a bar chart). laga-idle tests eq. 3, 4 and 6, "
         "which the prediction uses, at the derived ratios", _fig5_prediction()),)

CLAIMS = [
    Claim("laga-table1", "Hakimi et al. 2021 (LAGA)", "section 5.2, Table 1",
          "As tau grows to 4, LAGA-SGDM falls behind SSGD while LAGA-SGDN keeps SSGD's accuracy.",
          "ResNet-50 ImageNet at tau = 4: SSGD 76.23 %, LAGA-SGDM 75.63 %, LAGA-SGDN 76.28 % (Table 1, whole on the "
          "page)",
          (near("ssgd_minus_sgdm_tau4", 0.60, 0.5, "SSGD minus LAGA-SGDM at tau = 4 (pp)",
                "the paper's 0.60 pp (Table 1: 76.23 - 75.63), +-0.5 pp (the seeds' spread of LAGA-SGDN's gap, "
                "0.4 pp; 50 of MNIST's 10,000 test images)", kind=PAPER, null=0.0),
           near("sgdm_drop_tau1_to_4", 0.81, 0.5, "LAGA-SGDM's accuracy at tau = 1 minus at tau = 4 (pp)",
                "the paper's 0.81 pp (Table 1: 76.44 - 75.63), +-0.5 pp (as above)", kind=PAPER, null=0.0),
           near("sgdn_minus_ssgd_tau4", 0.05, 0.5, "LAGA-SGDN minus SSGD at tau = 4 (pp)",
                "the paper's +0.05 pp (Table 1: 76.28 - 76.23), +-0.5 pp (as above): an equivalence", partial_tol=1.0,
                kind=PAPER, null=0.0)),
          _acc_hyper, _acc_measure, "curves",
          quotes=(("Table 1", "ResNet-50, ImageNet", TABLE_1), TABLE_TEXT, HYPER_TEXT),
          regime="MNIST, MNIST-MLP, 2 workers x 32 samples x tau, the paper's hyperparameters (lr 0.1 per 256 "
                 "samples scaled linearly with tau, momentum 0.9, weight decay 1e-4) and its schedule, warm-up "
                 "included (section 5.2: \"the learning-rate is gradually warmed-up during the early iterations "
                 "(first 5 epochs) and is decayed by 0.1 at epochs 30, 60, and 80\", [17]'s schedule), scaled to "
                 "the run: linear from 0 over its first 5/90, x0.1 at 30, 60 and 80 of 90. At that lr "
                 "LAGA-SGDM at tau = 4 can diverge on MNIST-MLP (measured: iteration 106, seed 0, after the "
                 "warm-up; LAGA-SGDN trained to 97.75 %): the divergence is recorded as the result, the lr is not lowered; the paper's "
                 "ResNet-50 and 90 ImageNet epochs are not",
          ours="the tolerances (+-0.6 and +-0.5 pp: about the paper's effect, 60 and 50 of MNIST's 10,000 test "
               "images)",
          paper_values={"ssgd_minus_sgdm_tau4": "0.60", "sgdn_minus_ssgd_tau4": "+0.05",
                        "sgdm_drop_tau1_to_4": "0.81"},
          tuning="shared, as the paper (\"the same schedule and hyperparameters as [17]\" for every method, the "
                 "learning rate scaled linearly with tau)",
          data="mnist", axes=("epochs", "test accuracy (%)"), budget=(30, 55)),
    Claim("laga-idle", "Hakimi et al. 2021 (LAGA)", "section 5.1 (Figure 4, eq. 3, 4 and 6)",
          "LAGA's idle time is several times smaller than SSGD's (eq. 3) and SSGD-OPT's (eq. 4), as eq. 6 predicts: "
          "5.24x and 4.54x on VGG-16 at tau = 4, 3.89x (2.67x) on Wide ResNet-101-2 and 2.3x (1.45x) on ResNet-50 "
          "at tau = 1.",
          "5.24x less idle time than SSGD (4.54x less than SSGD-OPT), VGG-16 at tau = 4; 3.89x (2.67x) Wide "
          "ResNet-101-2 and 2.3x (1.45x) ResNet-50 at tau = 1",
          emulated(idle_checks(), "laga-idle-cluster"), _time_hyper, _idle_measure, "bars",
          quotes=(IDLE_TEXT, EQ_TEXT, EQ4_TEXT, FIG4_TEXT, FIG3_TEXT),
          regime=TIME_REGIME + "Each network's regime in turn: its T_comm / T_comp and tau.",
          ours="the derivation of each network's T_comm / T_comp and T_bwd / T_comp from the paper's two numbers (our "
               "arithmetic with the paper's equations); the tolerances (their basis beside each)",
          paper_values={"idle_ratio_vgg16": "5.24", "idle_ratio_opt_vgg16": "4.54", "idle_ratio_wrn": "3.89",
                        "idle_ratio_opt_wrn": "2.67 (not checked: WRN's derived T_bwd / T_comp is not ours)",
                        "idle_ratio_resnet50": "2.3", "idle_ratio_opt_resnet50": "1.45"},
          at_scale="the paper's 8 RTX 2080 Ti GPUs share one machine's PCIe: here the ratio they imply",
          tuning="a timing measurement: both methods share one set (no momentum: laga-sgd has none)",
          axes=("", "idle ms per iteration"), budget=(10, 15), derivation=derivations(), untested=FIG5),
    Claim("laga-speedup", "Hakimi et al. 2021 (LAGA)", "section 5.1 (Figure 6)",
          "LAGA's speed-up over SSGD without accumulation grows with tau to 2.96x at tau = 4 and saturates, as eq. 3 "
          "and 6 predict at the T_comm / T_comp that 2.96x implies.",
          "up to 2.96x at tau = 4 (ImageNet), saturating at tau = 4",
          emulated(speed_checks(), "laga-speedup-cluster"), _time_hyper, _speed_measure, "lines",
          quotes=(SPEED_TEXT, EQ_TEXT, FIG3_TEXT),
          regime=TIME_REGIME + f"r = {SPEED_RATIO:.3f}, the ratio at which eq. 3 and 6 give 2.96x at tau = 4; tau = 1, "
                               "2, 4.",
          ours="the model speed-up tau (T_comp + T_comm) / max(tau T_comp, T_comm) follows from eq. 3 and 6 (our "
               "arithmetic), and the ratio it gives for 2.96x; the tolerances (their basis beside each)",
          paper_values={"speedup_tau4": "2.96"},
          at_scale="the paper's 8 GPUs share one machine's PCIe; Figure 6 does not name its network", scale=_scale,
          tuning="a timing measurement: every run shares one set (no momentum: laga-sgd has none)",
          axes=("tau (micro-batches per iteration)", "speed-up over SSGD at tau = 1 (samples/s ratio)"),
          budget=(3, 10), derivation=derivations()),
]
