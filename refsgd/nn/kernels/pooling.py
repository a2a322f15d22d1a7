"""The max-pool kernels, forward (with the argmax) and backward: 2x2 stride 2, and k x k."""

import numba as nb


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
