"""The Run context: what every distributed method needs, written once.

An algorithm's ``train(run)`` receives a :class:`Run` and uses

* ``run.comm`` (the communicator; with ``--link`` a real communicator whose all-reduces
  complete no earlier than the emulated link's model), ``run.rank``, ``run.world``;
* ``run.net`` (a pure function of the weights) and ``run.init_params()``;
* ``run.grad(w, g, on_segment=None)``: the gradient of this rank's next micro-batch at ``w``
  (timed as *compute*);
* ``with run.idle(): comm.Allreduce(...)`` and ``run.wait(req)``: time spent blocked on
  communication (timed as *idle*; so is the MPI library's work to start a non-blocking
  collective, ``with run.idle(): req = run.started(comm.Iallreduce(...))``: MPICH copies and
  reduces its first step there); ``run.started(req)`` notes when a request began, so the
  request's lifetime is recorded as *communication* time;
* ``run.optimizer()`` (the local optimizer U of the command line, its state registered),
  ``run.lr(t)``, ``run.tau``, ``run.cfg``;
* ``run.ring`` (``--allreduce ring``) and ``run.ring_sum(comm, x, out)``: every uncompressed sum
  over ranks as refsgd's Ring-AllReduce over point-to-point messages, blocking, the serial
  renderings' order (``run.allreduce_sum`` and ``run.average_model`` follow ``run.ring``
  themselves; a method whose listing starts an ``MPI_Iallreduce`` writes ``if run.ring:
  run.ring_sum(...) else: comm.Iallreduce(...)``);
* ``with run.codec():`` times compression and decompression on the computation path (*codec*),
  ``with run.update():`` the method's update of its state and the scalings of its listing
  (*update*);
  ``run.note_comm(start, end)`` adds communication that another thread carried out;
* ``run.on_settle(fn)``: ``fn()`` completes the method's communication in flight and brings its
  registered state to a consistent form; the run calls it before a trace record or a
  checkpoint (methods whose communication runs in a thread use it);
* ``run.register(name, array)``: algorithm state, updated in place; checkpoints save it and a
  resumed run fills it back when it is registered (see :mod:`refsgd.checkpoint`). A method
  whose requests span iterations must register their receive buffers: at a checkpoint the
  requests are completed first, and a resumed method finds the completed result there;
* ``run.event(what, **fields)``: a change of the method's regime (e.g. DASO's phases) at the
  current iteration: logged, kept in the checkpoints and written to the metrics file;
* ``run.control_comm``: the same communicator without the emulated link and the traffic
  counter, for bookkeeping (the loss checks, evaluation, a model average) that is not part of
  the method's communication;
* ``label=`` of ``grad``, ``idle``, ``codec``, ``update``, ``started``, ``wait``, ``waitall`` and
  ``allreduce_sum`` (and ``data=``, the buffer a call sends): the listing line the call executes,
  as the method's ``# Ln`` comment cites it, for ``--timeline`` (:mod:`refsgd.timeline`), which
  records the spans of a window of iterations through these timing points; ``run.span(kind,
  label)`` for work of the method's own threads, ``run.in_flight(key, label)`` and
  ``idle(awaits=key)`` for communication handed to another thread. Without ``--timeline`` the
  labels are not used;
* ``for t in run.iterations():``: the loop; at iteration boundaries it records the times and
  the loss, checks for a non-finite loss on all ranks, shows progress, evaluates the model
  given by ``run.set_model(fn)`` on the test set, and stops after the last iteration. An
  iteration's recorded wall time runs from its start to the end of that bookkeeping: wall -
  compute - idle - codec is everything else it cost. The evaluation and the checkpoint after
  it are recorded apart (``evaluate``, ``checkpoint``); its time with communication in flight
  (``comm``) is cut to [start, end] (a request spanning the boundary counts in both
  iterations); the seconds Numba spends compiling kernels (a first run) are taken out of every
  timer of the thread that compiles, and out of the wall time, and recorded as ``compile``;
* ``run.record("gradients", n)``: a method whose iteration consumes a varying number of
  micro-batch gradients (all workers; default tau x workers) says how many; an epoch is
  ``grads_per_epoch`` of them, and with ``by_gradients`` (PP-ASGD's threaded mode) ``--epochs``
  is a budget of gradients (``run.budget``), the iterations as many as it takes;
* ``run.grad_at`` (from gradient threads), ``run.awaiting_gradients()`` (the loop's thread
  waiting for them, timed as compute) and ``run.add_loss``;
* ``run.segments``: the processes that made the run (the first and each ``--resume``), their
  iterations and wall time, kept in the checkpoints and the metrics file.

Data: rank r's micro-batch k is row ``k % nb`` of ``epoch_batches(seed, k // nb, r, world,
batch, n)`` (nb micro-batches per epoch and rank), a continuous stream across epochs;
iteration t consumes micro-batches ``t*tau .. t*tau + tau - 1``.
"""

import contextlib
import functools
import shutil
import sys
import threading
import time

import numba as nb
import numpy as np
from mpi4py import MPI

from refsgd import AgreedError, RankFailure, RefsgdError, Stopped, failure
from refsgd.datasets import epoch_batches
from refsgd.optim import SGD


class Run:
    def __init__(self, comm, net, data, cfg, schedule, log=print, restorer=None, checkpoint=None, servers=0,
                 by_gradients=False):
        self.comm = comm
        # bookkeeping collectives go around the emulated link and the traffic counter
        self.control_comm = MPI.Intracomm(comm) if type(comm) is not MPI.Intracomm else comm
        self.traffic = getattr(comm, "traffic", None)
        self._traffic_seen = (0, 0)
        self.rank = comm.Get_rank()
        self.world = comm.Get_size()
        # ranks 0 .. servers-1 hold no data (parameter servers); the data is sharded over the rest
        self.servers = servers
        self.workers = self.world - servers
        self.data_rank = self.rank - servers
        self.net = net
        self.data = data
        self.cfg = cfg
        #: --allreduce ring: every uncompressed sum over ranks is refsgd's Ring-AllReduce (ring_sum)
        self.ring = getattr(cfg, "allreduce", None) == "ring"
        self._rings = {}
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
        # compile / load the Numba kernels now, so the first iteration's compute time is real
        w0 = net.init_params(0)
        net.loss_and_grad(w0, data.x_train[:2], data.y_train[:2], out=np.empty_like(w0))
        self.t = 0
        self._first, self.iterations_run = 0, 0
        self.wall = 0.0
        # the processes that made this trajectory: [{"iterations": [first, last], "wall_seconds"}]
        self.segments = []
        self._compiling = _CompileClock()
        self._thread_compute = None  # gradient threads' compute (grad_at), thread-seconds
        self.state = {}
        self._untraced = set()
        self._model = None
        self._epoch_cache = (None, None)
        # per-iteration records of this rank
        self._compute = self._idle = self._codec = self._update = 0.0
        self._spans = []  # (start, end) of the communication seen in this iteration
        self._loss = 0.0
        self._nloss = 0
        self._settle = None
        self._lock = threading.Lock()
        self._extra = {}
        self.progress_info = {}  # shown beside the loss in the progress display
        self.records = {k: [] for k in FIELDS}
        self.evals = []
        self.events = []
        #: options the run found rather than was given (DASO's ranks per node from shared memory):
        #: the trace records them, so that it names the layout its trajectory followed
        self.found = {}
        self.first_bad = None
        self.interrupted = None  # the signal's name ("SIGINT") when a signal stopped the loop
        self._pending = []
        # --trace: every iteration's state, batches, loss and lr (see refsgd.trace)
        self.tracing = bool(getattr(cfg, "trace", None))
        self.trace = {"batches": [], "loss": [], "lr": [], "states": {}} if self.tracing else None
        self._iter_batches = []
        # checkpoint = (folder, every K iterations, configuration dict) or None
        self._checkpoint = checkpoint
        self._restorer = restorer
        if restorer is not None:
            self.t = restorer.t
            self.records.update({k: list(v) for k, v in restorer.records.items()})
            n = len(self.records["wall"])
            # a field the checkpoint predates: zeros (gradients: what each iteration consumed then)
            self.records["gradients"].extend([float(self.tau * self.workers)] * (n - len(self.records["gradients"])))
            for v in self.records.values():
                v.extend([0.0] * (n - len(v)))
            self.grads_done = float(np.sum(self.records["gradients"]))
            self.segments = list(restorer.segments)
            self.evals = list(restorer.evals)
            self.events = list(restorer.events)
            if restorer.schedule_state is not None:
                schedule.state[...] = restorer.schedule_state
        # --timeline: the spans of a window of iterations (refsgd.timeline); None: nothing recorded
        self.timeline = None
        if getattr(cfg, "timeline", None):
            from refsgd import timeline
            self.timeline = timeline.Timeline(*timeline.window(cfg.timeline, self.total, self.t))

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
        self.events.append(rec)
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

    def average_model(self, comm, w, out):
        """out <- the mean over the ranks of ``comm`` of their w (collective, blocking). The frozen
        parameters, the same on every rank and never moved, are copied from w: (w + w + w) / 3
        can miss w by one ulp, and a frozen weight must stay bitwise its initial value."""
        if self.ring:  # --allreduce ring: the evaluated model in the ring's order too
            self._ring(w.dtype).allreduce_wire(comm, w, out)
        else:
            comm.Allreduce(w, out, op=MPI.SUM)
        np.divide(out, comm.Get_size(), out=out)
        if not self.net.trainable.all():
            np.copyto(out, w, where=~self.net.trainable)
        return out

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
        tl = self.timeline
        if progress is not None and getattr(self.cfg, "poll", False):
            on_layer = functools.partial(_test_all, progress if isinstance(progress, list) else [progress])
            if tl is not None and tl.active:  # the layers and the polls as spans of their own
                on_layer = _LayerSpans(tl, self.net, label, on_layer)
        if k is None:
            k = self.t * self.tau + self._micro
            self._micro += 1
        idx = self.batch_indices(k)
        if self.tracing:
            self._iter_batches.append(idx)
        t0, c0 = time.perf_counter(), self._compiling.mine()
        if isinstance(on_layer, _LayerSpans):
            on_layer.since = t0
        loss = self.net.loss_and_grad(w, self.data.x_train[idx], self.data.y_train[idx], out=g,
                                      on_segment=on_segment, on_layer=on_layer)
        t1 = time.perf_counter()
        self._compute += self._less_compiling(t1 - t0, c0)
        if tl is not None and tl.active:
            tl.add("compute", label, t0, t1)
        self._loss += loss
        self._nloss += 1
        if not np.isfinite(loss) and self.first_bad is None:
            self.first_bad = self.t
        return loss

    def grad_at(self, w, g, idx, label=None):
        """Gradient (mean over the samples ``idx``) at w, into g; safe to call from several
        threads at once (a method with gradient threads): the timers and the loss are updated
        under a lock, and neither the batch (see :meth:`trace_batches`) nor the loss (the
        iteration's loss is that of the gradients it consumes, :meth:`add_loss`) is recorded. Its time is the
        gradient threads' (``thread_compute``, thread-seconds summed over the threads, in the
        records since the previous iteration's record), not the iteration's compute: the thread
        that runs the loop times its wait for the gradients with :meth:`awaiting_gradients`."""
        t0, c0 = time.perf_counter(), self._compiling.mine()
        loss = self.net.loss_and_grad(w, self.data.x_train[idx], self.data.y_train[idx], out=g)
        t1 = time.perf_counter()
        dt = self._less_compiling(t1 - t0, c0)
        tl = self.timeline
        if tl is not None and tl.active:
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
        from concurrent.futures import ThreadPoolExecutor
        with prompt_handover(), ThreadPoolExecutor(max_workers=G,
                                                   thread_name_prefix=f"{self.cfg.algo}-grad-{self.rank}") as pool:
            yield pool

    def in_threads(self, pool, fn, G, label=None):
        """``fn(g)`` for g = 0 .. G-1 at once in the threads of ``pool`` (:meth:`gradient_threads`),
        the loop's thread waiting for all of them; returns their results in the order of g. The
        wait is the iteration's compute (:meth:`awaiting_gradients`; ``label`` its listing line),
        the threads' gradients (:meth:`grad_at`) are ``thread_compute``. A failing thread ends the
        loop with one message naming the rank (the command line aborts every rank)."""
        futures = [pool.submit(fn, g) for g in range(G)]
        try:
            with self.awaiting_gradients(label):
                return [f.result() for f in futures]
        except Exception as exc:  # noqa: BLE001 -- one message, the command line aborts the world
            raise RankFailure(f"rank {self.rank}: a gradient thread of {self.cfg.algo} failed: "
                              f"{type(exc).__name__}: {exc}") from exc

    def add_loss(self, total, count):
        """The iteration consumed ``count`` gradients (of :meth:`grad_at`) whose losses sum to ``total``."""
        self._loss += total
        self._nloss += count

    def trace_batches(self, batches):
        """The sample indices this iteration used, (tau, b), for --trace (with :meth:`grad_at`)."""
        if self.tracing:
            self._iter_batches.extend(np.asarray(batches, dtype=np.int64))

    def record(self, name, value):
        """A per-iteration value of the method (e.g. PP-ASGD's staleness): kept in the records,
        the checkpoints and the metrics file (/iterations/<name>); NaN where not given."""
        self._extra[name] = float(value)

    @contextlib.contextmanager
    def idle(self, label=None, data=None, awaits=None):
        """Time the enclosed blocking communication as idle.

        For --timeline: ``label`` the listing line (``"L2 MPI_Allreduce(g_i)"``), ``data`` the
        buffer it sends (its bytes are recorded), ``awaits`` the key of the communication of
        another thread it waits for (:meth:`in_flight`), whose time in flight ends here. A
        blocking call is in flight while it runs; a request started inside is in flight from
        the start of the idle time (the posting) to its completion."""
        t0, c0 = time.perf_counter(), self._compiling.mine()
        tl = self.timeline
        if tl is not None:
            tl.idle_start, tl.posted = t0, False
        try:
            yield
        finally:
            t1 = time.perf_counter()
            self._idle += self._less_compiling(t1 - t0, c0)
            self._spans.append((t0, t1))
            if tl is not None:
                if awaits is not None:
                    tl.land(awaits, t1, since=t0, label=label)
                if tl.active:
                    nbytes = getattr(data, "nbytes", 0)
                    tl.add("idle", label, t0, t1, nbytes)
                    if awaits is None and not tl.posted:  # a blocking call: in flight while it runs
                        tl.depart(None, label, t0, nbytes)
                        tl.land(None, t1)
                tl.idle_start = None

    def codec(self, label=None):
        """Time the enclosed compression or decompression as *codec* (label: its listing line)."""
        return self._timed("_codec", "codec", label)

    def update(self, label=None):
        """Time the enclosed arithmetic of the method outside its gradients as *update*: its
        update of the state (the optimizer step) and the scalings its listing applies (e.g.
        LAGA's 1/N); the part of an iteration's "other" time that is the method's own work,
        not the framework's. label: the listing lines it executes (--timeline)."""
        return self._timed("_update", "update", label)

    def span(self, kind, label, it=None, data=None):
        """--timeline: the enclosed work as a span of ``kind`` (refsgd.timeline.KINDS) on the
        calling thread, e.g. the all-reduce of a communication thread; it times nothing else."""
        tl = self.timeline
        if tl is None or not tl.active:
            return contextlib.nullcontext()
        return _Span(tl, kind, label, it, getattr(data, "nbytes", 0))

    def in_flight(self, key, label, data=None):
        """--timeline: communication ``key`` handed to another thread is in flight from now until
        an :meth:`idle` that ``awaits`` it returns (Pipe-SGD's L10 -> L3)."""
        tl = self.timeline
        if tl is not None:
            tl.depart(key, label, time.perf_counter(), getattr(data, "nbytes", 0))

    def awaiting_gradients(self, label=None):
        """Time the enclosed wait of the loop's thread for gradients that other threads compute
        (PP-ASGD's update thread waiting for its gradient threads) as the iteration's *compute*:
        the computation on the path of the iteration; the threads' own work is ``thread_compute``."""
        return self._timed("_compute", "compute", label)

    @contextlib.contextmanager
    def _timed(self, total, kind, label):
        t0, c0 = time.perf_counter(), self._compiling.mine()
        try:
            yield
        finally:
            t1 = time.perf_counter()
            setattr(self, total, getattr(self, total) + self._less_compiling(t1 - t0, c0))
            tl = self.timeline
            if tl is not None and tl.active:
                tl.add(kind, label, t0, t1)

    def _less_compiling(self, seconds, since):
        """``seconds`` of this thread less what Numba spent compiling in it since ``since``
        (``self._compiling.mine()`` at the start): a first run's compilation is never timed
        as compute, idle, update or codec (it is recorded apart, as ``compile``)."""
        return max(seconds - (self._compiling.mine() - since), 0.0)

    def open_wire(self):
        """The MPI datatype and operator of the ``--compress`` codec (None without one); the
        method closes it (``wire.close()``) when it ends."""
        name = getattr(self.cfg, "compress", "none")
        if name in (None, "none"):
            return None
        from refsgd.comm import codecs
        return codecs.get(name).open()

    def _ring(self, dtype):
        """The uncompressed Ring-AllReduce of ``dtype`` (one per dtype, its scratch reused; the loop's
        thread only: a method whose other thread sums opens its own, ``codecs.plain(dtype).open()``)."""
        dtype = np.dtype(dtype)
        if dtype not in self._rings:
            from refsgd.comm import codecs
            self._rings[dtype] = codecs.plain(dtype).open()
        return self._rings[dtype]

    def ring_sum(self, comm, x, out, label=None):
        """Blocking ``out <- sum over the ranks of comm of x`` by refsgd's Ring-AllReduce over
        point-to-point messages, uncompressed, in x's dtype (``--allreduce ring``; the order is
        :meth:`refsgd.comm.codecs.Wire.allreduce_wire`'s, the serial renderings'), timed as idle.
        A method whose listing starts an ``MPI_Iallreduce`` calls this instead under ``--allreduce
        ring`` (``if run.ring: ... else: comm.Iallreduce(...)``): the sum is complete on return."""
        with self.idle(label, x):
            self._ring(x.dtype).allreduce_wire(comm, x, out)
        return out

    def allreduce_sum(self, comm, x, out, wire=None, label=None):
        """Blocking ``out <- sum over ranks of x`` (idle): ``MPI_Allreduce`` with ``MPI_SUM``, or
        under ``--allreduce ring`` refsgd's uncompressed ring (:meth:`ring_sum`). With a codec
        ``wire`` (open_wire), x is compressed (codec), the ring carries and adds the compressed
        form (idle), and the result is decompressed into out (codec). label: the listing line
        (--timeline)."""
        if wire is None:
            if self.ring:
                return self.ring_sum(comm, x, out, label)
            with self.idle(label, x):
                comm.Allreduce(x, out, op=MPI.SUM)
            return out
        send, recv = wire.scratch(x.size)
        line = (label or "").split(" ")[0]
        with self.codec(f"{line} Compress ({wire.codec.name})"):
            wire.codec.encode(x, send)
        with self.idle(label, send):
            wire.allreduce_wire(comm, send, recv)
        with self.codec(f"{line} Decompress ({wire.codec.name})"):
            wire.codec.decode(recv, out)
        return out

    def note_comm(self, start, end):
        """Communication from start to end (perf_counter seconds), e.g. carried out by a thread."""
        self._spans.append((start, end))

    def on_settle(self, fn):
        """fn() completes the communication in flight and fills the registered state (called
        before every trace record and checkpoint)."""
        self._settle = fn

    def started(self, req, label=None, data=None):
        """Note the start of a non-blocking request (its lifetime counts as communication).
        For --timeline: ``label`` the listing line, ``data`` the buffer it sends."""
        now = time.perf_counter()
        self._pending.append((req, now))
        tl = self.timeline
        if tl is not None:
            # in flight from its posting (the idle time that encloses the call, if any)
            tl.depart(id(req), label, now if tl.idle_start is None else tl.idle_start, getattr(data, "nbytes", 0))
            tl.posted = True
        return req

    def wait(self, req, label=None):
        """req.Wait(), timed as idle (label: its listing line, for --timeline)."""
        t0, c0 = time.perf_counter(), self._compiling.mine()
        req.Wait()
        t1 = time.perf_counter()
        self._idle += self._less_compiling(t1 - t0, c0)
        self._finish(req, t0, t1, label)
        tl = self.timeline
        if tl is not None and tl.active:
            tl.add("idle", label, t0, t1)

    def waitall(self, reqs, label=None):
        from refsgd.comm.link import waitall  # plain requests too; honours emulated deadlines
        t0, c0 = time.perf_counter(), self._compiling.mine()
        waitall(reqs)
        t1 = time.perf_counter()
        self._idle += self._less_compiling(t1 - t0, c0)
        for r in reqs:
            self._finish(r, t0, t1, label)
        tl = self.timeline
        if tl is not None and tl.active:
            tl.add("idle", label or "complete the requests in flight", t0, t1)

    def _finish(self, req, t0, t1, label=None):
        """The request's lifetime as communication: from its start (started) or, for one not
        noted, from the wait (t0), so that idle time always lies within the time in flight."""
        tl = self.timeline
        if tl is not None:
            tl.land(id(req), t1, since=t0, label=label)
        for i, (r, s) in enumerate(self._pending):
            if r is req:
                self._spans.append((s, t1))
                del self._pending[i]
                return
        self._spans.append((t0, t1))

    # ------------------------------------------------------------------ the loop
    def iterations(self):
        """Yield t = 0 .. total-1 (with a gradient budget: until it is consumed); bookkeeping at
        each boundary (see the module docstring)."""
        start = time.perf_counter()
        self._run_start = start
        self._first = self.t  # > 0 after --resume: the throughput counts this process's iterations
        self._grads_first = self.grads_done
        segment = {"iterations": [self.t, self.t], "wall_seconds": 0.0}
        self.segments.append(segment)
        log_every = max(1, self.cfg.log_every)
        eval_due = eval_schedule(self.cfg.eval_every, self.iters_per_epoch, self.grads_per_epoch)
        progress = Progress(self) if self.rank == 0 and self.cfg.progress else None
        self._bar = progress.bar if progress is not None else None
        clock = self._compiling
        tl = self.timeline
        if tl is not None:
            tl.align(self.control_comm, "start")  # collective: every rank's clock on rank 0's
        with failure.deferring(), clock, _link_observed(tl):  # a signal stops every rank at the next loss check
            clock.main = threading.get_ident()
            t, ran = self.t, 0
            while not self._finished(t):
                self.t = t
                if tl is not None:
                    tl.at(t)
                self._micro = 0
                self._compute = self._idle = self._codec = self._update = 0.0
                self._spans = []
                self._loss, self._nloss = 0.0, 0
                t0, c0 = time.perf_counter(), clock.mine()
                before = self.grads_done
                yield t
                self._record(t0)
                if self.tracing:
                    self._record_trace(t)
                last = self._finished(t + 1)
                epoch_end = int(self.grads_done // self.grads_per_epoch) > int(before // self.grads_per_epoch)
                # a checkpoint is taken after the loss check of the same boundary, so that no
                # non-finite state is ever saved (the last iteration is checkpointed too)
                ckpt = self._checkpoint is not None and ((t + 1) % self._checkpoint[1] == 0 or last)
                if (t + 1) % log_every == 0 or epoch_end or last or ckpt:
                    mean_loss = self._check(t)
                    if progress is not None:
                        progress.show(t + 1, mean_loss)
                # the boundary's bookkeeping (records, trace, loss check, status line) belongs to
                # the iteration's wall time; evaluation, checkpoints and Numba's compiling do not
                t1 = time.perf_counter()
                self.records["wall"][-1] = t1 - t0 - (clock.mine() - c0)
                self.records["idle"][-1] = self._idle
                # communication in flight within the iteration (the check's all-reduce is both),
                # the requests still in flight at its end included; none of it outside [t0, t1]
                spans = self._spans + [(s, t1) for _, s in self._pending]
                self.records["comm"][-1] = _union_length(spans, t0, t1, holes=clock.intervals(t0, t1))
                self.records["compile"][-1] += clock.take()
                segment["iterations"][1], segment["wall_seconds"] = t + 1, t1 - start
                if tl is not None and tl.active:
                    tl.add("iteration", f"iteration {t}", t0, t1)
                if eval_due(t + 1, before, self.grads_done) or last:
                    self.records["evaluate"][-1] = self._outside(self.evaluate, t)
                if ckpt:
                    self.records["checkpoint"][-1] = self._outside(self.save_checkpoint)
                t, ran = t + 1, ran + 1
            if tl is not None:
                tl.active = False
            if ran:  # the last boundary's evaluation and checkpoint may have compiled too
                self.records["compile"][-1] += clock.take()
            self._discount_compile_waits(ran)
        if progress is not None:
            progress.close()
            self._bar = None
        self.wall = segment["wall_seconds"] = time.perf_counter() - start
        self.iterations_run = ran
        if tl is not None:
            tl.align(self.control_comm, "end")    # the clocks' drift over the loop

    def _discount_compile_waits(self, ran):
        """Collective, after the loop: a rank that compiled less than another (or not at all)
        waited for it in the method's next collective, in the iteration of the compiling or the
        one after. That wait, at most the difference to the rank that compiled longest in the
        iteration, is moved from idle (and from the wall time and the time in flight) to compile,
        so that another rank's compiling is not read as communication either."""
        if ran == 0 or self.world == 1:
            return
        rec = self.records
        lo = len(rec["wall"]) - ran
        mine = np.ascontiguousarray(rec["compile"][lo:], dtype=np.float64)
        every = np.empty((self.world, ran))
        self.control_comm.Allgather(mine, every)
        deficit = every.max(axis=0) - mine
        if not deficit.any():
            return
        carry = 0.0
        for i in range(ran):
            owed, j = deficit[i] + carry, lo + i
            waited = min(owed, rec["idle"][j])
            rec["idle"][j] -= waited
            rec["wall"][j] -= waited
            rec["comm"][j] = max(rec["comm"][j] - waited, 0.0)
            rec["compile"][j] += waited
            carry = min(owed - waited, deficit[i])   # the rest waits in the next iteration at most

    def _finished(self, t):
        """Whether the run ends before iteration t: after total iterations, or once the
        gradient budget (--epochs of a method whose iterations consume however many gradients
        have arrived) is consumed."""
        return self.grads_done >= self.budget if self.budget is not None else t >= self.total

    def _outside(self, fn, *args):
        """fn(*args) at an iteration boundary, outside the iteration's times; returns its seconds
        (Numba's compiling in it excluded)."""
        t0, c0 = time.perf_counter(), self._compiling.mine()
        fn(*args)
        t1 = time.perf_counter()
        tl = self.timeline
        if tl is not None and tl.active:
            kind = "evaluate" if fn == self.evaluate else "checkpoint"
            tl.add(kind, "evaluation" if kind == "evaluate" else "checkpoint", t0, t1)
        return self._less_compiling(t1 - t0, c0)

    @property
    def epochs_done(self):
        """Epochs of gradients consumed by the iterations done: gradients / grads_per_epoch."""
        return self.grads_done / self.grads_per_epoch

    def samples_per_second(self, elapsed):
        """Training samples (of the gradients consumed) per second of this process: iterations
        before a --resume do not count."""
        return (self.grads_done - self._grads_first) * self.cfg.batch / max(elapsed, 1e-12)

    def _record(self, t0):
        """Append this iteration's times, loss, the method's records and the traffic."""
        rec = self.records
        rec["wall"].append(time.perf_counter() - t0)
        rec["compute"].append(self._compute)
        rec["idle"].append(self._idle)
        rec["comm"].append(_union_length(self._spans))
        rec["loss"].append(self._loss / self._nloss if self._nloss else np.nan)  # nan: no gradient here
        rec["codec"].append(self._codec)
        rec["update"].append(self._update)
        rec["compile"].append(self._compiling.take())  # outside the times above (first runs only)
        rec["evaluate"].append(0.0)    # set after the boundary's evaluation and checkpoint, if any
        rec["checkpoint"].append(0.0)
        rec["lr"].append(self.lr(self.t))  # as used: a plateau schedule's lr depends on the run so far
        # the micro-batch gradients this iteration consumed, all workers (a method whose
        # iterations consume a varying number says so with record("gradients", n))
        rec["gradients"].append(self._extra.pop("gradients", float(self.tau * self.workers)))
        self.grads_done += rec["gradients"][-1]
        if self._thread_compute is not None:
            with self._lock:
                self._extra["thread_compute"], self._thread_compute = self._thread_compute, 0.0
        for name in set(self._extra) | (set(rec) - set(FIELDS)):
            rec.setdefault(name, [np.nan] * (len(rec["wall"]) - 1)).append(self._extra.get(name, np.nan))
        self._extra = {}
        if self.traffic is not None:
            seen = (self.traffic.global_bytes, self.traffic.local_bytes)
            rec["global_bytes"].append(float(seen[0] - self._traffic_seen[0]))
            rec["local_bytes"].append(float(seen[1] - self._traffic_seen[1]))
            self._traffic_seen = seen
        else:
            rec["global_bytes"].append(0.0)
            rec["local_bytes"].append(0.0)

    def _record_trace(self, t):
        if self._settle is not None:
            self._settle()
        if self._pending:  # receive buffers still in flight are registered state: record them completed
            self.waitall([r for r, _ in self._pending])
        tr = self.trace
        if self._iter_batches:
            tr["batches"].append(np.array(self._iter_batches))
        else:  # a server computes no gradient: -1 marks "no batch"
            tr["batches"].append(np.full((self.tau, self.cfg.batch), -1, dtype=np.int64))
        self._iter_batches = []
        tr["loss"].append(self.records["loss"][-1])
        tr["lr"].append(self.lr(t))
        for name, arr in self.state.items():
            if name not in self._untraced:
                tr["states"].setdefault(name, []).append(arr.copy())

    def write_trace(self, path, config):
        """Collective: gather every rank's trace and write it (rank 0); see refsgd.trace."""
        from refsgd import trace
        tr = self.trace
        mine = dict(batches=np.array(tr["batches"]), loss=np.array(tr["loss"]),
                    states={k: np.array(v) for k, v in tr["states"].items()})
        every = self.comm.gather(mine, root=0)
        if self.rank != 0:
            return
        # the arrays every rank has (a server's extra state, e.g. DC-ASGD's w_bak, is not traced)
        names = [k for k in every[0]["states"] if all(k in e["states"] for e in every)]
        states = {k: np.stack([e["states"][k] for e in every], axis=1) for k in names}
        trace.write(path, method=self.cfg.algo, source="mpi", config=config, net=self.net, data=self.data,
                    w0=self.init_params(), batches=np.stack([e["batches"] for e in every], axis=1),
                    loss=np.stack([e["loss"] for e in every], axis=1), lr=np.array(tr["lr"]), states=states,
                    interrupted=self.interrupted)

    def save_checkpoint(self):
        """Complete the requests still in flight, then write every rank's state (collective)."""
        from refsgd import checkpoint
        if self._settle is not None:
            self._settle()
        self._complete_pending()
        if self.segments:  # this process's segment so far, as the checkpoint keeps it
            self.segments[-1]["iterations"][1] = self.t + 1
            self.segments[-1]["wall_seconds"] = time.perf_counter() - self._run_start
        root, _, config, keep = self._checkpoint
        return checkpoint.save(self, root, config, keep)

    def _check(self, t):
        """All ranks agree on the loss so far, stop together on a non-finite one, and stop
        together when a rank received SIGINT or SIGTERM (after a checkpoint, with --checkpoint)."""
        lo = max(0, t + 1 - self.cfg.log_every)
        losses = np.asarray(self.records["loss"][lo:t + 1], dtype=np.float64)
        seen = losses[~np.isnan(losses)]
        never = np.iinfo(np.int64).max
        bad = self.first_bad if self.first_bad is not None else never
        if bad == never and not self.state_finite():  # the update after the last loss went wrong
            bad = t
        sums, agreed = np.empty(2), np.empty(2, dtype=np.int64)
        with self.idle("loss check MPI_Allreduce"):
            self.control_comm.Allreduce(np.array([float(np.sum(seen)), float(len(seen))]), sums, op=MPI.SUM)
            # the first bad iteration (MIN) and the signal (MAX, as -MIN) of any rank
            self.control_comm.Allreduce(np.array([bad, -failure.requested()], dtype=np.int64), agreed, op=MPI.MIN)
        first_bad, signum = int(agreed[0]), int(-agreed[1])
        if first_bad < never:
            self._complete_pending()
            raise NonFiniteLoss(f"the loss or the weights became non-finite at iteration {first_bad}; lower the "
                                "learning rate (nothing non-finite was written)")
        if signum:
            self._stop(t, signum)
        return sums[0] / max(sums[1], 1)

    def state_finite(self):
        """Whether this rank's state is valid: the traced arrays (the worker's state of the
        listing) finite, the bookkeeping arrays free of NaN (they may hold an infinite "best so far")."""
        return all(_no_nan(v.reshape(-1)) if name in self._untraced else _all_finite(v.reshape(-1))
                   for name, v in self.state.items() if v.dtype.kind == "f")

    def _complete_pending(self):
        if self._pending:  # leave no request behind
            self.waitall([r for r, _ in self._pending])

    def _stop(self, t, signum):
        """Every rank: a signal was agreed on at the boundary after iteration t."""
        failure.STOP.cancel()
        word, name = failure.describe(signum)
        saved = []
        if self._checkpoint is not None:
            path = self.save_checkpoint()
            saved.append(f"checkpoint written to {path}; continue with --resume {self._checkpoint[0]}")
        self._complete_pending()
        # the run ends here: the --out and --trace files are written for the iterations done
        self.interrupted = name
        self.wall = time.perf_counter() - self._run_start
        self.iterations_run = t + 1 - self._first
        if self.segments:  # this process's segment ends here
            self.segments[-1]["iterations"][1] = t + 1
            self.segments[-1]["wall_seconds"] = self.wall
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        raise Stopped(failure.exit_code(signum), f"{word} ({name}) after iteration {t + 1}", collective=True,
                      saved=saved)

    def evaluate(self, t):
        """Mean training loss of the epoch and test loss/accuracy of the model, over all ranks."""
        if self._model is None:
            return
        w = self._model()
        x, y = self.data.x_test[self.rank::self.world], self.data.y_test[self.rank::self.world]
        loss, acc = self.net.evaluate(w, x, y) if len(y) else (0.0, 0.0)
        # the iterations of the last epoch of gradients (iters_per_epoch of them for a method
        # that consumes a fixed number per iteration)
        consumed = np.cumsum(np.asarray(self.records["gradients"][:t + 1], dtype=np.float64))
        ep_lo = int(np.searchsorted(consumed, self.grads_done - self.grads_per_epoch, side="right"))
        tr = np.asarray(self.records["loss"][ep_lo:t + 1], dtype=np.float64)
        tr = tr[~np.isnan(tr)]
        buf = np.array([loss * len(y), acc * len(y), float(len(y)), float(np.sum(tr)), float(len(tr))])
        out = np.empty_like(buf)
        with self.idle("evaluation MPI_Allreduce"):
            self.control_comm.Allreduce(buf, out, op=MPI.SUM)
        rec = dict(iteration=t + 1, epoch=self.epochs_done, train_loss=out[3] / max(out[4], 1),
                   test_loss=out[0] / out[2], test_acc=out[1] / out[2],
                   seconds=time.perf_counter() - self._run_start)
        self.evals.append(rec)
        if hasattr(self.schedule, "observe"):
            self.schedule.observe(rec["train_loss"])
        self.log(f"iter {t + 1:>6}  epoch {rec['epoch']:6.2f}  lr {self.lr(t):.4g}  train loss {rec['train_loss']:.4f}  "
                 f"test loss {rec['test_loss']:.4f}  test acc {100 * rec['test_acc']:.2f}%  (elapsed {rec['seconds']:.1f} s)")


def eval_schedule(every, iters_per_epoch, grads_per_epoch=None):
    """--eval-every ("E" epochs or "Nit" iterations, or an int of epochs) -> due(done, before,
    after): whether to evaluate after ``done`` iterations, the gradients consumed having gone
    from ``before`` to ``after`` in the last one. Epochs count gradients (``grads_per_epoch`` a
    epoch; without it, ``iters_per_epoch`` iterations): every E epochs is at the iteration that
    crosses a multiple of E epochs of gradients (with a fixed number per iteration, every E x
    iters_per_epoch iterations)."""
    text = str(every)
    if text.endswith("it"):
        n = int(text[:-2])
        return lambda done, before=None, after=None: done % n == 0
    if grads_per_epoch is None:
        n = int(text) * iters_per_epoch
        return lambda done, before=None, after=None: done % n == 0
    n = int(text) * grads_per_epoch
    return lambda done, before, after: int(after // n) > int(before // n)


class Progress:
    """Rank 0's progress: a bar when stdout is a terminal, else a status line now and then.

    Under mpiexec stdout is a pipe even in a terminal, so a bar would be a wall of carriage
    returns; there, and in a file, a line ``iter T/TOTAL (P%)  loss L  S samples/s  ETA E`` is
    printed every 10% of the run or every 30 s, whichever comes first (at most one a second).
    A run with a gradient budget (PP-ASGD's threaded mode with --epochs) counts its progress
    in gradients: ``iter T, gradients G/BUDGET (P%)  ...``. The rate and the ETA leave out the
    seconds Numba spent compiling (a first run's, once). Every other line (evaluations, events)
    starts a line of its own.
    """

    EVERY_FRACTION, EVERY_SECONDS, AT_MOST = 0.1, 30.0, 1.0

    def __init__(self, run, stream=None):
        self.run = run
        self.stream = stream or sys.stdout
        self.start = time.perf_counter()
        self.compiled = run._compiling.total()
        self.bar = None
        self.last_time, self.last_pos = self.start, self._position(run.t)[0]
        self.first = self.last_pos
        # a terminal too narrow to draw in (some headless sessions report 0 columns) gets lines
        if self.stream.isatty() and shutil.get_terminal_size((0, 0)).columns >= 40:
            from tqdm import tqdm
            pos, end = self._position(run.t)
            self.bar = tqdm(total=end, initial=pos, unit="it" if run.budget is None else " gradients",
                            dynamic_ncols=True, leave=False, file=self.stream)

    def _position(self, done):
        """(where the run is, where it ends): iterations, or gradients with a budget."""
        run = self.run
        return (done, run.total) if run.budget is None else (int(run.grads_done), int(run.budget))

    def show(self, done, loss):
        now = time.perf_counter()
        elapsed = max(now - self.start - (self.run._compiling.total() - self.compiled), 1e-12)
        rate = self.run.samples_per_second(elapsed)
        pos, end = self._position(done)
        if self.bar is not None:
            self.bar.update(pos - self.bar.n)
            self.bar.set_postfix(loss=f"{loss:.4f}", samples_s=f"{rate:.0f}", **self.run.progress_info)
            return
        due = (pos - self.last_pos >= self.EVERY_FRACTION * end or now - self.last_time >= self.EVERY_SECONDS
               or pos >= end)
        if not due or (now - self.last_time < self.AT_MOST and pos < end):
            return
        speed = (pos - self.first) / elapsed
        eta = (end - pos) / speed if speed > 0 else float("inf")
        extra = "".join(f"  {k} {v}" for k, v in self.run.progress_info.items())
        where = (f"{done:>{len(str(end))}d}/{end}" if self.run.budget is None else
                 f"{done}, gradients {pos:,d}/{end:,d}")
        print(f"iter {where} ({100 * pos / end:5.1f}%)  loss {loss:.4f}  "
              f"{rate:,.0f} samples/s  ETA {_clock(eta)}{extra}", file=self.stream, flush=True)
        self.last_time, self.last_pos = now, pos

    def close(self):
        if self.bar is not None:
            self.bar.close()


def _clock(seconds):
    if not np.isfinite(seconds):
        return "?"
    s = int(round(seconds))
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"


#: the per-iteration records of every run (a method may add its own with Run.record)
FIELDS = ("compute", "idle", "comm", "wall", "loss", "codec", "update", "global_bytes", "local_bytes", "lr",
          "compile", "evaluate", "checkpoint", "gradients")


class _CompileClock:
    """Seconds Numba spends compiling kernels (not loading them from its disk cache), from
    Numba's event API, per thread: the first run after an install or a change compiles the
    kernels it meets, inside whatever part of an iteration first calls them; the run's timers
    take this thread's compiling out of what they time (``mine()`` before and after). Listens
    while registered (``with clock:``); ``take()`` returns the seconds compiled by any thread
    since the last take, ``total()`` all of them, ``intervals(lo, hi)`` the spans of the thread
    ``main`` (the one that runs the loop) that lie in [lo, hi]."""

    def __init__(self):
        from numba.core import event
        clock = self

        class Listener(event.Listener):
            def on_start(self, ev):
                me = threading.get_ident()
                with clock._lock:
                    depth = clock._depth.get(me, 0)
                    if depth == 0:
                        clock._since[me] = time.perf_counter()
                    clock._depth[me] = depth + 1

            def on_end(self, ev):
                me = threading.get_ident()
                with clock._lock:
                    clock._depth[me] -= 1
                    if clock._depth[me] == 0:
                        now = time.perf_counter()
                        dt = now - clock._since[me]
                        clock._mine[me] = clock._mine.get(me, 0.0) + dt
                        clock._seconds += dt
                        clock._total += dt
                        if me == clock.main:
                            clock._spans.append((clock._since[me], now))

        self._event, self._listener = event, Listener()
        self._lock = threading.Lock()
        self._depth, self._since, self._mine = {}, {}, {}
        self._seconds = self._total = 0.0
        self._spans = []
        self.main = None

    def __enter__(self):
        self._event.register("numba:compile", self._listener)
        return self

    def __exit__(self, *exc):
        self._event.unregister("numba:compile", self._listener)

    def mine(self):
        """Seconds the calling thread has spent compiling so far."""
        return self._mine.get(threading.get_ident(), 0.0)

    def total(self):
        return self._total

    def intervals(self, lo, hi):
        """The main thread's compiling spans that overlap [lo, hi] (older ones are dropped)."""
        with self._lock:
            self._spans = [(a, b) for a, b in self._spans if b > lo]
            return [(max(a, lo), min(b, hi)) for a, b in self._spans if a < hi]

    def take(self):
        with self._lock:
            seconds, self._seconds = self._seconds, 0.0
        return seconds


class _LayerSpans:
    """--timeline, a pass with ``--poll``: each layer of the forward and the backward pass and
    each poll after it as spans of their own (the ``on_layer`` of the network)."""

    def __init__(self, tl, net, label, poll):
        self.tl, self.poll, self.since, self.k = tl, poll, 0.0, 0
        self.line = (label or "").split(" ")[0]
        self.names = _layer_names(net)

    def __call__(self):
        a = time.perf_counter()
        name = self.names[self.k] if self.k < len(self.names) else f"layer {self.k}"
        self.tl.add("compute", f"{self.line} {name}", self.since, a)
        self.poll()
        self.since = time.perf_counter()
        self.tl.add("mpi", f"{self.line} MPI_Test (poll)", a, self.since)
        self.k += 1


@functools.lru_cache(maxsize=8)
def _layer_names(net):
    """The layers in the order a pass calls on_layer: forward, then backward (a frozen layer
    with parameters, or one below the lowest trainable, calls none)."""
    kinds = [type(layer).__name__.lower() for layer in net.layers]
    fwd = [f"forward {i} {k}" for i, k in enumerate(kinds)]
    bwd = [f"backward {i} {kinds[i]}" for i in range(len(kinds) - 1, net._lowest_trainable - 1, -1)
           if not (net.layers[i].param_shapes and net.layers[i].frozen)]
    return tuple(fwd + bwd)


class _Span:
    """A --timeline span around the enclosed block (Run.span)."""

    def __init__(self, tl, kind, label, it, nbytes):
        self.tl, self.kind, self.label, self.it, self.nbytes = tl, kind, label, it, nbytes

    def __enter__(self):
        self.t0 = time.perf_counter()

    def __exit__(self, *exc):
        self.tl.add(self.kind, self.label, self.t0, time.perf_counter(), self.nbytes, self.it)


@contextlib.contextmanager
def _link_observed(tl):
    """While the loop runs with --timeline, the emulated link reports its modelled transfers."""
    if tl is None:
        yield
        return
    from refsgd.comm import link
    link.observer = tl.link_span
    try:
        yield
    finally:
        link.observer = None


def _test_all(reqs):
    """MPI_Test on each request: lets a library without a progress thread advance them."""
    for r in reqs:
        r.Test()


@contextlib.contextmanager
def prompt_handover(interval=2e-4):
    """CPython's GIL switch interval shortened (default 5 ms) while a method's own threads run.

    A communication thread that returns from MPI, or wakes up from a condition variable, needs
    the GIL back; if the computation thread is in Python code, the waiter gets it only after the
    switch interval. At 5 ms that is more than a whole mnist_mlp step, and it showed as up to
    1.2 ms per iteration of Pipe-SGD on 2 cores (bench overlap); at 0.2 ms it is gone."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(min(old, interval))
    try:
        yield
    finally:
        sys.setswitchinterval(old)


@nb.njit(cache=True, nogil=True)
def _all_finite(v):
    """Whether every element is finite, in one pass without a temporary: x * 0 is 0 for a finite
    x and NaN for an infinite or NaN one (an integer count, so that the loop vectorises)."""
    bad = 0
    for j in range(v.size):
        bad += v[j] * 0 != 0
    return bad == 0


@nb.njit(cache=True, nogil=True)
def _no_nan(v):
    """Whether no element is NaN (infinities allowed), in one pass without a temporary."""
    bad = 0
    for j in range(v.size):
        bad += v[j] != v[j]
    return bad == 0


def _union_length(spans, lo=-np.inf, hi=np.inf, holes=()):
    """Total length of the union of the intervals within [lo, hi] (overlapping requests count
    once), less its parts inside ``holes`` (disjoint intervals, e.g. Numba compiling)."""
    def covered(a, b):
        total, end = 0.0, a
        for s, e in sorted(spans):
            s, e = max(s, end), min(e, b)
            if e > s:
                total += e - s
                end = e
        return total
    return max(covered(lo, hi) - sum(covered(max(a, lo), min(b, hi)) for a, b in holes), 0.0)


class NonFiniteLoss(AgreedError):
    """The loss or the state became NaN or infinite (raised on every rank at the same iteration)."""
