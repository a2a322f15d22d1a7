"""The measurements: ``bench step`` (one process) and ``bench overlap`` (in an MPI world), and
the codecs' costs shared with ``experiments/codec_cost.py``."""

import dataclasses
import os
import time

import numpy as np

from refsgd import mpilib
from refsgd.bench import models
from refsgd.bench.models import interleaved_times, median_time
from refsgd.nn import load_model


# ------------------------------------------------------------------------------------------ step
def step_flops(net, batch):
    """Multiply-adds x 2 of one forward+backward pass (matrix products only; 3x the forward,
    less the input gradient of the first layer)."""
    first = True
    total = 0
    for layer in net.layers:
        if layer.kind == "dense":
            f = 2 * batch * layer.in_shape[0] * layer.units
        elif layer.kind == "conv":
            C, H, W = layer.in_shape
            f = 2 * batch * H * W * layer.filters * C * layer.k * layer.k
        else:
            continue
        total += f * (2 if first else 3)
        first = False
    return total


def blas_peak(dtype, n=1024, repeat=10):
    """FLOP/s of a square matrix product of size n (the machine's BLAS peak, as used)."""
    a = np.random.default_rng(0).standard_normal((n, n)).astype(dtype)
    t = median_time(lambda: a @ a, repeat)
    return 2 * n ** 3 / t


def step(model, batch, dtype=np.float32, repeat=20, seed=0, use_torch=True):
    """Time loss_and_grad of ``model`` at ``batch``; returns a dict of measurements: medians over
    the repeats with their spread (``*_spread``: median, quartiles, min, max), the load average
    before and after. With PyTorch, its step and refsgd's are timed in turn (A B A B ...), and
    ``ratio`` is the median of the repeats' refsgd / PyTorch ratios, ``ratio_spread`` their
    spread: load that arrives during the measurement meets both sides alike."""
    from refsgd import busy
    load_before = busy.load_average()
    net = load_model(model, dtype=dtype)
    rng = np.random.default_rng(seed)
    w = net.init_params(seed)
    g = np.empty_like(w)
    x = rng.standard_normal((batch,) + net.input_shape).astype(dtype)
    y = rng.integers(0, net.num_classes, batch)

    def ours():
        net.loss_and_grad(w, x, y, out=g)
    # SGD with momentum 0.9 right after a forward/backward pass, as a run meets it
    from refsgd.optim import SGD
    opt = SGD(net.num_params, dtype, momentum=0.9)
    update = median_time(lambda: opt.step(w, g, 1e-3), repeat, before=ours)
    res = dict(model=net.name, batch=batch, dtype=np.dtype(dtype).name, num_params=net.num_params,
               flops=step_flops(net, batch), blas_peak=blas_peak(dtype), torch_s=None, update_s=update,
               torch_update_s=None, torch_threads=None, torch_version=None, torch_skipped=not use_torch,
               torch_spread=None, ratio=None, ratio_spread=None, repeat=repeat)
    tstep = None
    if use_torch:
        try:
            import torch
            from refsgd import torch_twin
        except ImportError:
            torch = None
        if torch is not None:
            model_t = torch_twin.build_torch(net)
            torch_twin.load_flat(model_t, net, w)
            xt, yt = torch.from_numpy(x), torch.from_numpy(y)

            def tstep():
                model_t.zero_grad(set_to_none=True)
                torch.nn.functional.cross_entropy(model_t(xt), yt).backward()

            topt = torch.optim.SGD(model_t.parameters(), lr=1e-3, momentum=0.9)  # PyTorch's default (foreach)
            tstep()
            topt.step()
            res.update(torch_update_s=median_time(topt.step, repeat, before=tstep),
                       torch_threads=torch.get_num_threads(), torch_version=torch.__version__)
    if tstep is None:
        mine = interleaved_times([ours], repeat)[0]
    else:
        mine, theirs = interleaved_times([ours, tstep], repeat)
        res.update(torch_s=float(np.median(theirs)), torch_spread=models.spread(theirs),
                   ratio=float(np.median(mine / theirs)), ratio_spread=models.spread(mine / theirs))
    res.update(refsgd_s=float(np.median(mine)), refsgd_spread=models.spread(mine), load_before=load_before,
               load_after=busy.load_average())
    return res


def _quartiles_ms(s):
    return f"quartiles {1e3 * s['p25']:.2f}-{1e3 * s['p75']:.2f}" if s else ""


def format_step(r):
    n = r.get("repeat")
    lines = [f"model {r['model']}, batch {r['batch']}, {r['dtype']}, forward+backward, median of "
             f"{n or ''} repeats{', PyTorch and refsgd in turn' if r.get('ratio') is not None else ''}",
             f"  refsgd   {1e3 * r['refsgd_s']:9.2f} ms   {r['flops'] / r['refsgd_s'] / 1e9:7.1f} GFLOP/s"
             f"   ({100 * r['flops'] / r['refsgd_s'] / r['blas_peak']:.0f}% of the BLAS peak"
             f" {r['blas_peak'] / 1e9:.0f} GFLOP/s, 1024^2 GEMM; {_quartiles_ms(r.get('refsgd_spread'))} ms)"]
    if r.get("torch_skipped"):
        lines.append("  pytorch  not timed (--no-torch)")
    elif r["torch_s"] is None:
        lines.append("  pytorch  not installed (./run.sh torch installs it, to compare)")
    else:
        lines.append(f"  pytorch  {1e3 * r['torch_s']:9.2f} ms   (torch {r['torch_version']}, "
                     f"{r['torch_threads']} threads; {_quartiles_ms(r.get('torch_spread'))} ms)")
        q = r["ratio_spread"]
        lines.append(f"  ratio refsgd / pytorch = {r['ratio']:.2f}, the median of {q['n']} side-by-side pairs "
                     f"(quartiles {q['p25']:.2f}-{q['p75']:.2f}, range {q['min']:.2f}-{q['max']:.2f})")
    if r.get("update_s") is not None:
        torch_up = (f", PyTorch's torch.optim.SGD {1e3 * r['torch_update_s']:.3f} ms"
                    if r.get("torch_update_s") is not None else "")
        lines.append(f"  update (SGD momentum 0.9, right after a forward/backward): refsgd {1e3 * r['update_s']:.3f} ms"
                     f"{torch_up}")
    from refsgd.nn import kernels
    lines.append(f"  threads: refsgd {kernels.chunk_threads()} (OpenBLAS and the conv chunks), "
                 f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}, {os.cpu_count()} CPUs. "
                 "Under MPI each rank gets one thread: compare with "
                 "OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 refsgd bench step ...")
    lines += _load_lines(r, ranks=1, threads=kernels.chunk_threads())
    return "\n".join(lines)


def _load_lines(r, ranks, threads):
    """The load average of a measurement (``load_before``, ``load_after``), and the note when the
    machine was busy (refsgd.busy)."""
    from refsgd import busy
    if "load_before" not in r:
        return []
    out = [f"  {busy.text(r['load_before'], r.get('load_after'))}"]
    crowded = busy.note(r["load_before"], ranks, threads, how=busy.ONE_THREAD_ENV)
    if crowded:
        out.append(f"  note: {crowded}")
    return out


# ------------------------------------------------------------------------------------------ codecs
#: the codecs of refsgd.comm.codecs, in the order of the tables
CODEC_NAMES = ("t16", "q8", "q8v", "bf16", "fp16")


def timed_collective(comm, fn, repeat, warmup=3, wire=None):
    """Median over ``repeat`` calls of fn() (barrier before each, after ``warmup`` calls) of the
    slowest rank's seconds for that call; with ``wire``, also the median over the calls of the
    slowest rank's operator seconds per operator call, and the operator calls per fn()."""
    from mpi4py import MPI
    for _ in range(warmup):
        comm.Barrier()
        fn()
    times, ops, calls = np.empty(repeat), np.zeros(repeat), np.zeros(repeat)
    for i in range(repeat):
        if wire is not None:
            s0, c0 = wire.op_seconds, wire.op_calls
        comm.Barrier()
        t0 = time.perf_counter()
        fn()
        times[i] = time.perf_counter() - t0
        if wire is not None:
            calls[i] = wire.op_calls - c0
            ops[i] = (wire.op_seconds - s0) / max(calls[i], 1)
    # the slowest rank sets the pace of a collective (and of the step that waits for all)
    both = np.concatenate([times, ops, calls])
    comm.Allreduce(MPI.IN_PLACE, both, op=MPI.MAX)
    times, ops, calls = both[:repeat], both[repeat:2 * repeat], both[2 * repeat:]
    return float(np.median(times)), float(np.median(ops)), float(np.mean(calls))


def codec_costs(comm, n, repeat=20, names=CODEC_NAMES):
    """The plain float32 all-reduce of n values and, per codec, encode, decode, the compressed
    all-reduce of encoded buffers (the ring, ``Wire.allreduce_wire``) and its reduction step per
    call, and the same reduction as an MPI user-defined operator (``Wire.allreduce_op``, the
    library's order) with its operator per call, in this MPI world (collective). Returns a list
    of dicts (seconds; the plain all-reduce first, with None for what it lacks)."""
    from mpi4py import MPI

    from refsgd.comm import codecs
    x = np.random.default_rng(comm.Get_rank()).standard_normal(n).astype(np.float32) * np.float32(1e-2)
    out = np.empty_like(x)
    plain = timed_collective(comm, lambda: comm.Allreduce(x, out, op=MPI.SUM), repeat)[0]
    # the uncompressed ring of --allreduce ring (codecs.plain), the same float32 values
    ring = codecs.plain(x.dtype).open()
    ring_t, ring_step, ring_calls = timed_collective(comm, lambda: ring.allreduce_wire(comm, x, out), repeat, wire=ring)
    rows = [dict(codec="plain f32", wire_bytes=4 * n, encode=None, allreduce=plain, decode=None, op=None,
                 calls=None, ring=ring_t, ring_op=ring_step, ring_calls=ring_calls)]
    for name in names:
        codec = codecs.get(name)
        wire = codec.open()
        try:
            send, recv = wire.buffers(n)
            codec.encode(x, send)
            enc = timed_collective(comm, lambda: codec.encode(x, send), repeat)[0]
            dec = timed_collective(comm, lambda: codec.decode(send, out), repeat)[0]
            # the warm-up compiles / loads the operator's kernel
            ared, op, calls = timed_collective(comm, lambda: wire.allreduce_wire(comm, send, recv), repeat,
                                               wire=wire)
            mpi_op, mpi_step, mpi_calls = timed_collective(comm, lambda: wire.allreduce_op(comm, send, recv),
                                                           repeat, wire=wire)
            rows.append(dict(codec=name, wire_bytes=int(send.nbytes), encode=enc, allreduce=ared, decode=dec,
                             op=op, calls=calls, allreduce_op=mpi_op, op_op=mpi_step, calls_op=mpi_calls))
        finally:
            wire.close()
    return rows


# ------------------------------------------------------------------------------------------ overlap
def synthetic_data(net, n_train, n_test=64, seed=0):
    """Random inputs of the model's shape and random labels: the timing does not depend on values."""
    from refsgd.datasets import Dataset
    rng = np.random.default_rng(seed)
    shape = tuple(net.input_shape)

    def x(n):
        return rng.standard_normal((n,) + shape).astype(net.dtype)

    return Dataset(name="synthetic", num_classes=net.num_classes, image_shape=shape, x_train=x(n_train),
                   y_train=rng.integers(0, net.num_classes, n_train), x_test=x(n_test),
                   y_test=rng.integers(0, net.num_classes, n_test), mean=np.zeros(shape[0]),
                   std=np.ones(shape[0]), provenance="random (refsgd bench)", licence="", citation="", path="")


def synthetic_size(net, world, batch, tau, iterations, budget=64e6):
    """Training samples for a timed run: one epoch longer than the run where that fits in
    ``budget`` bytes, so that no epoch boundary (and its bookkeeping) falls inside it."""
    per = world * batch * tau
    sample = int(np.prod(net.input_shape)) * net.dtype.itemsize
    return per * max(4, min(iterations + 1, int(budget // (per * sample))))


def split_method(name):
    """``ALGO[+CODEC][+nopoll]`` of ``bench overlap --algos`` -> (algo, poll, compress), or None
    when a part after ``+`` is neither ``poll``/``nopoll`` nor a codec of refsgd.comm.codecs."""
    from refsgd.comm import codecs
    algo, *flags = name.split("+")
    poll, compress = True, "none"
    for flag in flags:
        if flag in ("poll", "nopoll"):
            poll = flag == "poll"
        elif flag in codecs.CODECS:
            compress = flag
        else:
            return None
    return algo, poll, compress


def method_config(algo, *, batch, tau, iterations, lr, seed, poll=False, ranks_per_node=None, local_link=None,
                  sync_every=None, dtype="float32", compress="none"):
    """The Run configuration of a timed run of ``algo``: every attribute of ``refsgd train``'s,
    the options that apply to the method filled as ``refsgd.options`` does (momentum 0.9 where
    the method takes the local optimizer U; Pipe-SGD K = 2; DASO cycling from the first batch,
    no plateau, B = ``sync_every``)."""
    want = {}
    if algo in ("ssgd", "ssgd-opt", "daso"):
        want["momentum"] = 0.9
    if algo == "pipe-sgd":
        want.update(dependency=2, warmup_epochs=0)
    if compress != "none":
        want["compress"] = compress
    if algo == "daso":
        want.update(warmup_epochs=0, cooldown_epochs=0, plateau_patience=10 ** 9,
                    sync_every=sync_every or models.DASO_B, ranks_per_node=ranks_per_node, local_link=local_link)
    from refsgd import options
    applies = options.APPLIES[algo]
    return options.resolve(options.Config(
        algo=algo, model=None, data=None, batch=batch, tau=tau, lr=lr, schedule="constant", seed=seed, dtype=dtype,
        epochs=1, iterations=iterations, eval_every=10 ** 9, log_every=10, link=None, poll=poll, progress=False,
        **{k: v for k, v in want.items() if k in applies and v is not None}))


def _mean_over_ranks(comm, values, skip, servers=0):
    """Mean over the workers (the ranks from ``servers`` on: a parameter server computes no
    gradient, and its zero would halve a compute column at 2 ranks) and over the iterations after
    the first ``skip`` (the last one, which evaluates the model, left out when there are
    others), in seconds."""
    hi = len(values) - 1 if len(values) - 1 > skip else len(values)
    mine = float(np.mean(values[skip:hi])) if comm.Get_rank() >= servers else 0.0
    return comm.allreduce(mine) / max(1, comm.Get_size() - servers)


def _allreduce_time(comm, n, dtype, repeat=20, stat=np.median):
    """Seconds of a blocking Allreduce of n values: ``stat`` (the median) of the repeats on each
    rank, the slowest rank's."""
    from mpi4py import MPI
    a, b = np.ones(n, dtype), np.empty(n, dtype)
    times = []
    for _ in range(repeat + 3):
        comm.Barrier()
        t0 = time.perf_counter()
        comm.Allreduce(a, b, op=MPI.SUM)
        times.append(time.perf_counter() - t0)
    return comm.allreduce(float(stat(times[3:])), op=MPI.MAX)


def _message_time(comm, n, dtype, repeat=20, peer=1, stat=np.median):
    """``stat`` (the median) of the seconds of one message of n values from rank 0 to ``peer``
    and back, halved (the other ranks take no part); 0 on one rank."""
    from mpi4py import MPI
    if comm.Get_size() < 2:
        return 0.0
    a = np.ones(n, dtype)
    rank, times = comm.Get_rank(), []
    for _ in range(repeat + 3):
        comm.Barrier()
        t0 = time.perf_counter()
        if rank == 0:
            comm.Send(a, dest=peer, tag=7)
            comm.Recv(a, source=peer, tag=8)
        elif rank == peer:
            comm.Recv(a, source=0, tag=7)
            comm.Send(a, dest=0, tag=8)
        times.append((time.perf_counter() - t0) / 2)
    return comm.allreduce(float(stat(times[3:])) if rank in (0, peer) else 0.0, op=MPI.MAX)


def measured_link(comm, n, dtype, repeat=20):
    """The link between two nodes, measured: a ping-pong of one value and of n values between
    rank 0 and the first rank on another node (MPI_Get_processor_name), the fastest of
    ``repeat`` (the link's floor: on a loaded machine a median of a 1-value message measured the
    ranks' wake-ups, up to 1.5 ms); alpha = the one-value message, beta = the rest of the n-value
    message per byte. Returns (Link, the two processor names), or (None, None) when every rank
    is on one node."""
    from mpi4py import MPI

    from refsgd.comm.link import Link
    names = comm.allgather(mpilib.processor_name())
    peer = next((r for r, name in enumerate(names) if name != names[0]), None)
    if peer is None:
        return None, None
    t = {size: _message_time(comm, size, dtype, repeat, peer, np.min) for size in (1, n)}
    nbytes = (n - 1) * np.dtype(dtype).itemsize
    beta = max(t[n] - t[1], 1e-12) / nbytes
    return Link(1e6 * t[1], 8.0 / beta / 1e9), (names[0], names[peer])


def _cores_per_rank(comm):
    """The cores each rank of this node may use: its affinity set, or the machine's cores shared
    by the ranks on the node, whichever is fewer (the same on every rank: the minimum)."""
    from mpi4py import MPI
    from refsgd.busy import ranks_on_node, usable_cores
    on_node = ranks_on_node(comm)
    return comm.allreduce(min(float(usable_cores()), (os.cpu_count() or 1) / on_node), op=MPI.MIN)


def _ranks_per_node(comm, given):
    """DASO's G: --ranks-per-node, or the ranks that share memory with this one."""
    if given:
        return given
    from refsgd.busy import ranks_on_node
    return ranks_on_node(comm)


def _run_method(comm, cfg, net, data, schedule, skip, spans=None):
    """Train ``cfg.algo`` for the configured iterations; (compute, idle, codec, wall, update) per
    iteration, mean over the workers (a parameter server's ranks left out), and the spread of
    the iteration times. ``spans`` (a list), with --timeline: gets the spans this rank recorded
    per iteration of the window."""
    from refsgd.algorithms import ALGORITHMS, servers
    from refsgd.run import Run
    run = Run(comm, net, data, cfg, schedule, log=lambda *a: None, servers=servers(cfg.algo))
    ALGORITHMS[cfg.algo][0](run)
    run.final_model()
    if spans is not None and run.timeline is not None:
        spans.append(len(run.timeline.spans) / run.timeline.count)
    means = tuple(_mean_over_ranks(comm, run.records[k], skip, servers(cfg.algo))
                  for k in ("compute", "idle", "codec", "wall", "update"))
    return means + (_iteration_spread(comm, run.records["wall"], skip, servers(cfg.algo)),)


def _iteration_spread(comm, values, skip, servers=0):
    """models.spread of the iteration times (each the mean over the workers) that
    _mean_over_ranks averages: a comparison that flips from run to run shows in it."""
    hi = len(values) - 1 if len(values) - 1 > skip else len(values)
    mine = np.asarray(values[skip:hi], dtype=np.float64) * (comm.Get_rank() >= servers)
    total = np.empty_like(mine)
    from mpi4py import MPI
    comm.Allreduce(mine, total, op=MPI.SUM)
    return models.spread(total / max(1, comm.Get_size() - servers))


def span_seconds(repeat=20000):
    """Seconds to record one span of --timeline, median of 5 rounds: two clock reads, its label
    formatted and :meth:`refsgd.timeline.Timeline.add` (what a layer's span costs; the other
    timing points read the clock anyway)."""
    from refsgd.timeline import Timeline
    tl = Timeline(0, 1)
    tl.at(0)
    rounds, line, name = [], "L6", "forward 1 dense"
    for _ in range(5):
        tl.spans.clear()
        t0 = time.perf_counter()
        for _ in range(repeat):
            a = time.perf_counter()
            tl.add("compute", f"{line} {name}", a, time.perf_counter())
        rounds.append((time.perf_counter() - t0) / repeat)
    return float(np.median(rounds))


def timeline_cost(comm, cfg, net, data, schedule, skip, pairs):
    """The cost of ``train --timeline``: ``pairs`` runs of ``cfg`` without and with a timeline
    window over every timed iteration (the first ``skip`` left out, as in the means), alternating
    so that a loaded machine's drift hits both alike; (median wall per iteration off, on, the
    most spans a rank recorded per iteration), each wall the mean over ranks of a run."""
    on = dataclasses.replace(cfg, timeline=f"{skip}:{max(1, cfg.iterations - skip)}")
    off_walls, on_walls, spans = [], [], []
    for _ in range(pairs):
        off_walls.append(_run_method(comm, cfg, net, data, schedule, skip)[3])
        on_walls.append(_run_method(comm, on, net, data, schedule, skip, spans)[3])
    per_iteration = comm.allreduce(max(spans), op=__import__("mpi4py").MPI.MAX)
    return float(np.median(off_walls)), float(np.median(on_walls)), per_iteration


def _ratio_link(seconds, nbytes, p, latency_us):
    """The link whose Ring-AllReduce of the gradient takes ``seconds``, with ``latency_us`` or,
    where the latency alone would take half of that time or more (a tiny model on a fast
    machine), with the latency lowered to a quarter of it, so every ratio can be measured."""
    from refsgd.comm.link import Link
    steps = 2 * (p - 1)
    if p > 1 and steps * latency_us * 1e-6 >= 0.5 * seconds:
        latency_us = float(f"{0.25 * seconds / steps * 1e6:.3g}")
    return Link.for_time(seconds, nbytes, p, latency_us)


def overlap(comm, args):
    """Iteration time of each method against its timing model, in this MPI world (collective).

    1. t_C: compute seconds per micro-batch of ``ssgd`` without a link; C: a blocking
       all-reduce of the gradient without a link (the CPU work of the collective on this
       machine); a message of the gradient between two ranks; gamma; each method's update t_up
       (:func:`refsgd.bench.models.update_seconds`, mean over ranks), each timing right after
       a forward/backward pass of the model, so that its vectors come from memory as in a run;
    2. for each link of the run: ``--link`` as given, or for each ``--ratio`` R one whose
       Ring-AllReduce time for the gradient is R x t_C (latency ``--latency-us``, lowered to a
       quarter of that time where it would take half of it; R = 0: no link, the real network),
       or none;
    3. T_comm: a blocking all-reduce of the gradient through that link, measured;
    4. every method of ``--algos`` with that link; the model of its iteration time
       (:data:`refsgd.bench.models.MODELS`) evaluated twice: with the compute and the update
       measured in that very run (``model``: does the method overlap what it computes? a
       parameter server's update stays t_up) and with t_C and t_up
       (``model_at_t_c``: the compute of a quiet SSGD run; the gap shows how much the method's
       own threads or waits slow its compute on this machine). Returns a dict (rank 0 prints it).
    """
    from refsgd.comm.link import wrap
    from refsgd.optim import Constant
    net, tau, P = args.net, args.tau, comm.Get_size()
    data = args.dataset
    schedule = Constant(args.lr)
    # SSGD-NAG's lambda multiplies a sum over all samples of all workers (Sato Alg. 4)
    nag_schedule = Constant(args.lr / (P * args.batch * tau))
    sync_every = getattr(args, "sync_every", None) or models.DASO_B
    G = _ranks_per_node(comm, getattr(args, "ranks_per_node", None))
    local_link = getattr(args, "local_link", None)

    def cfg(algo, poll=True, compress="none"):
        return method_config(algo, batch=args.batch, tau=tau, iterations=args.iterations, lr=args.lr,
                             seed=args.seed, poll=poll, ranks_per_node=getattr(args, "ranks_per_node", None),
                             local_link=str_link(local_link), sync_every=sync_every, dtype=net.dtype.name,
                             compress=compress)

    n = net.num_params
    nbytes = n * net.dtype.itemsize
    from refsgd import busy
    load_before = busy.load_average()
    t_c = _run_method(comm, cfg("ssgd"), net, data, schedule, args.skip)[0] / tau
    # C, the CPU work of the collective: its fastest repeat (a slower one waited for the scheduler)
    cpu_real = _allreduce_time(comm, n, net.dtype, stat=np.min) if P > 1 else 0.0
    p2p = _message_time(comm, n, net.dtype)
    gamma = comm.allreduce(models.reduction_gamma(n, net.dtype)) / P
    algos = sorted({split_method(name)[0] for name in args.algos})
    # each codec of --algos (ALGO+CODEC): its compressed ring without a link, C_ring, and its
    # operator's seconds per all-reduce, R_op (the reduction the link adds to the transfer)
    rings = {}
    for name in sorted({split_method(name)[2] for name in args.algos} - {"none"}):
        rings[name] = _ring_costs(comm, name, n) if P > 1 else dict(wire_bytes=0, c_ring=0.0, r_op=0.0)
    # each update timed as a run meets it: right after a forward/backward pass of the model
    w0, g0 = net.init_params(args.seed), np.empty(n, net.dtype)
    xb, yb = data.x_train[:args.batch], data.y_train[:args.batch]

    def after_a_step():
        net.loss_and_grad(w0, xb, yb, out=g0)
    t_up = {a: comm.allreduce(models.update_seconds(a, n, net.dtype, world=P, B=sync_every, before=after_a_step)) / P
            for a in algos}
    costs = models.Costs(t_c=t_c, tau=tau, t_up=t_up, G=G, B=sync_every, W=models.daso_wait(sync_every),
                         cores_per_rank=_cores_per_rank(comm))

    links = []
    if getattr(args, "ratios", None):
        for ratio in args.ratios:
            links.append((ratio, None if ratio == 0 else _ratio_link(ratio * t_c, nbytes, P, args.latency_us)))
    else:
        links.append((None, args.link))
    # on several nodes (e.g. scripts/cluster), the real link's alpha and beta, and each method's
    # model of Pipe-SGD's eq. 5 with them
    real_link, real_pair = measured_link(comm, n, net.dtype) if P > 1 else (None, None)
    runs = []
    for ratio, link in links:
        lcomm = wrap(comm, link) if link else comm
        t_comm = _allreduce_time(lcomm, n, net.dtype) if P > 1 else 0.0
        if link is not None:
            network = models.Network(nbytes, "emulated", link=link, local_link=local_link, gamma=gamma,
                                     cpu_real=cpu_real, p2p_real=p2p)
        else:
            network = models.Network(nbytes, "real", local_link=local_link, gamma=gamma, cpu_real=cpu_real,
                                     blocking_real=t_comm, p2p_real=p2p)
        holds = {}
        for name, ring in rings.items():   # the compressed ring through this link: measured and modelled
            from refsgd.comm import codecs as _codecs
            with _codecs.get(name).open() as wire:
                send, recv = wire.buffers(n)
                _codecs.get(name).encode(np.ones(n, np.float32), send)
                measured = timed_collective(lcomm, lambda: wire.allreduce_wire(lcomm, send, recv), 10)[0] \
                    if P > 1 else 0.0
            X = 0.0 if link is None else link.time(ring["wire_bytes"], P)
            holds[name] = dict(measured=measured, transfer=X, r_op=ring["r_op"], c_ring=ring["c_ring"],
                               model=max(X + ring["r_op"], ring["c_ring"]), before=max(X, ring["c_ring"]))
        rows = []
        for name in args.algos:
            algo, poll, compress = split_method(name)
            compute, idle, codec, wall, update, iters = _run_method(
                lcomm, cfg(algo, poll, compress), net, data, nag_schedule if algo == "ssgd-nag" else schedule,
                args.skip)
            if compress != "none":         # the compressed all-reduce: wire bytes, C_ring and R_op
                ring = rings[compress]
                net_row = models.Network(ring["wire_bytes"], "emulated" if link is not None else "real", link=link,
                                         local_link=local_link, gamma=gamma, cpu_real=ring["c_ring"],
                                         blocking_real=ring["c_ring"], p2p_real=p2p, reduce_s=ring["r_op"])
            else:
                net_row = network
            model = models.MODELS[algo]
            # the compute of one micro-batch in this very run (the mean is over the workers already),
            # and its update as timed in the run (a server's per-push update stays t_up)
            own = compute / (tau if model.tau else 1)
            in_run = dataclasses.replace(costs, t_c=own, t_up=costs.t_up if model.servers else {algo: update})
            if getattr(args, "timeline_cost", 0):
                cost = timeline_cost(lcomm, cfg(algo, poll, compress), net, data,
                                     nag_schedule if algo == "ssgd-nag" else schedule, args.skip, args.timeline_cost)
            else:
                cost = None
            rows.append(dict(method=name, algo=algo, compute=compute, idle=idle, codec=codec, wall=wall,
                             timeline_cost=cost,
                             wall_median=iters["median"], wall_p25=iters["p25"], wall_p75=iters["p75"],
                             other=wall - compute - idle, t_c_own=own,
                             model=models.iteration_time(algo, in_run, net_row, P),
                             model_at_t_c=models.iteration_time(algo, costs, net_row, P),
                             model_link=None if link is not None or real_link is None or
                             (algo == "daso" and local_link is None) else models.iteration_time(
                                 algo, in_run, models.Network(nbytes, "model", link=real_link, local_link=local_link,
                                                              gamma=gamma), P),
                             model_text=model.text, update=costs.up(algo), update_run=update,
                             samples=models.samples_per_iteration(algo, P, args.batch, tau)))
        runs.append(dict(ratio=ratio, link=link, t_comm=t_comm, transfer=network.transfer(P),
                         reduce=network.reduce_cpu(P), t_ar_model=network.allreduce(P), rows=rows, holds=holds))
    codecs = codec_costs(comm, n, repeat=getattr(args, "codec_repeat", 20)) \
        if getattr(args, "codecs", False) else None
    return dict(t_c=t_c, cpu_real=cpu_real, p2p=p2p, gamma=gamma, t_up=t_up, nbytes=nbytes, num_params=n, world=P,
                span_seconds=span_seconds() if getattr(args, "timeline_cost", 0) else None,
                G=G, B=costs.B, W=costs.W, cores_per_rank=costs.cores_per_rank, local_link=local_link, runs=runs,
                real_link=real_link, real_link_nodes=real_pair,
                codecs=codecs,
                mpi_library=mpilib.library_version(first_line=True), model=net.name,
                dtype=net.dtype.name, batch=args.batch, tau=tau, iterations=args.iterations, skip=args.skip,
                data=data.name, load_before=load_before, load_after=busy.load_average())


def _ring_costs(comm, name, n, repeat=20):
    """The codec ``name``'s compressed all-reduce of n values in this world without a link:
    {wire_bytes, c_ring: the slowest rank's median seconds, r_op: its operator seconds per
    all-reduce (the median step times the steps)}."""
    from refsgd.comm import codecs
    codec = codecs.get(name)
    with codec.open() as wire:
        send, recv = wire.buffers(n)
        codec.encode(np.random.default_rng(comm.Get_rank()).standard_normal(n).astype(np.float32), send)
        ring, op, calls = timed_collective(comm, lambda: wire.allreduce_wire(comm, send, recv), repeat, wire=wire)
    return dict(wire_bytes=int(send.nbytes), c_ring=ring, r_op=op * calls)


def parse_ratios(text):
    """``--ratio R[,R...]`` -> [float]; each a finite number >= 0 (0: no link)."""
    from refsgd import RefsgdError
    out = []
    for part in str(text).split(","):
        try:
            v = float(part)
        except ValueError:
            v = None
        if v is None or not np.isfinite(v) or v < 0:
            raise RefsgdError(f"--ratio expects numbers >= 0 separated by commas, got {part!r}")
        out.append(v)
    return out


def str_link(link):
    """A Link as its --link spec ("LATENCY_US,GBIT_S"), None as None."""
    return None if link is None else f"{link.latency_us:g},{link.gbit_s:g}"


def overlap_json(r):
    """The result of :func:`overlap` as plain JSON types (links as their spec and text)."""
    out = {k: v for k, v in r.items() if k not in ("runs", "local_link", "real_link")}
    out["local_link"] = str_link(r["local_link"])
    out["real_link"] = str_link(r.get("real_link"))
    out["runs"] = []
    for run in r["runs"]:
        d = dict(run)
        d["link_spec"] = str_link(run["link"])
        d["link"] = str(run["link"]) if run["link"] else None
        out["runs"].append(d)
    return out


def format_overlap(r):
    ms = 1e3
    ranks = f"{r['world']} rank{'s' if r['world'] > 1 else ''}"
    lines = [f"{r['model']} ({r['nbytes'] / 1e6:.2f} MB gradient, {r['dtype']}), {ranks}, "
             f"batch {r['batch']} x tau {r['tau']}, {r['iterations']} iterations (first {r['skip']} and the last "
             f"dropped), data {r['data']}",
             f"  t_C     = {ms * r['t_c']:.3f} ms   compute of one micro-batch (ssgd without a link)",
             f"  C       = {ms * r['cpu_real']:.3f} ms   blocking all-reduce of the gradient without a link, "
             "fastest of 20 (the CPU work of the collective on this machine)",
             f"  T_msg   = {ms * r['p2p']:.3f} ms   one message of the gradient between two ranks, measured",
             f"  gamma   = {1e9 * r['gamma']:.3f} ns/byte   CPU time of an element-wise addition",
             f"  cores   = {r.get('cores_per_rank', 2.0):g} per rank"
             + (" (a communication thread shares its rank's core)" if r.get("cores_per_rank", 2.0) < 2 else "")]
    if any(row["algo"] == "daso" for run in r["runs"] for row in run["rows"]):  # its parameters, when it ran
        lines.append(f"  daso: {r['G']} rank(s) per node, B = {r['B']}, W = {r['W']}"
                     + (f", local {r['local_link']} -- EMULATED" if r["local_link"] else ""))
    if r.get("real_link") is not None:
        a, b = r["real_link_nodes"]
        lines.append(f"  link    = alpha {r['real_link'].latency_us:.1f} us, 1/beta {r['real_link'].gbit_s:.3f} Gbit/s   "
                     f"between nodes {a} and {b}, MEASURED (ping-pong of 1 and of {r['num_params']:,} values, fastest of 20)")
    for run in r["runs"]:
        link = f"{run['link']} -- EMULATED" if run["link"] else "none (the real network of this run)"
        lines += ["", f"link: {link}" + (f" (ratio {run['ratio']:g})" if run["ratio"] else ""),
                  f"  T_comm  = {ms * run['t_comm']:.3f} ms   blocking all-reduce of the gradient through the link, "
                  f"measured (model {ms * run['t_ar_model']:.3f}: transfer X {ms * run['transfer']:.3f} + reduction "
                  f"R {ms * run.get('reduce', 0.0):.3f}, eq. 5)",
                  *[f"  T_{name:<6}= {ms * h['measured']:.3f} ms   compressed ring through the link, measured (model "
                    f"max(X + R_op, C_ring) = max({ms * h['transfer']:.3f} + {ms * h['r_op']:.3f}, "
                    f"{ms * h['c_ring']:.3f}) = {ms * h['model']:.3f}; before issue 24 the link held max(X, C_ring) = "
                    f"{ms * h['before']:.3f})" for name, h in run.get("holds", {}).items()],
                  f"  {'method':<15} {'compute':>8} {'idle':>8} {'other':>8} {'iteration':>10} {'model':>8} "
                  f"{'ratio':>6} {'update':>7} {'at t_C':>8} {'median':>8} {'quartiles':>15}   (ms per iteration, "
                  "mean over the workers; the model at this run's compute, measured / model, its t_up; the model at "
                  "t_C; the median iteration and its quartiles)"]
        for row in run["rows"]:
            quartiles = (f"{ms * row['wall_p25']:.3f}-{ms * row['wall_p75']:.3f}" if "wall_p25" in row else "-")
            lines.append(f"  {row['method']:<15} {ms * row['compute']:8.3f} {ms * row['idle']:8.3f} "
                         f"{ms * row['other']:8.3f} {ms * row['wall']:10.3f} {ms * row['model']:8.3f} "
                         f"{row['wall'] / row['model']:6.2f} {ms * row['update']:7.3f} "
                         f"{ms * row['model_at_t_c']:8.3f} {ms * row.get('wall_median', 0):8.3f} {quartiles:>15}   "
                         f"{row['model_text']}"
                         + (f"; with the measured alpha, beta: {ms * row['model_link']:.3f}"
                            if row.get("model_link") is not None else ""))
        base = next((row for row in run["rows"] if row["method"] == "ssgd"), None)
        if base is not None:
            for row in run["rows"]:
                if row is not base and row["samples"]:
                    mine = row["samples"] / row["wall"] / (base["samples"] / base["wall"])
                    model = row["samples"] / row["model_at_t_c"] / (base["samples"] / base["model_at_t_c"])
                    lines.append(f"  speed-up of {row['method']} over ssgd in samples/s: {mine:.2f}x "
                                 f"(models at t_C: {model:.2f}x)")
    costs = [(run, row) for run in r["runs"] for row in run["rows"] if row.get("timeline_cost")]
    if costs:
        each = r.get("span_seconds") or 0.0
        lines += ["", "cost of train --timeline (every timed iteration recorded; medians of runs without and with it, "
                  "alternating; ms per iteration, mean over ranks), and the recording's own cost: spans per "
                  f"iteration x {1e6 * each:.2f} us per span (measured here) against the iteration:"]
        for run, row in costs:
            off, on, n = row["timeline_cost"]
            link = f", link {run['link']}" if run["link"] else ""
            lines.append(f"  {row['method']:<15} off {ms * off:8.3f}  on {ms * on:8.3f}  {100 * (on / off - 1):+6.1f} %"
                         f"   {n:5.1f} spans x {1e6 * each:.2f} us = {100 * n * each / off:5.2f} %" + link)
    lines.append("'other' is the rest of the iteration besides compute and idle: the method's update, posting "
                 "requests, bookkeeping; 'update' is the t_up the model takes (the run's own update time; a "
                 "parameter server's step measured apart). The means leave out a parameter server's rank "
                 "(ps-sync, dcasgd), which computes no gradient. A method "
                 "overlaps when its idle time is below T_comm. An emulated link delays all-reduces, Gather, "
                 "Bcast and dcasgd's Send/Recv.")
    if r.get("codecs"):
        lines += ["", format_codecs(r["codecs"], r["world"])]
    from refsgd.nn import kernels
    lines += _load_lines(r, ranks=r["world"], threads=kernels.chunk_threads())
    return "\n".join(lines)


def format_ring(rows, world, n):
    """``bench codec``'s table: per codec, the ring's all-reduce against the MPI operator's; first
    the uncompressed ring (``--allreduce ring``) against ``MPI_Allreduce`` with ``MPI_SUM``
    (``--allreduce mpi``)."""
    lines = [f"all-reduce of {n:,} float32 values on {world} rank(s): the ring (Sendrecv, refsgd's "
             "order, the same bits under any MPI library) against MPI's (the library's order: MPI_Allreduce "
             "uncompressed, an MPI user-defined operator per codec); median of the slowest rank, shared memory "
             "on one machine",
             f"  {'codec':<6} {'wire bytes':>11} {'ring ms':>9} {'steps':>5} {'step ms':>8} {'ring-steps ms':>13} "
             f"{'MPI op ms':>10} {'calls':>5} {'op/call ms':>10} {'ring/op':>7}"]
    for c in rows:
        if c["encode"] is None:  # uncompressed: --allreduce ring against --allreduce mpi (MPI_Allreduce, MPI_SUM)
            rest = c["ring"] - c["ring_calls"] * c["ring_op"]
            lines.append(f"  {'plain':<6} {c['wire_bytes']:>11,} {1e3 * c['ring']:9.3f} {c['ring_calls']:5.0f} "
                         f"{1e3 * c['ring_op']:8.3f} {1e3 * rest:13.3f} {1e3 * c['allreduce']:10.3f} {'-':>5} "
                         f"{'-':>10} {c['ring'] / c['allreduce']:7.2f}   (float32; MPI op: MPI_Allreduce with MPI_SUM)")
            continue
        rest = c["allreduce"] - c["calls"] * c["op"]
        lines.append(f"  {c['codec']:<6} {c['wire_bytes']:>11,} {1e3 * c['allreduce']:9.3f} {c['calls']:5.0f} "
                     f"{1e3 * c['op']:8.3f} {1e3 * rest:13.3f} {1e3 * c['allreduce_op']:10.3f} "
                     f"{c['calls_op']:5.1f} {1e3 * c['op_op']:10.3f} {c['allreduce'] / c['allreduce_op']:7.2f}")
    lines.append("'plain': the uncompressed ring of --allreduce ring against MPI_Allreduce (--allreduce mpi). "
                 "'steps' are the ring's reduction steps per call (p - 1, each on 1/p of the buffer), 'ring-steps' "
                 "the ring's time besides them (its 2 (p - 1) Sendrecv calls and Python); 'calls' are the MPI "
                 "operator's calls per all-reduce.")
    return "\n".join(lines)


def format_codecs(rows, world):
    mb = rows[0]["wire_bytes"] / 1e6
    plain = rows[0]["allreduce"]
    lines = [f"codecs on {world} rank(s), {mb:.2f} MB of float32, median of the slowest rank "
             "(no link: shared memory on one machine)",
             f"  {'codec':<10} {'wire bytes':>11} {'encode':>8} {'decode':>8} {'allreduce':>9} {'op/call':>8} "
             f"{'enc GB/s':>8} {'dec GB/s':>8} {'(enc+ar+dec)/plain':>18}"]
    for c in rows:
        if c["encode"] is None:
            lines.append(f"  {c['codec']:<10} {c['wire_bytes']:>11,} {'-':>8} {'-':>8} {1e3 * c['allreduce']:9.3f} "
                         f"{'-':>8} {'-':>8} {'-':>8} {1.0:>18.2f}")
            continue
        lines.append(f"  {c['codec']:<10} {c['wire_bytes']:>11,} {1e3 * c['encode']:8.3f} {1e3 * c['decode']:8.3f} "
                     f"{1e3 * c['allreduce']:9.3f} {1e3 * c['op']:8.3f} {mb / 1e3 / c['encode']:8.2f} "
                     f"{mb / 1e3 / c['decode']:8.2f} {(c['encode'] + c['allreduce'] + c['decode']) / plain:18.2f}")
    return "\n".join(lines)
