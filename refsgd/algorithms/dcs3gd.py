"""DC-S3GD: Delay-Compensated Stale-Synchronous SGD (Rigazzi 2019, Algorithm 1).

A. Rigazzi, "DC-S3GD: Delay-Compensated Stale-Synchronous SGD for Large-Scale Decentralized
Neural Network Training", 2019. docs/algorithms.md, section DC-S3GD; equations 7-12 and 17.

    Input: step eta, momentum mu, variance control lambda_0. Initialize w_i = w_bar.
    L1  g_i <- grad l(w_i)
    L2  dw_i <- U(g_i, eta, mu)
    L3  w_i <- w_i + dw_i
    L4  for t < max_iterations do
    L5      MPI_Iallreduce(dw_i)                            non-blocking, dw_bar = sum_i dw_i
    L6      g_i <- grad l(w_i)
    L7      dw_bar <- MPI_Wait()
    L8      D_i <- (1/N) dw_bar - dw_i                      eq. 9
    L9      g~_i <- g_i + lambda_i g_i (.) g_i (.) D_i      eq. 10
    L10     dw_i <- U(g~_i, eta, mu)                        eq. 11
    L11     w_i <- w_i + D_i + dw_i                         eq. 12
    L12 end
    lambda_i = lambda_0 ||g_i|| / ||g_i (.) g_i (.) D_i||    eq. 17, lambda_0 = 0.2

Run: ``mpiexec -n 4 refsgd train --algo dcs3gd --momentum 0.9 --lambda0 0.2
--schedule warmup-linear:warmup_epochs=2,total_epochs=10 --lr <N * eta_sn>``. The gradient of
L6 is computed while the all-reduce of L5 is in flight: with communication as slow as
computation an iteration costs max(compute, all-reduce) (eq. 14) instead of their sum (eq. 13).

Deviations and readings:

* U is momentum SGD in MXNet's form with its state v local to the worker,
  ``v <- mu*v - eta*(g + wd*w); dw = v`` (``--momentum-form`` is ignored: the paper's toolkit
  is MXNet). The weight decay follows the learning-rate schedule and is multiplied by k
  (section IV-A): ``wd_t = k * weight_decay * lr(t) / lr_peak`` with k = ``--wd-k``
  (2.3 in the paper) and lr_peak the schedule's largest value.
* The norms of eq. 17 are over the whole parameter vector; where ``g (.) g (.) D`` is zero the
  correction is zero (no division by zero). ``--lambda0 0`` switches the compensation off.
* The prologue L1-L3 is iteration 0 (it consumes one micro-batch like every iteration), so a
  run of T iterations computes T gradients; the loop body L5-L11 is iterations 1..T-1.
* The listing leaves every worker with its own w_i. The model that is evaluated and returned
  is the average of the workers' w_i (an all-reduce at evaluation time only).
* One micro-batch per iteration (``--tau 1``): the paper does not accumulate.
* L8-L11 are element-wise; they run as one Numba loop (:func:`corrected_step`, the listing's
  lines as comments) in two passes, because eq. 17 needs the norms of whole vectors before
  L9 can be applied. The NumPy form is the serial rendering's (refsgd/serial/dc.py).
"""

import numba as nb
import numpy as np
from mpi4py import MPI

from refsgd import RefsgdError


def check(args, world):
    if args.tau != 1:
        raise RefsgdError("dcs3gd takes one micro-batch per iteration (--tau 1): the paper does not accumulate")
    if args.nesterov:
        raise RefsgdError("dcs3gd uses momentum SGD in MXNet's form; --nesterov does not apply")


@nb.njit(cache=True, nogil=True, fastmath={"reassoc"})
def _eq17_norms(dw_i, g_i, dw_bar, N):
    """(||g_i||^2, ||g_i (.) g_i (.) D_i||^2) with D_i = (1/N) dw_bar - dw_i, in float64.

    ``reassoc`` lets LLVM vectorise the two sums (it halves the time of the whole step); it
    changes only the order of their additions, not any element-wise result.
    """
    gg = 0.0
    ggDD = 0.0
    for j in range(g_i.size):
        D = dw_bar[j] / N - dw_i[j]                     # L8: D_i = (1/N) dw_bar - dw_i
        ggD = g_i[j] * g_i[j] * D
        gg += g_i[j] * g_i[j]
        ggDD += ggD * ggD
    return gg, ggDD


@nb.njit(cache=True, nogil=True)
def corrected_step(w_i, dw_i, v, g_i, dw_bar, N, lambda0, eta, mu, wd):
    """L8-L11 (eq. 9-12, 17) element-wise, in two passes over the vectors; returns lambda_i.

    The second pass needs eq. 17's norms of the whole vectors, which the first computes. NumPy
    would take some fifteen passes with temporaries: on mnist_mlp that cost as much as the
    gradient and ate the overlap.
    """
    gg, ggDD = _eq17_norms(dw_i, g_i, dw_bar, N)
    lam = 0.0
    if ggDD > 0 and lambda0 != 0:
        lam = lambda0 * np.sqrt(gg) / np.sqrt(ggDD)     # eq. 17
    for j in range(w_i.size):
        D = dw_bar[j] / N - dw_i[j]                     # L8: D_i = (1/N) dw_bar - dw_i
        gt = g_i[j] + lam * g_i[j] * g_i[j] * D         # L9: g~_i = g_i + lambda_i g_i g_i D_i
        v[j] = mu * v[j] - eta * (gt + wd * w_i[j])     # L10: dw_i = U(g~_i, eta, mu)
        dw_i[j] = v[j]
        w_i[j] = w_i[j] + D + dw_i[j]                   # L11: w_i = w_i + D_i + dw_i
    return lam


def weight_decay_schedule(run):
    """t -> wd_t = k * wd * lr(t) / lr_peak (section IV-A): the decay follows the schedule."""
    c = run.cfg
    peak = max((run.lr(s) for s in range(run.total)), default=0.0) if c.weight_decay else 0.0
    if not c.weight_decay or peak <= 0:
        return lambda t: 0.0
    return lambda t: c.wd_k * c.weight_decay * run.lr(t) / peak


def train(run):
    comm, N = run.comm, run.world
    lambda0, mu = run.cfg.lambda0, run.cfg.momentum
    w_i = run.register("w_i", run.init_params())          # Initialize w_i = w_bar
    dw_i = run.register("dw_i", np.zeros_like(w_i))
    v = run.register("U.v", np.zeros_like(w_i))            # U's momentum, local to the worker
    dw_bar = np.empty_like(w_i)
    g_i = np.empty_like(w_i)
    w_bar = np.empty_like(w_i)
    wd_at = weight_decay_schedule(run)

    def U(g, t):
        """dw = U(g, eta, mu): v <- mu*v - eta*(g + wd_t*w_i), in place; returns v."""
        eta, wd = run.lr(t), wd_at(t)
        np.multiply(v, mu, out=v)
        np.subtract(v, eta * g, out=v)
        if wd:
            np.subtract(v, (eta * wd) * w_i, out=v)
        return v

    def average():
        with run.idle():
            comm.Allreduce(w_i, w_bar, op=MPI.SUM)
        np.divide(w_bar, N, out=w_bar)
        return w_bar
    run.set_model(average)

    for t in run.iterations():
        if t == 0:
            # L1: g_i <- grad l(w_i)                                         (compute)
            run.grad(w_i, g_i)
            # L2: dw_i <- U(g_i, eta, mu)
            dw_i[...] = U(g_i, t)
            # L3: w_i <- w_i + dw_i
            w_i += dw_i
            continue
        # L4: for t < max_iterations
        # L5: MPI_Iallreduce(dw_i)                                           (start communication)
        req = run.started(comm.Iallreduce(dw_i, dw_bar, op=MPI.SUM))
        # L6: g_i <- grad l(w_i)                                             (compute)
        run.grad(w_i, g_i, progress=req)
        # L7: dw_bar <- MPI_Wait()                                           (complete communication)
        run.wait(req)
        # L8:  D_i <- (1/N) dw_bar - dw_i                                    eq. 9
        # L9:  g~_i <- g_i + lambda_i g_i (.) g_i (.) D_i                     eq. 10, 17
        # L10: dw_i <- U(g~_i, eta, mu)                                      eq. 11
        # L11: w_i <- w_i + D_i + dw_i                                       eq. 12
        corrected_step(w_i, dw_i, v, g_i, dw_bar, N, lambda0, run.lr(t), mu, wd_at(t))
    return w_i
