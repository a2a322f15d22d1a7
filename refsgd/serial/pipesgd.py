"""Serial renderings of Pipe-SGD, D-Sync and PS-Sync: N workers in one process, no MPI, no threads.

Written from the equations (Li et al. 2018, Algorithm 1; docs/algorithms.md), not from
``refsgd/algorithms/pipesgd.py``. With G[i] worker i's gradient at its w on its batch of step t::

    Pipe-SGD:  S[t] = AllReduce_c(G)                         the compressed sum of step t
               at step t, with k = 1 during the warm-up and K after it, and s = t - k:
               if s > (the last sum applied):  w <- w - gamma_t * S[s]   (S[s] = 0 for s < 0)
               then G is computed at w; the state after step t is w and S[t-K+1 .. t]
    D-Sync:    w <- w - gamma_t * AllReduce_c(G)
    PS-Sync:   w <- w - gamma_t * (G[1] + G[2] + ... + G[N-1])   (worker 0 is the server: no G)

AllReduce_c without compression is the plain sum over workers. With a codec, every worker's
gradient is rounded to float32 and encoded, and the encoded vectors are combined in the
Ring-AllReduce's order (block b of the vector summed from worker b on), each combination ``encode(decode(a) + decode(b))``; the result is
decoded (:func:`refsgd.serial.codecs.allreduce_sum`, the codecs written again in NumPy).

Micro-batches as in :mod:`refsgd.serial.ssgd`.
"""

import numpy as np

from refsgd.errors import RefsgdError
from refsgd.serial.codecs import allreduce_sum
from refsgd.serial.ssgd import _grads_at, _Stream


# ---------------------------------------------------------------------------- the renderings
def _options(cfg, name):
    if cfg.tau != 1 or cfg.momentum or cfg.nesterov or cfg.weight_decay or cfg.momentum_form != "pytorch":
        raise RefsgdError(f"--algo {name}: one batch per iteration and plain SGD (no --tau, --momentum, "
                          "--nesterov, --momentum-form or --weight-decay)")


def _out(net, cfg, schedule, N, T, names, shapes):
    return dict(w0=net.init_params(cfg.seed), batches=np.empty((T, N, 1, cfg.batch), np.int64),
                loss=np.zeros((T, N)), lr=np.array([schedule.lr(t) for t in range(T)]),
                states={k: np.empty((T, N) + s, net.dtype) for k, s in zip(names, shapes)})


def pipe_sgd(net, data, cfg, schedule, N, T):
    """Pipe-SGD (Algorithm 1) with iteration dependency K, warm-up epochs of dependency 1."""
    _options(cfg, "pipe-sgd")
    K = cfg.dependency
    stream, d = _Stream(data, cfg, N), net.num_params
    warmup = cfg.warmup_epochs * stream.nb
    out = _out(net, cfg, schedule, N, T, ["w", "g_sum"], [(d,), (K, d)])
    w = out["w0"].copy()                                 # the same w on every worker
    S = {}                                               # S[t]: the all-reduced sum of step t
    applied = -1
    for t in range(T):
        k = 1 if t < warmup else K
        s = t - k
        if s > applied:
            if s >= 0:
                w = w - float(out["lr"][t]) * S[s]
            applied = s
        W = np.tile(w, (N, 1))
        G = _grads_at(net, stream, W, t, 1, out["batches"], out["loss"])
        S[t] = allreduce_sum(G, cfg.compress)
        out["states"]["w"][t] = W
        pending = np.stack([S[r] if r >= 0 else np.zeros(d, net.dtype) for r in range(t - K + 1, t + 1)])
        out["states"]["g_sum"][t] = pending[None]
    return out


def d_sync(net, data, cfg, schedule, N, T):
    """D-Sync: w <- w - gamma_t * AllReduce_c(G), the summed (compressed) gradient."""
    _options(cfg, "d-sync")
    stream = _Stream(data, cfg, N)
    out = _out(net, cfg, schedule, N, T, ["w"], [(net.num_params,)])
    w = out["w0"].copy()
    for t in range(T):
        G = _grads_at(net, stream, np.tile(w, (N, 1)), t, 1, out["batches"], out["loss"])
        w = w - float(out["lr"][t]) * allreduce_sum(G, cfg.compress)
        out["states"]["w"][t] = w[None]
    return out


def ps_sync(net, data, cfg, schedule, N, T):
    """PS-Sync: worker 0 is the server; w <- w - gamma_t * (G[1] + ... + G[N-1]) in that order."""
    _options(cfg, "ps-sync")
    if N < 2:
        raise RefsgdError("ps-sync needs a server and at least one worker (--workers 2 or more)")
    if cfg.compress not in (None, "none"):
        raise RefsgdError("--compress does not apply to ps-sync")
    # the data is sharded over the N - 1 workers; the server's row has no batch (-1) and no loss
    stream = _Stream(data, cfg, N - 1)
    out = _out(net, cfg, schedule, N, T, ["w"], [(net.num_params,)])
    out["batches"][:, 0] = -1
    out["loss"][:, 0] = np.nan
    w = out["w0"].copy()
    for t in range(T):
        G = _grads_at(net, stream, np.tile(w, (N - 1, 1)), t, 1, out["batches"][:, 1:], out["loss"][:, 1:])
        g_sum = G[0].copy()
        for m in range(1, N - 1):
            g_sum += G[m]
        w = w - float(out["lr"][t]) * g_sum
        out["states"]["w"][t] = w[None]
    return out
