"""Fault injection: kill -9 of a rank, SIGTERM, and MPMD launches with one option different.

Three trials, each counted:

1. **kill -9.** A run of ``--iterations T`` with ``--checkpoint-every K`` is started under
   ``mpiexec -n P``; at a random moment (uniform in [0.5, MAX_DELAY] s after the first evaluation
   line) one random rank gets SIGKILL. Measured: the time from the kill until mpiexec has
   returned (every rank ended). Then ``latest`` must name a complete checkpoint (or none exists
   yet), and ``--resume`` from it to T must give a final model bitwise equal to an uninterrupted
   run of T iterations.
2. **SIGTERM** to every rank (as Slurm's preemption and scancel do) at a random moment: exit
   code 143, a checkpoint named in the one message, and resume from it bitwise equal to the
   uninterrupted run.
3. **MPMD.** ``mpiexec -n 1 refsgd train A : -n 1 refsgd train B`` where B differs from A in one
   option (or the content of --data, or --checkpoint given on one rank only): exit code 2, one
   message, and nothing trained (no header printed).

The methods cycle over ``--algos``. Float64 and the embedded digits data, so a trial takes a
few seconds.

    .venv/bin/python experiments/faults.py [--trials 7] [--ranks 2] [--algos ssgd,dcs3gd,...]
"""

import argparse
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import h5py
import numpy as np

from refsgd.datasets import _embedded_path

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PY = sys.executable
MPIEXEC = os.path.join(os.path.dirname(PY), "mpiexec")
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "NUMBA_NUM_THREADS": "1"}

#: per method, the options that make its run deterministic and resumable bit for bit
METHOD = {
    "ssgd": ["--momentum", "0.9"],
    "dcs3gd": ["--momentum", "0.9"],
    "laga-sgdm": ["--momentum", "0.9", "--tau", "2"],
    "pipe-sgd": ["--lr", "0.02"],
    "daso": ["--momentum", "0.9", "--ranks-per-node", "1"],
    "pp-asgd": ["--momentum", "0.9", "--lr", "0.002", "--staleness", "2"],
    "dcasgd": ["--ps-order", "round-robin"],
}


def train(ranks, algo, *extra, timeout=300):
    cmd = [MPIEXEC, "-n", str(ranks), PY, "-m", "refsgd", "train", "--algo", algo, *METHOD[algo],
           "--dtype", "float64", "--no-progress", "--log-every", "5", *extra]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT, env=ENV)


def start(ranks, algo, *extra):
    cmd = [MPIEXEC, "-n", str(ranks), PY, "-m", "refsgd", "train", "--algo", algo, *METHOD[algo],
           "--dtype", "float64", "--no-progress", "--log-every", "5", *extra]
    return subprocess.Popen(cmd, cwd=ROOT, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


def rank_pids(marker):
    """The pids of the Python ranks whose command line contains marker."""
    out = subprocess.run(["ps", "-eo", "pid=,args="], capture_output=True, text=True).stdout
    return [int(line.split()[0]) for line in out.splitlines()
            if marker in line and "-m refsgd" in line and "mpiexec" not in line and "hydra" not in line]


def wait_for_training(p):
    line = ""
    while "test acc" not in line:
        line = p.stdout.readline()
        if not line:
            raise RuntimeError("the run ended before its first evaluation: " + p.stderr.read()[-2000:])


def model(path):
    with h5py.File(path) as f:
        return f["model"][...]


def latest(ck):
    try:
        with open(os.path.join(ck, "latest")) as f:
            name = f.read().strip()
    except OSError:
        return None
    return name if os.path.isfile(os.path.join(ck, name, "meta.json")) else "BROKEN"


def kill9_trial(work, algo, ranks, total, every, reference, rng, max_delay):
    ck = os.path.join(work, "ck")
    shutil.rmtree(ck, ignore_errors=True)
    p = start(ranks, algo, "--iterations", str(total), "--checkpoint", ck, "--checkpoint-every", str(every))
    wait_for_training(p)
    time.sleep(rng.uniform(0.5, max_delay))
    pids = rank_pids(ck)
    if not pids or p.poll() is not None:
        p.communicate()
        return dict(algo=algo, outcome="finished before the kill")
    victim = rng.choice(pids)
    t0 = time.monotonic()
    os.kill(victim, signal.SIGKILL)
    try:
        p.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        return dict(algo=algo, outcome="HANG")
    ended = time.monotonic() - t0
    left = rank_pids(ck)
    name = latest(ck)
    out = os.path.join(work, "resumed.h5")
    args = ["--iterations", str(total), "--out", out, "--force"]
    if name == "BROKEN":
        return dict(algo=algo, outcome="latest BROKEN", ended_s=ended)
    if name is not None:
        args += ["--resume", ck]
    r = train(ranks, algo, *args)
    same = r.returncode == 0 and np.array_equal(model(out), reference)
    return dict(algo=algo, outcome="ok" if same and not left else "MISMATCH", ended_s=ended, rc=p.returncode,
                resumed_from=name or "start", ranks_left=len(left))


def sigterm_trial(work, algo, ranks, total, reference, rng, max_delay):
    ck = os.path.join(work, "ck")
    shutil.rmtree(ck, ignore_errors=True)
    p = start(ranks, algo, "--iterations", str(total), "--checkpoint", ck, "--checkpoint-every", str(total))
    wait_for_training(p)
    time.sleep(rng.uniform(0.2, max_delay))
    if p.poll() is not None:
        p.communicate()
        return dict(algo=algo, outcome="finished before the signal")
    t0 = time.monotonic()
    os.killpg(p.pid, signal.SIGTERM)
    try:
        _, err = p.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        return dict(algo=algo, outcome="HANG")
    ended = time.monotonic() - t0
    name = latest(ck)
    messages = [ln for ln in err.splitlines() if ln.startswith("refsgd")]
    if name == f"ckpt-{total}" and not messages:
        # the signal came after the last iteration (the final checkpoint is written): mpiexec, which
        # got the signal too, reports the ranks it ended in MPI_Finalize
        return dict(algo=algo, outcome="finished before the signal", rc=p.returncode)
    if p.returncode != 143 or name in (None, "BROKEN") or len(messages) != 1 or name not in messages[0]:
        return dict(algo=algo, outcome=f"BAD (exit {p.returncode}, latest {name}, {messages})")
    out = os.path.join(work, "resumed.h5")
    r = train(ranks, algo, "--iterations", str(total), "--resume", ck, "--out", out, "--force")
    same = r.returncode == 0 and np.array_equal(model(out), reference)
    return dict(algo=algo, outcome="ok" if same else "MISMATCH", ended_s=ended, checkpoint=name)


def mpmd_cases(work):
    a, b = os.path.join(work, "a.h5"), os.path.join(work, "b.h5")
    shutil.copy(_embedded_path(), a)
    shutil.copy(_embedded_path(), b)
    with h5py.File(b, "r+") as f:
        y = f["train/labels"][...]
        y[0] = (y[0] + 1) % 10
        f["train/labels"][...] = y
    ck = os.path.join(work, "mpmd-ck")
    return [
        ("--lr", ["--lr", "0.2"]), ("--seed", ["--seed", "1"]), ("--batch", ["--batch", "16"]),
        ("--momentum", ["--momentum", "0.5"]), ("--nesterov", ["--momentum", "0.9", "--nesterov"]),
        ("--weight-decay", ["--weight-decay", "1e-4"]), ("--algo", ["--algo", "ssgd-opt"]),
        ("--model (same size? no)", ["--model", "digits_tiny"]), ("--model", ["--model", "digits_cnn"]),
        ("--dtype", ["--dtype", "float64"]), ("--tau", ["--tau", "2"]), ("--schedule", ["--schedule", "plateau"]),
        ("--epochs", ["--epochs", "2"]), ("--log-every", ["--log-every", "3"]),
        ("--data content", ["--data", b]), ("--checkpoint on one rank", ["--checkpoint", ck, "--checkpoint-every", "2"]),
        ("--link", ["--link", "50,10"]), ("--compress", ["--compress", "fp16"]),
        ("a bad flag on one rank", ["--lr", "abc"]),
    ], a


def mpmd_trial(work):
    cases, a = mpmd_cases(work)
    rows = []
    base = ["train", "--iterations", "10", "--no-progress", "--data", a]
    for what, extra in cases:
        cmd = [MPIEXEC, "-n", "1", PY, "-m", "refsgd", *base, ":", "-n", "1", PY, "-m", "refsgd", *base, *extra]
        t0 = time.monotonic()
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=ROOT, env=ENV)
        messages = [ln for ln in r.stderr.splitlines() if ln.startswith("refsgd")]
        ok = r.returncode == 2 and len(messages) == 1 and "refsgd 0." not in r.stdout
        rows.append(dict(what=what, outcome="ok" if ok else f"BAD (exit {r.returncode})", seconds=time.monotonic() - t0,
                         message=messages[0] if messages else r.stderr[-200:]))
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=7, help="kill -9 trials, and as many SIGTERM trials")
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--iterations", type=int, default=20000, help="length of each run")
    ap.add_argument("--every", type=int, default=1000, help="--checkpoint-every of the kill -9 runs")
    ap.add_argument("--max-delay", type=float, default=5.0, help="latest moment of a fault, s after training starts")
    ap.add_argument("--algos", default="ssgd,dcs3gd,laga-sgdm,pipe-sgd,daso,pp-asgd,dcasgd")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    algos = args.algos.split(",")
    work = tempfile.mkdtemp(prefix="refsgd-faults-")
    print(f"{args.ranks} ranks, {args.iterations} iterations per run, digits_mlp float64; work folder {work}")
    references = {}
    for algo in algos:
        out = os.path.join(work, f"ref-{algo}.h5")
        r = train(args.ranks, algo, "--iterations", str(args.iterations), "--out", out)
        if r.returncode != 0:
            sys.exit(f"reference run of {algo} failed: {r.stderr[-2000:]}")
        references[algo] = model(out)

    def show(rows, what):
        for row in rows:
            print("   ", "  ".join(f"{k} {v:.2f}" if isinstance(v, float) else f"{k} {v}" for k, v in row.items()))
        ended = [r["ended_s"] for r in rows if "ended_s" in r]
        print(f"    ok {sum(r['outcome'] == 'ok' for r in rows)} of {len(rows)} ({what}); every rank ended within "
              f"{max(ended):.2f} s (median {np.median(ended):.2f} s)" if ended else "    no fault happened")

    def trial(fn, i, *extra):
        algo = algos[i % len(algos)]
        return fn(work, algo, args.ranks, args.iterations, *extra, references[algo], rng, args.max_delay)

    print("\n1. kill -9 of one random rank at a random moment")
    show([trial(kill9_trial, i, args.every) for i in range(args.trials)], "resume from latest bitwise equal")
    print("\n2. SIGTERM to every rank at a random moment")
    show([trial(sigterm_trial, i) for i in range(args.trials)],
         "exit 143, one message naming the checkpoint, resume bitwise equal")

    print("\n3. MPMD launch, rank 1 with one option different")
    rows = mpmd_trial(work)
    for row in rows:
        msg = row["message"].split("the same run: ")[-1]
        print(f"    {row['what']:<28} {row['outcome']:<5} {row['seconds']:.1f} s  {msg[:100]}")
    print(f"    stopped before training: {sum(r['outcome'] == 'ok' for r in rows)} of {len(rows)}")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
