"""The emulated link's MPI side: communicators whose collectives take as long as a slow network.

The model (:class:`Link`, :func:`reduction_time`) is :mod:`refsgd.comm.link`, free of MPI; this
module holds MPI's calls to it.

Overlapped distributed-SGD methods only show their benefit when communication is slow relative to
compute, but on one machine MPI moves data through shared memory almost instantly. The emulated
link makes every all-reduce issued through a :class:`LinkComm` complete *no earlier than* the
Ring-AllReduce time model of Pipe-SGD (Li et al. 2018, eq. 5) with S = 0::

    T_AR(n, p) = X(n, p) + R
    X(n, p)    = 2 (p - 1) alpha  +  2 ((p - 1) / p) n beta           the transfer (Link.time)
    R          = ((p - 1) / p) n gamma                               the reduction

    alpha   latency of one message, in seconds            (LATENCY_US * 1e-6)
    beta    transfer time of one byte, in seconds/byte    (8 / (GBIT_S * 1e9))
    n       message size in bytes (the size of the receive buffer)
    p       number of ranks in the communicator;  T_AR = 0 when p == 1

R is eq. 5's gamma term, the reduction on the critical path of the all-reduce: for a plain
all-reduce, the time this machine takes to add the received blocks, p - 1 additions of n / p
bytes timed with NumPy (:func:`reduction_time`, measured once per size in a process); for the
compressed Ring-AllReduce of :mod:`refsgd.comm.codecs`, the seconds its operator (decompress, add,
compress at each of the p - 1 reduction steps) took on this rank in that very call, which the
ring hands to :meth:`LinkComm.hold_allreduce`. So D-Sync+T / D-Sync+Q pay their compression's
reduction on the critical path, as Pipe-SGD's Figure 4 explains, and a transfer longer than the
reduction no longer hides it. The synchronisation overhead S is taken as 0. Further assumptions
of the model: a ring over ``p`` ranks with ``2 (p - 1)`` steps (reduce-scatter then all-gather),
each step sending ``n / p`` bytes on every link at once, full-duplex links of equal bandwidth, no
congestion and no dependence on the datatype.

One link per communicator, first come first served: all-reduces that overlap in time queue
behind each other, each starting its transfer when the previous one's deadline has passed,
``deadline_k = max(start_k, deadline_{k-1}) + T_AR(n_k, p)``. So L segments sent back to back cost
``2(p-1) L alpha + 2((p-1)/p) n beta`` plus their reductions in all, the pipelined-communication
term of Pipe-SGD's eq. 6, rather than each getting the full bandwidth at once.

The link only ever *delays* completion; it never speeds anything up. The real collective runs
first (its data and results are real, and so is its CPU work), then the caller is held until
``start + T_AR``. If the real collective takes longer than the model (a large message, an
oversubscribed machine) the real time wins. Timings measured with an emulated link are therefore
those of a *modelled* network, and everything produced with it (logs, metrics, plots, reports)
must say so, e.g. by printing ``str(link)``; that is the callers' job.

What is delayed: ``LinkComm.Allreduce`` (blocking: returns no earlier than ``start + T_AR``; the
compressed Ring-AllReduce of :mod:`refsgd.comm.codecs`, made of ``Sendrecv`` calls, is held the
same way through ``LinkComm.hold_allreduce``, with its operator's measured seconds as R) and
``LinkComm.Iallreduce`` (returns a :class:`LinkRequest` whose ``Wait``/``Test`` do not report
completion before its ``deadline``, ``start + T_AR``); ``LinkComm.Gather`` and ``LinkComm.Bcast``, the exchanges of a
parameter server, by the parameter-server model ``(p - 1) (alpha + n beta)`` (every message passes
the root's one link; n the bytes of one rank's message); ``LinkComm.Send`` and ``LinkComm.Recv``
(DC-ASGD's pushes and replies) by ``T_msg = alpha + n beta`` each, on the sender's link after the
send and on the receiver's link after the receipt: a message occupies both ends' links, so a
server's one link carries its p - 1 round trips one after the other, ``(p - 1)(2 T_msg + t_up)``,
and a worker's round trip takes ``2 T_msg + t_up``, as the parameter-server model says. Use :func:`waitall` for lists of requests:
``MPI.Request.Waitall`` on LinkRequests completes the real requests but skips the emulated delay.
Everything else (the lowercase pickle-based ``allreduce``, ``Barrier``, ``Isend``, ...) is
inherited unchanged and not delayed.

Traffic: a LinkComm given a :class:`Traffic` counter (``wrap(comm, link, traffic=..., tier=...)``;
the command line always gives one, with or without a link) adds to it, on every call of these
four collectives over two or more ranks, the bytes of this rank's own contribution: the message
of an all-reduce, the send buffer of a non-root rank's ``Gather``, the buffer at the root of a
``Bcast``; and the buffer of every ``Send`` (a parameter server's pushes and replies). ``tier`` says where the communicator's messages travel: ``"global"`` (between nodes;
a flat method's world communicator) or ``"local"`` (within a node). Counted bytes are a
method's payload, not the bytes MPI's algorithm moves on the wire. Buffers are NumPy arrays (or anything exposing the buffer
protocol), with ``MPI.IN_PLACE`` allowed as the send buffer; a ``[array, MPI.DOUBLE]`` style
spec is accepted too, its size taken as the whole array's ``nbytes`` (an explicit count is not
looked at).

mpi4py notes (checked with mpi4py 4.1 / MPICH 5):

* ``LinkComm(comm)`` builds a second Python object that shares ``comm``'s MPI handle (no
  ``MPI_Comm_dup``; ``Compare`` gives ``MPI.IDENT``). It owns nothing: whoever created ``comm``
  frees it, once, and the LinkComm must not be used after that (nor freed as well).
* mpi4py subclasses of ``Comm``/``Request`` have a ``__dict__``, so ``link``, ``start``,
  ``deadline`` and ``nbytes`` are plain instance attributes.
* ``LinkComm.Dup()`` returns a LinkComm with the same link and traffic counter (overridden here:
  mpi4py keeps the subclass on ``Dup`` but not the instance attributes). ``Split``, ``Create`` and friends return
  plain ``MPI.Intracomm`` objects: wrap them again with :func:`wrap` if they should be delayed.
* ``LinkRequest(req)`` copies the handle out of ``req``; after ``Wait`` only the LinkRequest is
  reset to ``MPI.REQUEST_NULL``, so the original request object is dropped right away and never
  handed out. Dropping it frees nothing (mpi4py does not free requests on garbage collection).
* mpi4py 4.1 does not keep the buffers of a nonblocking collective alive: an ``Iallreduce`` into
  a temporary array that is garbage-collected before ``Wait`` corrupts the heap. A LinkRequest
  holds references to both buffers until it has completed, but callers should keep them anyway.
"""

import time

import numpy as np
from mpi4py import MPI

from refsgd.comm.link import reduction_time

# time.sleep() is used up to this long before a deadline; the rest is a busy-wait
_SPIN_S = 100e-6


def _sleep_until(deadline):
    """Return no earlier than ``time.perf_counter() == deadline`` (to ~0.1 ms)."""
    remaining = deadline - time.perf_counter()
    if remaining > _SPIN_S:
        time.sleep(remaining - _SPIN_S)
    while time.perf_counter() < deadline:
        pass


def _nbytes(buf):
    """Size in bytes of a buffer: an array / buffer-protocol object, or an ``[array, type...]`` spec."""
    if isinstance(buf, (list, tuple)):
        buf = buf[0]
    nbytes = getattr(buf, "nbytes", None)
    if nbytes is None:
        nbytes = memoryview(buf).nbytes
    return int(nbytes)


def _dtype(buf):
    """The NumPy dtype of a buffer (or of an ``[array, type...]`` spec); float32 when it has none."""
    if isinstance(buf, (list, tuple)):
        buf = buf[0]
    dtype = getattr(buf, "dtype", None)      # (a dtype's truth value is its number of fields)
    return np.dtype("float32") if dtype is None else np.dtype(dtype)


class LinkRequest(MPI.Request):
    """A real MPI request that does not report completion before ``deadline``.

    Attributes (``time.perf_counter()`` seconds): ``start`` (when the collective was issued),
    ``deadline`` (its turn on the link plus ``link.time(nbytes, p)`` plus the reduction R) and ``nbytes``
    (the message size).
    """

    def __new__(cls, request=None, start=0.0, deadline=0.0, nbytes=0, buffers=None):
        self = super().__new__(cls, request)
        self.start = start
        self.deadline = deadline
        self.nbytes = nbytes
        # mpi4py 4.1 does not keep an Iallreduce's buffers alive (nor does a copied request):
        # hold them here until the real request has completed
        self._buffers = buffers
        return self

    def Wait(self, status=None):
        """Real ``Wait``, then sleep until ``deadline``."""
        super().Wait(status)
        self._buffers = None
        _sleep_until(self.deadline)
        return True

    def Test(self, status=None):
        """True only once the real request has completed and ``deadline`` has passed."""
        if not super().Test(status):  # a completed (null) request tests True again
            return False
        self._buffers = None
        return time.perf_counter() >= self.deadline

    # the lowercase (pickle-based) wait()/test() would report completion in real time, without
    # the emulated delay: refuse them rather than silently skip the link
    def wait(self, status=None):
        raise NotImplementedError("LinkRequest: use Wait() (buffers), not wait() (pickled objects)")

    def test(self, status=None):
        raise NotImplementedError("LinkRequest: use Test() (buffers), not test() (pickled objects)")


def waitall(requests, statuses=None):
    """``MPI.Request.Waitall``, then sleep until the latest ``deadline`` among the requests.

    Plain ``MPI.Request`` objects may be mixed in (they add no delay). Calling
    ``MPI.Request.Waitall`` directly on LinkRequests would skip the emulated delay.
    """
    requests = list(requests)
    deadline = max((getattr(r, "deadline", 0.0) for r in requests), default=0.0)
    MPI.Request.Waitall(requests, statuses)
    for r in requests:
        if isinstance(r, LinkRequest):
            r._buffers = None
    _sleep_until(deadline)


class Traffic:
    """Bytes this process contributed to collectives, per tier (see the module docstring)."""

    __slots__ = ("global_bytes", "local_bytes")

    def __init__(self):
        self.global_bytes = 0
        self.local_bytes = 0

    def add(self, tier, nbytes):
        if tier == "local":
            self.local_bytes += nbytes
        else:
            self.global_bytes += nbytes


#: refsgd train --timeline: called with (start, end) of every modelled transfer, an all-reduce's
#: including its reduction R (None: no one listens)
observer = None


class LinkComm(MPI.Intracomm):
    """An ``MPI.Intracomm`` (same MPI handle as the one it is built from) whose all-reduces are
    held back to the emulated ``link``'s Ring-AllReduce time, transfer plus reduction
    (``link = None`` adds no delay) and
    whose payload is counted in ``traffic`` under ``tier`` (``traffic = None`` counts nothing)."""

    link = None
    traffic = None
    tier = "global"

    def __new__(cls, comm=None, link=None, traffic=None, tier=None):
        self = super().__new__(cls, comm)
        if isinstance(comm, LinkComm):
            link = comm.link if link is None else link
            traffic = comm.traffic if traffic is None else traffic
            tier = comm.tier if tier is None else tier
        self.link = link
        self.traffic = traffic
        self.tier = tier or "global"
        return self

    def _count(self, nbytes):
        if self.traffic is not None and self.Get_size() > 1:
            self.traffic.add(self.tier, nbytes)

    def _time(self, recvbuf, reduce_s=None):
        """(bytes, seconds) of an all-reduce into ``recvbuf``: the transfer ``T(n, p)`` plus its
        reduction, ``reduce_s`` (the operator seconds measured in the call) or, when None, the
        time this machine takes to add the received vectors (:func:`reduction_time`)."""
        nbytes = _nbytes(recvbuf)
        if self.link is None:
            return nbytes, 0.0
        p = self.Get_size()
        if reduce_s is None:
            reduce_s = reduction_time(nbytes, p, _dtype(recvbuf))
        return nbytes, self.link.time(nbytes, p) + (reduce_s if p > 1 else 0.0)

    def _deadline(self, start, t):
        """Queue a transfer of duration t arriving at ``start`` behind the ones on the link."""
        free = max(start, self.__dict__.get("_free_at", 0.0))
        self._free_at = free + t
        if observer is not None and t > 0:
            observer(free, free + t)
        return free + t

    def Allreduce(self, sendbuf, recvbuf, op=MPI.SUM):
        """The real ``Allreduce``, then sleep until its turn on the link plus ``T(nbytes, p)``
        plus the reduction's ``R(nbytes, p)`` (:func:`reduction_time`)."""
        start = time.perf_counter()
        super().Allreduce(sendbuf, recvbuf, op)
        self.hold_allreduce(start, recvbuf)

    def hold_allreduce(self, start, recvbuf, reduce_s=None):
        """Count, and hold the caller as, an all-reduce into ``recvbuf`` that started at ``start``
        (perf_counter seconds): an all-reduce made of point-to-point messages (the compressed
        Ring-AllReduce of :mod:`refsgd.comm.codecs`) costs what ``Allreduce`` does, its
        reduction being ``reduce_s``, the seconds its operator (decompress, add, compress) took
        on this rank in the call."""
        nbytes, t = self._time(recvbuf, reduce_s)
        self._count(nbytes)
        _sleep_until(self._deadline(start, t))

    def Iallreduce(self, sendbuf, recvbuf, op=MPI.SUM):
        """The real ``Iallreduce``; the returned LinkRequest completes no earlier than its turn on
        the link plus ``T(nbytes, p) + R(nbytes, p)``."""
        start = time.perf_counter()
        real = super().Iallreduce(sendbuf, recvbuf, op)
        nbytes, t = self._time(recvbuf)
        self._count(nbytes)
        return LinkRequest(real, start=start, deadline=self._deadline(start, t), nbytes=nbytes,
                           buffers=(sendbuf, recvbuf))

    def Gather(self, sendbuf, recvbuf, root=0):
        """The real ``Gather``, then sleep until its turn on the link plus the parameter-server
        time of the p - 1 messages (:meth:`Link.ps_time`)."""
        start = time.perf_counter()
        super().Gather(sendbuf, recvbuf, root)
        if self.Get_rank() != root:
            self._count(_nbytes(sendbuf))
        t = 0.0 if self.link is None else self.link.ps_time(_nbytes(sendbuf), self.Get_size())
        _sleep_until(self._deadline(start, t))

    def Bcast(self, buf, root=0):
        """The real ``Bcast``, then sleep until its turn on the link plus the parameter-server
        time of the p - 1 messages (:meth:`Link.ps_time`)."""
        start = time.perf_counter()
        super().Bcast(buf, root)
        if self.Get_rank() == root:
            self._count(_nbytes(buf))
        t = 0.0 if self.link is None else self.link.ps_time(_nbytes(buf), self.Get_size())
        _sleep_until(self._deadline(start, t))

    def Send(self, buf, dest, tag=0):
        """The real ``Send``, its payload counted (a parameter server's pushes and replies), then
        held until its turn on this rank's link plus ``T_msg = alpha + n beta``."""
        start = time.perf_counter()
        super().Send(buf, dest, tag)
        nbytes = _nbytes(buf)
        self._count(nbytes)
        if self.link is not None:
            _sleep_until(self._deadline(start, self.link.message_time(nbytes)))

    def Recv(self, buf, source=MPI.ANY_SOURCE, tag=MPI.ANY_TAG, status=None):
        """The real ``Recv``, then held until the message's turn on this rank's link plus
        ``T_msg`` (the size of ``buf``): a message occupies the sender's link and the receiver's."""
        super().Recv(buf, source, tag, status)
        if self.link is not None:
            _sleep_until(self._deadline(time.perf_counter(), self.link.message_time(_nbytes(buf))))

    def Dup(self, info=None):
        """A duplicate (a new MPI communicator, freed by the caller) with the same link, traffic
        counter and tier."""
        dup = super().Dup() if info is None else super().Dup(info)
        dup.link, dup.traffic, dup.tier = self.link, self.traffic, self.tier
        return dup


def wrap(comm, link, traffic=None, tier="global"):
    """``comm`` unchanged when ``link`` and ``traffic`` are None, else a LinkComm on the same MPI
    communicator (delayed by ``link``, counted in ``traffic`` under ``tier``)."""
    if link is None and traffic is None:
        return comm
    if not isinstance(comm, MPI.Intracomm):
        raise TypeError(f"the emulated link needs an MPI.Intracomm, got {type(comm).__name__}")
    return LinkComm(comm, link, traffic, tier)
