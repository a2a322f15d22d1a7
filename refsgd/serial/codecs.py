"""The codecs of :mod:`refsgd.comm.codecs` written again in NumPy, from their definitions, and the
compressed all-reduce of the serial renderings.

:func:`allreduce_sum` reduces the rows of a (workers, d) array as the MPI code's Ring-AllReduce
does (:meth:`refsgd.comm.codecs.Wire.allreduce_wire`): every row is rounded to float32 and
encoded; the vector is cut into N blocks of whole wire elements (values for t16, bf16 and fp16,
blocks of 256 values for q8; :func:`refsgd.comm.codecs.ring_blocks`; q8v: see :func:`_allreduce_q8v`), and block b sums the rows
in the order b, b + 1, ..., b + N - 1 (mod N), each step ``encode(decode(partial) + decode(row))``
with the sum in float32; the result is decoded. Without a codec (:func:`ring_sum`) the rows are
summed in the same order, in their own dtype: the uncompressed sums of every serial rendering are
the ring's (``--allreduce ring`` of the MPI code). The Numba kernels of the MPI code are tested
against these.
"""

import numpy as np

from refsgd.errors import RefsgdError
from refsgd.comm.codecs import Q8_BLOCK, ring_blocks


def _t16_encode(x):
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    h = (u >> 16).astype(np.uint16)
    nan = ((u & 0x7F800000) == 0x7F800000) & ((u & 0x007FFFFF) != 0)
    h[nan] = 0x7FC0 | ((u[nan] >> 16) & 0x8000).astype(np.uint16)
    return h


def _bf16_encode(x):
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    h = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(np.asarray(x, np.float32))
    h[nan] = 0x7FC0 | ((u[nan] >> 16) & 0x8000).astype(np.uint16)
    return h


def _hi16_decode(h):
    return (h.astype(np.uint32) << 16).view(np.float32)


def _t16_decode(h):
    return (h.astype(np.uint32) << 16).view(np.float32)


def _q8_encode(x):
    """(scales (B,), values (B, 256) int8) of the blocks of x."""
    x = np.asarray(x, dtype=np.float32)
    B = -(-x.size // Q8_BLOCK)
    v = np.zeros(B * Q8_BLOCK, np.float32)
    v[:x.size] = x
    v = v.reshape(B, Q8_BLOCK)
    finite = np.all(np.isfinite(v), axis=1)
    m = np.where(finite, np.max(np.abs(np.where(np.isfinite(v), v, 0)), axis=1), 0).astype(np.float32)
    s = m / np.float32(127)
    safe = np.where(s > 0, s, np.float32(1))
    q = np.clip(np.rint(v / safe[:, None]), -127, 127).astype(np.int8)
    q[s == 0] = 0
    q[~finite] = 0
    s = np.where(finite, s, np.float32(np.nan)).astype(np.float32)
    return s, q


def _q8_decode(c, n):
    s, q = c
    return (q.astype(np.float32) * s[:, None]).ravel()[:n]


def _codec(name, n):
    """(encode, decode, add) of the codec ``name`` for vectors of n values."""
    if name == "t16":
        def add(a, b):
            return _t16_encode(_t16_decode(a) + _t16_decode(b))
        return _t16_encode, _t16_decode, add
    if name == "q8":
        def add(a, b):
            return _q8_encode(_q8_decode(a, n) + _q8_decode(b, n))
        return _q8_encode, lambda c: _q8_decode(c, n), add
    if name == "bf16":
        def add(a, b):
            return _bf16_encode(_hi16_decode(a) + _hi16_decode(b))
        return _bf16_encode, _hi16_decode, add
    if name == "fp16":
        # NumPy's own float16 conversion (round to nearest even), not refsgd's kernel
        def encode(x):
            with np.errstate(over="ignore"):
                return np.asarray(x, np.float32).astype(np.float16).view(np.uint16)

        def decode(h):
            return h.view(np.float16).astype(np.float32)

        def add(a, b):
            return encode(decode(a) + decode(b))
        return encode, decode, add
    raise RefsgdError(f"unknown codec {name!r}")


def ring_sum(G):
    """The uncompressed all-reduce of the rows of G in the ring's order (``--allreduce ring``,
    :func:`refsgd.comm.codecs.plain`): the vector is cut into N blocks of values
    (:func:`refsgd.comm.codecs.ring_blocks`) and block b is ``(((G[b] + G[b+1]) + G[b+2]) + ... +
    G[b-1])`` (rows mod N), each addition in G's dtype."""
    N, n = G.shape
    bounds = ring_blocks(n, N)
    out = np.empty(n, G.dtype)
    for b in range(N):
        lo, hi = bounds[b], bounds[b + 1]
        out[lo:hi] = G[b, lo:hi]
        for k in range(1, N):
            out[lo:hi] += G[(b + k) % N, lo:hi]
    return out


def allreduce_sum(G, compress):
    """The (compressed) all-reduce of the rows of G in the ring's order: the sum, in G's dtype."""
    if compress in (None, "none"):
        return ring_sum(G)
    if compress == "q8v":
        return _allreduce_q8v(G).astype(G.dtype)
    N, n = G.shape
    per = Q8_BLOCK if compress == "q8" else 1            # values per wire element
    bounds = [min(b * per, n) for b in ring_blocks(-(-n // per), N)]
    out = np.empty(n, np.float32)
    for b in range(N):                                   # block b: rows b, b + 1, ..., b + N - 1
        lo, hi = bounds[b], bounds[b + 1]
        if lo == hi:
            continue
        encode, decode, add = _codec(compress, hi - lo)
        partial = encode(G[b, lo:hi])
        for k in range(1, N):
            partial = add(partial, encode(G[(b + k) % N, lo:hi]))
        out[lo:hi] = decode(partial)
    return out.astype(G.dtype)


def _q8v_encode(x):
    """(scale, int8 values) of the float32 vector x: one scale max|x| / 127 for all of it (NaN
    and all zeros when x holds a non-finite value)."""
    x = np.asarray(x, dtype=np.float32)
    m = np.max(np.abs(x)) if x.size else np.float32(0)
    s = np.float32(m) / np.float32(127) if np.all(np.isfinite(x)) else np.float32(np.nan)
    return s, _q8v_round(x, s)


def _q8v_round(v, s):
    """rint(v / s) (float32, ties to even) clipped to [-127, 127] as int8; zeros unless s > 0."""
    if not s > 0:
        return np.zeros(v.shape, np.int8)
    with np.errstate(over="ignore", invalid="ignore"):
        return np.clip(np.rint(v / s), -127, 127).astype(np.int8)


def _allreduce_q8v(G):
    """q8v's ring: rows encoded with their own scales s_i; a partial sum of the rows of a set M is
    encoded at S(M), the float32 sum of their scales in row order; block b of the int8 values is
    summed from row b on, ``p = q_b`` (scale s_b), then for j = b + 1, ..., b + N - 1 (mod N)
    ``p = rint((p S(M) + q_j s_j) / S(M + j))``; every block ends at S(all rows)."""
    N, n = G.shape
    enc = [_q8v_encode(g) for g in G]

    def S(members):
        out = np.float32(0)
        for k in sorted(members):
            out = np.float32(out + enc[k][0])
        return out
    bounds = ring_blocks(n, N)
    q = np.zeros(n, np.int8)
    for b in range(N):
        lo, hi = bounds[b], bounds[b + 1]
        if lo == hi:
            continue
        part, members = enc[b][1][lo:hi], [b]
        for k in range(1, N):
            j = (b + k) % N
            s, qj = enc[j]
            part = _q8v_round(part.astype(np.float32) * S(members) + qj[lo:hi].astype(np.float32) * s,
                              S(members + [j]))
            members.append(j)
        q[lo:hi] = part
    return q.astype(np.float32) * S(range(N))
