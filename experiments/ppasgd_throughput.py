"""Throughput of PP-ASGD's threaded mode against SSGD-NAG on this machine, G = 1, 2, 4 at 1 and 2 ranks.

    .venv/bin/python experiments/ppasgd_throughput.py MNIST.h5 [--model mnist_mlp] [--batch 32]
                     [--threads 1,2,4] [--ranks 1,2] [--iterations 300] [--lr 1e-6]
                     [--out-dir /tmp/ppasgd_throughput] [--no-run]

MNIST.h5 comes from `refsgd data convert mnist DIR MNIST.h5` (`digits` instead of a file trains
on the embedded 8x8 digits, e.g. with --model digits_mlp). Sato et al. 2017 compare the
throughput of PP-ASGD (G free-running gradient threads per process, an update thread that
applies whatever gradients have arrived) with SSGD-NAG (Algorithm 4: each step waits for one
sub-batch of every thread and for the all-reduce). For every number of ranks R and threads G
the script runs, with the same model, sub-batch B, lambda, momentum 0.99 and seed::

    mpiexec -n R refsgd train --algo pp-asgd  --threads G --batch B --iterations T --eval-every 100000
    mpiexec -n R refsgd train --algo ssgd-nag --tau G     --batch B --iterations T --eval-every 100000

(SSGD-NAG's G threads of a node are the tau = G sub-batches of a rank, computed one after the
other on the rank's one thread: refsgd/algorithms/ssgd.py.) From the metrics files, over the
updates after the first SKIP = 20 (Numba's cache loading, the threads starting), summed walls of
the updates (evaluations excluded; mean over ranks):

    updates/s   = updates / sum of the updates' walls
    samples/s   = PP-ASGD:  sum of /iterations/gradients (sub-batches consumed, all ranks) x B / walls
                  SSGD-NAG: updates x B x tau x R / walls
    grad-busy   = sum over ranks of /iterations/compute (the wall time of every gradient call,
                  summed over a rank's threads) / walls: how many gradient calls were in progress
                  on average. It counts the time a thread is descheduled or waits for the GIL
                  inside a call, so it can exceed the number of cores; it is not CPU time

and for PP-ASGD the gradients per update and the measured staleness (S_bar at the end). The
gradients a PP-ASGD thread computes after the last update are not counted (lost work, at most
one sub-batch per thread).

This machine's core count and load average are printed before and after every run: another
user's processes compete for the same cores, so the numbers are those of a shared machine. With
R x G threads above the core count the threads are time-sliced, and the GIL serialises the
Python parts of all threads of a process (NumPy's BLAS calls and refsgd's Numba kernels release
it). Plot: OUT_DIR/ppasgd_throughput.png (samples/s and updates/s against G, per R). The metrics
files stay in OUT_DIR; --no-run prints the tables again from them. With the defaults the script
takes 1.5-2 minutes on 2 cores (shared).
"""

import argparse
import json
import os
import subprocess
import sys
import time

import h5py
import numpy as np

BIN = os.path.dirname(sys.executable)
ONE_THREAD = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "NUMBA_NUM_THREADS": "1",
              "MKL_NUM_THREADS": "1"}
SKIP = 20
ALGOS = ("pp-asgd", "ssgd-nag")


def load_text():
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def path(args, algo, R, G):
    return os.path.join(args.out_dir, f"{algo}-n{R}-g{G}.h5")


def refsgd_train(args, algo, R, G):
    cmd = [os.path.join(BIN, "mpiexec"), "-n", str(R), os.path.join(BIN, "refsgd"), "train", "--algo", algo,
           "--model", args.model, "--batch", str(args.batch), "--lr", str(args.lr), "--momentum", str(args.momentum),
           "--seed", str(args.seed), "--iterations", str(args.iterations), "--eval-every", "100000",
           "--no-progress", "--out", path(args, algo, R, G)]
    cmd += ["--threads", str(G)] if algo == "pp-asgd" else ["--tau", str(G)]
    if args.data != "digits":
        cmd += ["--data", args.data]
    if os.path.exists(path(args, algo, R, G)):     # refsgd replaces no --out file
        os.remove(path(args, algo, R, G))
    before = load_text()
    print(f"running (load {before}): {' '.join(cmd[2:])}", file=sys.stderr, flush=True)
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **ONE_THREAD})
    secs = time.perf_counter() - t0
    if r.returncode != 0:
        sys.exit(f"failed ({r.returncode}): {' '.join(cmd)}\n{r.stdout[-2000:]}\n{r.stderr[-4000:]}")
    with open(path(args, algo, R, G)[:-3] + ".json", "w") as f:
        json.dump(dict(load_before=before, load_after=load_text(), seconds=secs), f)


def measure(args, algo, R, G):
    with h5py.File(path(args, algo, R, G)) as f:
        it = {k: f["iterations"][k][:, SKIP:] for k in f["iterations"]}
        cfg = json.loads(f.attrs["config"])
    with open(path(args, algo, R, G)[:-3] + ".json") as f:
        extra = json.load(f)
    n = it["wall"].shape[1]
    walls = float(it["wall"].sum(axis=1).mean())
    b = cfg["batch"]
    row = dict(updates=n, walls=walls, ups=n / walls, busy=float(it["compute"].sum()) / walls, **extra)
    if algo == "pp-asgd":
        grads = float(it["gradients"][0].sum())
        row["samples_s"] = grads * b / walls
        row["grads_per_update"] = grads / n
        row["S_bar"] = float(it["S_bar"][0, -1])
    else:
        row["samples_s"] = n * b * cfg["tau"] * R / walls
        row["grads_per_update"] = float(cfg["tau"] * R)
        row["S_bar"] = float("nan")
    return row


def md(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(out)


def plot(res, ranks, threads, png, title):
    import matplotlib  # noqa: PLC0415 matplotlib: only to plot
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415 matplotlib

    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 5))
    for i, R in enumerate(ranks):
        for algo, ls, mk in (("pp-asgd", "-", "o"), ("ssgd-nag", "--", "s")):
            left.plot(threads, [res[(algo, R, G)]["samples_s"] for G in threads], ls=ls, marker=mk, color=f"C{i}",
                      label=f"{algo}, {R} rank(s)")
            right.plot(threads, [res[(algo, R, G)]["ups"] for G in threads], ls=ls, marker=mk, color=f"C{i}",
                       label=f"{algo}, {R} rank(s)")
    left.set_ylabel("samples/s (gradients consumed x batch / s)")
    right.set_ylabel("updates/s")
    right.set_yscale("log")
    for ax in (left, right):
        ax.set_xlabel("G (PP-ASGD: gradient threads per rank; SSGD-NAG: tau sub-batches per rank)")
        ax.set_xticks(threads)
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small")
    fig.suptitle(title, fontsize="small")
    fig.tight_layout()
    fig.savefig(png, dpi=120)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("data", help="MNIST in refsgd's HDF5 layout, or `digits` for the embedded digits")
    p.add_argument("--model", default="mnist_mlp")
    p.add_argument("--batch", type=int, default=32, help="sub-batch B (default 32)")
    p.add_argument("--threads", default="1,2,4", help="values of G (default 1,2,4)")
    p.add_argument("--ranks", default="1,2", help="values of R (default 1,2)")
    p.add_argument("--iterations", type=int, default=300, help="updates per run (default 300)")
    p.add_argument("--lr", type=float, default=1e-6, help="lambda (default 1e-6; only so that nothing diverges)")
    p.add_argument("--momentum", type=float, default=0.99)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out-dir", default="/tmp/ppasgd_throughput", help="metrics files and plot")
    p.add_argument("--no-run", action="store_true", help="only read the files of an earlier run in --out-dir")
    args = p.parse_args()
    began = time.perf_counter()
    threads = [int(x) for x in args.threads.split(",")]
    ranks = [int(x) for x in args.ranks.split(",")]
    os.makedirs(args.out_dir, exist_ok=True)
    start_load = load_text()
    if not args.no_run:
        for R in ranks:
            for G in threads:
                for algo in ALGOS:
                    refsgd_train(args, algo, R, G)
    res = {(algo, R, G): measure(args, algo, R, G) for R in ranks for G in threads for algo in ALGOS}
    with h5py.File(path(args, "pp-asgd", ranks[0], threads[0])) as f:
        cfg = json.loads(f.attrs["config"])

    print("## PP-ASGD (threaded) vs SSGD-NAG throughput on this machine\n")
    print(f"{cfg['model']}, sub-batch {cfg['batch']}, lambda {cfg['lr']:g}, mu {cfg['momentum']:g}, "
          f"{cfg['iterations']} updates per run, the first {SKIP} skipped; {os.cpu_count()} CPU cores "
          f"(usable: {len(os.sched_getaffinity(0))}); load average at the start {start_load}, at the end "
          f"{load_text()} (a shared machine: other users' processes compete for the cores).\n")
    rows = []
    for R in ranks:
        for G in threads:
            pp, sg = res[("pp-asgd", R, G)], res[("ssgd-nag", R, G)]
            for algo, r in (("pp-asgd", pp), ("ssgd-nag", sg)):
                rows.append([R, G, algo, f"{r['ups']:.1f}", f"{1e3 / r['ups']:.1f}", f"{r['samples_s']:.0f}",
                             f"{r['grads_per_update']:.2f}", "" if np.isnan(r["S_bar"]) else f"{r['S_bar']:.2f}",
                             f"{r['busy']:.2f}",
                             f"{pp['samples_s'] / sg['samples_s']:.2f}" if algo == "pp-asgd" else "",
                             f"{r['load_before'].split()[0]} / {r['load_after'].split()[0]}", f"{r['seconds']:.0f}"])
    print(md(["ranks R", "G", "method", "updates/s", "ms per update", "samples/s", "sub-batches per update",
              "S_bar", "grad-busy", "PP / SSGD-NAG samples/s", "load 1-min before / after", "run s"], rows))
    print("\nsub-batches per update: PP-ASGD measured (all ranks), SSGD-NAG = tau x R. grad-busy: wall time of "
          "the gradient calls (all threads and ranks) per second of updates, descheduled time and GIL waits "
          f"included (not CPU time: {len(os.sched_getaffinity(0))} cores here).")
    png = os.path.join(args.out_dir, "ppasgd_throughput.png")
    plot(res, ranks, threads, png, f"PP-ASGD (threaded) vs SSGD-NAG: {cfg['model']}, sub-batch {cfg['batch']}, "
                                   f"{os.cpu_count()} cores (shared)")
    print(f"\nplot: {png}; metrics files: {args.out_dir}/{{pp-asgd,ssgd-nag}}-nR-gG.h5")
    if not args.no_run:
        print(f"script run time {time.perf_counter() - began:.0f} s")


if __name__ == "__main__":
    main()
