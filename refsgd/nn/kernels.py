"""Numba kernels for the memory-bound parts of the network.

Dense algebra (the matrix products of Dense and of Conv2d after im2col) goes to BLAS through
NumPy; what is left is data movement and element-wise work, which NumPy would do with several
passes and temporaries. These kernels do it in one pass.

Feature maps inside the network are stored channel-major, ``(C, N, H, W)`` ("CNHW"), so that
the convolution's matrix product ``W (F, C*k*k) @ cols (C*k*k, N*H*W)`` lands directly in the
next layer's layout with no transpose. All kernels work for float32 and float64 (Numba compiles
one specialisation per dtype and caches it on disk, ``cache=True``).
"""

import ctypes
import glob
import os
import threading
from concurrent.futures import ThreadPoolExecutor

import numba as nb
import numpy as np
from numba.core import cgutils, types
from numba.extending import intrinsic


@intrinsic
def _copy(typingctx, dst, d0, src, s0, count):
    """``dst.flat[d0:d0+count] = src.flat[s0:s0+count]`` as one libc memcpy.

    For C-contiguous arrays of one dtype that do not overlap. Numba compiles an array slice
    assignment to an element loop that it does not vectorise (10 GB/s here); memcpy moves the
    same rows at 35-50 GB/s. An LLVM intrinsic, unlike a ctypes call, keeps ``cache=True``.
    """
    if not (isinstance(dst, types.Array) and isinstance(src, types.Array)
            and dst.layout == "C" and src.layout == "C" and dst.dtype == src.dtype):
        return None
    sig = types.void(dst, types.intp, src, types.intp, types.intp)

    def codegen(context, builder, signature, args):
        dval, dstart, sval, sstart, n = args
        d = context.make_array(signature.args[0])(context, builder, dval)
        s = context.make_array(signature.args[2])(context, builder, sval)
        size = context.get_abi_sizeof(context.get_data_type(signature.args[0].dtype))
        cgutils.raw_memcpy(builder, builder.gep(d.data, [dstart]), builder.gep(s.data, [sstart]), n, size)
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def _zero(typingctx, dst, d0, count):
    """``dst.flat[d0:d0+count] = 0`` as one memset (C-contiguous float array)."""
    if not (isinstance(dst, types.Array) and dst.layout == "C"):
        return None
    sig = types.void(dst, types.intp, types.intp)

    def codegen(context, builder, signature, args):
        dval, dstart, n = args
        d = context.make_array(signature.args[0])(context, builder, dval)
        size = context.get_abi_sizeof(context.get_data_type(signature.args[0].dtype))
        nbytes = builder.mul(n, context.get_constant(types.intp, size))
        cgutils.memset(builder, builder.gep(d.data, [dstart]), nbytes, 0)
        return context.get_dummy_value()

    return sig, codegen


@nb.njit(cache=True, nogil=True)
def im2col(x, k, r0, r1, cols):
    """Unfold the k x k 'same'-padded patches of image rows r0..r1-1 of ``x`` into ``cols``.

    x:    (C, N, H, W), C-contiguous; its N*H image rows are numbered ``n*H + h``
    cols: (C*k*k, (r1-r0)*W), C-contiguous, overwritten; row ``(c*k + dy)*k + dx``, column
          ``(n*H + h - r0)*W + w`` holds ``x[c, n, h + sy, w + sx]`` with (sy, sx) =
          (dy - p, dx - p), p = (k-1)//2, and zero where that pixel is off the image.

    Chunks are ranges of image rows rather than of whole images so that a chunk's block can
    be sized to the L2 cache even when one image's block is larger than it.

    In this channel-major layout a cols row is a stretch of the plane ``x[c]`` read at a
    constant offset ``sy*W + sx``: one memcpy, then the few entries that wrapped across an
    image or row border are zeroed. Only ``cols`` is written.
    """
    C, N, H, W = x.shape
    p = (k - 1) // 2
    L = N * H * W
    Lc = (r1 - r0) * W
    for r in range(C * k * k):
        c = r // (k * k)
        sy = (r // k) % k - p
        sx = r % k - p
        s = r0 * W + sy * W + sx  # cols[r, j] = x[c].flat[j + s]
        j0 = min(max(0, -s), Lc)  # [j0, j1): the part whose source lies inside x[c]
        j1 = max(min(Lc, L - s), j0)
        o = r * Lc
        _copy(cols, o + j0, x, c * L + j0 + s, j1 - j0)
        _zero(cols, o, j0)
        _zero(cols, o + j1, Lc - j1)
        w0 = max(0, -sx)  # columns w < w0 or w >= w1 read across the left/right border
        w1 = min(W, W - sx)
        h = r0 % H
        for i in range(r1 - r0):
            if h + sy < 0 or h + sy >= H:  # the whole image row reads off the image
                _zero(cols, o, W)
            else:
                for w in range(w0):
                    cols[r, i * W + w] = 0
                for w in range(w1, W):
                    cols[r, i * W + w] = 0
            o += W
            h += 1
            if h == H:
                h = 0


@nb.njit(cache=True, nogil=True)
def add_channel_bias(y, b):
    """y[c, ...] += b[c] for y viewed as (C, M)."""
    C, M = y.shape
    for c in range(C):
        bc = b[c]
        for m in range(M):
            y[c, m] += bc


@nb.njit(cache=True, nogil=True)
def maxpool_forward(x, k, out, arg):
    """Non-overlapping k x k max pooling (stride k, trailing rows/columns dropped).

    x:   (C, N, H, W)
    out: (C, N, H//k, W//k), overwritten with the window maxima
    arg: same shape, uint8, overwritten with the winner's position ``dy*k + dx`` in its window
         (the first maximum in row-major order wins ties)
    """
    C, N, Ho, Wo = out.shape
    for c in range(C):
        for n in range(N):
            for i in range(Ho):
                for j in range(Wo):
                    best = x[c, n, i * k, j * k]
                    pos = 0
                    for dy in range(k):
                        for dx in range(k):
                            v = x[c, n, i * k + dy, j * k + dx]
                            if v > best:
                                best = v
                                pos = dy * k + dx
                    out[c, n, i, j] = best
                    arg[c, n, i, j] = pos


@nb.njit(cache=True, nogil=True)
def maxpool_backward(dout, arg, k, dx_out):
    """Route each window's gradient to the position its maximum came from.

    dout, arg: (C, N, Ho, Wo);  dx_out: (C, N, H, W), overwritten, in one pass in memory order
    (the trailing rows/columns that no window covers get zero).
    """
    C, N, Ho, Wo = dout.shape
    H, W = dx_out.shape[2], dx_out.shape[3]
    for c in range(C):
        for n in range(N):
            for i in range(Ho):
                for dy in range(k):
                    h = i * k + dy
                    for j in range(Wo):
                        v = dout[c, n, i, j]
                        pos = arg[c, n, i, j] - dy * k  # the winner's column in this row, if any
                        for dx in range(k):
                            dx_out[c, n, h, j * k + dx] = v if dx == pos else 0
                    for w in range(Wo * k, W):
                        dx_out[c, n, h, w] = 0
            for h in range(Ho * k, H):
                for w in range(W):
                    dx_out[c, n, h, w] = 0


@nb.njit(cache=True, nogil=True)
def leaky_relu_inplace(x, slope):
    """x <- max(x, slope*x) element-wise (0 < slope < 1), on a flat view."""
    for i in range(x.size):
        v = x[i]
        if v < 0:
            x[i] = v * slope


@nb.njit(cache=True, nogil=True)
def leaky_relu_backward_inplace(dout, out, slope):
    """dout <- dout * (1 if out > 0 else slope), on flat views; ``out`` is the forward output."""
    for i in range(dout.size):
        if not out[i] > 0:
            dout[i] *= slope


@nb.njit(cache=True, nogil=True)
def relu_backward_inplace(dout, out):
    """dout <- dout * (out > 0), on flat views; ``out`` is the forward output."""
    for i in range(dout.size):
        if not out[i] > 0:
            dout[i] = 0


@nb.njit(cache=True, nogil=True)
def softmax_xent(z, y, dz):
    """Mean softmax cross-entropy of logits z (N, K) against labels y (N,).

    Returns the mean loss (float64 accumulation) and writes d loss / d z into dz (N, K).
    """
    N, K = z.shape
    total = 0.0
    for n in range(N):
        m = z[n, 0]
        for j in range(1, K):
            if z[n, j] > m:
                m = z[n, j]
        s = 0.0
        for j in range(K):
            e = np.exp(z[n, j] - m)
            dz[n, j] = e
            s += e
        lse = m + np.log(s)
        total += lse - z[n, y[n]]
        inv = 1.0 / (s * N)
        for j in range(K):
            dz[n, j] = dz[n, j] * inv
        dz[n, y[n]] -= 1.0 / N
    return total / N


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
                if running.value:
                    shutdown()
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


def chunk_threads():
    """How many threads :func:`run_split` would use now (see the note above)."""
    if _blas is None or threading.current_thread() is not threading.main_thread():
        return 1
    ours = len(_pool._threads) if _pool is not None else 0
    if threading.active_count() != 1 + ours:
        return 1
    return max(1, min(_blas[1](), os.cpu_count() or 1))


def run_split(work, n, step):
    """Call ``work(lo, hi)`` on a partition of range(n) into contiguous parts, in parallel.

    Each part is a whole number of ``step``-sized chunks (the last chunk may be short), one part
    per thread; returns the results in order. With one thread, or one chunk, this is just
    ``[work(0, n)]`` and the BLAS keeps its threads.
    """
    global _pool
    chunks = -(-n // step)
    T = min(chunk_threads(), chunks)
    if T <= 1:
        return [work(0, n)]
    per = -(-chunks // T) * step
    bounds = [(lo, min(n, lo + per)) for lo in range(0, n, per)]
    if _pool is None or _pool._max_workers < len(bounds) - 1:
        _pool = ThreadPoolExecutor(max_workers=len(bounds) - 1, thread_name_prefix="refsgd-chunks")
    setter, getter, park = _blas
    old = getter()
    setter(1)
    park()
    try:
        futures = [_pool.submit(work, lo, hi) for lo, hi in bounds[1:]]
        try:
            first = work(*bounds[0])
        finally:
            rest = [f.result() for f in futures]  # always wait: they use the caller's arrays
        return [first] + rest
    finally:
        setter(old)


def scratch(tag, shape, dtype):
    """A per-thread scratch array, kept between calls (a fresh np.empty page-faults each time).

    Only for intermediate values that do not outlive one layer call, so the network stays a
    pure function of its weights; ``tag`` separates buffers that are alive at the same time.
    """
    bufs = getattr(_local, "bufs", None)
    if bufs is None:
        bufs = _local.bufs = {}
    key = (tag, tuple(shape), np.dtype(dtype))
    a = bufs.get(key)
    if a is None:
        if len(bufs) >= 32:  # many shapes seen (varying batch sizes): start over
            bufs.clear()
        a = bufs[key] = np.empty(shape, dtype=dtype)
    return a
