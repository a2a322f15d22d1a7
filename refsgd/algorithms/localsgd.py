"""Local SGD: each worker takes H steps of its own, then the models are averaged by one
all-reduce. T. Lin, S. U. Stich, K. K. Patel, M. Jaggi, "Don't Use Large Mini-Batches, Use Local
SGD", ICLR 2020, Algorithm 1 (docs/algorithms.md, section Local SGD). Per worker k of K, local
step s = 0, 1, ... (the paper's round t and step h of the round, s = t H + h)::

    L1  for s <- 0, 1, ... do
    L2      g^k <- grad f(x^k; xi^k_s)                     (one mini-batch of worker k)
    L3      x^k <- x^k - gamma_s * g^k                     (U: the local optimizer)
    L4      if (s + 1) mod H == 0 then
    L5          x^k <- (1/K) sum_k x^k                     (AllReduce, blocking)

Run: ``mpiexec -n 4 refsgd train --algo local-sgd --sync-every H`` (H = ``--sync-every``,
default 4; H = 1 is SSGD with the models, not the gradients, averaged).

Compared with DASO (refsgd/algorithms/daso.py), which also lets workers step on their own
between global syncs: DASO averages the gradients within a node at every step, syncs only one
group of ranks per global sync, non-blocking and received W steps later with the weights of
its eq. 1, in bf16 when blocking, and changes its interval B at each plateau; local SGD has no
tier within a node, averages every worker's model at once, blocking, in the run's dtype, every
H steps, H fixed. Local SGD with H steps is DASO with one rank per node, every rank in one
group, W = 0, B = H fixed and a plain mean.

Deviations and readings:

* One iteration of refsgd is one local step (L2-L5), so an epoch has as many iterations as
  SSGD's and ``--sync-every H`` counts them; the mini-batch of step s is batch s of the sampler
  every synchronous method uses (:func:`refsgd.datasets.epoch_batches`).
* L3 is the local optimizer U of the command line (plain SGD as written; ``--momentum``,
  ``--nesterov``, ``--weight-decay`` as for SSGD). Algorithm 1 has no momentum: with it, each
  worker's momentum buffer stays its own and is not averaged at L5 (only the models are).
* L5's mean is a sum over the ranks (``run.collectives.allreduce_sum``; ``--allreduce ring``: refsgd's
  ring, the serial rendering's order) divided by K; the frozen parameters keep their values
  (the same on every rank, they would move by an ulp in (x + x + x) / 3).
* The model evaluated is the mean of the workers' models (an all-reduce), which after L5 is
  every worker's x.
"""

import numpy as np



def train(run):
    """Local SGD, Lin et al. 2020 Algorithm 1."""
    comm, K, H = run.comm, run.world, run.cfg.sync_every
    x = run.register("x", run.init_params())
    U = run.optimizer()
    g = np.empty_like(x)
    x_sum = np.empty_like(x)
    x_bar = np.empty_like(x)                       # the evaluated mean

    def average():
        with run.clock.idle("evaluation MPI_Allreduce(x^k)"):
            return run.collectives.average_model(comm, x, x_bar)
    run.set_model(average)

    for s in run.iterations():
        # L2: g^k <- grad f(x^k; xi^k_s)                                   (compute)
        run.grad(x, g, label="L2 g^k <- grad f(x^k; xi^k_s)")
        # L3: x^k <- x^k - gamma_s * g^k                                   (U)
        with run.clock.update("L3 x^k <- x^k - gamma_s g^k"):
            U.step(x, g, run.lr(s))
        # L4: if (s + 1) mod H == 0
        if (s + 1) % H == 0:
            # L5: x^k <- (1/K) sum_k x^k                                   (blocking)
            run.collectives.allreduce_sum(comm, x, x_sum, label="L5 MPI_Allreduce(x^k)")
            with run.clock.update("L5 x^k <- (1/K) sum_k x^k"):
                np.divide(x_sum, K, out=x_sum)
                np.copyto(x, x_sum, where=run.net.trainable)   # frozen parameters keep their values
    return x
