"""``refsgd report FILE [FILE ...]``: the text, the figure and the exports of metrics files
(``refsgd train --out``; schema in :mod:`refsgd.metrics`).

Files of metrics format version 1 (no ``format_version`` attribute), 2 and 3 are read alike; what
version 2 adds (the ``/lr`` dataset, the attributes ``model``, ``model_spec``, ``layout``,
``dataset``, ``dataset_sha256``, ``threads_per_rank``) is shown where it is present, and so is
what version 3 adds: the segments of a resumed run (listed, the wall time and the throughput over
all of them), the time spent evaluating and checkpointing, Numba's compiling (outside the time
split from version 3 on; inside it before, which the text says) and a threaded method's
gradient threads. A part of the split that a file of version 1-2 makes negative (PP-ASGD's
compute summed over its threads) is shown as n/a.

Text (standard output)
    The report of each FILE in turn, in the order given: a header (file, method, ranks, nodes,
    model, refsgd version, metrics format version; the model spec, layout, dataset and its
    SHA-256 and threads per rank where the file has them), the MPI library and thread level,
    the configuration, one line per evaluation, and the end-of-run summary
    (:func:`refsgd.metrics.summary`: final figures, wall time, traffic, per-rank time split).
    DASO's virtual nodes (--ranks-per-node) are named as such, the method's regime changes
    (DASO's phases) listed, and a parameter-server method with one worker noted as plain SGD.
    With several files, a comparison table follows: one row per run with its method, ranks,
    final test accuracy and loss, wall time and the mean milliseconds per iteration of compute,
    idle, update (the method's update of its state), other (wall - compute - idle - update) and
    comm in flight, each the mean over the run's ranks, and the settings in which the runs
    differ (:func:`differing_settings`); an emulated link shared by every run is named once.

Figure (``--plot F.png``; .pdf, .svg and the other formats matplotlib writes work too)
    * Loss: the training loss of every iteration (mean over the ranks that have one: a
      parameter server rank computes no gradient and records NaN, and an iteration where no
      rank has a value is left out) drawn faint, its moving mean drawn solid (a centred window
      of one epoch, at most a tenth of the run; ~T/50 iterations when the file has no
      evaluation to tell the epoch length), and the test loss of each evaluation as markers.
    * Test accuracy of each evaluation.
    * Learning rate of every iteration, a small panel under the loss, when a file has ``/lr``.
    * Time split, in mean milliseconds per iteration: a stacked bar compute / idle / update /
      other and,
      beside it, a hatched bar of the time with communication in flight. Idle (blocked on
      communication) lies within the time in flight, so the hatched bar's excess over idle is
      communication overlapped with computation. One run: one pair of bars per rank. Several
      runs: one pair per run, each the mean over that run's ranks (the per-rank split of each
      run is in its text report; a mean keeps runs of different sizes comparable).
    The x axis is the iteration, with a second axis in epochs on top (iterations per epoch =
    iteration / epoch of an evaluation; none when a run has no evaluation). Runs that differ in iterations per epoch (e.g. other
    numbers of workers) are drawn against epochs instead, so that they are compared at equal
    data seen. Several runs share the axes, one colour per method (METHOD_COLORS, whatever the
    order of the files; a shade of it for a second run of a method), labelled "[k] method:
    the settings that differ" (the file where two would read alike); learning rates that
    coincide are drawn in dashes of their runs' colours in turn. The loss axis holds the test
    losses and the running median of each run's losses (:func:`loss_limits`): a few early
    spikes are cut, and the cut is written on the axis. A method's regime changes (DASO's
    warm-up, cycling, cool-down) are dotted vertical lines, named in the accuracy panel. An
    emulated link shared by every run is named once in the title.
    Legends sit outside the axes (below the figure, and right of the time split).

CSV (``--csv F.csv``)
    One row per evaluation of every run, with a header line; columns ``run`` (1-based position
    on the command line), ``file`` (as given), ``algo``, ``ranks``, ``iteration``, ``epoch``,
    ``train_loss``, ``test_loss``, ``test_acc`` (a fraction, not a percentage), ``seconds``.
    Numbers are written with full precision (Python ``repr``), so they read back equal to the
    file's; a NaN is written ``nan``.

JSON (``--json F.json``)
    ``{"format": "refsgd-report", "format_version": 1, "runs": [RUN, ...]}``, one RUN per file
    in command-line order::

        run, file, algo, ranks, nodes, iterations (T), iterations_per_epoch (or null),
        metrics_format_version,
        attrs        the file's attributes but config and events, as stored (NumPy values as JSON
                     values; model_spec and layout stay JSON text)
        config       the run's configuration (object)
        events       the method's regime changes (list)
        evals        [{iteration, epoch, train_loss, test_loss, test_acc, seconds}, ...]
        final        the last evaluation (or null)
        wall_seconds
        time_per_rank  {"compute", "idle", "update", "other", "comm"}: each a list over ranks of
                       the total seconds (other = wall - compute - idle - update; update 0 in
                       files that predate it), and "*_ms_per_iteration" the same as mean ms per
                       iteration; null where a file of version 1-2 makes a part negative
        time_mean_ms_per_iteration  {"compute", "idle", "update", "other", "comm"}, mean over ranks
        per_iteration  {"iteration": [1..T], "train_loss": mean over the ranks that have one
                       (null where none has), "wall_ms", "compute_ms", "idle_ms", "comm_ms"
                       (means over ranks), "lr" (null when the file has no /lr)}

    NaN and infinite values are written as null (JSON has no NaN).

Timeline (``--timeline F.json``, one file; ``--timeline-plot F.png``, one or several)
    The spans that ``refsgd train --timeline`` recorded (:mod:`refsgd.timeline`): exported in the
    Trace Event Format (Perfetto, chrome://tracing), or drawn as a Gantt chart, one panel per run
    on a common time axis of the same number of iterations. The text gets one line per file
    saying its window, its span count and how well its clocks are aligned. A file without a
    timeline is refused with one message.

Every output is checked before anything is read or drawn: an existing file is refused unless
``--force``, an output may not be one of the input files or another output, and each is
written to a temporary file renamed into place (:func:`refsgd.files.atomic_path`).
"""

import csv
import dataclasses
import io
import json
import math
import os

import numpy as np

from refsgd import RefsgdError
from refsgd import timeline as tl
from refsgd.files import atomic_path, check_distinct, check_output, open_h5, read_array
from refsgd.options import one_worker_note

#: the time split, in the order drawn and tabled
PARTS = ("compute", "idle", "update", "other", "comm")
CSV_COLUMNS = ("run", "file", "algo", "ranks", "iteration", "epoch", "train_loss", "test_loss", "test_acc",
               "seconds")
EVAL_FIELDS = ("iteration", "epoch", "train_loss", "test_loss", "test_acc", "seconds")
#: version-2 attributes shown in the text header when present, with their names there
EXTRA_ATTRS = (("model_spec", "model spec"), ("layout", "layout"), ("dataset", "dataset"),
               ("dataset_sha256", "dataset sha256"), ("threads_per_rank", "threads per rank"),
               ("load_average_before", "load average before (1, 5, 15 min)"),
               ("load_average_after", "load average after (1, 5, 15 min)"))


@dataclasses.dataclass
class Run:
    """One metrics file, read."""
    index: int  # 1-based position on the command line
    path: str
    evals: list
    rec: dict
    attrs: dict
    config: dict
    lr: object = None  # (T,) float64 array, or None (metrics format version 1)

    @property
    def algo(self):
        return str(self.config.get("algo", "?"))

    @property
    def world(self):
        return self.rec["wall"].shape[0]

    @property
    def iterations(self):
        return self.rec["wall"].shape[1]

    @property
    def model(self):
        return _text(self.attrs["model"]) if "model" in self.attrs else self.config.get("model")

    @property
    def format_version(self):
        v = self.attrs.get("format_version", 1)
        try:
            return int(v)
        except (TypeError, ValueError):
            return v

    @property
    def varying(self):
        """Whether its iterations consumed varying numbers of gradients (PP-ASGD's threads)."""
        g = self.rec.get("gradients")
        return g is not None and g.shape[1] > 0 and g[0].min() != g[0].max()

    def epochs_at(self, iterations):
        """The epoch after each of ``iterations`` (1-based): iteration / iterations_per_epoch, or,
        when the iterations consumed varying numbers of gradients, the gradients consumed so far
        over an epoch's (which the last evaluation tells)."""
        it = np.asarray(iterations, dtype=np.float64)
        if not self.varying:
            return it / self.iterations_per_epoch
        consumed = np.concatenate([[0.0], np.cumsum(self.rec["gradients"][0])])
        last = next(e for e in reversed(self.evals) if e["epoch"] > 0 and e["iteration"] > 0)
        per_epoch = consumed[int(last["iteration"])] / last["epoch"]
        return np.interp(it, np.arange(len(consumed), dtype=np.float64), consumed) / per_epoch

    @property
    def segments(self):
        """The processes that made the run ([{"iterations": [first, end], "wall_seconds"}]; files
        of format version 3), or None."""
        try:
            seg = json.loads(_text(self.attrs["segments"]))
        except (KeyError, ValueError):
            return None
        return seg if isinstance(seg, list) and all(isinstance(x, dict) for x in seg) else None

    @property
    def iterations_per_epoch(self):
        """iteration / epoch of the last evaluation past epoch 0, or None."""
        for e in reversed(self.evals):
            if e["epoch"] > 0 and e["iteration"] > 0 and math.isfinite(e["epoch"]):
                return e["iteration"] / e["epoch"]
        return None

    @property
    def events(self):
        """The method's regime changes (DASO's phases): [{iteration, epoch, what, ...}], [] if none."""
        try:
            events = json.loads(_text(self.attrs.get("events", "[]")))
        except ValueError:
            return []
        ok = isinstance(events, list) and all(isinstance(e, dict) and {"iteration", "epoch", "what"} <= set(e)
                                              for e in events)
        return events if ok else []

    def train_loss(self):
        """(iterations, loss): the per-iteration loss, mean over the ranks that have one;
        iterations where no rank has a value are left out. Iterations count from 1."""
        y = rank_nanmean(self.rec["loss"])
        x = np.arange(1, len(y) + 1, dtype=np.float64)
        keep = ~np.isnan(y)
        return x[keep], y[keep]

    def time_totals(self):
        """{part: (world,) total seconds}; other = wall - compute - idle - update."""
        c, i, w = (self.rec[k].sum(axis=1) for k in ("compute", "idle", "wall"))
        m = self.rec["comm"].sum(axis=1) if "comm" in self.rec else np.zeros_like(w)
        u = self.rec["update"].sum(axis=1) if "update" in self.rec else np.zeros_like(w)
        return {"compute": c, "idle": i, "update": u, "other": w - c - i - u, "comm": m}

    def time_ms(self):
        """{part: (world,) mean ms per iteration}."""
        n = max(self.iterations, 1)
        return {k: 1e3 * v / n for k, v in self.time_totals().items()}


def rank_nanmean(a):
    """Mean over axis 0 of the values that are not NaN (NaN where there is none), without the
    warning of ``np.nanmean``."""
    a = np.asarray(a, dtype=np.float64)
    have = ~np.isnan(a)
    count = have.sum(axis=0)
    total = np.where(have, a, 0.0).sum(axis=0)
    return np.divide(total, count, out=np.full(total.shape, np.nan), where=count > 0)


def moving_mean(y, window):
    """Centred moving mean of ``y`` over ``window`` points, the window shrinking at the ends."""
    y = np.asarray(y, dtype=np.float64)
    n = len(y)
    if n == 0 or window <= 1:
        return y.copy()
    half = int(window) // 2
    c = np.concatenate([[0.0], np.cumsum(y)])
    idx = np.arange(n)
    lo = np.maximum(idx - half, 0)
    hi = np.minimum(idx - half + int(window), n)
    return (c[hi] - c[lo]) / (hi - lo)


def smoothing_window(run):
    """The moving mean's window: one epoch, at most a tenth of the run; T/50 without an epoch."""
    t = run.iterations
    ipe = run.iterations_per_epoch
    if ipe is not None:
        return max(1, min(int(round(ipe)), t // 10))
    return max(1, t // 50)


def load(path, index=1):
    """A :class:`Run` from a metrics file; RefsgdError naming what is wrong."""
    from refsgd import metrics, trace
    with open_h5(path, "a metrics file from refsgd train --out") as f:
        if f.attrs.get("format") == trace.FORMAT:
            raise RefsgdError(f"{path} is a trace (refsgd train --trace, refsgd golden), not a metrics file "
                              f"(refsgd train --out): compare traces with `refsgd verify A.h5 B.h5`")
    evals, rec, attrs = metrics.read(path)
    config = json.loads(attrs.get("config", "{}"))  # read checked that it is a JSON object
    if "wall" not in rec:
        raise RefsgdError(f"{path}: malformed metrics file, missing /iterations/wall")
    t = rec["wall"].shape[1]
    lr = None
    with open_h5(path, "a metrics file from refsgd train --out") as f:
        if "lr" in f:
            d = f["lr"]
            shape = getattr(d, "shape", None)
            if shape != (t,) or getattr(d, "dtype", np.dtype(object)).kind not in "fiu":
                raise RefsgdError(f"{path}: malformed metrics file: /lr must be numbers of shape ({t},) "
                                  f"(one per iteration), got {shape if shape is not None else 'a group'}")
            lr = np.asarray(read_array(f, "lr"), dtype=np.float64)
    return Run(index, path, evals, rec, attrs, config, lr)


def _text(v):
    """An attribute as text (bytes decoded, NumPy scalars as Python)."""
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    if isinstance(v, np.generic):
        return str(v.item())
    return str(v)


def _one_line(text, limit=100):
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _attr_text(key, value):
    """A version-2 attribute in the text header: the layout as its tensor and parameter counts,
    threads_per_rank -1 as unknown, the others on one line (shortened)."""
    text = _text(value)
    if key == "model_spec":
        try:
            spec = json.loads(text)
            layers = spec["layers"]
            kinds = ", ".join(str(x.get("type", "?")) for x in layers)
            return (f"input {spec.get('input')}, {spec.get('classes')} classes, {len(layers)} layers: "
                    + _one_line(kinds, 80))
        except (ValueError, TypeError, KeyError, AttributeError):
            pass
    if key == "layout":
        try:
            layout = json.loads(text)
            size = sum(int(np.prod(shape)) for _, _, shape in layout)
            return f"{len(layout)} tensors ({size:,} parameters)"
        except (ValueError, TypeError):
            pass
    if key == "threads_per_rank" and text == "-1":
        return "unknown"
    return _one_line(text)


# ---------------------------------------------------------------------- text
def run_text(run):
    """The text report of one run."""
    from refsgd import metrics
    a, cfg = run.attrs, run.config
    link = _text(a.get("link", "none"))
    head = [f"{run.path}: {run.algo} on {_text(a.get('world_size', run.world))} rank(s), "
            f"{_nodes(run)}, model {run.model}, refsgd {_text(a.get('refsgd_version', '?'))}, "
            f"metrics format version {run.format_version}"]
    if "interrupted" in a:
        planned = f" of {_text(a['iterations_planned'])}" if "iterations_planned" in a else ""
        head.append(f"INTERRUPTED by {_text(a['interrupted'])} after iteration {run.iterations}{planned}: the file "
                    "holds the iterations done")
    head += [f"{name}: {_attr_text(k, a[k])}" for k, name in EXTRA_ATTRS if k in a]
    mpi = _text(a.get("mpi_library", "")).strip()
    head.append(f"MPI: {mpi.splitlines()[0] if mpi else '?'}, thread level {_text(a.get('mpi_thread_level', '?'))}")
    head.append("config: " + ", ".join(f"{k}={v}" for k, v in sorted(cfg.items())))
    note = one_worker_note(run.algo, run.world)
    if note:
        head.append(f"note: {note}")
    if run.events:
        head.append("regime changes: " + "; ".join(f"iter {e['iteration']} (epoch {e['epoch']:.2f}) {_event_text(e)}"
                                                   for e in run.events))
    if run.lr is not None and len(run.lr) and run.lr.min() == run.lr.max():
        head.append(f"learning rate: {run.lr[0]:.4g} at every iteration")
    elif run.lr is not None and len(run.lr):
        head.append(f"learning rate: {run.lr[0]:.4g} at iteration 1, {run.lr.min():.4g} .. {run.lr.max():.4g}, "
                    f"{run.lr[-1]:.4g} at iteration {len(run.lr)}")
    for e in run.evals:
        head.append(f"  iter {int(e['iteration']):>6}  epoch {e['epoch']:6.2f}  train loss {e['train_loss']:.4f}  "
                    f"test loss {e['test_loss']:.4f}  test acc {100 * e['test_acc']:.2f}%")
    wall = float(a.get("wall_seconds", 0))
    batch = cfg.get("batch")
    return "\n".join(head) + "\n" + metrics.summary(
        run.evals, run.rec, wall, None if link == "none" else link, batch=batch if isinstance(batch, int) else None,
        segments=run.segments, version=run.format_version if isinstance(run.format_version, int) else 1)


def comparison_text(runs):
    """The table comparing several runs (time split: mean over each run's ranks), with the
    settings in which they differ (besides the method and the ranks, which have columns)."""
    keys = [k for k in differing_settings(runs) if k != "ranks"]
    rows = []
    for r in runs:
        e = r.evals[-1] if r.evals else None
        ms = {k: v.mean() for k, v in r.time_ms().items()}
        rows.append([str(r.index), r.algo, str(r.world),
                     f"{100 * e['test_acc']:.2f}%" if e else "-", f"{e['test_loss']:.4f}" if e else "-",
                     f"{float(r.attrs.get('wall_seconds', 0)):.2f}",
                     *(f"{ms[k]:.2f}" if ms[k] >= 0 else "n/a" for k in PARTS), r.path])  # n/a: see metrics.summary
        if keys:  # before the file
            rows[-1][-1:-1] = [_settings_text(r, keys) or "-"]
    header = ["run", "method", "ranks", "test acc", "test loss", "wall s", *PARTS, "file"]
    if keys:
        header[-1:-1] = ["settings that differ"]
    widths = [max(len(x[j]) for x in rows + [header]) for j in range(len(header))]
    left = {1, len(header) - 1, len(header) - 2} if keys else {1, len(header) - 1}

    def fmt(cells):
        return "  " + "  ".join(c.ljust(w) if j in left else c.rjust(w)
                                for j, (c, w) in enumerate(zip(cells, widths))).rstrip()
    links = {link for _, link in _links(runs)}
    if len(links) == 1 and len(_links(runs)) == len(runs):  # one link for all: said once
        emulated = [f"  every run: {links.pop()} -- EMULATED, not the real network"]
    else:
        emulated = [f"  run {r.index}: {link} -- EMULATED, not the real network" for r, link in _links(runs)]
    notes = [f"  run {r.index}: {one_worker_note(r.algo, r.world)}" for r in runs if one_worker_note(r.algo, r.world)]
    emulated += notes
    return "\n".join([f"comparison of {len(runs)} runs (final evaluation; time: mean ms per iteration, mean over "
                      "the run's ranks; other = wall - compute - idle - update; comm = communication in "
                      "flight):",
                      fmt(header), *map(fmt, rows), *emulated])


def _links(runs):
    """(run, link text) of the runs timed over an emulated link."""
    out = []
    for r in runs:
        link = _text(r.attrs.get("link", "none"))
        if link != "none":
            out.append((r, link))
    return out


# ---------------------------------------------------------------------- what differs between runs
#: the settings a comparison names when they differ, first in this order (then the others, sorted),
#: with the name it gives them; "ranks" and "link" come from the file's attributes
SETTINGS_ORDER = ("ranks", "lr", "schedule", "momentum", "batch", "tau", "link", "compress")
SETTING_NAMES = {"compress": "codec", "ranks_per_node": "ranks per node", "local_link": "local link"}
#: configuration entries that change neither the trajectory nor the times a comparison shows
SETTINGS_IGNORED = {"algo", "log_every", "eval_every"}


def _setting_value(v):
    if isinstance(v, bool):
        return "on" if v else "off"
    if isinstance(v, float):
        return f"{v:g}"
    if v is None:
        return "none"
    return _one_line(v, 60)


def settings(run):
    """{setting: value text} of a run: its configuration (the options of its method), its ranks,
    its link (the --link spec, "none" without) and its threads per rank when known."""
    out = {k: _setting_value(v) for k, v in run.config.items() if k not in SETTINGS_IGNORED}
    out["ranks"] = str(run.world)
    out["link"] = _setting_value(run.config.get("link")) if _text(run.attrs.get("link", "none")) != "none" else "none"
    threads = _text(run.attrs.get("threads_per_rank", "-1"))
    if threads != "-1":
        out["threads per rank"] = threads
    return out


def differing_settings(runs):
    """The settings whose values differ between the runs that have them (an option of one method
    only, e.g. dcasgd's lambda, is named only when two runs of it differ), in SETTINGS_ORDER."""
    values = {}
    for r in runs:
        for k, v in settings(r).items():
            values.setdefault(k, set()).add(v)
    keys = [k for k, vs in values.items() if len(vs) > 1]
    return [k for k in SETTINGS_ORDER if k in keys] + sorted(k for k in keys if k not in SETTINGS_ORDER)


def _settings_text(run, keys):
    """"lr 0.1, momentum 0.9": the run's values of ``keys`` (those it has)."""
    mine = settings(run)
    return ", ".join(f"{SETTING_NAMES.get(k, k.replace('_', ' '))} {mine[k]}" for k in keys if k in mine)


def _nodes(run):
    """The nodes of a run: DASO's virtual nodes (--ranks-per-node) as such, else the machines."""
    from refsgd.comm.topology import nodes_text
    machines = _text(run.attrs.get("nodes", "?"))
    g = run.config.get("ranks_per_node")
    if isinstance(g, int) and g > 0 and run.world % g == 0:
        return f"{nodes_text(run.world // g, g, virtual=True)} ({machines} machine(s))"
    return f"{machines} node(s)"


def _event_text(e):
    """A regime change as "cycling: B 4, W 1"."""
    fields = ", ".join(f"{k} {v}" for k, v in e.items() if k not in ("iteration", "epoch", "what"))
    return str(e["what"]) + (f": {fields}" if fields else "")


# ---------------------------------------------------------------------- figure
TIME_COLORS = {"compute": "#4C72B0", "idle": "#DD8452", "update": "#8172B3", "other": "#B8B8B8",
               "comm": "#55A868"}


#: one colour per method, whatever the order of the files on the command line
METHOD_COLORS = {"ssgd": "#1f77b4", "ssgd-opt": "#17becf", "ssgd-nag": "#0b3d91", "dcs3gd": "#ff7f0e",
                 "dcasgd": "#d62728", "laga-sgd": "#2ca02c", "laga-sgdm": "#7fbf3f", "laga-sgdn": "#bcbd22",
                 "pipe-sgd": "#9467bd", "d-sync": "#e377c2", "ps-sync": "#7f7f7f", "daso": "#8c564b",
                 "pp-asgd": "#c51b7d", "asgd": "#f0a030"}
#: a second, third, ... run of the same method: its colour mixed towards black (-) or white (+)
SHADES = (0.0, -0.4, 0.45, -0.65, 0.7)


def run_colors(runs):
    """{run index: colour}: the method's colour (METHOD_COLORS; another method the grey of its
    name's letters), a shade of it for each further run of the same method."""
    from matplotlib.colors import to_hex, to_rgb
    seen, out = {}, {}
    for r in runs:
        k = seen.get(r.algo, 0)
        seen[r.algo] = k + 1
        base = np.array(to_rgb(METHOD_COLORS.get(r.algo, f"{0.25 + 0.5 * (sum(map(ord, r.algo)) % 7) / 7:.2f}")))
        f = SHADES[k % len(SHADES)]
        out[r.index] = to_hex(base * (1 + f) if f < 0 else base + (1 - base) * f)
    return out


def _labels(runs):
    """{run index: its name in a figure}: the method and the settings that differ between the runs
    (the file name too where two would read alike); a parameter server's one worker said."""
    keys = differing_settings(runs) if len(runs) > 1 else []
    out = {}
    for r in runs:
        text = r.algo
        diff = _settings_text(r, keys)
        if diff:
            text += f": {diff}"
        if one_worker_note(r.algo, r.world):
            text += " (one worker: plain SGD)"
        out[r.index] = text
    texts = list(out.values())
    names = [os.path.basename(x.path) for x in runs]
    for r in runs:
        if texts.count(out[r.index]) > 1:  # alike but for the file
            name = os.path.basename(r.path)
            out[r.index] += f" ({name if names.count(name) == 1 else r.path})"
        if len(runs) > 1:  # the number of the time split's bars
            out[r.index] = f"[{r.index}] {out[r.index]}"
    return out


def _label(run, runs):
    """A run's name in a figure (see _labels)."""
    return _labels(runs)[run.index]


def _x_axis(runs):
    """('iteration', ipe or None): iterations with a shared epoch length (or none known);
    ('epoch', None) when every run knows its epoch length and they differ."""
    ipes = [r.iterations_per_epoch for r in runs]
    if any(v is None for v in ipes):
        return "iteration", None
    if any(r.varying for r in runs):   # an epoch is no fixed number of iterations: against epochs
        return "epoch", None
    if max(ipes) - min(ipes) <= 1e-6 * max(ipes):
        return "iteration", ipes[0]
    return "epoch", None


def _x_of(run, unit):
    """Iterations (1-based) -> the x of ``run`` on an axis of ``unit`` (iterations, or epochs:
    Run.epochs_at, which follows the gradients a threaded method's iterations consume)."""
    if unit == "iteration":
        return lambda v: np.asarray(v, dtype=np.float64)
    return run.epochs_at


def running_median(y, window):
    """The median of the ``window`` values of ``y`` centred on each (at the ends, the first or the
    last ``window``): a spike shorter than half the window disappears from it, a trend stays."""
    y = np.asarray(y, dtype=np.float64)
    window = min(int(window), len(y))
    if window < 3:
        return y.copy()
    half = window // 2
    med = np.median(np.lib.stride_tricks.sliding_window_view(y, window), axis=1)
    return np.concatenate([np.full(half, med[0]), med, np.full(len(y) - len(med) - half, med[-1])])


def loss_limits(raw, tests):
    """(bottom, top, highest) of the loss axis. It holds every test loss (``tests``) and the running
    median of each run's per-iteration losses (``raw``; a window of 5 to 51 iterations, a
    twentieth of the run), so that a few spikes of single iterations are cut rather than flatten
    every curve; ``highest`` is the largest loss of all, above the top when the axis cuts it. A cut
    must gain more than it hides: none when the highest is within half the range above the top."""
    def finite(arrays):
        v = np.concatenate([np.asarray(a, dtype=np.float64).ravel() for a in arrays] or [np.zeros(0)])
        return v[np.isfinite(v)]
    pooled = finite(raw)
    kept = finite([running_median(y, min(51, max(5, len(y) // 20))) for y in raw] + list(tests))
    every = np.concatenate([pooled, kept])
    if not len(every):
        return None
    highest, lowest = float(every.max()), float(every.min())
    top = float(kept.max()) if len(kept) else highest
    if highest <= top + 0.5 * (top - lowest):
        top = highest
    span = max(top - lowest, 1e-12)
    bottom = lowest - 0.04 * span
    return (max(0.0, bottom) if lowest >= 0 else bottom), top + 0.06 * span, highest


def figure(runs):
    """The matplotlib Figure of one or several runs (see the module docstring). Artists carry
    gids for inspection: ``train-raw:K``, ``train-smooth:K``, ``test-loss:K``, ``test-acc:K``,
    ``lr:K``, ``event:K:ITERATION`` (K the run's 1-based index) and the bars ``time-<part>``."""
    try:
        from matplotlib.figure import Figure
        from matplotlib.lines import Line2D
        from matplotlib.patches import Patch
    except ImportError:
        raise RefsgdError("--plot needs matplotlib (pip install matplotlib, or refsgd[plot])") from None
    runs = list(runs)
    multi = len(runs) > 1
    has_lr = any(r.lr is not None for r in runs)
    fig = Figure(figsize=(16, 6.6 if has_lr else 5.6), layout="constrained")
    gs = fig.add_gridspec(2 if has_lr else 1, 3, width_ratios=[1, 1, 1.05],
                          height_ratios=[3.2, 1] if has_lr else None)
    ax_loss = fig.add_subplot(gs[0, 0])
    ax_acc = fig.add_subplot(gs[:, 1], sharex=ax_loss)
    ax_time = fig.add_subplot(gs[:, 2])
    ax_lr = fig.add_subplot(gs[1, 0], sharex=ax_loss) if has_lr else None

    unit, ipe = _x_axis(runs)
    xlabel = ("iteration" if unit == "iteration" else "epoch (the runs differ in iterations per epoch)" if multi
              else "epoch (of gradients: its iterations consume varying numbers)")
    colors = run_colors(runs) if multi else {runs[0].index: "C0"}
    labels = _labels(runs)
    windows, raw_losses, test_losses = [], [], []
    any_eval = any_event = False
    for r in runs:
        col = colors[r.index]
        scale = _x_of(r, unit)
        x, y = r.train_loss()
        w = smoothing_window(r)
        windows.append(w)
        raw_losses.append(y)
        ax_loss.plot(scale(x), y, color=col, lw=0.7, alpha=0.3, gid=f"train-raw:{r.index}")
        ax_loss.plot(scale(x), moving_mean(y, w), color=col, lw=1.8, gid=f"train-smooth:{r.index}")
        if r.evals:
            any_eval = True
            ex = scale([e["iteration"] for e in r.evals])
            test_losses.append([e["test_loss"] for e in r.evals])
            ax_loss.plot(ex, [e["test_loss"] for e in r.evals], "o", ls="--", lw=1, color=col, ms=6, mec="white",
                         mew=1.2, zorder=4, gid=f"test-loss:{r.index}")
            ax_acc.plot(ex, [100 * e["test_acc"] for e in r.evals], "o-", color=col, ms=6, mec="white", mew=1.2,
                        gid=f"test-acc:{r.index}", label=labels[r.index])
        for e in r.events:  # DASO's warm-up, cycling and cool-down: a dotted line where each begins
            any_event = True
            ex = float(scale([e["iteration"]])[0])
            mark = col if multi else "dimgray"
            for ax in (ax_loss, ax_acc, ax_lr):
                if ax is not None:
                    ax.axvline(ex, color=mark, ls=":", lw=1.2, alpha=0.9, zorder=1,
                               gid=f"event:{r.index}:{int(e['iteration'])}")
            # named where the accuracy usually is not: at the top early in the run, at the bottom late
            early = e["iteration"] < 0.5 * r.iterations
            ax_acc.text(ex, 0.99 if early else 0.01, f" {_event_text(e)} ", transform=ax_acc.get_xaxis_transform(),
                        rotation=90, ha="left", va="top" if early else "bottom", fontsize=7.5, color=mark,
                        gid=f"event-label:{r.index}:{int(e['iteration'])}")
    _lr_curves(ax_lr, runs, colors, unit)
    limits = loss_limits(raw_losses, test_losses)
    if limits is not None:
        bottom, top, highest = limits
        ax_loss.set_ylim(bottom, top)
        if highest > top:
            ax_loss.text(0.99, 0.98, f"axis cut at {top:.3g}: early losses reach {highest:.3g}",
                         transform=ax_loss.transAxes, ha="right", va="top", fontsize=7.5, color="dimgray",
                         gid="loss-clipped")

    ax_loss.set_ylabel("loss")
    ax_loss.set_title("loss: train (faint: per iteration, mean over the ranks that have one;\n"
                      "solid: its moving mean) and test (markers)", fontsize=9.5)
    ax_acc.set_ylabel("test accuracy (%)")
    ax_acc.set_xlabel(xlabel)
    ax_acc.set_title("test accuracy", fontsize=9.5)
    if not any_eval:
        ax_acc.text(0.5, 0.5, "no evaluations", transform=ax_acc.transAxes, ha="center", va="center", color="gray")
    if ax_lr is not None:
        ax_loss.tick_params(labelbottom=False)
        ax_lr.set_xlabel(xlabel)
        ax_lr.set_ylabel("learning rate", fontsize=9)
        ax_lr.tick_params(labelsize=8)
        ax_lr.ticklabel_format(axis="y", style="sci", scilimits=(-3, 3))
    else:
        ax_loss.set_xlabel(xlabel)
    for ax in (ax_loss, ax_acc):
        ax.grid(alpha=0.3)
    if ipe is not None:
        for ax in (ax_loss, ax_acc):
            sec = ax.secondary_xaxis("top", functions=(lambda v, k=ipe: v / k, lambda v, k=ipe: v * k))
            sec.set_xlabel("epoch", fontsize=9)
            sec.tick_params(labelsize=8)

    # the curves' legend, below the panels: the line styles, then (several runs) the runs' colours
    lo, hi = min(windows), max(windows)
    span = f"{lo}" if lo == hi else f"{lo}-{hi}"
    style = "gray" if multi else "C0"
    handles = [Line2D([], [], color=style, lw=0.7, alpha=0.4, label="train, per iteration"),
               Line2D([], [], color=style, lw=1.8, label=f"train, moving mean over {span} iterations"),
               Line2D([], [], color=style, marker="o", ls="--", lw=1, mec="white", label="test (evaluations)")]
    if any_event:
        handles.append(Line2D([], [], color=style if multi else "dimgray", ls=":", lw=1.2,
                              label="the method's phase changes"))
    ncol = len(handles)
    if multi:  # rows of styles, then rows of runs; matplotlib fills the legend column by column
        named = [Line2D([], [], color=colors[r.index], lw=3, label=labels[r.index]) for r in runs]
        longest = max(len(h.get_label()) for h in named)
        ncol = 2 if longest > 60 else 3 if longest > 40 else max(len(handles), min(len(named), 5))
        blank = Line2D([], [], alpha=0, label=" ")

        def rows_of(items):
            return [items[i:i + ncol] + [blank] * (ncol - len(items[i:i + ncol])) for i in range(0, len(items), ncol)]
        rows = rows_of(handles) + rows_of(named)
        handles = [row[c] for c in range(ncol) for row in rows]
    try:
        fig.legend(handles=handles, loc="outside lower center", ncol=ncol, fontsize=9, frameon=False)
    except ValueError:  # matplotlib < 3.7: no "outside" placement; the legend goes below the loss panel
        (ax_lr or ax_loss).legend(handles=[h for h in handles if h.get_label() != " "], loc="upper left",
                                  bbox_to_anchor=(0, -0.2), ncol=1, fontsize=8)

    _time_split(ax_time, runs, multi, Patch)
    fig.suptitle(_figure_title(runs), fontsize=11)
    return fig


def _lr_curves(ax, runs, colors, unit):
    """The learning rate of every run: runs whose rates coincide share one curve drawn in dashes
    of their colours in turn, so that each shows (a run drawn over another would hide it)."""
    if ax is None:
        return
    groups = []  # [(x, lr, [runs])]
    for r in runs:
        if r.lr is None:
            continue
        x = _x_of(r, unit)(np.arange(1, len(r.lr) + 1))
        for gx, gy, members in groups:
            if _same_curve(gx, gy, x, r.lr):
                members.append(r)
                break
        else:
            groups.append((x, r.lr, [r]))
    dash = 5.0
    for x, y, members in groups:
        k = len(members)
        for j, r in enumerate(members):
            ls = "-" if k == 1 else (j * dash, (dash, (k - 1) * dash))
            ax.plot(x, y, color=colors[r.index], lw=1.6 if k > 1 else 1.2, ls=ls, gid=f"lr:{r.index}")


def _same_curve(x1, y1, x2, y2):
    """Whether two curves coincide as drawn: the same span of x (within 2 %) and each one's values
    on the other's x (interpolated: the runs may differ in iterations per epoch)."""
    span = max(x1[-1] - x1[0], x2[-1] - x2[0], 1e-12)
    if abs(x1[0] - x2[0]) > 0.02 * span or abs(x1[-1] - x2[-1]) > 0.02 * span:
        return False
    return bool(np.allclose(np.interp(x2, x1, y1), y2, rtol=1e-6, atol=0) and
                np.allclose(np.interp(x1, x2, y2), y1, rtol=1e-6, atol=0))


def _time_split(ax, runs, multi, Patch):
    if multi:
        groups = [(f"[{r.index}]\n{r.algo}", {k: v.mean() for k, v in r.time_ms().items()}) for r in runs]
        ax.set_xlabel("run (mean over its ranks; [k] as in the legend)")
    else:
        ms = runs[0].time_ms()
        groups = [(str(rank), {k: v[rank] for k, v in ms.items()}) for rank in range(runs[0].world)]
        ax.set_xlabel("rank")
    x = np.arange(len(groups), dtype=np.float64)
    width = 0.38
    bottom = np.zeros(len(groups))
    for part in ("compute", "idle", "update", "other"):
        v = np.array([max(g[part], 0.0) for _, g in groups])
        ax.bar(x - width / 2, v, width, bottom=bottom, color=TIME_COLORS[part], gid=f"time-{part}")
        bottom += v
    ax.bar(x + width / 2, [g["comm"] for _, g in groups], width, facecolor="white", edgecolor=TIME_COLORS["comm"],
           hatch="///", lw=1.2, gid="time-comm")
    ax.set_xticks(x)
    if len(groups) > 8 and multi:  # names side by side would run into each other
        ax.set_xticklabels([name.replace("\n", " ") for name, _ in groups], fontsize=8, rotation=30, ha="right",
                           rotation_mode="anchor")
    else:
        ax.set_xticklabels([name for name, _ in groups], fontsize=8 if multi else 9)
    if multi:  # each run's name in its colour, as in the curves
        colors = run_colors(runs)
        for tick, r in zip(ax.get_xticklabels(), runs):
            tick.set_color(colors[r.index])
    ax.set_xlim(-0.6, len(groups) - 0.4)
    ax.set_ylabel("ms per iteration (mean)")
    ax.set_title("time split per iteration; beside it, hatched: communication in flight\n"
                 "(idle, blocked in MPI, lies within it; the excess overlapped other work)", fontsize=9)
    ax.grid(axis="y", alpha=0.3)
    handles = [Patch(facecolor=TIME_COLORS[p], label=p) for p in ("compute", "idle", "update", "other")]
    handles.append(Patch(facecolor="white", edgecolor=TIME_COLORS["comm"], hatch="///", label="comm in flight"))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0, fontsize=8.5,
              title="other = wall - compute\n- idle - update", title_fontsize=7.5)


def _figure_title(runs):
    """The first line names the run (or counts the runs); the emulated link follows once when
    every run has the same, or per run when they differ (their --link is also in the legend)."""
    links = _links(runs)
    if len(runs) == 1:
        r = runs[0]
        first = f"{r.algo} / {r.model} / {r.world} rank(s) / {os.path.basename(r.path)}"
        return "\n".join([first] + [f"{link} -- EMULATED" for _, link in links])
    first = f"comparison of {len(runs)} runs"
    texts = {link for _, link in links}
    if len(texts) == 1 and len(links) == len(runs):
        return f"{first}\nevery run: {texts.pop()} -- EMULATED"
    if links:
        return f"{first}\nemulated links ('link' in the legend; 'none': the real network) -- EMULATED where given"
    return first


def plot_format(path):
    """The format matplotlib writes ``path`` in (its extension; png without one); RefsgdError
    when matplotlib is missing or cannot write it."""
    try:
        from matplotlib.backend_bases import FigureCanvasBase
    except ImportError:
        raise RefsgdError("--plot needs matplotlib (pip install matplotlib, or refsgd[plot])") from None
    ext = os.path.splitext(path)[1][1:].lower() or "png"
    supported = FigureCanvasBase.get_supported_filetypes()
    if ext not in supported:
        raise RefsgdError(f"--plot {path}: matplotlib cannot write .{ext} files; give a name ending in one of "
                          + ", ".join("." + k for k in sorted(supported)))
    return ext


def save_figure(fig, path):
    """Write the figure to ``path`` atomically, in the format its extension names."""
    fmt = plot_format(path)
    with atomic_path(path, what="the figure") as tmp:
        fig.savefig(tmp, format=fmt, dpi=110)


# ---------------------------------------------------------------------- exports
def _num(v):
    """A JSON-safe number: NaN and infinities become None."""
    v = float(v)
    return v if math.isfinite(v) else None


def _jsonable(v):
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    if isinstance(v, np.ndarray):
        return [_jsonable(x) for x in v.tolist()]
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    return v


def csv_text(runs):
    """The CSV export (see the module docstring)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_COLUMNS)
    for r in runs:
        for e in r.evals:
            w.writerow([r.index, r.path, r.algo, r.world, int(e["iteration"]),
                        *(repr(float(e.get(k, math.nan))) for k in EVAL_FIELDS[1:])])
    return buf.getvalue()


def run_json(r):
    """One run of the JSON export (see the module docstring)."""
    try:
        events = json.loads(_text(r.attrs.get("events", "[]")))
    except ValueError:
        events = None
    totals, ms = r.time_totals(), r.time_ms()
    def time(x):  # a part that a file of version 1-2 makes negative (PP-ASGD's other) is null
        return _num(x) if x >= 0 else None
    per_rank = {k: [time(x) for x in totals[k]] for k in PARTS}
    per_rank.update({f"{k}_ms_per_iteration": [time(x) for x in ms[k]] for k in PARTS})
    per_it = {"iteration": list(range(1, r.iterations + 1)),
              "train_loss": [_num(x) for x in rank_nanmean(r.rec["loss"])]}
    for k in ("wall", "compute", "idle", "comm"):
        per_it[f"{k}_ms"] = [_num(x) for x in 1e3 * r.rec[k].mean(axis=0)] if k in r.rec else None
    per_it["lr"] = None if r.lr is None else [_num(x) for x in r.lr]
    ipe = r.iterations_per_epoch
    return {
        "run": r.index, "file": r.path, "algo": r.algo, "ranks": r.world,
        "nodes": _jsonable(r.attrs.get("nodes")), "iterations": r.iterations,
        "iterations_per_epoch": _num(ipe) if ipe is not None else None,
        "metrics_format_version": _jsonable(r.format_version),
        "attrs": {k: _jsonable(v) for k, v in sorted(r.attrs.items()) if k not in ("config", "events")},
        "config": _jsonable(r.config), "events": _jsonable(events),
        "evals": [{k: (int(e[k]) if k == "iteration" else _num(e[k])) for k in EVAL_FIELDS if k in e}
                  for e in r.evals],
        "final": ({k: (int(r.evals[-1][k]) if k == "iteration" else _num(r.evals[-1][k]))
                   for k in EVAL_FIELDS if k in r.evals[-1]} if r.evals else None),
        "wall_seconds": _num(r.attrs.get("wall_seconds", math.nan)),
        "time_per_rank": per_rank,
        "time_mean_ms_per_iteration": {k: time(ms[k].mean()) if len(ms[k]) else None for k in PARTS},
        "per_iteration": per_it,
    }


def json_text(runs):
    """The JSON export (see the module docstring)."""
    doc = {"format": "refsgd-report", "format_version": 1, "runs": [run_json(r) for r in runs]}
    return _dumps(doc) + "\n"


def _dumps(v, pad=""):
    """JSON, indented, with each list of plain values on one line (per-iteration series stay
    one line each)."""
    inner = pad + " "
    if isinstance(v, dict) and v:
        items = [f"{inner}{json.dumps(str(k))}: {_dumps(x, inner)}" for k, x in v.items()]
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if isinstance(v, list) and any(isinstance(x, (dict, list)) for x in v):
        return "[\n" + ",\n".join(inner + _dumps(x, inner) for x in v) + "\n" + pad + "]"
    return json.dumps(v, allow_nan=False)


def _timeline_title(run, d):
    link = d["link"]
    extra = "" if link in ("none", "") else f", link {link} (EMULATED)"
    first, count = d["window"]
    return (f"{run.algo}, {run.world} ranks{extra}: iterations {first}..{first + count - 1} ({run.path}; measured "
            "on this machine)")


def _write_text(path, text, what):
    with atomic_path(path, what=what) as tmp:
        with open(tmp, "w", encoding="utf-8", newline="") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())


# ---------------------------------------------------------------------- the command
def report(paths, plot=None, csv_out=None, json_out=None, force=False, timeline=None, timeline_plot=None):
    """``refsgd report``: the text (returned) of one or several metrics files (``paths``: a
    path or a list); writes the figure (``plot``), CSV and JSON outputs that are given, and
    from the spans of ``train --timeline`` the Chrome trace (``timeline``, one file) and the
    Gantt chart (``timeline_plot``; refsgd.timeline). Every output is checked, and every input
    read, before anything is written."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    paths = [os.fspath(p) for p in paths]
    if not paths:
        raise RefsgdError("report: no metrics file given")
    outputs = [(flag, os.fspath(p) if p else None) for flag, p in (("--plot", plot), ("--csv", csv_out),
                                                                    ("--json", json_out), ("--timeline", timeline),
                                                                    ("--timeline-plot", timeline_plot))]
    check_distinct([(f"the input {p}", p) for p in paths], outputs)
    for flag, p in outputs:
        if p:
            check_output(p, flag, force)
    plot, csv_out, json_out, timeline, timeline_plot = (p for _, p in outputs)
    if plot:
        plot_format(plot)
    if timeline_plot:
        plot_format(timeline_plot)
    if timeline and len(paths) > 1:
        raise RefsgdError(f"--timeline {timeline} exports the timeline of one metrics file, got {len(paths)} "
                          "(compare several with --timeline-plot)")
    runs = [load(p, i + 1) for i, p in enumerate(paths)]
    parts = [run_text(r) for r in runs]
    if len(runs) > 1:
        parts.append(comparison_text(runs))
    fig = figure(runs) if plot else None  # drawn before any output is written
    spans = [tl.read(r.path) for r in runs] if timeline or timeline_plot else None
    gantt = tl.gantt(spans, [_timeline_title(r, d) for r, d in zip(runs, spans)]) if timeline_plot else None
    notes = []
    if spans is not None:
        parts.append("\n".join(tl.clock_text(d, r.path) for r, d in zip(runs, spans)))
    if timeline:
        _write_text(timeline, json.dumps(tl.chrome_trace(spans[0])), "the timeline")
        notes.append(f"timeline written to {timeline} (Trace Event Format: open it in https://ui.perfetto.dev "
                     "or chrome://tracing)")
    if gantt is not None:
        save_figure(gantt, timeline_plot)
        notes.append(f"timeline plot written to {timeline_plot}")
    if csv_out:
        _write_text(csv_out, csv_text(runs), "the CSV")
        notes.append(f"CSV written to {csv_out}")
    if json_out:
        _write_text(json_out, json_text(runs), "the JSON")
        notes.append(f"JSON written to {json_out}")
    if fig is not None:
        save_figure(fig, plot)
        notes.append(f"plot written to {plot}")
    return "\n\n".join(parts) + ("\n" + "\n".join(notes) if notes else "")
