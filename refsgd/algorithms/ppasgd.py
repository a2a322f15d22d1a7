"""PP-ASGD and naive ASGD (Sato et al. 2017, Algorithms 1-3 and equation 2).

I. Sato, R. Fujisaki, Y. Oyama, A. Nomura, S. Matsuoka. "Asynchronous, Data-Parallel Deep
Convolutional Neural Network Training with Linear Prediction Model for Parameter Transition."
ICONIP 2017; docs/algorithms.md, section PP-ASGD. One MPI process per node (rank) with one update
thread (here: the main thread) and G gradient threads (``--threads G``) sharing w, w^, D_1..D_G,
M and the flag F.

Algorithm 1, one process per node (its lines here P1-P9)::

    P1  begin
    P2    global w, w^ <- w_0; D_1..D_G, M <- 0; F <- true
    P3    thread update(w_0, mu, lambda, t_f, G)
    P4    thread grad(1, b, X)
    ...   thread grad(g, b, X)  for g = 2..G
    P8    wait thread
    P9    w <- w (output)

Algorithm 2, update (the main thread)::

    L2  for t <- 0 to t_f - 1 do
    L3      D_L <- D_1 + ... + D_G
    L4      D_1, ..., D_G <- 0
    L5      D_A <- MPI_Allreduce(D_L)
    L6      M <- mu*M - lambda*D_A
    L7      w <- w + M
    L8      w^ <- f_S(w, M)          f_S(w, M) = w + M * sum_{s=1}^{S+1} mu^s   (eq. 2)
    L9  F <- false

Algorithm 3, grad(g, b, X) (gradient thread g; its lines here G2-G9, as Pipe-SGD's
communication thread's are C1-C6)::

    G2  do
    G3      for k <- 1 to b do  x_k <- randpick(X)  // random sampling
    G6      w_l <- w^                               // local copy
    G7      D_g <- D_g + sum_k grad J(x_k; w_l)
    G9  while F

Run: ``mpiexec -n 2 refsgd train --algo pp-asgd --threads 2 --momentum 0.99 --lr 1e-4``;
``--algo asgd`` is naive ASGD, L8 replaced by ``w^ <- w`` (it keeps the momentum M).

Two modes:

* threaded (default): the G gradient threads run freely, as in the paper, except that a thread
  holds at most one sub-batch not yet consumed (see the deviations below). Staleness of a
  gradient = the number of updates between the update after which its w_l was copied and the
  update that consumes it (0 for a gradient computed at the w^ of the update just before).
  S_bar is the time average over every consumed gradient of every process so far (an
  all-reduce of two float64 per update), S = floor(S_bar) feeds f_S. Each update records the
  number of sub-batch gradients it consumed over all processes (``gradients``, the paper's
  Fig. 4c batch size), their mean staleness (``staleness``), S_bar and S in the metrics file;
  the progress display shows S_bar. Not deterministic: it depends on timing. D_g is a *sum*:
  an update consumes at most G sub-batches per process (fewer when gradients are slower
  than updates, the paper's regime), and lambda multiplies their sum, as in the paper. The time split is the
  update thread's: its wait for gradients is its compute (``run.clock.awaiting_gradients``); the
  gradient threads' seconds, summed over the threads, are ``thread_compute``.
* ``--staleness S`` (deterministic, what the serial rendering computes; the paper generated
  staleness artificially on CIFAR-10): at update t each thread g computes one sub-batch at the
  w^ published after update t-S-1 (w_0 before the first), the threads in parallel, and L3 sums
  D_1..D_G in order; f_S uses this S. MPI equals serial.

randpick: thread g of rank r draws sub-batch j (its j-th, counted from the start of the run) as
``np.random.default_rng([seed, r, g, j]).integers(0, n, b)``: b samples with replacement, a
stream per (seed, rank, thread) that needs no saved state to resume.

Deviations and readings:

* Labels: the update thread's lines (Algorithm 2) are L2-L9, the gradient threads' (Algorithm 3)
  G2-G9 and the process's (Algorithm 1) P1-P9, so that one number names one line. What the
  paper does not have carries no number: the update thread's wait for its gradient threads
  (``wait for D_1..D_G``, ``wait for a gradient``) and the all-reduce of the staleness counts
  that S_bar needs (``S_bar: MPI_Allreduce(staleness)``).
* ``--lr`` is lambda and multiplies a *sum* over samples, threads and processes (as SSGD-NAG);
  ``--momentum`` is mu (the paper: 0.99). The local optimizer options do not apply.
* ``--allreduce ring``: L5's MPI_Allreduce (blocking, as the listing) is refsgd's uncompressed
  Ring-AllReduce over point-to-point messages instead (:meth:`refsgd.run.Collectives.allreduce_sum`),
  the same bits under any MPI library and as the serial rendering. The staleness counts of L8
  (integers, exact in any order) stay an MPI_Allreduce.
* L3-L4 take each D_g and reset it under thread g's lock (a swap of buffers), so a gradient a
  thread adds meanwhile is never lost. w^ is replaced (a new version) under a lock; a thread
  copies it (G6) under the same lock.
* Threaded mode: an update waits until its process has at least one gradient (the paper's
  updates run incessantly; on a machine with fewer cores than threads they would starve the
  gradient threads), and a gradient thread, once it has added a sub-batch to D_g, waits until
  L4 has taken D_g before it starts the next one (at most one sub-batch per thread per update,
  G x N per update over all processes). The paper has no such wait because its regime never
  needs one: its models are "computationally intensive", the update frequency F_U exceeds the
  gradient frequency (staleness = updates per gradient period + 1), so each update finds at
  most about one sub-batch per GPU; and its gradient threads run on GPUs while the update
  thread has the CPU. Where a gradient is faster than an update (digits_mlp: ~80 us against an
  all-reduce), and the threads share the cores with the update thread, free-running threads
  took the CPU that both processes' update threads need at the same time to complete an
  all-reduce: the default command made 1-5 updates of ~600 sub-batches each from its 10
  epochs of gradients (about 8 % accuracy; an all-reduce took 20-90 ms, 0.7 ms once the threads
  had finished). The Numba kernels already release the GIL (``nogil=True``); compiled busy
  threads that never take the GIL starve the all-reduce as much, so the cause is CPU
  contention, not the GIL. The wait keeps the paper's regime (and frees the cores while the
  threads are ahead); where gradients are slower than updates it never binds. An iteration of
  the run is one update. ``--epochs E`` is E epochs of
  gradients (``run.budget``: iters_per_epoch x G x N sub-batches): each process's threads compute
  their share and stop (:func:`_share`), and the updates are as many as it takes to consume them
  (an update whose process has no gradient left to wait for contributes none).
* Only the main thread calls MPI (MPI_THREAD_FUNNELED is enough; checked before the first
  collective). An exception in a gradient thread stops the update loop with one message naming
  the rank and the thread, and the command line aborts every rank. The threads are joined
  before the method returns; checkpoints and trace records are taken between updates, where w,
  M and w^ are consistent (in threaded mode the gradients accumulated but not yet consumed are
  not checkpointed: resume is exact in the deterministic mode only).
"""

import threading

import numpy as np
from mpi4py import MPI

from refsgd.errors import RankFailure, RefsgdError
from refsgd.nn.network import model_copies
from refsgd.datasets.sampler import thread_randpick as randpick
from refsgd.optim import horizon, momentum_predict
from refsgd.run import prompt_handover


def check(args, world):
    """What only an MPI run can check (every rank, before the first collective); the options'
    checks are refsgd.options.checks.pp_asgd."""
    if MPI.Is_initialized() and MPI.Query_thread() < MPI.THREAD_FUNNELED:
        raise RefsgdError(f"{args.algo} runs gradient threads beside the thread that calls MPI and needs at least "
                          "MPI_THREAD_FUNNELED (unset MPI4PY_RC_THREAD_LEVEL)")


def check_sizes(args, net, total):
    """--staleness S below the run's iterations; the copies of the model that S and --threads G
    keep (S + 1 versions of w^ and G gradients; threaded: 4 G buffers) within memory."""
    S, G = args.staleness, args.threads
    if S is not None and S >= total:
        raise RefsgdError(f"--staleness {S} is not below the run's {total} iterations: update t consumes gradients "
                          f"computed at the w^ of update t-S-1, so every update of this run would use the initial "
                          f"model's gradients; give a staleness below {total}")
    if S is not None:
        model_copies(S + 1 + G, net, f"--staleness {S} and --threads {G}")
    else:
        model_copies(4 * G + 1, net, f"--threads {G}")


def train(run, predict=True):
    """PP-ASGD (predict=True) or naive ASGD (predict=False)."""
    c = run.cfg
    G = c.threads
    mu, b, n = c.momentum, c.batch, run.n_train
    fixed = c.staleness
    # P2: global w, w^ <- w_0; D_1..D_G, M <- 0; F <- true
    w = run.register("w", run.init_params())
    M = run.register("M", np.zeros_like(w))
    w_hat = run.register("w_hat", w.copy())
    D_L = np.empty_like(w)
    D_A = np.empty_like(w)
    run.set_model(lambda: w)
    if fixed is not None:
        return _deterministic(run, w, M, w_hat, D_L, D_A, G, mu, b, n, fixed, predict)
    return _threaded(run, w, M, w_hat, D_L, D_A, G, mu, b, n, predict)


def train_pp_asgd(run):
    return train(run, predict=True)


def train_asgd(run):
    return train(run, predict=False)


def _update(run, t, w, M, w_hat, D_L, D_A, mu, S, predict):
    """L5-L8 of Algorithm 2 (L3-L4 done by the caller into D_L)."""
    # L5: D_A <- MPI_Allreduce(D_L)                                         (blocking)
    run.collectives.allreduce_sum(run.comm, D_L, D_A, label="L5 MPI_Allreduce(D_L)")
    # L6: M <- mu*M - lambda*D_A
    # L7: w <- w + M
    # L8: w^ <- f_S(w, M) = w + M * sum_{s=1}^{S+1} mu^s   (naive ASGD: w^ <- w)
    with run.clock.update("L6 M, L7 w, L8 w^ <- f_S(w, M)" if predict else "L6 M, L7 w, L8 w^ <- w"):  # one pass
        momentum_predict(w, M, w_hat, D_A, run.lr(t), mu, horizon(mu, S) if predict else None)


def _deterministic(run, w, M, w_hat, D_L, D_A, G, mu, b, n, S, predict):
    """--staleness S: update t consumes one sub-batch per thread computed at w^ of update t-S-1."""
    seed, rank = run.cfg.seed, run.rank
    hist = run.register("w_hat_history", np.tile(w_hat, (S + 1, 1)), trace=False)  # versions t-S .. t
    D = np.zeros((G,) + w.shape, w.dtype)

    def grad(g, t, at):
        """Thread g's sub-batch for update t: D_g <- sum_k grad J(x_k; w_l) at ``at``."""
        idx = randpick(seed, rank, g, t, n, b)
        loss = run.grad_at(at, D[g], idx, label="G7 D_g <- D_g + sum_k grad J(x_k; w_l)")
        D[g] *= b                      # grad_at gives the mean over the b samples; the paper sums
        return idx, loss

    with run.gradient_threads(G) as pool:
        for t in run.iterations():
            # the w^ published after update t-S-1 (w_0 before the first): version max(t-S, 0)
            at = hist[max(t - S, 0) % (S + 1)]     # overwritten only after the threads are done
            # Algorithm 3, one pass of each thread g: G3 randpick, G6 w_l <- w^, G7 D_g <- ...
            # (the update thread's wait for them is its compute)
            idx, losses = zip(*run.in_threads(pool, lambda g: grad(g, t, at), G, "wait for D_1..D_G"))  # noqa: B023 called within this iteration
            run.records.trace_batches(idx)
            run.add_loss(sum(losses), G)
            # L3: D_L <- D_1 + ... + D_G;  L4: D_g <- 0
            with run.clock.update("L3 D_L <- D_1 + ... + D_G"):
                np.copyto(D_L, D[0])
                for g in range(1, G):
                    D_L += D[g]
            _update(run, t, w, M, w_hat, D_L, D_A, mu, S, predict)
            hist[(t + 1) % (S + 1)] = w_hat                     # version t+1
            run.records.add("gradients", G * run.world)
            run.records.add("staleness", S)
    return w


class _Shared:
    """What the gradient threads share with the update thread: w^ and its version, D_g with a
    lock each, the staleness counts of the gradients in D_g, the flag F, a failure, and the
    gradients this process may still compute (``quota``, None: no limit) and the threads that
    still compute."""

    def __init__(self, w_hat, G, quota=None):
        self.lock = threading.Lock()                     # w^ and its version
        self.version = 0                                  # updates applied to the published w^
        self.w_hat = w_hat.copy()
        self.D = [np.zeros_like(w_hat) for _ in range(G)]
        self.spare = [np.zeros_like(w_hat) for _ in range(G)]
        self.locks = [threading.Lock() for _ in range(G)]
        self.count = [0] * G                              # gradients in D_g
        self.losses = [0.0] * G                           # the sum of their losses
        self.vsum = [0] * G                               # sum of their w^ versions
        self.ready = threading.Condition()                # a gradient was added somewhere
        self.F = True
        self.error = None
        self.quota, self.produced, self.live = quota, 0, G


def _threaded(run, w, M, w_hat, D_L, D_A, G, mu, b, n, predict):
    """The threaded mode: G free-running gradient threads, staleness measured."""
    seed, rank = run.cfg.seed, run.rank
    sh = _Shared(w_hat, G, quota=_share(run))
    stats = run.register("staleness_sums", np.zeros(2), trace=False)   # every process: [gradients, staleness]

    def grad_thread(g):
        """Algorithm 3 for thread g."""
        j, w_l, d = 0, np.empty_like(w_hat), np.empty_like(w_hat)
        try:
            while sh.F:                                   # G9: while F
                with sh.ready:                            # this process's share of --epochs is done
                    if sh.quota is not None and sh.produced >= sh.quota:
                        break
                    sh.produced += 1
                idx = randpick(seed, rank, g, j, n, b)    # G3: x_k <- randpick(X)
                j += 1
                with sh.lock:                             # G6: w_l <- w^
                    np.copyto(w_l, sh.w_hat)
                    v = sh.version
                loss = run.grad_at(w_l, d, idx, label="G7 D_g <- D_g + sum_k grad J(x_k; w_l)")   # G7
                d *= b
                with sh.locks[g]:
                    sh.D[g] += d
                    sh.count[g] += 1
                    sh.losses[g] += loss
                    sh.vsum[g] += v
                with sh.ready:
                    sh.ready.notify_all()
                    # one sub-batch per thread per update: wait until L4 has taken D_g (see the docstring)
                    sh.ready.wait_for(lambda: sh.count[g] == 0 or not sh.F)
        except BaseException as exc:  # noqa: BLE001 -- handed to the update thread
            sh.error = (g, exc)
        finally:
            with sh.ready:
                sh.live -= 1
                sh.ready.notify()

    threads = [threading.Thread(target=grad_thread, args=(g,), name=f"pp-asgd-grad-{rank}-{g}", daemon=True)
               for g in range(G)]
    with prompt_handover():                          # the threads pass the GIL to each other promptly
        for th in threads:
            th.start()
        try:
            for t in run.iterations():
                # an update consumes at least one gradient of this process (see the docstring),
                # unless its threads computed its whole share of --epochs
                with run.clock.awaiting_gradients("wait for a gradient"), sh.ready:  # the update thread's compute
                    sh.ready.wait_for(lambda: sh.error is not None or any(sh.count) or sh.live == 0)
                if sh.error is not None:
                    g, exc = sh.error
                    raise RankFailure(f"rank {rank}: gradient thread {g} of {run.cfg.algo} failed: "
                                      f"{type(exc).__name__}: {exc}")
                # L3: D_L <- D_1 + ... + D_G;  L4: D_1, ..., D_G <- 0 (each taken by a swap under its lock)
                count = vsum = 0
                loss = 0.0
                with run.clock.update("L3 D_L <- D_1 + ... + D_G, L4 D_g <- 0"):
                    D_L[...] = 0
                    for g in range(G):
                        with sh.locks[g]:
                            sh.D[g], sh.spare[g] = sh.spare[g], sh.D[g]
                            count, vsum, loss = count + sh.count[g], vsum + sh.vsum[g], loss + sh.losses[g]
                            sh.count[g] = sh.vsum[g] = 0
                            sh.losses[g] = 0.0
                        D_L += sh.spare[g]
                        sh.spare[g][...] = 0
                with sh.ready:                                # the threads whose D_g was taken go on
                    sh.ready.notify_all()
                # staleness of this update's gradients: t - version, summed over every process
                mine = np.array([count, count * t - vsum], dtype=np.float64)
                every = np.empty(2)
                with run.clock.idle("S_bar: MPI_Allreduce(staleness)"):
                    run.control_comm.Allreduce(mine, every, op=MPI.SUM)
                stats += every
                S_bar = stats[1] / max(stats[0], 1.0)
                S = int(np.floor(S_bar))
                _update(run, t, w, M, w_hat, D_L, D_A, mu, S, predict)
                with sh.lock:                                 # publish w^ as version t+1
                    np.copyto(sh.w_hat, w_hat)
                    sh.version = t + 1
                run.add_loss(loss, count)                     # the loss of the gradients consumed
                run.records.add("gradients", every[0])
                run.records.add("staleness", every[1] / max(every[0], 1.0))
                run.records.add("S_bar", S_bar)
                run.records.add("S", S)
                run.progress_info["S_bar"] = f"{S_bar:.2f}"
        finally:
            sh.F = False                                      # L9: F <- false
            with sh.ready:
                sh.ready.notify_all()
            for th in threads:
                th.join(timeout=60.0)
    return w


def _share(run):
    """The gradients this process's threads may still compute: with --epochs E (run.budget), its
    share of the E epochs of gradients not yet consumed (the processes' shares add up to them);
    None with --iterations."""
    if run.budget is None:
        return None
    left = int(round(run.budget - run.grads_done))
    return max(left // run.world + (run.rank < left % run.world), 0)
