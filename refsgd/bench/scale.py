"""``bench scale``: each method's iteration time and speed-up over SSGD at 8 to 4096 ranks, from
the measured compute of one rank and a modelled link (the formulas: :mod:`refsgd.bench`)."""

import dataclasses
import json
import os
import tempfile

import numpy as np

from refsgd import launchenv
from refsgd.bench import models
from refsgd.bench.measure import step, str_link
from refsgd.bench.suite import launch
from refsgd.busy import one_thread, usable_cores  # in busy, not here: suite uses it too
from refsgd.comm.link import Link
from refsgd.errors import RefsgdError
from refsgd.files import check_output
from refsgd.nn import load_model
from refsgd.report import plot_format, save_figure

#: the world sizes of the table when --ranks is not given
RANKS = tuple(2 ** k for k in range(3, 13))
#: the methods of the table, in this order
METHODS = tuple(models.MODELS)


@dataclasses.dataclass
class Inputs:
    """What the predictions are made from."""

    model: str
    batch: int
    nbytes: int
    num_params: int
    dtype: str
    t_c: float
    t_c_measured: bool
    gamma: float
    t_up: dict
    link: object
    local_link: object
    G: int
    B: int

    def costs(self, G=None, t_c=None, t_up=None):
        return models.Costs(t_c=self.t_c if t_c is None else t_c, tau=1, t_up=self.t_up if t_up is None else t_up,
                            G=self.G if G is None else G, B=self.B, W=models.daso_wait(self.B))

    def network(self):
        return models.Network(self.nbytes, "model", link=self.link, local_link=self.local_link, gamma=self.gamma)


def prepare(model, dtype, link, local_link, t_c, ranks_per_node, ranks, plot=None, force=False):
    """Check every option of ``bench scale`` before anything is measured (the links and --ranks as
    given on the command line, text or None); returns ``(link, local_link, ranks)``: the links as
    :class:`refsgd.comm.link.Link` objects and the world sizes as a list. RefsgdError on bad input."""
    launchenv.one_process("bench scale (--check launches its own mpiexec)")
    link = Link.parse(link)
    local_link = Link.parse(local_link, "--local-link")
    if t_c is not None and not (np.isfinite(t_c) and t_c > 0):
        raise RefsgdError(f"--t-c expects seconds > 0, got {t_c:g}")
    G = ranks_per_node
    if ranks is None:
        ranks = [p for p in RANKS if p % G == 0]
    else:
        try:
            ranks = [int(t) for t in ranks.split(",")]
        except ValueError:
            raise RefsgdError(f"--ranks expects integers separated by commas, got {ranks!r}") from None
    bad = [p for p in ranks if p < 2 or p % G]
    if bad or not ranks:
        raise RefsgdError(f"--ranks: every world size must be >= 2 and a multiple of --ranks-per-node {G}, "
                          f"got {', '.join(map(str, bad)) or 'none'}")
    if plot:
        check_output(plot, "--plot", force)
        plot_format(plot)  # matplotlib there and the format known, before measuring
    load_model(model, dtype=np.dtype(dtype))  # an unknown model: one line, before measuring
    return link, local_link, ranks


def measure_inputs(model, batch, link, local_link, G, B=models.DASO_B, t_c=None, dtype=np.float32, repeat=20):
    """t_C (one forward+backward at ``batch``, one BLAS/Numba thread, unless given), gamma and
    every method's t_up (each right after a forward/backward pass), measured in this process."""
    net = load_model(model, dtype=dtype)
    with one_thread():
        measured = t_c is None
        if measured:
            t_c = step(model, batch, dtype, repeat=repeat, use_torch=False)["refsgd_s"]
        n = net.num_params
        gamma = models.reduction_gamma(n, dtype)
        # each update timed right after a forward/backward pass, as a run meets it (refsgd bench overlap)
        rng = np.random.default_rng(0)
        w, g = net.init_params(0), np.empty(n, net.dtype)
        x = rng.standard_normal((batch,) + tuple(net.input_shape)).astype(net.dtype)
        y = rng.integers(0, net.num_classes, batch)
        t_up = {a: models.update_seconds(a, n, dtype, world=2, B=B, before=lambda: net.loss_and_grad(w, x, y, out=g))
                for a in METHODS}
    return Inputs(model=net.name, batch=batch, nbytes=n * net.dtype.itemsize, num_params=n, dtype=net.dtype.name,
                  t_c=t_c, t_c_measured=measured, gamma=gamma, t_up=t_up, link=link, local_link=local_link, G=G, B=B)


def predict(inputs, ranks, methods=METHODS):
    """{method: [(seconds per iteration, speed-up over ssgd in samples/s) per world size]}."""
    costs, net = inputs.costs(), inputs.network()
    return {a: [(models.iteration_time(a, costs, net, p), models.speedup(a, costs, net, p, inputs.batch))
                for p in ranks] for a in methods}


def link_text(link):
    return f"latency {link.latency_us:g} us, {link.gbit_s:g} Gbit/s (MODELLED, not measured)"


def format_scale(inputs, ranks, table):
    ms = 1e3
    src = "measured, 1 thread" if inputs.t_c_measured else "given"
    lines = [f"predicted iteration time and speed-up over SSGD: {inputs.model} ({inputs.nbytes / 1e6:.2f} MB gradient,"
             f" {inputs.dtype}), batch {inputs.batch} per worker",
             f"  t_C = {ms * inputs.t_c:.3f} ms ({src}); gamma = {1e9 * inputs.gamma:.3f} ns/byte (measured); "
             "t_up per method measured (ms): " + ", ".join(f"{a} {ms * inputs.t_up[a]:.3f}" for a in inputs.t_up),
             f"  link between nodes: {link_text(inputs.link)}",
             f"  within a node (daso): {link_text(inputs.local_link)}; {inputs.G} ranks per node; B = {inputs.B}, "
             f"W = {models.daso_wait(inputs.B)}",
             "  T_AR(p) = 2(p-1) alpha + 2((p-1)/p) n beta + ((p-1)/p) n gamma (Pipe-SGD eq. 5, S = 0); "
             "T_PS(p) = (p-1)(alpha + n beta)",
             "", "ms per iteration"]
    head = f"  {'method':<10}" + "".join(f"{p:>9}" for p in ranks)
    lines.append(head)
    for a, vals in table.items():
        lines.append(f"  {a:<10}" + "".join(f"{ms * t:9.2f}" for t, _ in vals))
    lines += ["", "speed-up over ssgd (samples per second; a parameter server's rank computes none)", head]
    for a, vals in table.items():
        lines.append(f"  {a:<10}" + "".join(f"{s:9.2f}" for _, s in vals))
    lines.append("  model per method: " + "; ".join(f"{a}: {models.MODELS[a].text}" for a in table))
    return "\n".join(lines)


def plot(inputs, ranks, table, path):
    """Iteration time and speed-up against the world size, written atomically to ``path``; returns
    the matplotlib Figure."""
    from matplotlib.figure import Figure  # noqa: PLC0415 matplotlib: only --plot needs it
    from matplotlib.ticker import LogFormatter, NullLocator  # noqa: PLC0415 matplotlib: as above
    fig = Figure(figsize=(13, 5))
    a, b = fig.subplots(1, 2)
    colors = [f"C{i}" for i in range(10)] + ["k", "0.55"]   # tab10, then two greys
    for i, (m, vals) in enumerate(table.items()):
        style = "--" if models.MODELS[m].servers else "-"
        kw = dict(marker="o", ms=3, label=m, color=colors[i % len(colors)])
        a.plot(ranks, [1e3 * t for t, _ in vals], style, **kw)
        b.plot(ranks, [s for _, s in vals], style, **kw)
    a.set(xscale="log", yscale="log", xlabel="ranks", ylabel="ms per iteration (model)",
          title=f"{inputs.model}, batch {inputs.batch}, t_C {1e3 * inputs.t_c:.2f} ms")
    b.set(xscale="log", xlabel="ranks", ylabel="speed-up over SSGD (samples/s)",
          title=f"link {inputs.link.latency_us:g} us, {inputs.link.gbit_s:g} Gbit/s (modelled); "
                f"{inputs.G} ranks per node")
    for ax in (a, b):
        ax.set_xticks(ranks)
        ax.set_xticklabels([str(p) for p in ranks], fontsize=7)
        ax.xaxis.set_minor_locator(NullLocator())  # a log axis labels minor ticks (6x10^1) among the ranks
        ax.grid(alpha=0.3)
    # plain numbers (6, 20, 300) on the log axis of times, minor ticks labelled only where few decades show
    a.yaxis.set_major_formatter(LogFormatter(labelOnlyBase=False))
    a.yaxis.set_minor_formatter(LogFormatter(labelOnlyBase=False, minor_thresholds=(1, 0.4)))
    b.axhline(1.0, color="k", lw=0.8)
    b.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    save_figure(fig, path)
    return fig


# ------------------------------------------------------------------------------ --check
def timed_iterations(iterations, skip):
    """How many of a run's ``iterations`` bench overlap's means cover: the first ``skip`` (warm-up)
    and the last (it evaluates the model) left out, when that leaves any (as _mean_over_ranks)."""
    return iterations - skip - 1 if iterations - 1 > skip else iterations - skip


def check_run(inputs, p, iterations, skip, methods=METHODS):
    """(DASO's G, the ``bench overlap`` arguments) of --check's run at ``p`` ranks: G = 1 at 2 ranks
    (2 virtual nodes of 1), else ``inputs.G`` but at least 2 nodes, with the local link."""
    G = 1 if p <= 2 else min(max(1, inputs.G), p // 2)
    argv = ["bench", "overlap", "--model", inputs.model, "--batch", str(inputs.batch), "--dtype",
            inputs.dtype, "--iterations", str(iterations), "--skip", str(skip), "--algo", ",".join(methods),
            "--link", str_link(inputs.link), "--ranks-per-node", str(G), "--sync-every", str(inputs.B)]
    if G > 1 and inputs.local_link is not None:
        argv += ["--local-link", str_link(inputs.local_link)]
    return G, argv


def check(inputs, iterations=60, skip=None, worlds=(2, 4), methods=METHODS, log=print, cores=None):
    """Run ``bench overlap`` with the same link at 2 and 4 ranks (launched with mpiexec) and
    compare each method's measured iteration time with the prediction; returns the rows. ``skip``
    (default: 10, or a fifth of a shorter run) warm-up iterations are left out of the means. A
    world larger than the usable ``cores`` (default this process's) is not run: its ranks would
    take turns on the cores, and the times would be those of the turns, not of the method."""

    if skip is None:
        skip = min(10, iterations // 5)
    cores = usable_cores() if cores is None else cores
    timed = timed_iterations(iterations, skip)
    rows = []
    with tempfile.TemporaryDirectory(prefix="refsgd-scale-") as tmp:
        for p in worlds:
            if p > cores:
                log(f"  {p} ranks: not measured: they would oversubscribe the {cores} usable core(s) here (a "
                    f"timing needs a core per rank)")
                continue
            G, argv = check_run(inputs, p, iterations, skip, methods)
            out = os.path.join(tmp, f"check-{p}.json")
            log(f"  measuring {p} ranks: mpiexec -n {p} refsgd {' '.join(argv)} ... (each method's mean "
                f"over {timed} of its {iterations} iterations: the first {skip} warm up"
                f"{', the last evaluates' if iterations - 1 > skip else ''})")
            launch(p, argv + ["--json", out])
            with open(out) as f:
                r = json.load(f)
            net = inputs.network()
            ours = inputs.costs(G=G)
            theirs = inputs.costs(G=G, t_c=r["t_c"], t_up=r["t_up"])
            for row in r["runs"][0]["rows"]:
                a = row["algo"]
                rows.append(dict(method=row["method"], ranks=p, measured=row.get("wall_median", row["wall"]),
                                 measured_p25=row.get("wall_p25"), measured_p75=row.get("wall_p75"),
                                 predicted=models.iteration_time(a, ours, net, p),
                                 at_run=models.iteration_time(a, theirs, net, p), emulated_model=row["model"],
                                 t_c_run=r["t_c"], G=G, timed=timed, iterations=iterations))
    return rows


def format_check(rows, inputs):
    ms = 1e3
    timed = f", {rows[0]['timed']} of {rows[0]['iterations']} iterations timed" if rows and "timed" in rows[0] else ""
    lines = [f"check against runs on this machine with the same link EMULATED ({inputs.link.latency_us:g} us, "
             f"{inputs.link.gbit_s:g} Gbit/s), ms per iteration{timed}:",
             f"  {'method':<12} {'ranks':>5} {'measured':>9} {'quartiles':>15} {'predicted':>9} {'meas/pred':>9} "
             f"{'its quartiles':>13} {'at run t_C':>10} "
             f"{'meas/that':>9} {'emulated':>9} {'meas/emul':>9} {'run t_C':>8}"]
    for r in rows:
        lo, hi = r.get("measured_p25"), r.get("measured_p75")
        q = f"{ms * lo:.3f}-{ms * hi:.3f}" if lo is not None else "-"
        qr = f"{lo / r['predicted']:.2f}-{hi / r['predicted']:.2f}" if lo is not None else "-"
        lines.append(f"  {r['method']:<12} {r['ranks']:>5} {ms * r['measured']:9.3f} {q:>15} {ms * r['predicted']:9.3f} "
                     f"{r['measured'] / r['predicted']:9.2f} {qr:>13} {ms * r['at_run']:10.3f} "
                     f"{r['measured'] / r['at_run']:9.2f} {ms * r['emulated_model']:9.3f} "
                     f"{r['measured'] / r['emulated_model']:9.2f} {ms * r['t_c_run']:8.3f}")
    lines.append("  measured: the median iteration (mean over the workers) and its quartiles, whose spread shows "
                 "how far a busy machine moves the ratio; "
                 "predicted: this table's model with its t_C; 'at run t_C': the same formulas with the t_C and "
                 "t_up measured in that run (ranks share this machine's cores); 'emulated': bench overlap's model of "
                 "that run (the compute measured in the method's own run, the emulated link's semantics: the real "
                 "collective first, then held until its transfer plus its reduction, X + R, as this table's T_AR). daso at 2 ranks: 2 virtual nodes of 1; at 4: 2 of 2.")
    return "\n".join(lines)
