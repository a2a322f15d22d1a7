"""Pipe-SGD (Li et al. 2018, Algorithm 1) and its baselines D-Sync and PS-Sync.

Y. Li, M. Yu, S. Li, S. Avestimehr, N. S. Kim, A. Schwing. "Pipe-SGD: A Decentralized Pipelined
SGD Framework for Distributed Deep Net Training." NeurIPS 2018. Algorithm 1, sections 3.1-3.2,
equations 2-7; docs/algorithms.md, "Pipe-SGD". Each worker (MPI rank) runs two threads:

Computation thread (here: the main thread)::

    L1  initialize the same model w[0], learning rate gamma, iteration dependency K, T
    L2  for t = 1..T do
    L3      wait until the aggregated gradient g^c_sum[t-K] (compressed) is ready
    L4      g_sum[t-K] <- Decompress(g^c_sum[t-K])
    L5      w[t] <- w[t-1] - gamma * g_sum[t-K]
    L6      load a batch B of training data
    L7      forward pass: loss f_B
    L8      backward pass: g_local[t] <- d f_B / d w[t]
    L9      g^c_local[t] <- Compress(g_local[t])
    L10     mark g^c_local[t] ready
    L11 end

Communication thread::

    C1  initialize g^c_sum of iterations 1-K .. 0 as zero, marked ready
    C2  for t = 1..T do
    C3      wait until g^c_local[t] is ready
    C4      AllReduce  g^c_sum[t] <- sum over workers of g^c_local[t]
    C5      mark g^c_sum[t] ready
    C6  end

Run: ``mpiexec -n 4 refsgd train --algo pipe-sgd --dependency 2 --compress t16 --lr 0.025``.
The all-reduce of iteration t runs in the communication thread while the computation thread
computes iterations t+1 .. t+K-1, so with K >= 2 an iteration costs max(update + compute,
communication) (eq. 4) instead of their sum (eq. 2).

D-Sync (``--algo d-sync``, the paper's decentralized synchronous baseline; docs/algorithms.md,
section SSGD), all on one thread, so the compression and the reduction are on the critical
path (with ``--compress t16`` / ``q8v`` it is the paper's D-Sync+T / D-Sync+Q)::

    L1  g_i <- grad F_i(w; xi_i)
    L2  AllReduce  g_sum <- sum_i g_i                  (blocking; with --compress the wire
                                                        carries g^c = Compress(g_i))
    L3  w <- w - gamma * g_sum

PS-Sync (``--algo ps-sync``, the paper's parameter-server baseline): rank 0 is the server and
holds no data::

    server:
      S1  receive every worker's gradient g_m (Gather)
      S2  g_sum <- g_1 + g_2 + ... + g_{N-1}          (in rank order)
      S3  w <- w - gamma * g_sum
      S4  send w to every worker (Bcast)
    worker m:
      W1  g_m <- grad at w on the next batch
      W2  push g_m to the server
      W3  pull: w <- the server's w

The three use the *sum* of the workers' gradients (each the mean over the worker's batch), not
the mean: gamma (``--lr``) absorbs 1/N.

Compression (``--compress none|t16|bf16|fp16|q8|q8v``, :mod:`refsgd.comm.codecs`): the wire carries the
compressed gradient and every reduction step decompresses, adds and compresses again: the
all-reduce is the paper's Ring-AllReduce (Figure 3b) over MPI Sendrecv, in refsgd's order, the
same bits under any MPI library; T16 keeps the upper 16 bits of each float32 (truncation), the
paper's Q8 is ``q8v``, 8-bit quantisation with one float32 scale per vector (``q8``: one per
block of 256 values). A float64 run rounds the gradient to float32 before compressing it.

State registered with the run (checkpointed; ``--trace`` records it after every step):
``w`` (w[t] of the listing: the weights the gradient of iteration t was computed at) and, for
Pipe-SGD, ``g_sum`` (K, d): the decompressed aggregated gradients g_sum[t-K+1 .. t], oldest
first, zero for iterations before the first; they are the ones later iterations still apply.
For D-Sync and PS-Sync, ``w`` after iteration t already has that iteration's sum applied.

Deviations and readings:

* refsgd's iteration t = 0 .. T-1 is the listing's t = 1 .. T. A run of T iterations computes
  T gradients and applies the first T-K of them (L5 of the last K iterations would apply the
  rest): the listing stops there, and so does this code. The model evaluated and returned is w.
  With K = 1 the loop is D-Sync's, one iteration late: Pipe-SGD's w after iteration t equals
  D-Sync's w after iteration t-1.
* The all-reduce of C4 is blocking, in the communication thread, on a duplicate of the run's
  communicator: two threads call MPI at once, so Pipe-SGD needs MPI_THREAD_MULTIPLE (checked
  before the first collective). The ready flags of L3, L10, C3 and C5 are counters under one
  condition variable; the hand-over buffers are K slots used round-robin (slot t mod K), which
  is enough because L3 of iteration t has waited for the all-reduce of t-K, the last one that
  read or wrote slot t mod K.
* Warm-up (``--warmup-epochs E``, default 0): as the paper trains AlexNet and ResNet ("D-Sync
  until the 5-th epoch"), the first E epochs use the dependency 1 (each iteration applies the
  sum of the iteration before it), then K. At the switch, the sums the dependency K would
  apply have already been applied, so K-1 iterations apply nothing while the pipeline fills,
  as at the start (C1).
* One micro-batch per iteration (``--tau 1``) and plain SGD (L5): the local-optimizer options
  (momentum, Nesterov, weight decay) do not apply and are refused.
* An exception in the communication thread (or an MPI error there) is handed to the
  computation thread, which stops with one message naming the rank, and the command line
  aborts every rank: the others may be blocked in an all-reduce this rank will never join.
* Timing: time blocked in L3 counts as idle, compression and decompression (L4, L9) as codec,
  the communication thread's all-reduces as communication in flight. The time spent in the
  ring's reduction steps (decompress, add, compress: inside the all-reduce) is
  ``Wire.op_seconds``; with ``--link`` the all-reduce is held for the link's transfer plus
  that operator time (eq. 5's gamma term: D-Sync+T/+Q pay it on the critical path, Pipe-SGD's
  communication thread beside the computation). The communication thread polls MPI while it waits and takes a core of
  its own: on a machine with fewer cores than threads it slows the computation.
* ``--allreduce ring`` (pipe-sgd, d-sync): the uncompressed all-reduces (C4, D-Sync's L2) are
  refsgd's Ring-AllReduce over point-to-point messages too, with no codec, the sum in the run's
  dtype: the same bits under any MPI library and as the serial rendering. Both are blocking
  already (C4 in the communication thread), so nothing else changes. With ``--compress`` the
  ring is the codec's whatever ``--allreduce`` says. PS-Sync has no all-reduce (its server sums
  the gathered gradients itself, in rank order): ``--allreduce`` does not apply to it.
* PS-Sync: the server's Gather and Bcast are MPI collectives (the tree MPI chooses); with
  ``--link`` they take no less than the parameter-server model, every message through the
  server's one link, ``(p - 1) (alpha + n beta)`` each way (docs/algorithms.md).
"""

import contextlib
import threading

import numpy as np
from mpi4py import MPI

from refsgd.errors import RankFailure, RefsgdError
from refsgd.comm import codecs
from refsgd.nn.network import model_copies
from refsgd.optim import fused_step


def check(args, world):
    """What only an MPI run can check (every rank, before the first collective); the options'
    checks are refsgd.options.checks.pipe_sgd."""
    if args.algo == "pipe-sgd" and MPI.Is_initialized() and MPI.Query_thread() < MPI.THREAD_MULTIPLE:
        levels = {MPI.THREAD_SINGLE: "single", MPI.THREAD_FUNNELED: "funneled", MPI.THREAD_SERIALIZED: "serialized"}
        raise RefsgdError("pipe-sgd calls MPI from two threads and needs MPI_THREAD_MULTIPLE, but the MPI library "
                          f"provides only MPI_THREAD_{levels.get(MPI.Query_thread(), '?').upper()} (unset "
                          "MPI4PY_RC_THREAD_LEVEL, or use an MPI built with thread support)")


def check_sizes(args, net, total):
    """--dependency K below the run's iterations, and its 4 K copies of the model within memory."""
    if args.algo != "pipe-sgd":
        return
    K = args.dependency
    if K >= total:
        raise RefsgdError(f"--dependency {K} is not below the run's {total} iterations: an update applies the summed "
                          f"gradient of the K-th last iteration, so the first K iterations apply nothing and this run "
                          f"would never apply a gradient; give a dependency below {total}")
    # g_sum (K) and its copy at the start, and the K hand-over slots of the local and the summed gradients
    model_copies(4 * K, net, f"--dependency {K}")


def train_pipe_sgd(run):
    """Pipe-SGD, Li et al. 2018 Algorithm 1: a computation and a communication thread per rank."""
    c = run.cfg
    K = c.dependency
    warmup = c.warmup_epochs * run.iters_per_epoch
    codec = _codec(run)
    t0 = run.t                                               # > 0 after --resume

    # L1: initialize the same model w[0], learning rate gamma, iteration dependency K, T
    w = run.register("w", run.init_params())
    g_sum_state = run.register("g_sum", np.zeros((K, w.size), w.dtype))   # g_sum[t-K+1 .. t], oldest first
    restored = g_sum_state.copy()                            # the sums of t0-K .. t0-1 (zeros at t0 = 0)
    g_local = np.empty_like(w)
    g_sum = np.empty_like(w)
    # the hand-over slots, t mod K: g^c_local[t] and g^c_sum[t], compressed or not
    slot = codec.empty if codec is not None else lambda d: np.zeros(d, w.dtype)
    local, summ = [slot(w.size) for _ in range(K)], [slot(w.size) for _ in range(K)]
    pipe = _Pipeline(t0)
    # the communication thread's own communicator and ring: a codec's, or under --allreduce ring the
    # uncompressed one (C4, below); without either, wire is None and C4 is MPI_Allreduce
    comm, wire = run.collectives.thread_channel(w.dtype)
    run.set_model(lambda: w)

    def communicate():
        """C1-C6 (C1: the sums before t0 are ready, see _Pipeline)."""
        # C2: for t = 1..T do
        for t in range(t0, run.total):
            # C3: wait until g^c_local[t] is ready
            if not pipe.wait_local(t):
                return
            # C4: AllReduce g^c_sum[t] <- sum over workers of g^c_local[t]
            with run.collectives.thread_comm("C4 AllReduce g^c_sum[t]", it=t, data=local[t % K]):
                if wire is None:
                    comm.Allreduce(local[t % K], summ[t % K], op=MPI.SUM)
                else:  # a codec's ring, or the uncompressed one of --allreduce ring
                    wire.allreduce_wire(comm, local[t % K], summ[t % K])
            # C5: mark g^c_sum[t] ready
            pipe.mark_sum(t)

    def decompressed(s, out):
        """g_sum[s]: zero before the first iteration, from the checkpoint before t0, else decoded
        into out (without a codec: slot s mod K itself)."""
        if s < 0:
            out[...] = 0
        elif s < t0:
            out[...] = restored[s - (t0 - K)]
        elif codec is None:
            return summ[s % K]
        else:
            codec.decode(summ[s % K], out)
        return out

    def settle():
        """Wait for every all-reduce started so far, then write g_sum[t-K+1 .. t] into the state."""
        t = run.t
        pipe.wait_sum(t)
        for r in range(K):
            g_sum_state[r] = decompressed(t - K + 1 + r, g_sum_state[r])
    run.on_settle(settle)

    applied = max((s - dependency_at(s, K, warmup) for s in range(t0)), default=-1)  # last sum applied
    with run.beside(communicate, stop=pipe.stop, fail=pipe.fail):   # the communication thread
        # L2: for t = 1..T do
        for t in run.iterations():
            k = dependency_at(t, K, warmup)
            # L3: wait until g^c_sum[t-K] is ready                              (complete communication)
            if t - k >= t0:
                with run.clock.idle("L3 wait until g^c_sum[t-K] is ready", awaits=("sum", t - k)):
                    pipe.wait_sum(t - k)
            if t - k > applied:
                # L4: g_sum[t-K] <- Decompress(g^c_sum[t-K])     (without compression: the slot itself)
                with run.clock.codec("L4 g_sum[t-K] <- Decompress(g^c_sum[t-K])") if codec is not None else _NOTHING:
                    src = decompressed(t - k, g_sum)
                # L5: w[t] <- w[t-1] - gamma * g_sum[t-K]                          (one fused pass)
                with run.clock.update("L5 w[t] <- w[t-1] - gamma g_sum[t-K]"):
                    fused_step(w, src, None, run.lr(t))
                applied = t - k
            # L6-L8: load a batch, forward pass, backward pass: g_local[t] <- d f_B / d w[t]   (compute)
            run.grad(w, g_local if codec is not None else local[t % K], label="L7 forward, L8 backward: g_local[t]")
            if codec is not None:
                # L9: g^c_local[t] <- Compress(g_local[t])                  (without compression: nothing)
                with run.clock.codec("L9 g^c_local[t] <- Compress(g_local[t])"):
                    codec.encode(g_local, local[t % K])
            # L10: mark g^c_local[t] ready                                       (start communication)
            run.clock.in_flight(("sum", t), "C4 AllReduce g^c_sum[t] (L10 -> L3)", local[t % K])
            pipe.mark_local(t)
        # the last K all-reduces complete (their sums are not applied: the listing ends)
        pipe.wait_sum(run.total - 1)
    return w


def train_d_sync(run):
    """D-Sync: decentralized synchronous SGD with the summed gradient (Pipe-SGD's baseline)."""
    w = run.register("w", run.init_params())
    g = np.empty_like(w)
    g_sum = np.empty_like(w)
    wire = run.collectives.open_wire()
    run.set_model(lambda: w)
    for t in run.iterations():
        # L1: g_i <- grad F_i(w; xi_i)                                      (compute)
        run.grad(w, g, label="L1 g_i <- grad F_i(w; xi_i)")
        # L2: AllReduce g_sum <- sum_i g_i (blocking); with --compress: g^c <- Compress(g),
        #     the all-reduce decompresses, adds and compresses at every step, g_sum <- Decompress
        run.collectives.allreduce_sum(run.comm, g, g_sum, wire, label="L2 MPI_Allreduce(g_i)")
        # L3: w <- w - gamma * g_sum                                        (one fused pass)
        with run.clock.update("L3 w <- w - gamma g_sum"):
            fused_step(w, g_sum, None, run.lr(t))
    return w


def train_ps_sync(run):
    """PS-Sync: synchronous SGD through a parameter server on rank 0 (Pipe-SGD's baseline)."""
    comm, P = run.comm, run.world
    w = run.register("w", run.init_params())
    run.set_model(lambda: w)                                 # every rank holds the server's w
    if run.rank == 0:
        # ---------------------------------------------------------------- the server
        G = np.empty((P, w.size), w.dtype)                   # row m: worker m's gradient
        nothing = np.zeros_like(w)                           # the server's own row (unused)
        g_sum = np.empty_like(w)
        for t in run.iterations():
            # S1: receive every worker's gradient
            with run.clock.idle("S1 MPI_Gather(g_m)"):
                comm.Gather(nothing, G, root=0)
            # S2: g_sum <- sum over workers m = 1..P-1 (in rank order)
            with run.clock.update("S2 g_sum <- g_1 + ... + g_{N-1}"):
                np.copyto(g_sum, G[1])
                for m in range(2, P):
                    g_sum += G[m]
            # S3: w <- w - gamma * g_sum                                        (one fused pass)
            with run.clock.update("S3 w <- w - gamma g_sum"):
                fused_step(w, g_sum, None, run.lr(t))
            # S4: send w to every worker
            with run.clock.idle("S4 MPI_Bcast(w)", w):
                comm.Bcast(w, root=0)
    else:
        # ---------------------------------------------------------------- a worker
        g = np.empty_like(w)
        for _ in run.iterations():
            # W1: g_m <- grad at w                                         (compute)
            run.grad(w, g, label="W1 g_m <- grad at w")
            # W2: push g_m to the server
            with run.clock.idle("W2 MPI_Gather(g_m)", g):
                comm.Gather(g, None, root=0)
            # W3: pull w
            with run.clock.idle("W3 MPI_Bcast(w)"):
                comm.Bcast(w, root=0)
    return w


def _codec(run):
    name = run.cfg.compress
    return None if name in (None, "none") else codecs.get(name)


def dependency_at(t, K, warmup_iters):
    """The iteration dependency of iteration t: 1 during the warm-up, K after it."""
    return 1 if t < warmup_iters else K


_NOTHING = contextlib.nullcontext()


class _Pipeline:
    """The ready flags of Algorithm 1: ``local`` is the last t whose g^c_local[t] is ready (L10),
    ``done`` the last t whose g^c_sum[t] is ready (C5); both under one condition variable. A
    failure of the communication thread is kept in ``error`` and wakes every waiter."""

    def __init__(self, t0):
        self.cond = threading.Condition()
        self.local = t0 - 1
        self.done = t0 - 1                  # C1: every sum before t0 is ready
        self.error = None
        self.stopping = False

    def mark_local(self, t):
        with self.cond:
            self.local = t
            self.cond.notify_all()

    def mark_sum(self, t):
        with self.cond:
            self.done = t
            self.cond.notify_all()

    def wait_local(self, t):
        """C3; False when the computation thread has stopped and no g^c_local[t] will come."""
        with self.cond:
            self.cond.wait_for(lambda: self.local >= t or self.stopping)
            return self.local >= t

    def wait_sum(self, t):
        """L3; raises RankFailure if the communication thread failed."""
        with self.cond:
            self.cond.wait_for(lambda: self.done >= t or self.error is not None)
            if self.done < t:
                raise RankFailure(f"rank {MPI.COMM_WORLD.Get_rank()}: the communication thread of pipe-sgd "
                                  f"failed: {type(self.error).__name__}: {self.error}")

    def fail(self, exc):
        with self.cond:
            self.error = exc
            self.cond.notify_all()

    def stop(self):
        with self.cond:
            self.stopping = True
            self.cond.notify_all()
