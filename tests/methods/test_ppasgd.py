"""PP-ASGD and naive ASGD: the deterministic mode against the serial rendering, eq. 2, resume, the
threaded mode's measured staleness, a failing gradient thread, bad input."""

import os
import re
import subprocess
import sys

import h5py
import numpy as np
import pytest
from tests.helpers import world
from tests.helpers.launch import ROOT, mpi_env, mpiexec, scaled
from tests.helpers.launch import cli as refsgd

from refsgd.algorithms.ppasgd import horizon, randpick

COMMON = ["--model", "digits_mlp", "--batch", "8", "--seed", "4", "--momentum", "0.9", "--lr", "0.001"]


@pytest.mark.world(2, 4)
@pytest.mark.parametrize("algo", ["pp-asgd", "asgd"])
def test_deterministic_mode_equals_serial_rendering(tmp_path, algo):
    """Two processes x two threads: every sum has two terms, so bit for bit; 4 x 3: to rounding."""
    threads, rtol = {2: (2, 0), 4: (3, 1e-10)}[world.comm().Get_size()]
    world.mpi_equals_serial(tmp_path, COMMON + ["--algo", algo, "--staleness", "3", "--threads", str(threads)],
                            12, rtol=rtol)


@pytest.mark.world(2)
def test_prediction_and_staleness_in_the_trace(tmp_path):
    """w^ = w + M (mu + ... + mu^(S+1)) for PP-ASGD, w^ = w for ASGD; update t's batches are the
    documented randpick stream; updates 0..S all compute at w_0."""
    tmp_path = world.shared_path(tmp_path)
    for algo in ("pp-asgd", "asgd"):
        world.train(*COMMON, "--algo", algo, "--staleness", "2", "--dtype", "float64", "--iterations", "6",
                    "--no-progress", "--trace", str(tmp_path / f"{algo}.h5"), log=None)
    if world.comm().Get_rank() != 0:
        return  # rank 0 checks; every rank's report says how it went (tests.helpers.world.agree)
    with h5py.File(tmp_path / "pp-asgd.h5") as f:
        w, M, w_hat, batches = f["state/w"][...], f["state/M"][...], f["state/w_hat"][...], f["batches"][...]
    np.testing.assert_allclose(w_hat, w + (0.9 + 0.81 + 0.729) * M, rtol=1e-12, atol=1e-15)
    assert horizon(0.9, 0) == 0.9   # S = 0 is Nesterov's w + mu M (SSGD-NAG)
    np.testing.assert_array_equal(batches[4, 1, 0], randpick(4, 1, 0, 4, 1500, 8))
    with h5py.File(tmp_path / "asgd.h5") as f:
        np.testing.assert_array_equal(f["state/w_hat"][...], f["state/w"][...])
        loss = f["loss"][...]
    # updates 0, 1 and 2 compute at w_0 (S = 2): the ASGD and PP-ASGD losses agree there, not later
    with h5py.File(tmp_path / "pp-asgd.h5") as f:
        pp_loss = f["loss"][...]
    np.testing.assert_array_equal(loss[:3], pp_loss[:3])
    assert not np.array_equal(loss[4:], pp_loss[4:])


@pytest.mark.world(2)
def test_resume_in_the_deterministic_mode_is_bitwise(tmp_path):
    tmp_path = world.shared_path(tmp_path)
    common = [*COMMON, "--algo", "pp-asgd", "--staleness", "3", "--dtype", "float64", "--iterations", "14",
              "--no-progress"]
    ck = tmp_path / "ck"
    world.train(*common, "--checkpoint", str(ck), "--checkpoint-every", "5", "--out", str(tmp_path / "a.h5"), log=None)
    world.train(*common, "--resume", str(ck / "ckpt-5"), "--out", str(tmp_path / "b.h5"), log=None)
    if world.comm().Get_rank() != 0:
        return  # rank 0 checks; every rank's report says how it went (tests.helpers.world.agree)
    with h5py.File(tmp_path / "a.h5") as a, h5py.File(tmp_path / "b.h5") as b:
        np.testing.assert_array_equal(a["model"][...], b["model"][...])
        np.testing.assert_array_equal(a["iterations/loss"][...], b["iterations/loss"][...])


def test_threaded_mode_measures_staleness(tmp_path):
    """Timing decides the numbers; their relations do not."""
    r = refsgd("train", "--algo", "pp-asgd", "--threads", "2", "--momentum", "0.9", "--lr", "0.00001",
               "--batch", "16", "--iterations", "40", "--no-progress", "--out", str(tmp_path / "m.h5"), n=2)
    assert r.returncode == 0, r.stderr
    assert "S_bar" not in r.stderr
    with h5py.File(tmp_path / "m.h5") as f:
        rec = {k: f["iterations"][k][...] for k in ("S", "S_bar", "staleness", "gradients")}
    np.testing.assert_array_equal(rec["S"], np.floor(rec["S_bar"]))
    for k in rec:
        np.testing.assert_array_equal(rec[k][0], rec[k][1])  # every rank agrees (all-reduced)
    assert (rec["gradients"] >= 2).all()                   # each update: at least one per process
    assert (rec["staleness"] >= 0).all()
    # S_bar is the running mean of the per-update staleness, weighted by the gradients consumed
    g, s = rec["gradients"][0], rec["staleness"][0]
    np.testing.assert_allclose(rec["S_bar"][0], np.cumsum(g * s) / np.cumsum(g), rtol=1e-12)


def test_threaded_default_run_is_not_starved(tmp_path):
    """The default command (digits_mlp, 10 epochs of gradients) on 2 processes: each update
    consumes at most one sub-batch per gradient thread of each process, so the 1,840 gradients
    take at least 1,840 / (2 x 2) = 460 updates whatever the load, and the model learns. Before,
    the gradient threads computed the whole budget while the update threads did 1 to 5 updates
    (their all-reduces waited for CPU behind the gradient threads) and the run ended near 10 %."""
    r = refsgd("train", "--algo", "pp-asgd", "--no-progress", "--out", str(tmp_path / "m.h5"), n=2, timeout=600)
    assert r.returncode == 0, r.stderr
    with h5py.File(tmp_path / "m.h5") as f:
        grads = f["iterations"]["gradients"][...][0]
    assert grads.sum() == 1840                        # 10 epochs x 184 sub-batch gradients
    assert grads.max() <= 4                           # G = 2 threads x 2 processes
    assert len(grads) >= 460
    m = re.search(r"test accuracy ([0-9.]+)%", r.stdout + r.stderr)
    assert m and float(m.group(1)) > 75.0, r.stdout[-2000:]


FAIL_ON_RANK_1 = """
import sys
from mpi4py import MPI
from refsgd import cli
from refsgd.run import Run

grad_at = Run.grad_at
calls = [0]
def failing(self, w, g, idx, **kw):
    calls[0] += 1
    if MPI.COMM_WORLD.Get_rank() == 1 and calls[0] == 7:
        raise OSError("injected failure in a gradient thread")
    return grad_at(self, w, g, idx, **kw)
Run.grad_at = failing
sys.exit(cli.main(sys.argv[1:]))
"""


@pytest.mark.parametrize("mode", [[], ["--staleness", "2"]])
def test_a_failing_gradient_thread_ends_every_rank(tmp_path, mode):
    script = tmp_path / "fail.py"
    script.write_text(FAIL_ON_RANK_1)
    r = subprocess.run(mpiexec(2) + [sys.executable, str(script), "train", "--algo", "pp-asgd", *mode,
                        "--iterations", "300", "--lr", "0.00001", "--no-progress"], capture_output=True, text=True,
                       timeout=scaled(90), cwd=ROOT, env=mpi_env())
    assert r.returncode == 4, r.stderr  # a rank failed (failure.EXIT_RANK)
    assert r.stderr.count("refsgd: error: rank 1:") == 1 and "injected failure in a gradient thread" in r.stderr, \
        r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize("args,msg", [
    (["train", "--algo", "pp-asgd", "--tau", "2"], "--tau does not apply (use --threads)"),
    (["train", "--algo", "asgd", "--nesterov"], "--nesterov does not apply to --algo asgd"),
    (["train", "--algo", "ssgd", "--threads", "2"], "--threads applies to --algo ssgd-nag, pp-asgd, asgd;"),
    (["train", "--algo", "ssgd-nag", "--threads", "2", "--tau", "3"], "--threads 2 and --tau 3: ssgd-nag computes"),
    (["golden", "--algo", "pp-asgd", "--workers", "2", "--steps", "2", "--out", "OUT"],
     "give --staleness S"),
])
def test_bad_input(args, msg, tmp_path):
    args = [str(tmp_path / "x.h5") if a == "OUT" else a for a in args]  # never a file of the machine's
    r = refsgd(*args, "--iterations", "2", "--no-progress", n=2) if args[0] == "train" else refsgd(*args)
    assert r.returncode == 2 and msg in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
