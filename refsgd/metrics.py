"""The metrics file of a run (``refsgd train --out run.h5``) and the end-of-run summary.

Schema (HDF5, written by rank 0, atomically)::

    /iterations/compute  float64 (world, T)  seconds in run.grad per iteration and rank
    /iterations/idle     float64 (world, T)  seconds blocked on communication
    /iterations/comm     float64 (world, T)  lifetime of the collectives (start -> completion seen)
    /iterations/wall     float64 (world, T)  the iteration's wall time
    /iterations/loss     float64 (world, T)  mean training loss of the iteration's micro-batches
    /evals/<field>       float64 (E,)        iteration, epoch, train_loss, test_loss, test_acc, seconds
    attrs: config (JSON), world_size, nodes, mpi_library, mpi_thread_level, link (text or
           "none"), link_emulated (bool), refsgd_version, wall_seconds
"""

import json
import os
import tempfile

import h5py
import numpy as np
from mpi4py import MPI

from refsgd import __version__

FIELDS = ("compute", "idle", "comm", "wall", "loss")
THREAD_LEVELS = {MPI.THREAD_SINGLE: "single", MPI.THREAD_FUNNELED: "funneled",
                 MPI.THREAD_SERIALIZED: "serialized", MPI.THREAD_MULTIPLE: "multiple"}


def gather(run):
    """Collective: per-iteration records of every rank, on rank 0 (None elsewhere)."""
    local = np.array([run.records[f] for f in FIELDS], dtype=np.float64)
    allrec = run.comm.gather(local, root=0)
    nodes = len(set(run.comm.allgather(MPI.Get_processor_name())))
    if run.rank != 0:
        return None
    arr = np.stack(allrec)  # (world, fields, T)
    return {f: arr[:, i, :] for i, f in enumerate(FIELDS)}, nodes


def write(path, run, rec, nodes, config, link):
    """Write the metrics file (rank 0), to a temporary file renamed into place."""
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".h5", dir=d)
    os.close(fd)
    try:
        with h5py.File(tmp, "w") as f:
            it = f.create_group("iterations")
            for k, v in rec.items():
                it.create_dataset(k, data=v)
            ev = f.create_group("evals")
            for k in ("iteration", "epoch", "train_loss", "test_loss", "test_acc", "seconds"):
                ev.create_dataset(k, data=np.array([e[k] for e in run.evals], dtype=np.float64))
            f.attrs["config"] = json.dumps(config, sort_keys=True)
            f.attrs["world_size"] = run.world
            f.attrs["nodes"] = nodes
            f.attrs["mpi_library"] = MPI.Get_library_version().strip()
            f.attrs["mpi_thread_level"] = THREAD_LEVELS.get(MPI.Query_thread(), "unknown")
            f.attrs["link"] = str(link) if link else "none"
            f.attrs["link_emulated"] = bool(link)
            f.attrs["refsgd_version"] = __version__
            f.attrs["wall_seconds"] = run.wall
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def summary(run, rec, link):
    """The end-of-run text: final losses, accuracy, wall time, per-rank time split."""
    lines = []
    if run.evals:
        e = run.evals[-1]
        lines.append(f"final: train loss {e['train_loss']:.4f}, test loss {e['test_loss']:.4f}, "
                     f"test accuracy {100 * e['test_acc']:.2f}% after {e['iteration']} iterations "
                     f"({e['epoch']:.2f} epochs)")
    lines.append(f"wall time {run.wall:.2f} s on {run.world} rank(s)"
                 + (f"; {link} (EMULATED)" if link else ""))
    n = rec["wall"].shape[1]
    lines.append("time per rank (sum over iterations; per-iteration mean in ms):")
    lines.append("  rank   compute          idle             other            wall")
    for r in range(run.world):
        c, i, w = rec["compute"][r].sum(), rec["idle"][r].sum(), rec["wall"][r].sum()
        o = w - c - i

        def cell(v):
            return f"{v:7.2f}s {1e3 * v / max(n, 1):6.2f}"
        lines.append(f"  {r:>4}   {cell(c)}  {cell(i)}  {cell(o)}  {w:7.2f}s")
    return "\n".join(lines)
