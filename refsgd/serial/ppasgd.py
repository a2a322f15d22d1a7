"""Serial rendering of PP-ASGD and naive ASGD in the deterministic mode (``--staleness S``):
N processes x G gradient threads in one process, no MPI, no threads.

Written from docs/algorithms.md (section PP-ASGD), not from ``refsgd/algorithms/ppasgd.py``;
shared with it, from the modules below both: the network, ``randpick`` (the documented sample
stream, :func:`refsgd.datasets.sampler.thread_randpick`) and ``horizon`` (the coefficient of
eq. 2, :func:`refsgd.optim.horizon`). With V_v the w^ after v updates (V_0 = w_0)::

    D_A   = sum over processes r, threads g of  b * grad J(x_{r,g,t}; V_{max(t-S, 0)})
            (x_{r,g,t} = randpick(seed, r, g, t, n, b); D_L summed over g in order, then the
            processes' D_L in the ring's order, refsgd.serial.codecs.ring_sum)
    M    <- mu*M - lambda_t * D_A;   w <- w + M
    V_{t+1} = w + M * sum_{s=1}^{S+1} mu^s     (PP-ASGD)   or   w   (ASGD)

Every process holds the same w, M and w^. Traced: w, M, w_hat and the batches (T, N, G, b).
"""

import numpy as np

from refsgd.errors import RefsgdError
from refsgd.datasets.sampler import thread_randpick as randpick
from refsgd.optim import horizon
from refsgd.serial.codecs import ring_sum


def _render(net, data, cfg, schedule, N, T, predict):
    S = cfg.staleness
    if S is None:
        raise RefsgdError(f"the serial rendering of {cfg.algo} is the deterministic mode: give --staleness S")
    G = cfg.threads
    mu, b, n, d = cfg.momentum, cfg.batch, len(data.y_train), net.num_params
    w0 = net.init_params(cfg.seed)
    w, M = w0.copy(), np.zeros(d, net.dtype)
    V = {0: w0.copy()}
    lr = np.array([schedule.lr(t) for t in range(T)])
    out = dict(w0=w0, batches=np.empty((T, N, G, b), np.int64), loss=np.zeros((T, N)), lr=lr,
               states={k: np.empty((T, N, d), net.dtype) for k in ("w", "M", "w_hat")})
    g = np.empty(d, net.dtype)
    for t in range(T):
        at = V[max(t - S, 0)]
        D_L_of = np.empty((N, d), net.dtype)            # each process's D_L, summed by the all-reduce
        for r in range(N):
            D_L = None
            for th in range(G):
                idx = randpick(cfg.seed, r, th, t, n, b)
                out["batches"][t, r, th] = idx
                out["loss"][t, r] += net.loss_and_grad(at, data.x_train[idx], data.y_train[idx], out=g)
                D_g = g * b
                D_L = D_g if D_L is None else D_L + D_g
            D_L_of[r] = D_L
            out["loss"][t, r] /= G
        D_A = ring_sum(D_L_of)                          # L5: the all-reduce, in the ring's order
        M = mu * M - float(lr[t]) * D_A
        w = w + M
        V[t + 1] = w + horizon(mu, S) * M if predict else w.copy()
        V.pop(t - S, None)
        for k, v in (("w", w), ("M", M), ("w_hat", V[t + 1])):
            out["states"][k][t] = v
    return out


def pp_asgd(net, data, cfg, schedule, N, T):
    return _render(net, data, cfg, schedule, N, T, predict=True)


def asgd(net, data, cfg, schedule, N, T):
    return _render(net, data, cfg, schedule, N, T, predict=False)
