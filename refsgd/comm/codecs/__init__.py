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

# The package: bits16 and quant8 (the Numba kernels), ring (the Ring-AllReduce, Wire), codec (Codec,
# the registry); the names below are its interface.
from refsgd.comm.codecs.codec import CODECS, Codec, Plain, VectorCodec, get, plain  # noqa: F401
from refsgd.comm.codecs.quant8 import Q8_BLOCK, Q8_BYTES, _q8v_step, q8v_range, q8v_scale  # noqa: F401
from refsgd.comm.codecs.ring import RING_TAG, Wire, ring_blocks  # noqa: F401
