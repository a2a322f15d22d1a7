"""Serial renderings of LAGA-SGD, LAGA-SGDM and LAGA-SGDN: N workers in one process, no MPI.

Written from the equations of Hakimi et al. 2021, Algorithms 3-5 (docs/algorithms.md, section LAGA), not
from ``refsgd/algorithms/laga.py``: the workers are the first axis of (N, d) arrays and the
all-reduce sums the workers' G[i] / N over that axis in the ring's order
(:func:`refsgd.serial.codecs.ring_sum`; the MPI code divides before the sum).
The lag is a variable holding last step's mean gradient::

    G[i]  = (1/tau) sum_j grad F_i(X[i]; xi_ij^t)       (Algorithm 5: at Y[i])
    gbar  = sum_i (G[i] / N)  (the ring's order)          g^t(tau)
    D     = g_prev + wd * X                              g^{t-1}(tau) (+ coupled weight decay)
    LAGA-SGD:   X <- X - eta_t * D
    LAGA-SGDM:  M <- gamma*M + D;  X <- X - eta_t * M
    LAGA-SGDN:  M <- gamma*M + D;  Y <- Y - eta_t * (gamma*M + D)
    g_prev <- gbar                                       (g^{-1} = 0)

Micro-batches as in :mod:`refsgd.serial.ssgd` (the stream of :mod:`refsgd.run`). Each function
returns the trace fields w0, batches (T, N, tau, b), loss (T, N), lr (T,) and states
{name: (T, N, d)} with the names and order the MPI code registers: x (or y), m, g; ``g`` after
step t is g^t(tau), the all-reduce started at step t.
"""

import numpy as np

from refsgd.errors import RefsgdError
from refsgd.serial.codecs import ring_sum
from refsgd.serial.ssgd import _grads_at, _Stream


def _options(cfg, name, momentum):
    if cfg.nesterov or cfg.momentum_form != "pytorch":
        raise RefsgdError(f"--algo {name}: --nesterov and --momentum-form do not apply to LAGA "
                          "(its listings define the update; Nesterov is laga-sgdn)")
    if not momentum and cfg.momentum > 0:
        raise RefsgdError(f"--algo {name} (Algorithm 3) has no momentum; use laga-sgdm or laga-sgdn")
    return cfg.momentum, cfg.weight_decay


def _laga(net, data, cfg, schedule, N, T, variant):
    name = {"sgd": "laga-sgd", "sgdm": "laga-sgdm", "sgdn": "laga-sgdn"}[variant]
    gamma, wd = _options(cfg, name, momentum=variant != "sgd")
    stream, tau, d = _Stream(data, cfg, N), cfg.tau, net.num_params
    decay = wd * net.trainable.astype(net.dtype)         # wd where the weights are trainable
    w0 = net.init_params(cfg.seed)
    X = np.tile(w0, (N, 1))                              # x (Algorithms 3, 4) or y (Algorithm 5)
    M = np.zeros((N, d), net.dtype)
    g_prev = np.zeros(d, net.dtype)                      # g^{-1}(tau) = 0
    names = {"sgd": ["x", "g"], "sgdm": ["x", "m", "g"], "sgdn": ["y", "m", "g"]}[variant]
    out = dict(w0=w0, batches=np.empty((T, N, tau, cfg.batch), np.int64), loss=np.zeros((T, N)),
               lr=np.array([schedule.lr(t) for t in range(T)]),
               states={k: np.empty((T, N, d), net.dtype) for k in names})
    for t in range(T):
        eta = float(out["lr"][t])  # a Python float keeps float32 arrays float32, as in the MPI code
        G = _grads_at(net, stream, X, t, tau, out["batches"], out["loss"])
        gbar = ring_sum(G / N)                           # the all-reduce of step t of g_i / N (lands at t+1)
        D = g_prev[None, :] + decay[None, :] * X         # the lagged average, decayed
        if variant == "sgd":
            X = X - eta * D
        elif variant == "sgdm":
            M = gamma * M + D
            X = X - eta * M
        else:
            M = gamma * M + D
            X = X - eta * (gamma * M + D)
        g_prev = gbar
        st = out["states"]
        st[names[0]][t] = X
        if "m" in st:
            st["m"][t] = M
        st["g"][t] = np.tile(g_prev, (N, 1))
    return out


def laga_sgd(net, data, cfg, schedule, N, T):
    """LAGA-SGD (Algorithm 3): x^{t+1} = x^t - eta_t * g^{t-1}(tau)."""
    return _laga(net, data, cfg, schedule, N, T, "sgd")


def laga_sgdm(net, data, cfg, schedule, N, T):
    """LAGA-SGDM (Algorithm 4): m^t = gamma m^{t-1} + g^{t-1}(tau); x^{t+1} = x^t - eta_t m^t."""
    return _laga(net, data, cfg, schedule, N, T, "sgdm")


def laga_sgdn(net, data, cfg, schedule, N, T):
    """LAGA-SGDN (Algorithm 5): m^t = gamma m^{t-1} + g^{t-1}(tau);
    y^{t+1} = y^t - eta_t (gamma m^t + g^{t-1}(tau)), gradients at y."""
    return _laga(net, data, cfg, schedule, N, T, "sgdn")
