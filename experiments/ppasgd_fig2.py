"""PP-ASGD's Figure 2 at small scale: PP-ASGD against naive ASGD at a fixed staleness S = 3, 9, 27.

    .venv/bin/python experiments/ppasgd_fig2.py MNIST.h5 [--model mnist_mlp] [--ranks 1] [--threads 2]
                     [--batch 64] [--lr 1e-6] [--momentum 0.99] [--epochs 10] [--staleness 3,9,27]
                     [--target-error PCT] [--out-dir /tmp/ppasgd_fig2] [--no-run]

MNIST.h5 comes from `refsgd data convert mnist DIR MNIST.h5`. Sato et al. 2017, Figure 2: on
CIFAR-10 with an artificially generated staleness S, the test error rate of PP-ASGD against the
number of updates falls much faster than naive ASGD's as S grows (about 5x fewer updates to the
same error at S = 27). The script runs, in refsgd's deterministic mode (``--staleness S``: update
t applies one sub-batch gradient per thread computed at the w^ published after update t-S-1, and
PP-ASGD's f_S uses this S), for every S and both methods, with the same options::

    mpiexec -n RANKS refsgd train --algo pp-asgd --staleness S --threads 2 --momentum 0.99 --lr LR
                                  --batch B --epochs E --eval-every 1 --out S{S}-pp-asgd.h5
    mpiexec -n RANKS refsgd train --algo asgd    --staleness S ...                 --out S{S}-asgd.h5

--lr is lambda, which multiplies the SUM of the gradients over the samples, threads and ranks of
an update (RANKS x threads x B samples); it was tuned once (on MNIST, 1 rank x 2 threads x 64,
S = 27): 3e-6 makes both methods diverge, 1.5e-6 lets PP-ASGD learn and makes ASGD oscillate
(16.7 % test accuracy after 4 epochs), 1e-6 (the default) lets both learn. The same lr serves
every S and both methods.

Why MNIST / mnist_mlp and not the paper's cifar10_cnn on the CIFAR-10 subset (5,085 training
images): measured here (shared machine), one update of cifar10_cnn with 1 process x 2 threads x 32
takes 70-220 ms; at S = 27, PP-ASGD diverges with lambda 5e-6 and 2e-6, stays near chance with
1e-6 (17.9 % test accuracy after 640 updates) and reaches 25 % after 640 updates with 4e-7, so
six runs long enough to compare would take well over the budget of about 25 minutes. mnist_mlp
takes 6-16 ms per update.

An evaluation (the whole test set) follows every epoch (the finest --eval-every; an epoch is
60,000 / (RANKS x threads x B) updates: 468 with the defaults). A run whose loss becomes
non-finite stops (refsgd exits with "non-finite at iteration N" and writes no metrics file); the
script then takes its evaluations from the log and reports the divergence.

Printed (markdown): per run the final and best test error and the updates to reach the target
error (default: the larger of the two S = 3 runs' errors at their middle evaluation, rounded up
to 0.5 %, so that both reach it at S = 3 halfway through), linearly interpolated between the
evaluations that bracket it (the first evaluation at or below the target in parentheses; "<= N"
when the first evaluation, after N updates, is already below it), and ASGD / PP-ASGD, the
speed-up in updates; the same ratio at every target of 20 % .. 3 % that both S = 3 runs cross
after their first evaluation; the error after every evaluation.
Plot: OUT_DIR/ppasgd_fig2.png, test error against updates for the 6 runs (log scale). The metrics
files and logs stay in OUT_DIR; --no-run prints the tables and draws the plot again from them.
With the defaults the script takes 5-6 minutes on 2 cores (shared).
"""

import argparse
import json
import math
import os
import re
import subprocess
import sys
import time

import h5py
import numpy as np

BIN = os.path.dirname(sys.executable)
ONE_THREAD = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "NUMBA_NUM_THREADS": "1",
              "MKL_NUM_THREADS": "1"}
ALGOS = ("pp-asgd", "asgd")
EVAL_LINE = re.compile(r"iter\s+(\d+)\s+epoch\s+([\d.]+).*test acc\s+([\d.]+)%")
DIVERGED = re.compile(r"non-finite at iteration (\d+)")


def name(S, algo):
    return f"S{S}-{algo}"


def refsgd_train(args, S, algo):
    base = os.path.join(args.out_dir, name(S, algo))
    cmd = [os.path.join(BIN, "mpiexec"), "-n", str(args.ranks), os.path.join(BIN, "refsgd"), "train",
           "--algo", algo, "--staleness", str(S), "--model", args.model, "--data", args.data,
           "--threads", str(args.threads), "--batch", str(args.batch), "--lr", str(args.lr),
           "--momentum", str(args.momentum), "--seed", str(args.seed), "--epochs", str(args.epochs),
           "--eval-every", "1", "--no-progress", "--out", base + ".h5"]
    print(f"running: {' '.join(cmd[2:])}", file=sys.stderr, flush=True)
    if os.path.exists(base + ".h5"):
        os.remove(base + ".h5")
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **ONE_THREAD})
    secs = time.perf_counter() - t0
    with open(base + ".log", "w") as f:
        f.write(r.stdout + r.stderr)
        f.write(f"\n# returncode {r.returncode}, {secs:.1f} s\n")
    if r.returncode != 0 and not DIVERGED.search(r.stdout + r.stderr):
        sys.exit(f"failed ({r.returncode}): {' '.join(cmd)}\n{r.stdout[-2000:]}\n{r.stderr[-4000:]}")
    return secs


def load(args, S, algo):
    """Evaluations (updates, error %) and, if the run diverged, the iteration."""
    base = os.path.join(args.out_dir, name(S, algo))
    with open(base + ".log") as f:
        log = f.read()
    m = re.search(r"# returncode (\d+), ([\d.]+) s", log)
    run = dict(secs=float(m.group(2)) if m else float("nan"), diverged=None)
    d = DIVERGED.search(log)
    if os.path.exists(base + ".h5"):
        with h5py.File(base + ".h5") as f:
            run["updates"] = f["evals"]["iteration"][...]
            run["err"] = 100 * (1 - f["evals"]["test_acc"][...])
            run["wall"] = float(f.attrs["wall_seconds"])
            run["cfg"] = json.loads(f.attrs["config"])
            run["world"] = int(f.attrs["world_size"])
    else:                                      # diverged: the evaluations printed before it
        ev = EVAL_LINE.findall(log)
        run["updates"] = np.array([float(i) for i, _, _ in ev])
        run["err"] = np.array([100 - float(a) for _, _, a in ev])
        run["wall"] = float("nan")
        run["cfg"] = None
    if d:
        run["diverged"] = int(d.group(1))
    return run


def reach(run, target):
    """(updates, first evaluation's updates, early) at which the error first is <= target, or
    (None, None, False): updates interpolated linearly between the two evaluations around the
    crossing; early = True when the first evaluation is already at or below it (updates is then
    that evaluation's, an upper bound)."""
    u, e = run["updates"], run["err"]
    hit = np.flatnonzero(e <= target)
    if len(hit) == 0:
        return None, None, False
    i = hit[0]
    if i == 0:
        return float(u[0]), float(u[0]), True
    x = u[i - 1] + (e[i - 1] - target) / (e[i - 1] - e[i]) * (u[i] - u[i - 1])
    return float(x), float(u[i]), False


def fmt_reach(r):
    x, first, early = r
    if x is None:
        return "not reached"
    return f"<= {x:.0f}" if early else f"{x:.0f} ({first:.0f})"


def ratio(pp, a):
    """ASGD's updates over PP-ASGD's, from two reach() results."""
    (xp, _, ep), (xa, _, ea) = pp, a
    if xp is None:
        return "PP never"
    if xa is None:
        return "ASGD never"
    if ep and ea:
        return "both <= 1st eval"
    if ep:
        return f">= {xa / xp:.2f}"
    if ea:
        return f"<= {xa / xp:.2f}"
    return f"{xa / xp:.2f}"


def md(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(out)


def plot(runs, stal, target, path, title):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 6))
    colors = {S: f"C{i}" for i, S in enumerate(stal)}
    for (S, algo), r in runs.items():
        ls = "-" if algo == "pp-asgd" else "--"
        label = f"{'PP-ASGD' if algo == 'pp-asgd' else 'ASGD'} S={S}"
        if r["diverged"] is not None:
            label += f" (diverged at {r['diverged']})"
        ax.plot(r["updates"], r["err"], ls=ls, marker="o" if algo == "pp-asgd" else "s", ms=4,
                color=colors[S], label=label)
        if r["diverged"] is not None:
            ax.axvline(r["diverged"], color=colors[S], ls=":", lw=1)
    ax.axhline(target, color="k", lw=0.8, ls=":", label=f"target {target:g}%")
    ax.set_yscale("log")
    ax.set_xlabel("updates")
    ax.set_ylabel("test error rate (%)")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize="small", ncol=2)
    ax.set_title(title, fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("data", help="dataset HDF5 (refsgd data convert), e.g. MNIST")
    p.add_argument("--model", default="mnist_mlp")
    p.add_argument("--ranks", type=int, default=1, help="MPI processes (default 1)")
    p.add_argument("--threads", type=int, default=2, help="gradient threads per process (default 2)")
    p.add_argument("--batch", type=int, default=64, help="sub-batch of a thread (default 64)")
    p.add_argument("--lr", type=float, default=1e-6, help="lambda, times the SUM of the gradients (default 1e-6)")
    p.add_argument("--momentum", type=float, default=0.99, help="mu (default 0.99, the paper's)")
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--staleness", default="3,9,27", help="comma-separated S (default 3,9,27)")
    p.add_argument("--target-error", type=float, help="target test error in %% (default: from the S = 3 runs)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out-dir", default="/tmp/ppasgd_fig2", help="metrics files, logs and plot")
    p.add_argument("--no-run", action="store_true", help="only read the files of an earlier run in --out-dir")
    args = p.parse_args()
    began = time.perf_counter()
    stal = [int(s) for s in args.staleness.split(",")]
    os.makedirs(args.out_dir, exist_ok=True)
    if not args.no_run:
        for S in stal:
            for algo in ALGOS:
                refsgd_train(args, S, algo)
    runs = {(S, algo): load(args, S, algo) for S in stal for algo in ALGOS}
    done = [r for r in runs.values() if r["cfg"]]
    if done:               # the options of the files (--no-run)
        for k in ("model", "data", "threads", "batch", "lr", "momentum", "epochs", "seed"):
            setattr(args, k, done[0]["cfg"][k])
        args.ranks = done[0]["world"]
    S_ref = min(stal)
    target = args.target_error
    if target is None:     # both S_ref runs at their middle evaluation, rounded up to 0.5 %
        mids = [runs[(S_ref, a)]["err"][(len(runs[(S_ref, a)]["err"]) - 1) // 2] for a in ALGOS
                if len(runs[(S_ref, a)]["err"])]
        target = math.ceil(max(mids) * 2 - 1e-9) / 2 if mids else 10.0

    samples = args.ranks * args.threads * args.batch
    print("## PP-ASGD Figure 2 at small scale: test error against updates at a fixed staleness\n")
    print(f"{args.model} on {os.path.basename(args.data)}, deterministic mode (--staleness S), {args.ranks} process(es) "
          f"x {args.threads} gradient threads x sub-batch {args.batch} = {samples} samples per update, "
          f"lambda {args.lr:g} (times the sum of the gradients; {args.lr * samples / (1 - args.momentum):.3g} on the "
          f"mean gradient at the momentum's steady state), mu {args.momentum:g}, {args.epochs} epochs, test "
          f"evaluation after every epoch, seed {args.seed}; {os.cpu_count()} CPU cores, load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}.\n")
    rows = []
    for S in stal:
        got = {algo: reach(runs[(S, algo)], target) for algo in ALGOS}
        rat = ratio(got["pp-asgd"], got["asgd"])
        for algo in ALGOS:
            r = runs[(S, algo)]
            status = f"diverged at update {r['diverged']}" if r["diverged"] is not None else "ok"
            rows.append([S, algo, f"{r['err'][-1]:.2f}" if len(r["err"]) else "-",
                         f"{r['err'].min():.2f}" if len(r["err"]) else "-", fmt_reach(got[algo]), rat, status,
                         f"{r['secs']:.0f}"])
    print(md(["S", "method", "final test error %", "best test error %", f"updates to {target:g}% (first eval)",
              "ASGD / PP-ASGD", "run", "run s"], rows))
    how = ("given" if args.target_error is not None else
           f"the larger error of the two S = {S_ref} runs at their middle evaluation, rounded up to 0.5%")
    print(f"\nTarget {target:g}% test error ({how}); "
          "updates interpolated linearly between the two evaluations around the crossing (the first "
          "evaluation at or below it in parentheses). Paper (CIFAR-10): PP-ASGD about 5x faster at S = 27.\n")
    # the same at several targets that both S_ref runs reach
    targets = [x for x in (20, 10, 8, 6, 5, 4.5, 4, 3.5, 3)
               if all(reach(runs[(S_ref, a)], x)[0] is not None and not reach(runs[(S_ref, a)], x)[2]
                      for a in ALGOS)]
    rows = []
    for S in stal:
        row = [S]
        for x in targets:
            pp, a = reach(runs[(S, "pp-asgd")], x), reach(runs[(S, "asgd")], x)
            row.append(f"{'-' if pp[0] is None else ('<=' if pp[2] else '') + f'{pp[0]:.0f}'} / "
                       f"{'-' if a[0] is None else ('<=' if a[2] else '') + f'{a[0]:.0f}'}: {ratio(pp, a)}")
        rows.append(row)
    print(f"Updates to each target error that both S = {S_ref} runs cross after their first evaluation, "
          "PP-ASGD / ASGD: ASGD's over PP-ASGD's (- : not reached; <= : already at the first evaluation):\n")
    print(md(["S"] + [f"{x:g}%" for x in targets], rows))
    print()
    print("Test error (%) after each evaluation:\n")
    n = max(len(r["err"]) for r in runs.values())
    ref = max(runs.values(), key=lambda r: len(r["updates"]))["updates"]
    rows = [[name(S, a)] + [f"{e:.2f}" for e in runs[(S, a)]["err"]] + [""] * (n - len(runs[(S, a)]["err"]))
            for S in stal for a in ALGOS]
    print(md(["updates:"] + [f"{int(u)}" for u in ref], rows))
    png = os.path.join(args.out_dir, "ppasgd_fig2.png")
    title = (f"PP-ASGD (solid) vs ASGD (dashed) at fixed staleness S: {args.model}, {args.ranks} proc x {args.threads} "
             f"threads x {args.batch}, lambda {args.lr:g}, mu {args.momentum:g}")
    plot(runs, stal, target, png, title)
    print(f"\nplot: {png}; metrics files and logs: {args.out_dir}/S*-{{pp-asgd,asgd}}.{{h5,log}}")
    if not args.no_run:
        print(f"script run time {time.perf_counter() - began:.0f} s")


if __name__ == "__main__":
    main()
