"""DASO: Distributed Asynchronous and Selective Optimization (Coquelin et al. 2022, section 3).

D. Coquelin, C. Debus, M. Goetz, F. von der Lehr, J. Kahn, M. Siggel, A. Streit. "Accelerating
neural network training with distributed asynchronous and selective optimization (DASO)."
Preprint, version of June 2, 2022. Section 3, Figures 1-5, equation 1. The paper has no listing; this
is the reconstruction of docs/algorithms.md, section DASO. Ranks form P nodes of G ranks
(:mod:`refsgd.comm.topology`); global group k holds local rank k of every node. Per batch t, on
every rank::

    L1  forward/backward on the local batch -> g
    L2  local sync: g <- Allreduce_local(g) / G                              (Figure 2)
    L3  local optimizer step with g (the local optimizer U: SGD, momentum, ...)
    L4  if the phase is warm-up or cool-down (blocking), every batch:
    L5      on the ranks of the sending group k: x <- Allreduce_group_k(bf16(x)) / P   (Figure 3)
    L6      local update: Bcast_local(x, root = local rank k)                (Figure 4)
    L7      k <- (k + 1) mod G
    L8  if the phase is cycling:
    L9      if c mod B == 0: the ranks of group k start Iallreduce_group_k(x) (float32);
            remember (request, k, S = W); k <- (k + 1) mod G
    L10     if a request started S batches ago is due: Wait; on its group's ranks
            x <- (2S x + sum_i x_i) / (2S + P)                               (eq. 1)
            then Bcast_local(x, root = that group's local rank)

Run: ``mpiexec -n 4 refsgd train --algo daso --ranks-per-node 2 --momentum 0.9``.

Phases (:class:`refsgd.optim.phases.Phases`): the first ``--warmup-epochs`` (default 1) and the last
``--cooldown-epochs`` (default 1) epochs are blocking; the epochs between them cycle with
B = ``--sync-every`` (B_max, default 4, the paper's setting) and W = max(1, B / 4). At the start
of each cycling epoch after the first, the previous epoch's training loss (mean over every rank
and batch) is observed: ``--plateau-patience`` (default 2) observations in a row without a
relative improvement of ``--plateau-threshold`` (default 0.05) over the best are a plateau, and
B and W halve (down to 1); at B = W = 1 a plateau resets them to B_max and B_max / 4. c counts
the batches since (B, W) last changed, so the first batch of a setting sends. Every change
(phase, B, W) is logged and recorded in the metrics file (``events``).

Readings and deviations (docs/algorithms.md lists them too):

* Rotation: the sending group advances when a global sync is *sent* (as HeAT does), not when it
  is received: with W = B the same group would otherwise start a second request first.
* Listing order L9 before L10: with W = B (B = W = 1) a new sync starts before the previous one
  is received, so up to two are in flight; each has its own buffers.
* What moves: the trainable parameters (a frozen layer's weights are never written; the whole
  vector travels). The local optimizer's state (momentum) stays local, as in HeAT. The local
  sync averages gradients, the global syncs average parameters.
* The blocking syncs carry bfloat16 on the wire (round to nearest even, :mod:`refsgd.comm.codecs`):
  each reduction step decodes, adds in float32 and rounds to bfloat16 again; the result is
  decoded and divided by P. The cycling syncs send float32 (in a float64 run: float64), as the
  paper says casting would delay the start of the send.
* A sync started in the cycling phase is received W batches later whatever the phase is then
  (the first cool-down batches may still merge one); a sync still in flight when the run ends
  is completed and not applied (the listing ends).
* The peer implementation (HeAT's DASO) differs, and this code does not copy it: HeAT reduces
  B and W after patience + 1 bad epochs, starts cycling at B = 4, W = 1 whatever B_max is,
  decrements W by one instead of halving it, resets k to 0 every epoch and forces a blocking
  float32 average on the last batch of every epoch.
* One node (P = 1): there is no global network, so there are no global syncs (a bf16 cast of
  x every batch would only round it); DASO is then SSGD with the mean gradient of the node.
* ``--allreduce ring``: the float sums (L2's node-local sync over the node's G ranks, L9's cycling
  sync over the group's P ranks, and the evaluated model's average) go through refsgd's
  uncompressed Ring-AllReduce over point-to-point messages on those communicators, in their rank
  order (local rank; node), each blocking (:meth:`refsgd.run.Collectives.ring_sum`): L9's sync is then
  complete when it starts and L10 merges it W batches later as the listing says, without a
  request to wait for, so the cycling syncs no longer overlap the batches between (the
  trajectory is the same). The bf16 syncs (L5) always take the ring; the Bcasts copy and sum
  nothing. The same bits under any MPI library and as the serial rendering.
* One micro-batch per batch (``--tau 1``). The model evaluated is the mean of every rank's x
  (during cycling the nodes differ; after a blocking sync they agree), its frozen weights
  copied, not averaged, so that they stay bitwise w0 (``Collectives.average_model``).
* P is the number of nodes, the size of a global group (:class:`refsgd.comm.topology.Topology`),
  in L5's division and in eq. 1's ``2S + P``: the paper says "the number of GPUs in the global
  network", but eq. 1 sums one model per node, and only with P the nodes do its weights add up
  to 1 (HeAT divides by its group's size too).
* The wait: a sync started at batch t (L9) is merged at batch t + W (L10) with S = W, W being
  section 3.3's "batches to wait" (B/4 at first, halved on its own at a plateau; Figure 5's S),
  not section 3.2's "B forward-backward passes"; one batch is one forward-backward pass.
* L5 divides the decoded bf16 sum by P in float32 (x's dtype), once, after the reduction
  (exact for P a power of two, where a bf16 division would agree; HeAT divides before the cast).
* L2's division by G is done inside L3's fused pass (``U.step(..., divide=G)``), element by
  element in x's dtype: bit for bit the listing's order. Eq. 1's merge is one pass in place.

Emulated links: ``--link`` delays the global groups' collectives (between nodes), ``--local-link``
the node-local ones. Traffic: the bytes each rank puts into global and node-local collectives
are counted per iteration (metrics ``global_bytes`` / ``local_bytes``).

State: ``x`` and the local optimizer's buffers are traced and checkpointed; the phase counters
(``daso``: B, W, c, k, best, bad count and the two in-flight slots) and the receive buffers of
the cycling syncs (``sync_sum``) are checkpointed, completed first, so that a resumed run
continues bitwise.
"""

import numba as nb
import numpy as np
from mpi4py import MPI

from refsgd.comm import codecs
from refsgd.comm.link import Link
from refsgd.comm.topology import Topology
from refsgd.optim.phases import CYCLING, Phases, epoch_loss

BLOCKING_CODEC = "bf16"


def train(run):
    """DASO: hierarchical syncs with rotating groups and three phases (see the module docstring)."""
    c = run.cfg
    link = getattr(run.comm, "link", None)
    local_link = Link.parse(c.local_link, "--local-link") if c.local_link else None
    topo = Topology(run.comm, c.ranks_per_node, link, local_link, run.traffic)
    G, P, local, group, me = topo.G, topo.P, topo.local, topo.group, topo.local_rank
    if c.ranks_per_node is None:
        run.records.found["ranks_per_node"] = G      # the trace names the nodes found (a serial rendering needs G)
    run.log(f"  daso: {topo.describe()}" + (f"; local {local_link} -- EMULATED" if local_link else "")
            + ("; one node: no global syncs (use --ranks-per-node to form several)" if topo.P == 1 else ""))
    x = run.register("x", run.init_params())
    U = run.optimizer()
    phases = Phases(run.iters_per_epoch, run.total, c)
    run.register("daso", phases.state, trace=False)          # filled from the checkpoint on --resume
    sync_sum = run.register("sync_sum", np.zeros((2,) + x.shape, x.dtype), trace=False)
    send = [np.empty_like(x), np.empty_like(x)]
    reqs = [None, None]
    g = np.empty_like(x)
    g_node = np.empty_like(x)
    mixed = np.empty_like(x)
    mask = None if run.net.trainable.all() else run.net.trainable
    codec = codecs.get(BLOCKING_CODEC)
    wire = codec.open()
    wsend, wrecv = wire.buffers(x.size)
    x_bar = np.empty_like(x)

    def set_x(new):
        if mask is None:
            x[...] = new
        else:
            np.copyto(x, new, where=mask)

    def average():
        return run.collectives.average_model(run.control_comm, x, x_bar)
    run.set_model(average)

    def last_epoch_loss():
        lo = run.t - run.iters_per_epoch
        return epoch_loss(run.control_comm.allgather(run.records.iterations["loss"][lo:run.t]))

    try:
        for t in run.iterations():
            change = phases.begin(t, last_epoch_loss)
            if change is not None:
                run.event(change[0], **change[1])
            phase = phases.phase(t)
            # L1: forward/backward on the local batch -> g                       (compute)
            run.grad(x, g, progress=[r for r in reqs if r is not None], label="L1 forward/backward -> g")
            # L2: local sync: g <- Allreduce_local(g) / G
            if run.collectives.ring:  # --allreduce ring: refsgd's ring over the node's ranks (Deviations)
                run.collectives.ring_sum(local, g, g_node, label="L2 local sync ring all-reduce_local(g)")
            else:
                with run.clock.idle("L2 local sync MPI_Allreduce_local(g)", g):
                    local.Allreduce(g, g_node, op=MPI.SUM)
            # L3: local optimizer step with g (U divides by G within its one pass)
            with run.clock.update("L3 local optimizer step"):
                U.step(x, g_node, run.lr(t), divide=G)
            if P == 1:
                pass                            # one node: no global network, no global sync
            elif phase != CYCLING:
                # L4: warm-up or cool-down: a blocking global sync every batch
                k = phases.k
                if me == k:
                    # L5: x <- Allreduce_group_k(bf16(x)) / P, cast back
                    with run.clock.codec("L5 bf16(x)"):
                        codec.encode(x, wsend)
                    with run.clock.idle("L5 global sync Allreduce_group_k(bf16(x))", wsend):
                        wire.allreduce_wire(group, wsend, wrecv)
                    with run.clock.codec("L5 cast back"):
                        codec.decode(wrecv, mixed)
                    mixed /= P
                    set_x(mixed)
                # L6: local update: Bcast_local(x, root = local rank k)
                with run.clock.idle("L6 MPI_Bcast_local(x)", x):
                    local.Bcast(x, root=k)
                # L7: k <- (k + 1) mod G
                phases.rotate(G)
            else:
                # L8: cycling
                # L9: every B batches, group k starts the non-blocking global sync (start communication)
                if phases.sends():
                    k = phases.k
                    j = phases.open_slot(t, k, phases.W)
                    if me == k:
                        np.copyto(send[j], x)
                        # --allreduce ring: refsgd's ring over the group, blocking, no request (Deviations)
                        reqs[j] = run.collectives.iallreduce(group, send[j], sync_sum[j],
                                                 "L9 global sync MPI_Iallreduce_group_k(x)")
                    phases.rotate(G)
            # L10: a sync started S batches ago is due: wait, merge by eq. 1, Bcast_local
            for j, k, S in phases.due(t):                                  # (complete communication)
                if me == k:
                    if reqs[j] is not None:
                        run.collectives.wait(reqs[j], "L10 MPI_Wait(global sync)")
                        reqs[j] = None
                    with run.clock.update("L10 merge by eq. 1"):
                        merge(x, sync_sum[j], S, P, mask)
                with run.clock.idle("L10 MPI_Bcast_local(x)", x):
                    local.Bcast(x, root=k)
        # a sync still in flight is completed, not applied (the listing ends)
        for j in range(2):
            if reqs[j] is not None:
                run.collectives.wait(reqs[j], "L10 MPI_Wait(global sync), not applied")
                reqs[j] = None
    finally:
        wire.close()     # only blocking all-reduces use it: nothing of it is in flight
    topo.close()
    return x


def merge(x, sync_sum, S, P, mask=None):
    """Equation 1 in place, in one pass: x <- (2S x + sum_i x_i) / (2S + P), in x's dtype (where
    ``mask``, a bool array, is True: frozen layers keep x). Per element the NumPy passes
    ``x * (2S)``, ``+ sum``, ``/ (2S + P)``, so bit for bit their result."""
    t = x.dtype.type
    _merge(x, sync_sum, t(2 * S), t(2 * S + P), np.zeros(0, np.bool_) if mask is None else mask)


@nb.njit(cache=True, nogil=True)
def _merge(x, sync_sum, two_s, den, mask):
    masked = mask.size > 0
    for j in range(x.size):
        v = (x[j] * two_s + sync_sum[j]) / den
        if not masked or mask[j]:
            x[j] = v


def warm(dtype):
    """Eq. 1's kernel called once on one-element vectors of ``dtype``, before the run's clock
    starts (the typing of a kernel's first call stays out of the update: refsgd.optim.warm)."""
    one = np.ones(1, dtype)
    merge(one, one.copy(), 1, 1)
