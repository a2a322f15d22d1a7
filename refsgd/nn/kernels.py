"""Numba kernels for the memory-bound parts of the network.

Dense algebra (the matrix products of Dense and of Conv2d after im2col) goes to BLAS through
NumPy; what is left is data movement and element-wise work, which NumPy would do with several
passes and temporaries. These kernels do it in one pass.

Feature maps inside the network are stored channel-major, ``(C, N, H, W)`` ("CNHW"), so that
the convolution's matrix product ``W (F, C*k*k) @ cols (C*k*k, N*H*W)`` lands directly in the
next layer's layout with no transpose. All kernels work for float32 and float64 (Numba compiles
one specialisation per dtype and caches it on disk, ``cache=True``).
"""

import numba as nb
import numpy as np


@nb.njit(cache=True, nogil=True)
def _zero_outside(row, N, H, W, sy, sx):
    """Zero the entries of one cols row whose source pixel (h+sy, w+sx) is off the image."""
    w0 = max(0, -sx)
    w1 = min(W, W - sx)
    for n in range(N):
        for h in range(H):
            base = (n * H + h) * W
            if h + sy < 0 or h + sy >= H:
                for w in range(W):
                    row[base + w] = 0
            else:
                for w in range(w0):
                    row[base + w] = 0
                for w in range(w1, W):
                    row[base + w] = 0


@nb.njit(cache=True, nogil=True)
def im2col(x, k, n0, n1, cols):
    """Unfold the k x k 'same'-padded patches of images n0..n1-1 of ``x`` into ``cols``.

    x:    (C, N, H, W), C-contiguous
    cols: (C*k*k, (n1-n0)*H*W), overwritten; row ``(c*k + dy)*k + dx``, column
          ``((n-n0)*H + h)*W + w`` holds ``x[c, n, h + sy, w + sx]`` with (sy, sx) =
          (dy - p, dx - p), p = (k-1)//2, and zero where that pixel is off the image.

    In this channel-major layout a row is a stretch of the plane ``x[c]`` read at a constant
    offset ``sy*W + sx``: one streaming copy, then the few entries that wrapped across an
    image or row border are zeroed.
    """
    C, N, H, W = x.shape
    p = (k - 1) // 2
    L = N * H * W
    base = n0 * H * W
    Lc = (n1 - n0) * H * W
    xf = x.reshape(C, L)
    for r in range(C * k * k):
        c = r // (k * k)
        dy = (r // k) % k
        dx = r % k
        row = cols[r]
        s = base + (dy - p) * W + (dx - p)
        j0 = max(0, -s)
        j1 = min(Lc, L - s)
        # slice assignment compiles to a memmove, three times faster than a loop here
        row[j0:j1] = xf[c, j0 + s:j1 + s]
        row[:j0] = 0
        row[j1:] = 0
        _zero_outside(row, n1 - n0, H, W, dy - p, dx - p)


@nb.njit(cache=True, nogil=True)
def col2im_add(cols, k, n0, n1, dx_out):
    """Adjoint of :func:`im2col`: add the rows of ``cols`` back into images n0..n1-1.

    cols:   (C*k*k, (n1-n0)*H*W); its off-image entries are zeroed in place (it is scratch)
    dx_out: (C, N, H, W), C-contiguous; receives ``+=`` the sum over the patches that read
            each pixel (zero it before the first chunk).
    """
    C, N, H, W = dx_out.shape
    p = (k - 1) // 2
    L = N * H * W
    base = n0 * H * W
    Lc = (n1 - n0) * H * W
    df = dx_out.reshape(C, L)
    for c in range(C):
        for dy in range(k):
            for dx in range(k):
                row = cols[(c * k + dy) * k + dx]
                _zero_outside(row, n1 - n0, H, W, dy - p, dx - p)
                s = base + (dy - p) * W + (dx - p)
                j0 = max(0, -s)
                j1 = min(Lc, L - s)
                df[c, j0 + s:j1 + s] += row[j0:j1]


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

    dout, arg: (C, N, Ho, Wo);  dx_out: (C, N, H, W), overwritten.
    """
    C, N, Ho, Wo = dout.shape
    dx_out[...] = 0
    for c in range(C):
        for n in range(N):
            for i in range(Ho):
                for j in range(Wo):
                    pos = arg[c, n, i, j]
                    dx_out[c, n, i * k + pos // k, j * k + pos % k] = dout[c, n, i, j]


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
