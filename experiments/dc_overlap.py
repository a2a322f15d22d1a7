"""DC-S3GD's overlap against SSGD, next to the timing models of Rigazzi 2019 (eq. 13, 14).

    python experiments/dc_overlap.py MNIST.h5 [--ranks 4] [--batch 64] [--iterations 150]

MNIST.h5 comes from `refsgd data convert mnist DIR MNIST.h5`. The script

1. runs `ssgd` without a link to measure t_C, the compute time of one iteration (median over
   ranks and iterations after a warm-up of 10);
2. sets an emulated link (latency 50 us) whose bandwidth makes one all-reduce of the model,
   t_ARed (Pipe-SGD eq. 5, as `refsgd.comm.link.Link.time`), about equal to t_C;
3. runs `ssgd` and `dcs3gd` (without and with `--poll`) with that link and prints the measured
   iteration time (wall),
   compute and idle per iteration next to eq. 13, t_SSGD = t_C + t_ARed, and eq. 14,
   t_DC-S3GD = max(t_C, t_ARed), evaluated with the measured t_C.

Every run is `mpiexec -n RANKS refsgd train ... --out F.h5`; the medians come from the metrics
files. With more ranks than cores the ranks share cores and "idle" includes waiting for
descheduled peers: compare with --ranks equal to the number of cores.
"""

import argparse
import os
import subprocess
import sys
import tempfile

import h5py
import numpy as np

from refsgd.comm.link import Link
from refsgd.nn import load_model

BIN = os.path.dirname(sys.executable)


def train(ranks, algo, data, args, out, link=None):
    algo, _, poll = algo.partition("+")
    cmd = [os.path.join(BIN, "mpiexec"), "-n", str(ranks), os.path.join(BIN, "refsgd"), "train",
           "--algo", algo, "--model", args.model, "--data", data, "--batch", str(args.batch),
           "--iterations", str(args.iterations), "--lr", "0.05", "--momentum", "0.9",
           "--no-progress", "--eval-every", "1000", "--force", "--out", out]
    if link:
        cmd += ["--link", link]
    if poll:
        cmd += ["--poll"]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "NUMBA_NUM_THREADS": "1"}
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL)
    with h5py.File(out) as f:
        return {k: float(np.median(f["iterations"][k][:, 10:])) for k in ("compute", "idle", "wall")}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("data", help="MNIST in refsgd's HDF5 layout")
    p.add_argument("--ranks", type=int, default=4)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--iterations", type=int, default=150)
    p.add_argument("--model", default="mnist_mlp")
    args = p.parse_args()
    nbytes = load_model(args.model).num_params * 4
    with tempfile.TemporaryDirectory() as tmp:
        base = train(args.ranks, "ssgd", args.data, args, os.path.join(tmp, "base.h5"))
        t_c = base["compute"]
        # the link (latency 50 us) whose t_ARed = 2(p-1) alpha + 2 (p-1)/p n beta equals t_c
        p = args.ranks
        link = Link.for_time(t_c, nbytes, p, latency_us=50.0)
        t_ared = link.time(nbytes, p)
        spec = f"{link.latency_us:g},{link.gbit_s:g}"
        rows = {a: train(p, a, args.data, args, os.path.join(tmp, f"{a}.h5"), spec)
                for a in ("ssgd", "dcs3gd", "dcs3gd+poll")}
    print(f"{args.model} ({nbytes / 1e6:.2f} MB float32), {p} ranks, batch {args.batch}, {args.iterations} iterations")
    print(f"t_C (ssgd, no link) = {1e3 * t_c:.2f} ms; {link} -> t_ARed = {1e3 * t_ared:.2f} ms (EMULATED)")
    print(f"{'method':<12} {'compute':>9} {'idle':>9} {'iteration':>10}   model")
    eq14 = ("eq. 14: max(t_C, t_ARed)", max(t_c, t_ared))
    eq = {"ssgd": ("eq. 13: t_C + t_ARed", t_c + t_ared), "dcs3gd": eq14, "dcs3gd+poll": eq14}
    for a, r in rows.items():
        name, val = eq[a]
        print(f"{a:<12} {1e3 * r['compute']:7.2f}ms {1e3 * r['idle']:7.2f}ms {1e3 * r['wall']:8.2f}ms   "
              f"{name} = {1e3 * val:.2f} ms")
    for a in ("dcs3gd", "dcs3gd+poll"):
        print(f"measured speed-up of {a} over ssgd per iteration: {rows['ssgd']['wall'] / rows[a]['wall']:.2f}x "
              f"(model: {(t_c + t_ared) / max(t_c, t_ared):.2f}x)")
    print("(dcs3gd+poll: --poll, Test() on the in-flight all-reduce at every layer boundary)")


if __name__ == "__main__":
    main()
