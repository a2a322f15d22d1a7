"""Pipe-SGD's Figure 4 (MNIST MLP) at laptop scale: PS-Sync, D-Sync(+T/+Q), Pipe-SGD(+T/+Q).

    .venv/bin/python experiments/pipesgd_fig4.py MNIST.h5 [--epochs 3] [--lr 0.05] [--link 50,10]
                                                          [--ranks 4] [--out-plot pipesgd_fig4.png]

MNIST.h5 comes from `refsgd data convert mnist DIR MNIST.h5`. Li et al. 2018 (NeurIPS), Figure 4:
an MLP on MNIST trained by four workers with a global batch of 100, seven variants, test accuracy
against wall-clock time and the per-iteration time split. The script runs, each for --epochs
epochs of the same global batch (100 = RANKS x 100/RANKS, so the same number of iterations), on
the same emulated link (``--link LATENCY_US,GBIT_S``, default 50 us and 10 Gbit/s)::

    PS-Sync      mpiexec -n RANKS+1 refsgd train --algo ps-sync                (rank 0: the server)
    D-Sync       mpiexec -n RANKS   refsgd train --algo d-sync
    D-Sync+T     mpiexec -n RANKS   refsgd train --algo d-sync   --compress t16
    D-Sync+Q     mpiexec -n RANKS   refsgd train --algo d-sync   --compress q8
    Pipe-SGD     mpiexec -n RANKS   refsgd train --algo pipe-sgd                 (--dependency 2)
    Pipe-SGD+T   mpiexec -n RANKS   refsgd train --algo pipe-sgd --compress t16
    Pipe-SGD+Q   mpiexec -n RANKS   refsgd train --algo pipe-sgd --compress q8

with ``--model mnist_mlp --batch 100/RANKS --lr LR --eval-every 1 --out F.h5``; --lr multiplies
the SUM over workers of their mean gradients (the paper's update), so LR = 0.05 is a step of
0.2 on the mean gradient of 4 workers.

From each metrics file it prints the final test accuracy and the mean per-iteration time over the
workers (PS-Sync's server, rank 0, left out) and iterations (the first 10 skipped): compute
(forward and backward), codec (compression and decompression on the computation path), idle
(blocked on communication), other = wall - compute - codec - idle (update, data loading, Python),
and the iteration's wall time; next to it the paper's timing model evaluated with those numbers:

    eq. 2 (PS-Sync, D-Sync*)  l_up + l_comp + l_comm
    eq. 4 (Pipe-SGD*)         max(l_up + l_comp, l_comm)

with l_comp = compute + codec, l_up = other, and l_comm the link model's time of one iteration's
message (refsgd/comm/link.py): ``Link.time(nbytes, RANKS)`` (Ring-AllReduce, eq. 5) with nbytes =
4d (float32), 2d (t16) or 260 ceil(d/256) (q8), d the number of parameters; for PS-Sync the
parameter-server model, Gather then Bcast, ``2 Link.ps_time(4d, RANKS+1)``. l_comm leaves out the
time of the compressed all-reduce's operator (decompress, add, compress at every reduction step;
see experiments/codec_cost.py) and the real shared-memory transfer, both of which the emulated
link runs first and only then delays to the model's time when they were shorter.

The timings are those of an EMULATED link (every all-reduce held back to the model's time; the
output says so), on one machine: with more ranks (and Pipe-SGD's communication threads) than cores
the ranks are time-sliced, compute stretches, and idle includes waiting for descheduled peers.
The plot (--out-plot) has, as the paper's, test accuracy against wall-clock time (the
evaluations after every epoch, /evals/seconds and /evals/test_acc) on the left and a stacked bar
per variant of compute / codec / idle / other per iteration on the right.
"""

import argparse
import math
import os
import subprocess
import sys
import tempfile

import h5py
import numpy as np

from refsgd.comm.link import Link
from refsgd.nn import load_model

BIN = os.path.dirname(sys.executable)
ONE_THREAD = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "NUMBA_NUM_THREADS": "1",
              "MKL_NUM_THREADS": "1"}
SKIP = 10

# name, --algo, --compress
VARIANTS = [
    ("PS-Sync", "ps-sync", "none"),
    ("D-Sync", "d-sync", "none"),
    ("D-Sync+T", "d-sync", "t16"),
    ("D-Sync+Q", "d-sync", "q8"),
    ("Pipe-SGD", "pipe-sgd", "none"),
    ("Pipe-SGD+T", "pipe-sgd", "t16"),
    ("Pipe-SGD+Q", "pipe-sgd", "q8"),
]


def train(name, algo, compress, args, folder):
    """Run one variant; its evaluations and mean per-iteration times over the workers."""
    out = os.path.join(folder, f"{name}.h5")
    ranks = args.ranks + 1 if algo == "ps-sync" else args.ranks
    cmd = [os.path.join(BIN, "mpiexec"), "-n", str(ranks), os.path.join(BIN, "refsgd"), "train",
           "--algo", algo, "--model", "mnist_mlp", "--data", args.data, "--batch", str(args.batch),
           "--lr", str(args.lr), "--epochs", str(args.epochs), "--eval-every", "1", "--no-progress",
           "--link", args.link, "--force", "--out", out]
    if compress != "none":
        cmd += ["--compress", compress]
    print(f"running {name}: {' '.join(cmd[2:])}", file=sys.stderr, flush=True)
    r = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **ONE_THREAD})
    if r.returncode != 0:
        sys.exit(f"failed ({r.returncode}): {' '.join(cmd)}\n{r.stdout[-2000:]}\n{r.stderr[-4000:]}")
    with h5py.File(out) as f:
        assert f.attrs["link_emulated"]
        workers = slice(1, None) if algo == "ps-sync" else slice(None)
        it = {k: f["iterations"][k][workers, SKIP:] for k in ("compute", "codec", "idle", "wall")}
        row = {k: float(v.mean()) for k, v in it.items()}
        row["other"] = float((it["wall"] - it["compute"] - it["codec"] - it["idle"]).mean())
        row["seconds"] = f["evals"]["seconds"][...]
        row["acc"] = f["evals"]["test_acc"][...]
        row["iterations"] = int(f["evals"]["iteration"][-1])
    return row


def message_bytes(compress, d):
    return {"none": 4 * d, "t16": 2 * d, "q8": 260 * math.ceil(d / 256)}[compress]


def plot(rows, path, title):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(rows)
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 5))
    styles = {"PS-Sync": "k", "D-Sync": "C0", "Pipe-SGD": "C3"}
    marks = {"": "o", "+T": "s", "+Q": "^"}
    for name, r in rows.items():
        base, plus = (name[:-2], name[-2:]) if name[-2:] in ("+T", "+Q") else (name, "")
        left.plot(r["seconds"], 100 * r["acc"], marker=marks[plus], color=styles[base],
                  linestyle="-" if plus == "" else ("--" if plus == "+T" else ":"), label=name)
    left.set_xlabel("wall-clock time (s)")
    left.set_ylabel("test accuracy (%)")
    left.set_title("test accuracy vs time (one point per epoch)")
    left.grid(alpha=0.3)
    left.legend()
    parts = [("compute", "C0"), ("codec", "C1"), ("idle", "C7"), ("other", "C2")]
    x = np.arange(len(names))
    bottom = np.zeros(len(names))
    for part, color in parts:
        vals = np.array([1e3 * max(rows[n][part], 0.0) for n in names])
        right.bar(x, vals, bottom=bottom, color=color, label=part)
        bottom += vals
    right.set_xticks(x, names, rotation=30, ha="right")
    right.set_ylabel("ms per iteration")
    right.set_title("per-iteration time split (workers, mean)")
    right.legend()
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("data", help="MNIST in refsgd's HDF5 layout")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--lr", type=float, default=0.05,
                   help="learning rate on the SUM over workers of their mean gradients (default 0.05)")
    p.add_argument("--link", default="50,10", help="emulated link LATENCY_US,GBIT_S (default 50,10)")
    p.add_argument("--ranks", type=int, default=4, help="workers (default 4; PS-Sync adds a server)")
    p.add_argument("--global-batch", type=int, default=100, help="default 100 (the paper's)")
    p.add_argument("--out-plot", default="pipesgd_fig4.png", help="PNG (default pipesgd_fig4.png)")
    args = p.parse_args()
    args.batch = args.global_batch // args.ranks
    link = Link.parse(args.link)
    P = args.ranks
    d = load_model("mnist_mlp").num_params
    with tempfile.TemporaryDirectory() as tmp:
        rows = {name: train(name, algo, comp, args, tmp) for name, algo, comp in VARIANTS}

    print(f"Pipe-SGD Figure 4 (small scale): mnist_mlp (d = {d:,} parameters), {P} workers x batch {args.batch} "
          f"= global batch {P * args.batch}, {args.epochs} epochs = {rows['D-Sync']['iterations']} iterations, "
          f"lr {args.lr:g} x sum of the workers' mean gradients")
    print(f"{link} -- EMULATED; per-iteration means over workers, first {SKIP} iterations skipped")
    print(f"{'variant':<11} {'test acc':>8} {'run s':>6} | {'compute':>8} {'codec':>7} {'idle':>7} {'other':>7} "
          f"{'wall':>7} | {'l_comm':>7}  model (ms per iteration)")
    sync, pipe = "eq. 2: l_up + l_comp + l_comm", "eq. 4: max(l_up + l_comp, l_comm)"
    for (name, algo, comp) in VARIANTS:
        r = rows[name]
        if algo == "ps-sync":
            l_comm = 2 * link.ps_time(4 * d, P + 1)
        else:
            l_comm = link.time(message_bytes(comp, d), P)
        l_comp, l_up = r["compute"] + r["codec"], r["other"]
        eq, model = (pipe, max(l_up + l_comp, l_comm)) if algo == "pipe-sgd" else (sync, l_up + l_comp + l_comm)
        r["model"] = model
        ms = lambda s: f"{1e3 * s:7.2f}"                                    # noqa: E731
        print(f"{name:<11} {100 * r['acc'][-1]:7.2f}% {r['seconds'][-1]:6.1f} | {ms(r['compute']):>8} "
              f"{ms(r['codec'])} {ms(r['idle'])} {ms(r['other'])} {ms(r['wall'])} | {ms(l_comm)}  "
              f"{eq} = {1e3 * model:.2f}")
    print("l_comm: link model of the message, Ring-AllReduce Link.time(nbytes, p) with nbytes = 4d / 2d (t16) / "
          f"260 ceil(d/256) (q8); PS-Sync 2 Link.ps_time(4d, {P + 1}) (Gather + Bcast through the server)")
    base = rows["D-Sync"]["wall"]
    print("speed-up per iteration over D-Sync, measured (model): " + ", ".join(
        f"{n} {base / r['wall']:.2f}x ({rows['D-Sync']['model'] / r['model']:.2f}x)"
        for n, r in rows.items() if n != "D-Sync"))
    title = (f"Pipe-SGD Fig. 4 at small scale: mnist_mlp, {P} workers x {args.batch}, "
             f"EMULATED link {link.latency_us:g} us, {link.gbit_s:g} Gbit/s")
    plot(rows, args.out_plot, title)
    print(f"plot: {os.path.abspath(args.out_plot)}")


if __name__ == "__main__":
    main()
