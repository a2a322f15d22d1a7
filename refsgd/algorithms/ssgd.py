"""Synchronous SGD baselines: SSGD (with accumulation), SSGD-OPT, SSGD with NAG.

SSGD, Algorithms 1 and 2 of Hakimi et al. 2021 (LAGA), docs/algorithms.md, section SSGD::

    L1  g_i^t(tau) <- (1/tau) sum_{j=1..tau} grad F_i(x^t; xi_{i,j}^t)
    L2  AllReduce  g^t(tau) <- (1/N) sum_i g_i^t(tau)          (blocking)
    L3  x^{t+1} <- x^t - eta * g^t(tau)

Run: ``mpiexec -n 4 refsgd train --algo ssgd --tau 1 [--momentum 0.9]``. With tau = 1 this is
Algorithm 1. L3 is the local optimizer U of the command line: plain SGD as written, or SGD with
momentum / Nesterov / weight decay (PyTorch's form unless ``--momentum-form mxnet``), applied
identically on every rank to the same g, so every rank keeps the same x.

SSGD-OPT (``--algo ssgd-opt``; LAGA sections 1 and 5, the scheme of PyTorch DDP): as Algorithm
2, but during the backward pass of the last micro-batch each layer's gradient segment starts
its own non-blocking all-reduce as soon as it is final (last layer first); the update waits
for all of them. With ``--poll`` (the default) the segments already in flight are tested after
every later layer, so that an MPI library without a progress thread moves their data during
the pass.

SSGD with NAG (``--algo ssgd-nag``; Sato et al. 2017, Algorithm 4), docs/algorithms.md, section SSGD::

    (each step, the tau sub-batches of every worker at w^)
    L10 D_L <- sum_g D_g          (D_g: sum over a sub-batch's samples of grad J at w^)
    L11 D_g <- 0
    L12 D_A <- Allreduce(D_L)     (blocking, sum)
    L13 M <- mu*M - lambda*D_A
    L14 w <- w + M
    L15 w^ <- w + mu*M

Deviations and readings:

* One MPI rank is one worker; the paper's G gradient threads of a node become the tau
  micro-batches of a rank (their sum is the same D_L).
* SSGD-NAG's lambda (``--lr``) multiplies a *sum* over all samples of all workers, as in the
  paper; lambda = eta / (N * tau * batch) gives the step of mean-gradient SGD with rate eta.
  Its momentum mu is ``--momentum``; the local optimizer options do not apply to it.
* The model evaluated is x (SSGD) or w (SSGD-NAG), identical on every rank.
* L2's 1/N is done inside L3's fused pass (``U.step(x, g, eta, divide=N)``), element by element
  in x's dtype: bit for bit ``g /= N`` followed by the step, one pass over the vectors fewer.
* ``--allreduce ring`` (every method here): the all-reduces are refsgd's uncompressed
  Ring-AllReduce over point-to-point messages (:meth:`refsgd.run.Run.ring_sum`), the same bits
  under any MPI library and as the serial renderings. SSGD-OPT's per-segment ``MPI_Iallreduce``
  then becomes one blocking ring per segment, run after the backward pass, last layer first (a
  blocking ring inside the pass would be timed as compute); the default ``--allreduce mpi`` keeps
  the overlap. Each segment's ring cuts the segment into the ranks' blocks, so its order is that
  of the segment, not of the whole vector: the serial rendering sums segment by segment.
* ``--compress NAME`` (ssgd, ssgd-nag; :mod:`refsgd.comm.codecs`): the all-reduce of L2 / L12
  carries the codec's form and every reduction step decompresses, adds and compresses again
  (the compressed Ring-AllReduce of :mod:`refsgd.comm.codecs`).
  ``--compress fp16`` is Horovod's fp16 compression (the DASO paper's baseline): IEEE half on
  the wire, summed in half (each addition rounded to half), decompressed to float32 and then
  divided by N. Horovod divides in half before decompressing: the same numbers when N is a
  power of two, except for results in half's subnormal range.
"""

import numpy as np
from mpi4py import MPI

from refsgd.optim import momentum_predict


def train_ssgd(run):
    """SSGD with tau-step accumulation, LAGA Algorithms 1 and 2."""
    comm, N, tau = run.comm, run.world, run.tau
    x = run.register("x", run.init_params())
    U = run.optimizer()
    g_i = np.empty_like(x)   # g_i^t(tau), this worker's accumulated gradient
    g_ij = np.empty_like(x)  # grad F_i(x^t; xi_{i,j}^t), one micro-batch
    g = np.empty_like(x)     # g^t(tau), the average over workers
    wire = run.open_wire()   # --compress: the all-reduce carries e.g. fp16 (Horovod's compression)
    run.set_model(lambda: x)

    try:
        for t in run.iterations():
            # L1: g_i^t(tau) <- (1/tau) sum_j grad F_i(x^t; xi_ij^t)            (compute)
            run.grad(x, g_i, label="L1 grad F_i(x^t; xi_i1^t)")
            for j in range(1, tau):
                run.grad(x, g_ij, label=f"L1 grad F_i(x^t; xi_i{j + 1}^t)")
                g_i += g_ij
            if tau > 1:
                g_i /= tau
            # L2: AllReduce g^t(tau) <- (1/N) sum_i g_i^t(tau)                  (blocking)
            run.allreduce_sum(comm, g_i, g, wire, label="L2 MPI_Allreduce(g_i^t(tau))")
            # L3: x^{t+1} <- x^t - eta * g^t(tau)                              (U)
            #     with L2's 1/N: U divides each element of the sum by N in its one pass
            with run.update("L3 x^{t+1} <- x^t - eta g^t(tau)"):
                U.step(x, g, run.lr(t), divide=N)
    finally:
        if wire is not None:
            wire.close()
    return x


def train_ssgd_opt(run):
    """SSGD-OPT: per-layer non-blocking all-reduces started during the last backward pass."""
    comm, N, tau = run.comm, run.world, run.tau
    x = run.register("x", run.init_params())
    U = run.optimizer()
    g_i = np.empty_like(x)
    g_ij = np.empty_like(x)
    g = np.empty_like(x)
    run.set_model(lambda: x)

    for t in run.iterations():
        # L1, first tau - 1 micro-batches: accumulate                       (compute)
        if tau > 1:
            run.grad(x, g_i, label="L1 grad F_i(x^t; xi_i1^t)")
            for j in range(1, tau - 1):
                run.grad(x, g_ij, label=f"L1 grad F_i(x^t; xi_i{j + 1}^t)")
                g_i += g_ij
        reqs = []
        final = []  # --allreduce ring: the segments, reduced after the pass

        def segment_final(name, lo, hi):
            # L1 completes for this layer's segment ...
            if tau > 1:
                np.add(g_i[lo:hi], g_ij[lo:hi], out=g_i[lo:hi])
                g_i[lo:hi] /= tau
                mine = g_i[lo:hi]
            else:
                mine = g_ij[lo:hi]  # tau = 1: the micro-batch's gradient is g_i itself
            # L2, start communication: Iallreduce of the segment, last layer first
            if run.ring:  # --allreduce ring: a blocking ring per segment, after the pass (Deviations)
                final.append((name, mine, lo, hi))
            else:
                reqs.append(run.started(comm.Iallreduce(mine, g[lo:hi], op=MPI.SUM),
                                        f"L2 MPI_Iallreduce(g_i[{name}])", mine))

        # L1, last micro-batch; its backward pass starts the all-reduces     (compute)
        # (with --poll, the segments already started are tested after each later layer)
        run.grad(x, g_ij, on_segment=segment_final, progress=reqs, label=f"L1 grad F_i(x^t; xi_i{tau}^t)")
        for name, mine, lo, hi in final:  # --allreduce ring: segment by segment, last layer first
            run.ring_sum(comm, mine, g[lo:hi], label=f"L2 ring all-reduce(g_i[{name}])")
        # L2, complete communication: wait for every segment
        run.waitall(reqs, "L2 MPI_Waitall(segments)")
        # L3: x^{t+1} <- x^t - eta * g^t(tau)                              (U)
        #     with L2's 1/N: U divides each element of the sum by N in its one pass
        with run.update("L3 x^{t+1} <- x^t - eta g^t(tau)"):
            U.step(x, g, run.lr(t), divide=N)
    return x


def train_ssgd_nag(run):
    """SSGD with Nesterov's accelerated gradient, Sato et al. Algorithm 4."""
    comm, tau = run.comm, run.tau
    mu = run.cfg.momentum
    w = run.register("w", run.init_params())
    M = run.register("M", np.zeros_like(w))
    w_hat = run.register("w_hat", w.copy())
    D_L = np.empty_like(w)
    D_g = np.empty_like(w)
    D_A = np.empty_like(w)
    b = run.cfg.batch
    wire = run.open_wire()
    run.set_model(lambda: w)

    for t in run.iterations():
        lam = run.lr(t)
        # the sub-batches at w^: D_g = sum over the sub-batch's samples of grad J  (compute)
        # L10-L11: D_L <- D_1 + ... + D_G; D_g <- 0
        run.grad(w_hat, D_L, label="L10 D_1 at w^")
        for j in range(1, tau):
            run.grad(w_hat, D_g, label=f"L10 D_{j + 1} at w^")
            D_L += D_g
        with run.update("L10 D_L <- sum_g D_g"):  # loss_and_grad gives the mean over the b samples; the paper sums them
            D_L *= b
        # L12: D_A <- MPI_Allreduce(D_L)                                   (blocking)
        run.allreduce_sum(comm, D_L, D_A, wire, label="L12 MPI_Allreduce(D_L)")
        # L13: M <- mu*M - lambda*D_A
        # L14: w <- w + M
        # L15: w^ <- w + mu*M                                              (L13-L15 in one pass)
        with run.update("L13 M, w, w^ (L13-L15)"):
            momentum_predict(w, M, w_hat, D_A, lam, mu, mu)
    if wire is not None:
        wire.close()
    return w


ALGORITHMS = {
    "ssgd": (train_ssgd, "SSGD, LAGA paper (Hakimi et al. 2021) Algorithms 1-2; algorithms.md, section 'SSGD, SSGD-OPT, D-Sync and SSGD-NAG'"),
    "ssgd-opt": (train_ssgd_opt, "SSGD-OPT, per-layer non-blocking all-reduce in the backward pass "
                                 "(LAGA sections 1 and 5, PyTorch DDP); algorithms.md, section 'SSGD, SSGD-OPT, D-Sync and SSGD-NAG'"),
    "ssgd-nag": (train_ssgd_nag, "SSGD with NAG, Sato et al. 2017 Algorithm 4; algorithms.md, section 'SSGD, SSGD-OPT, D-Sync and SSGD-NAG'"),
}
