"""Pipe-SGD, D-Sync and PS-Sync: MPI against the serial renderings (bitwise where compression
makes the reduction order matter), the listing's relations, resume, threads, bad input."""

import os
import subprocess
import sys

import h5py
import numpy as np
import pytest
from tests.helpers import world
from tests.helpers.launch import ROOT, make_config, mpi_env, mpiexec, scaled
from tests.helpers.launch import cli as refsgd

from refsgd import datasets
from refsgd.nn import load_model
from refsgd.optim import Constant
from refsgd.serial import pipesgd as serial

COMMON = ["--model", "digits_mlp", "--batch", "8", "--seed", "4", "--lr", "0.02"]

CASES = {  # name: (options, rtol of verify: "0" where the reduction order is modelled bit for bit)
    "pipe-sgd": (["--algo", "pipe-sgd"], "1e-10"),
    "pipe-sgd-t16": (["--algo", "pipe-sgd", "--compress", "t16"], "0"),
    "pipe-sgd-q8-K3-warmup": (["--algo", "pipe-sgd", "--compress", "q8", "--dependency", "3",
                               "--warmup-epochs", "1", "--batch", "64"], "0"),
    "d-sync": (["--algo", "d-sync"], "1e-10"),
    "d-sync-t16": (["--algo", "d-sync", "--compress", "t16"], "0"),
    "d-sync-q8": (["--algo", "d-sync", "--compress", "q8"], "0"),
    "ps-sync": (["--algo", "ps-sync"], "0"),
}


@pytest.mark.world(2, 4)
@pytest.mark.parametrize("case", list(CASES))
def test_mpi_equals_serial_rendering(tmp_path, case):
    options, rtol = CASES[case]
    steps = 30 if "warmup" in case else 12   # the warm-up epoch ends at step 11 (n=2) or 5 (n=4)
    world.mpi_equals_serial(tmp_path, COMMON + options, steps, rtol=rtol)


@pytest.mark.world(2, 3)
@pytest.mark.parametrize("algo", ["pipe-sgd", "d-sync"])
def test_q8v_mpi_equals_serial_rendering_bitwise(tmp_path, algo):
    """q8v (one scale per vector): the ring's scales agreed before it and its order of partial
    sums give the serial rendering's bits at 2 and 3 ranks (3: blocks of unequal sizes)."""
    world.mpi_equals_serial(tmp_path, COMMON + ["--algo", algo, "--compress", "q8v"], 12, rtol=0)


def _cfg(algo="pipe-sgd", **kw):
    return make_config(**{**dict(algo=algo, batch=8, tau=1, seed=4, compress="none"), **kw})


def test_dependency_1_is_d_sync_one_iteration_late():
    """Pipe-SGD's w after iteration t (w[t], before its own sum is applied) is D-Sync's w after t-1."""
    net, data = load_model("digits_mlp", np.float64), datasets.load(None, np.float64)
    for compress in ("none", "t16"):
        p = serial.pipe_sgd(net, data, _cfg(dependency=1, compress=compress), Constant(0.02), 3, 8)
        d = serial.d_sync(net, data, _cfg("d-sync", compress=compress), Constant(0.02), 3, 8)
        np.testing.assert_array_equal(p["states"]["w"][1:], d["states"]["w"][:-1])
        np.testing.assert_array_equal(p["batches"], d["batches"])


def test_dependency_2_applies_the_sum_of_two_iterations_ago():
    """K = 2: w[t] = w[t-1] - gamma * g_sum[t-2]; nothing is applied at t = 0 and 1 (C1's zeros)."""
    net, data = load_model("digits_mlp", np.float64), datasets.load(None, np.float64)
    out = serial.pipe_sgd(net, data, _cfg(dependency=2), Constant(0.02), 2, 6)
    w, S = out["states"]["w"][:, 0], out["states"]["g_sum"][:, 0]   # S[t] = [g_sum[t-1], g_sum[t]]
    np.testing.assert_array_equal(w[0], out["w0"])
    np.testing.assert_array_equal(w[1], out["w0"])
    for t in range(2, 6):
        np.testing.assert_array_equal(w[t], w[t - 1] - 0.02 * S[t - 2][1])
        np.testing.assert_array_equal(S[t][0], S[t - 1][1])
    assert np.all(S[0][0] == 0)


@pytest.mark.world(2)
def test_resume_equals_an_uninterrupted_run(tmp_path):
    """pipe-sgd K=3 with t16: the checkpoint at iteration 7 holds the K sums in the pipeline."""
    tmp_path = world.shared_path(tmp_path)
    common = [*COMMON, "--algo", "pipe-sgd", "--dependency", "3", "--compress", "t16", "--dtype",
              "float64", "--iterations", "16", "--no-progress", "--log-every", "5"]
    ck = tmp_path / "ck"
    world.train(*common, "--checkpoint", str(ck), "--checkpoint-every", "7", "--out", str(tmp_path / "a.h5"), log=None)
    world.train(*common, "--resume", str(ck / "ckpt-7"), "--out", str(tmp_path / "b.h5"), log=None)
    if world.comm().Get_rank() != 0:
        return  # rank 0 checks; every rank's report says how it went (tests.helpers.world.agree)
    with h5py.File(tmp_path / "a.h5") as a, h5py.File(tmp_path / "b.h5") as b:
        np.testing.assert_array_equal(a["model"][...], b["model"][...])
        np.testing.assert_array_equal(a["iterations/loss"][...], b["iterations/loss"][...])
    net, data = load_model("digits_mlp", np.float64), datasets.load(None, np.float64)
    st = serial.pipe_sgd(net, data, _cfg(dependency=3, compress="t16"), Constant(0.02), 2, 7)["states"]
    for rank in range(2):
        with h5py.File(ck / "ckpt-7" / f"rank{rank}.h5") as f:
            np.testing.assert_array_equal(f["state/g_sum"][...], st["g_sum"][6, rank])
            np.testing.assert_array_equal(f["state/w"][...], st["w"][6, rank])


def test_too_low_thread_level_is_refused_before_the_first_collective():
    env = mpi_env(MPI4PY_RC_THREAD_LEVEL="funneled")
    r = subprocess.run(mpiexec(2) + [sys.executable, "-m", "refsgd", "train", "--algo", "pipe-sgd",
                        "--no-progress"], capture_output=True, text=True, timeout=scaled(120), cwd=ROOT, env=env)
    assert r.returncode == 2, r.stderr
    assert r.stderr.count("refsgd: error:") == 1 and "needs MPI_THREAD_MULTIPLE" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


FAIL_ON_RANK_1 = """
import sys
from mpi4py import MPI
from refsgd import cli
from refsgd.algorithms import pipesgd

mark = pipesgd._Pipeline.mark_sum
def failing(self, t):
    if MPI.COMM_WORLD.Get_rank() == 1 and t == 3:
        raise OSError("injected failure in the communication thread")
    mark(self, t)
pipesgd._Pipeline.mark_sum = failing
sys.exit(cli.main(sys.argv[1:]))
"""


def test_a_failure_in_the_communication_thread_ends_every_rank(tmp_path):
    script = tmp_path / "fail.py"
    script.write_text(FAIL_ON_RANK_1)
    r = subprocess.run(mpiexec(2) + [sys.executable, str(script), "train", "--algo", "pipe-sgd",
                        "--iterations", "200", "--no-progress"], capture_output=True, text=True, timeout=scaled(60),
                       cwd=ROOT, env=mpi_env())
    assert r.returncode == 4, r.stderr  # a rank failed (failure.EXIT_RANK)
    assert r.stderr.count("refsgd: error: rank 1: the communication thread of pipe-sgd failed: OSError: "
                          "injected failure") == 1, r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize("args,n,msg", [
    (["--algo", "ps-sync"], 1, "ps-sync needs a server and at least one worker"),
    (["--algo", "ps-sync", "--compress", "t16"], 2, "--compress does not apply to --algo ps-sync"),
    (["--algo", "pipe-sgd", "--momentum", "0.9"], 2, "--momentum does not apply to --algo pipe-sgd"),
    (["--algo", "d-sync", "--tau", "2"], 2, "takes one batch per iteration"),
    (["--algo", "d-sync", "--dependency", "2"], 2, "--dependency does not apply to --algo d-sync (--dependency applies to --algo pipe-sgd;"),
    (["--algo", "laga-sgd", "--compress", "q8"], 2, "--compress does not apply to --algo laga-sgd"),
    (["--algo", "laga-sgd", "--warmup-epochs", "1"], 2, "--warmup-epochs applies to --algo pipe-sgd, daso;"),
    (["--algo", "pipe-sgd", "--dependency", "0"], 2, "expected a positive integer"),
    (["--algo", "pipe-sgd", "--compress", "q4"], 2, "invalid choice: 'q4'"),
])
def test_bad_input(args, n, msg):
    r = refsgd("train", *args, "--no-progress", n=n, timeout=120)
    assert r.returncode == 2 and msg in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
