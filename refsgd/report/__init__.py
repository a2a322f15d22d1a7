"""``refsgd report FILE [FILE ...]``: the text, the figure and the exports of metrics files
(``refsgd train --out``; schema in :mod:`refsgd.metrics`).

Modules: :mod:`.metrics_file` (read a metrics file, the summary text), :mod:`.runs` (a metrics
file as the report shows it), :mod:`.text`, :mod:`.figure`, :mod:`.export` (CSV, JSON),
:mod:`.command` (:func:`report`); this package re-exports them.

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
    Trace Event Format (Perfetto, speedscope), or drawn as a Gantt chart, one panel per run
    on a common time axis of the same number of iterations. The text gets one line per file
    saying its window, its span count and how well its clocks are aligned. A file without a
    timeline is refused with one message.

Every output is checked before anything is read or drawn: an existing file is refused unless
``--force``, an output may not be one of the input files or another output, and each is
written to a temporary file renamed into place (:func:`refsgd.files.atomic_path`).
"""

from .runs import (  # noqa: F401
    PARTS,
    CSV_COLUMNS,
    EVAL_FIELDS,
    EXTRA_ATTRS,
    Run,
    rank_nanmean,
    moving_mean,
    smoothing_window,
    load,
)
from .text import (  # noqa: F401
    run_text,
    comparison_text,
    SETTINGS_ORDER,
    SETTING_NAMES,
    SETTINGS_IGNORED,
    settings,
    differing_settings,
)
from .figure import (  # noqa: F401
    TIME_COLORS,
    METHOD_COLORS,
    SHADES,
    run_colors,
    running_median,
    loss_limits,
    figure,
    plot_format,
    save_figure,
)
from .export import (  # noqa: F401
    csv_text,
    run_json,
    json_text,
)
from .command import (  # noqa: F401
    report,
)
