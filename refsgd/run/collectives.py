"""The Run's collectives (:class:`Collectives`, ``run.collectives``): the sums over ranks a
method's listing calls (``MPI_Allreduce``, refsgd's Ring-AllReduce under ``--allreduce ring``, a
compressed wire under ``--compress``), its non-blocking requests and their waits, and the
communication of a thread beside the loop; each timed by the Run's clock (:mod:`refsgd.run.timing`)."""

import contextlib
import time

import numpy as np
from mpi4py import MPI

from refsgd.comm import codecs
from refsgd.comm.linkcomm import waitall  # plain requests too; honours emulated deadlines


class Collectives:
    """The collectives of a Run (see the module docstring): its state is the wires and rings it
    opened, the channels of a thread beside the loop, and the requests in flight (``pending``:
    (request, start)); ``ring``: --allreduce ring, every uncompressed sum over ranks is refsgd's
    Ring-AllReduce (:meth:`ring_sum`). ``comm``: the run's communicator (a thread's channel is
    its duplicate), ``clock``: the Run's, ``trainable``: the network's mask (:meth:`average_model`)."""

    def __init__(self, comm, cfg, clock, trainable):
        self.comm, self.clock, self.trainable = comm, clock, trainable
        self.compress = cfg.compress
        self.ring = cfg.allreduce == "ring"
        self.pending = []
        self._rings = {}
        self._wires = []        # open_wire's, closed by the loop's end (closing_wires)
        self._channels = []     # thread_channel's, freed once the thread has ended (free_channels)

    def open_wire(self):
        """The MPI datatype and operator of the ``--compress`` codec (None without one), for the
        loop's thread; the Run closes it when its loop ends (or is left by an error)."""
        name = self.compress
        if name in (None, "none"):
            return None
        wire = codecs.get(name).open()
        self._wires.append(wire)
        return wire

    @contextlib.contextmanager
    def closing_wires(self):
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
        with self.clock.idle(label, x):
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
            with self.clock.idle(label, x):
                comm.Allreduce(x, out, op=MPI.SUM)
            return out
        send, recv = wire.scratch(x.size)
        line = (label or "").split(" ")[0]
        with self.clock.codec(f"{line} Compress ({wire.codec.name})"):
            wire.codec.encode(x, send)
        with self.clock.idle(label, send):
            wire.allreduce_wire(comm, send, recv)
        with self.clock.codec(f"{line} Decompress ({wire.codec.name})"):
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
        with self.clock.idle(label):  # MPI's work to start it is communication on this path
            return self.started(comm.Iallreduce(x, out, op=MPI.SUM), label, x)

    @contextlib.contextmanager
    def thread_comm(self, label, it=None, data=None):
        """The enclosed blocking communication of a thread beside the loop (Pipe-SGD's C4 in its
        communication thread, :meth:`refsgd.run.Run.beside`): communication in flight while it runs, counted in
        the ``comm`` of the iteration it ends in (the loop takes these spans at each boundary) and,
        with --timeline, a span ``comm`` on the thread's track (``it``: the iteration it serves,
        ``data``: the buffer it sends). Not timed as idle: the loop does not wait for it here."""
        t0 = time.perf_counter()
        yield
        t1 = time.perf_counter()
        self.clock.thread_spans.append((t0, t1))     # list.append is atomic: the loop pops from the front
        tl = self.clock.timeline
        if tl.active:
            tl.add("comm", label, t0, t1, getattr(data, "nbytes", 0), it)

    def started(self, req, label=None, data=None):
        """Note the start of a non-blocking request (its lifetime counts as communication).
        For --timeline: ``label`` the listing line, ``data`` the buffer it sends."""
        now = time.perf_counter()
        self.pending.append((req, now))
        tl = self.clock.timeline
        # in flight from its posting (the idle time that encloses the call, if any)
        tl.depart(id(req), label, now if tl.idle_start is None else tl.idle_start, getattr(data, "nbytes", 0))
        tl.posted = True
        return req

    def wait(self, req, label=None):
        """req.Wait(), timed as idle (label: its listing line, for --timeline); None (no request in
        flight, e.g. :meth:`iallreduce` under ``--allreduce ring``): nothing."""
        if req is None:
            return
        t0, c0 = time.perf_counter(), self.clock.compiled.seconds
        req.Wait()
        t1 = time.perf_counter()
        self._finish(req, t0, t1, label)
        self.clock.add("idle", label, t0, t1, c0)

    def waitall(self, reqs, label=None):
        """Every request of ``reqs`` completed (MPI_Waitall), timed as idle as :meth:`wait`."""
        t0, c0 = time.perf_counter(), self.clock.compiled.seconds
        waitall(reqs)
        t1 = time.perf_counter()
        for r in reqs:
            self._finish(r, t0, t1, label)
        self.clock.add("idle", label or "complete the requests in flight", t0, t1, c0)

    def complete_pending(self):
        """Complete the requests still in flight (before a trace record, a checkpoint or a stop):
        their receive buffers are registered state."""
        if self.pending:  # leave no request behind
            self.waitall([r for r, _ in self.pending])

    def _finish(self, req, t0, t1, label=None):
        """The request's lifetime as communication: from its start (started) or, for one not
        noted, from the wait (t0), so that idle time always lies within the time in flight."""
        self.clock.timeline.land(id(req), t1, since=t0, label=label)
        for i, (r, s) in enumerate(self.pending):
            if r is req:
                self.clock.spans.append((s, t1))
                del self.pending[i]
                return
        self.clock.spans.append((t0, t1))

    def average_model(self, comm, w, out):
        """out <- the mean over the ranks of ``comm`` of their w (collective, blocking; untimed: the
        caller marks it). The frozen parameters, the same on every rank and never moved, are
        copied from w: (w + w + w) / 3 can miss w by one ulp, and a frozen weight must stay
        bitwise its initial value."""
        if self.ring:  # --allreduce ring: the evaluated model in the ring's order too
            self._ring(w.dtype).allreduce_wire(comm, w, out)
        else:
            comm.Allreduce(w, out, op=MPI.SUM)
        np.divide(out, comm.Get_size(), out=out)
        if not self.trainable.all():
            np.copyto(out, w, where=~self.trainable)
        return out

    def thread_channel(self, dtype):
        """(comm, wire) of a thread beside the loop that sums over the ranks (Pipe-SGD's
        communication thread): a duplicate of the run's communicator, so that its collectives never
        meet the loop's, and the ring that carries its sums: the ``--compress`` codec's, under
        ``--allreduce ring`` the uncompressed one of ``dtype``, else None (``MPI_Allreduce``). The
        Run frees both once the thread has ended (:meth:`refsgd.run.Run.beside`, :meth:`free_channels`)."""
        comm = self.comm.Dup()
        self._channels.append(comm.Free)
        name = self.compress
        wire = (codecs.get(name).open() if name not in (None, "none") else
                codecs.plain(dtype).open() if self.ring else None)
        if wire is not None:
            self._channels.append(wire.close)
        return comm, wire

    def free_channels(self):
        """Free the channels of :meth:`thread_channel` (their thread has ended)."""
        while self._channels:
            self._channels.pop()()
