"""Serial renderings of DC-S3GD (Rigazzi 2019) and DC-ASGD (Zheng et al. 2017), no MPI.

Written from the equations (docs/algorithms.md, section DC-S3GD), workers as the first axis of (N, d)
arrays; shared with the MPI code: only the network, the sampler and the schedules. Eq. 17, the
weight-decay schedule and the compensated server step are written here again, as NumPy
expressions, so that the MPI code (a fused Numba loop for DC-S3GD) is checked against an
independent rendering.

DC-S3GD, worker i (iteration 0 is the prologue, iterations 1.. the loop):
    t = 0:  g_i = grad(w_i); dw_i = U(g_i); w_i += dw_i
    t > 0:  g_i = grad(w_i); D_i = (sum_j dw_j) / N - dw_i (the sum in the ring's order);
            g~_i = g_i + lambda_i g_i g_i D_i;
            dw_i = U(g~_i); w_i += D_i + dw_i
    U(g) = v <- mu*v - eta_t*(g + wd_t*w_i),   wd_t = k * wd * eta_t / max_s eta_s (0 in frozen layers)
    lambda_i = lambda_0 ||g_i|| / ||g_i g_i D_i||  (eq. 17, squares summed in index order; 0 where
    g_i g_i D_i = 0), over the
    whole vector or, with --lambda-norm tensor, over each tensor of the layout

DC-ASGD in the deterministic order (server rank 0, workers m = 1..N-1 served round-robin):
    for each step t, for m = 1..N-1:
        g = grad(w_bak(m)) on worker m's micro-batch t   (w_bak(m): the weights m last received)
        w <- w - eta_t (g + lambda g g (w - w_bak(m)));  w_bak(m) <- w
    traced state "w": row 0 the server's w, row m worker m's copy (= w_bak(m)).
"""

import numpy as np

from refsgd.serial.codecs import ring_sum
from refsgd.serial.ssgd import _Stream

EPS = 1e-7  # DC-ASGD's adaptive lambda: lambda_0 / sqrt(MeanSquare + EPS)


def _lambda_eq17(lambda0, g, ggD):
    """lambda_0 ||g|| / ||g (.) g (.) D||, and 0 where the correction term vanishes. The squared
    norms are summed in index order, in float64 (``cumsum``: its last entry is the sequential sum)."""
    den = np.sqrt(np.cumsum(ggD * ggD, dtype=np.float64)[-1])
    return 0.0 if den == 0 or lambda0 == 0 else lambda0 * np.sqrt(np.cumsum(g * g, dtype=np.float64)[-1]) / den


def _parts(net, cfg):
    """Slices of eq. 17's norms: the whole vector, or each tensor (--lambda-norm tensor)."""
    if cfg.lambda_norm == "tensor":
        return [slice(o, o + int(np.prod(s))) for _, o, s in net.layout]
    return [slice(0, net.num_params)]


def dcs3gd(net, data, cfg, schedule, N, T):
    stream, d, mu = _Stream(data, cfg, N), net.num_params, cfg.momentum
    w0 = net.init_params(cfg.seed)
    W, DW, V = np.tile(w0, (N, 1)), np.zeros((N, d), net.dtype), np.zeros((N, d), net.dtype)
    lr = np.array([schedule.lr(t) for t in range(T)])
    # section IV-A: the weight decay follows the schedule, times k; frozen layers are not decayed
    wd_t = cfg.wd_k * cfg.weight_decay * lr / lr.max() if cfg.weight_decay and lr.max() > 0 else np.zeros(T)
    decayed = net.trainable.astype(net.dtype)
    parts = _parts(net, cfg)
    out = dict(w0=w0, batches=np.empty((T, N, 1, cfg.batch), np.int64), loss=np.zeros((T, N)), lr=lr,
               states={k: np.empty((T, N, d), net.dtype) for k in ("w_i", "dw_i", "U.v")})
    g = np.empty(d, net.dtype)
    for t in range(T):
        eta, wd = float(lr[t]), float(wd_t[t])  # Python floats keep float32 arrays float32
        mean_dw = ring_sum(DW) / N                      # the all-reduce of the dw_i (the ring's order), / N
        for i in range(N):
            idx = stream.indices(i, t)
            out["batches"][t, i, 0] = idx
            out["loss"][t, i] = net.loss_and_grad(W[i], data.x_train[idx], data.y_train[idx], out=g)
            if t == 0:
                V[i] = mu * V[i] - eta * (g + wd * decayed * W[i])
                DW[i] = V[i]
                W[i] = W[i] + DW[i]
            else:
                D = mean_dw - DW[i]                     # eq. 9
                ggD = g * g * D
                lam = np.empty(d, net.dtype)
                for p in parts:                         # eq. 17 over the whole vector or each tensor
                    lam[p] = _lambda_eq17(cfg.lambda0, g[p], ggD[p])
                gt = g + lam * ggD                      # eq. 10
                V[i] = mu * V[i] - eta * (gt + wd * decayed * W[i])   # eq. 11
                DW[i] = V[i]
                W[i] = W[i] + D + DW[i]                 # eq. 12
        out["states"]["w_i"][t], out["states"]["dw_i"][t], out["states"]["U.v"][t] = W, DW, V
    return out


def dcasgd(net, data, cfg, schedule, N, T):
    M, d = N - 1, net.num_params
    stream = _Stream(data, cfg, M)
    w0 = net.init_params(cfg.seed)
    w, w_bak = w0.copy(), np.tile(w0, (M, 1))
    ms = np.zeros(d, net.dtype)
    decayed = net.trainable.astype(net.dtype)               # no decay in frozen layers
    out = dict(w0=w0, batches=np.full((T, N, 1, cfg.batch), -1, np.int64), loss=np.full((T, N), np.nan),
               lr=np.array([schedule.lr(t) for t in range(T)]), states={"w": np.empty((T, N, d), net.dtype)})
    g = np.empty(d, net.dtype)
    for t in range(T):
        for m in range(1, M + 1):
            idx = stream.indices(m - 1, t)
            out["batches"][t, m, 0] = idx
            out["loss"][t, m] = net.loss_and_grad(w_bak[m - 1], data.x_train[idx], data.y_train[idx], out=g)
            lam = cfg.dc_lambda
            if cfg.dc_adaptive:
                ms = cfg.dc_ms_decay * ms + (1 - cfg.dc_ms_decay) * g * g
                lam = cfg.dc_lambda / np.sqrt(ms + EPS)
            w = w - float(out["lr"][t]) * (g + decayed * cfg.weight_decay * w + lam * g * g * (w - w_bak[m - 1]))
            w_bak[m - 1] = w
        out["states"]["w"][t, 0] = w
        out["states"]["w"][t, 1:] = w_bak
    return out
