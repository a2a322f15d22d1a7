"""The report's text: a run's header, configuration, evaluations and summary; with several
runs, the comparison table and the settings in which they differ."""

from refsgd.options import OPTIONS, one_worker_note
from refsgd.options.table import TRAJECTORY as TRAJECTORY_RECORD

from .metrics_file import summary
from .runs import EXTRA_ATTRS, PARTS, _attr_text, _one_line, _text


# ---------------------------------------------------------------------- text
def run_text(run):
    """The text report of one run."""
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
    return "\n".join(head) + "\n" + summary(
        run.evals, run.rec, wall, None if link == "none" else link, batch=batch if isinstance(batch, int) else None,
        segments=run.segments, version=run.format_version if isinstance(run.format_version, int) else 1)


def comparison_text(runs):
    """The table comparing several runs (time split: mean over each run's ranks), with the
    settings in which they differ (besides the method and the ranks, which have columns)."""
    differ = differing_settings(runs)
    keys = [k for k in differ if k != "ranks"]
    rows, skewed = [], []
    for r in runs:
        e = r.evals[-1] if r.evals else None
        ms = {k: v.mean() for k, v in r.time_ms().items()}
        spread = r.time_quartiles_ms()
        skewed += [f"run {r.index}'s {k}" for k in PARTS if ms[k] >= 0 and not
                   spread[k][0] - 0.005 <= ms[k] <= spread[k][1] + 0.005]   # as printed, to 2 decimals
        rows.append([str(r.index), r.algo, str(r.world),
                     f"{100 * e['test_acc']:.2f}%" if e else "-", f"{e['test_loss']:.4f}" if e else "-",
                     f"{float(r.attrs.get('wall_seconds', 0)):.2f}",
                     *(f"{ms[k]:.2f} [{spread[k][0]:.2f}-{spread[k][1]:.2f}]" if ms[k] >= 0 else "n/a"
                       for k in PARTS), r.path])  # n/a: see metrics.summary
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
    if skewed:   # a mean outside its own quartiles: not an error, a spread with a long tail
        emulated.append(f"  a mean outside its quartiles ({', '.join(skewed)}): a few iterations far longer than "
                        "the others (a Numba compile, a wait for a busy core) pull the mean past the middle half")
    deciding = [k for k in differ if k in DECIDING or k in TRAJECTORY]
    warning = []
    if deciding:
        warning = ["warning: the runs differ in " + "; ".join(
            f"{SETTING_NAMES.get(k, k.replace('_', ' '))} ({', '.join(_values(runs, k))})" for k in deciding)
            + ": their accuracy and times differ for that too, not only for their methods"]
    return "\n".join([f"comparison of {len(runs)} runs (final evaluation; time: mean ms per iteration [its quartiles "
                      "over the iterations, 25%-75%], mean over the run's ranks; other = wall - compute - idle - "
                      "update; comm = communication in flight):",
                      fmt(header), *map(fmt, rows), *emulated, *warning])


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


#: the settings besides the method's trajectory options (TRAJECTORY) that decide what a
#: comparison of accuracy and time shows: the processes, the link, the run's length, polling
DECIDING = {"ranks", "link", "threads per rank", "epochs", "iterations", "poll", "local_link"}

#: the options that shape a trajectory, the method aside (the comparison is of methods)
TRAJECTORY = {o.name for o in OPTIONS if o.record == TRAJECTORY_RECORD} - {"algo"}


def _values(runs, key):
    """"run 1: 0, run 2: 0.9" of a setting, for the runs that have it."""
    return [f"run {r.index}: {settings(r)[key]}" for r in runs if key in settings(r)]


def _settings_text(run, keys):
    """"lr 0.1, momentum 0.9": the run's values of ``keys`` (those it has)."""
    mine = settings(run)
    return ", ".join(f"{SETTING_NAMES.get(k, k.replace('_', ' '))} {mine[k]}" for k in keys if k in mine)


def _nodes(run):
    """The nodes of a run: DASO's virtual nodes (--ranks-per-node) as such, else the machines."""
    from refsgd.comm.topology import nodes_text  # noqa: PLC0415 mpi4py: topology imports it; the report runs without MPI
    machines = _text(run.attrs.get("nodes", "?"))
    g = run.config.get("ranks_per_node")
    if isinstance(g, int) and g > 0 and run.world % g == 0:
        return f"{nodes_text(run.world // g, g, virtual=True)} ({machines} machine(s))"
    return f"{machines} node(s)"


def _event_text(e):
    """A regime change as "cycling: B 4, W 1"."""
    fields = ", ".join(f"{k} {v}" for k, v in e.items() if k not in ("iteration", "epoch", "what"))
    return str(e["what"]) + (f": {fields}" if fields else "")
