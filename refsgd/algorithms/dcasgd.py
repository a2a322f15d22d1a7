"""DC-ASGD: asynchronous SGD with delay compensation on a parameter server (Zheng et al. 2017).

The parameter-server method DC-S3GD is compared with (Rigazzi 2019, section II and eq. 6);
docs/algorithms.md, section DC-S3GD, "Baseline DC-ASGD". Rank 0 is the server; ranks 1..N-1 are workers.

    server: holds w and a backup w_bak(m) of the weights last sent to worker m (w_bak(m) = w0)
      S1  on each push g_m from worker m (in the order of --ps-order: as they arrive, or 1..N-1):
      S2      w <- w - eta * (g_m + lambda * g_m (.) g_m (.) (w - w_bak(m)))
      S3      send w to m
      S4      w_bak(m) <- w
    worker m (starts at w0, the same seed everywhere):
      W1  g_m <- grad at w on the next micro-batch
      W2  push g_m to the server
      W3  pull: w <- the server's reply

Run: ``mpiexec -n 5 refsgd train --algo dcasgd --dc-lambda 0.04`` (1 server + 4 workers).
``--dc-adaptive`` uses the adaptive variant ``lambda_t = lambda_0 / sqrt(MeanSquare_t + eps)``
(element-wise, eps = 1e-7), ``MeanSquare_t = m * MeanSquare_{t-1} + (1-m) * g_m^2`` updated
on every push, m = ``--dc-ms-decay`` (0.95 as in Zheng et al.). ``--ps-order round-robin``
makes the server take the workers' pushes in the fixed order 1, 2, ..., N-1 in every round
(deterministic, the order of the serial rendering); the default ``arrival`` takes them as
they come (``MPI.ANY_SOURCE``).

Deviations and readings:

* Constant lambda (MXNet's default 0.04) unless ``--dc-adaptive``; no momentum (the listing
  has none: ``--momentum`` does not apply). Coupled weight decay ``g_m + wd * w`` is added when
  ``--weight-decay`` is given (MXNet's DCASGD does the same), never in frozen layers.
* One server "iteration" takes N-1 pushes (in arrival order, so a fast worker may be served
  twice while a slow one waits); every worker pushes once per iteration. The run's bookkeeping
  collectives (loss check, evaluation, checkpoints) happen at iteration boundaries, where all
  pushes up to that boundary have been served, so the asynchrony spans the windows between
  them (``--log-every`` iterations, default 10).
* The learning rate of server iteration t is ``lr(t)``; the data is sharded over the N-1
  workers (the server holds none). The model evaluated and returned is the server's w.
* Time blocked in Send/Recv counts as idle (workers waiting for the server's reply, the
  server waiting for a push).
"""

import numba as nb
import numpy as np
from mpi4py import MPI

from refsgd.optim import decay_mask

PUSH, PULL = 11, 12
EPS = 1e-7


def train(run):
    comm, c = run.comm, run.cfg
    M = run.world - 1                                     # workers
    w = run.register("w", run.init_params())
    w_eval = np.empty_like(w)

    def server_model():
        if run.rank == 0:
            w_eval[...] = w
        comm.Bcast(w_eval, root=0)
        return w_eval
    run.set_model(server_model)

    if run.rank == 0:
        # ---------------------------------------------------------------- the server
        w_bak = run.register("w_bak", np.tile(w, (M, 1)))     # w_bak(m) = w0
        ms = run.register("mean_square", np.zeros_like(w)) if c.dc_adaptive else None
        g_m = np.empty_like(w)
        lam_buf = np.empty_like(w) if c.dc_adaptive else None
        status = MPI.Status()
        mask = decay_mask(run.net)
        wd = c.weight_decay if mask is None else c.weight_decay * mask  # frozen layers: no decay
        decayed = bool(np.any(wd))
        for t in run.iterations():
            eta = run.lr(t)
            for k in range(M):
                source = k + 1 if c.ps_order == "round-robin" else MPI.ANY_SOURCE
                # S1: on each push g_m from worker m
                with run.clock.idle("S1 MPI_Recv(g_m)"):
                    comm.Recv(g_m, source=source, tag=PUSH, status=status)
                m = status.Get_source()
                with run.clock.update("S2 w <- w - eta (g_m + lambda g_m g_m (w - w_bak(m)))"):
                    if c.dc_adaptive:
                        # lambda_t = lambda_0 / sqrt(MeanSquare_t + eps), MeanSquare from g_m
                        lam = adaptive_lambda(ms, g_m, c.dc_ms_decay, c.dc_lambda, lam_buf)
                    else:
                        lam = c.dc_lambda
                    # S2: w <- w - eta (g_m + lambda g_m (.) g_m (.) (w - w_bak(m)))
                    compensated_step(w, g_m, w_bak[m - 1], eta, lam, wd, decayed)
                # S3: send w to m
                with run.clock.idle("S3 MPI_Send(w)", w):
                    comm.Send(w, dest=m, tag=PULL)
                # S4: w_bak(m) <- w
                w_bak[m - 1] = w
    else:
        # ---------------------------------------------------------------- a worker
        g = np.empty_like(w)
        for _ in run.iterations():
            # W1: g_m <- grad at w                                          (compute)
            run.grad(w, g, label="W1 g_m <- grad at w")
            # W2: push g_m
            with run.clock.idle("W2 MPI_Send(g_m)", g):
                comm.Send(g, dest=0, tag=PUSH)
            # W3: pull w
            with run.clock.idle("W3 MPI_Recv(w)"):
                comm.Recv(w, source=0, tag=PULL)
    return w


def compensated_step(w, g, w_bak, eta, lam, wd, decayed=None):
    """S2: w <- w - eta * (g + wd*w + lam (.) g (.) g (.) (w - w_bak)), in place, in one pass.

    lam is a number or an array (the adaptive variant); wd a number, or an array that is 0 in
    frozen layers (refsgd.optim.decay_mask); ``decayed`` says whether any wd is non-zero (None:
    look, a pass over an array wd).
    """
    t = w.dtype.type
    lam_a = np.asarray(lam, dtype=w.dtype).reshape(-1)
    wd_a = np.asarray(wd, dtype=w.dtype).reshape(-1)
    _compensated(w, g, w_bak, t(eta), lam_a, wd_a, bool(np.any(wd_a)) if decayed is None else decayed)


def adaptive_lambda(ms, g, decay, lam0, out):
    """Zheng et al.'s adaptive lambda, in place and in one pass: MeanSquare is updated first,
    ``ms <- decay*ms + (1 - decay) g (.) g``, then ``out <- lam0 / sqrt(ms + EPS)``; the scalars in
    the vectors' dtype, each element computed in the order of those NumPy lines."""
    t = ms.dtype.type
    _adaptive(ms, g, t(decay), t(1 - decay), t(lam0), t(EPS), out)
    return out


@nb.njit(cache=True, nogil=True)
def _adaptive(ms, g, decay, rest, lam0, eps, out):
    for j in range(ms.size):
        m = ms[j] * decay + rest * g[j] * g[j]
        ms[j] = m
        out[j] = lam0 / np.sqrt(m + eps)


@nb.njit(cache=True, nogil=True)
def _compensated(w, g, w_bak, eta, lam, wd, decayed):
    """The element-wise form of S2, each element in the order of the serial rendering's NumPy
    line (refsgd.serial.dc): ``w - eta * (g + wd*w + lam*g*g*(w - w_bak))``, the products left to
    right, so that a trace is bitwise its golden file; lam and wd have one value for all elements
    or one per element."""
    one_lam, one_wd = lam.size == 1, wd.size == 1
    for j in range(w.size):
        s = g[j]
        if decayed:  # wd = 0 adds +-0: g unchanged
            s = s + (wd[0] if one_wd else wd[j]) * w[j]
        s = s + (lam[0] if one_lam else lam[j]) * g[j] * g[j] * (w[j] - w_bak[j])
        w[j] = w[j] - eta * s


def warm(dtype):
    """S2's kernels called once on one-element vectors of ``dtype``, before the run's clock starts
    (the typing of a kernel's first call stays out of the update: refsgd.optim.warm)."""
    one = np.ones(1, dtype)
    adaptive_lambda(one.copy(), one, 0.5, 1.0, one.copy())
    compensated_step(one.copy(), one, one.copy(), 1.0, 1.0, 0.0, False)
