"""A codec (:class:`Codec`): a wire format between float32 vectors and wire buffers, its reduction
step, and the registry of ``--compress`` names (:func:`get`); :func:`plain` is the uncompressed
element of ``--allreduce ring``."""

import numpy as np

from refsgd.comm.codecs.bits16 import _BF16, _FP16, _T16, _make16
from refsgd.comm.codecs.quant8 import (Q8_BLOCK, Q8_BYTES, _q8_add, _q8_decode, _q8_encode, _q8v_add, _q8v_decode,
                                       _q8v_encode)
from refsgd.comm.codecs.ring import Wire
from refsgd.errors import RefsgdError

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
