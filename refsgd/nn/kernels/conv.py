"""The im2col convolution's kernels: the column matrix (``im2col``) and the bias, in one pass
each; ``_copy`` and ``_zero`` are the raw copies ``im2col`` inlines. They stay in this file with
``im2col`` because Numba's on-disk cache (``cache=True``) is checked against the file that
defines a kernel, not the files of the functions it calls."""

import numba as nb

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
