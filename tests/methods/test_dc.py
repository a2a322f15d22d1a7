"""DC-S3GD and DC-ASGD: MPI against the serial renderings, closed forms, bad input."""

import json

import h5py
import numpy as np
import pytest
from tests.helpers import world
from tests.helpers.launch import make_config
from tests.helpers.launch import cli as refsgd

from refsgd import datasets
from refsgd.algorithms.dcs3gd import corrected_step
from refsgd.nn import load_model
from refsgd.datasets import epoch_batches
from refsgd.optim import SGD, Constant



CASES = {
    "dcs3gd": ["--momentum", "0.9", "--weight-decay", "0.001", "--lambda0", "0.2",
               "--schedule", "warmup-linear:warmup_iters=4,total_iters=20"],
    "dcs3gd-nocomp": ["--momentum", "0.9", "--lambda0", "0"],
    "dcs3gd-tensor": ["--lambda-norm", "tensor", "--weight-decay", "0.001"],
    "dcasgd": ["--ps-order", "round-robin", "--dc-lambda", "0.04"],
    "dcasgd-adaptive": ["--ps-order", "round-robin", "--dc-adaptive", "--dc-lambda", "2.0", "--weight-decay", "0.001"],
}


@pytest.mark.world(2, 4)
@pytest.mark.parametrize("case", list(CASES))
def test_mpi_equals_serial_rendering(tmp_path, case):
    algo = case.split("-")[0]
    common = ["--algo", algo, "--model", "digits_mlp", "--batch", "8", "--seed", "4", *CASES[case]]
    world.mpi_equals_serial(tmp_path, common, 12)


@pytest.mark.parametrize("lambda0", [0.2, 0.0])
def test_corrected_step_eq9_to_12_and_17(lambda0):
    """The fused L8-L11 against the equations written out by hand for d = 3, N = 2."""
    w_i, dw_i, v = np.array([1.0, 2.0, 3.0]), np.array([0.1, 0.0, -0.2]), np.array([0.3, -0.1, 0.05])
    g = np.array([1.0, -2.0, 0.5])
    dw_bar = np.array([0.4, 0.0, -1.2])                 # sum of both workers' dw
    N, eta, mu, wd = 2, 0.05, 0.9, 0.01
    D = np.array([0.1, 0.0, -0.4])                      # eq. 9: dw_bar / 2 - dw_i
    ggD = np.array([0.1, 0.0, -0.1])                    # g * g * D
    lam = lambda0 * np.sqrt(1 + 4 + 0.25) / np.sqrt(0.01 + 0.01)      # eq. 17
    v_new = mu * v - eta * (g + lam * ggD + wd * w_i)   # eq. 10, 11 (MXNet momentum with decay)
    w_new = w_i + D + v_new                             # eq. 12
    got, = corrected_step(w_i, dw_i, v, g, dw_bar, N, lambda0, eta, mu, wd)
    assert got == pytest.approx(lam, rel=1e-14)
    np.testing.assert_allclose(v, v_new, rtol=1e-14)
    np.testing.assert_allclose(dw_i, v_new, rtol=1e-14)
    np.testing.assert_allclose(w_i, w_new, rtol=1e-14)


def test_corrected_step_per_tensor_norms_and_frozen_decay():
    """--lambda-norm tensor: eq. 17 over each part [0, 2) and [2, 3) with its own lambda; decay 0 on
    the frozen part leaves its weight decay out of U."""
    w_i, dw_i, v = np.array([1.0, 2.0, 3.0]), np.array([0.1, 0.0, -0.2]), np.array([0.3, -0.1, 0.05])
    g, dw_bar = np.array([1.0, -2.0, 0.5]), np.array([0.4, 0.0, -1.2])
    N, eta, mu, wd, lambda0 = 2, 0.05, 0.9, 0.01, 0.2
    D, ggD = np.array([0.1, 0.0, -0.4]), np.array([0.1, 0.0, -0.1])
    lam = np.array([lambda0 * np.sqrt(1 + 4) / np.sqrt(0.01), lambda0 * np.sqrt(0.25) / np.sqrt(0.01)])
    decay = np.array([1.0, 1.0, 0.0])
    v_new = mu * v - eta * (g + np.repeat(lam, [2, 1]) * ggD + wd * decay * w_i)
    w_new = w_i + D + v_new
    got = corrected_step(w_i, dw_i, v, g, dw_bar, N, lambda0, eta, mu, wd, bounds=np.array([0, 2, 3]), decay=decay)
    np.testing.assert_allclose(got, lam, rtol=1e-14)
    np.testing.assert_allclose(v, v_new, rtol=1e-14)
    np.testing.assert_allclose(w_i, w_new, rtol=1e-14)


def test_corrected_step_computes_a_float32_run_in_float32():
    """The scalars enter as NumPy casts a Python float: a float32 step is the float32 NumPy passes
    bit for bit (lambda_i computed from the norms, then rounded to float32)."""
    rng = np.random.default_rng(1)
    w_i, dw_i, v, g, dw_bar = (rng.standard_normal(1000).astype(np.float32) for _ in range(5))
    N, lambda0, eta, mu, wd = 3, 0.2, 0.05, 0.9, 0.01
    ref = [a.copy() for a in (w_i, dw_i, v)]
    lam, = corrected_step(w_i, dw_i, v, g, dw_bar, N, lambda0, eta, mu, wd)
    w0, dw0, v0 = ref
    D = dw_bar / N - dw0
    gt = g + np.float32(lam) * (g * g * D)          # L9: lambda_i (g (.) g (.) D), as the serial rendering
    v_new = v0 * np.float32(mu) - np.float32(eta) * (gt + np.float32(wd) * w0)
    assert w_i.dtype == v.dtype == np.float32
    np.testing.assert_array_equal(v, v_new)
    np.testing.assert_array_equal(dw_i, v_new)
    np.testing.assert_array_equal(w_i, w0 + D + v_new)


def test_corrected_step_no_division_by_zero():
    """D = 0 (all workers moved alike): g (.) g (.) D = 0, lambda_i = 0, plain momentum step."""
    w_i, dw_i, v, g = np.ones(3), np.full(3, 0.5), np.zeros(3), np.array([1.0, 2.0, 3.0])
    lam, = corrected_step(w_i, dw_i, v, g, np.full(3, 1.0), 2, 0.2, 0.1, 0.0, 0.0)
    assert lam == 0.0 and np.all(np.isfinite(w_i))
    np.testing.assert_allclose(w_i, 1.0 - 0.1 * g)


def cfg(**kw):
    """dcs3gd's (or dcasgd's) resolved Config with these values, those that apply."""
    base = dict(algo="dcs3gd", batch=16, tau=1, epochs=1, lr=0.05, momentum=0.9, weight_decay=0.0, wd_k=2.3,
                lambda0=0.2, seed=3, eval_every=1, log_every=5, progress=False, dc_lambda=0.04, dc_adaptive=False,
                ps_order="arrival")
    return make_config(**{**base, **kw})


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_adaptive_lambda_is_the_numpy_lines_bit_for_bit(dtype):
    """DC-ASGD's MeanSquare and adaptive lambda in one pass, without temporaries: the same bits
    as the NumPy lines of the serial rendering (MeanSquare updated before use, eps inside)."""
    from refsgd.algorithms.dcasgd import EPS, adaptive_lambda
    rng = np.random.default_rng(4)
    g = rng.standard_normal(1001).astype(dtype)
    ms = (rng.random(1001) * 0.01).astype(dtype)
    want_ms = ms * 0.95 + (1 - 0.95) * g * g
    want = 0.04 / np.sqrt(want_ms + EPS)
    out = np.empty_like(g)
    assert adaptive_lambda(ms, g, 0.95, 0.04, out) is out
    assert out.dtype == dtype and ms.dtype == dtype
    np.testing.assert_array_equal(ms, want_ms)
    np.testing.assert_array_equal(out, want)


@pytest.mark.world(1)
def test_dcs3gd_on_one_rank_is_mxnet_momentum_sgd():
    """N = 1: D_i = dw_bar - dw_i = 0, so the correction vanishes and w_i follows U exactly."""
    from mpi4py import MPI

    from refsgd.algorithms import dcs3gd
    from refsgd.run import build_run
    comm = MPI.COMM_WORLD
    c = cfg()
    net, data = load_model("digits_mlp", np.float64), datasets.load(None, np.float64)
    run = build_run(c, comm, net=net, data=data, schedule=Constant(c.lr), log=lambda *a: None)
    w = dcs3gd.train(run)
    # plain minibatch SGD with MXNet's momentum, one epoch of the documented sampler at one worker
    opt = SGD(net.num_params, net.dtype, momentum=0.9, form="mxnet")
    ref, g = net.init_params(c.seed), np.empty(net.num_params, net.dtype)
    batches = epoch_batches(c.seed, 0, 0, 1, c.batch, len(data.y_train))
    assert len(run.records.iterations["wall"]) == len(batches)
    for idx in batches:
        net.loss_and_grad(ref, data.x_train[idx], data.y_train[idx], out=g)
        opt.step(ref, g, c.lr)
    np.testing.assert_array_equal(w, ref)


@pytest.mark.world(2, 4)
def test_dcasgd_arrival_order_trains_and_serves_every_push():
    from mpi4py import MPI

    from refsgd.algorithms import dcasgd
    from refsgd.run import build_run
    comm = MPI.COMM_WORLD
    c = cfg(algo="dcasgd", iterations=30, lr=0.1)
    net, data = load_model("digits_mlp", np.float64), datasets.load(None, np.float64)
    run = build_run(c, comm, net=net, data=data, schedule=Constant(c.lr), log=lambda *a: None)
    w = dcasgd.train(run)
    # every rank ends with the server's final weights? the workers hold their last reply
    final = run.final_model()
    loss0 = net.loss(net.init_params(3), data.x_test, data.y_test)
    assert net.loss(final, data.x_test, data.y_test) < 0.7 * loss0
    if comm.Get_size() == 2:  # one worker: arrival order is the only order, and w is the reply
        np.testing.assert_array_equal(w, final)
    if comm.Get_rank() == 0:
        assert np.all(np.isnan(run.records.iterations["loss"]))  # the server computes no gradient


@pytest.mark.parametrize("args,n,msg", [
    (["--algo", "dcasgd"], 1, "dcasgd needs a server and at least one worker"),
    (["--algo", "dcasgd", "--momentum", "0.9"], 2, "--momentum does not apply to --algo dcasgd"),
    (["--algo", "dcs3gd", "--momentum-form", "pytorch"], 2, "--momentum-form does not apply to --algo dcs3gd"),
    (["--algo", "dcasgd", "--dc-ms-decay", "0.9"], 2, "--dc-ms-decay is the decay of MeanSquare"),
    (["--algo", "ssgd", "--lambda0", "0.1"], 2, "--lambda0 does not apply to --algo ssgd"),
    (["--algo", "dcs3gd", "--tau", "2"], 2, "dcs3gd takes one micro-batch per iteration"),
    (["--algo", "dcs3gd", "--nesterov", "--momentum", "0.9"], 2, "--nesterov does not apply to --algo dcs3gd"),
])
def test_bad_input(args, n, msg):
    r = refsgd("train", *args, "--no-progress", n=n, timeout=120)
    assert r.returncode == 2 and msg in r.stderr and r.stderr.count("refsgd: error:") == 1, r.stderr


def test_golden_dcasgd_is_round_robin(tmp_path):
    """The serial rendering serves the workers in turn: refsgd golden refuses --ps-order arrival."""
    out = tmp_path / "g.h5"
    r = refsgd("golden", "--algo", "dcasgd", "--workers", "3", "--steps", "2", "--ps-order", "arrival",
               "--out", str(out))
    assert r.returncode == 2 and "round-robin" in r.stderr
    r = refsgd("golden", "--algo", "dcasgd", "--workers", "3", "--steps", "2", "--out", str(out))
    assert r.returncode == 0, r.stderr
    with h5py.File(out) as f:
        assert json.loads(f.attrs["config"])["ps_order"] == "round-robin"
