"""The Run's collectives: the sums over ranks a method's listing calls (``MPI_Allreduce``, refsgd's
Ring-AllReduce under ``--allreduce ring``, a compressed wire under ``--compress``), its
non-blocking requests and their waits, and the communication of a thread beside the loop; each
timed through the Run's timing points (:mod:`refsgd.run.timing`); mixed into :class:`Run`."""

import contextlib
import time

import numpy as np
from mpi4py import MPI

from refsgd.comm import codecs
from refsgd.comm.linkcomm import waitall  # plain requests too; honours emulated deadlines


class Collectives:
    """The collectives of a Run (see the module docstring)."""

    def open_wire(self):
        """The MPI datatype and operator of the ``--compress`` codec (None without one), for the
        loop's thread; the Run closes it when :meth:`iterations` ends (or is left by an error)."""
        name = self.cfg.compress
        if name in (None, "none"):
            return None
        wire = codecs.get(name).open()
        self._wires.append(wire)
        return wire

    @contextlib.contextmanager
    def _closing_wires(self):
        """Close the wires of :meth:`open_wire` when the loop ends, however it ends."""
        try:
            yield
        finally:
            while self._wires:
                self._wires.pop().close()

    def _ring(self, dtype):
        """The uncompressed Ring-AllReduce of ``dtype`` (one per dtype, its scratch reused; the loop's
        thread only: a method whose other thread sums opens its own, ``codecs.plain(dtype).open()``)."""
        dtype = np.dtype(dtype)
        if dtype not in self._rings:
            self._rings[dtype] = codecs.plain(dtype).open()
        return self._rings[dtype]

    def ring_sum(self, comm, x, out, label=None):
        """Blocking ``out <- sum over the ranks of comm of x`` by refsgd's Ring-AllReduce over
        point-to-point messages, uncompressed, in x's dtype (``--allreduce ring``; the order is
        :meth:`refsgd.comm.codecs.Wire.allreduce_wire`'s, the serial renderings'), timed as idle.
        A method whose listing starts an ``MPI_Iallreduce`` calls :meth:`iallreduce`, which takes
        this path under ``--allreduce ring``: the sum is complete on return."""
        with self.idle(label, x):
            self._ring(x.dtype).allreduce_wire(comm, x, out)
        return out

    def allreduce_sum(self, comm, x, out, wire=None, label=None):
        """Blocking ``out <- sum over ranks of x`` (idle): ``MPI_Allreduce`` with ``MPI_SUM``, or
        under ``--allreduce ring`` refsgd's uncompressed ring (:meth:`ring_sum`). With a codec
        ``wire`` (open_wire), x is compressed (codec), the ring carries and adds the compressed
        form (idle), and the result is decompressed into out (codec). label: the listing line
        (--timeline)."""
        if wire is None:
            if self.ring:
                return self.ring_sum(comm, x, out, label)
            with self.idle(label, x):
                comm.Allreduce(x, out, op=MPI.SUM)
            return out
        send, recv = wire.scratch(x.size)
        line = (label or "").split(" ")[0]
        with self.codec(f"{line} Compress ({wire.codec.name})"):
            wire.codec.encode(x, send)
        with self.idle(label, send):
            wire.allreduce_wire(comm, send, recv)
        with self.codec(f"{line} Decompress ({wire.codec.name})"):
            wire.codec.decode(recv, out)
        return out

    def iallreduce(self, comm, x, out, label=None):
        """The non-blocking twin of :meth:`allreduce_sum`: start ``out <- sum over the ranks of comm
        of x`` and return its request, for :meth:`wait`. ``MPI_Iallreduce`` with ``MPI_SUM``, MPI's
        work to start it timed as idle and its lifetime as communication (:meth:`started`); under
        ``--allreduce ring`` refsgd's uncompressed ring, blocking: the sum is complete on return and
        the request is None (nothing in flight; :meth:`wait` of None returns at once). label: the
        listing line, ``"L5 MPI_Iallreduce(dw_i)"``; the ring's span says ``ring all-reduce`` there."""
        if self.ring:
            self.ring_sum(comm, x, out, label=label and label.replace("MPI_Iallreduce", "ring all-reduce"))
            return None
        with self.idle(label):  # MPI's work to start it is communication on this path
            return self.started(comm.Iallreduce(x, out, op=MPI.SUM), label, x)

    @contextlib.contextmanager
    def thread_comm(self, label, it=None, data=None):
        """The enclosed blocking communication of a thread beside the loop (Pipe-SGD's C4 in its
        communication thread, :meth:`beside`): communication in flight while it runs, counted in
        the ``comm`` of the iteration it ends in (the loop takes these spans at each boundary) and,
        with --timeline, a span ``comm`` on the thread's track (``it``: the iteration it serves,
        ``data``: the buffer it sends). Not timed as idle: the loop does not wait for it here."""
        t0 = time.perf_counter()
        yield
        t1 = time.perf_counter()
        self._thread_spans.append((t0, t1))     # list.append is atomic: the loop pops from the front
        tl = self.timeline
        if tl.active:
            tl.add("comm", label, t0, t1, getattr(data, "nbytes", 0), it)

    def started(self, req, label=None, data=None):
        """Note the start of a non-blocking request (its lifetime counts as communication).
        For --timeline: ``label`` the listing line, ``data`` the buffer it sends."""
        now = time.perf_counter()
        self._pending.append((req, now))
        tl = self.timeline
        # in flight from its posting (the idle time that encloses the call, if any)
        tl.depart(id(req), label, now if tl.idle_start is None else tl.idle_start, getattr(data, "nbytes", 0))
        tl.posted = True
        return req

    def wait(self, req, label=None):
        """req.Wait(), timed as idle (label: its listing line, for --timeline); None (no request in
        flight, e.g. :meth:`iallreduce` under ``--allreduce ring``): nothing."""
        if req is None:
            return
        t0, c0 = time.perf_counter(), self._compiled.seconds
        req.Wait()
        t1 = time.perf_counter()
        self._idle += self._less_compiling(t1 - t0, c0)
        self._finish(req, t0, t1, label)
        tl = self.timeline
        if tl.active:
            tl.add("idle", label, t0, t1)

    def waitall(self, reqs, label=None):
        t0, c0 = time.perf_counter(), self._compiled.seconds
        waitall(reqs)
        t1 = time.perf_counter()
        self._idle += self._less_compiling(t1 - t0, c0)
        for r in reqs:
            self._finish(r, t0, t1, label)
        tl = self.timeline
        if tl.active:
            tl.add("idle", label or "complete the requests in flight", t0, t1)

    def _finish(self, req, t0, t1, label=None):
        """The request's lifetime as communication: from its start (started) or, for one not
        noted, from the wait (t0), so that idle time always lies within the time in flight."""
        self.timeline.land(id(req), t1, since=t0, label=label)
        for i, (r, s) in enumerate(self._pending):
            if r is req:
                self._spans.append((s, t1))
                del self._pending[i]
                return
        self._spans.append((t0, t1))
