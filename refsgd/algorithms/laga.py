"""LAGA: lagged all-reduce with gradient accumulation (LAGA-SGD, LAGA-SGDM, LAGA-SGDN).

I. Hakimi, R. Z. Aviv, K. Y. Levy, A. Schuster. "LAGA: Lagged AllReduce with Gradient
Accumulation for Minimal Idle Time." IEEE ICDM 2021. Algorithms 3, 4 and 5; the listings
and line numbers are in docs/algorithms.md, section LAGA. Per worker i, iteration t, gradient accumulation tau
micro-batches, N workers, learning rate eta, momentum gamma.

Algorithm 3, LAGA-SGD (``--algo laga-sgd``)::

    L1  g_i^t(tau) <- (1/tau) sum_{j=1..tau} grad F_i(x^t; xi_{i,j}^t)
    L2  x^{t+1} <- x^t - eta * g^{t-1}(tau)
    L3  Non-blocking AllReduce  g^t(tau) <- (1/N) sum_i g_i^t(tau)

Algorithm 4, LAGA-SGDM (``--algo laga-sgdm``; m^{-1} = 0)::

    L1  g_i^t(tau) <- (1/tau) sum_j grad F_i(x^t; xi_{i,j}^t)
    L2  m^t <- gamma * m^{t-1} + g^{t-1}(tau)
    L3  x^{t+1} <- x^t - eta * m^t
    L4  Non-blocking AllReduce  g^t(tau) <- (1/N) sum_i g_i^t(tau)

Algorithm 5, LAGA-SGDN (``--algo laga-sgdn``; Nesterov, reparameterised y = x - eta*gamma*m)::

    L1  g_i^t(tau) <- (1/tau) sum_j grad F_i(y^t; xi_{i,j}^t)
    L2  m^t <- gamma * m^{t-1} + g^{t-1}(tau)
    L3  y^{t+1} <- y^t - eta * (gamma * m^t + g^{t-1}(tau))
    L4  Non-blocking AllReduce  g^t(tau) <- (1/N) sum_i g_i^t(tau)

Run: ``mpiexec -n 4 refsgd train --algo laga-sgdn --tau 4 --momentum 0.9`` (gamma is
``--momentum``, eta is ``--lr`` under ``--schedule``). The all-reduce started at the end of
iteration t-1 runs in the background while the tau micro-batches of iteration t are computed;
the update of iteration t applies its result. Every rank applies the same g, so every rank keeps
the same x (or y) and m.

Each iteration is written in three phases, as comments: *compute* (L1, with the previous
all-reduce in flight), *complete communication* (the wait before L2) with the update, and
*start communication* (the last line).

State registered with the run (checkpointed, and recorded by ``--trace`` after every step):
``x`` (Algorithms 3, 4) or ``y`` (Algorithm 5), ``m`` (Algorithms 4, 5), and ``g``, the receive
buffer of the in-flight all-reduce. After step t the trace holds x^{t+1} (y^{t+1}), m^t and
g^t(tau).

Deviations and readings:

* L2 uses the all-reduce started in the previous iteration, so it waits for that request first
  (the wait is implicit in the paper). g^{-1}(tau) = 0: the first update applies nothing, x^1 =
  x^0 (and m^0 = 0), as in the authors' code, whose first optimizer step sees zeroed gradients.
* The 1/N of the all-reduce is applied to each worker's g_i^t(tau) before the sum (as the
  authors' code does), so the receive buffer ``g`` holds the mean g^t(tau) itself. After a
  resume, ``g`` already holds the completed g^{t-1}(tau) (a checkpoint completes in-flight
  requests first) and no request is waited for.
* After the last iteration the in-flight all-reduce is waited for and not applied.
* ``--allreduce ring``: the non-blocking AllReduce becomes refsgd's uncompressed Ring-AllReduce
  over point-to-point messages, blocking (:meth:`refsgd.run.Collectives.ring_sum`), so nothing is in
  flight during the next iteration's L1 (no overlap: LAGA's lag is kept, its speed is not); the
  sum is the same bits under any MPI library and as the serial rendering, which sums the
  workers' g_i^t(tau) / N in the ring's order. The default ``--allreduce mpi`` overlaps.
* In Algorithm 5 the gradient is taken at y (the paper's listing says x; its text says y is
  "used for both computing the gradient and applying it"). The model that is evaluated and
  returned is y, not x = y + eta*gamma*m: y is the vector the method computes gradients at and
  the one the authors' PyTorch code holds as the model's parameters (PyTorch's Nesterov SGD
  works the same way). The two differ by eta*gamma*m^t, which vanishes as eta decays; and with
  a schedule x = y + eta*gamma*m is ambiguous (which step's eta).
* Weight decay (``--weight-decay wd``, the paper trains with 1e-4): coupled L2 decay added to
  the lagged average in L2, at the current parameters, i.e. g^{t-1}(tau) is replaced by
  d^t = g^{t-1}(tau) + wd * x^t (y^t in Algorithm 5) in L2 and L3. This is what the authors'
  code does (it hands the lagged gradient to a PyTorch SGD optimizer with weight decay); as
  there, the first update then applies the decay term alone (x^1 = x^0 - eta*wd*x^0). Weights
  of frozen layers are not decayed. The listings have no decay; with wd = 0 they are exact.
* LAGA's listings define the update, so the local-optimizer options do not apply: ``--nesterov``
  and ``--momentum-form mxnet`` are refused (use ``laga-sgdn``; the momentum here is the
  PyTorch form of L2-L3), as is ``--momentum`` with ``laga-sgd`` (use ``laga-sgdm``).
* The send buffer of an in-flight all-reduce must not change before it completes, while L1 of
  the next iteration is already accumulating: two send buffers alternate. mpi4py does not keep
  a non-blocking collective's buffers alive, so both send buffers and ``g`` live for the whole
  run.
* MPI libraries without an asynchronous progress thread (MPICH's default) advance a non-blocking
  all-reduce only inside MPI calls, so without help the transfer happens in the wait. With
  ``--poll`` (the default) the in-flight request is tested after every layer of L1's
  forward and backward passes (``run.grad(..., progress=req)``); or set MPICH_ASYNC_PROGRESS=1 where cores
  are to spare (docs/guide/overlap.md).
* ``--trace`` records ``g`` after each step; the run completes the all-reduce in flight before
  recording it (so a traced run does not overlap; the numbers are the same).
"""

import numpy as np

from refsgd import registry
from refsgd.optim import decay_mask, fused_step


def train(run):
    """LAGA-SGD, -SGDM and -SGDN (Algorithms 3, 4 and 5): one loop; only the update (L2, or L2-L3)
    differs, and Algorithm 5 names its parameters y."""
    comm, N, gamma = run.comm, run.world, run.cfg.momentum
    variant = registry.method(run.cfg.algo).variant               # Method.variant: Algorithm 4 or 5
    momentum, nesterov = variant.get("momentum", False), variant.get("nesterov", False)
    x_ = "y" if nesterov else "x"                  # Algorithm 5's y = x - eta*gamma*m (the model, see above)
    wd, mask = _decay(run)
    x = run.register(x_, run.init_params())
    m = run.register("m", np.zeros_like(x)) if momentum else None   # m^{-1} = 0 (Algorithms 4, 5)
    g = run.register("g", np.zeros_like(x))       # g^{t-1}(tau): receive buffer, g^{-1} = 0
    g_i = np.empty_like(x)                         # g_i^t(tau), this worker's send buffer ...
    g_i_sent = np.empty_like(x)                    # ... and the one still in flight
    g_ij = np.empty_like(x)                        # one micro-batch's gradient
    req = None                                     # no request in flight (first step, resume)
    step = f"L2 m^t, L3 {x_}^{{t+1}}" if momentum else "L2 x^{t+1} <- x^t - eta g^{t-1}(tau)"
    start = "L4" if momentum else "L3"             # the non-blocking AllReduce's line
    run.set_model(lambda: x)

    for t in run.iterations():
        # compute (the all-reduce of g^{t-1}(tau) is in flight)
        # L1: g_i^t(tau) <- (1/tau) sum_j grad F_i(x^t; xi_ij^t)                (y^t in Algorithm 5)
        run.accumulate(x, g_i, g_ij, progress=req)  # --poll: req is tested between layers
        # complete communication: g^{t-1}(tau) (implicit in the paper)
        run.collectives.wait(req, "L2 MPI_Wait(g^{t-1}(tau))")
        # Alg. 3  L2: x^{t+1} <- x^t - eta * g^{t-1}(tau)                            (eta = run.lr(t))
        # Alg. 4  L2: m^t <- gamma * m^{t-1} + g^{t-1}(tau);  L3: x^{t+1} <- x^t - eta * m^t
        # Alg. 5  L2: m^t <- gamma * m^{t-1} + g^{t-1}(tau);  L3: y^{t+1} <- y^t - eta * (gamma * m^t + g^{t-1}(tau))
        with run.clock.update(step):                                                  # (one fused pass)
            fused_step(x, g, m, run.lr(t), momentum=gamma, weight_decay=wd, mask=mask, nesterov=nesterov)
        # start communication
        # L3 (Alg. 3), L4 (Alg. 4, 5): non-blocking AllReduce g^t(tau) <- (1/N) sum_i g_i^t(tau)
        with run.clock.update(f"{start} g_i^t(tau) / N"):   # the mean's 1/N, the method's arithmetic
            g_i /= N
        req = run.collectives.iallreduce(comm, g_i, g, f"{start} MPI_Iallreduce(g_i^t(tau))")  # --allreduce ring: blocking, None
        g_i, g_i_sent = g_i_sent, g_i              # g_i^t stays untouched while in flight
    # the last all-reduce is completed and not applied
    run.collectives.wait(req, "L2 MPI_Wait(g^{T-1}(tau)), not applied")
    return x


def _decay(run):
    """(wd, mask): coupled weight decay of the update; mask is None when every weight is decayed."""
    return float(run.cfg.weight_decay), decay_mask(run.net)
