"""The metrics file of a run (``refsgd train --out run.h5``) and the end-of-run summary.

Schema (HDF5, written by rank 0, atomically)::

    /iterations/compute  float64 (world, T)  seconds in run.grad per iteration and rank
    /iterations/idle     float64 (world, T)  seconds blocked on communication (and starting a
                                             non-blocking collective)
    /iterations/comm     float64 (world, T)  time with communication in flight (union of the
                                             collectives' start -> observed completion)
    /iterations/wall     float64 (world, T)  the iteration's wall time, the bookkeeping at its end
                                             included (not evaluation or checkpoints)
    /iterations/loss     float64 (world, T)  mean training loss of the iteration's micro-batches
    /iterations/codec    float64 (world, T)  seconds compressing / decompressing on the computation
                                             path (--compress; 0 otherwise)
    /iterations/update   float64 (world, T)  seconds in the method's update of its state (the
                                             optimizer step) and its listing's scalings (e.g.
                                             LAGA's 1/N); part of wall - compute - idle - codec
    /iterations/compile  float64 (world, T)  seconds Numba spent compiling kernels within the
                                             times above (a first run; 0 when loaded from its cache)
    /iterations/global_bytes float64 (world, T)  bytes the rank contributed to collectives and
                                             Sends between nodes (a flat method's traffic counts
                                             as between nodes; refsgd.comm.link, "Traffic")
    /iterations/local_bytes  float64 (world, T)  the same within a node (DASO's local syncs)
    /iterations/<name>   float64 (world, T)  a method's own per-iteration values (Run.record), e.g.
                                             PP-ASGD's staleness and S
    /evals/<field>       float64 (E,)        iteration, epoch, train_loss, test_loss, test_acc, seconds
    /model               (num_params,)       the final model (the one evaluated), in the run's dtype
    /lr                  float64 (T,)        the learning rate of every iteration
    attrs: format = "refsgd-metrics", format_version = 2 (files without them are version 1),
           model, model_spec (JSON), layout (JSON [[tensor, offset, shape], ...]), dataset,
           dataset_sha256 (as in a trace: refsgd.trace.dataset_sha256, in the run's dtype),
           threads_per_rank (BLAS / Numba threads of each rank; -1 unknown),
           events (JSON list: the method's regime changes, e.g. DASO's phases, each with
           iteration, epoch, what and its fields), config (JSON), world_size, nodes, mpi_library, mpi_thread_level, link (text or
           "none"), link_emulated (bool), refsgd_version, wall_seconds
"""

import json

import numpy as np
from mpi4py import MPI

from refsgd import __version__, mpilib
from refsgd.files import h5_written, open_h5
from refsgd.run import FIELDS

FORMAT = "refsgd-metrics"
FORMAT_VERSION = 2

THREAD_LEVELS = {MPI.THREAD_SINGLE: "single", MPI.THREAD_FUNNELED: "funneled",
                 MPI.THREAD_SERIALIZED: "serialized", MPI.THREAD_MULTIPLE: "multiple"}


def gather(run):
    """Collective: per-iteration records of every rank, on rank 0 (None elsewhere)."""
    fields = list(FIELDS) + sorted(set(run.records) - set(FIELDS))  # and the method's own (run.record)
    local = np.array([run.records[f] for f in fields], dtype=np.float64)
    allrec = run.comm.gather(local, root=0)
    nodes = len(set(run.comm.allgather(mpilib.processor_name())))
    if run.rank != 0:
        return None
    arr = np.stack(allrec)  # (world, fields, T)
    return {f: arr[:, i, :] for i, f in enumerate(fields)}, nodes


def write(path, run, rec, nodes, config, link, model=None, threads=None):
    """Write the metrics file (rank 0), to a temporary file renamed into place."""
    from refsgd.trace import dataset_sha256
    with h5_written(path, what="the metrics") as f:
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
        f.attrs["nodes"] = nodes
        f.attrs["mpi_library"] = mpilib.library_version()
        f.attrs["mpi_thread_level"] = THREAD_LEVELS.get(MPI.Query_thread(), "unknown")
        f.attrs["link"] = str(link) if link else "none"
        f.attrs["link_emulated"] = bool(link)
        f.attrs["refsgd_version"] = __version__
        f.attrs["wall_seconds"] = run.wall


def summary(evals, rec, wall, link, iterations_run=None, samples_per_iteration=None):
    """The end-of-run text: final losses, accuracy, wall time, per-rank time split.

    evals: list of evaluation dicts; rec: {field: (world, T) array}; link: text or None;
    iterations_run: the iterations of this process (fewer than T after --resume), which the
    throughput counts, with samples_per_iteration (all workers).
    """
    lines = []
    world, n = rec["wall"].shape
    if evals:
        e = evals[-1]
        lines.append(f"final: train loss {e['train_loss']:.4f}, test loss {e['test_loss']:.4f}, "
                     f"test accuracy {100 * e['test_acc']:.2f}% after {int(e['iteration'])} iterations "
                     f"({e['epoch']:.2f} epochs)")
    lines.append(f"wall time {wall:.2f} s on {world} rank(s)" + (f"; {link} (EMULATED)" if link else ""))
    if iterations_run and samples_per_iteration and wall > 0:
        resumed = f" (the {iterations_run} iterations since --resume)" if iterations_run < n else ""
        lines.append(f"throughput {iterations_run * samples_per_iteration / wall:,.0f} samples/s, "
                     f"{iterations_run / wall:,.1f} iterations/s{resumed}")
    if "global_bytes" in rec and n:
        gb, lb = rec["global_bytes"].sum(), rec["local_bytes"].sum()
        if lb:   # a hierarchical method (DASO): its two tiers
            lines.append(f"traffic (payload sent, all ranks): {gb / n / 1e3:.1f} kB per iteration "
                         f"between nodes, {lb / n / 1e3:.1f} kB within nodes")
        elif gb:
            lines.append(f"traffic (payload sent, all ranks): {gb / n / 1e3:.1f} kB per iteration")
    compiled = rec["compile"].sum(axis=1) if "compile" in rec else np.zeros(world)
    if compiled.max() >= 0.01 * max(wall, 1e-9) and compiled.max() >= 0.05:
        r = int(np.argmax(compiled))
        lines.append(f"the times include {compiled[r]:.2f} s of Numba compiling its kernels on rank {r} (of "
                     f"{rec['wall'][r].sum():.2f} s): a first run compiles them for this machine and caches them, "
                     f"later runs load them")
    lines.append(f"time per rank over {n} iterations (total s, mean ms per iteration):")
    lines.append("  rank   compute          idle             update           other            comm in flight")
    for r in range(world):
        c, i, w, m = (rec[k][r].sum() for k in ("compute", "idle", "wall", "comm"))
        u = rec["update"][r].sum() if "update" in rec else 0.0   # files that predate it: none

        def cell(v):
            return f"{v:7.2f}s {1e3 * v / max(n, 1):6.2f}"
        lines.append(f"  {r:>4}   {cell(c)}  {cell(i)}  {cell(u)}  {cell(w - c - i - u)}  {cell(m)}")
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
        rec = {k: f["iterations"][k][...] for k in f["iterations"]}
        cols = {k: f["evals"][k][...] for k in f["evals"]}
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
