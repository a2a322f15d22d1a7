"""Idle time of SSGD, SSGD-OPT and LAGA-SGD against the LAGA paper's model (its Figure 4, eq. 3, 4, 6).

Run (from the repository root, after `refsgd data convert mnist <IDX folder> /tmp/mnist.h5`)::

    .venv/bin/python experiments/laga_idle.py /tmp/mnist.h5            # 4 ranks, then 2 ranks
    .venv/bin/python experiments/laga_idle.py /tmp/mnist.h5 --ranks 4 --iterations 80 --ratio 2

For each world size P (default 4 and 2) it

1. measures T_comp, one micro-batch's forward+backward of mnist_mlp (float32, --batch), as the
   mean compute time per micro-batch of a short ssgd run at P ranks without a link (so it
   includes the time-slicing of P ranks on this machine's cores), and chooses an emulated link (``--link LATENCY_US,GBIT_S``, latency
   fixed at --latency-us) whose Ring-AllReduce time for the model's gradient (Link.time) is
   --ratio x T_comp;
2. runs ``mpiexec -n P refsgd train --algo A --tau TAU --link ... --out run.h5`` for A in ssgd,
   ssgd-opt, laga-sgd and TAU in 1, 2, 4 (--iterations each; the first --skip are dropped), and
   ssgd-opt and laga-sgd once more with ``--poll`` (the requests in flight are tested between
   layers, so that MPICH, which has no asynchronous progress thread by default, moves their data
   during compute);
3. reads /iterations/idle, /iterations/compute and /iterations/wall (mean over ranks and
   iterations) and prints, per row, the measured idle next to the paper's prediction
   psi(tau) x (tau*T_comp + T_comm), with

       eq. 3  SSGD      psi = T_comm / (tau*T_comp + T_comm)             -> idle = T_comm
       eq. 4  SSGD-OPT  psi = max(0, T_comm - T_bwd) / (tau*T_comp + T_comm)
       eq. 6  LAGA      psi = max(0, T_comm - tau*T_comp) / (tau*T_comp + T_comm)

   T_comp in the prediction is the one measured *in that run* (mean compute per micro-batch,
   which includes time-slicing when ranks > cores), T_comm is the link model's time (not
   measured), and T_bwd is *estimated* as 2/3 of T_comp (backward ~ twice the forward's FLOPs).

Everything here is measured on an EMULATED link (refsgd/comm/link.py): the all-reduce is held
back to the model's time; the machine's own shared-memory transfer comes on top where MPI only
progresses inside MPI calls (no asynchronous progress thread). The training's numbers are real.
With more ranks than cores, ranks are time-sliced: a rank's compute time stretches, and a rank
that is waiting for a peer that is descheduled records idle time the model does not predict.
"""

import argparse
import os
import subprocess
import sys
import tempfile

import h5py
import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VENV_BIN = os.path.dirname(sys.executable)
ONE_THREAD = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "NUMBA_NUM_THREADS": "1",
              "MKL_NUM_THREADS": "1"}


def measure_t_comp(P, args, folder):
    """Mean compute seconds per micro-batch of a short run of ssgd at P ranks without a link (the
    same processes, data stream and oversubscription as the measured runs), and the gradient's
    size in bytes."""
    idle, compute, wall = run(P, "ssgd", 1, None, args, folder)
    from refsgd.nn import load_model
    return compute, load_model("mnist_mlp", dtype=np.float32).num_params * 4


def run(P, algo, tau, link, args, folder, poll=False):
    out = os.path.join(folder, f"{algo}-tau{tau}-P{P}{'-poll' if poll else ''}.h5")
    cmd = [os.path.join(VENV_BIN, "mpiexec"), "-n", str(P), sys.executable, "-m", "refsgd", "train",
           "--algo", algo, "--tau", str(tau), "--model", "mnist_mlp", "--data", args.data, "--batch", str(args.batch),
           "--lr", "0.01", "--iterations", str(args.iterations), "--no-progress", "--log-every", "100000",
           "--force", "--out", out] + (["--poll"] if poll else []) + (["--link", link] if link else [])
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env={**os.environ, **ONE_THREAD},
                       timeout=600)
    if r.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{r.stderr[-3000:]}")
    with h5py.File(out) as f:
        s = slice(args.skip, None)
        idle = float(f["iterations/idle"][:, s].mean())
        compute = float(f["iterations/compute"][:, s].mean())
        wall = float(f["iterations/wall"][:, s].mean())
        assert f.attrs["link_emulated"] == bool(link)
    return idle, compute, wall


def predict(algo, tau, t_comp, t_comm, t_bwd):
    """(psi, predicted idle per iteration = psi * (tau*T_comp + T_comm)) of eq. 3, 4, 6."""
    denom = tau * t_comp + t_comm
    num = {"ssgd": t_comm, "ssgd-opt": max(0.0, t_comm - t_bwd), "laga-sgd": max(0.0, t_comm - tau * t_comp)}[algo]
    return num / denom, num


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("data", help="MNIST in refsgd's HDF5 layout (refsgd data convert mnist ...)")
    ap.add_argument("--ranks", type=int, nargs="+", default=[4, 2])
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--iterations", type=int, default=60)
    ap.add_argument("--skip", type=int, default=10, help="first iterations dropped from the means")
    ap.add_argument("--ratio", type=float, default=2.0, help="T_comm / T_comp of the emulated link")
    ap.add_argument("--latency-us", type=float, default=50.0)
    ap.add_argument("--link", default=None, metavar="LATENCY_US,GBIT_S",
                    help="use this link for every world size instead of choosing one from --ratio")
    args = ap.parse_args()

    from refsgd.comm.link import Link
    with tempfile.TemporaryDirectory() as folder:
        for P in args.ranks:
            t_comp0, nbytes = measure_t_comp(P, args, folder)
            print(f"\nmnist_mlp, float32, micro-batch {args.batch}, {P} ranks on {os.cpu_count()} CPU cores: "
                  f"T_comp = {1e3 * t_comp0:.2f} ms (mean compute per micro-batch of ssgd without a link); "
                  f"gradient {nbytes / 1e6:.2f} MB")
            # bandwidth such that Link.time(nbytes, P) = ratio * T_comp
            link = Link.parse(args.link) if args.link else Link.for_time(args.ratio * t_comp0, nbytes, P,
                                                                          args.latency_us)
            t_comm = link.time(nbytes, P)
            spec = f"{link.latency_us:g},{link.gbit_s:g}"
            print(f"{P} ranks, --link {spec}: {link}\n  T_comm = Link.time = {1e3 * t_comm:.2f} ms "
                  f"(= {t_comm / t_comp0:.2f} x T_comp); T_bwd estimated as 2/3 T_comp of each run; "
                  f"{args.iterations} iterations, first {args.skip} dropped; times in ms per iteration")
            print(f"  {'algo':<16} {'tau':>3} | {'T_comp':>7} {'compute':>8} {'wall':>8} | {'idle':>7} | "
                  f"{'eq.':>4} {'psi':>5} {'pred.':>7} | {'idle/pred':>9}")
            for tau in (1, 2, 4):
                for algo, poll in (("ssgd", False), ("ssgd-opt", False), ("ssgd-opt", True), ("laga-sgd", False),
                                   ("laga-sgd", True)):
                    idle, compute, wall = run(P, algo, tau, spec, args, folder, poll)
                    t_comp = compute / tau
                    psi, pred = predict(algo, tau, t_comp, t_comm, 2 * t_comp / 3)
                    eq = {"ssgd": "(3)", "ssgd-opt": "(4)", "laga-sgd": "(6)"}[algo]
                    ratio = f"{idle / pred:9.2f}" if pred > 0 else f"{'(0)':>9}"
                    name = algo + (" --poll" if poll else "")
                    print(f"  {name:<16} {tau:>3} | {1e3 * t_comp:7.2f} {1e3 * compute:8.2f} {1e3 * wall:8.2f} | "
                          f"{1e3 * idle:7.2f} | {eq:>4} {psi:5.2f} {1e3 * pred:7.2f} | {ratio}", flush=True)


if __name__ == "__main__":
    main()
