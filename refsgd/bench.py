"""``refsgd bench``: speed measured side by side, reported as ratios (not tests).

``bench step`` times one forward+backward pass (``loss_and_grad``) of a model at a batch
size, the same network in PyTorch on the same CPU when torch is installed, and a square
matrix product as the machine's BLAS peak; it prints medians and ratios.
"""

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
