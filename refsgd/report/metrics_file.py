"""A metrics file as read (its schema is in :mod:`refsgd.metrics`, which writes it under MPI):
the format's name and version, :func:`read`, and the end-of-run summary text that ``refsgd
train`` prints and ``refsgd report`` shows. It lives in the report, below :mod:`refsgd.metrics`,
so that the report reads metrics files without MPI and the metrics module re-exports it (for
its callers) without an import cycle."""

import json

import numpy as np

from refsgd.errors import RefsgdError
from refsgd.files import open_h5, read_array

FORMAT = "refsgd-metrics"
FORMAT_VERSION = 4


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
    # PP-ASGD's / ASGD's threaded mode (S_bar recorded): an update takes the gradients that have arrived,
    # at most G x N, so every update may take the same number
    if grads is not None and n and (grads.min() != grads.max() or "S_bar" in rec):
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
    if outside and n:   # one wall time: what it holds, so that the compile is seen apart from it
        parts = [("iterations", rec["wall"][0].sum())] + [
            (name, rec[k][0].sum()) for k, name in (("evaluate", "evaluations"), ("checkpoint", "checkpoints"))
            if k in rec and rec[k][0].sum() > 0]
        rest = wall - sum(v for _, v in parts)
        lines.append("  of which (rank 0) " + ", ".join(f"{name} {v:.2f} s" for name, v in parts)
                     + f", and {max(rest, 0.0):.2f} s besides: "
                     + ("Numba compiling its kernels in the loop (the line below) and " if shown else "")
                     + "the loop's bookkeeping")
    # the training's throughput: over rank 0's iterations' wall times, as the status line counts
    # it (evaluations, checkpoints and Numba's compiling are outside them; inside in version 1-2)
    busy = rec["wall"][0].sum() - (0.0 if outside else compiled[0])
    if grads is not None and batch and n and busy > 0:
        over = "over all segments; " if segments and len(segments) > 1 else ""
        lines.append(f"throughput {grads.sum() * batch / busy:,.0f} samples/s, {n / busy:,.1f} iterations/s "
                     f"({over}the iterations' time: evaluations, checkpoints and Numba's compiling left out)")
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
        lines.append(f"Numba compiling or loading its kernels: {compiled[r]:.2f} s on rank {r}, {where}: a first run "
                     "compiles them for this machine and caches them, later runs load them")
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
