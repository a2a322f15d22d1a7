"""Serial renderings of the SSGD baselines: N workers in one process, no MPI.

Written from the equations (docs/algorithms.md, section SSGD), not from the MPI code: the workers
are the first axis of (N, d) arrays and an all-reduce is a sum over that axis, in the order of the
MPI code's Ring-AllReduce (:mod:`refsgd.serial.codecs`, ``--allreduce ring``). They share only
the network, the sampler and the local optimizer with ``refsgd/algorithms/ssgd.py``
(``--compress``: the codecs' NumPy twins, :mod:`refsgd.serial.codecs`); when the
two agree, both are right, and these produce the golden trajectories (``refsgd golden``).

Worker i's micro-batch k is row ``k % nb`` of ``epoch_batches(seed, k // nb, i, N, b, n)``,
``nb = n // (N * b)``; step t uses micro-batches ``t*tau .. t*tau + tau - 1`` (the stream
documented in :mod:`refsgd.run`).

Each function returns a dict with the trace fields: w0 (d,), batches (T, N, tau, b),
loss (T, N), lr (T,), states {name: (T, N, d)} (names as the MPI code registers them).
"""

import numpy as np

from refsgd.datasets import epoch_batches
from refsgd.optim import SGD
from refsgd.serial.codecs import allreduce_sum, ring_sum


class _Stream:
    """The micro-batches of N workers, per the documented sampler."""

    def __init__(self, data, cfg, N):
        self.data, self.cfg, self.N = data, cfg, N
        self.n = len(data.y_train)
        self.nb = self.n // (N * cfg.batch)

    def indices(self, i, k):
        return epoch_batches(self.cfg.seed, k // self.nb, i, self.N, self.cfg.batch, self.n)[k % self.nb]


def _grads_at(net, stream, X, t, tau, batches, losses):
    """G[i] = (1/tau) sum_j grad F_i(X[i]; xi_ij^t), the N workers' accumulated gradients."""
    N, d = X.shape
    G = np.zeros((N, d), dtype=X.dtype)
    g = np.empty(d, dtype=X.dtype)
    for i in range(N):
        for j in range(tau):
            idx = stream.indices(i, t * tau + j)
            batches[t, i, j] = idx
            losses[t, i] += net.loss_and_grad(X[i], stream.data.x_train[idx], stream.data.y_train[idx], out=g)
            G[i] += g
        G[i] /= tau
        losses[t, i] /= tau
    return G


def _record(T, N, d, dtype, names):
    return {name: np.empty((T, N, d), dtype=dtype) for name in names}


def ssgd(net, data, cfg, schedule, N, T, segments=None):
    """SSGD with accumulation (LAGA Algorithms 1-2); U = the local optimizer of ``cfg``.

        g_i^t = (1/tau) sum_j grad F_i(x^t; xi_ij^t);  g^t = (1/N) sum_i g_i^t;  x^{t+1} = U(x^t, g^t)

    The sum is the ring's (:func:`refsgd.serial.codecs.allreduce_sum`) over the whole vector, or
    with ``segments`` [(name, lo, hi)] one ring per segment (SSGD-OPT).
    """
    stream, tau, d = _Stream(data, cfg, N), cfg.tau, net.num_params
    x0 = net.init_params(cfg.seed)
    X = np.tile(x0, (N, 1))                              # every worker's x
    U = [SGD(d, net.dtype, momentum=cfg.momentum, nesterov=cfg.nesterov, weight_decay=cfg.weight_decay,
             form=cfg.momentum_form, decay_mask=None if net.trainable.all() else net.trainable)
         for _ in range(N)]
    names = ["x"] + [f"U.{k}" for k in U[0].state]
    out = dict(w0=x0, batches=np.empty((T, N, tau, cfg.batch), np.int64), loss=np.zeros((T, N)),
               lr=np.array([schedule.lr(t) for t in range(T)]), states=_record(T, N, d, net.dtype, names))
    for t in range(T):
        G = _grads_at(net, stream, X, t, tau, out["batches"], out["loss"])
        if segments is None:
            g = allreduce_sum(G, cfg.compress) / N   # the all-reduce: a sum over workers
        else:                                            # one all-reduce per segment
            g = np.empty(d, X.dtype)
            for _, lo, hi in segments:
                g[lo:hi] = ring_sum(G[:, lo:hi])
            g /= N
        for i in range(N):
            U[i].step(X[i], g, out["lr"][t])
        out["states"]["x"][t] = X
        for k in U[0].state:
            out["states"][f"U.{k}"][t] = np.stack([u.state[k] for u in U])
    return out


def ssgd_opt(net, data, cfg, schedule, N, T):
    """SSGD-OPT computes the iterates of SSGD with one all-reduce per layer's segment
    (``net.segments``): reducing layer by layer, as soon as each segment is final, changes when
    bytes move, and the ring's order within each segment (its blocks are the segment's), not
    which numbers are added."""
    return ssgd(net, data, cfg, schedule, N, T, segments=net.segments)


def ssgd_nag(net, data, cfg, schedule, N, T):
    """SSGD with NAG (Sato et al. Algorithm 4), summed gradients:

        D_A = sum_i sum_j sum_{samples k} grad J(x_k; w^);  M <- mu*M - lambda*D_A;
        w <- w + M;  w^ <- w + mu*M
    """
    stream, tau, d, mu = _Stream(data, cfg, N), cfg.tau, net.num_params, cfg.momentum
    w0 = net.init_params(cfg.seed)
    W, M, W_hat = np.tile(w0, (N, 1)), np.zeros((N, d), net.dtype), np.tile(w0, (N, 1))
    out = dict(w0=w0, batches=np.empty((T, N, tau, cfg.batch), np.int64), loss=np.zeros((T, N)),
               lr=np.array([schedule.lr(t) for t in range(T)]), states=_record(T, N, d, net.dtype, ["w", "M", "w_hat"]))
    for t in range(T):
        D = _grads_at(net, stream, W_hat, t, tau, out["batches"], out["loss"]) * (tau * cfg.batch)
        D_A = allreduce_sum(D, cfg.compress)
        M = mu * M - float(out["lr"][t]) * D_A
        W = W + M
        W_hat = W + mu * M
        out["states"]["w"][t], out["states"]["M"][t], out["states"]["w_hat"][t] = W, M, W_hat
    return out
