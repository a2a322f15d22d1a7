"""The report's figure (``--plot``): the loss, the test accuracy, the learning rate and the time
split of every run, with a colour per method and a shade per run of the same method."""

import os

import numpy as np

from refsgd.errors import RefsgdError
from refsgd.files import atomic_path
from refsgd.options import one_worker_note
from refsgd.registry import METHODS

from .runs import moving_mean, smoothing_text, smoothing_window
from .text import _event_text, _links, _settings_text, differing_settings

# ---------------------------------------------------------------------- figure
#: (the hatch of the communication in flight is black: every green, orange or blue is some method's)
TIME_COLORS = {"compute": "#4C72B0", "idle": "#DD8452", "update": "#8172B3", "other": "#B8B8B8",
               "comm": "#000000"}

#: one colour per method, whatever the order of the files on the command line
METHOD_COLORS = {m.name: m.colour for m in METHODS.values()}

#: a second, third, ... run of the same method: its colour mixed towards black (-) or white (+)
SHADES = (0.0, -0.4, 0.45, -0.65, 0.7)


def run_colors(runs):
    """{run index: colour}: the method's colour (METHOD_COLORS; another method the grey of its
    name's letters), a shade of it for each further run of the same method."""
    from matplotlib.colors import to_hex, to_rgb  # noqa: PLC0415 matplotlib: optional (--plot)
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
        from matplotlib.figure import Figure  # noqa: PLC0415 matplotlib: optional (--plot)
        from matplotlib.lines import Line2D  # noqa: PLC0415 matplotlib
        from matplotlib.patches import Patch  # noqa: PLC0415 matplotlib
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
    raw_losses, test_losses = [], []
    any_eval = any_event = False
    for r in runs:
        col = colors[r.index]
        scale = _x_of(r, unit)
        x, y = r.train_loss()
        w = smoothing_window(r)
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
    style = "gray" if multi else "C0"
    handles = [Line2D([], [], color=style, lw=0.7, alpha=0.4, label="train, per iteration"),
               Line2D([], [], color=style, lw=1.8, label=f"train, {smoothing_text(runs)}"),
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
        from matplotlib.backend_bases import FigureCanvasBase  # noqa: PLC0415 matplotlib: optional (--plot)
    except ImportError:
        raise RefsgdError("--plot needs matplotlib (pip install matplotlib, or refsgd[plot])") from None
    ext = os.path.splitext(path)[1][1:].lower() or "png"
    supported = FigureCanvasBase.get_supported_filetypes()
    if ext not in supported:
        raise RefsgdError(f"--plot {path}: matplotlib cannot write .{ext} files; give a name ending in one of "
                          + ", ".join("." + k for k in sorted(supported)))
    return ext


def save_figure(fig, path):
    """Write a matplotlib Figure to ``path`` atomically, in the format its extension names (the
    report's, bench's and reproduce's figures; built as ``Figure()``, not with pyplot, so that
    nothing holds them once they are written)."""
    fmt = plot_format(path)
    with atomic_path(path, what="the figure") as tmp:
        fig.savefig(tmp, format=fmt, dpi=110)
