"""The 16-bit codecs' Numba kernels (t16, bf16, fp16): encode, decode and the reduction step on
uint16 wire buffers, exactly as :mod:`refsgd.comm.codecs` defines them. The kernels that call one
another share this file: Numba's cache checks a kernel's own file only."""

import numba as nb
import numpy as np

_CHUNK = 1024                        # values per chunk of the 16-bit operators

# ---------------------------------------------------------------------------- 16-bit kernels
# Bit arithmetic in int64 throughout: Numba turns mixed signed/unsigned integer operations into
# floating point.
@nb.njit(cache=True, nogil=True, inline="always")
def _is_nan32(u):
    return (u & 0x7F800000) == 0x7F800000 and (u & 0x007FFFFF) != 0


@nb.njit(cache=True, nogil=True, inline="always")
def _t16(u32):
    u = np.int64(u32)
    if _is_nan32(u):
        return np.uint16(0x7FC0 | ((u >> 16) & 0x8000))
    return np.uint16(u >> 16)


@nb.njit(cache=True, nogil=True, inline="always")
def _bf16(u32):
    u = np.int64(u32)
    if _is_nan32(u):
        return np.uint16(0x7FC0 | ((u >> 16) & 0x8000))
    return np.uint16((u + 0x7FFF + ((u >> 16) & 1)) >> 16)


@nb.njit(cache=True, nogil=True, inline="always")
def _fp16(u32):
    u = np.int64(u32)
    sign = (u >> 16) & 0x8000
    exp = (u >> 23) & 0xFF
    man = u & 0x7FFFFF
    if exp == 0xFF:                                    # infinity or NaN
        return np.uint16(sign | 0x7C00 | (0x200 if man != 0 else 0))
    e = exp - 127 + 15
    if e >= 31:                                        # too large: infinity
        return np.uint16(sign | 0x7C00)
    if e <= 0:                                         # a binary16 subnormal, or zero
        if e < -10:
            return np.uint16(sign)
        m = man | 0x800000
        shift = 14 - e
        h = m >> shift
        rem = m & ((1 << shift) - 1)
        mid = 1 << (shift - 1)
        if rem > mid or (rem == mid and (h & 1) != 0):
            h += 1
        return np.uint16(sign | h)
    h = (e << 10) | (man >> 13)
    rem = man & 0x1FFF
    if rem > 0x1000 or (rem == 0x1000 and (h & 1) != 0):
        h += 1                                         # may carry into the exponent (to infinity)
    return np.uint16(sign | h)


@nb.njit(cache=True, nogil=True, inline="always")
def _hi16(h):
    """t16 / bf16 decode: the 16 bits are the upper half of a float32."""
    return np.uint32(np.int64(h) << 16)


@nb.njit(cache=True, nogil=True, inline="always")
def _fp16_bits32(h16):
    h = np.int64(h16)
    sign = (h & 0x8000) << 16
    exp = (h >> 10) & 0x1F
    man = h & 0x3FF
    if exp == 0:
        if man == 0:
            return np.uint32(sign)
        # subnormal man * 2^-24: normalise it (a normal float32)
        e = -14
        while (man & 0x400) == 0:
            man <<= 1
            e -= 1
        return np.uint32(sign | ((e + 127) << 23) | ((man & 0x3FF) << 13))
    if exp == 31:
        return np.uint32(sign | 0x7F800000 | (man << 13))
    return np.uint32(sign | ((exp - 15 + 127) << 23) | (man << 13))


# The three 16-bit codecs share their loops; ``kind`` (loop-invariant) picks the conversion. They
# are module-level functions so that Numba's on-disk cache finds them again in a new process
# (closures, or kernels passed as arguments, are compiled anew by every process).
_T16, _BF16, _FP16 = 0, 1, 2


@nb.njit(cache=True, nogil=True, inline="always")
def _enc16(u32, kind):
    if kind == _T16:
        return _t16(u32)
    if kind == _BF16:
        return _bf16(u32)
    return _fp16(u32)


@nb.njit(cache=True, nogil=True, inline="always")
def _dec16(h, kind):
    if kind == _FP16:
        return _fp16_bits32(h)
    return _hi16(h)


@nb.njit(cache=True, nogil=True)
def _encode16(x, out, kind):
    u = x.view(np.uint32)
    for j in range(u.size):
        out[j] = _enc16(u[j], kind)


@nb.njit(cache=True, nogil=True)
def _decode16(h, out, kind):
    o = out.view(np.uint32)
    for j in range(h.size):
        o[j] = _dec16(h[j], kind)


@nb.njit(cache=True, nogil=True)
def _add16(a, b, kind):
    """b <- encode(decode(a) + decode(b)), the operator's step, in place, in chunks whose
    float32 sums vectorise."""
    ta, tb = np.empty(_CHUNK, np.uint32), np.empty(_CHUNK, np.uint32)
    fa, fb = ta.view(np.float32), tb.view(np.float32)
    for s in range(0, b.size, _CHUNK):
        n = min(b.size - s, _CHUNK)
        for j in range(n):
            ta[j] = _dec16(a[s + j], kind)
            tb[j] = _dec16(b[s + j], kind)
        for j in range(n):
            fa[j] = fa[j] + fb[j]          # the sum in float32
        for j in range(n):
            b[s + j] = _enc16(ta[j], kind)


def _make16(kind):
    """(encode, decode, add) of the 16-bit codec ``kind``."""
    return (lambda x, out: _encode16(x, out, kind), lambda h, out: _decode16(h, out, kind),
            lambda a, b: _add16(a, b, kind))
