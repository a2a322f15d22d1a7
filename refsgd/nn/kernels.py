"""Numba kernels for the memory-bound parts of the network.

Dense algebra (the matrix products of Dense and of Conv2d after im2col) goes to BLAS through
NumPy; what is left is data movement and element-wise work, which NumPy would do with several
passes and temporaries. These kernels do it in one pass.

Feature maps inside the network are stored channel-major, ``(C, N, H, W)`` ("CNHW"), so that
the convolution's matrix product ``W (F, C*k*k) @ cols (C*k*k, N*H*W)`` lands directly in the
next layer's layout with no transpose. All kernels work for float32 and float64 (Numba compiles
one specialisation per dtype and caches it on disk, ``cache=True``).

Inner loops index only with the bare loop variable (or ``2*j``, ``2*j + 1``) into views sliced
outside the loop: Numba wraps negative indices, and on any other index expression that check
keeps LLVM from vectorising the loop (measured 5-20x slower). Each vectorised loop writes one
array, so that LLVM's run-time overlap checks stay few.
"""

import contextlib
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
def activate(y, mode, slope):
    """The fused activation on y viewed as (C, M): mode 1 leaky ReLU (v < 0 -> slope*v),
    mode 2 ReLU (v < 0 -> 0), mode 0 nothing."""
    C, M = y.shape
    zero = y.dtype.type(0)
    s = slope if mode == 1 else zero
    if mode == 0:
        return
    for c in range(C):
        r = y[c]
        if mode == 1:
            for m in range(M):
                v = r[m]
                r[m] = v * s if v < 0 else v
        else:
            for m in range(M):
                v = r[m]
                r[m] = zero if v < 0 else v


@nb.njit(cache=True, nogil=True)
def activation_mask(dy, y, mode, slope):
    """dy <- dy * f'(y) in place for the fused activation of ``activate`` (f' from its output y:
    1 where y > 0, else slope (mode 1) or 0 (mode 2)); flat views."""
    if mode == 0:
        return
    zero = dy.dtype.type(0)
    s = slope if mode == 1 else zero
    for i in range(dy.size):
        if not y[i] > 0:
            dy[i] = dy[i] * s if mode == 1 else zero


# ---------------------------------------------------------------------------------------------
# Winograd F(2x2, 3x3) convolution (Lavin & Gray 2016)
#
# A 3x3 'same' convolution computed on 2x2 output tiles: with the 4x4 input window d of a tile
# (rows 2i-1 .. 2i+2, columns 2j-1 .. 2j+2, zero off the image) and g = W[f, c],
#
#     Y[f] = A^T [ sum_c (G g G^T) * (B^T d B) ] A     (* element-wise, 4x4)
#
#     B^T = [[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]]
#     G   = [[1, 0, 0], [1/2, 1/2, 1/2], [1/2, -1/2, 1/2], [0, 0, 1]]
#     A^T = [[1, 1, 1, 0], [0, 1, -1, -1]]
#
# which is exact in exact arithmetic: 16 multiplications per tile and channel pair instead of
# 36, so the sum over c becomes 16 matrix products U[p] (F, C) @ V[p] (C, T) over the T tiles,
# p = 4*xi + nu, with 2.25x fewer flops than im2col. The transforms only add and subtract (the
# halves of G are exact), so the rounding error stays within a small multiple of im2col's.
# Tiles are numbered n*th*tw + i*tw + j (th, tw = tiles per column and row, ceil(H/2) and
# ceil(W/2)); "tile rows" R = n*th + i are the unit of the chunks. Partial tiles at an odd
# edge read zeros and write only their pixels on the image.
#
# The transforms first split each image row into its even and odd columns and sort the rows by
# parity (``_planes``: the only loops as short as a row); after that every step is a loop over
# all the tiles of a chunk, with the few tiles at a row's or an image's edge fixed afterwards.

@nb.njit(cache=True, nogil=True)
def wino_weights(Wt, flip, U):
    """U[4*xi + nu, f, c] = (G g G^T)[xi, nu] with g = Wt[f, c] (F, C, 3, 3), in float64 and
    rounded once. With ``flip``, U[p, c, f] from g[a, b] = Wt[f, c, 2-a, 2-b]: the kernel of the
    input gradient, dx = conv(dy, flipped W with its channel axes swapped)."""
    F, C = Wt.shape[0], Wt.shape[1]
    n = F * C
    g = np.empty((9, n))  # g[3a + b, i], i = f*C + c (or c*F + f with flip)
    for f in range(F):
        for c in range(C):
            i = c * F + f if flip else f * C + c
            for a in range(3):
                for b in range(3):
                    g[3 * a + b, i] = Wt[f, c, 2 - a, 2 - b] if flip else Wt[f, c, a, b]
    t = np.empty((12, n))  # t[3*xi + b] = (G g)[xi, b]
    for b in range(3):
        g0 = g[b]
        g1 = g[3 + b]
        g2 = g[6 + b]
        r = t[b]
        for i in range(n):
            r[i] = g0[i]
        r = t[3 + b]
        for i in range(n):
            r[i] = 0.5 * (g0[i] + g1[i] + g2[i])
        r = t[6 + b]
        for i in range(n):
            r[i] = 0.5 * (g0[i] - g1[i] + g2[i])
        r = t[9 + b]
        for i in range(n):
            r[i] = g2[i]
    Uf = U.reshape(16, n)
    for xi in range(4):  # (G g) G^T
        t0 = t[3 * xi]
        t1 = t[3 * xi + 1]
        t2 = t[3 * xi + 2]
        u = Uf[4 * xi]
        for i in range(n):
            u[i] = t0[i]
        u = Uf[4 * xi + 1]
        for i in range(n):
            u[i] = 0.5 * (t0[i] + t1[i] + t2[i])
        u = Uf[4 * xi + 2]
        for i in range(n):
            u[i] = 0.5 * (t0[i] - t1[i] + t2[i])
        u = Uf[4 * xi + 3]
        for i in range(n):
            u[i] = t2[i]


@nb.njit(cache=True, nogil=True)
def wino_weight_grad(parts, gW):
    """gW[f, c] = G^T D G with D = sum over k of parts[k, :, f, c] (as 4x4), summed in the order
    of k and transformed in float64; parts (P, 16, F, C), gW (F, C, 3, 3) overwritten.

    (The adjoint of U = G g G^T: the weight gradient from dU[p, f, c] = sum_t dM[p, f, t] V[p, c, t].)
    """
    P, _, F, C = parts.shape
    n = 16 * F * C
    D = np.empty(n)
    src = parts[0].reshape(n)
    for i in range(n):
        D[i] = src[i]
    for k in range(1, P):
        src = parts[k].reshape(n)
        for i in range(n):
            D[i] += src[i]
    m = F * C
    D = D.reshape(16, m)
    t = np.empty((12, m))  # t[4*a + nu] = (G^T D)[a, nu]
    for nu in range(4):
        d0 = D[nu]
        d1 = D[4 + nu]
        d2 = D[8 + nu]
        d3 = D[12 + nu]
        r = t[nu]
        for i in range(m):
            r[i] = d0[i] + 0.5 * (d1[i] + d2[i])
        r = t[4 + nu]
        for i in range(m):
            r[i] = 0.5 * (d1[i] - d2[i])
        r = t[8 + nu]
        for i in range(m):
            r[i] = 0.5 * (d1[i] + d2[i]) + d3[i]
    g = np.empty((9, m))  # (G^T D) G
    for a in range(3):
        t0 = t[4 * a]
        t1 = t[4 * a + 1]
        t2 = t[4 * a + 2]
        t3 = t[4 * a + 3]
        r = g[3 * a]
        for i in range(m):
            r[i] = t0[i] + 0.5 * (t1[i] + t2[i])
        r = g[3 * a + 1]
        for i in range(m):
            r[i] = 0.5 * (t1[i] - t2[i])
        r = g[3 * a + 2]
        for i in range(m):
            r[i] = 0.5 * (t1[i] + t2[i]) + t3[i]
    for f in range(F):
        for c in range(C):
            i = f * C + c
            for a in range(3):
                for b in range(3):
                    gW[f, c, a, b] = g[3 * a + b, i]


@nb.njit(cache=True, nogil=True)
def _planes(x, ya, slope, mode, c, R0, R1, P):
    """De-interleave channel c of tile rows R0-1 .. R1 (one halo tile row each side) of x
    (C, N, H, W) into P (4, 2 + (R1-R0+2)*tw): P[2*a + b, 1 + (R - R0 + 1)*tw + j] =
    x[c, n, 2m + a, 2j + b] for tile row R = n*th + m, zero off the image and outside the
    batch; read through the activation derivative for mode 1, 2."""
    C, N, H, W = x.shape
    th = (H + 1) // 2
    tw = (W + 1) // 2
    hw = W // 2
    zero = x.dtype.type(0)
    s2 = slope if mode == 1 else zero
    for R in range(R0 - 1, R1 + 1):
        o = 1 + (R - R0 + 1) * tw
        for a in range(2):
            pe = P[2 * a, o:o + tw]
            po = P[2 * a + 1, o:o + tw]
            n = R // th
            h = 2 * (R - n * th) + a
            if R < 0 or n >= N or h >= H:
                pe[:] = zero
                po[:] = zero
                continue
            xr = x[c, n, h]
            if mode == 0:
                for j in range(hw):
                    pe[j] = xr[2 * j]
                    po[j] = xr[2 * j + 1]
            else:
                yr = ya[c, n, h]
                for j in range(hw):
                    u = xr[2 * j]
                    v = xr[2 * j + 1]
                    pe[j] = u if yr[2 * j] > 0 else u * s2
                    po[j] = v if yr[2 * j + 1] > 0 else v * s2
            if hw < tw:  # odd W: the last column pair has only its even column
                u = xr[W - 1]
                if mode != 0 and not ya[c, n, h, W - 1] > 0:
                    u = u * s2
                pe[hw] = u
                po[hw] = zero


@nb.njit(cache=True, nogil=True)
def _input_from_planes(P, E, th, tw, R0, R1, V, c):
    """V[:, c, :] = B^T d B for tile rows R0..R1-1 from the planes of ``_planes``; E: (8, K)
    scratch, K = (R1-R0+2)*tw."""
    zero = P.dtype.type(0)
    K = (R1 - R0 + 2) * tw
    L = (R1 - R0) * tw
    # (. B) along the rows, for the even (a = 0) and odd (a = 1) image rows: tile j reads
    # columns 2j-1 .. 2j+2 = odd col at j-1 (0 for j = 0), even at j, odd at j, even at j+1
    # (0 for j = tw-1)
    for a in range(2):
        e = P[2 * a, 1:K + 1]
        e1 = P[2 * a, 2:K + 2]
        o = P[2 * a + 1, 1:K + 1]
        o0 = P[2 * a + 1, 0:K]
        h = E[4 * a]
        for t in range(K):
            h[t] = o0[t] - o[t]
        h = E[4 * a + 1]
        for t in range(K):
            h[t] = e[t] + o[t]
        h = E[4 * a + 2]
        for t in range(K):
            h[t] = o[t] - e[t]
        h = E[4 * a + 3]
        for t in range(K):
            h[t] = e[t] - e1[t]
        for r in range(R1 - R0 + 2):  # no column -1 left of the first tile, no W past the last
            E[4 * a, r * tw] = zero - P[2 * a + 1, 1 + r * tw]
            E[4 * a + 3, r * tw + tw - 1] = P[2 * a, 1 + r * tw + tw - 1] - zero
    # B^T (.) across: tile row R reads image rows 2m-1 (odd row of R-1), 2m, 2m+1 (of R),
    # 2m+2 (even row of R+1); the first and last tile rows of an image read zeros there
    for nu in range(4):
        oprev = E[4 + nu, 0:L]
        ocur = E[4 + nu, tw:tw + L]
        ecur = E[nu, tw:tw + L]
        enext = E[nu, 2 * tw:2 * tw + L]
        v = V[nu, c]
        for t in range(L):
            v[t] = oprev[t] - ocur[t]
        v = V[4 + nu, c]
        for t in range(L):
            v[t] = ecur[t] + ocur[t]
        v = V[8 + nu, c]
        for t in range(L):
            v[t] = ocur[t] - ecur[t]
        v = V[12 + nu, c]
        for t in range(L):
            v[t] = ecur[t] - enext[t]
    for R in range(R0, R1):
        m = R % th
        b = (R - R0) * tw
        if m == 0:
            for nu in range(4):
                v = V[nu, c, b:b + tw]
                oc = E[4 + nu, b + tw:b + 2 * tw]
                for j in range(tw):
                    v[j] = zero - oc[j]
        if m == th - 1:
            for nu in range(4):
                v = V[12 + nu, c, b:b + tw]
                ec = E[nu, b + tw:b + 2 * tw]
                for j in range(tw):
                    v[j] = ec[j] - zero


@nb.njit(cache=True, nogil=True)
def wino_input(x, r0, r1, V):
    """V[4*xi + nu, c, t] = (B^T d B)[xi, nu] for the tiles of tile rows r0..r1-1 of x."""
    C, N, H, W = x.shape
    th = (H + 1) // 2
    tw = (W + 1) // 2
    K = (r1 - r0 + 2) * tw
    P = np.zeros((4, K + 2), x.dtype)
    E = np.empty((8, K), x.dtype)
    zero = x.dtype.type(0)
    for c in range(C):
        _planes(x, x, zero, 0, c, r0, r1, P)
        _input_from_planes(P, E, th, tw, r0, r1, V, c)


@nb.njit(cache=True, nogil=True)
def _grad_from_planes(P, E, th, tw, r0, r1, dM, db, Vd, want_vd, f):
    """dM[:, f], db[f] and (with want_vd) Vd[:, f] from the planes of dz, as ``wino_grad``."""
    T = (r1 - r0) * tw
    g00 = P[0, 1 + tw:1 + tw + T]
    g01 = P[1, 1 + tw:1 + tw + T]
    g10 = P[2, 1 + tw:1 + tw + T]
    g11 = P[3, 1 + tw:1 + tw + T]
    # dM = A g A^T: columns (g0, g0 + g1, g0 - g1, -g1) of each row, the same across rows
    d = dM[0, f]
    for t in range(T):
        d[t] = g00[t]
    d = dM[1, f]
    for t in range(T):
        d[t] = g00[t] + g01[t]
    d = dM[2, f]
    for t in range(T):
        d[t] = g00[t] - g01[t]
    d = dM[3, f]
    for t in range(T):
        d[t] = -g01[t]
    d = dM[4, f]
    for t in range(T):
        d[t] = g00[t] + g10[t]
    d = dM[5, f]
    for t in range(T):
        d[t] = (g00[t] + g01[t]) + (g10[t] + g11[t])
    d = dM[6, f]
    for t in range(T):
        d[t] = (g00[t] - g01[t]) + (g10[t] - g11[t])
    d = dM[7, f]
    for t in range(T):
        d[t] = -(g01[t] + g11[t])
    d = dM[8, f]
    for t in range(T):
        d[t] = g00[t] - g10[t]
    d = dM[9, f]
    for t in range(T):
        d[t] = (g00[t] + g01[t]) - (g10[t] + g11[t])
    d = dM[10, f]
    for t in range(T):
        d[t] = (g00[t] - g01[t]) - (g10[t] - g11[t])
    d = dM[11, f]
    for t in range(T):
        d[t] = g11[t] - g01[t]
    d = dM[12, f]
    for t in range(T):
        d[t] = -g10[t]
    d = dM[13, f]
    for t in range(T):
        d[t] = -(g10[t] + g11[t])
    d = dM[14, f]
    for t in range(T):
        d[t] = g11[t] - g10[t]
    d = dM[15, f]
    for t in range(T):
        d[t] = g11[t]
    d = dM[5, f]  # the tile sums: four float64 partial sums in a fixed order
    a0 = 0.0
    a1 = 0.0
    a2 = 0.0
    a3 = 0.0
    for k in range(T // 4):
        a0 += d[4 * k]
        a1 += d[4 * k + 1]
        a2 += d[4 * k + 2]
        a3 += d[4 * k + 3]
    for k in range(T - T % 4, T):
        a0 += d[k]
    db[f] += (a0 + a1) + (a2 + a3)
    if want_vd:
        _input_from_planes(P, E, th, tw, r0, r1, Vd, f)


@nb.njit(cache=True, nogil=True)
def wino_grad(dy, ya, slope, mode, r0, r1, dM, db, Vd, want_vd):
    """From dy (F, N, H, W) read through the fused activation's derivative (mode, slope, ya), dz:
    dM[:, f, t] = A g A^T for its 2x2 tiles g (the adjoint of ``wino_output``), db[f] += the
    sum of g (float64), and with ``want_vd`` Vd = ``wino_input`` of dz, for tile rows r0..r1-1."""
    F, N, H, W = dy.shape
    th = (H + 1) // 2
    tw = (W + 1) // 2
    K = (r1 - r0 + 2) * tw
    P = np.zeros((4, K + 2), dy.dtype)
    E = np.empty((8, K), dy.dtype)
    for f in range(F):
        _planes(dy, ya, slope, mode, f, r0, r1, P)
        _grad_from_planes(P, E, th, tw, r0, r1, dM, db, Vd, want_vd, f)


@nb.njit(cache=True, nogil=True)
def wino_grad_pool(dp, yp, arg, th, tw, slope, mode, r0, r1, dM, db, Vd, want_vd):
    """``wino_grad`` for a convolution fused with its activation and a 2x2 max pool
    (``wino_output_pool``): dz is zero except at each tile's maximum, where it is the pooled
    gradient times the activation's derivative at the pooled value. dp, yp, arg: (F, tiles) (the
    pooled gradient, pooled output, and winner positions)."""
    F, NT = dp.shape
    K = (r1 - r0 + 2) * tw
    P = np.zeros((4, K + 2), dp.dtype)
    E = np.empty((8, K), dp.dtype)
    zero = dp.dtype.type(0)
    s2 = slope if mode == 1 else zero
    lo = max(0, (r0 - 1) * tw)  # tiles lo..hi-1 exist; the halo rows outside the batch are 0
    hi = min(NT, (r1 + 1) * tw)
    o = 1 + lo - (r0 - 1) * tw
    for f in range(F):
        for k in range(4):
            P[k, :] = zero
        d = dp[f, lo:hi]
        y = yp[f, lo:hi]
        g = arg[f, lo:hi]
        for k in range(4):
            q = P[k, o:o + hi - lo]
            if mode == 0:
                for t in range(hi - lo):
                    q[t] = d[t] if g[t] == k else zero
            else:
                for t in range(hi - lo):
                    v = d[t] if y[t] > 0 else d[t] * s2
                    q[t] = v if g[t] == k else zero
        _grad_from_planes(P, E, th, tw, r0, r1, dM, db, Vd, want_vd, f)


@nb.njit(cache=True, nogil=True, inline="always")
def _rows_of_AtM(M, f, Z):
    """Z[4*a + nu] = row a of A^T M[:, f] (F(2x2, 3x3)'s output transform, first half), for every tile."""
    T = M.shape[2]
    for nu in range(4):
        m0 = M[nu, f]
        m1 = M[4 + nu, f]
        m2 = M[8 + nu, f]
        m3 = M[12 + nu, f]
        z = Z[nu]
        for t in range(T):
            z[t] = m0[t] + m1[t] + m2[t]
        z = Z[4 + nu]
        for t in range(T):
            z[t] = m1[t] - m2[t] - m3[t]


@nb.njit(cache=True, nogil=True)
def wino_output(M, r0, r1, y, b, slope, mode):
    """The pixels of tile rows r0..r1-1 of y (F, N, H, W): A^T M[:, f, t] A + b[f], then the
    fused activation (mode 0, 1, 2). M: (16, F, (r1-r0)*tw); b: (F,) or empty (no bias)."""
    F, N, H, W = y.shape
    th = (H + 1) // 2
    tw = (W + 1) // 2
    hw = W // 2
    T = M.shape[2]
    zero = y.dtype.type(0)
    Z = np.empty((8, T), y.dtype)  # Z[4*a + nu] = row a of A^T M
    s2 = slope if mode == 1 else zero
    for f in range(F):
        bf = b[f] if b.shape[0] > 0 else zero
        _rows_of_AtM(M, f, Z)
        for R in range(r0, r1):
            n = R // th
            tb = (R - r0) * tw
            for a in range(2):
                h = 2 * (R - n * th) + a
                if h >= H:
                    break
                z0 = Z[4 * a, tb:tb + tw]
                z1 = Z[4 * a + 1, tb:tb + tw]
                z2 = Z[4 * a + 2, tb:tb + tw]
                z3 = Z[4 * a + 3, tb:tb + tw]
                yr = y[f, n, h]
                if mode == 0:
                    for j in range(hw):
                        yr[2 * j] = z0[j] + z1[j] + z2[j] + bf
                        yr[2 * j + 1] = z1[j] - z2[j] - z3[j] + bf
                elif mode == 1:
                    for j in range(hw):
                        u = z0[j] + z1[j] + z2[j] + bf
                        v = z1[j] - z2[j] - z3[j] + bf
                        yr[2 * j] = u * s2 if u < 0 else u
                        yr[2 * j + 1] = v * s2 if v < 0 else v
                else:
                    for j in range(hw):
                        u = z0[j] + z1[j] + z2[j] + bf
                        v = z1[j] - z2[j] - z3[j] + bf
                        yr[2 * j] = zero if u < 0 else u
                        yr[2 * j + 1] = zero if v < 0 else v
                if hw < tw:  # odd W: the last tile has one column on the image
                    u = z0[hw] + z1[hw] + z2[hw] + bf
                    if mode != 0 and u < 0:
                        u = u * s2 if mode == 1 else zero
                    yr[W - 1] = u


@nb.njit(cache=True, nogil=True, inline="always")
def _tile_row_pair(Z, a, bf, u, v, mode, s2, zero):
    """Row a of every tile from A^T M's rows Z (``_rows_of_AtM``): its two pixels, bias and
    activation applied (mode 0 none, 1 leaky with slope s2, 2 ReLU), into u (left) and v
    (right), one value per tile; each mode a loop of its own so that each vectorises."""
    z0 = Z[4 * a]
    z1 = Z[4 * a + 1]
    z2 = Z[4 * a + 2]
    z3 = Z[4 * a + 3]
    T = u.shape[0]
    if mode == 0:
        for t in range(T):
            u[t] = z0[t] + z1[t] + z2[t] + bf
        for t in range(T):
            v[t] = z1[t] - z2[t] - z3[t] + bf
    elif mode == 1:
        for t in range(T):
            w = z0[t] + z1[t] + z2[t] + bf
            u[t] = w * s2 if w < 0 else w
        for t in range(T):
            w = z1[t] - z2[t] - z3[t] + bf
            v[t] = w * s2 if w < 0 else w
    else:
        for t in range(T):
            w = z0[t] + z1[t] + z2[t] + bf
            u[t] = zero if w < 0 else w
        for t in range(T):
            w = z1[t] - z2[t] - z3[t] + bf
            v[t] = zero if w < 0 else w


@nb.njit(cache=True, nogil=True)
def wino_output_pool(M, r0, r1, tw, yp, arg, b, slope, mode):
    """``wino_output`` followed by a 2x2 max pool whose windows are the tiles (H, W even): of
    each tile's four pixels (bias and activation applied) only the maximum is written,
    yp[f, t] (the first in row-major order wins ties, as in ``maxpool2_forward``), and its
    position 2a + b in arg[f, t]; yp, arg: (F, tiles), tiles numbered as the pooled map's pixels."""
    F = M.shape[1]
    T = M.shape[2]
    zero = M.dtype.type(0)
    Z = np.empty((8, T), M.dtype)
    Y = np.empty((4, T), M.dtype)
    s2 = slope if mode == 1 else zero
    base = r0 * tw
    for f in range(F):
        bf = b[f] if b.shape[0] > 0 else zero
        _rows_of_AtM(M, f, Z)
        for a in range(2):
            _tile_row_pair(Z, a, bf, Y[2 * a], Y[2 * a + 1], mode, s2, zero)
        y00 = Y[0]
        y01 = Y[1]
        y10 = Y[2]
        y11 = Y[3]
        o = yp[f, base:base + T]
        for t in range(T):
            best = y00[t]
            v = y01[t]
            best = v if v > best else best
            v = y10[t]
            best = v if v > best else best
            v = y11[t]
            best = v if v > best else best
            o[t] = best
        g = arg[f, base:base + T]
        for t in range(T):
            best = y00[t]
            pos = 0
            v = y01[t]
            if v > best:
                best = v
                pos = 1
            v = y10[t]
            if v > best:
                best = v
                pos = 2
            v = y11[t]
            if v > best:
                best = v
                pos = 3
            g[t] = pos


# ---------------------------------------------------------------------------------------------
# The planar layout between two Winograd convolutions
#
# A map with an even height and width handed from one 3x3 convolution to the next is kept as
# xp (C, 4, tiles): xp[c, 2a + b, t] = x[c, n, 2i + a, 2j + b] for the tile t = (n*th + i)*tw + j,
# the four pixels of each 2x2 tile in their own plane. Both convolutions tile the map the same
# way, so the producer writes it and the consumer reads it (both passes) with loops over all the
# tiles, where the (C, N, H, W) rows would need a loop per row to split and merge their columns.

@nb.njit(cache=True, nogil=True)
def _planes_planar(xp, ya, slope, mode, c, R0, R1, tw, P):
    """``_planes`` of a planar map: the tile rows R0-1 .. R1 of channel c (zero outside the
    batch), read through the activation derivative for mode 1, 2 (ya planar too)."""
    NT = xp.shape[2]
    zero = xp.dtype.type(0)
    s2 = slope if mode == 1 else zero
    lo = max(0, (R0 - 1) * tw)
    hi = min(NT, (R1 + 1) * tw)
    o = 1 + lo - (R0 - 1) * tw
    n = hi - lo
    end = 1 + (R1 - R0 + 2) * tw
    for k in range(4):
        d = P[k, o:o + n]
        src = xp[c, k, lo:hi]
        if mode == 0:
            for t in range(n):
                d[t] = src[t]
        else:
            m = ya[c, k, lo:hi]
            for t in range(n):
                v = src[t]
                d[t] = v if m[t] > 0 else v * s2
        P[k, 1:o] = zero
        P[k, o + n:end] = zero


@nb.njit(cache=True, nogil=True)
def wino_input_planar(xp, th, tw, r0, r1, V):
    """``wino_input`` of a planar map xp (C, 4, tiles)."""
    C = xp.shape[0]
    K = (r1 - r0 + 2) * tw
    P = np.zeros((4, K + 2), xp.dtype)
    E = np.empty((8, K), xp.dtype)
    zero = xp.dtype.type(0)
    for c in range(C):
        _planes_planar(xp, xp, zero, 0, c, r0, r1, tw, P)
        _input_from_planes(P, E, th, tw, r0, r1, V, c)


@nb.njit(cache=True, nogil=True)
def wino_grad_planar(dyp, yap, th, tw, slope, mode, r0, r1, dM, db, Vd, want_vd):
    """``wino_grad`` of a planar dy (and activation output ya)."""
    F = dyp.shape[0]
    K = (r1 - r0 + 2) * tw
    P = np.zeros((4, K + 2), dyp.dtype)
    E = np.empty((8, K), dyp.dtype)
    for f in range(F):
        _planes_planar(dyp, yap, slope, mode, f, r0, r1, tw, P)
        _grad_from_planes(P, E, th, tw, r0, r1, dM, db, Vd, want_vd, f)


@nb.njit(cache=True, nogil=True)
def wino_output_planar(M, r0, r1, tw, yp, b, slope, mode):
    """``wino_output`` into a planar map yp (F, 4, tiles): the tiles of tile rows r0..r1-1."""
    F = M.shape[1]
    T = M.shape[2]
    zero = M.dtype.type(0)
    Z = np.empty((8, T), M.dtype)
    s2 = slope if mode == 1 else zero
    base = r0 * tw
    for f in range(F):
        bf = b[f] if b.shape[0] > 0 else zero
        _rows_of_AtM(M, f, Z)
        for a in range(2):
            _tile_row_pair(Z, a, bf, yp[f, 2 * a, base:base + T], yp[f, 2 * a + 1, base:base + T], mode, s2, zero)


@nb.njit(cache=True, nogil=True)
def from_planar(xp, x, ya, slope, mode):
    """x (C, N, H, W) from the planar xp (C, 4, tiles), read through the activation derivative
    for mode 1, 2 (ya planar, as in ``activation_mask``)."""
    C, N, H, W = x.shape
    th = H // 2
    tw = W // 2
    zero = x.dtype.type(0)
    s2 = slope if mode == 1 else zero
    for c in range(C):
        for R in range(N * th):
            n = R // th
            i = R - n * th
            for a in range(2):
                e = xp[c, 2 * a, R * tw:R * tw + tw]
                o = xp[c, 2 * a + 1, R * tw:R * tw + tw]
                r = x[c, n, 2 * i + a]
                if mode == 0:
                    for j in range(tw):
                        r[2 * j] = e[j]
                        r[2 * j + 1] = o[j]
                else:
                    me = ya[c, 2 * a, R * tw:R * tw + tw]
                    mo = ya[c, 2 * a + 1, R * tw:R * tw + tw]
                    for j in range(tw):
                        u = e[j]
                        v = o[j]
                        r[2 * j] = u if me[j] > 0 else u * s2
                        r[2 * j + 1] = v if mo[j] > 0 else v * s2


@nb.njit(cache=True, nogil=True)
def maxpool2_forward(x, out, arg):
    """``maxpool_forward`` for k = 2, vectorised along the rows."""
    C, N, Ho, Wo = out.shape
    for c in range(C):
        for n in range(N):
            for i in range(Ho):
                x0 = x[c, n, 2 * i]
                x1 = x[c, n, 2 * i + 1]
                o = out[c, n, i]
                g = arg[c, n, i]
                for j in range(Wo):
                    best = x0[2 * j]
                    pos = 0
                    v = x0[2 * j + 1]
                    if v > best:
                        best = v
                        pos = 1
                    v = x1[2 * j]
                    if v > best:
                        best = v
                        pos = 2
                    v = x1[2 * j + 1]
                    if v > best:
                        best = v
                        pos = 3
                    o[j] = best
                    g[j] = pos


@nb.njit(cache=True, nogil=True)
def maxpool2_backward(dout, arg, dx_out):
    """``maxpool_backward`` for k = 2."""
    C, N, Ho, Wo = dout.shape
    H, W = dx_out.shape[2], dx_out.shape[3]
    zero = dx_out.dtype.type(0)
    for c in range(C):
        for n in range(N):
            for i in range(Ho):
                d = dout[c, n, i]
                g = arg[c, n, i]
                x0 = dx_out[c, n, 2 * i]
                x1 = dx_out[c, n, 2 * i + 1]
                for j in range(Wo):
                    v = d[j]
                    p = g[j]
                    x0[2 * j] = v if p == 0 else zero
                    x0[2 * j + 1] = v if p == 1 else zero
                for j in range(Wo):
                    v = d[j]
                    p = g[j]
                    x1[2 * j] = v if p == 2 else zero
                    x1[2 * j + 1] = v if p == 3 else zero
                if W > 2 * Wo:
                    x0[W - 1] = zero
                    x1[W - 1] = zero
            if H > 2 * Ho:
                dx_out[c, n, H - 1, :] = zero


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
