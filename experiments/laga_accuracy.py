"""Final test accuracy of SSGD (momentum), LAGA-SGDM and LAGA-SGDN: the pattern of LAGA's Table 1.

Run (from the repository root, after `refsgd data convert mnist <IDX folder> /tmp/mnist.h5`)::

    .venv/bin/python experiments/laga_accuracy.py /tmp/mnist.h5                 # 3 epochs, ~6 min
    .venv/bin/python experiments/laga_accuracy.py /tmp/mnist.h5 --epochs 2 --ranks 4

The paper (section 5.2, Table 1) trains ResNet-50 on ImageNet for 90 epochs with 8 workers and
tau in {1, 2, 4}: LAGA-SGDN stays on par with SSGD as tau grows, LAGA-SGDM falls behind. Here,
at laptop scale: mnist_mlp on MNIST, ``mpiexec -n 4`` (4 workers), micro-batch 32 per worker,
tau in {1, 4}, and for each tau the three methods with the same global batch (4 x 32 x tau),
the same schedule and the same seed. The schedule follows the paper's rule, scaled down:
learning rate eta per 256 samples scaled linearly with the global batch (the paper: eta = 0.1
for ResNet-50 with batch norm; here --lr-per-256 0.05 by default, i.e. 0.025 at tau = 1 and 0.1
at tau = 4: this MLP has no batch norm, and a trial with lr 0.2 at tau = 4 (no warm-up)
diverged), linear warm-up over the first half epoch, then linear decay to 0 at the last iteration (``warmup-linear``; the paper's step decays at epochs 30/60/80 have no room in a few
epochs), momentum 0.9, weight decay 1e-4. SSGD uses ``--momentum 0.9`` (PyTorch-form heavy
ball, the same momentum form as LAGA-SGDM's m <- gamma*m + g). Each run is one
``mpiexec -n 4 refsgd train ... --out run.h5``; the table is its final test accuracy (and the
best over the epochs; "nan" if the run stopped on a non-finite loss). No emulated link: the
accuracy per epoch does not depend on timing.
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time

import h5py
import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VENV_BIN = os.path.dirname(sys.executable)
ONE_THREAD = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "NUMBA_NUM_THREADS": "1",
              "MKL_NUM_THREADS": "1"}
METHODS = ("ssgd", "laga-sgdm", "laga-sgdn")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("data", help="MNIST in refsgd's HDF5 layout (refsgd data convert mnist ...)")
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--taus", type=int, nargs="+", default=[1, 4])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--lr-per-256", type=float, default=0.05,
                    help="learning rate per 256 samples of global batch, scaled linearly (default 0.05)")
    args = ap.parse_args()

    results = {}
    with tempfile.TemporaryDirectory() as folder:
        for tau in args.taus:
            global_batch = args.ranks * args.batch * tau
            lr = args.lr_per_256 * global_batch / 256
            for algo in METHODS:
                out = os.path.join(folder, f"{algo}-{tau}.h5")
                cmd = [os.path.join(VENV_BIN, "mpiexec"), "-n", str(args.ranks), sys.executable, "-m", "refsgd",
                       "train", "--algo", algo, "--model", "mnist_mlp", "--data", args.data, "--batch",
                       str(args.batch), "--tau", str(tau), "--lr", f"{lr:g}", "--schedule",
                       f"warmup-linear:warmup_epochs=0.5,total_epochs={args.epochs}", "--momentum", "0.9",
                       "--weight-decay", "1e-4", "--epochs", str(args.epochs), "--seed", str(args.seed),
                       "--no-progress", "--force", "--out", out]
                t0 = time.perf_counter()
                r = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env={**os.environ, **ONE_THREAD},
                                   timeout=1800)
                if r.returncode == 2 and "non-finite" in r.stderr:
                    acc = np.array([np.nan])  # diverged: reported as nan
                elif r.returncode != 0:
                    sys.exit(f"failed: {' '.join(cmd)}\n{r.stderr[-3000:]}")
                else:
                    with h5py.File(out) as f:
                        acc = f["evals/test_acc"][...]
                results[algo, tau] = (acc[-1], np.nanmax(acc) if np.isfinite(acc).any() else np.nan, time.perf_counter() - t0, global_batch, lr)
                print(f"  {algo:<10} tau {tau}: global batch {global_batch}, lr {lr:g}: test accuracy per epoch "
                      + " ".join(f"{100 * a:.2f}" for a in acc) + f"  ({results[algo, tau][2]:.0f} s)", flush=True)
    print(f"\nmnist_mlp on MNIST, {args.ranks} workers, micro-batch {args.batch}, {args.epochs} epochs, momentum 0.9, "
          "wd 1e-4, warm-up 0.5 epoch + linear decay; final test accuracy % (best over epochs)")
    print(f"  {'tau':>3} {'global batch':>12} | " + " | ".join(f"{m:>16}" for m in METHODS))
    for tau in args.taus:
        cells = [f"{100 * results[m, tau][0]:6.2f} ({100 * results[m, tau][1]:6.2f})" for m in METHODS]
        print(f"  {tau:>3} {results[METHODS[0], tau][3]:>12} | " + " | ".join(f"{c:>16}" for c in cells))


if __name__ == "__main__":
    main()
