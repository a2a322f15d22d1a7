"""Compressed all-reduce: a wire format, and the Ring-AllReduce of Pipe-SGD's Figure 3b over MPI
point-to-point messages, where each block is compressed, sent to the next rank, decompressed,
added in float32 and compressed again.

So the wire carries compressed data and every reduction step rounds, as in Pipe-SGD (Li et al.
2018, section 3.2, Figure 3b; eq. 5 is this ring's cost). The reduction step is a Numba kernel
(``nogil``) on the wire buffers.

Codecs (``--compress NAME``), each taking a float32 vector to its wire format and back:

=======  ======================================================  ===========  ============
name     value on the wire                                       bytes/value  rounding
=======  ======================================================  ===========  ============
t16      upper 16 bits of the float32 (Pipe-SGD's truncation)    2            toward zero
bf16     bfloat16 (DASO's 16-bit cast, as in HeAT)               2            nearest even
fp16     IEEE 754 binary16 (Horovod's fp16 compression)          2            nearest even
q8       blocks of 256 int8 values with a float32 scale each     260/256      nearest even
q8v      int8 values, one float32 scale for the whole vector     1 + 4/n      nearest even
=======  ======================================================  ===========  ============

Exact definitions (what ``encode`` computes; ``decode`` is exact, and the reduction step is
``encode(decode(a) + decode(b))`` with the addition in float32):

* t16: ``bits16 = bits32 >> 16``; decode ``bits16 << 16``. A NaN whose payload lives in the low
  bits becomes the quiet NaN 0x7FC0, so a NaN never turns into an infinity.
* bf16: ``bits16 = (bits32 + 0x7FFF + ((bits32 >> 16) & 1)) >> 16``, NaN kept as a quiet NaN.
* fp16: IEEE round-to-nearest-even to binary16, subnormals included, overflow to infinity
  (equal to NumPy's ``astype(np.float16)``). Adding two binary16 numbers in float32 and rounding
  once is the correctly rounded binary16 sum (float32 has more than 2*11 + 2 bits).
* q8: the vector is cut into blocks of 256 values (the last one padded with zeros). Per block,
  ``m = max |v_j|`` and the scale ``s = m / 127`` (float32 division); ``q_j = rint(v_j / s)``
  (float32 division, ties to even, clipped to [-127, 127]); decode ``q_j * s`` (float32). A
  block whose scale is 0 is all zeros; a block with a non-finite value gets a NaN scale, so it
  decodes to NaN. One wire element is one whole block, scale first (260 bytes): the ring cuts
  the buffer between elements, so a scale always travels with its values. The paper sets the range
  from the largest magnitude of the whole vector (that is q8v); a range per block keeps more
  precision where a few values dominate the vector.
* q8v (Pipe-SGD section 3.2, "a quantization range determined by the maximal element of a
  gradient vector"): ``s = max_j |v_j| / 127`` over the whole vector, ``q_j = rint(v_j / s)``
  (float32, ties to even, clipped to [-127, 127]); decode ``q_j * s``. A scale 0 gives zeros; a
  non-finite value gives s = NaN and q = 0 (the whole vector decodes to NaN). Wire buffer: the
  4-byte scale, then the n int8 values. The reduction step at a given result scale S is
  ``q <- rint((q_a s_a + q_b s_b) / S)`` (float32, clipped); ``add(a, b)`` takes S = s_a + s_b:
  the largest magnitude of a sum is at most the sum of the largest magnitudes, so the range of
  the sum is fixed before it is computed. In the ring the scales are exchanged first and a partial
  sum of the ranks M is encoded at ``S(M)``, the float32 sum of their scales in rank order
  (:func:`q8v_range`): one scale per vector at every step, the same final S on every block.

Reduction order: the result of a compressed all-reduce depends on the order in which partial
sums are combined, so refsgd fixes it instead of leaving it to the MPI library (an MPI
user-defined operator is combined in recursive doubling by MPICH and in other orders by Open MPI,
and q8's block scales make the difference far from the last bit). :meth:`Wire.allreduce_wire` is
the ring: the buffer is cut into p blocks of whole wire elements (:func:`ring_blocks`; q8v: of its
int8 values, after the ring has passed the scales around), and block
b collects the ranks' encoded values in the order b, b + 1, ..., b + p - 1 (mod p), rounding
every partial sum to the wire format; the all-gather then copies the finished blocks. Every rank
ends with the same bits under any MPI library, and :func:`refsgd.serial.codecs.allreduce_sum`
reduces in the same order.

Uncompressed sums (``--allreduce ring``): :func:`plain` is the same ring with no codec, values of
the run's dtype carried as they are and each step ``mine <- received + mine`` in that dtype, so
block b of an uncompressed sum is ``(((x_b + x_{b+1}) + x_{b+2}) + ... + x_{b-1})`` (mod p).

API (one for every method)::

    wire = codecs.get("t16").open()
    wire.allreduce(comm, x, out)                 # blocking: out <- decode(ring sum of encode(x))
    wire.allreduce_wire(comm, send, recv)        # blocking, on wire buffers already encoded
    wire.close()                                 # frees the MPI operator, if allreduce_op made one
    codecs.plain(np.float64).open().allreduce_wire(comm, x, out)   # uncompressed, in the ring's order

``x`` is float32 or float64 (rounded to float32 first, round to nearest); ``out`` may be either.
``wire.allreduce_op`` is the same reduction as an MPI user-defined operator, whose order is the
library's: ``refsgd bench codec`` (and ``bench overlap --codecs``) times both.
"""

import time

import numba as nb
import numpy as np

from refsgd.errors import RefsgdError

_CHUNK = 1024                        # values per chunk of the 16-bit operators
Q8_BLOCK = 256                       # values per q8 block
Q8_BYTES = 4 + Q8_BLOCK              # one datatype element: float32 scale, then the int8 values
_Q8_STRIDE = Q8_BYTES // 4           # the scale's position in float32 units (260 = 4 * 65)

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


# ---------------------------------------------------------------------------- codecs
class Codec:
    """A wire format: ``encode``/``decode`` between float32 vectors and wire buffers, and the
    reduction step ``add`` (b <- encode(decode(a) + decode(b)))."""

    def __init__(self, name, describe, element_bytes, values_per_element, wire_dtype, encode, decode, add):
        self.name = name
        self.describe = describe
        self.element_bytes = element_bytes          # bytes of one wire element (the ring's unit)
        self.values_per_element = values_per_element
        self.wire_dtype = np.dtype(wire_dtype)      # dtype of the wire buffer's array
        self._encode, self._decode, self._add = encode, decode, add

    def elements(self, n):
        """Wire elements that carry n values."""
        return -(-n // self.values_per_element)

    def wire_bytes(self, n):
        return self.elements(n) * self.element_bytes

    def element_of(self, nbytes):
        """Bytes of one MPI datatype element of a wire buffer of ``nbytes`` (the operator's unit)."""
        return self.element_bytes

    def empty(self, n):
        """A wire buffer for n values."""
        return np.zeros(self.wire_bytes(n) // self.wire_dtype.itemsize, self.wire_dtype)

    def encode(self, x, wire):
        """wire <- encode(x); x is rounded to float32 first when it is float64."""
        self._encode(np.ascontiguousarray(x, dtype=np.float32), wire)
        return wire

    def decode(self, wire, out):
        """out <- decode(wire) (out float32, or float64: exact either way)."""
        if out.dtype == np.float32:
            self._decode(wire, out)
        else:
            tmp = np.empty(out.size, np.float32)
            self._decode(wire, tmp)
            out[...] = tmp
        return out

    def add(self, a, b):
        """b <- encode(decode(a) + decode(b)): one reduction step, in place."""
        self._add(a, b)
        return b

    def open(self):
        """This codec's compressed all-reduce (:class:`Wire`; call ``close()`` when done)."""
        return Wire(self)

    def __repr__(self):
        return f"Codec({self.name!r})"


class VectorCodec(Codec):
    """q8v: one scale for the whole vector (Pipe-SGD section 3.2: "a quantization range determined
    by the maximal element of a gradient vector"). The wire buffer is the float32 scale, then one
    int8 per value (4 + n bytes, no padding); one MPI datatype element is the whole buffer. The
    ring (:meth:`Wire.allreduce_wire`) cuts the int8 values into p blocks and encodes every partial
    sum at a scale known to all ranks before the ring, the sum of its ranks' scales
    (:func:`q8v_range`)."""

    per_vector = True

    def elements(self, n):
        return n

    def wire_bytes(self, n):
        return 4 + n

    def element_of(self, nbytes):
        return nbytes


#: the tag of the ring's messages (point-to-point on the caller's communicator)
RING_TAG = 23023


def ring_blocks(elements, p):
    """The bounds [b_0 = 0, b_1, ..., b_p = elements] of the ring's p blocks of ``elements`` wire
    elements: block b is elements [b_b, b_{b+1}); the first ``elements mod p`` blocks have one
    element more than the others (a block may be empty)."""
    q, r = divmod(elements, p)
    return [b * q + min(b, r) for b in range(p + 1)]


class Wire:
    """A codec's compressed all-reduce on this process: the Ring-AllReduce of Pipe-SGD's Figure 3b
    over MPI point-to-point messages (:meth:`allreduce_wire`), and for comparison the same
    reduction as an MPI user-defined operator (:meth:`allreduce_op`, in the MPI library's order).

    ``op_seconds`` accumulates the time spent in the reduction steps (decompress, add, compress)
    and ``op_calls`` counts them: the reduction's share of the communication time.
    """

    def __init__(self, codec):
        self.codec = codec
        self.datatype = None
        self.op = None
        self.op_seconds = 0.0
        self.op_calls = 0
        self._tmp = codec.empty(0)

    def _step(self, a, b):
        """b <- encode(decode(a) + decode(b)), timed."""
        t0 = time.perf_counter()
        self.codec._add(a, b)
        self.op_seconds += time.perf_counter() - t0
        self.op_calls += 1

    def buffers(self, n):
        """(send, receive) wire buffers for n values."""
        return self.codec.empty(n), self.codec.empty(n)

    def scratch(self, n):
        """(send, receive) wire buffers for n values, allocated once per size and reused."""
        bufs = self.__dict__.setdefault("_scratch", {})
        if n not in bufs:
            bufs[n] = self.buffers(n)
        return bufs[n]

    def allreduce_wire(self, comm, send, recv):
        """Blocking compressed all-reduce of wire buffers (already encoded): recv <- the ring's sum.

        Ring-AllReduce (Pipe-SGD, Li et al. 2018, Figure 3b and eq. 5) over the p ranks of ``comm``
        in rank order, rank r sending to r + 1 and receiving from r - 1 (mod p), the buffer cut
        into p blocks of whole wire elements (:func:`ring_blocks`):

        * reduce-scatter, steps s = 0 .. p - 2: rank r sends its block (r - s) mod p and receives
          block (r - s - 1) mod p, which it reduces into its own copy with the codec's step
          ``mine <- encode(decode(received) + decode(mine))`` (the sum in float32). Block b thus
          starts on rank b and collects the ranks in the order b, b + 1, ..., b + p - 1 (mod p):
          ``(((c_b + c_{b+1}) + c_{b+2}) + ... + c_{b-1})``, every partial sum rounded to the wire;
        * all-gather, steps s = 0 .. p - 2: rank r sends block (r + 1 - s) mod p, complete, and
          receives block (r - s) mod p, copied as it is (no rounding).

        Every rank ends with the same bits, whatever the MPI library (only ``Sendrecv`` is used).
        On an emulated link (:class:`refsgd.comm.link.LinkComm`) the ring counts and is held as
        one all-reduce of ``recv``."""
        from mpi4py import MPI
        start, op0 = time.perf_counter(), self.op_seconds
        if getattr(self.codec, "per_vector", False):
            self._ring_q8v(comm, send, recv)
            return self._hold(comm, start, op0, recv)
        p, r = comm.Get_size(), comm.Get_rank()
        recv[...] = send
        if p > 1:
            per = self.codec.element_bytes // recv.itemsize          # array items per wire element
            bounds = [b * per for b in ring_blocks(recv.size // per, p)]
            if self._tmp.size < bounds[1]:
                self._tmp = np.empty(bounds[1], recv.dtype)          # the largest block is the first
            right, left = (r + 1) % p, (r - 1) % p
            sendrecv = MPI.Intracomm.Sendrecv                        # never an emulated link's own

            def block(b):
                return recv[bounds[b]:bounds[b + 1]]
            for s in range(p - 1):                                  # reduce-scatter
                out, inc = block((r - s) % p), block((r - s - 1) % p)
                tmp = self._tmp[:inc.size]
                sendrecv(comm, out, right, RING_TAG, tmp, left, RING_TAG)
                self._step(tmp, inc)
            for s in range(p - 1):                                  # all-gather
                sendrecv(comm, block((r + 1 - s) % p), right, RING_TAG, block((r - s) % p), left, RING_TAG)
        self._hold(comm, start, op0, recv)

    def _hold(self, comm, start, op0, recv):
        """On an emulated link, hold the caller as one all-reduce of ``recv`` whose reduction took
        the operator seconds this rank spent in it since ``op0`` (on its critical path)."""
        hold = getattr(comm, "hold_allreduce", None)
        if hold is not None:
            hold(start, recv, reduce_s=self.op_seconds - op0)

    def _ring_q8v(self, comm, send, recv):
        """The Ring-AllReduce of q8v (one scale per vector), recv <- the ring's sum of ``send``.

        1. The scales: every rank's s_r passes once around the ring (p - 1 ``Sendrecv`` of 4
           bytes), so every rank knows the scale of any partial sum before the ring starts: a
           sum of the vectors of a set M of ranks is encoded at ``S(M)`` (:func:`q8v_range`, the
           float32 sum of their scales in rank order): the range of a sum is at most the sum of
           the ranges, so nothing is clipped but rounding's half steps.
        2. The int8 values (n of them, one wire element each) are cut into p blocks
           (:func:`ring_blocks`) and reduced as in the other codecs' ring: at reduce-scatter step
           s rank r receives block (r - s - 1) mod p from rank r - 1, the partial sum of the set
           M = {r - s - 1, ..., r - 1} (at step 0 rank r - 1's own encoding), and sets its own
           copy (still its encoding, scale s_r) to ``rint((q_recv S(M) + q_own s_r) / S(M + r))``;
           the all-gather copies the finished blocks.
        3. Every finished block holds all p ranks: the header of ``recv`` is S(all ranks), one
           scale for the whole result, the same on every rank."""
        from mpi4py import MPI
        p, r = comm.Get_size(), comm.Get_rank()
        recv[...] = send
        if p <= 1:
            return
        right, left = (r + 1) % p, (r - 1) % p
        sendrecv = MPI.Intracomm.Sendrecv                            # never an emulated link's own
        scales = np.zeros(p, np.float32)
        scales[r] = q8v_scale(send)
        for s in range(p - 1):                                      # the scales, around the ring
            sendrecv(comm, scales[(r - s) % p:(r - s) % p + 1], right, RING_TAG,
                     scales[(r - s - 1) % p:(r - s - 1) % p + 1], left, RING_TAG)
        q = _q8v_values(recv)
        bounds = ring_blocks(q.size, p)
        tmp = np.empty(bounds[1], np.int8)                          # the largest block is the first

        def block(b):
            return q[bounds[b]:bounds[b + 1]]
        for s in range(p - 1):                                      # reduce-scatter
            out, inc = block((r - s) % p), block((r - s - 1) % p)
            t = tmp[:inc.size]
            sendrecv(comm, out, right, RING_TAG, t, left, RING_TAG)
            # the received partial sum holds ranks r - s - 1 .. r - 1, the result ranks r - s - 1 .. r
            members = [(r - s - 1 + k) % p for k in range(s + 1)]
            t0 = time.perf_counter()
            _q8v_step(t, q8v_range(scales, members), inc, scales[r], q8v_range(scales, members + [r]))
            self.op_seconds += time.perf_counter() - t0
            self.op_calls += 1
        for s in range(p - 1):                                      # all-gather
            sendrecv(comm, block((r + 1 - s) % p), right, RING_TAG, block((r - s) % p), left, RING_TAG)
        _q8v_set_scale(recv, q8v_range(scales, range(p)))

    def allreduce(self, comm, x, out, send=None, recv=None):
        """out <- decode(the ring's compressed sum over ranks of encode(x)); blocking."""
        if send is None:
            send, recv = self.buffers(x.size)
        self.codec.encode(x, send)
        self.allreduce_wire(comm, send, recv)
        return self.codec.decode(recv, out)

    # ------------------------------------------------ the MPI operator (bench's comparison only)
    def _reduce(self, inbuf, inoutbuf, datatype):
        dt = self.codec.wire_dtype
        self._step(np.frombuffer(inbuf, dtype=dt), np.frombuffer(inoutbuf, dtype=dt))

    def allreduce_op(self, comm, send, recv):
        """The same reduction as ``MPI_Allreduce`` with a user-defined operator on a datatype of
        one wire element: the MPI library picks the order of the partial sums (MPICH: recursive
        doubling; Open MPI: others), so its bits depend on the library and are no reference.
        ``refsgd bench codec`` times it against the ring."""
        from mpi4py import MPI
        elem = self.codec.element_of(send.nbytes)                   # q8v: the whole vector
        if self.op is not None and self._elem != elem:
            self.close()
        if self.op is None:
            self.datatype = MPI.BYTE.Create_contiguous(elem).Commit()
            self.op = MPI.Op.Create(self._reduce, commute=True)
            self._elem = elem
        count = send.nbytes // elem
        comm.Allreduce([send, count, self.datatype], [recv, count, self.datatype], op=self.op)

    def close(self):
        """Frees the operator and its datatype, where :meth:`allreduce_op` made them."""
        if self.op is not None:
            self.op.Free()
            self.datatype.Free()
        self.op = self.datatype = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _codecs():
    t16, bf16, fp16 = _make16(_T16), _make16(_BF16), _make16(_FP16)
    return {
        "t16": Codec("t16", "16-bit truncation (upper half of each float32, rounds toward zero; Pipe-SGD)",
                     2, 1, np.uint16, *t16),
        "bf16": Codec("bf16", "bfloat16, round to nearest even (DASO's 16-bit cast)", 2, 1, np.uint16, *bf16),
        "fp16": Codec("fp16", "IEEE half, round to nearest even, sums in half (Horovod's fp16 compression)",
                      2, 1, np.uint16, *fp16),
        "q8": Codec("q8", f"8-bit quantisation, a float32 scale per block of {Q8_BLOCK} values (Pipe-SGD)",
                    Q8_BYTES, Q8_BLOCK, np.uint8, _q8_encode, _q8_decode, _q8_add),
        "q8v": VectorCodec("q8v", "8-bit quantisation, one float32 scale for the whole vector (Pipe-SGD's Q8)",
                           1, 1, np.uint8, _q8v_encode, _q8v_decode, _q8v_add),
    }


CODECS = _codecs()


class Plain(Codec):
    """The ring's uncompressed element: one value of ``dtype`` carried as it is, the reduction step
    ``b <- a + b`` in that dtype (one rounding, as MPI_SUM's). ``--allreduce ring`` sends every
    uncompressed sum over ranks through :meth:`Wire.allreduce_wire` with it, so that the sum's
    order is the ring's (the same bits under any MPI library, and in the serial renderings)."""

    def __init__(self, dtype):
        dtype = np.dtype(dtype)
        super().__init__("none", f"uncompressed {dtype.name}, the sum in {dtype.name}", dtype.itemsize, 1, dtype,
                         np.copyto, lambda wire, out: np.copyto(out, wire), lambda a, b: np.add(a, b, out=b))

    def encode(self, x, wire):
        """wire <- x (no rounding)."""
        np.copyto(wire, x)
        return wire

    def decode(self, wire, out):
        np.copyto(out, wire)
        return out


_PLAIN = {}


def plain(dtype):
    """The uncompressed codec of ``dtype`` (:class:`Plain`): ``plain(x.dtype).open()`` is the ring
    all-reduce of ``--allreduce ring``, ``wire.allreduce_wire(comm, x, out)`` on the arrays
    themselves (``out <- the ring's sum of x``, blocking)."""
    dtype = np.dtype(dtype)
    if dtype not in _PLAIN:
        _PLAIN[dtype] = Plain(dtype)
    return _PLAIN[dtype]


def get(name):
    """The codec called ``name`` (t16, bf16, fp16, q8, q8v)."""
    try:
        return CODECS[name]
    except KeyError:
        raise RefsgdError(f"unknown codec {name!r}; available: {', '.join(CODECS)}") from None
