"""Recording a timeline: the window spec, the span kinds, and :class:`Timeline`, which the Run's
timing points fill during the window's iterations and align across ranks (a ping-pong with
rank 0)."""

import re
import threading
import time

import numpy as np

from refsgd.errors import RefsgdError

KINDS = ("iteration", "compute", "idle", "codec", "update", "mpi", "comm", "flight", "link", "evaluate",
         "checkpoint")

_KIND = {k: i for i, k in enumerate(KINDS)}

FLIGHT, LINK = -1, -2            # the pseudo-threads of the requests in flight and of the link

DEFAULT_START, DEFAULT_COUNT = 3, 5

MAX_COUNT = 10_000               # iterations in a window

MAX_SPANS = 2_000_000            # a safety net: recording stops there (``truncated``)


def parse_spec(text):
    """``--timeline`` SPEC -> (start or None for the default, count); RefsgdError if malformed."""
    if text is None or text is True or str(text) in ("default", "True"):
        return None, DEFAULT_COUNT
    if not str(text).strip():  # not taken for the default: an empty shell variable, most likely
        raise RefsgdError(f"--timeline {text!r}: give START:COUNT (e.g. 100:5), START or :COUNT, or --timeline "
                          "alone for the default window")
    m = re.fullmatch(r"\s*(?:it)?(\d*)\s*(?::\s*(\d+))?\s*", str(text))
    if not m or (m.group(1) == "" and m.group(2) is None):
        raise RefsgdError(f"--timeline {text!r}: give START:COUNT (iterations START .. START+COUNT-1, e.g. 100:5 "
                          "or it100:5), START, or :COUNT")
    start = int(m.group(1)) if m.group(1) else None
    count = int(m.group(2)) if m.group(2) is not None else DEFAULT_COUNT
    if not 1 <= count <= MAX_COUNT:
        raise RefsgdError(f"--timeline {text!r}: COUNT must be 1 .. {MAX_COUNT} iterations, got {count}")
    return start, count


def window(spec, total, first=0):
    """(first iteration, count) of the window for a run of iterations ``first`` (> 0 after a
    --resume) .. ``total`` - 1 (None: unknown, PP-ASGD's threaded mode with --epochs): the
    default starts DEFAULT_START iterations after ``first``; moved into the run to fit."""
    start, count = parse_spec(spec)
    start = first + DEFAULT_START if start is None else max(start, first)
    if total is not None:
        count = max(min(count, total - first), 1)
        start = max(min(start, total - count), first)
    return start, count


class NoTimeline:
    """The recorder of a run without ``--timeline``: the Run's timing points call it as they call
    a :class:`Timeline`, and it records nothing (``active`` is always False), so that no timing
    point asks whether there is a timeline."""

    enabled = False
    active = False

    def __init__(self):
        self.idle_start = None         # written by the timing points, never read
        self.posted = False

    def at(self, t):
        pass

    def add(self, kind, label, start, end, nbytes=0, it=None, thread=None):
        pass

    def depart(self, key, label, start, nbytes=0, it=None):
        pass

    def land(self, key, end, since=None, label=None):
        pass

    def align(self, comm, phase, rounds=30):
        pass


class Timeline:
    """The spans of one rank (see the module docstring)."""

    enabled = True

    def __init__(self, start, count):
        self.start, self.count = start, count
        self.active = False
        self.t = -1
        self.spans = []
        self.threads = {}              # thread ident -> index; names in self.names
        self.names = []
        self.flights = {}              # key -> (start, label, iteration, bytes)
        self.idle_start = None         # the start of the idle() being timed (a posting's start)
        self.posted = False            # whether a request was started inside it
        self.truncated = False
        self.clock = {}
        self.to_wtime = 0.0            # perf_counter + to_wtime + offset = rank 0's Wtime
        self.origin = 0.0
        # the thread that runs the loop (the one that makes the Run) is thread 0, even when a
        # method's own thread (PP-ASGD's gradient threads) records a span before it does
        self.thread()

    def at(self, t):
        """Iteration t begins on the loop's thread: record it if it is in the window."""
        self.t = t
        self.active = self.start <= t < self.start + self.count and not self.truncated
        if self.active and len(self.spans) > MAX_SPANS:
            self.active, self.truncated = False, True

    def thread(self):
        ident = threading.get_ident()
        k = self.threads.get(ident)
        if k is None:
            with _NAMES_LOCK:
                k = self.threads.setdefault(ident, len(self.names))
                if k == len(self.names):
                    name = threading.current_thread().name
                    self.names.append("main" if name == "MainThread" else name)
        return k

    def add(self, kind, label, start, end, nbytes=0, it=None, thread=None):
        self.spans.append((start, end, _KIND[kind], label or kind, self.t if it is None else it, int(nbytes),
                           self.thread() if thread is None else thread))

    def depart(self, key, label, start, nbytes=0, it=None):
        """Communication ``key`` is in flight from ``start`` (posted, or handed to a thread). Noted
        in and out of the window (a request posted before it may complete in it); the entry is
        dropped when it lands, so the table holds only what is in flight."""
        self.flights[key] = (start, label, self.t if it is None else it, int(nbytes), self.active)

    def land(self, key, end, since=None, label=None):
        """Communication ``key`` was seen complete at ``end``: its span in flight, when it departed
        or lands in the window. One not noted (started before the run, e.g. at a checkpoint)
        counts from ``since``, the start of the wait."""
        f = self.flights.pop(key, None)
        if f is None:
            if since is None or not self.active:
                return
            f = (since, label, self.t, 0, True)
        if f[4] or self.active:
            self.spans.append((f[0], end, _KIND["flight"], f[1] or "in flight", f[2], f[3], FLIGHT))

    def link_span(self, start, end):
        """The emulated link's modelled transfer (refsgd.comm.linkcomm calls it)."""
        if self.active:
            self.spans.append((start, end, _KIND["link"], "modelled transfer (--link)", self.t, 0, LINK))

    # ------------------------------------------------------------------ clocks
    def align(self, comm, phase, rounds=30):
        """Collective: this rank's perf_counter on rank 0's Wtime clock (see the module docstring).
        ``phase`` "start" sets the mapping, "end" measures the drift."""
        from mpi4py import MPI  # noqa: PLC0415 mpi4py: the timeline's files are read without MPI
        a, w, b = time.perf_counter(), MPI.Wtime(), time.perf_counter()
        to_wtime = w - (a + b) / 2
        if comm.Get_size() == 1:
            offset, error, method = 0.0, 0.0, "one rank"
        elif comm.Get_attr(MPI.WTIME_IS_GLOBAL):
            offset, error, method = 0.0, 0.0, "MPI_WTIME_IS_GLOBAL"
        else:
            offset, error = _ping_pong(comm, rounds)
            method = f"ping-pong with rank 0, fastest of {rounds} or more round trips"
        if phase == "start":
            self.to_wtime, self.offset = to_wtime, offset
            self.clock = dict(offset_s=offset, error_s=error, drift_s=0.0, method=method)
            here = np.array([time.perf_counter() + to_wtime + offset])
            comm.Bcast(here, root=0)          # rank 0's clock at the start: the file's zero
            self.origin = float(here[0])
        else:
            # the same instant read through the start's mapping and through a fresh one
            now = time.perf_counter()
            drift = (now + to_wtime + offset) - (now + self.to_wtime + self.offset)
            self.clock["drift_s"] = drift
            self.clock["error_s"] = max(self.clock["error_s"], error)

    def local(self):
        """This rank's spans as arrays on the common clock (seconds from the file's zero)."""
        shift = self.to_wtime + self.offset - self.origin
        n = len(self.spans)
        cols = list(zip(*self.spans)) if n else [()] * 7
        return dict(start=np.asarray(cols[0], dtype=np.float64) + shift,
                    end=np.asarray(cols[1], dtype=np.float64) + shift,
                    kind=np.asarray(cols[2], dtype=np.int64), label=list(cols[3]),
                    iteration=np.asarray(cols[4], dtype=np.int64), bytes=np.asarray(cols[5], dtype=np.int64),
                    thread=np.asarray(cols[6], dtype=np.int64), names=list(self.names), clock=dict(self.clock),
                    truncated=self.truncated)

_NAMES_LOCK = threading.Lock()


def _ping_pong(comm, rounds, good=20e-6, most=10):
    """(offset, error) of this rank's MPI.Wtime against rank 0's: rank 0 answers each rank's
    round trips in turn with its clock; the fastest round trip gives the offset (rank 0's clock
    minus the midpoint of the trip) and half its length bounds the error. A rank makes
    ``rounds`` round trips, and up to ``most`` times as many while none was faster than
    ``good`` (on a loaded machine a rank may wait for a core in every one of the first ones)."""
    from mpi4py import MPI  # noqa: PLC0415 mpi4py: the timeline's files are read without MPI
    rank, size = comm.Get_rank(), comm.Get_size()
    buf = np.zeros(1)
    tag = 27
    if rank == 0:
        for r in range(1, size):
            while True:
                comm.Recv(buf, source=r, tag=tag)
                if buf[0] < 0:                           # that rank is done
                    break
                buf[0] = MPI.Wtime()
                comm.Send(buf, dest=r, tag=tag)
        return 0.0, 0.0
    best, offset = np.inf, 0.0
    for k in range(rounds * most):
        if k >= rounds and best < good:
            break
        a = MPI.Wtime()
        buf[0] = 0.0
        comm.Send(buf, dest=0, tag=tag)
        comm.Recv(buf, source=0, tag=tag)
        b = MPI.Wtime()
        if b - a < best:
            best, offset = b - a, buf[0] - (a + b) / 2
    buf[0] = -1.0
    comm.Send(buf, dest=0, tag=tag)
    return float(offset), float(best / 2)
