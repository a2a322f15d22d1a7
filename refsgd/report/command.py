"""``refsgd report``: check every output and read every input, then write the text, the figure,
the exports and the timeline's trace and chart that were asked for."""

import json
import os

from refsgd.errors import RefsgdError
from refsgd import timeline as tl
from refsgd.files import check_distinct, check_output, write_text

from .runs import load
from .text import comparison_text, run_text
from .figure import figure, plot_format, save_figure
from .export import csv_text, json_text


def _timeline_title(run, d):
    """Two lines: the run and its window; its link, emulated (the file's text names it so)."""
    link = d["link"]
    first, count = d["window"]
    title = (f"{run.algo}, {run.world} ranks: iterations {first}..{first + count - 1} ({run.path}; measured on this "
             "machine)")
    if link not in ("none", ""):
        title += "\n" + (link if "emulated" in link.lower() else f"emulated link: {link}")
    return title


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
        try:   # never a file that is not JSON (a NaN read from a damaged file)
            text = json.dumps(tl.chrome_trace(spans[0]), allow_nan=False)
        except ValueError as exc:
            raise RefsgdError(f"{runs[0].path}: malformed /timeline ({exc})") from None
        write_text(timeline, text, "the timeline")
        notes.append(f"timeline written to {timeline} (Trace Event Format: open it in https://ui.perfetto.dev "
                     "or speedscope)")
    if gantt is not None:
        save_figure(gantt, timeline_plot)
        notes.append(f"timeline plot written to {timeline_plot}")
    if csv_out:
        write_text(csv_out, csv_text(runs), "the CSV")
        notes.append(f"CSV written to {csv_out}")
    if json_out:
        write_text(json_out, json_text(runs), "the JSON")
        notes.append(f"JSON written to {json_out}")
    if fig is not None:
        save_figure(fig, plot)
        notes.append(f"plot written to {plot}")
    return "\n\n".join(parts) + ("\n" + "\n".join(notes) if notes else "")
