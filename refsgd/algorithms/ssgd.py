"""Synchronous SGD baselines: SSGD (with accumulation), SSGD-OPT, SSGD with NAG.

SSGD, Algorithms 1 and 2 of Hakimi et al. 2021 (LAGA), docs/algorithms.md, section SSGD.
Algorithm 1, SSGD (``--algo ssgd --tau 1``), per worker i::

    L1  g_i^t <- grad F_i(x^t; xi_i^t)
    L2  AllReduce  g^t <- (1/N) sum_i g_i^t          (blocking)
    L3  x^{t+1} <- x^t - eta * g^t

Algorithm 2, SSGD with gradient accumulation tau (``--algo ssgd --tau TAU``)::

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

SSGD with NAG (``--algo ssgd-nag --threads G``; Sato et al. 2017, Algorithm 4), docs/algorithms.md,
section SSGD::

    L4  for t <- 0 to t_f - 1 do
    L5      thread grad(1, b, X)        (the G threads in parallel, each Algorithm 3's do-while
    L8      thread grad(G, b, X)         once: D_g <- sum over one sub-batch of grad J at w^)
    L9      wait thread
    L10     D_L <- D_1 + ... + D_G
    L11     D_g <- 0
    L12     D_A <- Allreduce(D_L)                  (blocking, sum)
    L13     M <- mu*M - lambda*D_A
    L14     w <- w + M
    L15     w^ <- w + mu*M

Deviations and readings:

* One MPI rank is one worker. SSGD-NAG: a rank is one of the paper's nodes, and its G gradient
  threads (``--threads G``, the same as ``--tau G``; default 1) compute the step's G sub-batches
  at once (L5-L9; :meth:`Run.gradient_threads` / :meth:`Run.in_threads`, the machinery of
  PP-ASGD's deterministic mode), the loop's thread waiting for them (its compute; theirs is
  ``thread_compute``); with G = 1 the loop's thread computes the one sub-batch itself. L10 sums
  D_1 .. D_G in the order of g, so the numbers are the serial rendering's whatever the threads'
  timing. A thread's D_g is the network's *mean* over its b samples and L10's sum is multiplied
  by b once (the paper's sum of per-sample gradients, up to rounding).
* SSGD-NAG's sampler: sub-batch g of step t of rank r is batch t*G + g of the sampler every
  synchronous method uses (:func:`refsgd.datasets.epoch_batches`: each epoch one permutation
  of the training set, split into disjoint shards of the ranks; without replacement), not
  Algorithm 3's randpick (each sample drawn at random, with replacement; PP-ASGD's
  :func:`refsgd.datasets.sampler.thread_randpick`), so that SSGD-NAG sees the data SSGD sees; an
  epoch is every sample once.
* SSGD-NAG's lambda (``--lr``) multiplies a *sum* over all samples of all workers, as in the
  paper; lambda = eta / (N * tau * batch) gives the step of mean-gradient SGD with rate eta.
  Its momentum mu is ``--momentum``; the local optimizer options do not apply to it.
* The model evaluated is x (SSGD) or w (SSGD-NAG), identical on every rank.
* L2's 1/N is done inside L3's fused pass (``U.step(x, g, eta, divide=N)``), element by element
  in x's dtype: bit for bit ``g /= N`` followed by the step, one pass over the vectors fewer.
* The uncompressed all-reduce of L2 / L12 is the MPI library's MPI_Allreduce (MPICH: recursive
  doubling for short messages, log2(p) latencies), not the Ring-AllReduce of the papers' cost
  models (2(p-1) latencies); docs/algorithms.md, "The all-reduce's algorithm".
* ``--allreduce ring`` (every method here): the all-reduces are refsgd's uncompressed
  Ring-AllReduce over point-to-point messages (:meth:`refsgd.run.Collectives.ring_sum`), the same bits
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

import contextlib

import numpy as np
from mpi4py import MPI

from refsgd.optim import momentum_predict


def train_ssgd(run):
    """SSGD with tau-step accumulation, LAGA Algorithms 1 and 2."""
    comm, N = run.comm, run.world
    x = run.register("x", run.init_params())
    U = run.optimizer()
    g_i = np.empty_like(x)   # g_i^t(tau), this worker's accumulated gradient
    g_ij = np.empty_like(x)  # grad F_i(x^t; xi_{i,j}^t), one micro-batch
    g = np.empty_like(x)     # g^t(tau), the average over workers
    wire = run.collectives.open_wire()   # --compress: the all-reduce carries e.g. fp16 (Horovod's compression)
    run.set_model(lambda: x)

    for t in run.iterations():
        # L1: g_i^t(tau) <- (1/tau) sum_j grad F_i(x^t; xi_ij^t)            (compute)
        run.accumulate(x, g_i, g_ij)
        # L2: AllReduce g^t(tau) <- (1/N) sum_i g_i^t(tau)                  (blocking)
        run.collectives.allreduce_sum(comm, g_i, g, wire, label="L2 MPI_Allreduce(g_i^t(tau))")
        # L3: x^{t+1} <- x^t - eta * g^t(tau)                              (U)
        #     with L2's 1/N: U divides each element of the sum by N in its one pass
        with run.clock.update("L3 x^{t+1} <- x^t - eta g^t(tau)"):
            U.step(x, g, run.lr(t), divide=N)
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
                np.add(g_i[lo:hi], g_ij[lo:hi], out=g_i[lo:hi])  # noqa: B023 called within this iteration
                g_i[lo:hi] /= tau  # noqa: B023 called within this iteration
                mine = g_i[lo:hi]  # noqa: B023 called within this iteration
            else:
                mine = g_ij[lo:hi]  # tau = 1: the micro-batch's gradient is g_i itself
            # L2, start communication: Iallreduce of the segment, last layer first
            if run.collectives.ring:  # --allreduce ring: a blocking ring per segment, after the pass (Deviations)
                final.append((name, mine, lo, hi))  # noqa: B023 called within this iteration
            else:
                reqs.append(run.collectives.started(comm.Iallreduce(mine, g[lo:hi], op=MPI.SUM),  # noqa: B023 called within this iteration
                                        f"L2 MPI_Iallreduce(g_i[{name}])", mine))

        # L1, last micro-batch; its backward pass starts the all-reduces     (compute)
        # (with --poll, the segments already started are tested after each later layer)
        run.grad(x, g_ij, on_segment=segment_final, progress=reqs, label=f"L1 grad F_i(x^t; xi_i{tau}^t)")
        for name, mine, lo, hi in final:  # --allreduce ring: segment by segment, last layer first
            run.collectives.ring_sum(comm, mine, g[lo:hi], label=f"L2 ring all-reduce(g_i[{name}])")
        # L2, complete communication: wait for every segment
        run.collectives.waitall(reqs, "L2 MPI_Waitall(segments)")
        # L3: x^{t+1} <- x^t - eta * g^t(tau)                              (U)
        #     with L2's 1/N: U divides each element of the sum by N in its one pass
        with run.clock.update("L3 x^{t+1} <- x^t - eta g^t(tau)"):
            U.step(x, g, run.lr(t), divide=N)
    return x


def train_ssgd_nag(run):
    """SSGD with Nesterov's accelerated gradient, Sato et al. Algorithm 4."""
    comm, G = run.comm, run.tau   # G sub-batches per step, one per gradient thread (--threads G)
    mu = run.cfg.momentum
    w = run.register("w", run.init_params())
    M = run.register("M", np.zeros_like(w))
    w_hat = run.register("w_hat", w.copy())
    D_L = np.empty_like(w)
    D = np.empty((G,) + w.shape, w.dtype)   # D_1 .. D_G, one per thread
    D_A = np.empty_like(w)
    b = run.cfg.batch
    wire = run.collectives.open_wire()
    run.set_model(lambda: w)

    def grad(g, idx):
        """Thread g, Algorithm 3's do-while once: its sub-batch at w^ into D_g (the mean over it)."""
        return run.grad_at(w_hat, D[g], idx, label=f"L5 thread grad({g + 1}): D_{g + 1} at w^")

    with contextlib.ExitStack() as stack:
        pool = stack.enter_context(run.gradient_threads(G)) if G > 1 else None
        for t in run.iterations():
            lam = run.lr(t)
            if pool is None:
                # G = 1: the loop's thread is the one gradient thread                (compute)
                run.grad(w_hat, D_L, label="L5 thread grad(1): D_1 at w^")
            else:
                # L5-L8: thread grad(g, b, X) for g = 1..G, in parallel, each on sub-batch t*G+g-1 of
                #        the sampler at w^;  L9: wait thread                   (the loop's compute)
                idx = [run.batch_indices(t * G + g) for g in range(G)]
                losses = run.in_threads(pool, lambda g: grad(g, idx[g]), G, "L9 wait thread")  # noqa: B023 called within this iteration
                run.records.trace_batches(idx)
                run.add_loss(sum(losses), G)
                # L10: D_L <- D_1 + ... + D_G (in the order of g);  L11: D_g <- 0 (overwritten next step)
                with run.clock.update("L10 D_L <- D_1 + ... + D_G"):
                    np.copyto(D_L, D[0])
                    for g in range(1, G):
                        D_L += D[g]
            with run.clock.update("L10 D_L <- sum_g D_g"):  # loss_and_grad gives the mean over the b samples; the paper sums them
                D_L *= b
            # L12: D_A <- MPI_Allreduce(D_L)                                   (blocking)
            run.collectives.allreduce_sum(comm, D_L, D_A, wire, label="L12 MPI_Allreduce(D_L)")
            # L13: M <- mu*M - lambda*D_A
            # L14: w <- w + M
            # L15: w^ <- w + mu*M                                              (L13-L15 in one pass)
            with run.clock.update("L13 M, w, w^ (L13-L15)"):
                momentum_predict(w, M, w_hat, D_A, lam, mu, mu)
    return w
