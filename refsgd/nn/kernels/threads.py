"""Running a layer's chunks on all cores: Python threads over the ``nogil`` kernels with OpenBLAS
held at one thread, the fixed parts of the sums over chunks, and the per-thread scratch arrays."""

import contextlib
import ctypes
import glob
import os
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np


# ---------------------------------------------------------------------------------------------
# Running a layer's chunks on all cores
#
# A convolution at batch 64 is a few dozen (im2col -> GEMM) chunk pipelines. Letting OpenBLAS
# thread each GEMM leaves the memory-bound steps in between on one core, and Numba's own
# threads cannot help: its workers and OpenBLAS's workers, which busy-wait for about 0.1 s
# after each threaded call, then fight over the cores (measured: 10x slower). Instead the
# chunks are split between Python threads (the Numba kernels are ``nogil`` and NumPy releases
# the GIL in matmul), each running its share of the pipelines, with OpenBLAS switched to one
# thread and its idle workers stopped for the duration (OpenBLAS restarts them by itself at
# its next threaded call, ~0.1 ms). Without the stop the spinning worker costs 2x.
#
# The number of threads is OpenBLAS's own thread count, so a process that was given one core
# (OPENBLAS_NUM_THREADS=1, as under MPI with one rank per core) stays serial. Everything also
# stays serial, as it was before, where the BLAS is not an OpenBLAS whose threads we can
# control through ctypes, outside the main thread, and while other Python threads are alive
# (stopping OpenBLAS's workers while another thread is inside a BLAS call would hang it).
#
# Results do not depend on the number of threads: a chunk's products are the same BLAS calls
# whichever thread makes them, and sums over chunks (weight gradients) go by parts that are fixed
# independently of the threads (``part_bounds``, ``run_parts``) and are then added in order.

def _find_openblas():
    """(set_num_threads, get_num_threads, park) for the OpenBLAS NumPy uses, or None.

    ``park()`` stops OpenBLAS's worker threads if they are running.
    """
    paths = []
    try:
        with open("/proc/self/maps") as f:  # what is actually loaded (Linux)
            paths += [line.split()[-1] for line in f if "openblas" in line.lower() and "/" in line]
    except OSError:
        pass
    npdir = os.path.dirname(np.__file__)
    for pattern in ("../numpy.libs/*openblas*", ".dylibs/*openblas*"):  # wheels' bundled copy
        paths += glob.glob(os.path.join(npdir, pattern))
    names = [("scipy_openblas_set_num_threads64_", "scipy_openblas_get_num_threads64_"),
             ("scipy_openblas_set_num_threads", "scipy_openblas_get_num_threads"),
             ("openblas_set_num_threads64_", "openblas_get_num_threads64_"),
             ("openblas_set_num_threads", "openblas_get_num_threads")]
    for path in dict.fromkeys(paths):
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for set_name, get_name in names:
            try:
                setter, getter = getattr(lib, set_name), getattr(lib, get_name)
                shutdown = lib.blas_thread_shutdown_
                running = ctypes.c_int.in_dll(lib, "blas_server_avail")
            except (AttributeError, ValueError):
                continue
            setter.argtypes, setter.restype = [ctypes.c_int], None
            getter.argtypes, getter.restype = [], ctypes.c_int
            shutdown.argtypes, shutdown.restype = [], ctypes.c_int

            def park():
                if running.value:  # noqa: B023 the handles of this library, bound once
                    shutdown()  # noqa: B023 the handles of this library, bound once
            return setter, getter, park
    return None

_blas = _find_openblas()

_pool = None  # ThreadPoolExecutor, made on first use

_local = threading.local()


def _forget_pool():
    global _pool
    _pool = None  # a forked child has the object but not its threads

if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool)

_lowered = None  # OpenBLAS's own thread count while the chunk runners hold it at one

_held = 0  # > 0 inside ``blas_held()``


def chunk_threads():
    """How many threads :func:`run_split` would use now (see the note above)."""
    if _blas is None or threading.current_thread() is not threading.main_thread():
        return 1
    ours = len(_pool._threads) if _pool is not None else 0
    if threading.active_count() != 1 + ours:
        return 1
    n = _lowered if _lowered is not None else _blas[1]()
    return max(1, min(n, os.cpu_count() or 1))


def restore_blas():
    """Give OpenBLAS back the thread count the chunk runners lowered, if they did (they only do
    in the main thread; elsewhere this does nothing). Setting it restarts OpenBLAS's workers,
    which would then spin for ~0.1 s: outside ``blas_held`` they are stopped again at once (the
    next threaded BLAS call restarts them, ~0.1 ms)."""
    global _lowered
    if _lowered is not None and threading.current_thread() is threading.main_thread():
        n, _lowered = _lowered, None
        _blas[0](n)
        if not _held:
            _blas[2]()


@contextlib.contextmanager
def blas_held():
    """Within this (in the main thread), the chunk runners leave OpenBLAS at one thread between
    calls: a network pass runs several convolutions in a row, and lowering and restoring the
    count around each costs ~0.13 ms. Layers that want a threaded BLAS (Dense) call
    :func:`restore_blas` first. On leaving, the count is restored and the workers stopped, so
    none spins after a training step."""
    global _held
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _held += 1
    try:
        yield
    finally:
        _held -= 1
        if not _held:
            restore_blas()


def _run_threads(calls):
    """Run the argument-free ``calls`` one per thread (the first on this one), with OpenBLAS at
    one thread and its workers stopped; returns their results in order."""
    global _pool, _lowered
    if _pool is None or _pool._max_workers < len(calls) - 1:
        _pool = ThreadPoolExecutor(max_workers=len(calls) - 1, thread_name_prefix="refsgd-chunks")
    setter, getter, park = _blas
    if _lowered is None:
        _lowered = getter()
        setter(1)
    park()
    try:
        futures = [_pool.submit(c) for c in calls[1:]]
        try:
            first = calls[0]()
        finally:
            rest = [f.result() for f in futures]  # always wait: they use the caller's arrays
        return [first] + rest
    finally:
        if not _held:
            restore_blas()


def run_split(work, n, step):
    """Call ``work(lo, hi)`` on a partition of range(n) into contiguous parts, in parallel.

    Each part is a whole number of ``step``-sized chunks (the last chunk may be short), one part
    per thread; returns the results in order. With one thread, or one chunk, this is just
    ``[work(0, n)]`` and the BLAS keeps its threads. The parts depend on the number of threads:
    for work whose results are summed, use :func:`run_parts`.
    """
    chunks = -(-n // step)
    T = min(chunk_threads(), chunks)
    if T <= 1:
        return [work(0, n)]
    per = -(-chunks // T) * step
    bounds = [(lo, min(n, lo + per)) for lo in range(0, n, per)]
    return _run_threads([lambda lo=lo, hi=hi: work(lo, hi) for lo, hi in bounds])

#: the number of parts :func:`part_bounds` cuts a reduction into, whatever the thread count
PARTS = 8


def part_bounds(n, step, parts=None):
    """A partition of range(n) into at most ``parts`` (default PARTS) contiguous ranges of whole
    ``step``-sized chunks, as even as possible; it does not depend on the number of threads."""
    chunks = -(-n // step)
    P = min(parts or PARTS, chunks)
    edges = [min(n, (k * chunks // P) * step) for k in range(P + 1)]
    return [(edges[k], edges[k + 1]) for k in range(P)]


def run_parts(work, bounds):
    """Call ``work(k, lo, hi)`` for each part k of ``bounds`` (from :func:`part_bounds`), the
    parts shared out between the threads in contiguous runs; returns the results in part order.

    A reduction whose part k accumulates into its own slot, summed over k in order afterwards,
    gives the same bits for any number of threads.
    """
    P = len(bounds)
    T = min(chunk_threads(), P)
    if T <= 1:
        return [work(k, lo, hi) for k, (lo, hi) in enumerate(bounds)]
    runs = [range(j * P // T, (j + 1) * P // T) for j in range(T)]
    out = _run_threads([lambda ks=ks: [work(k, *bounds[k]) for k in ks] for ks in runs])
    return [r for rs in out for r in rs]


def scratch(tag, shape, dtype):
    """A per-thread scratch array, kept between calls (a fresh np.empty page-faults each time).

    Only for intermediate values that do not outlive one layer call, so the network stays a
    pure function of its weights; ``tag`` separates buffers that are alive at the same time.
    One buffer per (tag, dtype), grown to the largest size asked for: the array returned is a
    view of its start, C-contiguous, uninitialised.
    """
    bufs = getattr(_local, "bufs", None)
    if bufs is None:
        bufs = _local.bufs = {}
    dtype = np.dtype(dtype)
    size = 1
    for d in shape:
        size *= d
    a = bufs.get((tag, dtype))
    if a is None or a.size < size:
        a = bufs[(tag, dtype)] = np.empty(max(size, 1), dtype=dtype)
    return a[:size].reshape(shape)


class Arena:
    """Arrays of one thread's passes through one network, kept between calls.

    ``get(key, shape, dtype)`` returns the same array for the same arguments every time, so a
    training step writes its activations and gradients into memory it already owns instead of
    page-faulting fresh allocations in (measured: ~3800 page faults and ~8 ms of system time per
    cifar10_cnn step at batch 64). Keys name a layer and a role, so arrays alive at the same time
    never share memory. Only for values that do not outlive one call.
    """

    def __init__(self, batch, layers):
        self.batch = batch
        self.busy = False
        self._bufs = {}
        #: per layer i, the allocator ``ws(tag, shape, dtype)`` it gets
        self.layer = [lambda tag, shape, dtype, i=i: self.get((i, tag), shape, dtype) for i in range(layers)]

    #: arrays smaller than this are allocated afresh: malloc hands small blocks back without page
    #: faults, and reusing the ones just freed keeps them in cache (measured: keeping mnist_mlp's
    #: 128 KB activations here made its step 2% slower)
    MIN_BYTES = 1 << 20

    def get(self, key, shape, dtype):
        """The array kept under ``key``, (re)made when its shape or dtype differs."""
        a = self._bufs.get(key)
        if a is None or a.shape != tuple(shape) or a.dtype != dtype:
            a = np.empty(shape, dtype=dtype)
            if a.nbytes >= self.MIN_BYTES:
                self._bufs[key] = a
        return a
