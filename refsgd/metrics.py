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
    /iterations/compile  float64 (world, T)  seconds Numba spent compiling kernels (a first
                                             run) or loading them from its cache since the
                                             previous record, any thread (the first record: the
                                             run's set-up and warm-up too), and this rank's wait in a
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
                                             as between nodes; refsgd.comm.linkcomm, "Traffic")
    /iterations/local_bytes  float64 (world, T)  the same within a node (DASO's local syncs)
    /iterations/<name>   float64 (world, T)  a method's own per-iteration values (Records.add), e.g.
                                             PP-ASGD's staleness and S
    /evals/<field>       float64 (E,)        iteration, epoch, train_loss, test_loss, test_acc, seconds
    /model               (num_params,)       the final model (the one evaluated), in the run's dtype
    /lr                  float64 (T,)        the learning rate of every iteration
    /timeline/...        (S,) each           --timeline: the spans of a window of iterations, every rank
                                             and thread (start, end, rank, thread, kind, label,
                                             iteration, bytes; layout in refsgd/timeline/file.py)
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

from refsgd.version import __version__
from refsgd import mpilib
from refsgd.files import h5_written
# the reading side (the format's name and version, read, the summary text) lives with the report,
# which reads metrics files without MPI; it is re-exported here for the writers' callers
from refsgd.report.metrics_file import (FORMAT, FORMAT_VERSION, read, summary,  # noqa: F401
                                        total_wall)
from refsgd.run import FIELDS
from refsgd.trace import dataset_sha256
from refsgd import timeline as tl
from refsgd.report import report as _report

THREAD_LEVELS = {MPI.THREAD_SINGLE: "single", MPI.THREAD_FUNNELED: "funneled",
                 MPI.THREAD_SERIALIZED: "serialized", MPI.THREAD_MULTIPLE: "multiple"}


def gather(run):
    """Collective: per-iteration records of every rank, on rank 0 (None elsewhere)."""
    per = run.records.iterations
    fields = list(FIELDS) + sorted(set(per) - set(FIELDS))  # and the method's own (run.records.add)
    local = np.array([per[f] for f in fields], dtype=np.float64)
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
    with h5_written(path, what="the metrics") as f:
        if timeline is not None:
            tl.write(f, timeline)
        f.attrs["format"] = FORMAT
        f.attrs["format_version"] = FORMAT_VERSION
        it = f.create_group("iterations")
        for k, v in rec.items():
            if k != "lr":  # the same on every rank: /lr
                it.create_dataset(k, data=v)
        ev = f.create_group("evals")
        for k in ("iteration", "epoch", "train_loss", "test_loss", "test_acc", "seconds"):
            ev.create_dataset(k, data=np.array([e[k] for e in run.records.evals], dtype=np.float64))
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
        f.attrs["events"] = json.dumps(run.records.events)
        f.attrs["world_size"] = run.world
        f.attrs["nodes"] = len(nodes)
        f.attrs["node_names"] = json.dumps(nodes)
        f.attrs["mpi_library"] = mpilib.library_version()
        f.attrs["mpi_thread_level"] = THREAD_LEVELS.get(MPI.Query_thread(), "unknown")
        f.attrs["link"] = str(link) if link else "none"
        f.attrs["link_emulated"] = bool(link)
        f.attrs["refsgd_version"] = __version__
        f.attrs["wall_seconds"] = total_wall(run.records.segments)
        f.attrs["segments"] = json.dumps(run.records.segments)
        for when, value in zip(("before", "after"), load):
            f.attrs[f"load_average_{when}"] = json.dumps(value)  # [1, 5, 15 min], or null
        if run.records.interrupted:  # a signal stopped the run: the file holds the iterations done
            f.attrs["interrupted"] = run.records.interrupted
            if run.total is not None:
                f.attrs["iterations_planned"] = run.total


def report(path, plot=None):
    """Moved to :func:`refsgd.report.report` (``refsgd report``); kept for callers of
    ``metrics.report``. As before, ``plot`` replaces an existing image."""
    return _report(path, plot=plot, force=True)
