"""The Winograd F(2x2, 3x3) convolution's weight and input transforms, forward and backward
(the output transform is in :mod:`.winograd_output`). The kernels that call one another stay in
one file: Numba's on-disk cache (``cache=True``) is checked against the file that defines a
kernel, not the files of the functions it calls."""

import numba as nb
import numpy as np


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
