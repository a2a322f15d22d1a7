"""The timeline of a run (``refsgd train --timeline [SPEC] --out run.h5``): the spans of a window
of iterations on every rank and in every thread, each named by the listing line it executes.

Recording (:class:`Timeline`, owned by :class:`refsgd.run.Run`). The run's timing points record
the spans while an iteration of the window runs (``active``) and nothing otherwise, so the
number of spans is bounded by the window, not by the run's length; a thread of the method (the
communication thread of Pipe-SGD, the gradient threads of PP-ASGD and ASGD) records into the
same list, with its own thread. A span is ``(start, end, kind, label, iteration, bytes, thread)``:

* kinds (:data:`KINDS`): ``iteration`` (the whole iteration on the thread that runs the loop,
  its boundary bookkeeping included), ``compute`` (a forward and backward pass; per layer where
  the method tests its requests between layers, ``--poll``), ``idle`` (blocked on communication:
  a blocking MPI call, posting a non-blocking one, a Wait, waiting for another thread's
  communication), ``codec`` (compression and decompression), ``update`` (the method's update),
  ``mpi`` (an MPI call that is not idle: a poll's ``MPI_Test``), ``comm`` (a collective that a
  communication thread carries out), ``flight`` (communication in flight: a request from its
  posting to its observed completion, a blocking call while it runs, Pipe-SGD's hand-over of
  g^c_local[t] (L10) to the arrival of its sum (L3)), ``link`` (``--link``: the emulated link's
  modelled transfer), ``evaluate`` and ``checkpoint`` (between iterations);
* label: the listing line as the code's ``# Ln`` comments cite it, e.g. ``L5 MPI_Iallreduce(dw_i)``
  (the run's own bookkeeping: ``loss check MPI_Allreduce``, ``evaluation``, ``checkpoint``);
* iteration: the run's iteration t (Pipe-SGD's communication thread: the t of the all-reduce);
* bytes: a collective's or message's payload (the send buffer), 0 otherwise.

Clocks. Spans are timed with ``time.perf_counter`` (the run's timers), mapped to ``MPI.Wtime``
(both read back to back) and then to rank 0's ``MPI.Wtime``: unless ``MPI_WTIME_IS_GLOBAL``,
each rank measures its offset against rank 0 with ping-pongs before the loop (the round trip
with the smallest time gives the offset, half of it bounds the error) and again after it (the
change is the clocks' drift over the run). Times in the file are seconds from rank 0's clock
at the start of the loop.

SPEC (:func:`parse_spec`): ``START:COUNT`` (iterations START .. START+COUNT-1; ``it100:5`` is
the same as ``100:5``), ``START`` (COUNT = 5) or ``:COUNT``; default ``3:5``, a few iterations
after the first epoch's start, past the first iterations where Numba compiles or loads its
kernels and the caches fill (after a --resume: 3 iterations after the resumed one). A window
past the run's end is moved back to fit, one before a --resume's first iteration forward.

File (in the metrics file, :mod:`refsgd.metrics`, format version 4): the group ``/timeline``
with one-dimensional datasets ``start``, ``end`` (float64 seconds), ``rank``, ``thread`` (index
into the rank's entry of the attribute ``threads``; -1 the requests in flight, -2 the link),
``kind`` (index into ``kinds``), ``label`` (index into ``labels``), ``iteration``, ``bytes``
(int64), and attributes ``kinds``, ``labels``, ``threads`` (JSON), ``window`` ([start, count]),
``clock`` (JSON, per rank: ``offset_s``, ``error_s``, ``drift_s``, ``method``), ``truncated``.

Export: :func:`chrome_trace` (``refsgd report run.h5 --timeline out.json``, the Trace Event
Format of chrome://tracing and Perfetto) and :func:`gantt` (``--timeline-plot t.png``).
"""

import json
import re
import threading
import time

import numpy as np

from refsgd import RefsgdError

KINDS = ("iteration", "compute", "idle", "codec", "update", "mpi", "comm", "flight", "link", "evaluate",
         "checkpoint")
_KIND = {k: i for i, k in enumerate(KINDS)}
FLIGHT, LINK = -1, -2            # the pseudo-threads of the requests in flight and of the link
DEFAULT_START, DEFAULT_COUNT = 3, 5
MAX_COUNT = 10_000               # iterations in a window
MAX_SPANS = 2_000_000            # a safety net: recording stops there (``truncated``)


def parse_spec(text):
    """``--timeline`` SPEC -> (start or None for the default, count); RefsgdError if malformed."""
    if text is None or text is True or str(text) in ("", "default", "True"):
        return None, DEFAULT_COUNT
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


class Timeline:
    """The spans of one rank (see the module docstring)."""

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
        """The emulated link's modelled transfer (refsgd.comm.link calls it)."""
        if self.active:
            self.spans.append((start, end, _KIND["link"], "modelled transfer (--link)", self.t, 0, LINK))

    # ------------------------------------------------------------------ clocks
    def align(self, comm, phase, rounds=30):
        """Collective: this rank's perf_counter on rank 0's Wtime clock (see the module docstring).
        ``phase`` "start" sets the mapping, "end" measures the drift."""
        from mpi4py import MPI
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
    from mpi4py import MPI
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


# ---------------------------------------------------------------------- file
def gather(comm, tl):
    """Collective: every rank's spans on rank 0 (None elsewhere, and when ``tl`` is None)."""
    every = comm.gather(None if tl is None else tl.local(), root=0)
    if comm.Get_rank() != 0 or tl is None:
        return None
    return dict(ranks=every, window=[tl.start, tl.count])


def write(f, gathered):
    """Write the gathered spans into the open metrics file ``f`` (group /timeline)."""
    labels, index = [], {}
    cols = {k: [] for k in ("start", "end", "rank", "thread", "kind", "label", "iteration", "bytes")}
    for r, d in enumerate(gathered["ranks"]):
        for lab in d["label"]:
            if lab not in index:
                index[lab] = len(labels)
                labels.append(lab)
        cols["label"].append(np.array([index[lab] for lab in d["label"]], dtype=np.int64))
        cols["rank"].append(np.full(len(d["start"]), r, dtype=np.int64))
        for k in ("start", "end", "thread", "kind", "iteration", "bytes"):
            cols[k].append(d[k])
    g = f.create_group("timeline")
    for k, v in cols.items():
        g.create_dataset(k, data=np.concatenate(v) if v else np.zeros(0))
    g.attrs["kinds"] = json.dumps(list(KINDS))
    g.attrs["labels"] = json.dumps(labels)
    g.attrs["threads"] = json.dumps([d["names"] for d in gathered["ranks"]])
    g.attrs["window"] = json.dumps(gathered["window"])
    g.attrs["clock"] = json.dumps([d["clock"] for d in gathered["ranks"]])
    g.attrs["truncated"] = any(d["truncated"] for d in gathered["ranks"])


def read(path):
    """The timeline of a metrics file: dict of arrays and attributes; RefsgdError if it has none."""
    from refsgd.files import open_h5
    with open_h5(path, "a metrics file from refsgd train --out") as f:
        if "timeline" not in f:
            raise RefsgdError(f"{path}: no timeline in this metrics file (record one with refsgd train --timeline "
                              "--out RUN.h5)")
        g = f["timeline"]
        try:
            d = {k: np.asarray(g[k][...]) for k in ("start", "end", "rank", "thread", "kind", "label",
                                                    "iteration", "bytes")}
            attrs = {k: json.loads(g.attrs[k]) for k in ("kinds", "labels", "threads", "window", "clock")}
        except (KeyError, TypeError, ValueError, OSError) as exc:
            raise RefsgdError(f"{path}: malformed /timeline ({exc})") from None
        d.update(attrs)
        d["truncated"] = bool(g.attrs.get("truncated", False))
        d["config"] = json.loads(f.attrs.get("config", "{}"))
        d["link"] = str(f.attrs.get("link", "none"))
    lengths = {len(d[k]) for k in ("start", "end", "rank", "thread", "kind", "label", "iteration", "bytes")}
    if len(lengths) != 1:
        raise RefsgdError(f"{path}: malformed /timeline: its columns differ in length")
    d["kind_names"] = [d["kinds"][k] for k in d["kind"]]
    d["label_names"] = [d["labels"][k] for k in d["label"]]
    return d


def clock_text(d, path):
    """One line: what the file's timeline holds and how well its clocks are aligned."""
    first, count = d["window"]
    errors = [c.get("error_s", 0.0) for c in d["clock"]]
    drifts = [abs(c.get("drift_s", 0.0)) for c in d["clock"]]
    how = d["clock"][-1].get("method", "?") if d["clock"] else "?"
    return (f"timeline of {path}: iterations {first}..{first + count - 1}, {len(d['start'])} spans on "
            f"{len(d['threads'])} rank(s); clocks aligned to rank 0 ({how}): error at most "
            f"{1e6 * max(errors, default=0):.1f} us, drift over the run at most {1e6 * max(drifts, default=0):.1f} us"
            + ("; TRUNCATED (too many spans)" if d["truncated"] else ""))


# ---------------------------------------------------------------------- exports
def lanes(starts, ends):
    """A lane for each span so that the spans of one lane do not overlap (first fit, by start)."""
    order = np.argsort(starts, kind="stable")
    free_at, out = [], np.zeros(len(starts), dtype=np.int64)
    for i in order:
        for k, f in enumerate(free_at):
            if f <= starts[i]:
                free_at[k] = ends[i]
                out[i] = k
                break
        else:
            out[i] = len(free_at)
            free_at.append(ends[i])
    return out


def tracks(d):
    """Per rank, the rows of the timeline: [(row name, tid, span indices)], the threads first
    (main, then the method's threads), then the lanes of the requests in flight and of the link."""
    out = []
    for r in range(len(d["threads"])):
        mine = np.flatnonzero(d["rank"] == r)
        rows = []
        for k, name in enumerate(d["threads"][r]):
            rows.append((name, k, mine[d["thread"][mine] == k]))
        for pseudo, what, base in ((FLIGHT, "in flight", 100), (LINK, "link (modelled)", 200)):
            idx = mine[d["thread"][mine] == pseudo]
            if len(idx):
                lane = lanes(d["start"][idx], d["end"][idx])
                for k in range(lane.max() + 1):
                    rows.append((f"{what} {k}" if lane.max() else what, base + k, idx[lane == k]))
        out.append(rows)
    return out


def chrome_trace(d):
    """The Trace Event Format (JSON object) of a timeline: one process per rank, one track per
    thread and per lane of requests in flight, complete events (``ph`` "X") named by the listing
    line, ``ts`` and ``dur`` in microseconds, the iteration and bytes as ``args``."""
    events = []
    algo = d["config"].get("algo", "?")
    for r, rows in enumerate(tracks(d)):
        events.append(dict(ph="M", name="process_name", pid=r, tid=0, args=dict(name=f"rank {r} ({algo})")))
        events.append(dict(ph="M", name="process_sort_index", pid=r, tid=0, args=dict(sort_index=r)))
        for name, tid, idx in rows:
            events.append(dict(ph="M", name="thread_name", pid=r, tid=tid, args=dict(name=name)))
            events.append(dict(ph="M", name="thread_sort_index", pid=r, tid=tid, args=dict(sort_index=tid)))
            # nested spans of one track: the enclosing one first
            for i in sorted(idx, key=lambda i: (d["start"][i], -d["end"][i])):
                args = dict(iteration=int(d["iteration"][i]))
                if d["bytes"][i]:
                    args["bytes"] = int(d["bytes"][i])
                events.append(dict(ph="X", name=d["label_names"][i], cat=d["kind_names"][i], pid=r, tid=tid,
                                   ts=round(float(d["start"][i]) * 1e6, 3),
                                   dur=round(max(float(d["end"][i] - d["start"][i]), 0.0) * 1e6, 3), args=args))
    return dict(traceEvents=events, displayTimeUnit="ms",
                otherData=dict(generator="refsgd report --timeline", algo=algo, window=d["window"],
                               link=d["link"], clock=d["clock"], time_unit="microseconds from rank 0's clock at "
                               "the start of the training loop"))


#: the Gantt chart's colours, by kind
COLOURS = {"compute": "#4c72b0", "idle": "#c44e52", "flight": "#f0a35e", "comm": "#dd8452", "codec": "#8172b2",
           "update": "#55a868", "mpi": "#7f7f7f", "link": "#fbd7a8", "evaluate": "#937860",
           "checkpoint": "#da8bc3", "bookkeeping": "#e9a3a5"}
LEGEND = (("compute", "compute"), ("idle", "idle (blocked)"), ("flight", "communication in flight"),
          ("comm", "a thread's all-reduce"), ("codec", "codec"), ("update", "update"), ("mpi", "MPI_Test (poll)"),
          ("link", "link (modelled)"), ("bookkeeping", "idle in the run's loss check"), ("evaluate", "evaluation"),
          ("checkpoint", "checkpoint"))


def line_of(label):
    """The listing line of a label ('L5 MPI_Iallreduce(dw_i)' -> 'L5'), or None."""
    m = re.match(r"([A-Z]\d+)\b", label)
    return m.group(1) if m else None


def _iteration_bounds(d):
    """{iteration: (start, end)} of rank 0's main thread."""
    it = d["kinds"].index("iteration")
    sel = np.flatnonzero((d["kind"] == it) & (d["rank"] == 0))
    return {int(d["iteration"][i]): (float(d["start"][i]), float(d["end"][i])) for i in sel}


#: how each method's iteration is scheduled in its timing model (refsgd.bench.models): the
#: blocking ones compute, all-reduce, update; the lagged ones (LAGA, DC-S3GD) all-reduce iteration
#: t-1's result while iteration t computes; Pipe-SGD's thread all-reduces while the computation
#: runs K iterations ahead
SCHEDULES = {"ssgd": "blocking", "d-sync": "blocking", "ssgd-nag": "blocking", "laga-sgd": "lagged",
             "laga-sgdm": "lagged", "laga-sgdn": "lagged", "dcs3gd": "lagged", "pipe-sgd": "pipelined"}


def model_schedule(d, n):
    """The timing model's schedule of ``n`` iterations of the run of ``d`` (seconds from the
    window's start): [(row name, [(start, end, kind), ...]), ...], rows for the computation and
    the communication. Its costs are the run's own, from rank 0's spans in the window: the
    compute and the update of an iteration (medians), and the all-reduce's time as the emulated
    link models it (the median of its modelled transfers); [] for a method without a schedule
    here (SCHEDULES) or a run without --link."""
    how = SCHEDULES.get(d["config"].get("algo"))
    kinds = np.array(d["kind_names"])
    r0 = d["rank"] == 0
    link = r0 & (kinds == "link")
    if how is None or not link.any():
        return []
    T = float(np.median(d["end"][link] - d["start"][link]))
    main = r0 & (d["thread"] == 0)
    its = sorted(set(d["iteration"][main & (kinds == "iteration")].tolist()))

    def per_iteration(kind):
        sel = np.flatnonzero(main & (kinds == kind))
        outer = [i for i in sel if not any(j != i and d["start"][j] <= d["start"][i] and d["end"][i] <= d["end"][j]
                                           and (d["start"][j], d["end"][j]) != (d["start"][i], d["end"][i])
                                           for j in sel)]
        return float(np.median([sum(d["end"][i] - d["start"][i] for i in outer if d["iteration"][i] == t)
                                for t in its]))
    C, U = per_iteration("compute"), per_iteration("update")
    comp, comm = [], []
    if how == "blocking":
        s = 0.0
        for _ in range(n):
            comp.append((s, s + C, "compute"))
            comm.append((s + C, s + C + T, "flight"))
            comp.append((s + C + T, s + C + T + U, "update"))
            s += C + T + U
    elif how == "lagged":
        s, arrives = 0.0, T                    # the previous iteration's all-reduce, in flight at the start
        comm.append((0.0, T, "flight"))
        for _ in range(n):
            comp.append((s, s + C, "compute"))
            w = max(s + C, arrives)
            comp.append((w, w + U, "update"))
            s = w + U
            comm.append((s, s + T, "flight"))
            arrives = s + T
    else:                                      # pipelined: K sums in flight, one communication thread
        K = int(d["config"].get("dependency") or 2)
        done, s, free = [0.0] * K, 0.0, 0.0
        for i in range(n):
            w = max(s, done[i % K])            # L3: the sum of t - K is ready
            comp.append((w, w + U, "update"))
            comp.append((w + U, w + U + C, "compute"))
            s = w + U + C                      # L10: handed to the communication thread
            start = max(s, free)
            comm.append((start, start + T, "comm"))
            free = done[i % K] = start + T
    return [("model: computation", comp), ("model: communication", comm)]


def gantt(timelines, names, iterations=None):
    """A matplotlib Figure: one panel per run (``timelines``: read() dicts, ``names``: titles),
    its ranks' threads and lanes as rows, on a common time axis that covers the same number of
    iterations of each run (``iterations``: that number, default the fewest any run recorded)."""
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

    spans = []
    for d in timelines:
        b = _iteration_bounds(d)
        if not b:
            raise RefsgdError("a timeline without iterations: nothing to draw")
        spans.append(b)
    n = min(len(b) for b in spans) if iterations is None else iterations
    rows_of = [tracks(d) for d in timelines]
    models = [model_schedule(d, n) for d in timelines]
    heights = [sum(len(rows) for rows in r) + len(m) for r, m in zip(rows_of, models)]
    fig = Figure(figsize=(13, 1.2 + 0.32 * sum(heights) + 0.7 * len(timelines)))
    axes = fig.subplots(len(timelines), 1, sharex=True, squeeze=False,
                        gridspec_kw=dict(height_ratios=[max(h, 1) for h in heights]))[:, 0]
    widest, texts = 0.0, []
    for ax, d, bounds, rows, title, model in zip(axes, timelines, spans, rows_of, names, models):
        first = sorted(bounds)[:n]
        t0, t1 = bounds[first[0]][0], bounds[first[-1]][1]
        widest = max(widest, t1 - t0)
        labels, y = [], 0
        scale = 1e3                                       # milliseconds
        for r, rank_rows in enumerate(rows):
            for name, _, idx in rank_rows:
                labels.append(f"rank {r} {name}")
                for i in idx:
                    kind = _shown_kind(d, i)
                    a, e = d["start"][i] - t0, d["end"][i] - t0
                    if kind == "iteration" or e < 0 or a > t1 - t0:
                        continue
                    depth = 0.8 if kind in ("compute", "comm", "flight", "link", "evaluate", "checkpoint") else 0.5
                    ax.broken_barh([(a * scale, (e - a) * scale)], (y - depth / 2, depth),
                                   facecolors=COLOURS.get(kind, "#cccccc"), edgecolor="white", linewidth=0.3)
                y += 1
            ax.axhline(y - 0.5, color="#999999", linewidth=0.6)
        for name, bars in model:                           # the timing model's schedule, hatched
            labels.append(name)
            for a, e, kind in bars:
                ax.broken_barh([(a * scale, (e - a) * scale)], (y - 0.3, 0.6), facecolors=COLOURS[kind], alpha=0.55,
                               hatch="///", edgecolor="white", linewidth=0.3)
            y += 1
        texts.append((ax, d, t0))                          # the listing lines are drawn once the axes are set
        shown = -np.inf
        for it in first:
            x = (bounds[it][0] - t0) * scale
            ax.axvline(x, color="black", linewidth=0.6, linestyle=":")
            if x - shown > 0.04 * (t1 - t0) * scale:       # the label of an iteration too short is left out
                ax.text(x, -0.75, f" t={it}", fontsize=7, va="bottom")
                shown = x
        ax.set_yticks(range(len(labels)))
        ax.set_yticklabels(labels, fontsize=7)
        ax.set_ylim(len(labels) - 0.5, -0.9)
        ax.set_title(title, fontsize=9, loc="left")
    axes[-1].set_xlim(0, widest * 1e3)
    axes[-1].set_xlabel(f"ms from the start of the window ({n} iterations of each run)")
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    for ax, d, t0 in texts:
        _listing_text(ax, d, t0)
    present = {_shown_kind(d, i) for d in timelines for i in range(len(d["kind_names"]))}
    handles = [Patch(color=COLOURS[k], label=text) for k, text in LEGEND if k in present]
    if any(models):
        handles.append(Patch(facecolor="white", edgecolor="#777777", hatch="///", label="the timing model"))
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), fontsize=8, frameon=False)
    return fig


def _shown_kind(d, i):
    """The colour's kind of span i: an idle span of the run's own bookkeeping apart."""
    kind = d["kind_names"][i]
    if kind == "idle" and line_of(d["label_names"][i]) is None:
        return "bookkeeping"
    return kind


def _listing_text(ax, d, t0):
    """The listing line on every span wide enough to hold it (not on the layers of a pass that
    already shows it)."""
    x0, x1 = ax.get_xlim()
    width_px = ax.get_window_extent().width
    ms_per_px = (x1 - x0) / max(width_px, 1)
    y, rows = 0, tracks(d)
    for rank_rows in rows:
        for _, _, idx in rank_rows:
            drawn = []
            for i in sorted(idx, key=lambda i: (d["start"][i], -d["end"][i])):
                kind = d["kind_names"][i]
                if kind in ("iteration", "link"):
                    continue
                text = line_of(d["label_names"][i])
                a, e = (d["start"][i] - t0) * 1e3, (d["end"][i] - t0) * 1e3
                if text is None or a < x0 or e > x1 or (e - a) / ms_per_px < 7 * len(text) + 4:
                    continue
                if any(p <= a and e <= q and s == text for p, q, s in drawn):
                    continue
                drawn.append((a, e, text))
                ax.text((a + e) / 2, y, text, ha="center", va="center", fontsize=6.5, color="white",
                        clip_on=True)
            y += 1
