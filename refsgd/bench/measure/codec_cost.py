"""The codecs' costs in an MPI world (``bench codec``, ``experiments/codec_cost.py``): the time
of a collective, of compressing and decompressing, and the ring's all-reduce against the MPI
operator's."""

import time

import numpy as np

from refsgd.comm import codecs

# ------------------------------------------------------------------------------------------ codecs
#: the codecs of refsgd.comm.codecs, in the order of the tables
CODEC_NAMES = ("t16", "q8", "q8v", "bf16", "fp16")


def timed_collective(comm, fn, repeat, warmup=3, wire=None):
    """Median over ``repeat`` calls of fn() (barrier before each, after ``warmup`` calls) of the
    slowest rank's seconds for that call; with ``wire``, also the median over the calls of the
    slowest rank's operator seconds per operator call, and the operator calls per fn()."""
    from mpi4py import MPI  # noqa: PLC0415 mpi4py: importing it starts MPI; bench scale and step use this module without
    for _ in range(warmup):
        comm.Barrier()
        fn()
    times, ops, calls = np.empty(repeat), np.zeros(repeat), np.zeros(repeat)
    for i in range(repeat):
        if wire is not None:
            s0, c0 = wire.op_seconds, wire.op_calls
        comm.Barrier()
        t0 = time.perf_counter()
        fn()
        times[i] = time.perf_counter() - t0
        if wire is not None:
            calls[i] = wire.op_calls - c0
            ops[i] = (wire.op_seconds - s0) / max(calls[i], 1)
    # the slowest rank sets the pace of a collective (and of the step that waits for all)
    both = np.concatenate([times, ops, calls])
    comm.Allreduce(MPI.IN_PLACE, both, op=MPI.MAX)
    times, ops, calls = both[:repeat], both[repeat:2 * repeat], both[2 * repeat:]
    return float(np.median(times)), float(np.median(ops)), float(np.mean(calls))


def codec_costs(comm, n, repeat=20, names=CODEC_NAMES):
    """The plain float32 all-reduce of n values and, per codec, encode, decode, the compressed
    all-reduce of encoded buffers (the ring, ``Wire.allreduce_wire``) and its reduction step per
    call, and the same reduction as an MPI user-defined operator (``Wire.allreduce_op``, the
    library's order) with its operator per call, in this MPI world (collective). Returns a list
    of dicts (seconds; the plain all-reduce first, with None for what it lacks)."""
    from mpi4py import MPI  # noqa: PLC0415 mpi4py: importing it starts MPI; bench scale and step use this module without

    x = np.random.default_rng(comm.Get_rank()).standard_normal(n).astype(np.float32) * np.float32(1e-2)
    out = np.empty_like(x)
    plain = timed_collective(comm, lambda: comm.Allreduce(x, out, op=MPI.SUM), repeat)[0]
    # the uncompressed ring of --allreduce ring (codecs.plain), the same float32 values
    ring = codecs.plain(x.dtype).open()
    ring_t, ring_step, ring_calls = timed_collective(comm, lambda: ring.allreduce_wire(comm, x, out), repeat, wire=ring)
    rows = [dict(codec="plain f32", wire_bytes=4 * n, encode=None, allreduce=plain, decode=None, op=None,
                 calls=None, ring=ring_t, ring_op=ring_step, ring_calls=ring_calls)]
    for name in names:
        codec = codecs.get(name)
        wire = codec.open()
        try:
            send, recv = wire.buffers(n)
            codec.encode(x, send)
            enc = timed_collective(comm, lambda: codec.encode(x, send), repeat)[0]  # noqa: B023 called within this iteration
            dec = timed_collective(comm, lambda: codec.decode(send, out), repeat)[0]  # noqa: B023 called within this iteration
            # the warm-up compiles / loads the operator's kernel
            ared, op, calls = timed_collective(comm, lambda: wire.allreduce_wire(comm, send, recv), repeat,  # noqa: B023 called within this iteration
                                               wire=wire)
            mpi_op, mpi_step, mpi_calls = timed_collective(comm, lambda: wire.allreduce_op(comm, send, recv),  # noqa: B023 called within this iteration
                                                           repeat, wire=wire)
            rows.append(dict(codec=name, wire_bytes=int(send.nbytes), encode=enc, allreduce=ared, decode=dec,
                             op=op, calls=calls, allreduce_op=mpi_op, op_op=mpi_step, calls_op=mpi_calls))
        finally:
            wire.close()
    return rows


def format_ring(rows, world, n):
    """``bench codec``'s table: per codec, the ring's all-reduce against the MPI operator's; first
    the uncompressed ring (``--allreduce ring``) against ``MPI_Allreduce`` with ``MPI_SUM``
    (``--allreduce mpi``)."""
    lines = [f"all-reduce of {n:,} float32 values on {world} rank(s): the ring (Sendrecv, refsgd's "
             "order, the same bits under any MPI library) against MPI's (the library's order: MPI_Allreduce "
             "uncompressed, an MPI user-defined operator per codec); median of the slowest rank, shared memory "
             "on one machine",
             f"  {'codec':<6} {'wire bytes':>11} {'ring ms':>9} {'steps':>5} {'step ms':>8} {'ring-steps ms':>13} "
             f"{'MPI op ms':>10} {'calls':>5} {'op/call ms':>10} {'ring/op':>7}"]
    for c in rows:
        if c["encode"] is None:  # uncompressed: --allreduce ring against --allreduce mpi (MPI_Allreduce, MPI_SUM)
            rest = c["ring"] - c["ring_calls"] * c["ring_op"]
            lines.append(f"  {'plain':<6} {c['wire_bytes']:>11,} {1e3 * c['ring']:9.3f} {c['ring_calls']:5.0f} "
                         f"{1e3 * c['ring_op']:8.3f} {1e3 * rest:13.3f} {1e3 * c['allreduce']:10.3f} {'-':>5} "
                         f"{'-':>10} {c['ring'] / c['allreduce']:7.2f}   (float32; MPI op: MPI_Allreduce with MPI_SUM)")
            continue
        rest = c["allreduce"] - c["calls"] * c["op"]
        lines.append(f"  {c['codec']:<6} {c['wire_bytes']:>11,} {1e3 * c['allreduce']:9.3f} {c['calls']:5.0f} "
                     f"{1e3 * c['op']:8.3f} {1e3 * rest:13.3f} {1e3 * c['allreduce_op']:10.3f} "
                     f"{c['calls_op']:5.1f} {1e3 * c['op_op']:10.3f} {c['allreduce'] / c['allreduce_op']:7.2f}")
    lines.append("'plain': the uncompressed ring of --allreduce ring against MPI_Allreduce (--allreduce mpi). "
                 "'steps' are the ring's reduction steps per call (p - 1, each on 1/p of the buffer), 'ring-steps' "
                 "the ring's time besides them (its 2 (p - 1) Sendrecv calls and Python); 'calls' are the MPI "
                 "operator's calls per all-reduce.")
    return "\n".join(lines)


def format_codecs(rows, world):
    mb = rows[0]["wire_bytes"] / 1e6
    plain = rows[0]["allreduce"]
    lines = [f"codecs on {world} rank(s), {mb:.2f} MB of float32, median of the slowest rank "
             "(no link: shared memory on one machine)",
             f"  {'codec':<10} {'wire bytes':>11} {'encode':>8} {'decode':>8} {'allreduce':>9} {'op/call':>8} "
             f"{'enc GB/s':>8} {'dec GB/s':>8} {'(enc+ar+dec)/plain':>18}"]
    for c in rows:
        if c["encode"] is None:
            lines.append(f"  {c['codec']:<10} {c['wire_bytes']:>11,} {'-':>8} {'-':>8} {1e3 * c['allreduce']:9.3f} "
                         f"{'-':>8} {'-':>8} {'-':>8} {1.0:>18.2f}")
            continue
        lines.append(f"  {c['codec']:<10} {c['wire_bytes']:>11,} {1e3 * c['encode']:8.3f} {1e3 * c['decode']:8.3f} "
                     f"{1e3 * c['allreduce']:9.3f} {1e3 * c['op']:8.3f} {mb / 1e3 / c['encode']:8.2f} "
                     f"{mb / 1e3 / c['decode']:8.2f} {(c['encode'] + c['allreduce'] + c['decode']) / plain:18.2f}")
    return "\n".join(lines)
