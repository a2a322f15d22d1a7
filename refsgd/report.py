"""``refsgd report FILE [FILE ...]``: the text, the figure and the exports of metrics files
(``refsgd train --out``; schema in :mod:`refsgd.metrics`).

Files of metrics format version 1 (no ``format_version`` attribute) and 2 are read alike; what
version 2 adds (the ``/lr`` dataset, the attributes ``model``, ``model_spec``, ``layout``,
``dataset``, ``dataset_sha256``, ``threads_per_rank``) is shown where it is present.

Text (standard output)
    The report of each FILE in turn, in the order given: a header (file, method, ranks, nodes,
    model, refsgd version, metrics format version; the model spec, layout, dataset and its
    SHA-256 and threads per rank where the file has them), the MPI library and thread level,
    the configuration, one line per evaluation, and the end-of-run summary
    (:func:`refsgd.metrics.summary`: final figures, wall time, traffic, per-rank time split).
    With several files, a comparison table follows: one row per run with its method, ranks,
    final test accuracy and loss, wall time and the mean milliseconds per iteration of compute,
    idle, update (the method's update of its state), other (wall - compute - idle - update) and
    comm in flight, each the mean over the run's ranks.

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
    data seen. Several runs share the axes, one colour per run, labelled by method and file.
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
                       iteration
        time_mean_ms_per_iteration  {"compute", "idle", "update", "other", "comm"}, mean over ranks
        per_iteration  {"iteration": [1..T], "train_loss": mean over the ranks that have one
                       (null where none has), "wall_ms", "compute_ms", "idle_ms", "comm_ms"
                       (means over ranks), "lr" (null when the file has no /lr)}

    NaN and infinite values are written as null (JSON has no NaN).

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
from refsgd.files import atomic_path, check_distinct, check_output, open_h5, read_array

#: the time split, in the order drawn and tabled
PARTS = ("compute", "idle", "update", "other", "comm")
CSV_COLUMNS = ("run", "file", "algo", "ranks", "iteration", "epoch", "train_loss", "test_loss", "test_acc",
               "seconds")
EVAL_FIELDS = ("iteration", "epoch", "train_loss", "test_loss", "test_acc", "seconds")
#: version-2 attributes shown in the text header when present, with their names there
EXTRA_ATTRS = (("model_spec", "model spec"), ("layout", "layout"), ("dataset", "dataset"),
               ("dataset_sha256", "dataset sha256"), ("threads_per_rank", "threads per rank"))


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
    def iterations_per_epoch(self):
        """iteration / epoch of the last evaluation past epoch 0, or None."""
        for e in reversed(self.evals):
            if e["epoch"] > 0 and e["iteration"] > 0 and math.isfinite(e["epoch"]):
                return e["iteration"] / e["epoch"]
        return None

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
    from refsgd import metrics
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
            f"{_text(a.get('nodes', '?'))} node(s), model {run.model}, refsgd {_text(a.get('refsgd_version', '?'))}, "
            f"metrics format version {run.format_version}"]
    if "interrupted" in a:
        head.append(f"INTERRUPTED by {_text(a['interrupted'])} after iteration {run.iterations} of "
                    f"{_text(a.get('iterations_planned', '?'))}: the file holds the iterations done")
    head += [f"{name}: {_attr_text(k, a[k])}" for k, name in EXTRA_ATTRS if k in a]
    mpi = _text(a.get("mpi_library", "")).strip()
    head.append(f"MPI: {mpi.splitlines()[0] if mpi else '?'}, thread level {_text(a.get('mpi_thread_level', '?'))}")
    head.append("config: " + ", ".join(f"{k}={v}" for k, v in sorted(cfg.items())))
    if run.lr is not None and len(run.lr) and run.lr.min() == run.lr.max():
        head.append(f"learning rate: {run.lr[0]:.4g} at every iteration")
    elif run.lr is not None and len(run.lr):
        head.append(f"learning rate: {run.lr[0]:.4g} at iteration 1, {run.lr.min():.4g} .. {run.lr.max():.4g}, "
                    f"{run.lr[-1]:.4g} at iteration {len(run.lr)}")
    for e in run.evals:
        head.append(f"  iter {int(e['iteration']):>6}  epoch {e['epoch']:6.2f}  train loss {e['train_loss']:.4f}  "
                    f"test loss {e['test_loss']:.4f}  test acc {100 * e['test_acc']:.2f}%")
    wall = float(a.get("wall_seconds", 0))
    return "\n".join(head) + "\n" + metrics.summary(run.evals, run.rec, wall, None if link == "none" else link)


def comparison_text(runs):
    """The table comparing several runs (time split: mean over each run's ranks)."""
    rows = []
    for r in runs:
        e = r.evals[-1] if r.evals else None
        ms = {k: v.mean() for k, v in r.time_ms().items()}
        rows.append([str(r.index), r.algo, str(r.world),
                     f"{100 * e['test_acc']:.2f}%" if e else "-", f"{e['test_loss']:.4f}" if e else "-",
                     f"{float(r.attrs.get('wall_seconds', 0)):.2f}",
                     *(f"{ms[k]:.2f}" for k in PARTS), r.path])
    header = ["run", "method", "ranks", "test acc", "test loss", "wall s", *PARTS, "file"]
    widths = [max(len(x[j]) for x in rows + [header]) for j in range(len(header))]
    left = {1, len(header) - 1}

    def fmt(cells):
        return "  " + "  ".join(c.ljust(w) if j in left else c.rjust(w)
                                for j, (c, w) in enumerate(zip(cells, widths))).rstrip()
    emulated = [f"  run {r.index}: {link} -- EMULATED, not the real network" for r, link in _links(runs)]
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


# ---------------------------------------------------------------------- figure
TIME_COLORS = {"compute": "#4C72B0", "idle": "#DD8452", "update": "#8172B3", "other": "#B8B8B8",
               "comm": "#55A868"}


def _label(run, runs):
    """A run's name in a figure: its method and file name (the path if two names are alike)."""
    names = [os.path.basename(r.path) for r in runs]
    name = os.path.basename(run.path)
    if names.count(name) > 1:
        name = run.path if [r.path for r in runs].count(run.path) == 1 else f"{name} #{run.index}"
    return f"{run.algo} ({name})"


def _x_axis(runs):
    """('iteration', ipe or None): iterations with a shared epoch length (or none known);
    ('epoch', None) when every run knows its epoch length and they differ."""
    ipes = [r.iterations_per_epoch for r in runs]
    if any(v is None for v in ipes):
        return "iteration", None
    if max(ipes) - min(ipes) <= 1e-6 * max(ipes):
        return "iteration", ipes[0]
    return "epoch", None


def figure(runs):
    """The matplotlib Figure of one or several runs (see the module docstring). Artists carry
    gids for inspection: ``train-raw:K``, ``train-smooth:K``, ``test-loss:K``, ``test-acc:K``,
    ``lr:K`` (K the run's 1-based index) and the bars ``time-<part>``."""
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
    xlabel = "iteration" if unit == "iteration" else "epoch (the runs differ in iterations per epoch)"
    windows = []
    any_eval = False
    for r in runs:
        col = f"C{(r.index - 1) % 10}"
        scale = 1.0 if unit == "iteration" else 1.0 / r.iterations_per_epoch
        x, y = r.train_loss()
        w = smoothing_window(r)
        windows.append(w)
        ax_loss.plot(x * scale, y, color=col, lw=0.7, alpha=0.3, gid=f"train-raw:{r.index}")
        ax_loss.plot(x * scale, moving_mean(y, w), color=col, lw=1.8, gid=f"train-smooth:{r.index}")
        if r.evals:
            any_eval = True
            ex = np.array([e["iteration"] for e in r.evals]) * scale
            ax_loss.plot(ex, [e["test_loss"] for e in r.evals], "o", ls="--", lw=1, color=col, ms=6, mec="white",
                         mew=1.2, zorder=4, gid=f"test-loss:{r.index}")
            ax_acc.plot(ex, [100 * e["test_acc"] for e in r.evals], "o-", color=col, ms=6, mec="white", mew=1.2,
                        gid=f"test-acc:{r.index}", label=_label(r, runs))
        if r.lr is not None and ax_lr is not None:
            ax_lr.plot(np.arange(1, len(r.lr) + 1) * scale, r.lr, color=col, lw=1.2, gid=f"lr:{r.index}")

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
    ncol = len(handles)
    if multi:  # one row of styles, then rows of runs; matplotlib fills the legend column by column
        named = [Line2D([], [], color=f"C{(r.index - 1) % 10}", lw=3, label=_label(r, runs)) for r in runs]
        ncol = max(len(handles), min(len(named), 5))
        blank = Line2D([], [], alpha=0, label=" ")
        rows = [handles + [blank] * (ncol - len(handles))]
        rows += [named[i:i + ncol] + [blank] * (ncol - len(named[i:i + ncol])) for i in range(0, len(named), ncol)]
        handles = [row[c] for c in range(ncol) for row in rows]
    try:
        fig.legend(handles=handles, loc="outside lower center", ncol=ncol, fontsize=9, frameon=False)
    except ValueError:  # matplotlib < 3.7: no "outside" placement; the legend goes below the loss panel
        (ax_lr or ax_loss).legend(handles=[h for h in handles if h.get_label() != " "], loc="upper left",
                                  bbox_to_anchor=(0, -0.2), ncol=1, fontsize=8)

    _time_split(ax_time, runs, multi, Patch)
    title = _figure_title(runs)
    fig.suptitle(title, fontsize=11)
    return fig


def _time_split(ax, runs, multi, Patch):
    if multi:
        groups = [(f"{r.algo}\n{_label(r, runs).split('(', 1)[1][:-1]}", {k: v.mean() for k, v in r.time_ms().items()})
                  for r in runs]
        ax.set_xlabel("run (mean over its ranks)")
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
    if len(groups) > 4 and multi:  # long names side by side would run into each other
        ax.set_xticklabels([name.replace("\n", " ") for name, _ in groups], fontsize=8, rotation=30, ha="right",
                           rotation_mode="anchor")
    else:
        ax.set_xticklabels([name for name, _ in groups], fontsize=8 if multi else 9)
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
    """The first line names the run (or counts the runs); one line per emulated link follows."""
    if len(runs) == 1:
        r = runs[0]
        first = f"{r.algo} / {r.model} / {r.world} rank(s) / {os.path.basename(r.path)}"
        return "\n".join([first] + [f"{link} -- EMULATED" for _, link in _links(runs)])
    return "\n".join([f"comparison of {len(runs)} runs"] +
                     [f"run {r.index} ({r.algo}): {link} -- EMULATED" for r, link in _links(runs)])


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
    per_rank = {k: [_num(x) for x in totals[k]] for k in PARTS}
    per_rank.update({f"{k}_ms_per_iteration": [_num(x) for x in ms[k]] for k in PARTS})
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
        "time_mean_ms_per_iteration": {k: _num(ms[k].mean()) if len(ms[k]) else None for k in PARTS},
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


def _write_text(path, text, what):
    with atomic_path(path, what=what) as tmp:
        with open(tmp, "w", encoding="utf-8", newline="") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())


# ---------------------------------------------------------------------- the command
def report(paths, plot=None, csv_out=None, json_out=None, force=False):
    """``refsgd report``: the text (returned) of one or several metrics files (``paths``: a
    path or a list); writes the figure (``plot``), CSV and JSON outputs that are given. Every
    output is checked, and every input read, before anything is written."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    paths = [os.fspath(p) for p in paths]
    if not paths:
        raise RefsgdError("report: no metrics file given")
    outputs = [(flag, os.fspath(p) if p else None) for flag, p in (("--plot", plot), ("--csv", csv_out),
                                                                    ("--json", json_out))]
    check_distinct([(f"the input {p}", p) for p in paths], outputs)
    for flag, p in outputs:
        if p:
            check_output(p, flag, force)
    plot, csv_out, json_out = (p for _, p in outputs)
    if plot:
        plot_format(plot)
    runs = [load(p, i + 1) for i, p in enumerate(paths)]
    parts = [run_text(r) for r in runs]
    if len(runs) > 1:
        parts.append(comparison_text(runs))
    fig = figure(runs) if plot else None  # drawn before any output is written
    notes = []
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
