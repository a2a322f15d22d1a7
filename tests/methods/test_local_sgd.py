"""Local SGD (refsgd/algorithms/localsgd.py): its MPI run against its serial rendering at 2 and 4
ranks, what H means (H = 1 with plain SGD is SSGD's trajectory; the models agree exactly after
each average and drift between), and the outside replay of its golden file (REPLAY, taken by
tests/mpiexec/test_golden.py)."""

import h5py
import numpy as np
import pytest
from tests.helpers import world
from tests.helpers.in_process import refsgd

COMMON = ["--algo", "local-sgd", "--model", "digits_mlp", "--batch", "8", "--seed", "5", "--lr", "0.1"]


@pytest.mark.parametrize("extra", [["--sync-every", "3", "--momentum", "0.9"], ["--sync-every", "1"],
                                   ["--sync-every", "4", "--allreduce", "ring", "--weight-decay", "0.001"]])
@pytest.mark.world(2, 4)
def test_mpi_equals_serial_rendering(tmp_path, extra):
    world.mpi_equals_serial(tmp_path, COMMON + extra, 12, rtol=0 if world.comm().Get_size() == 2 or "ring" in extra
                            else 1e-10)


@pytest.mark.in_process
def test_the_models_agree_after_each_average_and_drift_between(tmp_path, capfd):
    r = refsgd(capfd, "golden", *COMMON, "--sync-every", "3", "--workers", "3", "--steps", "9", "--out", str(tmp_path / "g.h5"))
    assert r.returncode == 0, r.stderr
    with h5py.File(tmp_path / "g.h5") as f:
        x = f["state/x"][...]
    for s in range(9):
        spread = np.max(np.abs(x[s] - x[s][0]))
        if (s + 1) % 3 == 0:
            assert spread == 0.0, s
        else:
            assert spread > 1e-6, s


@pytest.mark.in_process
def test_h_1_with_plain_sgd_is_ssgd(tmp_path, capfd):
    """Averaging the models after every plain SGD step is averaging the gradients: SSGD's x."""
    for algo, extra in (("local-sgd", ["--sync-every", "1"]), ("ssgd", [])):
        r = refsgd(capfd, "golden", "--algo", algo, *COMMON[2:], *extra, "--workers", "2", "--steps", "6",
                "--out", str(tmp_path / f"{algo}.h5"))
        assert r.returncode == 0, r.stderr
    with h5py.File(tmp_path / "local-sgd.h5") as a, h5py.File(tmp_path / "ssgd.h5") as b:
        np.testing.assert_allclose(a["state/x"][...], b["state/x"][...], rtol=1e-12, atol=1e-14)


@pytest.mark.in_process
def test_tau_is_refused(tmp_path, capfd):
    r = refsgd(capfd, "train", *COMMON, "--tau", "2", "--iterations", "2", "--no-progress")
    assert r.returncode == 2 and "--algo local-sgd takes one mini-batch per local step" in r.stderr


def _replay_local_sgd(grad, w0, batches, lr, cfg, check):
    """Lin et al. 2020 Alg. 1 with each worker's PyTorch-form momentum: b_i = mu*b_i + g_i,
    x_i -= lr*b_i; after every H-th step x_i <- the mean of the x_j (2 workers: any order)."""
    T, N = batches.shape[:2]
    mu, H = cfg["momentum"], cfg["sync_every"]
    X, B = np.tile(w0, (N, 1)), np.zeros((N, len(w0)))
    for s in range(T):
        for i in range(N):
            g = grad(X[i], batches[s, i, 0])
            B[i] = mu * B[i] + g
            X[i] = X[i] - lr[s] * B[i]
        if (s + 1) % H == 0:
            X[:] = X.sum(axis=0) / N
        check(s, x=X, **{"U.momentum_buffer": B})


#: the outside replay of its golden file (tests/mpiexec/test_golden.py)
REPLAY = {"local-sgd": _replay_local_sgd}
