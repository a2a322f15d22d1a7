"""The emulated link's model (``--link LATENCY_US,GBIT_S``): :class:`Link` and the times it gives.

Pure arithmetic on sizes and seconds, no MPI: the benchmarks' timing models, ``refsgd reproduce``
and the command line's checks use it without starting MPI. :mod:`refsgd.comm.linkcomm` holds an
MPI communicator's collectives to these times (its docstring tells the whole model)::

    T_AR(n, p) = X(n, p) + R                                        0 when p == 1
    X(n, p)    = 2 (p - 1) alpha  +  2 ((p - 1) / p) n beta          the transfer (Link.time)
    R          = ((p - 1) / p) n gamma                              the reduction (reduction_time)
    T_msg      = alpha + n beta                                     one message (Link.message_time)
    T_PS       = (p - 1) (alpha + n beta)                           a parameter server (Link.ps_time)

    alpha   latency of one message, in seconds            (LATENCY_US * 1e-6)
    beta    transfer time of one byte, in seconds/byte    (8 / (GBIT_S * 1e9))
"""

import math
import time

import numpy as np

from refsgd.errors import RefsgdError


#: the range of an emulated link (beyond it, the model's times overflow or mean nothing)
MAX_LATENCY_US = 1e7
MIN_GBIT_S, MAX_GBIT_S = 1e-6, 1e6


class Link:
    """A modelled network link: ``latency_us`` microseconds per message, ``gbit_s`` Gbit/s."""

    __slots__ = ("latency_us", "gbit_s")

    def __init__(self, latency_us, gbit_s):
        latency_us, gbit_s = float(latency_us), float(gbit_s)
        if not (math.isfinite(latency_us) and math.isfinite(gbit_s) and latency_us >= 0 and gbit_s > 0):
            raise RefsgdError("emulated link needs latency >= 0 us and bandwidth > 0 Gbit/s (both finite), "
                              f"got latency {latency_us:g} us, bandwidth {gbit_s:g} Gbit/s")
        self.latency_us = latency_us
        self.gbit_s = gbit_s

    @property
    def alpha(self):
        """Latency in seconds."""
        return self.latency_us * 1e-6

    @property
    def beta(self):
        """Transfer time of one byte in seconds."""
        return 8.0 / (self.gbit_s * 1e9)

    def time(self, nbytes, p):
        """X: the Ring-AllReduce's transfer time (s) of an ``nbytes`` message over ``p`` ranks
        (Pipe-SGD eq. 5 without its reduction term, which :class:`LinkComm` adds)."""
        if p <= 1:
            return 0.0
        return 2 * (p - 1) * self.alpha + 2 * ((p - 1) / p) * nbytes * self.beta

    def message_time(self, nbytes):
        """T_msg (s): one point-to-point message of ``nbytes``, ``alpha + n beta``."""
        return self.alpha + nbytes * self.beta

    def ps_time(self, nbytes, p):
        """Parameter-server time (s) of one direction: the p - 1 messages of ``nbytes`` between
        the server and its workers all pass the server's one link."""
        if p <= 1:
            return 0.0
        return (p - 1) * (self.alpha + nbytes * self.beta)

    @classmethod
    def for_time(cls, seconds, nbytes, p, latency_us=50.0, digits=4):
        """The link with ``latency_us`` whose Ring-AllReduce of (nbytes, p) takes ``seconds``;
        the bandwidth is rounded to ``digits`` significant figures, so that ``"%g,%g"`` of the
        result is a --link spec giving the same link."""
        transfer = seconds - 2 * (p - 1) * latency_us * 1e-6
        if p <= 1 or nbytes <= 0 or transfer <= 0:
            raise RefsgdError(f"no link makes an all-reduce of {nbytes} bytes over {p} rank(s) take "
                              f"{1e3 * seconds:.3g} ms with a latency of {latency_us:g} us "
                              "(one rank, or the latency alone takes longer)")
        gbit = 2 * ((p - 1) / p) * nbytes * 8 / transfer / 1e9
        return cls(latency_us, float(f"{gbit:.{digits}g}"))

    @classmethod
    def parse(cls, text, flag="--link"):
        """``"LATENCY_US,GBIT_S"`` (e.g. ``"50,10"``) -> Link; RefsgdError on anything else."""
        expected = (f"LATENCY_US,GBIT_S with latency in [0, {MAX_LATENCY_US:g}] us and bandwidth in "
                    f"[{MIN_GBIT_S:g}, {MAX_GBIT_S:g}] Gbit/s")
        msg = f"{flag} expects {expected}, got {text!r}"
        parts = str(text).split(",")
        if len(parts) != 2:
            raise RefsgdError(msg)
        try:
            lat, bw = float(parts[0]), float(parts[1])
        except ValueError:
            raise RefsgdError(msg) from None
        if lat < 0:
            raise RefsgdError(f"{flag} {text}: the latency {lat:g} us is negative (expected {expected})")
        if bw <= 0:
            raise RefsgdError(f"{flag} {text}: the bandwidth {bw:g} Gbit/s is not positive (expected {expected})")
        if not (0 <= lat <= MAX_LATENCY_US and MIN_GBIT_S <= bw <= MAX_GBIT_S):  # NaN fails too
            raise RefsgdError(msg)
        return cls(lat, bw)

    def __str__(self):
        return (f"emulated link: latency {self.latency_us:g} us, {self.gbit_s:g} Gbit/s "
                "(Ring-AllReduce model, Pipe-SGD eq. 5)")

    def __repr__(self):
        return f"Link({self.latency_us:g}, {self.gbit_s:g})"

    def __eq__(self, other):
        if not isinstance(other, Link):
            return NotImplemented
        return (self.latency_us, self.gbit_s) == (other.latency_us, other.gbit_s)

    def __hash__(self):
        return hash((self.latency_us, self.gbit_s))


_ADD_SECONDS = {}


def add_seconds(count, dtype):
    """Seconds this machine takes to add two vectors of ``count`` values of ``dtype`` element-wise
    (``np.add`` into one of them), the fastest of 5 after a warm-up; measured once per size and
    dtype in a process and remembered (a few microseconds to milliseconds)."""
    key = (int(count), np.dtype(dtype).str)
    if key not in _ADD_SECONDS:
        a, b = np.ones(count, dtype), np.ones(count, dtype)
        np.add(a, b, out=a)
        best = math.inf
        for _ in range(5):
            t0 = time.perf_counter()
            np.add(a, b, out=a)
            best = min(best, time.perf_counter() - t0)
        _ADD_SECONDS[key] = best
    return _ADD_SECONDS[key]


def reduction_time(nbytes, p, dtype):
    """R(n, p): the reduction of a plain Ring-AllReduce of ``nbytes`` over ``p`` ranks, eq. 5's
    ``((p - 1) / p) n gamma``: p - 1 additions of a block of n / p bytes, timed on this machine
    (:func:`add_seconds`); 0 on one rank."""
    if p <= 1 or nbytes <= 0:
        return 0.0
    count = max(1, -(-int(nbytes) // (p * np.dtype(dtype).itemsize)))
    return (p - 1) * add_seconds(count, dtype)
