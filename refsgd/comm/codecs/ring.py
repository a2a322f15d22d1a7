"""The Ring-AllReduce over MPI point-to-point messages (:class:`Wire`): reduce-scatter then
all-gather of a codec's wire buffers, in the fixed order that :mod:`refsgd.comm.codecs` states, and
the same reduction as an MPI user-defined operator (the library's order) for ``refsgd bench codec``."""

import time

import numpy as np

from refsgd.comm.codecs.quant8 import _q8v_set_scale, _q8v_step, _q8v_values, q8v_range, q8v_scale

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
        On an emulated link (:class:`refsgd.comm.linkcomm.LinkComm`) the ring counts and is held as
        one all-reduce of ``recv``."""
        from mpi4py import MPI  # noqa: PLC0415 mpi4py: the codecs are used without MPI (bench, serial)
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
        from mpi4py import MPI  # noqa: PLC0415 mpi4py: the codecs are used without MPI (bench, serial)
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
        from mpi4py import MPI  # noqa: PLC0415 mpi4py: the codecs are used without MPI (bench, serial)
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
