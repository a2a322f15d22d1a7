"""``bench step``: one process's forward+backward step of a model (refsgd and, where installed,
PyTorch), its FLOP rate against the BLAS peak, and the machine's load while it ran."""

import os

import numpy as np

from refsgd import busy

from refsgd.bench import models
from refsgd.bench.models import interleaved_times, median_time
from refsgd.nn import kernels, load_model
from refsgd.optim import SGD


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
    opt = SGD(net.num_params, dtype, momentum=0.9)
    update = median_time(lambda: opt.step(w, g, 1e-3), repeat, before=ours)
    res = dict(model=net.name, batch=batch, dtype=np.dtype(dtype).name, num_params=net.num_params,
               flops=step_flops(net, batch), blas_peak=blas_peak(dtype), torch_s=None, update_s=update,
               torch_update_s=None, torch_threads=None, torch_version=None, torch_skipped=not use_torch,
               torch_spread=None, ratio=None, ratio_spread=None, repeat=repeat)
    tstep = None
    if use_torch:
        try:
            import torch  # noqa: PLC0415 torch: optional, and slow to import
            from refsgd import torch_twin  # noqa: PLC0415 torch: it imports torch
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
    lines.append(f"  threads: refsgd {kernels.chunk_threads()} (OpenBLAS and the conv chunks), "
                 f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}, {os.cpu_count()} CPUs. "
                 "Under MPI each rank gets one thread: compare with "
                 "OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 refsgd bench step ...")
    lines += _load_lines(r, ranks=1, threads=kernels.chunk_threads())
    return "\n".join(lines)


def _load_lines(r, ranks, threads):
    """The load average of a measurement (``load_before``, ``load_after``), and the note when the
    machine was busy (refsgd.busy)."""
    if "load_before" not in r:
        return []
    out = [f"  {busy.text(r['load_before'], r.get('load_after'))}"]
    crowded = busy.note(r["load_before"], ranks, threads, how=busy.ONE_THREAD_ENV)
    if crowded:
        out.append(f"  note: {crowded}")
    return out
