"""The Winograd F(2x2, 3x3) convolution's output transform ``Y = A^T M A`` with the bias, the
activation and the 2x2 max-pool fused in, into the (C, N, H, W) layout or the planar layout
between two Winograd convolutions (see :mod:`.winograd`), and back from the planar layout."""

import numba as nb
import numpy as np


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
