"""Codecs: exact definitions against NumPy and worked values; compressed all-reduces (the ring)
under mpiexec at 2, 3 and 4 ranks against closed forms, the float64 sum's error bound, and the
serial rendering's model of the ring's order."""

import time

import numpy as np
import pytest

from refsgd.comm import codecs
from refsgd.comm.codecs import Q8_BLOCK
from refsgd.serial.codecs import allreduce_sum

rng = np.random.default_rng(7)


def roundtrip(name, x):
    c = codecs.get(name)
    w = c.encode(np.asarray(x, np.float32), c.empty(len(x)))
    return c.decode(w, np.empty(len(x), np.float32))


def reduce_step(name, a, b):
    c = codecs.get(name)
    wa, wb = c.encode(np.asarray(a, np.float32), c.empty(len(a))), c.encode(np.asarray(b, np.float32), c.empty(len(b)))
    return c.decode(c.add(wa, wb), np.empty(len(a), np.float32))


# ---------------------------------------------------------------------------- definitions
def test_fp16_decodes_every_half_as_numpy():
    h = np.arange(65536, dtype=np.uint16)
    out = codecs.get("fp16").decode(h, np.empty(65536, np.float32))
    ref = h.view(np.float16).astype(np.float32)
    nan = np.isnan(ref)
    assert np.array_equal(np.isnan(out), nan)
    assert np.array_equal(out[~nan].view(np.uint32), ref[~nan].view(np.uint32))  # -0.0 and subnormals too


def test_fp16_encodes_as_numpy_round_to_nearest_even():
    bits = rng.integers(0, 2 ** 32, 500_000, dtype=np.uint64).astype(np.uint32)
    ties = (np.arange(65536, dtype=np.uint32) << 13) | 0x1000          # exactly half-way between halves
    x = np.concatenate([bits.view(np.float32), ties.view(np.float32),
                        rng.standard_normal(50_000).astype(np.float32) * np.float32(1e-6)])
    c = codecs.get("fp16")
    w = c.encode(x, c.empty(x.size))
    with np.errstate(all="ignore"):
        ref = x.astype(np.float16).view(np.uint16)
    nan = np.isnan(x)
    assert np.array_equal(w[~nan], ref[~nan])
    assert np.all(np.isnan(w[nan].view(np.float16)))


@pytest.mark.parametrize("name,x,expected", [
    # t16 keeps 7 fraction bits and drops the rest: rounds toward zero
    ("t16", [1 + 2 ** -7, 1 + 2 ** -8, 1 + 2 ** -7 + 2 ** -8, -(1 + 2 ** -7 + 2 ** -8), 3.0],
     [1 + 2 ** -7, 1.0, 1 + 2 ** -7, -(1 + 2 ** -7), 3.0]),
    # bf16 rounds to nearest, ties to even
    ("bf16", [1 + 2 ** -8, 1 + 3 * 2 ** -8, 1 + 2 ** -7 + 2 ** -9, -(1 + 2 ** -8 + 2 ** -20), 3.0],
     [1.0, 1 + 2 ** -6, 1 + 2 ** -7, -(1 + 2 ** -7), 3.0]),
    # fp16: 10 fraction bits, subnormals from 2^-24, largest 65504, beyond that infinity
    ("fp16", [1 + 2 ** -11, 1 + 3 * 2 ** -11, 2 ** -24, 2 ** -26, 65504.0, 65520.0],
     [1.0, 1 + 2 ** -9, 2 ** -24, 0.0, 65504.0, np.inf]),
])
def test_worked_values(name, x, expected):
    np.testing.assert_array_equal(roundtrip(name, x), np.array(expected, np.float32))


def test_q8_worked_block():
    # scale 254 / 127 = 2: q = rint(v / 2), ties to even (5/2 = 2.5 -> 2, 3/2 = 1.5 -> 2)
    x = np.array([254.0, -254.0, 5.0, 3.0, 0.9, 1.1, -7.0], np.float32)
    np.testing.assert_array_equal(roundtrip("q8", x), [254, -254, 4, 4, 0, 2, -8])


def test_q8_blocks_carry_their_own_scale():
    x = np.zeros(2 * Q8_BLOCK + 3, np.float32)
    x[0], x[1] = 127.0, 1.0                        # block 0: scale 1
    x[Q8_BLOCK], x[Q8_BLOCK + 1] = 0.127, 0.001    # block 1: scale 0.001
    x[2 * Q8_BLOCK] = -3.0                         # block 2 (3 values, padded): scale 3/127
    out = roundtrip("q8", x)
    assert out[0] == 127 and out[1] == 1
    np.testing.assert_allclose(out[Q8_BLOCK:Q8_BLOCK + 2], [0.127, 0.001], rtol=1e-6)
    assert out[2 * Q8_BLOCK] == np.float32(-3.0) / np.float32(127) * np.float32(127)
    c = codecs.get("q8")
    assert c.empty(x.size).nbytes == 3 * (4 + Q8_BLOCK)


def test_q8v_worked_vector_one_scale():
    """q8v: one scale for the whole vector (max |x| / 127), in a 4-byte header before n int8."""
    x = np.zeros(2 * Q8_BLOCK + 3, np.float32)
    x[0], x[1] = 127.0, 1.0                        # the vector's range: 127, scale 1
    x[Q8_BLOCK], x[Q8_BLOCK + 1] = 0.127, -2.5     # q8 keeps 0.127 (its block's own scale); q8v: rint(0.127) = 0
    c = codecs.get("q8v")
    w = c.encode(x, c.empty(x.size))
    assert w.nbytes == 4 + x.size and codecs.q8v_scale(w) == 1.0
    out = roundtrip("q8v", x)
    np.testing.assert_array_equal(out[[0, 1, Q8_BLOCK, Q8_BLOCK + 1]], [127, 1, 0, -2])   # -2.5: ties to even
    assert roundtrip("q8", x)[Q8_BLOCK] == np.float32(6) * (np.float32(2.5) / np.float32(127))  # its block: 2.5 / 127


def test_q8v_roundtrip_error_bound_and_more_error_than_q8_with_outliers():
    """|dec(enc(x)) - x| <= s / 2 with s = max|x| / 127 the vector's one scale (float32 rounding
    aside); on a gradient with a few outliers q8v errs far more than q8, whose other blocks keep
    their own small scales."""
    x = (rng.standard_normal(50 * Q8_BLOCK) * 1e-3).astype(np.float32)
    x[[7, 3000, 9000]] = [2.0, -1.5, 1.0]          # outliers in 3 of the 50 blocks
    s = np.float32(np.max(np.abs(x))) / np.float32(127)
    e8v, e8 = np.abs(roundtrip("q8v", x) - x), np.abs(roundtrip("q8", x) - x)
    assert np.all(e8v <= s / 2 * (1 + 1e-6))
    assert e8v.max() > s / 2 * 0.9                  # the bound is reached (the small values round to 0)
    assert np.mean(e8v) > 10 * np.mean(e8)          # here about 16x: q8 pays only in the outliers' 3 blocks
    assert np.array_equal(roundtrip("q8v", x)[np.abs(x) < s / 2], np.zeros(np.sum(np.abs(x) < s / 2), np.float32))


def test_q8v_zero_and_non_finite_vectors_and_the_step_scale():
    assert np.all(roundtrip("q8v", np.zeros(5)) == 0)
    assert np.all(np.isnan(roundtrip("q8v", [1.0, np.inf, 0.0])))   # one scale: the whole vector is NaN
    c = codecs.get("q8v")
    a, b = c.encode(np.array([127.0, 1.0, -3.0]), c.empty(3)), c.encode(np.array([63.5, 0.25, 1.0]), c.empty(3))
    c.add(a, b)                                      # scales 1 and 0.5: the sum at 1.5
    assert codecs.q8v_scale(b) == np.float32(1.5)
    # rint((127 + 63.5) / 1.5) = 127, rint((1 + 0.5) / 1.5) = 1, rint((-3 + 1) / 1.5) = rint(-1.33) = -1
    np.testing.assert_array_equal(c.decode(b, np.empty(3, np.float32)), np.float32([127, 1, -1]) * np.float32(1.5))
    # docs/implementers.md's worked example of the ring at N = 2 (blocks [0, 2) and [2, 3))
    np.testing.assert_array_equal(allreduce_sum(np.array([[127, 1, -3], [63.5, 0.25, 1]]), "q8v"), [190.5, 1.5, -1.5])


def test_q8_zero_and_non_finite_blocks():
    x = np.zeros(2 * Q8_BLOCK, np.float32)
    x[Q8_BLOCK + 5] = np.inf
    out = roundtrip("q8", x)
    assert np.all(out[:Q8_BLOCK] == 0)
    assert np.all(np.isnan(out[Q8_BLOCK:]))       # a non-finite value spoils its block, never silently


def test_non_finite_values_survive_the_16_bit_codecs():
    x = np.array([np.nan, np.inf, -np.inf], np.float32)
    x[0] = np.uint32(0x7F800001).view(np.float32)  # a NaN whose payload lives in the dropped bits
    for name in ("t16", "bf16", "fp16"):
        out = roundtrip(name, x)
        assert np.isnan(out[0]) and out[1] == np.inf and out[2] == -np.inf, name


def test_reduction_step_rounds_after_the_sum():
    # t16: 1 + 2^-7 is representable, but the sum 2 + 2^-7 is not: the step truncates it to 2
    np.testing.assert_array_equal(reduce_step("t16", [1 + 2 ** -7], [1.0]), [2.0])
    # fp16: 65504 + 65504 overflows to infinity, as a sum in half does
    assert reduce_step("fp16", [65504.0], [65504.0])[0] == np.inf


def ring_model(c, wires):
    """The ring's sum of the encoded rows ``wires`` with the Numba step, block b collecting the
    rows b, b + 1, ..., b + N - 1 (mod N), as Wire.allreduce_wire documents it."""
    N = len(wires)
    per = c.element_bytes // wires[0].itemsize
    bounds = [b * per for b in codecs.ring_blocks(wires[0].size // per, N)]
    out = np.empty_like(wires[0])
    for b in range(N):
        blk = slice(bounds[b], bounds[b + 1])
        partial = wires[b][blk].copy()
        for k in range(1, N):
            c.add(wires[(b + k) % N][blk], partial)
        out[blk] = partial
    return out


@pytest.mark.parametrize("name", ["t16", "bf16", "fp16", "q8"])
@pytest.mark.parametrize("N", [2, 3, 5, 8])
def test_numba_kernels_equal_the_numpy_twin_of_the_serial_rendering(name, N):
    """The serial rendering's NumPy codec, reduced in the ring's order, equals the Numba step."""
    G = rng.standard_normal((N, 3 * Q8_BLOCK + 17)) * np.logspace(-6, 2, N)[:, None]
    c = codecs.get(name)
    wires = [c.encode(g, c.empty(g.size)) for g in G]
    got = c.decode(ring_model(c, wires), np.empty(G.shape[1]))
    np.testing.assert_array_equal(got, allreduce_sum(G, name))


@pytest.mark.parametrize("N", [1, 2, 3, 5, 8])
def test_q8v_numba_ring_equals_the_serial_rendering(N):
    """q8v's ring as Wire._ring_q8v documents it (the Numba step, block b from row b on, a
    partial sum of the rows M at q8v_range(M)) equals the serial rendering's NumPy twin."""
    G = rng.standard_normal((N, 3 * Q8_BLOCK + 17)) * np.logspace(-6, 2, N)[:, None]
    c = codecs.get("q8v")
    wires = [c.encode(g, c.empty(g.size)) for g in G]
    scales = np.array([codecs.q8v_scale(w) for w in wires], np.float32)
    q = [w[4:].view(np.int8) for w in wires]
    n = G.shape[1]
    bounds = codecs.ring_blocks(n, N)
    out = np.empty(n, np.int8)
    for b in range(N):
        blk = slice(bounds[b], bounds[b + 1])
        partial, members = q[b][blk].copy(), [b]
        for k in range(1, N):
            j = (b + k) % N
            own = q[j][blk].copy()
            codecs._q8v_step(partial, codecs.q8v_range(scales, members), own, scales[j],
                             codecs.q8v_range(scales, members + [j]))
            partial = own
            members.append(j)
        out[blk] = partial
    got = out.astype(np.float32) * codecs.q8v_range(scales, range(N))
    np.testing.assert_array_equal(got, allreduce_sum(G, "q8v"))


def test_ring_blocks():
    assert codecs.ring_blocks(10, 4) == [0, 3, 6, 8, 10]
    assert codecs.ring_blocks(2, 4) == [0, 1, 2, 2, 2]      # more ranks than elements: empty blocks
    assert codecs.ring_blocks(7, 1) == [0, 7]


def test_each_block_sums_the_rows_from_its_own_index_on():
    """t16 at 3 workers, one value per block, arranged so that block j meets the sequence
    s = [2^-7 + 2^-8, 1, 1 + 2^-7] when it sums rows j, j + 1, j + 2: (s0 + s1) = 1 + 2^-7 + 2^-8
    truncates to 1 + 2^-7, + s2 = 2 + 2^-6 exactly, in every block. Summed in rank order 0, 1, 2
    (MPICH's operator at 3 ranks), column 2 would meet s1, s2, s0: 2 + 2^-7 truncates to 2, and
    2 + 2^-7 + 2^-8 to 2."""
    s = [2 ** -7 + 2 ** -8, 1.0, 1 + 2 ** -7]
    G = np.empty((3, 3))
    for j in range(3):
        for k in range(3):
            G[(j + k) % 3, j] = s[k]
    np.testing.assert_array_equal(allreduce_sum(G, "t16"), [2 + 2 ** -6] * 3)


# ---------------------------------------------------------------------------- under mpiexec
#: rank r's vector, and the exact results at p = 2 and p = 4 (worked by hand in the comments)
CLOSED = {
    # [1 + 2^-10 (truncated to 1 on every rank), 3, r + 1, 1 + 2^-7 on rank 0 only]
    # p=2: [2, 6, 1+2, 2 + 2^-7 -> truncated to 2]
    # p=4: ((a0+a1) + (a2+a3)): [4, 12, 10, (2 + 2) = 4]   (the float64 sum is 4 + 2^-7)
    "t16": (lambda r: [1 + 2 ** -10, 3.0, r + 1.0, 1 + 2 ** -7 if r == 0 else 1.0],
            {2: [2.0, 6.0, 3.0, 2.0], 4: [4.0, 12.0, 10.0, 4.0]}),
    # [1 + 2^-8 (tie: 1), 1 + 3*2^-8 (tie: 1 + 2^-6), 1.5]
    # p=2: [2, 2 + 2^-5, 3]; p=4: [4, 4 + 2^-4, 6]
    "bf16": (lambda r: [1 + 2 ** -8, 1 + 3 * 2 ** -8, 1.5],
             {2: [2.0, 2 + 2 ** -5, 3.0], 4: [4.0, 4 + 2 ** -4, 6.0]}),
    # [1 + 2^-11 (tie: 1), 2^-24 (smallest subnormal), 65504 (largest), 1/3]
    # p=2: [2, 2^-23, inf, fp16(fp16(1/3) * 2)]; p=4: [4, 2^-22, inf, 4 * fp16(1/3)]
    "fp16": (lambda r: [1 + 2 ** -11, 2.0 ** -24, 65504.0, 1 / 3],
             {2: [2.0, 2.0 ** -23, np.inf, 2 * float(np.float16(1 / 3))],
              4: [4.0, 2.0 ** -22, np.inf, 4 * float(np.float16(1 / 3))]}),
    # one block, scale 127/127 = 1 on rank r: q = [127, 1, -3, rint(0.75) = 1]
    # p=2: sum [254, 2, -6, 2], scale 2, q [127, 1, -3, 1]; p=4: [508, 4, -12, 4], scale 4
    "q8": (lambda r: [127.0, 1.0, -3.0, 0.75],
           {2: [254.0, 2.0, -6.0, 2.0], 4: [508.0, 4.0, -12.0, 4.0]}),
    # q8v, the same vectors (scale 1 on every rank; at p = 4 one value per block): a partial sum of
    # k ranks is encoded at scale k. p=2: as q8. p=4, each value v (q = [127, 1, -3, 1]) summed
    # rint((q + q) / 2), rint((2 p + q) / 3), rint((3 p + q) / 4), then times 4:
    # 127 -> 127, 127, 127: 508; 1 -> 1, 1, 1: 4; -3 -> -3, -3, -3: -12; 1 -> 4
    "q8v": (lambda r: [127.0, 1.0, -3.0, 0.75],
            {2: [254.0, 2.0, -6.0, 2.0], 4: [508.0, 4.0, -12.0, 4.0]}),
}


def _world():
    from mpi4py import MPI
    return MPI.COMM_WORLD


@pytest.mark.world(2, 4)   # the closed forms are for 2 and 4 ranks
@pytest.mark.parametrize("name", list(CLOSED))
def test_closed_form(name):
    comm = _world()
    p = comm.Get_size()
    make, expected = CLOSED[name]
    assert p in expected
    x = np.array(make(comm.Get_rank()), np.float32)
    with codecs.get(name).open() as wire:
        out = wire.allreduce(comm, x, np.empty_like(x))
        np.testing.assert_array_equal(out, np.array(expected[p], np.float32))
        out2 = wire.allreduce(comm, x.astype(np.float64), np.empty(x.size))   # from and into float64
        np.testing.assert_array_equal(out2, out)
        assert wire.op_calls == 2 * (p - 1) and wire.op_seconds > 0      # p - 1 steps per call


@pytest.mark.world(2, 3, 4)
@pytest.mark.parametrize("name,unit", [("t16", 2.0 ** -7), ("bf16", 2.0 ** -8), ("fp16", 2.0 ** -11), ("q8", None),
                                       ("q8v", None)])
@pytest.mark.parametrize("n", [1, 3 * Q8_BLOCK + 40])
def test_error_bound_and_ring_order(name, unit, n):
    """Against the float64 sum: every partial sum of the ring (p encodes, p - 1 steps) errs by
    at most unit * |its value| (q8: half a step of its block, <= B/254 with B the block's largest
    sum of magnitudes). And the result is bitwise the serial rendering's, in the ring's order,
    on every rank (n = 1: fewer wire elements than ranks, empty blocks)."""
    comm = _world()
    p, r = comm.Get_size(), comm.Get_rank()
    X = np.random.default_rng(11).standard_normal((p, n)) * np.logspace(-2, 1, p)[:, None]
    X = X.astype(np.float32)
    with codecs.get(name).open() as wire:
        got = wire.allreduce(comm, X[r], np.empty(n, np.float32))
    exact = X.astype(np.float64).sum(axis=0)
    mags = np.abs(X).astype(np.float64).sum(axis=0)
    if unit is not None:
        bound = (2 * p - 1) * unit * mags
    elif name == "q8v":
        # each encode and each step errs by half a step of its scale; the largest, S(all ranks) =
        # sum of the ranks' scales, bounds them all: (2p - 1) / 2 * S (float32 rounding aside)
        S = np.sum(np.abs(X).max(axis=1).astype(np.float64)) / 127
        bound = (2 * p - 1) * S / 2 * (1 + 1e-5)
    else:
        B = np.repeat([mags[k:k + Q8_BLOCK].max() for k in range(0, n, Q8_BLOCK)], Q8_BLOCK)[:n]
        bound = (2 * p - 1) * B / 254 * (1 + 1e-6)
    assert np.all(np.abs(got - exact) <= bound)
    np.testing.assert_array_equal(got, allreduce_sum(X, name))   # the order of the serial rendering
    everyone = comm.allgather(got)
    assert all(np.array_equal(e.view(np.uint32), got.view(np.uint32)) for e in everyone)


@pytest.mark.world(2, 3, 4)
def test_the_ring_on_an_emulated_link_counts_and_costs_one_all_reduce():
    from refsgd.comm.link import Link
    from refsgd.comm.linkcomm import Traffic, wrap
    comm = _world()
    p = comm.Get_size()
    traffic = Traffic()
    link = Link(100.0, 0.001)                        # 100 us, 1 Mbit/s: 4000 wire bytes take >= 32 ms at p = 2
    lc = wrap(comm, link, traffic)
    with codecs.get("t16").open() as wire:
        send, recv = wire.buffers(2000)
        t0 = time.perf_counter()
        wire.allreduce_wire(lc, send, recv)
        took = time.perf_counter() - t0
    assert took >= link.time(recv.nbytes, p) * 0.999
    assert traffic.global_bytes == recv.nbytes and traffic.local_bytes == 0


@pytest.mark.world(2, 3, 4)
@pytest.mark.parametrize("name", ["t16", "q8v"])
def test_the_link_holds_the_ring_for_transfer_plus_its_operator(name):
    """A compressed all-reduce on an emulated link is held for the transfer model plus the
    operator seconds (decompress, add, compress) this rank measured in the call, not the larger
    of the two: here a fake slow operator of 40 ms per step, p - 1 steps."""
    from refsgd.comm.link import Link
    from refsgd.comm.linkcomm import wrap
    comm = _world()
    p = comm.Get_size()
    base = codecs.get(name)

    def slow(a, b):
        time.sleep(0.04)
        base._add(a, b)
    lc = wrap(comm, Link(100.0, 0.01))              # 1000 values: t16 2000 bytes, >= 1.6 ms at p = 2
    wire = codecs.Wire(base)
    if name == "q8v":                               # the ring of q8v times its own kernel: slow it there
        import refsgd.comm.codecs.ring as mod      # where the ring looks its kernel up
        real = mod._q8v_step

        def step(*args):
            time.sleep(0.04)
            real(*args)
        mod._q8v_step = step
    else:
        wire.codec = codecs.Codec("slow", "", base.element_bytes, base.values_per_element, base.wire_dtype,
                                  base._encode, base._decode, slow)
    try:
        send, recv = wire.buffers(1000)
        base.encode(np.ones(1000, np.float32), send)
        comm.Barrier()
        t0 = time.perf_counter()
        wire.allreduce_wire(lc, send, recv)
        took = time.perf_counter() - t0
    finally:
        if name == "q8v":
            mod._q8v_step = real
    X = lc.link.time(recv.nbytes, p)
    assert wire.op_calls == p - 1 and wire.op_seconds >= 0.04 * (p - 1)
    assert lc._free_at == pytest.approx(t0 + X + wire.op_seconds, abs=5e-3)   # queued at the call's start
    assert took >= X + wire.op_seconds - 1e-6
