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
gradient is rounded to float32 and encoded, and the encoded vectors are combined in MPICH's
recursive-doubling order (:func:`refsgd.comm.codecs.tree_order`), each combination
``encode(decode(a) + decode(b))``; the result is decoded. The codecs are written again here in
NumPy from their definitions (docstring of :mod:`refsgd.comm.codecs`), so the Numba kernels of
the MPI code are checked against an independent twin.

Micro-batches as in :mod:`refsgd.serial.ssgd`.
"""

import numpy as np

from refsgd import RefsgdError
from refsgd.comm.codecs import Q8_BLOCK, tree_order
from refsgd.serial.ssgd import _grads_at, _Stream


# ---------------------------------------------------------------------------- NumPy codecs
def _t16_encode(x):
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    h = (u >> 16).astype(np.uint16)
    nan = ((u & 0x7F800000) == 0x7F800000) & ((u & 0x007FFFFF) != 0)
    h[nan] = 0x7FC0 | ((u[nan] >> 16) & 0x8000).astype(np.uint16)
    return h


def _t16_decode(h):
    return (h.astype(np.uint32) << 16).view(np.float32)


def _q8_encode(x):
    """(scales (B,), values (B, 256) int8) of the blocks of x."""
    x = np.asarray(x, dtype=np.float32)
    B = -(-x.size // Q8_BLOCK)
    v = np.zeros(B * Q8_BLOCK, np.float32)
    v[:x.size] = x
    v = v.reshape(B, Q8_BLOCK)
    finite = np.all(np.isfinite(v), axis=1)
    m = np.where(finite, np.max(np.abs(np.where(np.isfinite(v), v, 0)), axis=1), 0).astype(np.float32)
    s = m / np.float32(127)
    safe = np.where(s > 0, s, np.float32(1))
    q = np.clip(np.rint(v / safe[:, None]), -127, 127).astype(np.int8)
    q[s == 0] = 0
    q[~finite] = 0
    s = np.where(finite, s, np.float32(np.nan)).astype(np.float32)
    return s, q


def _q8_decode(c, n):
    s, q = c
    return (q.astype(np.float32) * s[:, None]).ravel()[:n]


def _codec(name, n):
    """(encode, decode, add) of the codec ``name`` for vectors of n values."""
    if name == "t16":
        def add(a, b):
            return _t16_encode(_t16_decode(a) + _t16_decode(b))
        return _t16_encode, _t16_decode, add
    if name == "q8":
        def add(a, b):
            return _q8_encode(_q8_decode(a, n) + _q8_decode(b, n))
        return _q8_encode, lambda c: _q8_decode(c, n), add
    raise RefsgdError(f"--compress {name}: the serial rendering knows none, t16 and q8")


def allreduce_sum(G, compress):
    """The (compressed) all-reduce of the rows of G: the sum, in G's dtype."""
    if compress in (None, "none"):
        return G.sum(axis=0)
    encode, decode, add = _codec(compress, G.shape[1])
    return decode(tree_order([encode(g) for g in G], add)).astype(G.dtype)


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
    K = cfg.dependency or 2
    stream, d = _Stream(data, cfg, N), net.num_params
    warmup = (cfg.warmup_epochs or 0) * stream.nb
    out = _out(net, cfg, schedule, N, T, ["w", "g_sum"], [(d,), (K, d)])
    w = out["w0"].copy()                                 # the same w on every worker
    S = {}                                               # S[t]: the all-reduced sum of step t
    applied = -1
    for t in range(T):
        k = 1 if t < warmup else K
        s = t - k
        if s > applied:
            if s >= 0:
                w = w - out["lr"][t] * S[s]
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
        w = w - out["lr"][t] * allreduce_sum(G, cfg.compress)
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
        w = w - out["lr"][t] * g_sum
        out["states"]["w"][t] = w[None]
    return out


RENDERINGS = {"pipe-sgd": pipe_sgd, "d-sync": d_sync, "ps-sync": ps_sync}
