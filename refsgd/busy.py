"""How busy the machine is: the load average before and after a run or a measurement, and a
note when other work already takes the cores a run would use.

On a machine shared with other work, a rank at the default threads (its node's cores divided by
the ranks on it) competes with that work for every core, and runs many times slower than with
one thread. The default stays (on a machine of its own, it is the fastest); ``train`` and
``bench`` say when the 1-minute load average already exceeds the cores the run leaves free, by
a whole core or more, and suggest ``--blas-threads 1``. The load is recorded (metrics file
attributes ``load_average_before`` / ``load_average_after``, every bench output) so that a
slow or noisy figure can be told from a slow method. No MPI here, except for the functions that
take a communicator (the threads per rank: train and bench overlap).
"""

import os


def load_average():
    """[1, 5, 15-minute load averages] (``os.getloadavg``), or None where the OS has none."""
    try:
        return [round(float(v), 2) for v in os.getloadavg()]
    except (OSError, AttributeError):
        return None


def usable_cores():
    """The cores this process may run on (its affinity set where the OS has one)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


#: how to take one thread per process: train's option, or the environment (bench)
ONE_THREAD = "--blas-threads 1 (or OMP_NUM_THREADS=1)"
ONE_THREAD_ENV = "OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 NUMBA_NUM_THREADS=1"


def note(load, ranks, threads, cores=None, how=ONE_THREAD, world=None):
    """The line saying that the machine is busy, or None: when the 1-minute load average already
    exceeds by a whole core the cores left free by ``ranks`` processes of ``threads`` threads each
    on this machine (of ``cores``, default the usable ones); ``how`` takes one thread each;
    ``world``: the run's ranks on all its machines (default ``ranks``)."""
    if load is None:
        return None
    cores = usable_cores() if cores is None else cores
    free = max(0, cores - ranks * threads)
    if load[0] < free + 1:
        return None
    world = ranks if world is None else world
    mine = (f"{ranks} rank(s) x {threads} thread(s)" if world == ranks else
            f"{ranks} rank(s) on this machine (of its {world}) x {threads} thread(s)")
    hint = (f"; {how} takes fewer cores and is often much faster here"
            if threads > 1 else "; fewer ranks per machine would take fewer cores" if ranks > 1 else "")
    return (f"the machine is busy: load average {load[0]:.2f} (1 min) on {cores} core(s), and this run's {mine} "
            f"leave {free} free: its times will be slow and noisy{hint}")


def text(before, after=None):
    """"load average (1 min) 1.23 before, 2.34 after, 2 usable cores" ("unknown" where the OS
    gives none; no "after" when it is None)."""
    def one(v):
        return "unknown" if v is None else f"{v[0]:.2f}"
    after_text = "" if after is None else f", {one(after)} after"
    return f"load average (1 min) {one(before)} before{after_text}, {usable_cores()} usable core(s)"


# ---------------------------------------------------------------------------- threads per rank
#: environment variables that set the BLAS / OpenMP / Numba threads explicitly
THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS")


def set_threads(comm, explicit=None):
    """Give this rank its share of the node's cores for BLAS and Numba; returns the count.

    ``explicit`` (--blas-threads) wins, then any of THREAD_VARIABLES set in the environment (the
    libraries read them at start-up, so they are left as they are), else the cores this process
    may use divided by the ranks of ``comm`` on this node (a collective: MPI_COMM_TYPE_SHARED).
    """
    on_node = ranks_on_node(comm)
    if explicit is None:
        for name in THREAD_VARIABLES:
            if os.environ.get(name, "").strip().isdigit():
                return max(1, int(os.environ[name]))
        n = max(1, usable_cores() // on_node)
    else:
        n = explicit
    limit_threads(n)
    return n


def ranks_on_node(comm):
    """The ranks of ``comm`` that share memory with this one (a collective)."""
    from mpi4py import MPI  # noqa: PLC0415 mpi4py: bench step and reproduce use this module without MPI
    local = comm.Split_type(MPI.COMM_TYPE_SHARED)
    try:
        return local.Get_size()
    finally:
        local.Free()


def limit_threads(n):
    """BLAS (and OpenMP) and Numba use at most n threads in this process from now on."""
    import numba  # noqa: PLC0415 start-up: Numba's import (0.2 s) only where threads are set
    from threadpoolctl import threadpool_limits  # noqa: PLC0415 start-up: with Numba's
    threadpool_limits(limits=n)
    numba.set_num_threads(min(n, numba.config.NUMBA_NUM_THREADS))


class one_thread:
    """BLAS, Numba and torch at one thread inside the block (as one MPI rank per core runs)."""

    def __enter__(self):
        import numba  # noqa: PLC0415 start-up: Numba's import (0.2 s) only where threads are set
        from threadpoolctl import threadpool_limits  # noqa: PLC0415 start-up: with Numba's
        self._undo = []
        self._undo.append(threadpool_limits(limits=1).restore_original_limits)
        before = numba.get_num_threads()
        numba.set_num_threads(1)
        self._undo.append(lambda: numba.set_num_threads(before))
        try:
            import torch  # noqa: PLC0415 torch: optional, and slow to import
        except ImportError:
            torch = None
        if torch is not None:
            t = torch.get_num_threads()
            torch.set_num_threads(1)
            self._undo.append(lambda: torch.set_num_threads(t))
        return self

    def __exit__(self, *exc):
        for undo in reversed(self._undo):
            undo()
        return False
