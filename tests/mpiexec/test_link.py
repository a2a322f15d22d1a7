"""The emulated link (refsgd.comm.link, the model; refsgd.comm.linkcomm, MPI held to it): the Pipe-SGD eq. 5 model and the delayed all-reduces.

Plain pytest runs the closed-form tests; the ``world(2)`` tests run on COMM_WORLD in the world
session of 2 ranks (tests.helpers.world). Timing checks are lower bounds (completion >= start + T)
plus loose upper bounds only.
"""

import time

import numpy as np
import pytest
from mpi4py import MPI

from refsgd import RefsgdError
from refsgd.comm import linkcomm
from refsgd.comm.link import Link, add_seconds, reduction_time
from refsgd.comm.linkcomm import LinkComm, LinkRequest, Traffic, waitall, wrap

N = 1000            # float64 elements per message (8000 bytes)
T_TARGET = 0.2      # seconds: the links below make one all-reduce of N doubles take this long
SLACK = 0.5         # loose upper bound on how late a completion may be


def link_for(t, nbytes, p, latency_us=1000.0):
    """A link whose Ring-AllReduce time for (nbytes, p) is t seconds (to 12 digits)."""
    return Link.for_time(t, nbytes, p, latency_us, digits=12)


# ------------------------------------------------------------------ closed form (no MPI needed)

def test_time_closed_form():
    link = Link(50, 10)  # alpha = 50e-6 s, beta = 0.8e-9 s/byte
    assert link.alpha == pytest.approx(50e-6)
    assert link.beta == pytest.approx(8 / 10e9)
    for nbytes, p in [(0, 2), (8, 2), (4_000_000, 2), (4_000_000, 4), (1234, 3), (10**9, 16)]:
        want = 2 * (p - 1) * 50e-6 + 2 * (p - 1) / p * nbytes * 0.8e-9
        assert link.time(nbytes, p) == pytest.approx(want, rel=1e-12)
    # 4 MB over 4 ranks: 6 * 50 us + 1.5 * 4e6 * 0.8 ns = 0.3 ms + 4.8 ms
    assert link.time(4_000_000, 4) == pytest.approx(0.0051, rel=1e-12)
    assert Link(0, 1).time(1_000_000_000, 2) == pytest.approx(8.0)  # 1 GB at 1 Gbit/s, p = 2
    assert Link(1e6, 1).time(0, 2) == pytest.approx(2.0)           # pure latency: 2 (p-1) alpha


def test_reduction_time_is_eq5s_gamma_term_measured_here():
    """R(n, p) = (p - 1) additions of a block of n / p bytes, timed on this machine (eq. 5's
    ((p - 1) / p) n gamma); 0 on one rank or for an empty message."""
    r = reduction_time(8_000_000, 4, np.float64)
    assert r == 3 * add_seconds(250_000, np.float64) and r > 0
    assert reduction_time(8_000_000, 1, np.float64) == 0.0 and reduction_time(0, 4, np.float32) == 0.0
    assert reduction_time(10, 4, np.float32) == 3 * add_seconds(1, np.float32)   # blocks round up to a value


def test_time_is_zero_on_one_rank():
    assert Link(50, 10).time(10**9, 1) == 0.0
    assert Link(1e6, 1e-6).time(123, 1) == 0.0


def test_link_for_hits_the_target():
    for p in (2, 3, 4):
        assert link_for(T_TARGET, 8 * N, p).time(8 * N, p) == pytest.approx(T_TARGET)


def test_for_time_rounds_to_a_spec_and_refuses_the_impossible():
    link = Link.for_time(3e-3, 2_592_040, 4, latency_us=50)
    assert link.time(2_592_040, 4) == pytest.approx(3e-3, rel=1e-3)
    assert Link.parse(f"{link.latency_us:g},{link.gbit_s:g}") == link
    with pytest.raises(RefsgdError, match="the latency alone takes longer"):
        Link.for_time(1e-4, 1000, 4, latency_us=50)  # 6 x 50 us > 0.1 ms
    with pytest.raises(RefsgdError, match="one rank"):
        Link.for_time(1e-3, 1000, 1)


def test_parse_and_str():
    link = Link.parse("50,10")
    assert (link.latency_us, link.gbit_s) == (50.0, 10.0)
    assert link == Link(50, 10)
    assert Link.parse(" 0 , 2.5 ") == Link(0, 2.5)
    assert Link.parse("1e3,0.1") == Link(1000, 0.1)
    assert str(link) == "emulated link: latency 50 us, 10 Gbit/s (Ring-AllReduce model, Pipe-SGD eq. 5)"
    assert repr(link) == "Link(50, 10)"


@pytest.mark.parametrize("text", ["abc", "", "50", "50,", ",10", "50,10,1", "-1,10", "50,0", "50,-3",
                                  "nan,10", "50,inf", "x,10", "0,1e-300", "1e20,10"])
def test_parse_errors(text):
    with pytest.raises(RefsgdError) as e:
        Link.parse(text)
    expected = "LATENCY_US,GBIT_S with latency in [0, 1e+07] us and bandwidth in [1e-06, 1e+06] Gbit/s"
    named = {"-1,10": "the latency -1 us is negative", "50,0": "the bandwidth 0 Gbit/s is not positive",
             "50,-3": "the bandwidth -3 Gbit/s is not positive"}  # the value at fault named
    if text in named:
        assert str(e.value) == f"--link {text}: {named[text]} (expected {expected})"
    else:
        assert str(e.value) == f"--link expects {expected}, got {text!r}"


def test_parse_error_message_example():
    with pytest.raises(RefsgdError, match=r"^--link expects LATENCY_US,GBIT_S with latency in \[0, 1e\+07\] us and "
                                          r"bandwidth in \[1e-06, 1e\+06\] Gbit/s, got 'abc'$"):
        Link.parse("abc")


def test_constructor_rejects_bad_values():
    for lat, bw in [(-1, 10), (0, 0), (0, -1), (float("nan"), 1)]:
        with pytest.raises(RefsgdError):
            Link(lat, bw)


def test_wrap_none_returns_the_same_object():
    comm = MPI.COMM_WORLD
    assert wrap(comm, None) is comm
    assert wrap(MPI.COMM_SELF, None) is MPI.COMM_SELF


def test_linkcomm_is_a_real_communicator_on_the_same_handle():
    link = Link(50, 10)
    c = wrap(MPI.COMM_SELF, link)
    assert isinstance(c, LinkComm) and isinstance(c, MPI.Intracomm)
    assert c is not MPI.COMM_SELF and c.link is link
    assert c == MPI.COMM_SELF and MPI.Comm.Compare(c, MPI.COMM_SELF) == MPI.IDENT
    assert c.Get_size() == 1
    d = c.Dup()
    try:
        assert isinstance(d, LinkComm) and d.link is link
        assert MPI.Comm.Compare(d, c) == MPI.CONGRUENT
    finally:
        d.Free()
    rewrapped = wrap(c, Link(1, 1))
    assert rewrapped.link == Link(1, 1) and c.link is link


def test_one_rank_is_not_delayed_and_records_metrics():
    c = wrap(MPI.COMM_SELF, Link(1e6, 1e-6))  # a 1 s latency: T would be huge if p > 1
    x = np.arange(5, dtype=np.float64)
    y = np.empty_like(x)
    t0 = time.perf_counter()
    req = c.Iallreduce(x, y)
    assert isinstance(req, LinkRequest)
    assert req.nbytes == 40 and req.deadline == req.start and req.start >= t0
    req.Wait()
    c.Allreduce(MPI.IN_PLACE, y)
    assert time.perf_counter() - t0 < SLACK
    np.testing.assert_array_equal(y, x)
    assert req == MPI.REQUEST_NULL and req.Test()


# ------------------------------------------------------------------ under MPI (2 and 4 ranks)

def setup_mpi():
    comm = MPI.COMM_WORLD
    p = comm.Get_size()
    link = link_for(T_TARGET, 8 * N, p)
    lc = wrap(comm, link)
    x = np.full(N, comm.Get_rank() + 1, dtype=np.float64)
    return comm, p, link, lc, x


def check_sum(y, p):
    np.testing.assert_array_equal(y, np.full(N, p * (p + 1) / 2))


@pytest.mark.world(2)
def test_iallreduce_sums_and_waits_at_least_T():
    comm, p, link, lc, x = setup_mpi()
    y = np.empty_like(x)
    T = link.time(8 * N, p) + reduction_time(8 * N, p, np.float64)   # transfer plus eq. 5's gamma term
    assert link.time(8 * N, p) == pytest.approx(T_TARGET)
    comm.Barrier()
    t0 = time.perf_counter()
    req = lc.Iallreduce(x, y)
    assert isinstance(req, LinkRequest) and isinstance(req, MPI.Request)
    assert req.nbytes == 8 * N
    # 1 ns: perf_counter counts seconds since boot, whose float spacing is 3.6e-12 s after 5 hours
    assert t0 <= req.start and req.deadline == pytest.approx(req.start + T, abs=1e-9)
    req.Wait()
    t1 = time.perf_counter()
    assert t1 >= req.deadline and t1 - t0 >= T
    assert t1 - t0 < T + SLACK
    check_sum(y, p)


@pytest.mark.world(2)
def test_iallreduce_in_place():
    comm, p, link, lc, x = setup_mpi()
    comm.Barrier()
    t0 = time.perf_counter()
    req = lc.Iallreduce(MPI.IN_PLACE, x)
    assert req.nbytes == 8 * N
    req.Wait()
    assert time.perf_counter() - t0 >= link.time(8 * N, p)
    check_sum(x, p)


@pytest.mark.world(2)
def test_blocking_allreduce_takes_at_least_T():
    comm, p, link, lc, x = setup_mpi()
    T = link.time(8 * N, p)
    y = np.empty_like(x)
    comm.Barrier()
    t0 = time.perf_counter()
    lc.Allreduce(x, y)
    dt = time.perf_counter() - t0
    assert T <= dt < T + SLACK
    check_sum(y, p)
    comm.Barrier()
    t0 = time.perf_counter()
    lc.Allreduce(MPI.IN_PLACE, y, op=MPI.MAX)
    assert time.perf_counter() - t0 >= T
    check_sum(y, p)


@pytest.mark.world(2)
def test_the_link_holds_transfer_plus_reduction(monkeypatch):
    """Pipe-SGD eq. 5: an all-reduce costs its transfer T(n, p) plus its reduction R (here a fake
    slow reduction of 0.15 s): a blocking all-reduce is held T + R, a request's deadline is
    start + T + R, and the compressed ring's hold adds the operator seconds it was given."""
    monkeypatch.setattr(linkcomm, "reduction_time", lambda nbytes, p, dtype: 0.15)
    comm, p, link, lc, x = setup_mpi()
    T = link.time(8 * N, p)
    y = np.empty_like(x)
    comm.Barrier()
    t0 = time.perf_counter()
    lc.Allreduce(x, y)
    dt = time.perf_counter() - t0
    assert T + 0.15 <= dt < T + 0.15 + SLACK
    check_sum(y, p)
    comm.Barrier()
    req = lc.Iallreduce(x, y)
    assert req.deadline == pytest.approx(req.start + T + 0.15, abs=1e-9)   # the link was free (held above)
    req.Wait()
    comm.Barrier()
    start = time.perf_counter()
    lc.hold_allreduce(start, y, reduce_s=0.05)      # the measured operator seconds replace R
    assert lc._free_at == pytest.approx(start + T + 0.05, abs=1e-9)
    assert time.perf_counter() >= start + T + 0.05


@pytest.mark.world(2)
def test_test_is_false_before_the_deadline_and_true_after_wait():
    comm, p, link, lc, x = setup_mpi()
    y = np.empty_like(x)
    comm.Barrier()
    req = lc.Iallreduce(x, y)
    flag = req.Test()
    if time.perf_counter() - req.start < link.time(8 * N, p) / 2:  # always, short of a 0.1 s stall
        assert flag is False
    # Test() never reports completion before the deadline
    while not req.Test():
        time.sleep(1e-3)
    assert time.perf_counter() >= req.deadline
    check_sum(y, p)
    req.Wait()  # a no-op on a completed request
    assert req.Test() is True

    comm.Barrier()
    req = lc.Iallreduce(x, y)
    assert req.Test() is False or time.perf_counter() >= req.deadline
    req.Wait()
    assert time.perf_counter() >= req.deadline
    assert req.Test() is True and req == MPI.REQUEST_NULL


@pytest.mark.world(2)
def test_waitall_waits_for_the_latest_deadline():
    comm, p, link, lc, x = setup_mpi()
    x2 = np.full(2 * N, 2 * (comm.Get_rank() + 1), dtype=np.float64)
    y, y2 = np.empty_like(x), np.empty_like(x2)
    comm.Barrier()
    t0 = time.perf_counter()
    reqs = [lc.Iallreduce(x, y), lc.Iallreduce(x2, y2)]
    assert reqs[1].nbytes == 16 * N
    T1 = link.time(8 * N, p) + reduction_time(8 * N, p, np.float64)
    T2 = link.time(16 * N, p) + reduction_time(16 * N, p, np.float64)
    # the second queues behind the first on the link
    assert reqs[1].deadline == pytest.approx(reqs[0].deadline + T2, abs=1e-9)
    waitall(reqs)
    t1 = time.perf_counter()
    assert t1 >= max(r.deadline for r in reqs) and t1 - t0 >= T1 + T2
    assert t1 - t0 < T1 + T2 + SLACK
    assert all(r == MPI.REQUEST_NULL for r in reqs)
    check_sum(y, p)
    np.testing.assert_array_equal(y2, np.full(2 * N, p * (p + 1)))


@pytest.mark.world(2)
def test_wrap_none_under_mpi_and_link_none_adds_no_delay():
    comm = MPI.COMM_WORLD
    assert wrap(comm, None) is comm
    lc = LinkComm(comm)  # no link: a plain communicator in a LinkComm's clothes
    x = np.ones(N)
    y = np.empty_like(x)
    req = lc.Iallreduce(x, y)
    req.Wait()
    assert req.deadline == req.start and req.nbytes == 8 * N
    np.testing.assert_array_equal(y, comm.Get_size())


@pytest.mark.world(2)
def test_overlapping_requests_queue_on_the_link():
    """Two requests started together: the second completes no earlier than start + 2T."""
    comm = LinkComm(MPI.COMM_WORLD, Link(0, 0.1))
    p = comm.Get_size()
    a, b = np.ones(100_000), np.ones(100_000)
    ra, rb = np.empty_like(a), np.empty_like(b)
    T = comm.link.time(a.nbytes, p)
    comm.Barrier()
    start = time.perf_counter()
    reqs = [comm.Iallreduce(a, ra), comm.Iallreduce(b, rb)]
    assert reqs[1].deadline >= reqs[0].deadline + T - 1e-9
    waitall(reqs)
    assert time.perf_counter() - start >= 2 * T
    assert ra[0] == p and rb[0] == p


@pytest.mark.world(2)
def test_a_message_occupies_the_senders_and_the_receivers_link():
    """Send holds the sender T_msg; Recv holds the receiver T_msg after the receipt: a round trip
    0 -> 1 -> 0 takes at least 2 T_msg at each end (a parameter server's push and reply), and both
    messages are counted once, at their sender."""
    traffic = Traffic()
    link = Link(1000.0, 0.01)                      # 1 ms and 8 ms for 10 kB
    lc = LinkComm(MPI.COMM_WORLD, link, traffic)
    x = np.arange(1250, dtype=np.float64)          # 10 kB
    T = link.message_time(x.nbytes)
    assert T == pytest.approx(1e-3 + x.nbytes * 8 / 0.01e9)
    rank = lc.Get_rank()
    lc.Barrier()
    t0 = time.perf_counter()
    if rank == 0:
        lc.Send(x, dest=1, tag=3)
        y = np.empty_like(x)
        lc.Recv(y, source=1, tag=4)
        np.testing.assert_array_equal(y, 2 * x)
    elif rank == 1:
        y = np.empty_like(x)
        lc.Recv(y, source=0, tag=3)
        assert time.perf_counter() - t0 >= T
        lc.Send(2 * y, dest=0, tag=4)
    dt = time.perf_counter() - t0
    if rank < 2:
        assert 2 * T <= dt < 2 * T + SLACK
        assert traffic.global_bytes == x.nbytes
    lc.Barrier()
