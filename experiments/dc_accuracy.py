"""Accuracy of DC-S3GD against SSGD and DC-ASGD (Rigazzi 2019's claim: DC-S3GD reaches SSGD's
accuracy), on MNIST with mnist_mlp and 4 workers.

    python experiments/dc_accuracy.py MNIST.h5 [--epochs 5] [--batch 32]

MNIST.h5 comes from `refsgd data convert mnist DIR MNIST.h5`. Runs (each `mpiexec refsgd train
... --out`, test accuracy evaluated after every epoch on the average / server model):

  ssgd             4 ranks, momentum 0.9, lr 0.1 (mean gradient of 4 x batch)
  dcs3gd           4 ranks, momentum 0.9, lr 0.1, lambda_0 = 0.2 (eq. 17)
  dcs3gd-nocomp    the same with lambda_0 = 0 (no delay compensation)
  dcasgd           5 ranks = 1 server + 4 workers, constant lambda 0.04, lr 0.1, no momentum
                   (the listing has none); each push moves w by one worker's gradient

All use the same per-worker batch, so a step of SSGD / DC-S3GD and a round of 4 pushes of
DC-ASGD consume the same 4 x batch samples, and the paper's schedule shape: linear warm-up for
one epoch, then linear decrease to zero at the end. Prints test accuracy per epoch.
"""

import argparse
import os
import subprocess
import sys
import tempfile

import h5py

BIN = os.path.dirname(sys.executable)

RUNS = {
    "ssgd": (4, ["--algo", "ssgd", "--momentum", "0.9", "--lr", "0.1"]),
    "dcs3gd": (4, ["--algo", "dcs3gd", "--momentum", "0.9", "--lr", "0.1", "--lambda0", "0.2"]),
    "dcs3gd-nocomp": (4, ["--algo", "dcs3gd", "--momentum", "0.9", "--lr", "0.1", "--lambda0", "0"]),
    "dcasgd": (5, ["--algo", "dcasgd", "--lr", "0.1", "--dc-lambda", "0.04"]),
}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("data")
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "NUMBA_NUM_THREADS": "1"}
    sched = f"warmup-linear:warmup_epochs=1,total_epochs={args.epochs}"
    table = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, (ranks, opts) in RUNS.items():
            out = os.path.join(tmp, f"{name}.h5")
            cmd = [os.path.join(BIN, "mpiexec"), "-n", str(ranks), os.path.join(BIN, "refsgd"), "train",
                   "--model", "mnist_mlp", "--data", args.data, "--batch", str(args.batch), "--epochs",
                   str(args.epochs), "--schedule", sched, "--seed", str(args.seed), "--no-progress", "--force", "--out", out,
                   *opts]
            subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL)
            with h5py.File(out) as f:
                table[name] = (list(f["evals/test_acc"][...]), float(f.attrs["wall_seconds"]))
            print(f"{name:<14} " + " ".join(f"{100 * a:6.2f}" for a in table[name][0])
                  + f"   ({table[name][1]:.0f} s)", flush=True)
    print(f"test accuracy (%) after each of {args.epochs} epochs; mnist_mlp, 4 workers x batch {args.batch}, "
          f"schedule {sched}, seed {args.seed}")


if __name__ == "__main__":
    main()
