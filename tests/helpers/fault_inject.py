"""Run `refsgd ARGS` with a fault injected on one rank (tests and experiments/faults.py only).

    mpiexec -n 2 python tests/helpers/fault_inject.py RANK ITERATION KIND train --algo ssgd ...

At the gradient of iteration ITERATION, rank RANK raises (KIND = "user": a RefsgdError, an
input problem found on that rank alone; "bug": a RuntimeError; "exit": SystemExit(3), a rank
leaving on its own; "mpi-peer": the MPI error a surviving rank's call returns when a peer has
died, MPI.Exception of class ERR_OTHER, as MPICH's "Communication error with rank 1"; "mpi-bug":
an MPI error that is a caller's mistake, class ERR_COUNT). Every other rank goes on into its next
collective: the point is that the failing rank ends them all, with one message and the right exit
code. The failing rank first prints the MPICH shared-memory segments it maps ("fault_inject:
maps ..."), which the abort must not leave behind.

KIND = "enospc": the file write number ITERATION (from 0) of rank RANK fails with "No space left
on device", as on a full disk (refsgd builds HDF5 files in memory and writes their bytes with
refsgd.files.write_bytes, so this is where a full disk shows).
"""

import errno

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from refsgd import RefsgdError, cli, launchenv, mpiranks  # noqa: E402
from refsgd.run import Run  # noqa: E402


def main():
    rank, iteration, kind = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    grad = Run.grad

    def faulty(self, *args, **kwargs):
        if self.rank == rank and self.t == iteration:
            print("fault_inject: maps", " ".join(mpiranks.shared_segments()), flush=True)
            if kind == "user":
                raise RefsgdError(f"injected: a file only rank {rank} reads is damaged")
            if kind == "bug":
                raise RuntimeError("injected bug")
            if kind == "exit":
                raise SystemExit(3)
            if kind in ("mpi-peer", "mpi-bug"):
                from mpi4py import MPI
                raise MPI.Exception(MPI.ERR_OTHER if kind == "mpi-peer" else MPI.ERR_COUNT)
            if kind != "enospc":
                raise ValueError(f"unknown fault kind {kind!r}")
        return grad(self, *args, **kwargs)

    Run.grad = faulty
    if kind == "enospc":
        from refsgd import files
        write, count = files.write_bytes, [0]

        def full(path, data):
            me = launchenv.launcher_rank() or 0
            if me == rank:
                count[0] += 1
                if count[0] - 1 >= iteration:
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), path)
            return write(path, data)

        files.write_bytes = full
    sys.argv = ["refsgd"] + sys.argv[4:]
    return cli.main(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
