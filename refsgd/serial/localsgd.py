"""Serial rendering of local SGD (Lin et al. 2020, Algorithm 1; docs/algorithms.md, section Local
SGD): N workers in one process, no MPI, written from the equations::

    x_i <- U_i(x_i, grad f(x_i; xi_i^s))           every step s, each worker on its own
    x_i <- (1/N) sum_j x_j                          after every H-th step (s + 1 = H, 2H, ...)

U_i is worker i's local optimizer (its momentum buffer its own); the sum is the ring's
(:func:`refsgd.serial.codecs.allreduce_sum`); frozen parameters keep their values. Worker i's
mini-batch of step s is the sampler's, as in :mod:`refsgd.serial.ssgd`.
"""

import numpy as np

from refsgd.optim import SGD
from refsgd.serial.codecs import allreduce_sum
from refsgd.serial.ssgd import _grads_at, _record, _Stream


def local_sgd(net, data, cfg, schedule, N, T):
    """Local SGD with H = ``cfg.sync_every``; the trace fields (states x and U's per worker)."""
    stream, d, H = _Stream(data, cfg, N), net.num_params, cfg.sync_every
    x0 = net.init_params(cfg.seed)
    X = np.tile(x0, (N, 1))
    U = [SGD(d, net.dtype, momentum=cfg.momentum, nesterov=cfg.nesterov, weight_decay=cfg.weight_decay,
             form=cfg.momentum_form, decay_mask=None if net.trainable.all() else net.trainable)
         for _ in range(N)]
    names = ["x"] + [f"U.{k}" for k in U[0].state]
    out = dict(w0=x0, batches=np.empty((T, N, 1, cfg.batch), np.int64), loss=np.zeros((T, N)),
               lr=np.array([schedule.lr(s) for s in range(T)]), states=_record(T, N, d, net.dtype, names))
    for s in range(T):
        G = _grads_at(net, stream, X, s, 1, out["batches"], out["loss"])
        for i in range(N):
            U[i].step(X[i], G[i], out["lr"][s])
        if (s + 1) % H == 0:
            mean = allreduce_sum(X, "none") / N
            X[:, net.trainable] = mean[net.trainable]
        out["states"]["x"][s] = X
        for k in U[0].state:
            out["states"][f"U.{k}"][s] = np.stack([u.state[k] for u in U])
    return out
