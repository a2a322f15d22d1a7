"""The 8-bit codecs' Numba kernels: q8 (a float32 scale per block of 256 values) and q8v (one
float32 scale for the whole vector, Pipe-SGD's Q8), as :mod:`refsgd.comm.codecs` defines them.
The kernels that call one another share this file: Numba's cache checks a kernel's own file only."""

import numba as nb
import numpy as np

Q8_BLOCK = 256                       # values per q8 block
Q8_BYTES = 4 + Q8_BLOCK              # one datatype element: float32 scale, then the int8 values
_Q8_STRIDE = Q8_BYTES // 4           # the scale's position in float32 units (260 = 4 * 65)

# ---------------------------------------------------------------------------- q8 kernels
@nb.njit(cache=True, nogil=True, inline="always")
def _q8_block(v, scales, q, k):
    """Encode the float32 block v (Q8_BLOCK values) as block k of the wire buffer."""
    m = np.float32(0.0)
    finite = True
    for j in range(v.size):
        a = abs(v[j])
        if not np.isfinite(a):
            finite = False
        elif a > m:
            m = a
    base = k * Q8_BYTES + 4
    if not finite:
        scales[k * _Q8_STRIDE] = np.float32(np.nan)
        for j in range(Q8_BLOCK):
            q[base + j] = 0
        return
    s = m / np.float32(127.0)
    scales[k * _Q8_STRIDE] = s
    for j in range(Q8_BLOCK):
        if s == 0 or j >= v.size:
            q[base + j] = 0
        else:
            r = np.rint(v[j] / s)
            if r > 127:
                r = np.float32(127.0)
            elif r < -127:
                r = np.float32(-127.0)
            q[base + j] = np.int8(r)


@nb.njit(cache=True, nogil=True)
def _q8_encode(x, buf):
    scales, q = buf.view(np.float32), buf.view(np.int8)
    nblocks = buf.size // Q8_BYTES
    for k in range(nblocks):
        _q8_block(x[k * Q8_BLOCK:min(x.size, (k + 1) * Q8_BLOCK)], scales, q, k)


@nb.njit(cache=True, nogil=True)
def _q8_decode(buf, out):
    scales, q = buf.view(np.float32), buf.view(np.int8)
    for j in range(out.size):
        k = j // Q8_BLOCK
        out[j] = np.float32(q[k * Q8_BYTES + 4 + j % Q8_BLOCK]) * scales[k * _Q8_STRIDE]


@nb.njit(cache=True, nogil=True)
def _q8_add(a, b):
    sa, qa = a.view(np.float32), a.view(np.int8)
    sb, qb = b.view(np.float32), b.view(np.int8)
    v = np.empty(Q8_BLOCK, np.float32)
    for k in range(b.size // Q8_BYTES):
        base = k * Q8_BYTES + 4
        for j in range(Q8_BLOCK):
            v[j] = (np.float32(qa[base + j]) * sa[k * _Q8_STRIDE]
                    + np.float32(qb[base + j]) * sb[k * _Q8_STRIDE])
        _q8_block(v, sb, qb, k)


# ---------------------------------------------------------------------------- q8v kernels
# q8v: one range per vector (Pipe-SGD section 3.2). The wire buffer is the float32 scale (4 bytes)
# then one int8 per value; the kernels take the int8 values and the scales as arguments (the
# header is read and written in Python: its 4 bytes need not be aligned with anything).
@nb.njit(cache=True, nogil=True, inline="always")
def _q8v_round(v, s):
    """rint(v / s) clipped to [-127, 127] as int8 (float32 division, ties to even); 0 where the
    scale is 0 or NaN (then the decoded value is 0, or NaN through the scale)."""
    if not s > 0:
        return np.int8(0)
    r = np.rint(v / s)
    if r > 127:
        r = np.float32(127.0)
    elif r < -127:
        r = np.float32(-127.0)
    return np.int8(r)


@nb.njit(cache=True, nogil=True)
def _q8v_quantise(x, q):
    """q <- the int8 values of the float32 vector x; returns its scale max|x| / 127 (NaN when x
    holds a non-finite value, then q is all zeros)."""
    m = np.float32(0.0)
    for j in range(x.size):
        a = abs(x[j])
        if not np.isfinite(a):
            m = np.float32(np.nan)
            break
        if a > m:
            m = a
    s = m / np.float32(127.0)
    for j in range(x.size):
        q[j] = _q8v_round(x[j], s)
    return s


@nb.njit(cache=True, nogil=True)
def _q8v_dequantise(q, s, out):
    for j in range(out.size):
        out[j] = np.float32(q[j]) * s


@nb.njit(cache=True, nogil=True)
def _q8v_step(qa, sa, qb, sb, S):
    """qb <- rint((qa sa + qb sb) / S), the reduction step at the agreed scale S (float32)."""
    for j in range(qb.size):
        qb[j] = _q8v_round(np.float32(qa[j]) * sa + np.float32(qb[j]) * sb, S)


def q8v_scale(buf):
    """The float32 scale in the header of a q8v wire buffer (a NumPy float32 scalar)."""
    return buf[:4].view(np.float32)[0]


def q8v_range(scales, members):
    """S(M): the scale of a q8v partial sum of the ranks ``members``, the float32 sum of their
    ``scales`` in increasing rank order (so every block ends at the same S(all ranks))."""
    S = np.float32(0.0)
    for k in sorted(members):
        S = np.float32(S + scales[k])
    return S


def _q8v_set_scale(buf, s):
    buf[:4].view(np.float32)[0] = s


def _q8v_values(buf):
    return buf[4:].view(np.int8)


def _q8v_encode(x, buf):
    _q8v_set_scale(buf, _q8v_quantise(x, _q8v_values(buf)))


def _q8v_decode(buf, out):
    _q8v_dequantise(_q8v_values(buf), q8v_scale(buf), out)


def _q8v_add(a, b):
    """b <- the sum of the two vectors at the scale s_a + s_b (float32): the range of a sum is at
    most the sum of the ranges, so nothing is clipped but the rounding's half steps."""
    sa, sb = q8v_scale(a), q8v_scale(b)
    S = np.float32(sa + sb)
    _q8v_step(_q8v_values(a), sa, _q8v_values(b), sb, S)
    _q8v_set_scale(b, S)
