"""Serial rendering of DASO: P nodes x G local ranks in one process, no MPI.

Written from the reconstruction of docs/algorithms.md (section DASO), not from
``refsgd/algorithms/daso.py``. Worker i is local rank l = i mod G of node p = i div G (virtual
nodes of G consecutive ranks, ``--ranks-per-node G``). With X[i] worker i's parameters and
g[i] its gradient at X[i] on its batch of step t::

    node sync     gbar[p] = (ring sum over the node's ranks of g) / G;  X[i] <- U_i(X[i], gbar[p])
    blocking      (warm-up, cool-down; every step): with k the sending local rank,
                  xbar = AllReduce_bf16(X[p*G + k] for every node p) / P, written into every
                  rank of every node; k <- (k + 1) mod G
    cycling       every B steps (counted from the last change of B, W): s = ring sum over nodes of
                  X[p*G + k] (float), due W steps later with S = W; k <- (k + 1) mod G;
                  when due: X[p*G + k'] <- (2S X[p*G + k'] + s) / (2S + P), k' the sender,
                  written into every rank of node p
    (P = 1: no global syncs)

AllReduce_bf16 rounds every row to float32 and bfloat16 and combines them in the ring's order
(block b of the vector from row b on), each step ``bf16(decode(a) + decode(b))`` (:func:`refsgd.serial.codecs.allreduce_sum`). Only
the trainable parameters are written by the global syncs. The float sums (node sync, cycling)
are :func:`refsgd.serial.codecs.ring_sum`: the ring's order over the node's local ranks, and over
the nodes. The phases, B, W and the plateau rule
come from :class:`refsgd.optim.phases.Phases`, shared with the MPI loop as the lr schedule is; the plateau's
measure is the mean loss of every worker's batches in the epoch.

Micro-batches as in :mod:`refsgd.serial.ssgd`. Traced state: ``x`` and the local optimizer's
buffers ``U.*``.
"""

import numpy as np

from refsgd.errors import RefsgdError
from refsgd.optim import SGD
from refsgd.optim.phases import CYCLING, Phases, epoch_loss
from refsgd.serial.codecs import allreduce_sum, ring_sum
from refsgd.serial.ssgd import _grads_at, _record, _Stream


def daso(net, data, cfg, schedule, N, T):
    G = cfg.ranks_per_node
    if G is None:
        raise RefsgdError("the serial rendering of daso needs the node size: give --ranks-per-node G")
    if N % G or cfg.tau != 1:
        raise RefsgdError(f"daso: --ranks-per-node {G} must divide --workers {N}, and --tau must be 1")
    P = N // G
    stream, d = _Stream(data, cfg, N), net.num_params
    ipe = stream.nb
    phases = Phases(ipe, T, cfg)
    mask = None if net.trainable.all() else net.trainable
    x0 = net.init_params(cfg.seed)
    X = np.tile(x0, (N, 1))
    U = [SGD(d, net.dtype, momentum=cfg.momentum, nesterov=cfg.nesterov, weight_decay=cfg.weight_decay,
             form=cfg.momentum_form, decay_mask=mask) for _ in range(N)]
    names = ["x"] + [f"U.{k}" for k in U[0].state]
    out = dict(w0=x0, batches=np.empty((T, N, 1, cfg.batch), np.int64), loss=np.zeros((T, N)),
               lr=np.array([schedule.lr(t) for t in range(T)]), states=_record(T, N, d, net.dtype, names))
    sums = {}                                        # slot -> the sum over nodes sent by a group

    def write(p, k, new):
        """new into local rank k of node p (trainable entries), then to the node's every rank."""
        i = p * G + k
        if mask is None:
            X[i] = new
        else:
            np.copyto(X[i], new, where=mask)
        X[p * G:(p + 1) * G] = X[i]

    for t in range(T):
        phases.begin(t, lambda: epoch_loss([out["loss"][t - ipe:t, i] for i in range(N)]))  # noqa: B023 called within this iteration
        grads = _grads_at(net, stream, X, t, 1, out["batches"], out["loss"])
        for p in range(P):
            gbar = ring_sum(grads[p * G:(p + 1) * G]) / G      # the node's ring, local rank order
            for i in range(p * G, (p + 1) * G):
                U[i].step(X[i], gbar, out["lr"][t])
        if P > 1 and phases.phase(t) != CYCLING:
            k = phases.k
            xbar = allreduce_sum(X[k::G], "bf16") / P
            for p in range(P):
                write(p, k, xbar)
            phases.rotate(G)
        elif P > 1 and phases.sends():
            k = phases.k
            sums[phases.open_slot(t, k, phases.W)] = ring_sum(X[k::G])   # the group's ring, node order
            phases.rotate(G)
        for j, k, S in phases.due(t):
            for p in range(P):
                write(p, k, (X[p * G + k] * (2 * S) + sums[j]) / (2 * S + P))
        out["states"]["x"][t] = X
        for key in U[0].state:
            out["states"][f"U.{key}"][t] = np.stack([u.state[key] for u in U])
    return out
