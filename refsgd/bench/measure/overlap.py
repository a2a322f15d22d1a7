"""``bench overlap``: each method's iteration on synthetic data at a range of emulated links,
against the model of its overlap of computation and communication; its JSON and text."""

import dataclasses
import time

import numpy as np

from refsgd import busy, mpilib, options
from refsgd.bench import models
from refsgd.comm import codecs
from refsgd.comm.link import Link
from refsgd.datasets import Dataset
from refsgd.errors import RefsgdError
from refsgd.nn import kernels
from refsgd.optim import Constant
from refsgd.timeline import Timeline
from refsgd.registry import METHODS

from .step import _load_lines
from .codec_cost import codec_costs, format_codecs, timed_collective
from .world import _allreduce_time, _cores_per_rank, _iteration_spread, _mean_over_ranks, _message_time, _ranks_per_node, measured_link


# ------------------------------------------------------------------------------------------ overlap
def synthetic_data(net, n_train, n_test=64, seed=0):
    """Random inputs of the model's shape and random labels: the timing does not depend on values."""
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
    """``ALGO[+CODEC][+nopoll]`` of ``bench overlap --algo`` -> (algo, poll, compress), or None
    when a part after ``+`` is neither ``poll``/``nopoll`` nor a codec of refsgd.comm.codecs."""
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
    the options that apply to the method filled as ``refsgd.options`` does, but for these, where
    they apply: momentum 0.9 where the method has no momentum of its own (its update timed as the
    papers train), no warm-up or cool-down epochs (DASO cycling from the first batch), no plateau,
    DASO's B = ``sync_every``."""
    want = dict(warmup_epochs=0, cooldown_epochs=0, plateau_patience=10 ** 9,
                sync_every=sync_every or models.DASO_B, ranks_per_node=ranks_per_node, local_link=local_link,
                compress=None if compress == "none" else compress)
    if not options.default(algo, "momentum"):
        want["momentum"] = 0.9
    applies = options.APPLIES[algo]
    return options.resolve(options.Config(
        algo=algo, model=None, data=None, batch=batch, tau=tau, lr=lr, schedule="constant", seed=seed, dtype=dtype,
        epochs=1, iterations=iterations, eval_every=10 ** 9, log_every=10, link=None, poll=poll, progress=False,
        **{k: v for k, v in want.items() if k in applies and v is not None}))


def _run_method(comm, cfg, net, data, schedule, skip, spans=None):
    """Train ``cfg.algo`` for the configured iterations; (compute, idle, codec, wall, update) per
    iteration, mean over the workers (a parameter server's ranks left out), and the spread of
    the iteration times. ``spans`` (a list), with --timeline: gets the spans this rank recorded
    per iteration of the window."""
    from refsgd.algorithms import train_of, warm_of  # noqa: PLC0415 mpi4py: the methods and the Run import mpi4py.MPI
    from refsgd.run import build_run  # noqa: PLC0415 mpi4py
    run = build_run(cfg, comm, net=net, data=data, schedule=schedule, log=lambda *a: None, warm=warm_of(cfg.algo))
    train_of(cfg.algo)(run)
    run.final_model()
    tl = run.clock.timeline
    if spans is not None and tl.enabled:
        spans.append(len(tl.spans) / tl.count)
    servers = METHODS[cfg.algo].servers
    means = tuple(_mean_over_ranks(comm, run.records.iterations[k], skip, servers)
                  for k in ("compute", "idle", "codec", "wall", "update"))
    return means + (_iteration_spread(comm, run.records.iterations["wall"], skip, servers),)


def span_seconds(repeat=20000):
    """Seconds to record one span of --timeline, median of 5 rounds: two clock reads, its label
    formatted and :meth:`refsgd.timeline.Timeline.add` (what a layer's span costs; the other
    timing points read the clock anyway)."""
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
    steps = 2 * (p - 1)
    if p > 1 and steps * latency_us * 1e-6 >= 0.5 * seconds:
        latency_us = float(f"{0.25 * seconds / steps * 1e6:.3g}")
    return Link.for_time(seconds, nbytes, p, latency_us)


@dataclasses.dataclass(frozen=True)
class OverlapSpec:
    """What ``bench overlap`` measures, checked by the command line (refsgd.cli.bench): the
    methods (``algos``: names with +nopoll or +CODEC), the model ``net`` and its data set
    ``dataset`` (real or synthetic), the timed runs' options, and the links (``link`` a
    :class:`refsgd.comm.link.Link` or None, or ``ratios`` with ``latency_us``)."""

    algos: tuple
    net: object
    dataset: object
    batch: int = 64
    tau: int = 1
    iterations: int = 60
    skip: int = 10
    lr: float = 0.001
    seed: int = 0
    link: object = None
    ratios: tuple = None
    latency_us: float = 50.0
    ranks_per_node: int = None
    local_link: object = None
    sync_every: int = None
    codecs: bool = False
    codec_repeat: int = 20
    timeline_cost: int = 0

    @classmethod
    def fields(cls):
        return tuple(f.name for f in dataclasses.fields(cls))


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
    4. every method of ``--algo`` with that link; the model of its iteration time
       (:data:`refsgd.bench.models.MODELS`) evaluated twice: with the compute and the update
       measured in that very run (``model``: does the method overlap what it computes? a
       parameter server's update stays t_up) and with t_C and t_up
       (``model_at_t_c``: the compute of a quiet SSGD run; the gap shows how much the method's
       own threads or waits slow its compute on this machine). Returns a dict (rank 0 prints it).
    ``args`` is an :class:`OverlapSpec`.
    """
    from refsgd.comm.linkcomm import wrap  # noqa: PLC0415 mpi4py: it imports mpi4py (starting MPI); bench scale uses this module without
    net, tau, P = args.net, args.tau, comm.Get_size()
    data = args.dataset
    schedule = Constant(args.lr)
    # a method whose lambda multiplies a sum over all samples of all workers (Sato Alg. 4)
    sum_schedule = Constant(args.lr / (P * args.batch * tau))
    sync_every = args.sync_every or models.DASO_B
    G = _ranks_per_node(comm, args.ranks_per_node)
    local_link = args.local_link

    def cfg(algo, poll=True, compress="none"):
        return method_config(algo, batch=args.batch, tau=tau, iterations=args.iterations, lr=args.lr,
                             seed=args.seed, poll=poll, ranks_per_node=args.ranks_per_node,
                             local_link=str_link(local_link), sync_every=sync_every, dtype=net.dtype.name,
                             compress=compress)

    n = net.num_params
    nbytes = n * net.dtype.itemsize
    load_before = busy.load_average()
    t_c = _run_method(comm, cfg("ssgd"), net, data, schedule, args.skip)[0] / tau
    # C, the CPU work of the collective: its fastest repeat (a slower one waited for the scheduler)
    cpu_real = _allreduce_time(comm, n, net.dtype, stat=np.min) if P > 1 else 0.0
    p2p = _message_time(comm, n, net.dtype)
    gamma = comm.allreduce(models.reduction_gamma(n, net.dtype)) / P
    algos = sorted({split_method(name)[0] for name in args.algos})
    # each codec of --algo (ALGO+CODEC): its compressed ring without a link, C_ring, and its
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
    if args.ratios:
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
            with codecs.get(name).open() as wire:
                send, recv = wire.buffers(n)
                codecs.get(name).encode(np.ones(n, np.float32), send)
                measured = (timed_collective(lcomm, lambda: wire.allreduce_wire(lcomm, send, recv), 10)[0]  # noqa: B023 called within this iteration
                            if P > 1 else 0.0)
            X = 0.0 if link is None else link.time(ring["wire_bytes"], P)
            holds[name] = dict(measured=measured, transfer=X, r_op=ring["r_op"], c_ring=ring["c_ring"],
                               model=max(X + ring["r_op"], ring["c_ring"]), before=max(X, ring["c_ring"]))
        rows = []
        for name in args.algos:
            algo, poll, compress = split_method(name)
            compute, idle, codec, wall, update, iters = _run_method(
                lcomm, cfg(algo, poll, compress), net, data, sum_schedule if METHODS[algo].lr_of_sum else schedule,
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
            if args.timeline_cost:
                cost = timeline_cost(lcomm, cfg(algo, poll, compress), net, data,
                                     sum_schedule if METHODS[algo].lr_of_sum else schedule, args.skip, args.timeline_cost)
            else:
                cost = None
            rows.append(dict(method=name, algo=algo, compute=compute, idle=idle, codec=codec, wall=wall,
                             timeline_cost=cost,
                             wall_median=iters["median"], wall_p25=iters["p25"], wall_p75=iters["p75"],
                             other=wall - compute - idle, t_c_own=own,
                             model=models.iteration_time(algo, in_run, net_row, P),
                             model_at_t_c=models.iteration_time(algo, costs, net_row, P),
                             model_link=None if link is not None or real_link is None or
                             ("local_link" in options.APPLIES[algo] and local_link is None) else models.iteration_time(
                                 algo, in_run, models.Network(nbytes, "model", link=real_link, local_link=local_link,
                                                              gamma=gamma), P),
                             # update: the t_up of `model` (printed beside it); update_apart: that of
                             # model_at_t_c (the update timed apart, after a forward/backward pass)
                             model_text=model.text, update=in_run.up(algo), update_apart=costs.up(algo),
                             update_run=update,
                             samples=models.samples_per_iteration(algo, P, args.batch, tau)))
        runs.append(dict(ratio=ratio, link=link, t_comm=t_comm, transfer=network.transfer(P),
                         reduce=network.reduce_cpu(P), t_ar_model=network.allreduce(P), rows=rows, holds=holds))
    codec_rows = codec_costs(comm, n, repeat=args.codec_repeat) if args.codecs else None
    return dict(t_c=t_c, cpu_real=cpu_real, p2p=p2p, gamma=gamma, t_up=t_up, nbytes=nbytes, num_params=n, world=P,
                span_seconds=span_seconds() if args.timeline_cost else None,
                G=G, B=costs.B, W=costs.W, cores_per_rank=costs.cores_per_rank, local_link=local_link, runs=runs,
                real_link=real_link, real_link_nodes=real_pair,
                codecs=codec_rows,
                mpi_library=mpilib.library_version(first_line=True), model=net.name,
                dtype=net.dtype.name, batch=args.batch, tau=tau, iterations=args.iterations, skip=args.skip,
                data=data.name, load_before=load_before, load_after=busy.load_average())


def _ring_costs(comm, name, n, repeat=20):
    """The codec ``name``'s compressed all-reduce of n values in this world without a link:
    {wire_bytes, c_ring: the slowest rank's median seconds, r_op: its operator seconds per
    all-reduce (the median step times the steps)}."""
    codec = codecs.get(name)
    with codec.open() as wire:
        send, recv = wire.buffers(n)
        codec.encode(np.random.default_rng(comm.Get_rank()).standard_normal(n).astype(np.float32), send)
        ring, op, calls = timed_collective(comm, lambda: wire.allreduce_wire(comm, send, recv), repeat, wire=wire)
    return dict(wire_bytes=int(send.nbytes), c_ring=ring, r_op=op * calls)


def parse_ratios(text):
    """``--ratio R[,R...]`` -> [float]; each a finite number >= 0 (0: no link)."""
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
    hierarchical = sorted({row["algo"] for run in r["runs"] for row in run["rows"]
                           if models.MODELS[row["algo"]].time is models.hierarchical})
    if hierarchical:  # its parameters, when it ran
        lines.append(f"  {', '.join(hierarchical)}: {r['G']} rank(s) per node, B = {r['B']}, W = {r['W']}"
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
                  "t_C with the update timed apart; the median iteration and its quartiles)"]
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
                 "parameter server's step measured apart); 'at t_C' takes the update timed apart, after a "
                 "forward/backward pass. The means leave out a parameter server's rank "
                 "(ps-sync, dcasgd), which computes no gradient. A method "
                 "overlaps when its idle time is below T_comm. An emulated link delays all-reduces, Gather, "
                 "Bcast and dcasgd's Send/Recv.")
    if r.get("codecs"):
        lines += ["", format_codecs(r["codecs"], r["world"])]
    lines += _load_lines(r, ranks=r["world"], threads=kernels.chunk_threads())
    return "\n".join(lines)
