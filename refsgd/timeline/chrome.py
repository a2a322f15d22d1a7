"""A timeline in the Trace Event Format (Perfetto, chrome://tracing): one track per rank and
thread, with lanes for overlapping spans."""

import numpy as np

from .recording import FLIGHT, LINK


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
