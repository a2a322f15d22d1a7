"""Compressed all-reduce: a wire format as an MPI datatype, and a user-defined MPI operator that
decompresses both operands, adds them in float32 and compresses the sum again, in place.

So the wire carries compressed data and every reduction step rounds, as in Pipe-SGD's Figure 3b
(Li et al. 2018, section 3.2). The operator's body is a Numba kernel (``nogil``) on
``np.frombuffer`` views of MPI's buffers.

Codecs (``--compress NAME``), each taking a float32 vector to its wire format and back:

=======  ======================================================  ===========  ============
name     value on the wire                                       bytes/value  rounding
=======  ======================================================  ===========  ============
t16      upper 16 bits of the float32 (Pipe-SGD's truncation)    2            toward zero
bf16     bfloat16 (DASO's 16-bit cast, as in HeAT)               2            nearest even
fp16     IEEE 754 binary16 (Horovod's fp16 compression)          2            nearest even
q8       blocks of 256 int8 values with a float32 scale each     260/256      nearest even
=======  ======================================================  ===========  ============

Exact definitions (what ``encode`` computes; ``decode`` is exact, and the operator's step is
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
  decodes to NaN. One MPI datatype element is one whole block, scale first (260 bytes), so an
  MPI library can never hand the operator a scale without its values. The paper sets the range
  from the largest magnitude of the whole vector; inside a reduction the partial sums outgrow
  any range fixed in advance, hence a range per block.

Reduction order: the result of a compressed all-reduce depends on the order in which partial
sums are combined. MPICH (the ``mpich`` wheel refsgd installs; checked with 5.0) runs every
user-defined operator with recursive doubling, blocking or not, at every message size: the
values of ranks 2i and 2i+1 are combined first for i < p - 2^floor(log2 p), then pairs of
neighbours level by level. Every rank ends with the same bits. :func:`tree_order` is that order,
and the serial renderings reduce in it (``tests/test_codecs_mpi.py`` fails if the library does
otherwise). Another MPI library may use another order: the result then differs in the last
rounding steps, not in kind.

API (one for every method)::

    wire = codecs.get("t16").open()              # commits the datatype, creates the operator
    wire.allreduce(comm, x, out)                 # blocking: out <- decode(sum of encode(x))
    req = wire.iallreduce(comm, x, out); req.Wait()   # non-blocking; decodes on completion
    wire.close()                                 # frees the datatype and the operator

``x`` is float32 or float64 (rounded to float32 first, round to nearest); ``out`` may be either.
"""

import time

import numba as nb
import numpy as np
from mpi4py import MPI

from refsgd import RefsgdError

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


# ---------------------------------------------------------------------------- codecs
class Codec:
    """A wire format: ``encode``/``decode`` between float32 vectors and wire buffers, and the
    reduction step ``add`` (b <- encode(decode(a) + decode(b)))."""

    def __init__(self, name, describe, element_bytes, values_per_element, wire_dtype, encode, decode, add):
        self.name = name
        self.describe = describe
        self.element_bytes = element_bytes          # bytes of one MPI datatype element
        self.values_per_element = values_per_element
        self.wire_dtype = np.dtype(wire_dtype)      # dtype of the wire buffer's array
        self._encode, self._decode, self._add = encode, decode, add

    def elements(self, n):
        """MPI datatype elements that carry n values."""
        return -(-n // self.values_per_element)

    def wire_bytes(self, n):
        return self.elements(n) * self.element_bytes

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
        """The MPI datatype and operator of this codec (call ``close()`` when done)."""
        return Wire(self)

    def __repr__(self):
        return f"Codec({self.name!r})"


class Wire:
    """A codec's committed MPI datatype and user-defined operator, on this process.

    ``op_seconds`` accumulates the time spent inside the operator (decompress, add, compress)
    and ``op_calls`` counts its calls: the reduction's share of the communication time.
    """

    def __init__(self, codec):
        self.codec = codec
        self.datatype = MPI.BYTE.Create_contiguous(codec.element_bytes).Commit()
        self.op = MPI.Op.Create(self._reduce, commute=True)
        self.op_seconds = 0.0
        self.op_calls = 0

    def _reduce(self, inbuf, inoutbuf, datatype):
        t0 = time.perf_counter()
        dt = self.codec.wire_dtype
        self.codec._add(np.frombuffer(inbuf, dtype=dt), np.frombuffer(inoutbuf, dtype=dt))
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

    def spec(self, wire):
        return [wire, wire.nbytes // self.codec.element_bytes, self.datatype]

    def allreduce_wire(self, comm, send, recv):
        """Blocking all-reduce of wire buffers (already encoded)."""
        comm.Allreduce(self.spec(send), self.spec(recv), op=self.op)

    def iallreduce_wire(self, comm, send, recv):
        """Start the all-reduce of wire buffers (already encoded); returns the MPI request."""
        return comm.Iallreduce(self.spec(send), self.spec(recv), op=self.op)

    def allreduce(self, comm, x, out, send=None, recv=None):
        """out <- decode(compressed sum over ranks of encode(x)); blocking."""
        if send is None:
            send, recv = self.buffers(x.size)
        self.codec.encode(x, send)
        self.allreduce_wire(comm, send, recv)
        return self.codec.decode(recv, out)

    def iallreduce(self, comm, x, out, send=None, recv=None):
        """Start the compressed all-reduce of x; the returned request decodes into out when it
        completes (``Wait``, or a ``Test`` that returns True)."""
        if send is None:
            send, recv = self.buffers(x.size)
        self.codec.encode(x, send)
        req = self.iallreduce_wire(comm, send, recv)
        return CodecRequest(req, self.codec, send, recv, out)

    def close(self):
        if self.op is not None and self.op != MPI.OP_NULL:
            self.op.Free()
            self.datatype.Free()
        self.op = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class CodecRequest:
    """A compressed all-reduce in flight: ``Wait``/``Test`` like an MPI request; decodes the
    result into ``out`` once, on completion. ``request`` is the underlying MPI request."""

    def __init__(self, request, codec, send, recv, out):
        self.request, self.codec, self.out = request, codec, out
        self._buffers = (send, recv)       # mpi4py does not keep them alive for us
        self.done = False

    def _finish(self):
        if not self.done:
            self.codec.decode(self._buffers[1], self.out)
            self.done = True

    def Wait(self, status=None):
        self.request.Wait(status)
        self._finish()
        return True

    def Test(self, status=None):
        if self.done:
            return True
        if self.request.Test(status):
            self._finish()
            return True
        return False


def tree_order(values, add):
    """Reduce ``values`` (one per rank, in rank order) in MPICH's recursive-doubling order:
    ``add(a, b)`` returns the combination of a and b (a new object). For p not a power of two
    the first 2 * (p - 2^floor(log2 p)) values are combined in pairs first."""
    values = list(values)
    p = len(values)
    pof2 = 1 << (p.bit_length() - 1)
    rem = p - pof2
    level = [add(values[2 * i], values[2 * i + 1]) for i in range(rem)] + values[2 * rem:]
    while len(level) > 1:
        level = [add(level[2 * j], level[2 * j + 1]) for j in range(len(level) // 2)]
    return level[0]


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
    }


CODECS = _codecs()


def get(name):
    """The codec called ``name`` (t16, bf16, fp16, q8)."""
    try:
        return CODECS[name]
    except KeyError:
        raise RefsgdError(f"unknown codec {name!r}; available: {', '.join(CODECS)}") from None
