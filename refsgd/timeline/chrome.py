"""A timeline in the Trace Event Format (Perfetto, speedscope; chrome://tracing): one track per
rank and thread, with lanes for overlapping spans.

Nesting. The format's complete events of one track must nest: a span starts at or after the
start of the span that holds it and ends at or before its end, and two spans side by side do not
overlap. The recorded spans do (each thread's spans come from one clock), but ``ts`` and ``dur``
rounded apart do not: ``ts`` 172773.687 + ``dur`` 3.855 is 172777.54200000002 in a viewer's
doubles, after the next span's ``ts`` 172777.542, and viewers then close spans in the wrong order
(speedscope warns "Frame ... was still open at end of profile" and draws a staircase). So both
ends of a span are rounded to a grid of 1/8 microsecond (:data:`TICK_US`, 125 ns), ``ts`` is the
rounded start and ``dur`` the rounded end less it: multiples of 1/8 are exact in binary and in
decimal, so ``ts + dur`` is the rounded end exactly in every viewer's arithmetic (JavaScript's
doubles, Perfetto's integer nanoseconds, decimal text), and rounding keeps the order of the ends.
125 ns is far below what a span costs to record (about 2 us) and the clocks' alignment error."""

import numpy as np

from .recording import FLIGHT, LINK

#: the grid of ts and dur (microseconds): a power of two (exact in binary) and a whole number of ns
TICK_US = 0.125


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
    line, ``ts`` and ``dur`` in microseconds on a grid of :data:`TICK_US` (so that the spans of a
    track nest in every viewer, see the module docstring), the iteration and bytes as ``args``."""
    events = []
    algo = d["config"].get("algo", "?")
    for r, rows in enumerate(tracks(d)):
        events.append(dict(ph="M", name="process_name", pid=r, tid=0, args=dict(name=f"rank {r} ({algo})")))
        events.append(dict(ph="M", name="process_sort_index", pid=r, tid=0, args=dict(sort_index=r)))
        for name, tid, idx in rows:
            events.append(dict(ph="M", name="thread_name", pid=r, tid=tid, args=dict(name=name)))
            events.append(dict(ph="M", name="thread_sort_index", pid=r, tid=tid, args=dict(sort_index=tid)))
            # both ends on the grid; nested spans of one track: the enclosing one first (ties
            # of the grid broken by the recorded times)
            a, b = _ticks(d["start"][idx]), _ticks(np.maximum(d["end"][idx], d["start"][idx]))
            for k in sorted(range(len(idx)), key=lambda k: (a[k], -b[k], d["start"][idx[k]], -d["end"][idx[k]])):
                i = idx[k]
                args = dict(iteration=int(d["iteration"][i]))
                if d["bytes"][i]:
                    args["bytes"] = int(d["bytes"][i])
                events.append(dict(ph="X", name=d["label_names"][i], cat=d["kind_names"][i], pid=r, tid=tid,
                                   ts=int(a[k]) * TICK_US, dur=int(b[k] - a[k]) * TICK_US, args=args))
    return dict(traceEvents=events, displayTimeUnit="ms",
                otherData=dict(generator="refsgd report --timeline", algo=algo, window=d["window"],
                               link=d["link"], clock=d["clock"], time_unit="microseconds from rank 0's clock at "
                               f"the start of the training loop, rounded to {TICK_US} us"))


def _ticks(seconds):
    """Seconds -> whole ticks of TICK_US (int64), rounded to the nearest."""
    return np.rint(np.asarray(seconds, dtype=np.float64) * (1e6 / TICK_US)).astype(np.int64)
