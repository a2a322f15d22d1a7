"""A timeline drawn as a Gantt chart (``refsgd report --timeline-plot``): one panel per run, the
spans coloured by kind, each iteration's listing lines, and the modelled schedule of the method."""

import re
import textwrap

import numpy as np

from refsgd.errors import RefsgdError
from refsgd.registry import METHODS, Schedule

from .chrome import tracks

#: the Gantt chart's colours, by kind
COLOURS = {"compute": "#4c72b0", "idle": "#c44e52", "flight": "#f0a35e", "comm": "#dd8452", "codec": "#8172b2",
           "update": "#55a868", "mpi": "#7f7f7f", "link": "#fbd7a8", "evaluate": "#937860",
           "checkpoint": "#da8bc3", "bookkeeping": "#e9a3a5", "untimed": "#d9d9d9"}

LEGEND = (("compute", "compute"), ("idle", "idle (blocked)"), ("flight", "communication in flight"),
          ("comm", "a thread's all-reduce"), ("codec", "codec"), ("update", "update"), ("mpi", "MPI_Test (poll)"),
          ("link", "link (modelled)"), ("bookkeeping", "idle in the run's loss check"), ("evaluate", "evaluation"),
          ("checkpoint", "checkpoint"),
          ("untimed", "in no span: the run's bookkeeping; with threads, waiting for the GIL"))


def line_of(label):
    """The listing line of a label ('L5 MPI_Iallreduce(dw_i)' -> 'L5'), or None."""
    m = re.match(r"([A-Z]\d+)\b", label)
    return m.group(1) if m else None


def listing_key(d):
    """{listing line: its label} of a timeline, in the listing's order (the loop's lines L,
    then the other threads' or roles' C, S, W), each line's label the one of its spans that
    take the most time (a pass's, not one of its layers')."""
    seconds = {}
    for label, a, e in zip(d["label_names"], d["start"], d["end"]):
        line = line_of(label)
        if line is not None:
            seconds.setdefault(line, {}).setdefault(label, 0.0)
            seconds[line][label] += float(e - a)
    order = {"L": 0, "C": 1, "S": 2, "W": 3}
    lines = sorted(seconds, key=lambda x: (order.get(x[0], 4), x[0], int(x[1:])))
    return {x: max(seconds[x], key=lambda lab: (seconds[x][lab], -len(lab))) for x in lines}


def _key_text(d, width=175):
    """The panel's key of listing lines, wrapped: 'L1 grad F_i(...)   L2 ...'."""
    items = [label.replace(" ", "\u00a0") for label in listing_key(d).values()]
    return "\n".join(textwrap.wrap("listing lines: " + "   ".join(items), width)).replace("\u00a0", " ")


def untimed(d, r):
    """The spans of time on rank r's loop thread, from its first iteration's start to its last
    one's end, that no span of the thread covers: [(start, end)] (seconds on rank 0's clock),
    within an iteration or between two (the chart's key promises grey for all of it). The thread
    runs the run's bookkeeping there (sub-millisecond); a method with threads' loop thread also
    waits there for the GIL that another thread of the rank holds (measured with Pipe-SGD on a
    loaded machine: 11 ms after each gradient, with 0.02 ms of the thread's CPU time)."""
    mine = (d["rank"] == r) & (d["thread"] == 0) & (np.array(d["kind_names"]) != "iteration")
    spans = sorted(zip(d["start"][mine], d["end"][mine]))
    it = d["kinds"].index("iteration") if "iteration" in d["kinds"] else -1
    its = np.flatnonzero((d["rank"] == r) & (d["thread"] == 0) & (d["kind"] == it))
    if not its.size:
        return []
    lo, hi = float(d["start"][its].min()), float(d["end"][its].max())
    out, cur = [], lo
    for a, e in spans:
        if e <= cur or a >= hi:
            continue
        if a > cur:
            out.append((cur, float(a)))
        cur = max(cur, float(e))
    if hi > cur:
        out.append((cur, hi))
    return out


def _iteration_bounds(d):
    """{iteration: (start, end)} of rank 0's main thread."""
    if "iteration" not in d["kinds"]:
        return {}
    it = d["kinds"].index("iteration")
    sel = np.flatnonzero((d["kind"] == it) & (d["rank"] == 0))
    return {int(d["iteration"][i]): (float(d["start"][i]), float(d["end"][i])) for i in sel}

#: how each method's iteration is scheduled in its timing model (refsgd.bench.models): the
#: blocking ones compute, all-reduce, update; the lagged ones (LAGA, DC-S3GD) all-reduce iteration
#: t-1's result while iteration t computes; Pipe-SGD's thread all-reduces while the computation
#: runs K iterations ahead
#: (refsgd.registry: Method.schedule)
SCHEDULES = {m.name: m.schedule for m in METHODS.values() if m.schedule}


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
    if how is Schedule.BLOCKING:
        s = 0.0
        for _ in range(n):
            comp.append((s, s + C, "compute"))
            comm.append((s + C, s + C + T, "flight"))
            comp.append((s + C + T, s + C + T + U, "update"))
            s += C + T + U
    elif how is Schedule.LAGGED:
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
    from matplotlib.figure import Figure  # noqa: PLC0415 matplotlib: optional (--timeline-plot)
    from matplotlib.patches import Patch  # noqa: PLC0415 matplotlib

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
    titles = [f"{name}\n{_key_text(d)}" for name, d in zip(names, timelines)]
    extra = sum(t.count("\n") for t in titles)                  # title lines past the first
    fig = Figure(figsize=(13, 1.2 + 0.32 * sum(heights) + 0.7 * len(timelines) + 0.16 * extra))
    axes = fig.subplots(len(timelines), 1, sharex=True, squeeze=False,
                        gridspec_kw=dict(height_ratios=[max(h, 1) for h in heights]))[:, 0]
    widest, texts = 0.0, []
    for ax, d, bounds, rows, title, model in zip(axes, timelines, spans, rows_of, titles, models):
        first = sorted(bounds)[:n]
        t0, t1 = bounds[first[0]][0], bounds[first[-1]][1]
        widest = max(widest, t1 - t0)
        labels, y = [], 0
        scale = 1e3                                       # milliseconds
        for r, rank_rows in enumerate(rows):
            for name, tid, idx in rank_rows:
                labels.append(f"rank {r} {name}")
                if tid == 0:                                  # the loop thread: what no span covers
                    for a, e in untimed(d, r):
                        a, e = a - t0, e - t0
                        if e > 0 and a < t1 - t0:
                            ax.broken_barh([(a * scale, (e - a) * scale)], (y - 0.25, 0.5),
                                           facecolors=COLOURS["untimed"], edgecolor="none")
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
        ax.set_title(title, fontsize=8.5, loc="left", pad=10)
    axes[-1].set_xlim(0, widest * 1e3)
    axes[-1].set_xlabel(f"ms from the start of the window ({n} iterations of each run)")
    fig.tight_layout(rect=(0, 0.06 + 0.2 / fig.get_figheight(), 1, 1))
    for ax, d, t0 in texts:
        _listing_text(ax, d, t0)
    present = {_shown_kind(d, i) for d in timelines for i in range(len(d["kind_names"]))} | {"untimed"}
    handles = [Patch(color=COLOURS[k], label=text) for k, text in LEGEND if k in present]
    if any(models):
        handles.append(Patch(facecolor="white", edgecolor="#777777", hatch="///", label="the timing model"))
    fig.legend(handles=handles, loc="lower center", ncol=min(len(handles), 6), fontsize=8, frameon=False)
    return fig


def _shown_kind(d, i):
    """The colour's kind of span i: an idle span of the run's own bookkeeping apart."""
    kind = d["kind_names"][i]
    if kind == "idle" and line_of(d["label_names"][i]) is None:
        return "bookkeeping"
    return kind


def _listing_text(ax, d, t0):
    """The listing line on every span wide enough to hold it (not on the layers of a pass that
    already shows it); on a loop thread's time in no span, what it does there when the rank has
    other threads: it waits for the GIL."""
    x0, x1 = ax.get_xlim()
    width_px = ax.get_window_extent().width
    ms_per_px = (x1 - x0) / max(width_px, 1)
    y, rows = 0, tracks(d)
    for r, rank_rows in enumerate(rows):
        for _, tid, idx in rank_rows:
            if tid == 0 and len(d["threads"][r]) > 1:
                for a, e in untimed(d, r):
                    a, e = max((a - t0) * 1e3, x0), min((e - t0) * 1e3, x1)     # its part in view
                    fits = [t for t in ("waiting for the GIL", "GIL") if (e - a) / ms_per_px >= 6 * len(t) + 4]
                    if fits:
                        ax.text((a + e) / 2, y, fits[0], ha="center", va="center", fontsize=6.5, color="#444444",
                                clip_on=True)
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
