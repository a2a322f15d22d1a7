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
* ``for t in run.iterations():``: the loop; at iteration boundaries it records the times and
  the loss, checks for a non-finite loss on all ranks, shows progress, evaluates the model
  given by ``run.set_model(fn)`` on the test set, and stops after the last iteration. An
  iteration's recorded wall time runs from its start to the end of that bookkeeping (not
  evaluation or checkpoints): wall - compute - idle - codec is everything else it cost.

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

from refsgd import AgreedError, RefsgdError, Stopped, failure
from refsgd.datasets import epoch_batches
from refsgd.optim import SGD


class Run:
    def __init__(self, comm, net, data, cfg, schedule, log=print, restorer=None, checkpoint=None, servers=0):
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
        self.total = cfg.iterations if cfg.iterations else cfg.epochs * self.iters_per_epoch
        # compile / load the Numba kernels now, so the first iteration's compute time is real
        w0 = net.init_params(0)
        net.loss_and_grad(w0, data.x_train[:2], data.y_train[:2], out=np.empty_like(w0))
        self.t = 0
        self._first, self.iterations_run = 0, 0
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
            for v in self.records.values():  # a field the checkpoint predates: zeros
                v.extend([0.0] * (n - len(v)))
            self.evals = list(restorer.evals)
            self.events = list(restorer.events)
            if restorer.schedule_state is not None:
                schedule.state[...] = restorer.schedule_state

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
        rec = dict(iteration=self.t, epoch=self.t / self.iters_per_epoch, what=what, **fields)
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

    def grad(self, w, g, on_segment=None, k=None, progress=None):
        """Gradient of micro-batch k (default: the next one of iteration t) at w, into g.

        progress: a request (or list) in flight; with ``--poll`` its ``Test()`` is called after
        every layer of the forward and the backward pass, because MPI libraries without an
        asynchronous progress thread advance a non-blocking collective only inside MPI calls.
        """
        on_layer = None
        if progress is not None and getattr(self.cfg, "poll", False):
            on_layer = functools.partial(_test_all, progress if isinstance(progress, list) else [progress])
        if k is None:
            k = self.t * self.tau + self._micro
            self._micro += 1
        idx = self.batch_indices(k)
        if self.tracing:
            self._iter_batches.append(idx)
        t0 = time.perf_counter()
        loss = self.net.loss_and_grad(w, self.data.x_train[idx], self.data.y_train[idx], out=g,
                                      on_segment=on_segment, on_layer=on_layer)
        self._compute += time.perf_counter() - t0
        self._loss += loss
        self._nloss += 1
        if not np.isfinite(loss) and self.first_bad is None:
            self.first_bad = self.t
        return loss

    def grad_at(self, w, g, idx):
        """Gradient (mean over the samples ``idx``) at w, into g; safe to call from several
        threads at once (a method with gradient threads): the timers and the loss are updated
        under a lock, and the batch is not recorded (see :meth:`trace_batches`). Compute time
        is summed over the threads."""
        t0 = time.perf_counter()
        loss = self.net.loss_and_grad(w, self.data.x_train[idx], self.data.y_train[idx], out=g)
        dt = time.perf_counter() - t0
        with self._lock:
            self._compute += dt
            self._loss += loss
            self._nloss += 1
            if not np.isfinite(loss) and self.first_bad is None:
                self.first_bad = self.t
        return loss

    def trace_batches(self, batches):
        """The sample indices this iteration used, (tau, b), for --trace (with :meth:`grad_at`)."""
        if self.tracing:
            self._iter_batches.extend(np.asarray(batches, dtype=np.int64))

    def record(self, name, value):
        """A per-iteration value of the method (e.g. PP-ASGD's staleness): kept in the records,
        the checkpoints and the metrics file (/iterations/<name>); NaN where not given."""
        self._extra[name] = float(value)

    @contextlib.contextmanager
    def idle(self):
        """Time the enclosed blocking communication as idle."""
        t0 = time.perf_counter()
        try:
            yield
        finally:
            t1 = time.perf_counter()
            self._idle += t1 - t0
            self._spans.append((t0, t1))

    def codec(self):
        """Time the enclosed compression or decompression as *codec*."""
        return self._timed("_codec")

    def update(self):
        """Time the enclosed arithmetic of the method outside its gradients as *update*: its
        update of the state (the optimizer step) and the scalings its listing applies (e.g.
        LAGA's 1/N); the part of an iteration's "other" time that is the method's own work,
        not the framework's."""
        return self._timed("_update")

    @contextlib.contextmanager
    def _timed(self, total):
        t0 = time.perf_counter()
        try:
            yield
        finally:
            setattr(self, total, getattr(self, total) + time.perf_counter() - t0)

    def open_wire(self):
        """The MPI datatype and operator of the ``--compress`` codec (None without one); the
        method closes it (``wire.close()``) when it ends."""
        name = getattr(self.cfg, "compress", "none")
        if name in (None, "none"):
            return None
        from refsgd.comm import codecs
        return codecs.get(name).open()

    def allreduce_sum(self, comm, x, out, wire=None):
        """Blocking ``out <- sum over ranks of x`` (idle). With a codec ``wire`` (open_wire), x is
        compressed (codec), the all-reduce carries and adds the compressed form (idle), and the
        result is decompressed into out (codec)."""
        if wire is None:
            with self.idle():
                comm.Allreduce(x, out, op=MPI.SUM)
            return out
        send, recv = wire.scratch(x.size)
        with self.codec():
            wire.codec.encode(x, send)
        with self.idle():
            wire.allreduce_wire(comm, send, recv)
        with self.codec():
            wire.codec.decode(recv, out)
        return out

    def note_comm(self, start, end):
        """Communication from start to end (perf_counter seconds), e.g. carried out by a thread."""
        self._spans.append((start, end))

    def on_settle(self, fn):
        """fn() completes the communication in flight and fills the registered state (called
        before every trace record and checkpoint)."""
        self._settle = fn

    def started(self, req):
        """Note the start of a non-blocking request (its lifetime counts as communication)."""
        self._pending.append((req, time.perf_counter()))
        return req

    def wait(self, req):
        """req.Wait(), timed as idle."""
        t0 = time.perf_counter()
        req.Wait()
        t1 = time.perf_counter()
        self._idle += t1 - t0
        self._finish(req, t0, t1)

    def waitall(self, reqs):
        from refsgd.comm.link import waitall  # plain requests too; honours emulated deadlines
        t0 = time.perf_counter()
        waitall(reqs)
        t1 = time.perf_counter()
        self._idle += t1 - t0
        for r in reqs:
            self._finish(r, t0, t1)

    def _finish(self, req, t0, t1):
        """The request's lifetime as communication: from its start (started) or, for one not
        noted, from the wait (t0), so that idle time always lies within the time in flight."""
        for i, (r, s) in enumerate(self._pending):
            if r is req:
                self._spans.append((s, t1))
                del self._pending[i]
                return
        self._spans.append((t0, t1))

    # ------------------------------------------------------------------ the loop
    def iterations(self):
        """Yield t = 0 .. total-1; bookkeeping at each boundary (see the module docstring)."""
        start = time.perf_counter()
        self._run_start = start
        self._first = self.t  # > 0 after --resume: the throughput counts this process's iterations
        log_every = max(1, self.cfg.log_every)
        eval_at = eval_schedule(self.cfg.eval_every, self.iters_per_epoch)
        progress = Progress(self) if self.rank == 0 and self.cfg.progress else None
        self._bar = progress.bar if progress is not None else None
        self._compiling = _CompileClock()
        with failure.deferring(), self._compiling:  # a signal stops every rank at the next loss check
            for t in range(self.t, self.total):
                self.t = t
                self._micro = 0
                self._compute = self._idle = self._codec = self._update = 0.0
                self._spans = []
                self._loss, self._nloss = 0.0, 0
                t0 = time.perf_counter()
                yield t
                self._record(t0)
                if self.tracing:
                    self._record_trace(t)
                last = t + 1 == self.total
                epoch_end = (t + 1) % self.iters_per_epoch == 0
                # a checkpoint is taken after the loss check of the same boundary, so that no
                # non-finite state is ever saved (the last iteration is checkpointed too)
                ckpt = self._checkpoint is not None and ((t + 1) % self._checkpoint[1] == 0 or last)
                if (t + 1) % log_every == 0 or epoch_end or last or ckpt:
                    mean_loss = self._check(t)
                    if progress is not None:
                        progress.show(t + 1, mean_loss)
                # the boundary's bookkeeping (records, trace, loss check, status line) belongs to
                # the iteration's wall time; evaluation and checkpoints do not
                self.records["wall"][-1] = time.perf_counter() - t0
                self.records["idle"][-1] = self._idle
                self.records["comm"][-1] = _union_length(self._spans)  # the check's all-reduce is both
                if eval_at(t + 1) or last:
                    self.evaluate(t)
                if ckpt:
                    self.save_checkpoint()
        if progress is not None:
            progress.close()
            self._bar = None
        self.wall = time.perf_counter() - start
        self.iterations_run = self.total - self._first

    def samples_per_second(self, done, elapsed):
        """Training samples per second of this process: iterations before a --resume do not count."""
        return (done - self._first) * self.workers * self.cfg.batch * self.tau / max(elapsed, 1e-12)

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
        rec["compile"].append(self._compiling.take())  # within the times above (first runs only)
        rec["lr"].append(self.lr(self.t))  # as used: a plateau schedule's lr depends on the run so far
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
        with self.idle():
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
        ep_lo = max(0, t + 1 - self.iters_per_epoch)
        tr = np.asarray(self.records["loss"][ep_lo:t + 1], dtype=np.float64)
        tr = tr[~np.isnan(tr)]
        buf = np.array([loss * len(y), acc * len(y), float(len(y)), float(np.sum(tr)), float(len(tr))])
        out = np.empty_like(buf)
        with self.idle():
            self.control_comm.Allreduce(buf, out, op=MPI.SUM)
        rec = dict(iteration=t + 1, epoch=(t + 1) / self.iters_per_epoch, train_loss=out[3] / max(out[4], 1),
                   test_loss=out[0] / out[2], test_acc=out[1] / out[2],
                   seconds=time.perf_counter() - self._run_start)
        self.evals.append(rec)
        if hasattr(self.schedule, "observe"):
            self.schedule.observe(rec["train_loss"])
        self.log(f"iter {t + 1:>6}  epoch {rec['epoch']:6.2f}  lr {self.lr(t):.4g}  train loss {rec['train_loss']:.4f}  "
                 f"test loss {rec['test_loss']:.4f}  test acc {100 * rec['test_acc']:.2f}%  ({rec['seconds']:.1f} s)")


def eval_schedule(every, iters_per_epoch):
    """--eval-every ("E" epochs or "Nit" iterations, or an int of epochs) -> done -> whether to
    evaluate after ``done`` iterations."""
    text = str(every)
    if text.endswith("it"):
        n = int(text[:-2])
        return lambda done: done % n == 0
    n = int(text) * iters_per_epoch
    return lambda done: done % n == 0


class Progress:
    """Rank 0's progress: a bar when stdout is a terminal, else a status line now and then.

    Under mpiexec stdout is a pipe even in a terminal, so a bar would be a wall of carriage
    returns; there, and in a file, a line ``iter T/TOTAL (P%)  loss L  S samples/s  ETA E`` is
    printed every 10% of the run or every 30 s, whichever comes first (at most one a second).
    Every other line (evaluations, events) starts a line of its own.
    """

    EVERY_FRACTION, EVERY_SECONDS, AT_MOST = 0.1, 30.0, 1.0

    def __init__(self, run, stream=None):
        self.run = run
        self.stream = stream or sys.stdout
        self.start = time.perf_counter()
        self.bar = None
        self.last_time, self.last_done = self.start, run.t
        # a terminal too narrow to draw in (some headless sessions report 0 columns) gets lines
        if self.stream.isatty() and shutil.get_terminal_size((0, 0)).columns >= 40:
            from tqdm import tqdm
            self.bar = tqdm(total=run.total, initial=run.t, unit="it", dynamic_ncols=True, leave=False,
                            file=self.stream)

    def show(self, done, loss):
        now = time.perf_counter()
        rate = self.run.samples_per_second(done, now - self.start)
        if self.bar is not None:
            self.bar.update(done - self.bar.n)
            self.bar.set_postfix(loss=f"{loss:.4f}", samples_s=f"{rate:.0f}", **self.run.progress_info)
            return
        total = self.run.total
        due = (done - self.last_done >= self.EVERY_FRACTION * total or now - self.last_time >= self.EVERY_SECONDS
               or done == total)
        if not due or (now - self.last_time < self.AT_MOST and done != total):
            return
        its = (done - self.run._first) / max(now - self.start, 1e-12)
        eta = (total - done) / its if its > 0 else float("inf")
        extra = "".join(f"  {k} {v}" for k, v in self.run.progress_info.items())
        print(f"iter {done:>{len(str(total))}d}/{total} ({100 * done / total:5.1f}%)  loss {loss:.4f}  "
              f"{rate:,.0f} samples/s  ETA {_clock(eta)}{extra}", file=self.stream, flush=True)
        self.last_time, self.last_done = now, done

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
          "compile")


class _CompileClock:
    """Seconds Numba spends compiling kernels (not loading them from its disk cache), from
    Numba's event API: the first run after an install or a change compiles the kernels it
    meets, inside whatever part of an iteration first calls them. Listens while registered
    (``with clock:``); ``take()`` returns the seconds since the last take."""

    def __init__(self):
        from numba.core import event
        clock = self

        class Listener(event.Listener):
            def on_start(self, ev):
                with clock._lock:
                    if clock._depth == 0:
                        clock._since = time.perf_counter()
                    clock._depth += 1

            def on_end(self, ev):
                with clock._lock:
                    clock._depth -= 1
                    if clock._depth == 0:
                        clock._seconds += time.perf_counter() - clock._since

        self._event, self._listener = event, Listener()
        self._lock = threading.Lock()
        self._depth, self._since, self._seconds = 0, 0.0, 0.0

    def __enter__(self):
        self._event.register("numba:compile", self._listener)
        return self

    def __exit__(self, *exc):
        self._event.unregister("numba:compile", self._listener)

    def take(self):
        with self._lock:
            seconds, self._seconds = self._seconds, 0.0
        return seconds


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


def _union_length(spans):
    """Total length of the union of the intervals (overlapping requests count once)."""
    total, end = 0.0, -np.inf
    for s, e in sorted(spans):
        if e > end:
            total += e - max(s, end)
            end = e
    return total


class NonFiniteLoss(AgreedError):
    """The loss or the state became NaN or infinite (raised on every rank at the same iteration)."""
