"""LAGA-SGD, LAGA-SGDM and LAGA-SGDN (refsgd/algorithms/laga.py): in-process in the world sessions
(tests.helpers.world) and as a user runs them (mpiexec).

* the MPI trace at 2 and 4 ranks equals the serial rendering (float64, rtol 1e-10), tau 1 and 3;
* without --trace (the all-reduce really overlaps the next iteration) the final model is the same;
* on one rank, LAGA-SGD with tau = 1 is SGD with a one-step lag, computed here with the network;
* the first update applies nothing; a resumed run equals an uninterrupted one;
* options that LAGA's listings have no place for are refused with one clear message.
"""

import os
import subprocess
import sys

import h5py
import numpy as np
import pytest
from tests.helpers import world
from tests.helpers.launch import ROOT, mpi_env, mpiexec, scaled, verify_mpi_against_serial

from refsgd import datasets
from refsgd.nn import load_model

ALGOS = ["laga-sgd", "laga-sgdm", "laga-sgdn"]
MODEL = "digits_mlp"


def refsgd(*args, n=None, timeout=120):
    cmd = [sys.executable, "-m", "refsgd", *args]
    if n is not None:
        cmd = mpiexec(n) + cmd
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=scaled(timeout), cwd=ROOT,
                       env=mpi_env())
    return r


def options(algo, tau, *extra):
    opts = ["--algo", algo, "--model", MODEL, "--batch", "8", "--seed", "5", "--tau", str(tau), "--lr", "0.1"]
    if algo != "laga-sgd":
        opts += ["--momentum", "0.9"]
    return opts + list(extra)


def states(path):
    with h5py.File(path) as f:
        return {k: f["state"][k][...] for k in f["state"]}, f["w0"][...]


def serial(algo, common, n, T):
    """The serial rendering in this process (no MPI), as `refsgd golden` would run it."""
    from refsgd.cli import build_parser
    from refsgd.cli.cmdoptions import config_of
    from refsgd.optim import parse_schedule
    from refsgd.options import resolve
    from refsgd.serial import rendering
    args = build_parser().parse_args(["golden", *common, "--workers", str(n), "--steps", str(T), "--out", "-"])
    cfg = resolve(config_of(args, leave=("out", "force")))
    net = load_model(cfg.model, dtype=np.float64)
    data = datasets.load(None, dtype=np.float64)
    schedule = parse_schedule(cfg.schedule, cfg.lr, len(data.y_train) // (n * cfg.batch * cfg.tau))
    return rendering(algo)(net, data, cfg, schedule, n, T)


@pytest.mark.world(2, 4)
@pytest.mark.parametrize("tau", [1, 3])
@pytest.mark.parametrize("algo", ALGOS)
def test_mpi_trace_equals_the_serial_rendering(tmp_path, algo, tau):
    common, T, n = options(algo, tau), 8, world.comm().Get_size()
    if (algo, tau, n) == ("laga-sgdn", 3, 2):
        common += ["--weight-decay", "0.01", "--schedule", "warmup-linear:warmup_epochs=1,total_epochs=2"]
    tmp_path = world.shared_path(tmp_path)
    world.train(*common, "--dtype", "float64", "--iterations", str(T), "--no-progress",
                "--trace", str(tmp_path / "mpi.h5"))
    if world.comm().Get_rank() != 0:
        return  # rank 0 checks; every rank's report says how it went (tests.helpers.world.agree)
    st, w0 = states(tmp_path / "mpi.h5")
    ref = serial(algo, common, n, T)
    model = "y" if algo == "laga-sgdn" else "x"
    expected = ["x", "g"] if algo == "laga-sgd" else [model, "m", "g"]
    assert list(ref["states"]) == expected and sorted(st) == sorted(expected)
    with h5py.File(tmp_path / "mpi.h5") as f:
        np.testing.assert_array_equal(f["batches"][...], ref["batches"])
        np.testing.assert_allclose(f["loss"][...], ref["loss"], rtol=1e-10, atol=1e-12)
    for name in expected:
        np.testing.assert_allclose(st[name], ref["states"][name], rtol=1e-10, atol=1e-12, err_msg=name)
    # every worker holds the same model; it moves from the second step on
    np.testing.assert_array_equal(st[model], st[model][:, :1].repeat(n, axis=1))
    assert np.abs(st[model][-1, 0] - w0).max() > 1e-3
    if "--weight-decay" not in common:
        # the first update applies nothing: x^1 = x^0 (g^{-1} = 0, m^0 = 0), while g^0 is in flight
        np.testing.assert_array_equal(st[model][0], np.tile(w0, (n, 1)))
        assert np.abs(st["g"][0]).max() > 0 and np.abs(st[model][1, 0] - w0).max() > 1e-4
        if "m" in st:
            np.testing.assert_array_equal(st["m"][0], 0)


def test_cli_train_trace_golden_verify_end_to_end(tmp_path):
    """`refsgd train --trace`, `refsgd golden`, `refsgd verify` as a user runs them, at 4 ranks."""
    n, T, common = 4, 8, options("laga-sgdn", 3)
    out = verify_mpi_against_serial(tmp_path, common, n, T)
    assert f"OK: {T} steps x {n} workers agree (state y, m, g and loss" in out


@pytest.mark.world(4)
@pytest.mark.parametrize("algo", ALGOS)
def test_overlapped_run_ends_at_the_serial_model(tmp_path, algo):
    """Without --trace the all-reduce of step t is in flight during step t+1's micro-batches (two
    alternating send buffers); the final model must still be the serial rendering's."""
    n, T, common = 4, 8, options(algo, 3)
    tmp_path = world.shared_path(tmp_path)
    world.train(*common, "--dtype", "float64", "--iterations", str(T), "--no-progress",
                "--log-every", "3", "--out", str(tmp_path / "run.h5"))
    if world.comm().Get_rank() != 0:
        return  # rank 0 checks; every rank's report says how it went (tests.helpers.world.agree)
    ref = serial(algo, common, n, T)
    with h5py.File(tmp_path / "run.h5") as f:
        model = f["model"][...]
        assert f["iterations/compute"].shape == (n, T)
    np.testing.assert_allclose(model, ref["states"]["y" if algo == "laga-sgdn" else "x"][-1, 0],
                               rtol=1e-10, atol=1e-12)


def _lagged_sgd_by_hand(T, lr, batch, seed):
    """One worker, tau = 1: x^{t+1} = x^t - lr * grad F(x^{t-1}; xi^{t-1}), g^{-1} = 0."""
    from refsgd.datasets import epoch_batches
    net = load_model(MODEL, dtype=np.float64)
    data = datasets.load(None, dtype=np.float64)
    n = len(data.y_train)
    nb = n // batch
    x = net.init_params(seed)
    xs, g_prev, g = [], np.zeros_like(x), np.empty_like(x)
    for t in range(T):
        idx = epoch_batches(seed, t // nb, 0, 1, batch, n)[t % nb]
        net.loss_and_grad(x, data.x_train[idx], data.y_train[idx], out=g)  # at x^t, applied at t+1
        x = x - lr * g_prev
        g_prev = g.copy()
        xs.append(x)
    return np.array(xs)


@pytest.mark.world(1)
def test_one_rank_laga_sgd_is_sgd_with_a_one_step_lag(tmp_path):
    T = 8
    world.train(*options("laga-sgd", 1), "--dtype", "float64", "--iterations", str(T), "--no-progress",
                "--trace", str(tmp_path / "t.h5"))
    expected = _lagged_sgd_by_hand(T, lr=0.1, batch=8, seed=5)
    st, w0 = states(tmp_path / "t.h5")
    np.testing.assert_allclose(st["x"][:, 0], expected, rtol=1e-12, atol=1e-14)
    # and it is not plain SGD: the step of t = 1 uses the gradient at x^0, not at x^1
    assert np.abs(expected[1] - expected[0]).max() > 1e-4


@pytest.mark.world(1)
@pytest.mark.parametrize("algo", ["laga-sgd", "laga-sgdn"])
def test_with_weight_decay_the_first_update_is_the_decay_alone(tmp_path, algo):
    """The authors' code takes an optimizer step on zeroed gradients: x^1 = x^0 - eta*wd*x^0
    (LAGA-SGDN also adds gamma*m^0 = gamma*wd*x^0)."""
    world.train(*options(algo, 2), "--weight-decay", "0.01", "--dtype", "float64", "--iterations", "1",
                "--no-progress", "--trace", str(tmp_path / "wd.h5"))
    st, w0 = states(tmp_path / "wd.h5")
    gamma = 0.9 if algo == "laga-sgdn" else 0.0
    model = "y" if algo == "laga-sgdn" else "x"
    np.testing.assert_allclose(st[model][0, 0], w0 - 0.1 * (1 + gamma) * 0.01 * w0, rtol=1e-14, atol=1e-16)
    assert np.abs(st[model][0, 0] - w0).max() > 1e-5


@pytest.mark.world(2)
def test_resume_equals_an_uninterrupted_run(tmp_path):
    """laga-sgdn, checkpoint at iteration 7 while the all-reduce of step 6 is in flight."""
    tmp_path = world.shared_path(tmp_path)
    common = [*options("laga-sgdn", 2), "--dtype", "float64", "--iterations", "16", "--no-progress",
              "--log-every", "5"]
    ck, lines = tmp_path / "ck", []
    world.train(*common, "--checkpoint", str(ck), "--checkpoint-every", "7", "--out", str(tmp_path / "a.h5"), log=None)
    world.train(*common, "--resume", str(ck / "ckpt-7"), "--out", str(tmp_path / "b.h5"), log=lines.append)
    if world.comm().Get_rank() != 0:
        return  # rank 0 checks; every rank's report says how it went (tests.helpers.world.agree)
    assert sorted(os.listdir(ck)) == ["ckpt-14", "ckpt-16", "ckpt-7", "latest"]  # every 7 and the last
    assert any("at iteration 7" in line for line in lines), lines
    with h5py.File(tmp_path / "a.h5") as a, h5py.File(tmp_path / "b.h5") as b:
        np.testing.assert_array_equal(a["model"][...], b["model"][...])
        np.testing.assert_array_equal(a["iterations/loss"][...], b["iterations/loss"][...])
        np.testing.assert_array_equal(a["evals/test_acc"][...], b["evals/test_acc"][...])
    # the checkpoint holds the completed g^6(tau), the all-reduce that was in flight
    st = serial("laga-sgdn", options("laga-sgdn", 2), 2, 7)["states"]
    for rank in range(2):
        with h5py.File(ck / "ckpt-7" / f"rank{rank}.h5") as f:
            np.testing.assert_allclose(f["state/g"][...], st["g"][6, rank], rtol=1e-10, atol=1e-12)
            np.testing.assert_allclose(f["state/y"][...], st["y"][6, rank], rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("algo,args,msg", [
    ("laga-sgd", ["--momentum", "0.9"], "--momentum does not apply to --algo laga-sgd: Algorithm 3 has no momentum"),
    ("laga-sgdm", ["--momentum", "0.9", "--nesterov"], "--nesterov does not apply"),
    ("laga-sgdn", ["--momentum", "0.9", "--momentum-form", "mxnet"], "--momentum-form does not apply to --algo laga-sgdn"),
])
def test_refuses_local_optimizer_options(algo, args, msg):
    n = 2 if algo == "laga-sgd" else None  # under mpiexec: one message, and no rank hangs
    r = refsgd("train", "--algo", algo, *args, "--iterations", "2", "--no-progress", n=n, timeout=60)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert msg in r.stderr and "Traceback" not in r.stderr
    assert r.stderr.count("refsgd: error:") == 1


def test_listed_with_its_algorithm():
    """`refsgd train --list` says each variant's algorithm: its line is its Method.summary
    (test_registry_checks.py's train_list check), which names the algorithm."""
    from refsgd.registry import METHODS
    for name, alg in (("laga-sgd", "Algorithm 3"), ("laga-sgdm", "Algorithm 4"), ("laga-sgdn", "Algorithm 5")):
        assert alg in METHODS[name].summary, METHODS[name].summary
