"""``refsgd check``: check a launch before a job trains (refsgd.launch.report)."""


def add(sub):
    sub.add_parser("check", help="check a launch: MPI, ranks, nodes, threads, Numba cache, ping-pong (mpiexec -n N "
                                 "refsgd check)",
                   description="Check a launch before a job trains: run it as the job runs refsgd train "
                               "(mpiexec -n 4 refsgd check, srun refsgd check). Rank 0 prints the MPI library "
                               "and what started the ranks, ranks, nodes and ranks per node (shared memory), "
                               "threads and cores per rank, the Numba cache's place and warmth, a ping-pong "
                               "within and between nodes, and warns about oversubscription, a world of one, a "
                               "thread variable that is not a number (OMP_NUM_THREADS=lots), and a cold, unshared "
                               "or network-mounted cache. A world of one under a launcher of several processes is "
                               "refused (exit code 2), as refsgd train refuses it.")


def run(args, parser):
    from mpi4py import MPI  # noqa: PLC0415 mpi4py

    from refsgd import launch, mpilib  # noqa: PLC0415 start-up: NumPy and the benchmarks, which --help does without
    mpilib.refuse_singleton()  # a world of one under a launcher of several: refused, as refsgd train does
    lines = launch.report(MPI.COMM_WORLD)
    if lines is not None:
        print("\n".join(lines))
    return 0
