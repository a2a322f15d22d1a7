"""``refsgd bench``: speed measured side by side, reported as ratios (not tests).

``bench step`` times one forward+backward pass (``loss_and_grad``) of a model at a batch
size, the same network in PyTorch on the same CPU when torch is installed, and a square
matrix product as the machine's BLAS peak; it prints medians and ratios.

``bench overlap`` (under ``mpiexec``) runs each method in this MPI world, with the real network
or an emulated link, and prints its iteration time split into compute, idle and other next to
its paper's timing model (compute + all-reduce for SSGD, max of the two for the overlapped
methods) evaluated with the measured compute and all-reduce times.
"""

import argparse
import os
import time

import numpy as np

from refsgd.nn import load_model


def _median_time(fn, repeat, warmup=3):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return float(np.median(times))


def step_flops(net, batch):
    """Multiply-adds x 2 of one forward+backward pass (matrix products only; 3x the forward,
    less the input gradient of the first layer)."""
    fwd = 0
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
        fwd += f
        total += f * (2 if first else 3)
        first = False
    return total


def blas_peak(dtype, n=1024, repeat=10):
    a = np.random.default_rng(0).standard_normal((n, n)).astype(dtype)
    t = _median_time(lambda: a @ a, repeat)
    return 2 * n ** 3 / t


def step(model, batch, dtype=np.float32, repeat=20, seed=0, use_torch=True):
    """Time loss_and_grad of ``model`` at ``batch``; returns a dict of measurements."""
    net = load_model(model, dtype=dtype)
    rng = np.random.default_rng(seed)
    w = net.init_params(seed)
    g = np.empty_like(w)
    x = rng.standard_normal((batch,) + net.input_shape).astype(dtype)
    y = rng.integers(0, net.num_classes, batch)
    ours = _median_time(lambda: net.loss_and_grad(w, x, y, out=g), repeat)
    res = dict(model=model, batch=batch, dtype=np.dtype(dtype).name, refsgd_s=ours,
               flops=step_flops(net, batch), blas_peak=blas_peak(dtype), torch_s=None,
               torch_threads=None, torch_version=None)
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

            res.update(torch_s=_median_time(tstep, repeat), torch_threads=torch.get_num_threads(),
                       torch_version=torch.__version__)
    return res


def format_step(r):
    lines = [f"model {r['model']}, batch {r['batch']}, {r['dtype']}, forward+backward, median of repeats",
             f"  refsgd   {1e3 * r['refsgd_s']:9.2f} ms   {r['flops'] / r['refsgd_s'] / 1e9:7.1f} GFLOP/s"
             f"   ({100 * r['flops'] / r['refsgd_s'] / r['blas_peak']:.0f}% of the BLAS peak"
             f" {r['blas_peak'] / 1e9:.0f} GFLOP/s, 1024^2 GEMM)"]
    if r["torch_s"] is None:
        lines.append("  pytorch  not installed (pip install torch to compare)")
    else:
        lines.append(f"  pytorch  {1e3 * r['torch_s']:9.2f} ms   (torch {r['torch_version']}, "
                     f"{r['torch_threads']} threads)")
        lines.append(f"  ratio refsgd / pytorch = {r['refsgd_s'] / r['torch_s']:.2f}")
    from refsgd.nn import kernels
    lines.append(f"  threads: refsgd {kernels.chunk_threads()} (OpenBLAS and the conv chunks), "
                 f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}, {os.cpu_count()} CPUs. "
                 "Under MPI each rank gets one thread: compare with "
                 "OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 refsgd bench step ...")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------- overlap
def _sequential(tc, tau, tr):
    """Compute, then the all-reduce."""
    return tau * tc + tr


def _overlapped(tc, tau, tr):
    """Compute and the all-reduce side by side."""
    return max(tau * tc, tr)


def _per_layer(tc, tau, tr):
    """The all-reduce overlaps the last backward pass, taken as 2/3 of t_C."""
    return tau * tc + max(0.0, tr - 2 * tc / 3)


#: method -> (the model in words, its time of one iteration from t_C, tau and T_comm)
OVERLAP_MODELS = {
    "ssgd": ("compute + all-reduce (Rigazzi eq. 13, LAGA eq. 3)", _sequential),
    "ssgd-nag": ("compute + all-reduce (Sato Alg. 4)", _sequential),
    "ssgd-opt": ("compute + max(0, all-reduce - backward), backward ~ 2/3 t_C (LAGA eq. 4)", _per_layer),
    "dcs3gd": ("max(compute, all-reduce) (Rigazzi eq. 14)", _overlapped),
    "laga-sgd": ("max(compute, all-reduce) (LAGA eq. 6)", _overlapped),
    "laga-sgdm": ("max(compute, all-reduce) (LAGA eq. 6)", _overlapped),
    "laga-sgdn": ("max(compute, all-reduce) (LAGA eq. 6)", _overlapped),
}


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


def _mean_over_ranks(comm, values, skip):
    """Mean over ranks and over the iterations after the first ``skip``, in seconds."""
    mine = float(np.mean(values[skip:]))
    return comm.allreduce(mine) / comm.Get_size()


def _allreduce_time(comm, n, dtype, repeat=20):
    """Median seconds of a blocking Allreduce of n values (the slowest rank's median)."""
    from mpi4py import MPI
    a, b = np.ones(n, dtype), np.empty(n, dtype)
    times = []
    for _ in range(repeat + 3):
        comm.Barrier()
        t0 = time.perf_counter()
        comm.Allreduce(a, b, op=MPI.SUM)
        times.append(time.perf_counter() - t0)
    return comm.allreduce(float(np.median(times[3:])), op=MPI.MAX)


def _run_method(comm, algo, train_args, net, data, schedule, skip):
    """Train ``algo`` for the configured iterations; (compute, idle, wall) per iteration, rank mean."""
    from refsgd.algorithms import ALGORITHMS
    from refsgd.run import Run
    run = Run(comm, net, data, train_args, schedule, log=lambda *a: None)
    ALGORITHMS[algo][0](run)
    run.final_model()
    return tuple(_mean_over_ranks(comm, run.records[k], skip) for k in ("compute", "idle", "wall"))


def overlap(comm, args):
    """Iteration time of each method against its timing model, in this MPI world (collective).

    1. t_C: compute seconds per micro-batch of ``ssgd`` without a link;
    2. the link: ``--link`` as given, or from ``--ratio`` one whose Ring-AllReduce time for the
       gradient is ratio x t_C (latency ``--latency-us``), or none (the real network);
    3. T_comm: a blocking all-reduce of the gradient through that link, measured;
    4. every method of ``--algos`` with that link; the model of its iteration time from t_C and
       T_comm (OVERLAP_MODELS). Returns the rows (rank 0 prints them).
    """
    from refsgd.comm.link import Link, wrap
    from refsgd.optim import Constant
    net, tau, P = args.net, args.tau, comm.Get_size()
    data = args.dataset
    schedule = Constant(args.lr)
    # SSGD-NAG's lambda multiplies a sum over all samples of all workers (Sato Alg. 4)
    nag_schedule = Constant(args.lr / (P * args.batch * tau))

    def cfg(algo, poll):
        return argparse.Namespace(algo=algo, batch=args.batch, tau=tau, epochs=1, iterations=args.iterations,
                                  lr=args.lr, momentum=0.9 if algo != "laga-sgd" else 0.0, nesterov=False,
                                  momentum_form="mxnet" if algo == "dcs3gd" else "pytorch", weight_decay=0.0,
                                  wd_k=2.3, lambda0=0.2, seed=args.seed, eval_every=10 ** 9, log_every=10 ** 9,
                                  progress=False, poll=poll, trace=None)

    t_c = _run_method(comm, "ssgd", cfg("ssgd", False), net, data, schedule, args.skip)[0] / tau
    nbytes = net.num_params * net.dtype.itemsize
    link = args.link
    if link is None and args.ratio is not None:
        link = Link.for_time(args.ratio * t_c, nbytes, P, args.latency_us)
    lcomm = wrap(comm, link) if link else comm
    t_comm = _allreduce_time(lcomm, net.num_params, net.dtype)
    rows = []
    for name in args.algos:
        algo, _, flag = name.partition("+")
        compute, idle, wall = _run_method(lcomm, algo, cfg(algo, flag == "poll"), net, data,
                                          nag_schedule if algo == "ssgd-nag" else schedule, args.skip)
        what, model = OVERLAP_MODELS[algo]
        rows.append(dict(method=name, compute=compute, idle=idle, wall=wall, model=model(t_c, tau, t_comm),
                         model_text=what))
    return dict(t_c=t_c, t_comm=t_comm, link=link, nbytes=nbytes, world=P, rows=rows)


def format_overlap(r, args):
    ms = 1e3
    link = f"{r['link']} -- EMULATED" if r["link"] else "none (the real network of this run)"
    ranks = f"{r['world']} rank{'s' if r['world'] > 1 else ''}"
    lines = [f"{args.net.name} ({r['nbytes'] / 1e6:.2f} MB gradient, {args.net.dtype.name}), {ranks}, "
             f"batch {args.batch} x tau {args.tau}, {args.iterations} iterations (first {args.skip} dropped), "
             f"data {args.dataset.name}",
             f"  t_C     = {ms * r['t_c']:.2f} ms   compute of one micro-batch (ssgd without a link)",
             f"  T_comm  = {ms * r['t_comm']:.2f} ms   blocking all-reduce of the gradient, measured; link: {link}",
             f"  {'method':<15} {'compute':>8} {'idle':>8} {'other':>8} {'iteration':>10} {'model':>8} {'ratio':>6}"
             "   (ms per iteration, mean over ranks)"]
    for row in r["rows"]:
        other = row["wall"] - row["compute"] - row["idle"]
        lines.append(f"  {row['method']:<15} {ms * row['compute']:8.2f} {ms * row['idle']:8.2f} {ms * other:8.2f} "
                     f"{ms * row['wall']:10.2f} {ms * row['model']:8.2f} {row['wall'] / row['model']:6.2f}"
                     f"   {row['model_text']}")
    base = next((row for row in r["rows"] if row["method"] == "ssgd"), None)
    if base is not None:
        for row in r["rows"]:
            if row is not base:
                lines.append(f"  speed-up of {row['method']} over ssgd per iteration: {base['wall'] / row['wall']:.2f}x "
                             f"(models: {base['model'] / row['model']:.2f}x)")
    lines.append("  'other' is the rest of the iteration: the update, posting requests, bookkeeping. A method"
                 " overlaps when its idle time is below T_comm.")
    return "\n".join(lines)
