"""``refsgd report FILE...``: the summary of metrics files again, their plots and exports."""

import argparse


def add(sub):
    p = sub.add_parser("report", help="print the summary of metrics files again, plot and export them",
                       description="Print the configuration, evaluations and per-rank time split of each "
                                   "run's metrics file (refsgd train --out), and with several files a table "
                                   "comparing them. --plot draws the loss, accuracy (and learning-rate) "
                                   "curves of all runs on shared axes and their time split (needs "
                                   "matplotlib); --csv and --json export the evaluations and a summary of "
                                   "each run (layouts in refsgd/report/). Outputs are written atomically; "
                                   "an existing file is replaced only with --force.",
                       epilog="examples: refsgd report ssgd.h5 dcasgd.h5 --plot cmp.png --csv cmp.csv\n"
                              "  refsgd report run.h5 --timeline run.json          (a run of train --timeline, for "
                              "Perfetto)\n"
                              "  refsgd report ssgd.h5 laga.h5 pipe.h5 --timeline-plot t.png   (Gantt chart)",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("files", nargs="+", metavar="FILE", help="metrics file(s) written by refsgd train --out")
    p.add_argument("--plot", default=None, metavar="OUT.png",
                   help="draw the curves and time split into this image (.png, .pdf, .svg, ...)")
    p.add_argument("--csv", default=None, metavar="OUT.csv", help="write the evaluations, one row each, as CSV")
    p.add_argument("--json", default=None, metavar="OUT.json",
                   help="write each run's attributes, config, evaluations and time split as JSON")
    p.add_argument("--timeline", default=None, metavar="OUT.json",
                   help="export the spans of train --timeline (one file) in the Trace Event Format: one process per "
                        "rank, one track per thread and per lane of requests in flight, named by the listing's lines "
                        "(open in https://ui.perfetto.dev or speedscope)")
    p.add_argument("--timeline-plot", default=None, metavar="OUT.png",
                   help="draw the spans of each file's train --timeline as a Gantt chart, one panel per run on a "
                        "common time axis of the same number of iterations (needs matplotlib)")
    p.add_argument("--force", action="store_true", help="replace existing --plot/--csv/--json/--timeline files")


def run(args, parser):
    from refsgd import report  # noqa: PLC0415 start-up: h5py (and matplotlib to plot); --help needs neither
    print(report.report(args.files, plot=args.plot, csv_out=args.csv, json_out=args.json, force=args.force,
                        timeline=args.timeline, timeline_plot=args.timeline_plot))
    return 0
