"""DASO against SSGD and Horovod-style SSGD+fp16 (Coquelin et al. 2022) on MNIST, 2 nodes x 2 ranks.

    .venv/bin/python experiments/daso_mnist.py MNIST.h5 [--epochs 8] [--batch 128] [--lr 0.05]
                     [--comm-ratio 3] [--link LATENCY_US,GBIT_S] [--local-link LATENCY_US,GBIT_S]
                     [--out-dir /tmp/daso_mnist] [--no-run]

MNIST.h5 comes from `refsgd data convert mnist DIR MNIST.h5`. Coquelin et al. 2022 (Journal of
Big Data 9), section 4: DASO against Horovod (synchronous SGD whose gradient all-reduce carries
fp16) reaches the same accuracy in 25-34 % less time, because it syncs globally through one
group of one rank per node (G times less data between nodes per sync than a flat all-reduce)
and, while cycling, only every B batches and non-blocking. At laptop scale, with mnist_mlp and
4 ranks seen as 2 nodes x 2 ranks, the script runs, with the same epochs, local batch, lr,
momentum 0.9 and seed::

    SSGD        mpiexec -n 4 refsgd train --algo ssgd                   --link GLOBAL
    SSGD+fp16   mpiexec -n 4 refsgd train --algo ssgd --compress fp16   --link GLOBAL
    DASO        mpiexec -n 4 refsgd train --algo daso --ranks-per-node 2 --link GLOBAL --local-link LOCAL

(DASO with its defaults: 1 warm-up and 1 cool-down epoch, blocking bf16 global syncs every batch,
and cycling in between with B = --sync-every 4, W = 1; its plateau rule halves B and W.) The
defaults, 8 epochs (6 of them cycling) of local batch 128, keep the compute of an iteration
large next to the real cost of the collectives on one oversubscribed machine (at batch 32 the
real fp16 all-reduce alone takes longer than a link of 1-3 x compute would).

The two-tier network is EMULATED (refsgd/comm/link.py, Ring-AllReduce model of Pipe-SGD eq. 5):
the flat SSGD all-reduce spans the nodes, so it gets the slow GLOBAL link; DASO's groups (one
rank per node) get GLOBAL, its node-local syncs LOCAL. Unless --link is given, GLOBAL is chosen
from a short calibration run (ssgd, 50 iterations, on a slow link of 50 us and 0.25 Gbit/s so
that the ranks sleep through the all-reduce as on the measured runs, instead of spinning in MPI
and stretching each other's compute): the link whose float32 all-reduce of the mnist_mlp gradient
over 4 ranks takes --comm-ratio (default 3) times the measured compute of one iteration
(``Link.for_time``, latency 50 us). The compute of the measured runs differs (the machine's load
varies): the output gives the ratio reached. Unless --local-link is given, LOCAL has a
tenth of GLOBAL's latency and ten times its bandwidth.

Printed (markdown): the links and the model time of every collective; test accuracy after each
epoch; the mean per-iteration time (mean over ranks of /iterations/wall etc., the first 10
iterations skipped) split into compute, codec (compression on the computation path), idle
(blocked on communication) and other (wall - compute - codec - idle: optimizer, data, Python),
for DASO also per phase (blocking = warm-up and cool-down, cycling), next to the links' model
time of the collectives on the critical path ("model comm"); DASO's time saved relative to
SSGD+fp16 (the first 10 iterations, where Numba compiles the codec kernels, are reported apart);
the traffic between nodes
(/iterations/global_bytes) and within nodes (/iterations/local_bytes), summed over ranks, per
epoch; DASO's phase events (the metrics file's ``events``). The plot (OUT_DIR/daso_mnist.png)
has accuracy per epoch, the time split per method and the global traffic per epoch. The metrics
files stay in OUT_DIR (`refsgd report OUT_DIR/DASO.h5`); --no-run prints the tables and draws the
plot again from them, without training. With the defaults the script takes about 2.5 minutes
on 2 cores (4 ranks oversubscribed).

Caveats: the link is EMULATED, and only delays: a collective whose real cost on this machine is
larger than the model (the compressed all-reduces run a decompress-add-compress operator at
every reduction step; see experiments/codec_cost.py) takes its real time. With 4 ranks on fewer
cores the ranks are time-sliced: compute stretches and idle includes waiting for descheduled
peers. Compare the measured idle with the model column.
"""

import argparse
import json
import os
import subprocess
import sys
import time

import h5py
import numpy as np

from refsgd.comm.link import Link
from refsgd.nn import load_model

BIN = os.path.dirname(sys.executable)
ONE_THREAD = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "NUMBA_NUM_THREADS": "1",
              "MKL_NUM_THREADS": "1"}
SKIP = 10
RANKS, G = 4, 2                  # 2 nodes x 2 ranks
P = RANKS // G
# the calibration run's link: slow enough that the ranks sleep through the all-reduce, as they do
# on the measured runs' links (without a link they spin in MPI and stretch each other's compute)
CALIBRATION_LINK = "50,0.25"

# name, extra options (the links are added per method)
METHODS = [
    ("SSGD", ["--algo", "ssgd"]),
    ("SSGD+fp16", ["--algo", "ssgd", "--compress", "fp16"]),
    ("DASO", ["--algo", "daso", "--ranks-per-node", str(G)]),
]


def refsgd_train(args, opts, out, log=None):
    cmd = [os.path.join(BIN, "mpiexec"), "-n", str(RANKS), os.path.join(BIN, "refsgd"), "train",
           "--model", "mnist_mlp", "--data", args.data, "--batch", str(args.batch), "--lr", str(args.lr),
           "--momentum", str(args.momentum), "--seed", str(args.seed), "--no-progress", "--force", "--out", out, *opts]
    print(f"running: {' '.join(cmd[2:])}", file=sys.stderr, flush=True)
    r = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **ONE_THREAD})
    if r.returncode != 0:
        sys.exit(f"failed ({r.returncode}): {' '.join(cmd)}\n{r.stdout[-2000:]}\n{r.stderr[-4000:]}")
    if log:
        with open(log, "w") as f:
            f.write(r.stdout + r.stderr)


def calibrate(args):
    """Mean compute per iteration (s) of ssgd on the slow link CALIBRATION_LINK, 50 iterations."""
    out = os.path.join(args.out_dir, "calibration.h5")
    refsgd_train(args, ["--algo", "ssgd", "--iterations", "50", "--link", CALIBRATION_LINK], out)
    with h5py.File(out) as f:
        return float(f["iterations"]["compute"][:, SKIP:].mean())


def split(it, sl):
    """Mean per-iteration compute / codec / idle / other / wall over ranks and the iterations sl."""
    v = {k: it[k][:, sl] for k in ("compute", "codec", "idle", "wall")}
    row = {k: float(a.mean()) for k, a in v.items()}
    row["other"] = float((v["wall"] - v["compute"] - v["codec"] - v["idle"]).mean())
    row["n"] = v["wall"].shape[1]
    return row


def load(path):
    with h5py.File(path) as f:
        assert f.attrs["link_emulated"]
        it = {k: f["iterations"][k][...] for k in ("compute", "codec", "idle", "wall", "global_bytes",
                                                   "local_bytes")}
        ev = {k: f["evals"][k][...] for k in ("iteration", "epoch", "test_acc", "seconds")}
        return dict(it=it, evals=ev, events=json.loads(f.attrs["events"]), wall_seconds=float(f.attrs["wall_seconds"]),
                    link=f.attrs["link"])


def phase_slices(events, T):
    """{'blocking': mask, 'cycling': mask} over iterations from DASO's phase events."""
    phase = np.empty(T, dtype=object)
    marks = sorted((e["iteration"], e["what"]) for e in events if e["what"] in ("warm-up", "cycling", "cool-down"))
    for i, (t0, what) in enumerate(marks):
        t1 = marks[i + 1][0] if i + 1 < len(marks) else T
        phase[t0:t1] = "cycling" if what == "cycling" else "blocking"
    keep = np.arange(T) >= SKIP
    return {p: np.flatnonzero(keep & (phase == p)) for p in ("blocking", "cycling")}


def cycling_bw(events, T):
    """(B, W) in effect at each iteration, from DASO's events (cycling and plateau changes)."""
    bw, cur = [None] * T, None
    marks = sorted((e["iteration"], e.get("B"), e.get("W")) for e in events if "B" in e)
    j = 0
    for t in range(T):
        while j < len(marks) and marks[j][0] <= t:
            cur = marks[j][1:]
            j += 1
        bw[t] = cur
    return bw


def md(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def plot(runs, times, expect, traffic, path, title):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colors = {"SSGD": "C0", "SSGD+fp16": "C1", "DASO": "C3"}
    fig, (acc, bars, net) = plt.subplots(1, 3, figsize=(17, 5))
    for name, r in runs.items():
        acc.plot(r["evals"]["epoch"], 100 * r["evals"]["test_acc"], marker="o", color=colors[name], label=name)
    acc.set_xlabel("epoch")
    acc.set_ylabel("test accuracy (%)")
    acc.set_title("test accuracy after each epoch")
    acc.grid(alpha=0.3)
    acc.legend()

    names = list(times)
    x = np.arange(len(names))
    bottom = np.zeros(len(names))
    for part, color in [("compute", "C0"), ("codec", "C1"), ("idle", "C7"), ("other", "C2")]:
        vals = np.array([1e3 * max(times[n][part], 0.0) for n in names])
        bars.bar(x, vals, bottom=bottom, color=color, label=part)
        bottom += vals
    model = [1e3 * (times[n]["compute"] + times[n]["codec"] + times[n]["other"] + expect[n]) if n in expect
             else np.nan for n in names]
    bars.plot(x, model, "k_", markersize=40, markeredgewidth=2, label="compute + codec + other\n+ model comm")
    bars.set_xticks(x, names, rotation=20, ha="right")
    bars.set_ylabel("ms per iteration (mean over ranks)")
    bars.set_title("per-iteration time split")
    bars.set_ylim(0, 1.6 * max(bottom.max(), np.nanmax(model)))
    bars.legend(ncol=2, fontsize="small", loc="upper right")

    width = 0.8 / len(traffic)
    for i, (name, per_epoch) in enumerate(traffic.items()):
        ep = np.arange(1, len(per_epoch) + 1)
        net.bar(ep + (i - (len(traffic) - 1) / 2) * width, np.asarray(per_epoch) / 1e6, width,
                color=colors[name], label=name)
    net.set_xlabel("epoch")
    net.set_ylabel("MB between nodes (all ranks)")
    net.set_title("global traffic per epoch")
    net.set_ylim(0, 1.3 * max(max(v) for v in traffic.values()) / 1e6)
    net.legend(ncol=3, loc="upper center")
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("data", help="MNIST in refsgd's HDF5 layout (refsgd data convert mnist DIR MNIST.h5)")
    p.add_argument("--epochs", type=int, default=8, help="default 8: 1 warm-up, 6 cycling, 1 cool-down for DASO")
    p.add_argument("--batch", type=int, default=128, help="local batch per rank (default 128)")
    p.add_argument("--lr", type=float, default=0.05, help="learning rate on the mean gradient (default 0.05)")
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--comm-ratio", type=float, default=3.0,
                   help="without --link: SSGD's modelled all-reduce = this x one iteration's compute (default 3)")
    p.add_argument("--link", help="GLOBAL link LATENCY_US,GBIT_S (default: from a calibration run)")
    p.add_argument("--local-link", help="LOCAL link LATENCY_US,GBIT_S (default: GLOBAL's latency / 10, "
                                        "bandwidth x 10)")
    p.add_argument("--out-dir", default="/tmp/daso_mnist", help="metrics files and plot (default /tmp/daso_mnist)")
    p.add_argument("--no-run", action="store_true",
                   help="only read the metrics files of an earlier run in --out-dir (its options and links)")
    args = p.parse_args()
    began = time.perf_counter()
    os.makedirs(args.out_dir, exist_ok=True)
    d = load_model("mnist_mlp").num_params
    n32, n16 = 4 * d, 2 * d

    calib = None
    if args.no_run:
        # the files of an earlier run: its options and links come from their configurations
        with h5py.File(os.path.join(args.out_dir, "DASO.h5")) as f:
            cfg = json.loads(f.attrs["config"])
        for k in ("epochs", "batch", "lr", "momentum", "seed"):
            setattr(args, k, cfg[k])
        args.link, args.local_link = cfg["link"], cfg["local_link"]
        cal = os.path.join(args.out_dir, "calibration.h5")
        if os.path.exists(cal):
            with h5py.File(cal) as f:
                calib = float(f["iterations"]["compute"][:, SKIP:].mean())
    if args.link:
        glink = Link.parse(args.link)
    else:
        calib = calibrate(args)
        glink = Link.for_time(args.comm_ratio * calib, n32, RANKS)
    llink = Link.parse(args.local_link, "--local-link") if args.local_link else \
        Link(float(f"{glink.latency_us / 10:.4g}"), float(f"{glink.gbit_s * 10:.4g}"))
    gspec, lspec = f"{glink.latency_us:g},{glink.gbit_s:g}", f"{llink.latency_us:g},{llink.gbit_s:g}"

    runs = {}
    for name, opts in METHODS:
        out = os.path.join(args.out_dir, f"{name}.h5")
        links = ["--link", gspec] + (["--local-link", lspec] if name == "DASO" else [])
        if not args.no_run:
            refsgd_train(args, opts + ["--epochs", str(args.epochs), "--eval-every", "1"] + links, out,
                         log=os.path.join(args.out_dir, f"{name}.log"))
        runs[name] = load(out)

    T = runs["SSGD"]["it"]["wall"].shape[1]
    ipe = T // args.epochs
    print("## DASO vs SSGD and SSGD+fp16 (Horovod-style), Coquelin et al. 2022, small scale\n")
    print(f"mnist_mlp (d = {d:,} parameters), {RANKS} ranks = {P} nodes x {G} ranks (virtual: one machine), "
          f"local batch {args.batch}, {args.epochs} epochs x {ipe} iterations, lr {args.lr:g}, momentum "
          f"{args.momentum:g}, seed {args.seed}; {os.cpu_count()} CPU cores, so the {RANKS} ranks are "
          f"{'OVERSUBSCRIBED (time-sliced)' if (os.cpu_count() or 1) < RANKS else 'one per core'}.\n")
    print(f"- GLOBAL (between nodes): {glink} -- EMULATED")
    print(f"- LOCAL (within a node, DASO only): {llink} -- EMULATED")
    if calib is not None:
        print(f"- GLOBAL chosen so that SSGD's float32 all-reduce takes {glink.time(n32, RANKS) / calib:.2f} x the "
              f"compute of one iteration measured in a calibration run (ssgd, 50 iterations, link "
              f"{CALIBRATION_LINK}): {1e3 * calib:.2f} ms")
    print()
    print("Model time of each collective (Ring-AllReduce; Bcast = parameter-server model):\n")
    model = [
        ("SSGD", "all-reduce float32, 4 ranks, GLOBAL, every batch", glink.time(n32, RANKS)),
        ("SSGD+fp16", "all-reduce fp16, 4 ranks, GLOBAL, every batch", glink.time(n16, RANKS)),
        ("DASO blocking", "all-reduce bf16, group of 2, GLOBAL, every batch", glink.time(n16, P)),
        ("DASO cycling", "Iallreduce float32, group of 2, GLOBAL, every B batches, waited W later",
         glink.time(n32, P)),
        ("DASO", "local all-reduce float32 (gradient), 2 ranks, LOCAL, every batch", llink.time(n32, G)),
        ("DASO", "local Bcast float32 (parameters), 2 ranks, LOCAL, after each global sync",
         llink.ps_time(n32, G)),
    ]
    print(md(["method", "collective", "model ms"], [(a, b, f"{1e3 * t:.2f}") for a, b, t in model]))

    # accuracy
    print("\n### Test accuracy (%) after each epoch\n")
    E = max(len(r["evals"]["test_acc"]) for r in runs.values())
    rows = []
    for name, r in runs.items():
        accs = [f"{100 * a:.2f}" for a in r["evals"]["test_acc"]]
        rows.append([name] + accs + [""] * (E - len(accs)) + [f"{r['wall_seconds']:.0f}"])
    print(md(["method"] + [f"ep {e + 1}" for e in range(E)] + ["run s"], rows))

    # iteration time
    times = {}
    for name, r in runs.items():
        times[name] = split(r["it"], slice(SKIP, None))
    ph = phase_slices(runs["DASO"]["events"], runs["DASO"]["it"]["wall"].shape[1])
    for pname, idx in ph.items():
        if len(idx):
            times[f"DASO {pname}"] = split(runs["DASO"]["it"], idx)
    # the link model's communication on the critical path of an iteration
    Tl, Tb = llink.time(n32, G), llink.ps_time(n32, G)
    expect = {"SSGD": glink.time(n32, RANKS), "SSGD+fp16": glink.time(n16, RANKS),
              "DASO blocking": glink.time(n16, P) + Tl + Tb}
    if "DASO cycling" in times:
        # every B batches a Bcast and whatever of the float32 group sync the W batches in between
        # (compute + other + codec + local all-reduce each) did not cover; B, W from the events
        c = times["DASO cycling"]
        base = c["compute"] + c["other"] + c["codec"] + Tl
        BW = cycling_bw(runs["DASO"]["events"], runs["DASO"]["it"]["wall"].shape[1])
        cyc = [Tl + (Tb + max(0.0, glink.time(n32, P) - W * base)) / B for B, W in (BW[i] for i in ph["cycling"])]
        expect["DASO cycling"] = float(np.mean(cyc))
        nb, nc = len(ph["blocking"]), len(ph["cycling"])
        expect["DASO"] = (nb * expect["DASO blocking"] + nc * expect["DASO cycling"]) / (nb + nc)
    ref = times["SSGD+fp16"]["wall"]
    print(f"\n### Mean time per iteration (ms; mean over ranks, first {SKIP} iterations skipped; EMULATED link, "
          f"{RANKS} ranks on {os.cpu_count()} cores)\n")
    rows = []
    for name, t in times.items():
        rows.append([name, t["n"]] + [f"{1e3 * t[k]:.2f}" for k in ("compute", "codec", "idle", "other", "wall")]
                    + [f"{100 * (1 - t['wall'] / ref):+.1f}%"])
    print(md(["method", "iterations", "compute", "codec", "idle", "other", "wall", "time saved vs SSGD+fp16",
              "model comm"], [r + [f"{1e3 * expect[r[0]]:.2f}" if r[0] in expect else ""] for r in rows]))
    print(f"\nmodel comm: the EMULATED links' time of the collectives on an iteration's critical path (table of "
          f"collectives above; DASO cycling: local all-reduce + (Bcast + the part of the group sync that W "
          f"iterations of compute + other + codec + local all-reduce do not cover) / B). Measured idle above it is "
          f"the real cost of the collectives on this machine (oversubscribed; compressed operators), which the "
          f"emulated link does not hide. SSGD's model all-reduce / its measured compute = "
          f"{expect['SSGD'] / times['SSGD']['compute']:.2f}.")
    loop = {n: float(r["it"]["wall"][:, SKIP:].sum(axis=1).mean()) for n, r in runs.items()}
    start = {n: float(r["it"]["wall"][:, :SKIP].sum(axis=1).mean()) for n, r in runs.items()}
    print(f"\nTraining loop after the first {SKIP} iterations (sum of iteration walls, mean over ranks; "
          f"evaluations left out): " + ", ".join(f"{n} {s:.1f} s" for n, s in loop.items())
          + f". DASO takes {100 * (1 - loop['DASO'] / loop['SSGD+fp16']):.1f}% less time than SSGD+fp16 "
            "(paper: 25-34% less than Horovod). The first "
            f"{SKIP} iterations, left out, took " + ", ".join(f"{n} {s:.1f} s" for n, s in start.items())
          + " (Numba compiles the codec kernels in the first compressed all-reduce of every run).")

    # traffic
    traffic = {}
    rows = []
    for name, r in runs.items():
        bounds = [0] + [int(i) for i in r["evals"]["iteration"]]
        gb, lb = r["it"]["global_bytes"].sum(axis=0), r["it"]["local_bytes"].sum(axis=0)
        per_g = [gb[a:b].sum() for a, b in zip(bounds, bounds[1:])]
        per_l = [lb[a:b].sum() for a, b in zip(bounds, bounds[1:])]
        traffic[name] = per_g
        rows.append([name, "global"] + [f"{v / 1e6:.0f}" for v in per_g] + [f"{gb.sum() / 1e6:.0f}",
                                                                            f"{gb.sum() / len(gb) / 1e6:.3f}"])
        rows.append([name, "local"] + [f"{v / 1e6:.0f}" for v in per_l] + [f"{lb.sum() / 1e6:.0f}",
                                                                           f"{lb.sum() / len(lb) / 1e6:.3f}"])
    print("\n### Traffic (MB put into collectives, summed over ranks; global = between nodes, local = within)\n")
    print(md(["method", "tier"] + [f"ep {e + 1}" for e in range(E)] + ["total", "per iteration"], rows))
    fp = sum(traffic["SSGD+fp16"])
    print("\nGlobal traffic relative to SSGD+fp16: " + ", ".join(
        f"{n} {fp / sum(v):.2f}x less" if sum(v) < fp else f"{n} {sum(v) / fp:.2f}x more"
        for n, v in traffic.items() if n != "SSGD+fp16"))

    # events
    print("\n### DASO phase events (metrics attrs `events`)\n")
    rows = []
    for e in runs["DASO"]["events"]:
        extra = ", ".join(f"{k} {v}" for k, v in e.items() if k not in ("iteration", "epoch", "what"))
        rows.append([e["iteration"], f"{e['epoch']:.2f}", e["what"], extra])
    print(md(["iteration", "epoch", "what", "fields"], rows))

    png = os.path.join(args.out_dir, "daso_mnist.png")
    title = (f"DASO vs SSGD(+fp16): mnist_mlp, {P} nodes x {G} ranks x batch {args.batch}; EMULATED links "
             f"global {glink.latency_us:g} us / {glink.gbit_s:g} Gbit/s, local {llink.latency_us:g} us / "
             f"{llink.gbit_s:g} Gbit/s; {RANKS} ranks on {os.cpu_count()} cores")
    plot(runs, times, expect, traffic, png, title)
    print(f"\nplot: {png}; metrics files: {args.out_dir}/{{SSGD,SSGD+fp16,DASO}}.h5")
    if not args.no_run:
        print(f"script run time {time.perf_counter() - began:.0f} s ({RANKS} ranks on {os.cpu_count()} cores)")


if __name__ == "__main__":
    main()
