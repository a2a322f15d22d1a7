"""PP-ASGD's Figure 3 (right) at small scale: error of the parameter prediction f_S against S.

    .venv/bin/python experiments/ppasgd_fig3.py MNIST.h5 [--model experiments/ppasgd_mnist_cnn.toml]
                     [--threads 8] [--batch 256] [--lr 5e-7] [--momentum 0.99] [--iterations 1200]
                     [--warmup 300] [--out-dir /tmp/ppasgd_fig3] [--no-run]

MNIST.h5 comes from `refsgd data convert mnist DIR MNIST.h5`; `digits` instead of a file trains on
the embedded 8x8 digits (e.g. `digits --model digits_mlp --batch 32 --lr 1e-4`). Sato et al.
2017, Figure 3 right: during PP-ASGD training with a measured staleness S0 = 7, the error of the
linear prediction f_S(w_t, M_t) = w_t + M_t * sum_{s=1}^{S+1} mu^s (eq. 2) of the parameters
that a gradient computed now will meet when it is applied, for S = 0 .. 14; it is smallest at
S = S0, where it is 42 % of the error of naive ASGD's "prediction" w_t. The script runs, threaded
mode (the staleness is measured, not imposed), one process of G = --threads gradient threads::

    refsgd train --algo pp-asgd --threads G --momentum 0.99 --lr LR --batch B --iterations T
                 --eval-every 100000 --out pp-asgd.h5 --trace pp-asgd.trace.h5
    refsgd train --algo asgd    (the same options)           --out asgd.h5    --trace asgd.trace.h5

--eval-every 100000 (epochs): only the final evaluation. An evaluation stops the update thread
for about a second while the gradient threads go on, so the next update consumes a burst of
~100 gradients of staleness ~0, which pulls S_bar (a mean over gradients) well below the
staleness of the other updates (measured: 5.1 with an evaluation every 10 epochs against 6.3).

Trace indexing (refsgd/trace.py): /state/<name>[t] is the state AFTER update t (t = 0 .. T-1),
w_t, M_t, w^_t below; /w0 the state before update 0. The script checks it: w_t - w_{t-1} = M_t
(L7) and, for pp-asgd, w^_t = f_{S_t}(w_t, M_t) with S_t the metrics file's /iterations/S (L8;
for asgd w^_t = w_t), and prints the largest deviations (float32 rounding only).

A gradient computed at w^_t (published after update t, version t+1) and consumed with staleness
k is applied by update t+1+k; the prediction f_S(w_t, M_t) stands for w_{t+S+1} (SSGD-NAG's
w^ = w + mu*M, S = 0, stands for w_{t+1}). With S0 = floor(S_bar) of the run at its end (the S
that f_S used), the script computes, over every t of the trace after --warmup updates,

    E(S)     = mean_t || w_{t+S0+1} - f_S(w_t, M_t) ||_2         S = 0 .. 2*S0   (the paper's figure)
    E_ASGD   = mean_t || w_{t+S0+1} - w_t ||_2                   (naive ASGD: w^ = w, "S = -1")

on the SAME trajectory (PP-ASGD's): as in the paper, this compares the two predictors of the
same future parameters, so the difference is the prediction alone; ASGD's own run also differs
in where it goes (its w moves with its own stale gradients), which would mix the two effects.
Its own trajectory is analysed too, for reference (the same formulas with its own S0).

A second measure uses the measured staleness instead of the fixed offset S0 + 1: each update u
after the warm-up with mean staleness k_u = round(/iterations/staleness[u]) consumed gradients
computed at w^_{u-1-k_u}, so E_k(S) = mean_u || w_u - f_S(w_{u-1-k_u}, M_{u-1-k_u}) || (and
E_k,ASGD with w_{u-1-k_u}). Unlike E(S), whose minimum at S = S0 is largely built in (f_S predicts
S+1 steps ahead, the target lies S0+1 ahead), E_k's minimum comes from the measured staleness.

Model: by default experiments/ppasgd_mnist_cnn.toml (9,098 parameters; a trace costs 4 B x 9,098
x 3 arrays = 109 kB per update). With the bundled digits models the gradient of a sub-batch is
so cheap that the update thread, which waits for Python's GIL behind the gradient threads, takes
11-38 gradients per update and the staleness is 0.55-1.0 (digits_mlp, G = 8, measured here);
mnist_mlp (648,010 parameters, 7.8 MB of trace per update) is too large to trace. A convolutional
net with few parameters makes the gradient long and the update short, as in the paper, so that
each update consumes about one gradient and the staleness approaches G - 1.

Printed (markdown): the runs (final test accuracy, updates per second, gradients per update, S_bar,
mean staleness after the warm-up, trace checks); E(S), E(S)/E_ASGD and E_k(S), E_k(S)/E_k,ASGD on
PP-ASGD's trajectory; the same on ASGD's. Plot: OUT_DIR/ppasgd_fig3.png (error against S on both
trajectories, ratio to ASGD's, histogram of the per-update staleness). The metrics and trace
files stay in OUT_DIR; --no-run analyses them again without training. With the defaults the
script takes 1.5-2.5 minutes on 2 cores (shared).
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
HERE = os.path.dirname(os.path.abspath(__file__))
ONE_THREAD = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "NUMBA_NUM_THREADS": "1",
              "MKL_NUM_THREADS": "1"}
ALGOS = ("pp-asgd", "asgd")


def horizon(mu, S):
    """sum_{s=1}^{S+1} mu^s (eq. 2); 0 for S = -1 (naive ASGD: w^ = w)."""
    return float(sum(mu ** s for s in range(1, S + 2)))


def refsgd_train(args, algo, out_dir):
    cmd = [os.path.join(BIN, "refsgd"), "train", "--algo", algo, "--model", args.model,
           "--threads", str(args.threads), "--batch", str(args.batch), "--lr", str(args.lr),
           "--momentum", str(args.momentum), "--seed", str(args.seed), "--iterations", str(args.iterations),
           "--eval-every", "100000", "--no-progress",
           "--out", os.path.join(out_dir, f"{algo}.h5"), "--trace", os.path.join(out_dir, f"{algo}.trace.h5")]
    if args.data != "digits":
        cmd += ["--data", args.data]
    for suffix in (".h5", ".trace.h5"):            # refsgd replaces no --out or --trace file
        if os.path.exists(os.path.join(out_dir, algo + suffix)):
            os.remove(os.path.join(out_dir, algo + suffix))
    print(f"running: {' '.join(cmd[1:])}", file=sys.stderr, flush=True)
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **ONE_THREAD})
    if r.returncode != 0:
        sys.exit(f"failed ({r.returncode}): {' '.join(cmd)}\n{r.stdout[-2000:]}\n{r.stderr[-4000:]}")
    with open(os.path.join(out_dir, f"{algo}.log"), "w") as f:
        f.write(r.stdout + r.stderr)
    return time.perf_counter() - t0


def load(out_dir, algo):
    """Trace (float64, worker 0) and per-update metrics of one run."""
    with h5py.File(os.path.join(out_dir, f"{algo}.trace.h5")) as f:
        assert f.attrs["method"] == algo and int(f.attrs["world_size"]) == 1
        cfg = json.loads(f.attrs["config"])
        st = {k: f["state"][k][:, 0, :].astype(np.float64) for k in ("w", "M", "w_hat")}
        w0 = f["w0"][...].astype(np.float64)
    with h5py.File(os.path.join(out_dir, f"{algo}.h5")) as f:
        it = {k: f["iterations"][k][0, :] for k in ("S", "S_bar", "staleness", "gradients", "wall", "loss")}
        acc = float(f["evals"]["test_acc"][-1])
        wall = float(f.attrs["wall_seconds"])
    return dict(cfg=cfg, w=st["w"], M=st["M"], w_hat=st["w_hat"], w0=w0, it=it, acc=acc, wall=wall)


def analyse(r, mu, warm, algo):
    w, M, it = r["w"], r["M"], r["it"]
    T = len(w)
    # the trace's indexing: state after update t
    prev = np.vstack([r["w0"][None], w[:-1]])
    r["check_L7"] = float(np.abs(w - prev - M).max() / np.abs(M).max())
    if algo == "pp-asgd":
        h = np.array([horizon(mu, int(s)) for s in it["S"]])
        r["check_L8"] = float(np.abs(r["w_hat"] - (w + h[:, None] * M)).max() / np.abs(M).max())
    else:
        r["check_L8"] = float(np.abs(r["w_hat"] - w).max() / np.abs(M).max())
    S0 = int(it["S"][-1])                        # floor(S_bar) at the end: the S f_S used
    assert S0 == int(np.floor(it["S_bar"][-1]))
    r["S0"] = S0
    Smax = max(2 * S0, 4)
    r["S_range"] = np.arange(-1, Smax + 1)       # -1: naive ASGD (w^ = w)
    ts = np.arange(warm, T - S0 - 1)
    target = w[ts + S0 + 1]
    r["E"] = np.array([np.linalg.norm(target - (w[ts] + horizon(mu, S) * M[ts]), axis=1).mean()
                       for S in r["S_range"]])
    r["n_t"] = len(ts)
    # measured staleness per update: gradients of update u computed at w^_{u-1-k}
    k = np.rint(it["staleness"]).astype(int)
    us = np.array([u for u in range(warm, T) if u - 1 - k[u] >= 0])
    src = us - 1 - k[us]
    r["E_k"] = np.array([np.linalg.norm(w[us] - (w[src] + horizon(mu, S) * M[src]), axis=1).mean()
                         for S in r["S_range"]])
    r["n_u"] = len(us)
    sl = slice(warm, None)
    g, s = it["gradients"][sl], it["staleness"][sl]
    r["stal_window"] = float((g * s).sum() / g.sum())
    r["grads_window"] = float(g.mean())
    r["ups"] = float(1.0 / it["wall"][sl].mean())
    r["k_hist"] = np.bincount(k[sl], minlength=2 * S0 + 3)
    r["step"] = float(np.linalg.norm(M[warm:], axis=1).mean())
    return r


def md(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(out)


def table(r):
    S0, E, Ek = r["S0"], r["E"], r["E_k"]
    rows = []
    for i, S in enumerate(r["S_range"]):
        name = "ASGD (w^ = w)" if S == -1 else (f"**{S}** (= S0)" if S == S0 else str(S))
        rows.append([name, f"{E[i]:.3e}", f"{E[i] / E[0]:.3f}", f"{Ek[i]:.3e}", f"{Ek[i] / Ek[0]:.3f}"])
    return md(["S", "E(S) = mean ||w_{t+S0+1} - f_S(w_t,M_t)||", "E(S) / E_ASGD",
               "E_k(S) (measured staleness)", "E_k(S) / E_k,ASGD"], rows)


def plot(runs, path, title):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax, rat, hist) = plt.subplots(1, 3, figsize=(17, 5))
    colors = {"pp-asgd": "C3", "asgd": "C0"}
    for algo, r in runs.items():
        S = r["S_range"][1:]
        ax.plot(S, r["E"][1:], marker="o", color=colors[algo], label=f"f_S on {algo}'s trajectory, offset S0+1")
        ax.plot(S, r["E_k"][1:], marker="x", ls="--", color=colors[algo],
                label=f"f_S on {algo}'s trajectory, measured staleness")
        ax.axhline(r["E"][0], color=colors[algo], ls=":", label=f"naive ASGD (w^ = w) on {algo}'s, offset S0+1")
        ax.axvline(r["S0"], color=colors[algo], lw=0.8, alpha=0.6)
        rat.plot(S, r["E"][1:] / r["E"][0], marker="o", color=colors[algo],
                 label=f"{algo}'s trajectory (S0 = {r['S0']})")
        rat.plot(S, r["E_k"][1:] / r["E_k"][0], marker="x", ls="--", color=colors[algo],
                 label=f"{algo}'s, measured staleness")
    ax.set_yscale("log")
    ax.set_xlabel("S of the prediction f_S")
    ax.set_ylabel("mean || w_target - prediction ||_2")
    ax.set_title("prediction error (vertical: S0 = floor(S_bar))")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="xx-small", loc="lower left")
    rat.axhline(0.42, color="k", ls=":", label="paper at S = S0 = 7: 0.42")
    rat.set_xlabel("S")
    rat.set_ylabel("error / naive ASGD's error")
    rat.set_title("ratio to naive ASGD (same trajectory)")
    rat.grid(alpha=0.3)
    rat.legend(fontsize="small")
    width = 0.4
    for i, (algo, r) in enumerate(runs.items()):
        x = np.arange(len(r["k_hist"]))
        hist.bar(x + (i - 0.5) * width, r["k_hist"], width, color=colors[algo], label=algo)
    hist.set_xlabel("round(mean staleness of the update's gradients)")
    hist.set_ylabel("updates after the warm-up")
    hist.set_title("measured staleness per update")
    hist.legend()
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("data", help="MNIST in refsgd's HDF5 layout, or `digits` for the embedded digits")
    p.add_argument("--model", default=os.path.join(HERE, "ppasgd_mnist_cnn.toml"),
                   help="model name or .toml (default experiments/ppasgd_mnist_cnn.toml)")
    p.add_argument("--threads", type=int, default=8, help="gradient threads G (default 8)")
    p.add_argument("--batch", type=int, default=256, help="sub-batch b of a gradient thread (default 256)")
    p.add_argument("--lr", type=float, default=5e-7, help="lambda, times the SUM of the gradients (default 5e-7)")
    p.add_argument("--momentum", type=float, default=0.99, help="mu (default 0.99, the paper's)")
    p.add_argument("--iterations", type=int, default=1200, help="updates per run (default 1200)")
    p.add_argument("--warmup", type=int, default=300, help="updates skipped in the analysis (default 300)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out-dir", default="/tmp/ppasgd_fig3", help="metrics, traces and plot (default /tmp/ppasgd_fig3)")
    p.add_argument("--no-run", action="store_true", help="analyse the files of an earlier run in --out-dir")
    args = p.parse_args()
    began = time.perf_counter()
    os.makedirs(args.out_dir, exist_ok=True)
    secs = {}
    if not args.no_run:
        for algo in ALGOS:
            secs[algo] = refsgd_train(args, algo, args.out_dir)
    runs = {algo: load(args.out_dir, algo) for algo in ALGOS}
    cfg = runs["pp-asgd"]["cfg"]
    mu = cfg["momentum"]
    for algo, r in runs.items():
        analyse(r, mu, args.warmup, algo)
    rp = runs["pp-asgd"]
    T = len(rp["w"])
    d = rp["w"].shape[1]

    print("## PP-ASGD Figure 3 (right) at small scale: error of the prediction f_S against S\n")
    print(f"model {cfg['model']} (d = {d:,} parameters), data {cfg.get('data') or 'embedded digits'}; one process, "
          f"G = {cfg['threads']} gradient threads x sub-batch {cfg['batch']}, threaded mode (staleness measured), "
          f"lambda {cfg['lr']:g} (times the sum of the gradients), mu {mu:g}, {T} updates per run, the first "
          f"{args.warmup} skipped in the analysis; {os.cpu_count()} CPU cores, load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())} (shared machine).\n")
    rows = []
    for algo, r in runs.items():
        rows.append([algo, f"{100 * r['acc']:.2f}%", f"{r['wall']:.1f}", f"{r['ups']:.1f}", f"{r['grads_window']:.2f}",
                     f"{r['it']['S_bar'][-1]:.2f}", r["S0"], f"{r['stal_window']:.2f}",
                     f"{r['check_L7']:.1e}", f"{r['check_L8']:.1e}"])
    print(md(["run", "final test acc", "train s", "updates/s", "gradients per update", "S_bar (end)",
              "S0 = floor(S_bar)", "mean staleness after warm-up", "max|w_t - w_{t-1} - M_t| / max|M|",
              "max|w^_t - f_{S_t}(w_t,M_t)| / max|M| (asgd: w^ - w)"], rows))
    print("\n(gradients per update, staleness: gradient-weighted means over the updates after the warm-up; "
          "the trace checks confirm that /state/...[t] is the state after update t)\n")
    for algo, r in runs.items():
        print(f"### On {algo}'s trajectory: S0 = {r['S0']}, E over {r['n_t']} updates t, E_k over {r['n_u']} "
              f"updates u; mean ||M_t|| (one update's step) {r['step']:.3e}\n")
        print(table(r))
        i0 = list(r["S_range"]).index(r["S0"])
        best = int(r["S_range"][1 + int(np.argmin(r["E"][1:]))])
        best_k = int(r["S_range"][1 + int(np.argmin(r["E_k"][1:]))])
        print(f"\nminimum of E(S) at S = {best} (S0 = {r['S0']}); E(S0) / E_ASGD = {r['E'][i0] / r['E'][0]:.3f} "
              f"(paper: minimum at S0 = 7, 0.42). Minimum of E_k(S) at S = {best_k}; E_k(S0) / E_k,ASGD = "
              f"{r['E_k'][i0] / r['E_k'][0]:.3f}.\n")
    png = os.path.join(args.out_dir, "ppasgd_fig3.png")
    title = (f"PP-ASGD Fig. 3 (right) at small scale: {os.path.basename(cfg['model'])}, 1 process x "
             f"G = {cfg['threads']} threads x "
             f"b = {cfg['batch']}, lambda {cfg['lr']:g}, mu {mu:g}; S0 = {rp['S0']} measured "
             f"(mean staleness after warm-up {rp['stal_window']:.2f})")
    plot(runs, png, title)
    print(f"plot: {png}; metrics and traces: {args.out_dir}/{{pp-asgd,asgd}}{{.h5,.trace.h5}}")
    if not args.no_run:
        print(f"script run time {time.perf_counter() - began:.0f} s (training "
              + ", ".join(f"{a} {s:.0f} s" for a, s in secs.items()) + ")")


if __name__ == "__main__":
    main()
