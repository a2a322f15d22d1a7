"""The cost of each codec (t16, q8, bf16, fp16) per MB, against a plain float32 all-reduce.

    .venv/bin/mpiexec -n 2 .venv/bin/python experiments/codec_cost.py [--mb 2.6] [--repeat 20]
    .venv/bin/mpiexec -n 4 .venv/bin/python experiments/codec_cost.py

(set OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 NUMBA_NUM_THREADS=1). An MPI program, not a driver:
every rank holds a float32 vector of --mb megabytes (default: the gradient of mnist_mlp, 648010
values = 2.59 MB) and times, after a warm-up, each operation --repeat times with a barrier before
each; a call's time is that of the slowest rank (it sets the pace of a collective), and the table
shows the median over the calls:

* ``plain``: ``comm.Allreduce(x, out, op=MPI.SUM)`` of the float32 vector;
* for each codec of :mod:`refsgd.comm.codecs`: ``codec.encode`` alone (float32 -> wire buffer),
  ``codec.decode`` alone (wire -> float32), the compressed all-reduce of already-encoded wire
  buffers (``Wire.allreduce_wire``: the user-defined MPI operator decompresses, adds and compresses
  again at every reduction step), and the operator's own time per call
  (per timed all-reduce: the increase of ``Wire.op_seconds`` divided by that of ``Wire.op_calls``;
  ``calls`` is the number of calls per all-reduce and rank, so the operator's share of one
  all-reduce is op x calls).

The timing is :func:`refsgd.bench.codec_costs` (``refsgd bench all`` reports the same at 2
ranks). Rank 0 prints one table: bytes on the wire, ms per operation, the same as ms per MB of float32
input (1 MB = 1e6 bytes), and the ratio of encode + compressed all-reduce + decode to the plain
all-reduce.

What it means. Encode and decode are the overhead that D-Sync (``--algo d-sync --compress ...``,
the paper's D-Sync+T / D-Sync+Q) pays on its critical path, next to the compressed all-reduce whose
operator decompresses/adds/compresses at every step; Pipe-SGD hides the all-reduce, operator
included, in its communication thread, and only encode and decode stay on the computation thread
(Li et al. 2018, section 3.2 and Figure 4). On one machine the all-reduce moves data through
shared memory at memory bandwidth, so compressing the message cannot pay off here: the codec
costs more than the bytes it saves, and the ratio is above 1 (on a busy machine the plain
all-reduce's median varies between runs by several times; a ratio near or below 1 for t16 or bf16
is such noise). With an emulated (or a real, slow) link it can: ``refsgd train --link`` delays
every all-reduce to the Ring-AllReduce model of the *compressed* message size
(refsgd/comm/link.py), so t16 halves and q8 about quarters the modelled transfer time. It pays off
where the modelled time saved exceeds the costs measured here; the link only delays, so a
compressed all-reduce whose real time (operator included) is longer than the model keeps its real
time.
"""

import argparse

from mpi4py import MPI

from refsgd.bench import CODEC_NAMES as CODECS, codec_costs  # shared with refsgd bench all

MLP_VALUES = 648010          # mnist_mlp's parameter count (its gradient: 2.59 MB of float32)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--mb", type=float, default=None,
                   help=f"size of the float32 vector in MB (1e6 bytes; default mnist_mlp's gradient, "
                        f"{MLP_VALUES} values = {4 * MLP_VALUES / 1e6:.2f} MB)")
    p.add_argument("--repeat", type=int, default=20, help="timed calls per operation (default 20)")
    args = p.parse_args()
    comm = MPI.COMM_WORLD
    rank, P = comm.Get_rank(), comm.Get_size()
    n = MLP_VALUES if args.mb is None else max(1, int(round(args.mb * 1e6 / 4)))
    mb = 4 * n / 1e6
    rows = [(r["codec"], r["wire_bytes"], r["encode"], r["allreduce"], r["decode"], r["op"], r["calls"])
            for r in codec_costs(comm, n, args.repeat, CODECS)]
    plain = rows[0][3]

    if rank == 0:
        ms = lambda s: "-" if s is None else f"{1e3 * s:.3f}"             # noqa: E731
        per = lambda s: "-" if s is None else f"{1e3 * s / mb:.3f}"       # noqa: E731
        print(f"codec cost on {P} ranks ({MPI.Get_processor_name()}, one machine, shared memory, NO link): "
              f"float32 vector of {n} values = {mb:.2f} MB per rank, median over {args.repeat} calls "
              f"of the slowest rank's time")
        print(f"MPI: {MPI.Get_library_version().splitlines()[0].strip()}")
        head = (f"{'codec':<10} {'wire bytes':>11} | {'encode':>8} {'allreduce':>9} {'decode':>8} "
                f"{'op/call':>8} {'calls':>5} | {'encode':>7} {'allred':>7} {'decode':>7} {'op/ared':>7} "
                f"| {'(enc+ared+dec)/plain':>20}")
        print(" " * 23 + "|" + " ms per operation".ljust(50) + "|" + " ms per MB of float32 input".ljust(33) + "|")
        print(head)
        print("-" * len(head))
        for name, nbytes, enc, ared, dec, op, calls in rows:
            if enc is None:
                print(f"{name:<10} {nbytes:>11,} | {'-':>8} {ms(ared):>9} {'-':>8} {'-':>8} {'-':>5} | "
                      f"{'-':>7} {per(ared):>7} {'-':>7} {'-':>7} | {1.0:>20.2f}")
                continue
            ratio = (enc + ared + dec) / plain
            print(f"{name:<10} {nbytes:>11,} | {ms(enc):>8} {ms(ared):>9} {ms(dec):>8} {ms(op):>8} {calls:>5.1f} | "
                  f"{per(enc):>7} {per(ared):>7} {per(dec):>7} {per(op * calls):>7} | {ratio:>20.2f}")
        print("op/call: the reduction operator (decompress both, add, compress) per call; calls: per all-reduce "
              "and rank; op/ared = op/call x calls, per MB.")
        print("allreduce of a codec = the compressed all-reduce of already-encoded buffers (operator included). "
              "On one machine (shared memory) compression cannot pay off; with --link the delay follows the "
              "compressed size.")


if __name__ == "__main__":
    main()
