"""What ``bench overlap`` measures of its MPI world: the all-reduce and message times, the link
they make, the cores and ranks per node, and the means and spreads over the ranks."""

import os
import time

import numpy as np

from refsgd import mpilib
from refsgd.bench import models
from refsgd.busy import ranks_on_node, usable_cores
from refsgd.comm.link import Link


def _mean_over_ranks(comm, values, skip, servers=0):
    """Mean over the workers (the ranks from ``servers`` on: a parameter server computes no
    gradient, and its zero would halve a compute column at 2 ranks) and over the iterations after
    the first ``skip`` (the last one, which evaluates the model, left out when there are
    others), in seconds."""
    hi = len(values) - 1 if len(values) - 1 > skip else len(values)
    mine = float(np.mean(values[skip:hi])) if comm.Get_rank() >= servers else 0.0
    return comm.allreduce(mine) / max(1, comm.Get_size() - servers)


def _allreduce_time(comm, n, dtype, repeat=20, stat=np.median):
    """Seconds of a blocking Allreduce of n values: ``stat`` (the median) of the repeats on each
    rank, the slowest rank's."""
    from mpi4py import MPI  # noqa: PLC0415 mpi4py: importing it starts MPI; bench scale and step use this module without
    a, b = np.ones(n, dtype), np.empty(n, dtype)
    times = []
    for _ in range(repeat + 3):
        comm.Barrier()
        t0 = time.perf_counter()
        comm.Allreduce(a, b, op=MPI.SUM)
        times.append(time.perf_counter() - t0)
    return comm.allreduce(float(stat(times[3:])), op=MPI.MAX)


def _message_time(comm, n, dtype, repeat=20, peer=1, stat=np.median):
    """``stat`` (the median) of the seconds of one message of n values from rank 0 to ``peer``
    and back, halved (the other ranks take no part); 0 on one rank."""
    from mpi4py import MPI  # noqa: PLC0415 mpi4py: importing it starts MPI; bench scale and step use this module without
    if comm.Get_size() < 2:
        return 0.0
    a = np.ones(n, dtype)
    rank, times = comm.Get_rank(), []
    for _ in range(repeat + 3):
        comm.Barrier()
        t0 = time.perf_counter()
        if rank == 0:
            comm.Send(a, dest=peer, tag=7)
            comm.Recv(a, source=peer, tag=8)
        elif rank == peer:
            comm.Recv(a, source=0, tag=7)
            comm.Send(a, dest=0, tag=8)
        times.append((time.perf_counter() - t0) / 2)
    return comm.allreduce(float(stat(times[3:])) if rank in (0, peer) else 0.0, op=MPI.MAX)


def measured_link(comm, n, dtype, repeat=20):
    """The link between two nodes, measured: a ping-pong of one value and of n values between
    rank 0 and the first rank on another node (MPI_Get_processor_name), the fastest of
    ``repeat`` (the link's floor: on a loaded machine a median of a 1-value message measured the
    ranks' wake-ups, up to 1.5 ms); alpha = the one-value message, beta = the rest of the n-value
    message per byte. Returns (Link, the two processor names), or (None, None) when every rank
    is on one node."""
    names = comm.allgather(mpilib.processor_name())
    peer = next((r for r, name in enumerate(names) if name != names[0]), None)
    if peer is None:
        return None, None
    return link_to(comm, peer, n, dtype, repeat), (names[0], names[peer])


def message_times(comm, peer, sizes, dtype=np.float64, repeat=20):
    """{n: the fastest of ``repeat`` one-way times of an n-value message between rank 0 and rank
    ``peer``} for each n of ``sizes`` (collective)."""
    return {size: _message_time(comm, size, dtype, repeat, peer, np.min) for size in sizes}


def link_to(comm, peer, n, dtype=np.float64, repeat=20):
    """The link between rank 0 and rank ``peer`` (collective): alpha, the fastest of ``repeat``
    one-value messages; beta, the rest of the fastest n-value message per byte (a Link)."""
    t = message_times(comm, peer, (1, n), dtype, repeat)
    nbytes = (n - 1) * np.dtype(dtype).itemsize
    beta = max(t[n] - t[1], 1e-12) / nbytes
    return Link(1e6 * t[1], 8.0 / beta / 1e9)


def _cores_per_rank(comm):
    """The cores each rank of this node may use: its affinity set, or the machine's cores shared
    by the ranks on the node, whichever is fewer (the same on every rank: the minimum)."""
    from mpi4py import MPI  # noqa: PLC0415 mpi4py: importing it starts MPI; bench scale and step use this module without
    on_node = ranks_on_node(comm)
    return comm.allreduce(min(float(usable_cores()), (os.cpu_count() or 1) / on_node), op=MPI.MIN)


def _ranks_per_node(comm, given):
    """DASO's G: --ranks-per-node, or the ranks that share memory with this one."""
    if given:
        return given
    return ranks_on_node(comm)


def _iteration_spread(comm, values, skip, servers=0):
    """models.spread of the iteration times (each the mean over the workers) that
    _mean_over_ranks averages: a comparison that flips from run to run shows in it."""
    hi = len(values) - 1 if len(values) - 1 > skip else len(values)
    mine = np.asarray(values[skip:hi], dtype=np.float64) * (comm.Get_rank() >= servers)
    total = np.empty_like(mine)
    from mpi4py import MPI  # noqa: PLC0415 mpi4py: importing it starts MPI; bench scale and step use this module without
    comm.Allreduce(mine, total, op=MPI.SUM)
    return models.spread(total / max(1, comm.Get_size() - servers))
