"""The metrics file of a run (``refsgd train --out run.h5``) and the end-of-run summary.

Schema (HDF5, written by rank 0, atomically)::

    /iterations/compute  float64 (world, T)  seconds in run.grad per iteration and rank (a method
                                             with gradient threads, PP-ASGD: the seconds its
                                             update thread waited for their gradients)
    /iterations/idle     float64 (world, T)  seconds blocked on communication (and starting a
                                             non-blocking collective)
    /iterations/comm     float64 (world, T)  time with communication in flight within the
                                             iteration (union of the collectives' start ->
                                             observed completion, cut to the iteration: a request
                                             spanning a boundary counts in both iterations, the
                                             evaluation or checkpoint between them in neither)
    /iterations/wall     float64 (world, T)  the iteration's wall time, the bookkeeping at its end
                                             included (not evaluation, checkpoints or compiling)
    /iterations/loss     float64 (world, T)  mean training loss of the iteration's micro-batches
    /iterations/codec    float64 (world, T)  seconds compressing / decompressing on the computation
                                             path (--compress; 0 otherwise)
    /iterations/update   float64 (world, T)  seconds in the method's update of its state (the
                                             optimizer step) and its listing's scalings (e.g.
                                             LAGA's 1/N); part of wall - compute - idle - codec
    /iterations/compile  float64 (world, T)  seconds Numba spent compiling kernels since the
                                             previous record, any thread (a first run; 0 when
                                             loaded from its cache), and this rank's wait in a
                                             collective for a rank that compiled longer (at most
                                             the difference); none of it is in the other times
                                             (version 3; within them in versions 1-2)
    /iterations/evaluate float64 (world, T)  seconds evaluating after the iteration (0: none)
    /iterations/checkpoint float64 (world, T)  seconds writing a checkpoint after it (0: none;
                                             a checkpoint's own record of it says 0)
    /iterations/gradients float64 (world, T)  micro-batch gradients the iteration consumed, summed
                                             over the workers (tau x workers; PP-ASGD and ASGD:
                                             however many had arrived); an epoch is
                                             iterations-per-epoch x tau x workers of them
    /iterations/thread_compute float64 (world, T)  a method with gradient threads (PP-ASGD, ASGD,
                                             SSGD-NAG with G > 1): their seconds of gradient computation since the
                                             previous record, summed over the threads
    /iterations/global_bytes float64 (world, T)  bytes the rank contributed to collectives and
                                             Sends between nodes (a flat method's traffic counts
                                             as between nodes; refsgd.comm.link, "Traffic")
    /iterations/local_bytes  float64 (world, T)  the same within a node (DASO's local syncs)
    /iterations/<name>   float64 (world, T)  a method's own per-iteration values (Run.record), e.g.
                                             PP-ASGD's staleness and S
    /evals/<field>       float64 (E,)        iteration, epoch, train_loss, test_loss, test_acc, seconds
    /model               (num_params,)       the final model (the one evaluated), in the run's dtype
    /lr                  float64 (T,)        the learning rate of every iteration
    /timeline/...        (S,) each           --timeline: the spans of a window of iterations, every rank
                                             and thread (start, end, rank, thread, kind, label,
                                             iteration, bytes; layout in refsgd/timeline.py)
    attrs: format = "refsgd-metrics", format_version = 4 (files without them are version 1),
           model, model_spec (JSON), layout (JSON [[tensor, offset, shape], ...]), dataset,
           dataset_sha256 (as in a trace: refsgd.trace.dataset_sha256, in the run's dtype),
           threads_per_rank (BLAS / Numba threads of each rank; -1 unknown),
           events (JSON list: the method's regime changes, e.g. DASO's phases, each with
           iteration, epoch, what and its fields), config (JSON), world_size, nodes (the number of
           distinct MPI_Get_processor_name), node_names (JSON list of those names, in the order of
           each node's lowest rank), mpi_library, mpi_thread_level, link (text or
           "none"), link_emulated (bool), refsgd_version, wall_seconds (the run's wall time, over
           all its segments), segments (JSON list, one per process that made the run: the first
           and a --resume's: {"iterations": [first, end], "wall_seconds": s}), load_average_before
           and load_average_after (JSON [1, 5, 15-minute load averages] of the machine of rank 0
           before and after this process's part of the run, or null: refsgd.busy); and, only when
           SIGINT or SIGTERM stopped the run, interrupted (the signal's name, "SIGINT") and
           iterations_planned (the run's end, when it was set in iterations: the file holds the T
           iterations done before it)

Version 4 (this one) adds the /timeline group (with --timeline); otherwise as version 3.
Version 3 adds /iterations/evaluate, checkpoint, gradients, thread_compute and the
segments attribute; wall_seconds covers every segment (in versions 1-2 the last process's
only); compile is outside the other times, and so is a threaded method's gradient computation
(in versions 1-2 compute summed the threads' seconds, and other, wall - compute - idle - update,
could be negative). Versions 1 to 3 are read as they are.
"""

import json

import numpy as np
from mpi4py import MPI

from refsgd import __version__, mpilib
from refsgd.files import h5_written, open_h5, read_array
from refsgd.run import FIELDS

FORMAT = "refsgd-metrics"
FORMAT_VERSION = 4

THREAD_LEVELS = {MPI.THREAD_SINGLE: "single", MPI.THREAD_FUNNELED: "funneled",
                 MPI.THREAD_SERIALIZED: "serialized", MPI.THREAD_MULTIPLE: "multiple"}


def gather(run):
    """Collective: per-iteration records of every rank, on rank 0 (None elsewhere)."""
    fields = list(FIELDS) + sorted(set(run.records) - set(FIELDS))  # and the method's own (run.record)
    local = np.array([run.records[f] for f in fields], dtype=np.float64)
    allrec = run.comm.gather(local, root=0)
    names = run.comm.allgather(mpilib.processor_name())
    if run.rank != 0:
        return None
    arr = np.stack(allrec)  # (world, fields, T)
    return {f: arr[:, i, :] for i, f in enumerate(fields)}, list(dict.fromkeys(names))


def write(path, run, rec, nodes, config, link, model=None, threads=None, load=(None, None), timeline=None):
    """Write the metrics file (rank 0), to a temporary file renamed into place. ``nodes``: the
    processor names of the nodes (gather's), in the order of their lowest rank; ``load``: the
    load averages before and after the run (refsgd.busy.load_average); ``timeline``: the
    gathered spans of --timeline (refsgd.timeline.gather), or None."""
    from refsgd.trace import dataset_sha256
    with h5_written(path, what="the metrics") as f:
        if timeline is not None:
            from refsgd import timeline as tl
            tl.write(f, timeline)
        f.attrs["format"] = FORMAT
        f.attrs["format_version"] = FORMAT_VERSION
        it = f.create_group("iterations")
        for k, v in rec.items():
            if k != "lr":  # the same on every rank: /lr
                it.create_dataset(k, data=v)
        ev = f.create_group("evals")
        for k in ("iteration", "epoch", "train_loss", "test_loss", "test_acc", "seconds"):
            ev.create_dataset(k, data=np.array([e[k] for e in run.evals], dtype=np.float64))
        if model is not None:
            f.create_dataset("model", data=model)
        f.create_dataset("lr", data=rec["lr"][0])
        net, data = run.net, run.data
        f.attrs["model"] = net.name
        f.attrs["model_spec"] = json.dumps(net.spec, sort_keys=True)
        f.attrs["layout"] = json.dumps([[n, o, list(s)] for n, o, s in net.layout])
        f.attrs["dataset"] = data.name
        f.attrs["dataset_sha256"] = dataset_sha256(data, net.dtype)
        f.attrs["threads_per_rank"] = -1 if threads is None else int(threads)
        f.attrs["config"] = json.dumps(config, sort_keys=True)
        f.attrs["events"] = json.dumps(run.events)
        f.attrs["world_size"] = run.world
        f.attrs["nodes"] = len(nodes)
        f.attrs["node_names"] = json.dumps(nodes)
        f.attrs["mpi_library"] = mpilib.library_version()
        f.attrs["mpi_thread_level"] = THREAD_LEVELS.get(MPI.Query_thread(), "unknown")
        f.attrs["link"] = str(link) if link else "none"
        f.attrs["link_emulated"] = bool(link)
        f.attrs["refsgd_version"] = __version__
        f.attrs["wall_seconds"] = total_wall(run.segments)
        f.attrs["segments"] = json.dumps(run.segments)
        for when, value in zip(("before", "after"), load):
            f.attrs[f"load_average_{when}"] = json.dumps(value)  # [1, 5, 15 min], or null
        if getattr(run, "interrupted", None):  # a signal stopped the run: the file holds the iterations done
            f.attrs["interrupted"] = run.interrupted
            if run.total is not None:
                f.attrs["iterations_planned"] = run.total


def total_wall(segments):
    """The wall time of a run over all its segments (the first process and each --resume)."""
    return float(sum(s["wall_seconds"] for s in segments))


def summary(evals, rec, wall, link, batch=None, segments=None, version=FORMAT_VERSION):
    """The end-of-run text: final losses, accuracy, wall time, per-rank time split.

    evals: list of evaluation dicts; rec: {field: (world, T) array}; wall: the run's wall time
    over all its segments; link: text or None; batch: samples per micro-batch, for the
    throughput (with /iterations/gradients; none without them, as in files of version 1-2);
    segments: the processes that made the run (listed when there are several); version: the
    metrics format version of rec (1-2: the compile time is inside the other times, and a
    threaded method's compute summed its threads).
    """
    lines = []
    world, n = rec["wall"].shape
    grads = rec["gradients"][0] if "gradients" in rec else None
    if evals:
        e = evals[-1]
        lines.append(f"final: train loss {e['train_loss']:.4f}, test loss {e['test_loss']:.4f}, "
                     f"test accuracy {100 * e['test_acc']:.2f}% after {int(e['iteration'])} iterations "
                     f"({e['epoch']:.2f} epochs)")
    if grads is not None and n and grads.min() != grads.max():   # PP-ASGD's threaded mode
        lines.append(f"{n} iterations (updates) consumed {grads.sum():,.0f} micro-batch gradients of {batch or '?'} "
                     f"samples over all workers, {grads.sum() / n:,.1f} per update (min {grads.min():,.0f}, "
                     f"max {grads.max():,.0f})")
    lines.append(f"wall time {wall:.2f} s on {world} rank(s)" + (f"; {link} (EMULATED)" if link else ""))
    if segments and len(segments) > 1:
        lines.append(f"  in {len(segments)} segments (the first process and each --resume): " + ", ".join(
            f"iterations {a}-{b} in {s['wall_seconds']:.2f} s" for s in segments for a, b in [s["iterations"]]))
    compiled = rec["compile"].sum(axis=1) if "compile" in rec else np.zeros(world)
    shown = compiled.max() >= 0.01 * max(wall, 1e-9) and compiled.max() >= 0.05
    outside = version >= 3
    busy = wall - (compiled.max() if outside else 0.0)
    if grads is not None and batch and n and busy > 0:
        notes = [what for what, yes in (("over all segments", segments and len(segments) > 1),
                                        ("Numba's compiling left out", outside and shown)) if yes]
        lines.append(f"throughput {grads.sum() * batch / busy:,.0f} samples/s, {n / busy:,.1f} iterations/s"
                     + (f" ({'; '.join(notes)})" if notes else ""))
    if "global_bytes" in rec and n:
        gb, lb = rec["global_bytes"].sum(), rec["local_bytes"].sum()
        if lb:   # a hierarchical method (DASO): its two tiers
            lines.append(f"traffic (payload sent, all ranks): {gb / n / 1e3:.1f} kB per iteration "
                         f"between nodes, {lb / n / 1e3:.1f} kB within nodes")
        elif gb:
            lines.append(f"traffic (payload sent, all ranks): {gb / n / 1e3:.1f} kB per iteration")
    if shown:
        r = int(np.argmax(compiled))
        where = ("outside every time below" if outside else
                 f"inside the times below (of {rec['wall'][r].sum():.2f} s)")
        lines.append(f"Numba compiling its kernels: {compiled[r]:.2f} s on rank {r}, {where}: a first run compiles "
                     f"them for this machine and caches them, later runs load them")
    side = {k: rec[k][0].sum() for k in ("evaluate", "checkpoint") if k in rec and rec[k][0].sum() > 0}
    if side:
        lines.append("outside the iterations' times below (rank 0): " + ", ".join(
            f"{'evaluation' if k == 'evaluate' else 'checkpoints'} {v:.2f} s" for k, v in side.items()))
    threaded = "thread_compute" in rec
    if threaded:
        tc = np.nansum(rec["thread_compute"], axis=1)
        lines.append(f"gradient threads: {tc.mean():.2f} s of gradient computation per rank (mean, summed over its "
                     f"threads), {1e3 * tc.mean() / max(n, 1):.2f} ms per iteration; the split below is the update "
                     "thread's (compute: its wait for their gradients)")
    lines.append(f"time per rank over {n} iterations (total s, mean ms per iteration):")
    lines.append("  rank   compute          idle             update           other            comm in flight")
    unknown = False
    for r in range(world):
        c, i, w, m = (rec[k][r].sum() for k in ("compute", "idle", "wall", "comm"))
        u = rec["update"][r].sum() if "update" in rec else 0.0   # files that predate it: none

        def cell(v):
            nonlocal unknown
            if v < 0:   # a file of version 1-2 whose compute summed a threaded method's threads
                unknown = True
                return f"{'n/a':>15}"
            return f"{v:7.2f}s {1e3 * v / max(n, 1):6.2f}"
        lines.append(f"  {r:>4}   {cell(c)}  {cell(i)}  {cell(u)}  {cell(w - c - i - u)}  {cell(m)}")
    if unknown:
        lines.append("  n/a: wall - compute - idle - update is negative in this file (metrics format version "
                     f"{version}): its compute sums the gradient threads' seconds")
    return "\n".join(lines)


#: what `refsgd report` needs of a metrics file
_RECORDS = ("compute", "idle", "wall", "loss")
_EVAL_COLUMNS = ("iteration", "epoch", "train_loss", "test_loss", "test_acc")


def read(path):
    """(evals, rec, attrs) of a metrics file; RefsgdError naming what is wrong if it is not one."""
    from refsgd import RefsgdError
    with open_h5(path, "a metrics file from refsgd train --out") as f:
        if "iterations" not in f or "evals" not in f:
            raise RefsgdError(f"{path}: not a refsgd metrics file (made by `refsgd train --out`)")
        missing = [f"/iterations/{k}" for k in _RECORDS if k not in f["iterations"]]
        missing += [f"/evals/{k}" for k in _EVAL_COLUMNS if k not in f["evals"]]
        if missing:
            raise RefsgdError(f"{path}: malformed metrics file, missing {', '.join(missing)}")
        rec = {k: read_array(f, f"iterations/{k}") for k in f["iterations"]}
        cols = {k: read_array(f, f"evals/{k}") for k in f["evals"]}
        attrs = dict(f.attrs)
    shapes = {k: v.shape for k, v in rec.items()}
    if any(len(sh) != 2 for sh in shapes.values()) or len(set(shapes.values())) != 1:
        raise RefsgdError(f"{path}: malformed metrics file: the /iterations arrays must all be (ranks, iterations), "
                          f"got {', '.join(f'{k} {sh}' for k, sh in shapes.items())}")
    lengths = {k: np.shape(v) for k, v in cols.items()}
    if any(len(sh) != 1 for sh in lengths.values()) or len(set(lengths.values())) != 1:
        raise RefsgdError(f"{path}: malformed metrics file: the /evals columns must be 1-d of one length, got "
                          f"{', '.join(f'{k} {sh}' for k, sh in lengths.items())}")
    try:
        config = json.loads(attrs.get("config", "{}"))
    except (TypeError, ValueError):
        config = None
    if not isinstance(config, dict):
        raise RefsgdError(f"{path}: malformed metrics file: the config attribute is not a JSON object")
    n = len(cols["iteration"])
    evals = [{k: float(cols[k][j]) for k in cols} for j in range(n)]
    return evals, rec, attrs


def report(path, plot=None):
    """Moved to :func:`refsgd.report.report` (``refsgd report``); kept for callers of
    ``metrics.report``. As before, ``plot`` replaces an existing image."""
    from refsgd.report import report as _report
    return _report(path, plot=plot, force=True)
