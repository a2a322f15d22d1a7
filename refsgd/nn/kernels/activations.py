"""The element-wise kernels: the activations fused after a layer (and their masks in the
backward pass), the in-place (leaky) ReLU, and the softmax cross-entropy of the last layer."""

import numba as nb
import numpy as np


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
