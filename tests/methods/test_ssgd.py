"""SSGD, SSGD-OPT and SSGD-NAG under MPI, in-process on COMM_WORLD in the world sessions of 1, 2
and 4 ranks (tests.helpers.world)."""

import numpy as np
import pytest
from tests.helpers import world
from tests.helpers.launch import make_config

from refsgd import datasets
from refsgd.datasets import epoch_batches
from refsgd.nn import load_model
from refsgd.optim import SGD, Constant
from refsgd.serial import rendering


pytestmark = pytest.mark.world(1, 2, 4)

BASE = dict(algo="ssgd", batch=16, tau=1, epochs=1, iterations=6, lr=0.1, momentum=0.0, nesterov=False,
            momentum_form="pytorch", weight_decay=0.0, seed=3, eval_every=1, log_every=2, progress=False)


def cfg(**kw):
    return make_config(**{**BASE, **kw})


def run_algo(name, comm, c, model="digits_cnn"):
    """Method ``name`` trained with the options of ``c`` (those of BASE that apply to it); (its
    result, the Run, the net, the data)."""
    from refsgd.algorithms import train_of
    from refsgd.run import build_run
    net = load_model(model, dtype=np.float64)
    data = datasets.load(None, dtype=np.float64)
    c = make_config(**{**{k: getattr(c, k) for k in BASE}, "algo": name})
    run = build_run(c, comm, net=net, data=data, schedule=Constant(c.lr), log=lambda *a: None)
    return train_of(name)(run), run, net, data


def serial_ssgd(net, data, c, N):
    """N workers as a loop, collectives as sums: the equations of LAGA Algorithm 2 with U."""
    x = net.init_params(c.seed)
    U = SGD(net.num_params, net.dtype, momentum=c.momentum, nesterov=c.nesterov)
    nb = len(data.y_train) // (N * c.batch)
    g = np.empty_like(x)
    for t in range(c.iterations):
        gsum = np.zeros_like(x)
        for i in range(N):
            gi = np.zeros_like(x)
            for j in range(c.tau):
                k = t * c.tau + j
                idx = epoch_batches(c.seed, k // nb, i, N, c.batch, len(data.y_train))[k % nb]
                net.loss_and_grad(x, data.x_train[idx], data.y_train[idx], out=g)
                gi += g
            gsum += gi / c.tau
        U.step(x, gsum / N, c.lr)
    return x


@pytest.mark.world(1)
def test_ssgd_on_one_rank_is_plain_sgd():
    from mpi4py import MPI
    comm = MPI.COMM_WORLD
    c = cfg(iterations=None, epochs=2, momentum=0.9)
    x, run, net, data = run_algo("ssgd", comm, c)
    T = len(run.records.iterations["wall"])
    assert T == 2 * (len(data.y_train) // c.batch)   # two epochs of plain minibatch SGD
    w = rendering("ssgd")(net, data, c, Constant(c.lr), 1, T)["states"]["x"][-1, 0]
    np.testing.assert_array_equal(x, w)  # exactly


@pytest.mark.parametrize("tau,momentum", [(1, 0.0), (3, 0.9)])
def test_ssgd_equals_the_serial_equations(tau, momentum):
    from mpi4py import MPI
    comm = MPI.COMM_WORLD
    c = cfg(tau=tau, momentum=momentum)
    x, run, net, data = run_algo("ssgd", comm, c)
    ref = serial_ssgd(net, data, c, comm.Get_size())
    np.testing.assert_allclose(x, ref, rtol=1e-10, atol=1e-13)
    # every rank holds the same model
    allx = comm.allgather(x)
    for other in allx:
        np.testing.assert_array_equal(other, x)


@pytest.mark.parametrize("tau", [1, 2])
def test_ssgd_opt_equals_ssgd(tau):
    from mpi4py import MPI
    comm = MPI.COMM_WORLD
    c = cfg(tau=tau, momentum=0.5)
    a, *_ = run_algo("ssgd", comm, c)
    b, run, *_ = run_algo("ssgd-opt", comm, c)
    np.testing.assert_allclose(b, a, rtol=1e-12, atol=1e-15)
    assert len(run.records.iterations["comm"]) == c.iterations


def test_ssgd_nag_equals_sato_algorithm_4():
    from mpi4py import MPI
    comm = MPI.COMM_WORLD
    N = comm.Get_size()
    c = cfg(tau=2, momentum=0.9, lr=0.001)
    w, run, net, data = run_algo("ssgd-nag", comm, c, model="digits_mlp")
    # serial: D_A = sum over workers and sub-batches of the summed per-sample gradients at w^
    w_ref = net.init_params(c.seed)
    M = np.zeros_like(w_ref)
    w_hat = w_ref.copy()
    nb = len(data.y_train) // (N * c.batch)
    g = np.empty_like(w_ref)
    for t in range(c.iterations):
        D_A = np.zeros_like(w_ref)
        for i in range(N):
            for j in range(c.tau):
                k = t * c.tau + j
                idx = epoch_batches(c.seed, k // nb, i, N, c.batch, len(data.y_train))[k % nb]
                net.loss_and_grad(w_hat, data.x_train[idx], data.y_train[idx], out=g)
                D_A += c.batch * g
        M = c.momentum * M - c.lr * D_A
        w_ref = w_ref + M
        w_hat = w_ref + c.momentum * M
    np.testing.assert_allclose(w, w_ref, rtol=1e-10, atol=1e-13)


@pytest.mark.world(2, 4)
@pytest.mark.parametrize("algo,extra", [
    ("ssgd", ["--tau", "2", "--momentum", "0.9"]),
    ("ssgd-opt", ["--tau", "2", "--momentum", "0.9", "--nesterov"]),
    ("ssgd-nag", ["--momentum", "0.9", "--lr", "0.001"]),
    ("ssgd-nag", ["--threads", "3", "--momentum", "0.9", "--lr", "0.001"]),   # L5-L9 in 3 threads
])
def test_mpi_trace_verifies_against_the_serial_rendering(tmp_path, algo, extra):
    common = ["--algo", algo, "--model", "digits_mlp", "--batch", "8", "--seed", "5", *extra]
    world.mpi_equals_serial(tmp_path, common, 12)
