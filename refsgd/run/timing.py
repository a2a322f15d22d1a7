"""The Run's clock (:class:`Clock`, ``run.clock``): its timing points (compute, idle, codec,
update, the spans of ``--timeline``), the clock of Numba's compiling that every timer leaves out,
the length of the communication in flight, and the prompt handover between a method's threads.
The collectives that these time are :mod:`refsgd.run.collectives`."""

import contextlib
import functools
import sys
import threading
import time

import numpy as np
from numba.core import event

from refsgd.comm import linkcomm


#: the iteration's timers of the clock (Clock.seconds), the per-iteration records of the same names
TIMERS = ("compute", "idle", "codec", "update")


class Clock:
    """The Run's clock (``run.clock``): the iteration's timers (``seconds``: compute, idle, codec,
    update), the communication in flight seen in it (``spans``), the ``--timeline`` recorder
    (``timeline``) and Numba's compiling (``compiling``), which every timer leaves out. A method
    marks its work with the timing points :meth:`idle`, :meth:`codec`, :meth:`update`,
    :meth:`awaiting_gradients` (and for --timeline alone :meth:`span` and :meth:`in_flight`);
    the Run's gradients and the collectives (:mod:`refsgd.run.collectives`) add theirs with
    :meth:`add`; the loop starts and ends each iteration (:meth:`begin`, :meth:`comm_seconds`)."""

    def __init__(self, timeline):
        self.timeline = timeline
        # Numba's one-off work on the kernels (compiling them on a first run, loading them from
        # its cache on later ones) is counted from here on and kept out of every time
        self.compiling = _CompileClock.shared()
        self.compiled = self.compiling.local  # .seconds: this thread's compiling so far
        self.compiling.take()
        self.seconds = dict.fromkeys(TIMERS, 0.0)   # this iteration's
        self.spans = []         # (start, end) of the communication seen in this iteration
        self.thread_spans = []  # those of a thread beside the loop (Collectives.thread_comm), taken at each boundary

    def begin(self):
        """A new iteration: its timers at zero, no communication seen."""
        for k in TIMERS:
            self.seconds[k] = 0.0
        self.spans = []

    def idle(self, label=None, data=None, awaits=None):
        """Time the enclosed blocking communication as idle.

        For --timeline: ``label`` the listing line (``"L2 MPI_Allreduce(g_i)"``), ``data`` the
        buffer it sends (its bytes are recorded), ``awaits`` the key of the communication of
        another thread it waits for (:meth:`in_flight`), whose time in flight ends here. A
        blocking call is in flight while it runs; a request started inside is in flight from
        the start of the idle time (the posting) to its completion."""
        return _Idle(self, label, data, awaits)

    def codec(self, label=None):
        """Time the enclosed compression or decompression as *codec* (label: its listing line)."""
        return _Timed(self, "codec", label)

    def update(self, label=None):
        """Time the enclosed arithmetic of the method outside its gradients as *update*: its
        update of the state (the optimizer step) and the scalings its listing applies (e.g.
        LAGA's 1/N); the part of an iteration's "other" time that is the method's own work,
        not the framework's. label: the listing lines it executes (--timeline)."""
        return _Timed(self, "update", label)

    def span(self, kind, label, it=None, data=None):
        """--timeline: the enclosed work as a span of ``kind`` (refsgd.timeline.KINDS) on the
        calling thread, e.g. the all-reduce of a communication thread; it times nothing else. Not
        for a method's arithmetic: :meth:`update` is the one way to mark it (timed and drawn), so
        the update column counts the same work in every method."""
        if kind == "update":
            raise ValueError("run.clock.span('update', ...) draws an update without timing it: "
                             "use run.clock.update(label)")
        tl = self.timeline
        if not tl.active:
            return contextlib.nullcontext()
        return _Span(tl, kind, label, it, getattr(data, "nbytes", 0))

    def in_flight(self, key, label, data=None):
        """--timeline: communication ``key`` handed to another thread is in flight from now until
        an :meth:`idle` that ``awaits`` it returns (Pipe-SGD's L10 -> L3)."""
        self.timeline.depart(key, label, time.perf_counter(), getattr(data, "nbytes", 0))

    def awaiting_gradients(self, label=None):
        """Time the enclosed wait of the loop's thread for gradients that other threads compute
        (PP-ASGD's update thread waiting for its gradient threads) as the iteration's *compute*:
        the computation on the path of the iteration; the threads' own work is ``thread_compute``."""
        return _Timed(self, "compute", label)

    def add(self, kind, label, t0, t1, since):
        """[t0, t1] of the calling thread, less its compiling since ``since`` (``compiled.seconds``
        at t0), to the timer ``kind`` and, with --timeline, a span of ``kind``."""
        self.seconds[kind] += self.less_compiling(t1 - t0, since)
        tl = self.timeline
        if tl.active:
            tl.add(kind, label, t0, t1)

    def less_compiling(self, seconds, since):
        """``seconds`` of this thread less what Numba spent compiling in it since ``since``
        (``self.compiled.seconds`` at the start): a first run's compilation is never timed
        as compute, idle, update or codec (it is recorded apart, as ``compile``)."""
        return max(seconds - (self.compiled.seconds - since), 0.0)

    def comm_seconds(self, t0, t1, open_since=()):
        """The iteration [t0, t1]'s time with communication in flight: the union of its spans,
        those of a thread beside the loop, and the requests still in flight at its end (started at
        ``open_since``); none of it outside [t0, t1] or inside the loop thread's compiling."""
        while self.thread_spans:  # a thread beside the loop appends while we take
            self.spans.append(self.thread_spans.pop(0))
        spans = self.spans + [(s, t1) for s in open_since]
        return _union_length(spans, t0, t1, holes=self.compiling.intervals(t0, t1))

    def discount_compile_waits(self, rec, ran, comm):
        """Collective over ``comm``, after the loop: a rank that compiled less than another (or not
        at all) waited for it in the method's next collective, in the iteration of the compiling or
        the one after. That wait, at most the difference to the rank that compiled longest in the
        iteration, is moved from idle (and from the wall time and the time in flight) to compile
        in the records ``rec`` of the last ``ran`` iterations, so that another rank's compiling is
        not read as communication either."""
        world = comm.Get_size()
        if ran == 0 or world == 1:
            return
        lo = len(rec["wall"]) - ran
        mine = np.ascontiguousarray(rec["compile"][lo:], dtype=np.float64)
        every = np.empty((world, ran))
        comm.Allgather(mine, every)
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

    def outside(self, kind, fn, *args):
        """fn(*args) at an iteration boundary, outside the iteration's times (with --timeline a
        span of ``kind``, "evaluate" or "checkpoint"); returns its seconds (Numba's compiling in
        it excluded)."""
        t0, c0 = time.perf_counter(), self.compiled.seconds
        fn(*args)
        t1 = time.perf_counter()
        tl = self.timeline
        if tl.active:
            tl.add(kind, "evaluation" if kind == "evaluate" else "checkpoint", t0, t1)
        return self.less_compiling(t1 - t0, c0)


class _CompileClock:
    """Seconds of Numba's one-off work on a kernel's first call in a process, per thread:
    compiling it (the first run after an install or a change, seconds per kernel) or loading it
    from Numba's disk cache (every later run, milliseconds), saving it there, and waiting for
    another thread that does. Numba holds its compiler lock for all of that and announces it
    (the event ``numba:compiler_lock``, from before it waits for the lock to after it lets go);
    its ``numba:compile`` covers only the compiling, not the cache, and was all this clock
    counted before. The typing of a first call's arguments, before the lock (about 1 ms a
    kernel), has no event: the Run calls its update kernels before its clock starts
    (:meth:`refsgd.run.Run._warm_up`), so that no timed update holds it. The run's
    timers take this thread's seconds out of what they time (``mine()`` before and after).
    ``announce``: called once, before the first kernel is compiled (not loaded), so that a first
    run says what it waits for. Listens while registered (``with clock:``, or for good with
    :meth:`shared`); ``take()`` returns the seconds of any thread since the last take,
    ``total()`` all of them, ``intervals(lo, hi)`` the spans of the thread ``main`` (the one that
    runs the loop) that lie in [lo, hi]."""

    _shared = None

    def __init__(self):
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
                        clock.local.seconds += dt       # on_end runs in the compiling thread
                        clock._seconds += dt
                        clock._total += dt
                        if me == clock.main:
                            clock._spans.append((clock._since[me], now))

        class Compiling(event.Listener):
            def on_start(self, ev):
                say, clock.announce = clock.announce, None
                if say is not None:
                    say()

            def on_end(self, ev):
                pass

        self._event = event
        self._listeners = (("numba:compiler_lock", Listener()), ("numba:compile", Compiling()))
        self._lock = threading.Lock()
        self._depth, self._since = {}, {}
        #: ``local.seconds``: the calling thread's compiling so far (a thread-local: a timing point
        #: reads it twice, and an attribute costs less than a call, an ident and a dict lookup)
        self.local = _Seconds()
        self._seconds = self._total = 0.0
        self._spans = []
        self.main = None
        self.announce = None

    @classmethod
    def shared(cls):
        """The process's clock, registered for good on first use: a Run's kernels may first be
        called anywhere from its warm-up to its last evaluation, and a clock that stopped
        listening between them would miss some (a listener costs nothing between compilations)."""
        if cls._shared is None:
            cls._shared = cls().__enter__()
        return cls._shared

    def __enter__(self):
        for kind, listener in self._listeners:
            self._event.register(kind, listener)
        return self

    def __exit__(self, *exc):
        for kind, listener in self._listeners:
            self._event.unregister(kind, listener)

    def mine(self):
        """Seconds the calling thread has spent compiling so far (``local.seconds``)."""
        return self.local.seconds

    def total(self):
        return self._total

    def intervals(self, lo, hi):
        """The main thread's compiling spans that overlap [lo, hi] (older ones are dropped)."""
        if not self._spans:   # no compiling since the last call (every iteration but a few)
            return ()
        with self._lock:
            self._spans = [(a, b) for a, b in self._spans if b > lo]
            return [(max(a, lo), min(b, hi)) for a, b in self._spans if a < hi]

    def take(self):
        if not self._seconds:   # nothing compiled since the last take (every iteration but a few)
            return 0.0
        with self._lock:
            seconds, self._seconds = self._seconds, 0.0
        return seconds


class _Seconds(threading.local):
    seconds = 0.0


class _Timed:
    """A timing point of the clock (update, codec, awaiting_gradients): the enclosed seconds, less
    Numba's compiling in them, added to the clock's timer ``kind`` and, with --timeline, a span of
    ``kind``. A class rather than a generator: entered several times an iteration, it costs less."""

    __slots__ = ("clock", "kind", "label", "t0", "c0")

    def __init__(self, clock, kind, label):
        self.clock, self.kind, self.label = clock, kind, label

    def __enter__(self):
        self.t0, self.c0 = time.perf_counter(), self.clock.compiled.seconds

    def __exit__(self, *exc):
        self.clock.add(self.kind, self.label, self.t0, time.perf_counter(), self.c0)


class _Idle:
    """Clock.idle: the enclosed blocking communication timed as idle and, with --timeline, its spans."""

    __slots__ = ("clock", "label", "data", "awaits", "t0", "c0")

    def __init__(self, clock, label, data, awaits):
        self.clock, self.label, self.data, self.awaits = clock, label, data, awaits

    def __enter__(self):
        clock = self.clock
        t0 = time.perf_counter()
        self.t0, self.c0 = t0, clock.compiled.seconds
        tl = clock.timeline
        tl.idle_start, tl.posted = t0, False

    def __exit__(self, *exc):
        t1 = time.perf_counter()
        clock, t0, label, awaits = self.clock, self.t0, self.label, self.awaits
        clock.seconds["idle"] += clock.less_compiling(t1 - t0, self.c0)
        clock.spans.append((t0, t1))
        tl = clock.timeline
        if awaits is not None:
            tl.land(awaits, t1, since=t0, label=label)
        if tl.active:
            nbytes = getattr(self.data, "nbytes", 0)
            tl.add("idle", label, t0, t1, nbytes)
            if awaits is None and not tl.posted:  # a blocking call: in flight while it runs
                tl.depart(None, label, t0, nbytes)
                tl.land(None, t1)
        tl.idle_start = None


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
    """A --timeline span around the enclosed block (Clock.span)."""

    def __init__(self, tl, kind, label, it, nbytes):
        self.tl, self.kind, self.label, self.it, self.nbytes = tl, kind, label, it, nbytes

    def __enter__(self):
        self.t0 = time.perf_counter()

    def __exit__(self, *exc):
        self.tl.add(self.kind, self.label, self.t0, time.perf_counter(), self.nbytes, self.it)


@contextlib.contextmanager
def _link_observed(tl):
    """While the loop runs with --timeline, the emulated link reports its modelled transfers."""
    if not tl.enabled:
        yield
        return
    linkcomm.observer = tl.link_span
    try:
        yield
    finally:
        linkcomm.observer = None


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


def _union_length(spans, lo=-np.inf, hi=np.inf, holes=()):
    """Total length of the union of the intervals within [lo, hi] (overlapping requests count
    once), less its parts inside ``holes`` (disjoint intervals, e.g. Numba compiling)."""
    if not holes and len(spans) == 1:   # most iterations: one blocking call or one request
        (s, e), = spans
        return max(min(e, hi) - max(s, lo), 0.0)
    spans = sorted(spans)
    return max(_covered(spans, lo, hi) - sum(_covered(spans, max(a, lo), min(b, hi)) for a, b in holes), 0.0)


def _covered(spans, a, b):
    """Length of the union of the sorted intervals ``spans`` within [a, b]."""
    total, end = 0.0, a
    for s, e in spans:
        s, e = max(s, end), min(e, b)
        if e > s:
            total += e - s
            end = e
    return total
