"""Accuracy of DC-S3GD against SSGD and DC-ASGD (Rigazzi 2019's claim: DC-S3GD reaches SSGD's
accuracy), on MNIST with mnist_mlp and 4 workers.

    python experiments/dc_accuracy.py MNIST.h5 [--epochs 5] [--batch 32]

MNIST.h5 comes from `refsgd data convert mnist DIR MNIST.h5`. Runs (each `mpiexec refsgd train
... --out`, test accuracy evaluated after every epoch on the average / server model):

  ssgd             4 ranks, momentum 0.9 (mean gradient of 4 x batch)
  dcs3gd           4 ranks, momentum 0.9, lambda_0 = 0.2 (eq. 17)
  dcs3gd-nocomp    the same with lambda_0 = 0 (no delay compensation)
  dcs3gd-tensor    lambda_0 = 0.2 with eq. 17's norms per tensor (--lambda-norm tensor)
  dcasgd           5 ranks = 1 server + 4 workers, constant lambda 0.04, no momentum
                   (the listing has none); each push moves w by one worker's gradient

All use the same per-worker batch, so a step of SSGD / DC-S3GD and a round of 4 pushes of
DC-ASGD consume the same 4 x batch samples, and the schedule as the paper ran it (section IV-A):
a linear warm-up with the slope of a warm-up planned over half the run towards --peak (0.3),
stopped at the plateau after a sixth of the run (15 of 90 epochs in the paper), so the lr
reaches a third of the planned peak (0.1), then a linear decrease to zero at the end:
``warmup-linear:warmup_epochs=E/2,warmup_stop_epochs=E/6,total_epochs=E``. Prints test accuracy
per epoch.
"""

import argparse
import os
import subprocess
import sys
import tempfile

import h5py

BIN = os.path.dirname(sys.executable)

RUNS = {
    "ssgd": (4, ["--algo", "ssgd", "--momentum", "0.9"]),
    "dcs3gd": (4, ["--algo", "dcs3gd", "--momentum", "0.9", "--lambda0", "0.2"]),
    "dcs3gd-nocomp": (4, ["--algo", "dcs3gd", "--momentum", "0.9", "--lambda0", "0"]),
    "dcs3gd-tensor": (4, ["--algo", "dcs3gd", "--momentum", "0.9", "--lambda0", "0.2", "--lambda-norm", "tensor"]),
    "dcasgd": (5, ["--algo", "dcasgd", "--dc-lambda", "0.04"]),
}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("data")
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--peak", type=float, default=0.3, help="the planned peak of the warm-up (reached: a third)")
    args = p.parse_args()
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "NUMBA_NUM_THREADS": "1"}
    E = args.epochs
    sched = f"warmup-linear:warmup_epochs={E / 2:g},warmup_stop_epochs={E / 6:.6g},total_epochs={E}"
    table = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, (ranks, opts) in RUNS.items():
            out = os.path.join(tmp, f"{name}.h5")
            cmd = [os.path.join(BIN, "mpiexec"), "-n", str(ranks), os.path.join(BIN, "refsgd"), "train",
                   "--model", "mnist_mlp", "--data", args.data, "--batch", str(args.batch), "--epochs",
                   str(args.epochs), "--lr", str(args.peak), "--schedule", sched, "--seed", str(args.seed), "--no-progress", "--force", "--out", out,
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
