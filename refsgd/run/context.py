"""The :class:`Run` itself: the communicator and its ranks, the model, the data stream, the
local optimizer, the state registered by the method, and the loop ``run.iterations()``. It
composes its clock (``run.clock``, :mod:`.timing`), its collectives (``run.collectives``,
:mod:`.collectives`) and its records (``run.records``, :mod:`.records`); the loop calls the
boundary's bookkeeping (:mod:`.bookkeeping`: the loss check, evaluation, checkpoint, stop)."""

import contextlib
import functools
import math
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from mpi4py import MPI

from refsgd.errors import RankFailure, RefsgdError
from refsgd.finite import _all_finite, _no_nan
from refsgd import failure, timeline
from refsgd.datasets import epoch_batches
from refsgd import optim
from refsgd.optim import SGD

from .collectives import Collectives
from .timing import Clock, prompt_handover, _LayerSpans, _link_observed, _test_all
from .records import Records, eval_schedule
from . import bookkeeping
from .progress import Progress


class Run:
    """One rank's Run (see :mod:`refsgd.run`): the loop, the data stream, the registered state,
    composed with its clock (``clock``), collectives (``collectives``) and records (``records``)."""

    def __init__(self, comm, net, data, cfg, schedule, log=print, restorer=None, checkpoint=None, servers=0,
                 by_gradients=False, warm=None, lagged_checks=False):
        self.comm = comm
        self._warm_kernels = warm   # the method's own kernels' warm-up, warm(dtype) (refsgd.algorithms.warm_of)
        # bookkeeping collectives go around the emulated link and the traffic counter
        self.control_comm = MPI.Intracomm(comm) if type(comm) is not MPI.Intracomm else comm
        self.traffic = getattr(comm, "traffic", None)
        self.rank = comm.Get_rank()
        self.world = comm.Get_size()
        # ranks 0 .. servers-1 hold no data (parameter servers); the data is sharded over the rest
        self.servers = servers
        self.workers = self.world - servers
        self.data_rank = self.rank - servers
        self.net = net
        self.data = data
        self.cfg = cfg
        self.tau = cfg.tau
        self.schedule = schedule
        self._print = log
        self._bar = None
        self.n_train = len(data.y_train)
        self.nb = self.n_train // (self.workers * cfg.batch)
        if self.nb < self.tau:
            raise RefsgdError(
                f"the training set has {self.n_train} samples: too few for {self.workers} workers x batch "
                f"{cfg.batch} x tau {self.tau} (one iteration needs {self.workers * cfg.batch * self.tau})")
        self.iters_per_epoch = self.nb // self.tau
        # one epoch: the micro-batch gradients of iters_per_epoch iterations of every worker
        self.grads_per_epoch = self.iters_per_epoch * self.tau * self.workers
        self.grads_done = 0.0  # micro-batch gradients consumed by the iterations done (all workers)
        # by_gradients (a method whose iterations consume however many gradients have arrived,
        # PP-ASGD's threaded mode): --epochs E ends the run after E epochs of gradients, in as many
        # iterations as that takes (total is then None); --iterations N is N iterations
        self.budget = cfg.epochs * self.grads_per_epoch if by_gradients and not cfg.iterations else None
        self.total = (None if self.budget is not None else cfg.iterations if cfg.iterations
                      else cfg.epochs * self.iters_per_epoch)
        self.t = 0
        self._first = 0
        self.wall = 0.0
        self._thread_compute = None  # gradient threads' compute (grad_at), thread-seconds
        self.state = {}
        self._untraced = set()
        self._model = None
        self._epoch_cache = (None, None)
        self._loss = 0.0
        self._nloss = 0
        self._settle = None
        self._lock = threading.Lock()
        self.progress_info = {}  # shown beside the loss in the progress display
        self.first_bad = None
        # a method whose communication may be in flight at a boundary (Method.in_flight_at_boundary)
        # has its loss check started there and completed at the next (bookkeeping.check)
        self._lagged_checks = lagged_checks
        self._lagged_check = None
        #: what the run keeps of itself (Records): per iteration, evaluations, events, segments, --trace
        self.records = Records(self.tau * self.workers, tracing=bool(cfg.trace), traffic=self.traffic,
                               restorer=restorer)
        # checkpoint = (folder, every K iterations, configuration dict) or None
        self._checkpoint = checkpoint
        self._restorer = restorer
        if restorer is not None:
            self.t = restorer.t
            self.grads_done = float(np.sum(self.records.iterations["gradients"]))
            if restorer.schedule_state is not None:
                schedule.state[...] = restorer.schedule_state
        # --timeline: the spans of a window of iterations (refsgd.timeline); without it a recorder
        # that records nothing (timeline.enabled is False), called by the same timing points
        tl = timeline.NoTimeline()
        if getattr(cfg, "timeline", None) is not None:
            tl = timeline.Timeline(*timeline.window(cfg.timeline, self.total, self.t))
        #: the timing points and the timers of the iteration (Clock), from here on without Numba's compiling
        self.clock = Clock(tl)
        if self.rank == 0:  # said before Numba compiles the first kernel (from the method's set-up on)
            self.clock.compiling.announce = self._announce_compiling
        #: the sums over ranks, the requests in flight, the wires (Collectives), timed by the clock
        self.collectives = Collectives(comm, cfg, self.clock, net.trainable)

    def log(self, msg):
        """Print on rank 0 (above the progress bar when there is one)."""
        if self.rank != 0:
            return
        if self._bar is not None:
            self._bar.write(msg)
        else:
            self._print(msg)

    def event(self, what, **fields):
        """Record (and log) a change of the method's regime at the current iteration."""
        rec = dict(iteration=self.t, epoch=self.epochs_done, what=what, **fields)
        self.records.events.append(rec)
        detail = ", ".join(f"{k} {v}" for k, v in fields.items())
        self.log(f"iter {self.t:>6}  epoch {rec['epoch']:6.2f}  {what}" + (f": {detail}" if detail else ""))

    # ------------------------------------------------------------------ state and helpers
    def register(self, name, array, trace=True):
        """Register an algorithm state array (updated in place from now on); returns it.
        ``trace=False``: checkpointed but not recorded by --trace (bookkeeping that is not part
        of a worker's state as the listing defines it, e.g. receive buffers, phase counters)."""
        if name in self.state:
            raise ValueError(f"state {name!r} registered twice")
        self.state[name] = array
        if not trace:
            self._untraced.add(name)
        if self._restorer is not None:
            self._restorer.fill(name, array)
        return array

    def init_params(self):
        return self.net.init_params(self.cfg.seed)

    def optimizer(self, **overrides):
        """The local optimizer U configured on the command line, its state registered."""
        c = self.cfg
        kw = dict(momentum=c.momentum, nesterov=c.nesterov, weight_decay=c.weight_decay,
                  form=c.momentum_form, decay_mask=None if self.net.trainable.all() else self.net.trainable)
        kw.update(overrides)
        opt = SGD(self.net.num_params, self.net.dtype, **kw)
        for k, v in opt.state.items():
            self.register(f"U.{k}", v)
        return opt

    def lr(self, t):
        return self.schedule.lr(t)

    def set_model(self, fn):
        """fn() -> the weights to evaluate (e.g. the average of the workers' models). It is
        called on every rank at the same boundary, so it may use collectives."""
        self._model = fn

    def final_model(self):
        """The model the method returns (what is evaluated), or None. Collective when the
        method's model is (e.g. an average over workers): call it on every rank."""
        return None if self._model is None else self._model()

    # ------------------------------------------------------------------ data and compute
    def batch_indices(self, k):
        epoch, pos = divmod(k, self.nb)
        if self._epoch_cache[0] != epoch:
            self._epoch_cache = (epoch, epoch_batches(self.cfg.seed, epoch, self.data_rank, self.workers,
                                                       self.cfg.batch, self.n_train))
        return self._epoch_cache[1][pos]

    def grad(self, w, g, on_segment=None, k=None, progress=None, label=None):
        """Gradient of micro-batch k (default: the next one of iteration t) at w, into g.

        progress: a request (or list) in flight; with ``--poll`` its ``Test()`` is called after
        every layer of the forward and the backward pass, because MPI libraries without an
        asynchronous progress thread advance a non-blocking collective only inside MPI calls.
        label: the listing line it executes (--timeline), e.g. ``"L6 g_i <- grad l(w_i)"``.
        """
        on_layer = None
        clock = self.clock
        tl = clock.timeline
        if progress is not None and self.cfg.poll:
            on_layer = functools.partial(_test_all, progress) if isinstance(progress, list) else progress.Test
            if tl.active:  # the layers and the polls as spans of their own
                on_layer = _LayerSpans(tl, self.net, label, on_layer)
        if k is None:
            k = self.t * self.tau + self._micro
            self._micro += 1
        idx = self.batch_indices(k)
        records = self.records
        if records.tracing:
            records.batches.append(idx)
        t0, c0 = time.perf_counter(), clock.compiled.seconds
        if isinstance(on_layer, _LayerSpans):
            on_layer.since = t0
        loss = self.net.loss_and_grad(w, self.data.x_train[idx], self.data.y_train[idx], out=g,
                                      on_segment=on_segment, on_layer=on_layer)
        clock.add("compute", label, t0, time.perf_counter(), c0)
        self._loss += loss
        self._nloss += 1
        if not math.isfinite(loss) and self.first_bad is None:
            self.first_bad = self.t
        return loss

    def accumulate(self, w, g_i, g_ij, progress=None):
        """L1 of SSGD's and LAGA's listings: ``g_i <- (1/tau) sum_{j=1..tau} grad F_i(w; xi_ij)``,
        this iteration's tau micro-batches (``g_ij``: one micro-batch's gradient, scratch), summed
        in the order of j and divided once; ``progress`` as in :meth:`grad`."""
        self.grad(w, g_i, progress=progress, label="L1 grad F_i(x^t; xi_i1^t)")
        for j in range(1, self.tau):
            self.grad(w, g_ij, progress=progress, label=f"L1 grad F_i(x^t; xi_i{j + 1}^t)")
            g_i += g_ij
        if self.tau > 1:
            g_i /= self.tau
        return g_i

    def grad_at(self, w, g, idx, label=None):
        """Gradient (mean over the samples ``idx``) at w, into g; safe to call from several
        threads at once (a method with gradient threads): the timers and the loss are updated
        under a lock, and neither the batch (see ``run.records.trace_batches``) nor the loss (the
        iteration's loss is that of the gradients it consumes, :meth:`add_loss`) is recorded. Its time is the
        gradient threads' (``thread_compute``, thread-seconds summed over the threads, in the
        records since the previous iteration's record), not the iteration's compute: the thread
        that runs the loop times its wait for the gradients with ``run.clock.awaiting_gradients``."""
        clock = self.clock
        t0, c0 = time.perf_counter(), clock.compiled.seconds
        loss = self.net.loss_and_grad(w, self.data.x_train[idx], self.data.y_train[idx], out=g)
        t1 = time.perf_counter()
        dt = clock.less_compiling(t1 - t0, c0)
        tl = clock.timeline
        if tl.active:
            tl.add("compute", label, t0, t1)
        with self._lock:
            self._thread_compute = (self._thread_compute or 0.0) + dt
            if not np.isfinite(loss) and self.first_bad is None:
                self.first_bad = self.t
        return loss

    @contextlib.contextmanager
    def gradient_threads(self, G):
        """G threads for :meth:`in_threads` (Sato et al.'s gradient threads: SSGD-NAG's
        Algorithm 4, L5-L9, and PP-ASGD's deterministic mode), named ``ALGO-grad-RANK_g`` (their
        --timeline tracks), the GIL handed over promptly while they run (:func:`prompt_handover`)."""
        with prompt_handover(), ThreadPoolExecutor(max_workers=G,
                                                   thread_name_prefix=f"{self.cfg.algo}-grad-{self.rank}") as pool:
            yield pool

    def in_threads(self, pool, fn, G, label=None):
        """``fn(g)`` for g = 0 .. G-1 at once in the threads of ``pool`` (:meth:`gradient_threads`),
        the loop's thread waiting for all of them; returns their results in the order of g. The
        wait is the iteration's compute (``run.clock.awaiting_gradients``; ``label`` its listing line),
        the threads' gradients (:meth:`grad_at`) are ``thread_compute``. A failing thread ends the
        loop with one message naming the rank (the command line aborts every rank)."""
        futures = [pool.submit(fn, g) for g in range(G)]
        try:
            with self.clock.awaiting_gradients(label):
                return [f.result() for f in futures]
        except Exception as exc:  # noqa: BLE001 -- one message, the command line aborts the world
            raise RankFailure(f"rank {self.rank}: a gradient thread of {self.cfg.algo} failed: "
                              f"{type(exc).__name__}: {exc}") from exc

    @contextlib.contextmanager
    def beside(self, target, stop, fail):
        """``target()`` in a thread of its own beside the loop while the block runs (Pipe-SGD's
        communication thread, named ``ALGO-comm-RANK``: its --timeline track), the GIL handed over
        promptly (:func:`prompt_handover`). An exception in the thread goes to ``fail(exc)`` (the
        loop's thread raises it where it waits for the thread). When the block ends, ``stop()``
        tells the thread to end, the thread is joined and the channels of its
        ``run.collectives.thread_channel`` are freed. When the block ends with an error the thread
        gets 5 s and its channels are left alone: another rank may never join its collective (the
        command line aborts every rank)."""
        def guarded():
            try:
                target()
            except BaseException as exc:  # noqa: BLE001 -- handed to the loop's thread
                fail(exc)
        thread = threading.Thread(target=guarded, name=f"{self.cfg.algo}-comm-{self.rank}", daemon=True)
        with prompt_handover():
            thread.start()
            try:
                yield
            except BaseException:
                stop()
                thread.join(timeout=5.0)
                raise
            stop()
            thread.join()
        self.collectives.free_channels()

    def add_loss(self, total, count):
        """The iteration consumed ``count`` gradients (of :meth:`grad_at`) whose losses sum to ``total``."""
        self._loss += total
        self._nloss += count

    def on_settle(self, fn):
        """fn() completes the communication in flight and fills the registered state (called
        before every trace record and checkpoint)."""
        self._settle = fn

    def state_finite(self):
        """Whether this rank's state is valid: the traced arrays (the worker's state of the
        listing) finite, the bookkeeping arrays free of NaN (they may hold an infinite "best so far")."""
        return all(_no_nan(v.reshape(-1)) if name in self._untraced else _all_finite(v.reshape(-1))
                   for name, v in self.state.items() if v.dtype.kind == "f")

    # ------------------------------------------------------------------ the loop
    def _record(self):
        """The iteration's records (Records.append): the clock's times, the mean loss of its
        gradients, the gradients it consumed, the gradient threads' compute since the last."""
        thread_compute = None
        if self._thread_compute is not None:
            with self._lock:
                thread_compute, self._thread_compute = self._thread_compute, 0.0
        loss = self._loss / self._nloss if self._nloss else np.nan  # nan: no gradient here
        self.grads_done += self.records.append(self.clock.seconds, loss, self.clock.compiling.take(),
                                               self.lr(self.t), thread_compute)

    def _record_trace(self, t):
        """--trace: the iteration's registered state, completed (the method's communication in
        flight settled, the requests in flight completed: their receive buffers are state)."""
        if self._settle is not None:
            self._settle()
        self.collectives.complete_pending()
        self.records.append_trace(self.lr(t), self.state, self._untraced, (self.tau, self.cfg.batch))

    def iterations(self):
        """Yield t = 0 .. total-1 (with a gradient budget: until it is consumed); bookkeeping at
        each boundary (see the module docstring)."""
        self._warm_up()
        start = time.perf_counter()
        self._run_start = start
        self._first = self.t  # > 0 after --resume: the throughput counts this process's iterations
        self._grads_first = self.grads_done
        segment = {"iterations": [self.t, self.t], "wall_seconds": 0.0}
        self.records.segments.append(segment)
        rec = self.records.iterations
        log_every = max(1, self.cfg.log_every)
        eval_due = eval_schedule(self.cfg.eval_every, self.iters_per_epoch, self.grads_per_epoch)
        progress = Progress(self) if self.rank == 0 and self.cfg.progress else None
        self._bar = progress.bar if progress is not None else None
        clock = self.clock
        compiling, tl = clock.compiling, clock.timeline
        tl.align(self.control_comm, "start")  # collective: every rank's clock on rank 0's
        # a signal stops every rank at the next loss check; the wires close when the loop ends
        with failure.deferring(), _link_observed(tl), self.collectives.closing_wires():
            compiling.main = threading.get_ident()
            t, ran = self.t, 0
            while not self._finished(t):
                self.t = t
                tl.at(t)
                self._micro = 0
                clock.begin()
                self._loss, self._nloss = 0.0, 0
                t0, c0 = self._iteration_start = time.perf_counter(), clock.compiled.seconds
                before = self.grads_done
                yield t
                self._record()
                if self.records.tracing:
                    self._record_trace(t)
                last = self._finished(t + 1)
                epoch_end = int(self.grads_done // self.grads_per_epoch) > int(before // self.grads_per_epoch)
                # a checkpoint is taken after the loss check of the same boundary, so that no
                # non-finite state is ever saved (the last iteration is checkpointed too)
                ckpt = self._checkpoint is not None and ((t + 1) % self._checkpoint[1] == 0 or last)
                if (t + 1) % log_every == 0 or epoch_end or last or ckpt:
                    # communication in flight across the boundary (a request, a thread's collective)
                    # would hold a blocking check behind its bytes on a TCP link: such a method's
                    # check is started here and completed at the next one (every rank alike)
                    lagged = self._lagged_checks and not (last or ckpt)
                    mean_loss = bookkeeping.check(self, t, last, lagged)
                    if progress is not None and mean_loss is not None:
                        progress.show(t + 1, mean_loss)
                # the boundary's bookkeeping (records, trace, loss check, status line) belongs to
                # the iteration's wall time; evaluation, checkpoints and Numba's compiling do not
                t1 = time.perf_counter()
                rec["wall"][-1] = t1 - t0 - (clock.compiled.seconds - c0)
                rec["idle"][-1] = clock.seconds["idle"]
                # communication in flight within the iteration (the check's all-reduce is both),
                # the requests still in flight at its end included; none of it outside [t0, t1]
                rec["comm"][-1] = clock.comm_seconds(t0, t1, [s for _, s in self.collectives.pending])
                rec["compile"][-1] += compiling.take()
                segment["iterations"][1], segment["wall_seconds"] = t + 1, t1 - start
                if tl.active:
                    tl.add("iteration", f"iteration {t}", t0, t1)
                if eval_due(t + 1, before, self.grads_done) or last:
                    rec["evaluate"][-1] = clock.outside("evaluate", bookkeeping.evaluate, self, t)
                if ckpt:
                    rec["checkpoint"][-1] = clock.outside("checkpoint", bookkeeping.save_checkpoint, self)
                t, ran = t + 1, ran + 1
            tl.active = False
            if ran:  # the last boundary's evaluation and checkpoint may have compiled too
                rec["compile"][-1] += compiling.take()
            compiling.announce = None
            clock.discount_compile_waits(rec, ran, self.control_comm)
        if progress is not None:
            progress.close()
            self._bar = None
        self.wall = segment["wall_seconds"] = time.perf_counter() - start
        tl.align(self.control_comm, "end")    # the clocks' drift over the loop

    def _warm_up(self):
        """Before the loop: the network's kernels called once (compiled on a first run, else
        loaded from Numba's cache), so that the first iteration's compute is real, and the
        update kernels (the local optimizer's, refsgd.optim.warm, and the method's own), so that
        no update holds the typing of a kernel's first call (about 1 ms; no Numba event covers
        it). Its seconds, and those of the method's set-up, are the first iteration's
        ``compile``, outside every time."""
        w0 = self.net.init_params(0)
        self.net.loss_and_grad(w0, self.data.x_train[:2], self.data.y_train[:2], out=np.empty_like(w0))
        optim.warm(w0.dtype)
        if self._warm_kernels is not None:
            self._warm_kernels(w0.dtype)
        # the ranks start the loop together: one that compiled less waits here for the others,
        # not in the first iteration's collective (the status line would count that wait)
        self.control_comm.Barrier()

    def _announce_compiling(self):
        self.log("  compiling kernels for this machine, once: Numba caches them for later runs (its seconds are "
                 "outside every time of the run)")
        sys.stdout.flush()

    def _finished(self, t):
        """Whether the run ends before iteration t: after total iterations, or once the
        gradient budget (--epochs of a method whose iterations consume however many gradients
        have arrived) is consumed."""
        return self.grads_done >= self.budget if self.budget is not None else t >= self.total


    @property
    def epochs_done(self):
        """Epochs of gradients consumed by the iterations done: gradients / grads_per_epoch."""
        return self.grads_done / self.grads_per_epoch

    def iterations_time(self, since=0):
        """Seconds of the iterations from record ``since`` on, the one running now so far: their
        wall times, which the throughput divides (not the evaluations, checkpoints or Numba's
        compiling between and in them)."""
        t0, c0 = self._iteration_start
        now = time.perf_counter() - t0 - (self.clock.compiled.seconds - c0)
        return max(float(np.sum(self.records.iterations["wall"][since:-1])) + now, 1e-12)

    def samples_per_second(self, elapsed):
        """Training samples (of the gradients consumed) per second of this process: iterations
        before a --resume do not count."""
        return (self.grads_done - self._grads_first) * self.cfg.batch / max(elapsed, 1e-12)
