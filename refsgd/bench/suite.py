"""``bench all``: the whole performance table in one command, as markdown, CSV and a figure.

The single-process parts (the step against PyTorch and the BLAS peak) run here at one thread;
the MPI parts are ``refsgd bench overlap --json`` launched with ``mpiexec -n 1`` and ``-n 2``
(one BLAS/Numba thread per rank): the framework overhead without a link, the codecs, and every
method against its timing model at ratios 0.5, 1 and 2 of an emulated link.
"""

import csv
import importlib.metadata
import io
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

import numpy as np
from threadpoolctl import threadpool_info

from refsgd import busy, launchenv, mpilib
from refsgd.bench.measure import step
from refsgd.busy import one_thread
from refsgd.bench import models
from refsgd.errors import RefsgdError
from refsgd.files import check_folder, check_output, write_text
from refsgd.report import save_figure
from refsgd.version import __version__

#: the methods of the iteration table, at 2 ranks: every method with a timing model, as train runs
#: them (--poll on); one polled method of each paper that polls, DC-S3GD and LAGA, also with --no-poll
METHODS_2 = tuple(models.MODELS) + ("dcs3gd+nopoll", "laga-sgdm+nopoll")
#: at 1 rank (a parameter server needs a worker beside it)
METHODS_1 = tuple(m for m in models.MODELS if not models.MODELS[m].servers)
RATIOS = (0.5, 1.0, 2.0)
ONE_THREAD = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "NUMBA_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def launch(n, argv, timeout=900, via=None, shown=None):
    """``mpiexec -n n python -m refsgd ARGV`` (:mod:`refsgd.mpilib`: the launcher of mpi4py's MPI
    library, with its flags) with one BLAS/Numba thread per rank; its stdout. ``via(n, *program)``
    gives another launch's command line (a cluster's: :meth:`refsgd.reproduce.cluster.Cluster.command`),
    ``shown`` the command as errors name it. A failure is one RefsgdError with the command's last
    line of error output. The job dies with this process (:func:`refsgd.mpilib.run_job`: also when
    it is killed, or stopped by a signal meanwhile)."""
    cmd = (via or mpilib.command)(n, sys.executable, "-m", "refsgd", *argv)
    env = mpilib.environ(None, **ONE_THREAD)
    shown = shown or f"mpiexec -n {n} refsgd {' '.join(argv)}"
    try:
        r = mpilib.run_job(cmd, env=env, timeout=timeout)
    except FileNotFoundError:
        raise RefsgdError(f"cannot start {cmd[0]} (set $MPIEXEC to the MPI launcher)") from None
    except subprocess.TimeoutExpired:
        raise RefsgdError(f"`{shown}` did not finish in {timeout} s") from None
    if r.returncode != 0:
        last = [line for line in r.stderr.splitlines() if line.strip()]
        raise RefsgdError(f"`{shown}` failed (exit {r.returncode}): {last[-1] if last else 'no error output'}")
    return r.stdout


def _version(name):
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def _cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def _blas():
    info = [d for d in threadpool_info() if d.get("user_api") == "blas"]
    if info:
        d = info[0]
        return (f"{d.get('internal_api')} {d.get('version')} ({d.get('threading_layer')}, {d.get('architecture')}, "
                f"{d.get('num_threads')} thread(s) in this process)")
    try:
        cfg = np.show_config(mode="dicts")
        blas = cfg["Build Dependencies"]["blas"]
        return f"{blas.get('name')} {blas.get('version')}"
    except Exception:  # noqa: BLE001 -- an older numpy: no dictionary form
        return "unknown"


def machine(mpi_library=None):
    """The machine, the libraries and their versions, as (key, value) pairs."""
    affinity = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return [("machine", f"{_cpu_model()}, {os.cpu_count()} logical CPUs ({affinity} usable)"),
            ("OS", platform.platform()),
            ("Python", f"{platform.python_implementation()} {platform.python_version()}"),
            ("refsgd", __version__),
            ("numpy / numba / mpi4py", " / ".join(str(_version(p)) for p in ("numpy", "numba", "mpi4py"))),
            ("MPI library", mpi_library or "unknown"),
            ("torch", _version("torch") or "not installed"),
            ("BLAS", _blas()),
            ("threads", "1 BLAS/Numba thread in the step (torch too, torch.set_num_threads(1)); under mpiexec "
                        "OMP_NUM_THREADS=OPENBLAS_NUM_THREADS=NUMBA_NUM_THREADS=1 per rank"),
            ("launcher", str(mpilib.launcher()))]


# ------------------------------------------------------------------------------ the run
def output_paths(out):
    return {k: os.path.join(out, f"bench.{k}") for k in ("md", "csv", "png")}


def check_outputs(out, force):
    check_folder(out, "--out-dir")
    if not os.path.isdir(out):
        return
    for path in output_paths(out).values():
        check_output(path, "--out-dir", force)


def run_all(out, quick=False, force=False, log=None):
    """Measure everything and write ``out``/bench.md, .csv, .png; returns the markdown."""
    say = log or (lambda line: None)
    launchenv.one_process("bench all (it launches its own mpiexec)")
    check_outputs(out, force)
    load_before = busy.load_average()
    t0 = time.perf_counter()
    iterations, skip = (16, 4) if quick else (100, 10)
    steps = []
    shapes = [("mnist_mlp", 64)] if quick else [("mnist_mlp", 64), ("cifar10_cnn", 64)]
    with one_thread():
        for model, batch in shapes:
            say(f"step: {model}, batch {batch} ...")
            steps.append(step(model, batch, repeat=5 if quick else 20))
    common = ["--model", "mnist_mlp", "--batch", "64", "--iterations", str(iterations), "--skip", str(skip)]
    with tempfile.TemporaryDirectory(prefix="refsgd-bench-") as tmp:
        say("1 rank, no link ...")
        f1 = os.path.join(tmp, "one.json")
        launch(1, ["bench", "overlap", *common, "--algo", ",".join(METHODS_1), "--json", f1])
        say(f"2 ranks, no link and ratios {', '.join(f'{r:g}' for r in RATIOS)}, codecs ...")
        f2 = os.path.join(tmp, "two.json")
        launch(2, ["bench", "overlap", *common, "--algo", ",".join(METHODS_2), "--ratio",
                   ",".join(["0"] + [f"{r:g}" for r in RATIOS]), "--ranks-per-node", "1", "--codecs",
                   "--codec-repeat", "5" if quick else "20", "--json", f2])
        with open(f1) as f:
            one = json.load(f)
        with open(f2) as f:
            two = json.load(f)
    seconds = time.perf_counter() - t0
    load_after = busy.load_average()
    info = machine(two.get("mpi_library")) + [("load", busy.text(load_before, load_after))]
    crowded = busy.note(load_before, 2, 1)  # its largest world: 2 ranks of one thread
    if crowded:
        info.append(("note", crowded))
    result = dict(machine=info, steps=steps, one=one, two=two, seconds=seconds, quick=quick,
                  load_before=load_before, load_after=load_after)
    md = markdown(result)
    write_outputs(out, result, md)
    return md


# ------------------------------------------------------------------------------ the outputs
def _ms(v, digits=2):
    return "-" if v is None else f"{1e3 * v:.{digits}f}"


def _rows(run):
    return {row["method"]: row for row in run["rows"]}


def _ratio_text(s):
    """refsgd / PyTorch: the median of the side-by-side pairs and their range (refsgd.bench.measure.step)."""
    q = s.get("ratio_spread")
    if q is None:  # a result of an older refsgd: the ratio of the medians
        return f"{s['refsgd_s'] / s['torch_s']:.2f}"
    return f"{s['ratio']:.2f} ({q['min']:.2f}-{q['max']:.2f})"


def markdown(r):
    one, two = r["one"], r["two"]
    L = [f"# refsgd bench all{' (--quick)' if r['quick'] else ''}", ""]
    L += [f"- **{k}**: {v}" for k, v in r["machine"]]
    L += [f"- **run time**: {r['seconds']:.0f} s", ""]
    # -- step
    L += ["## Step: forward+backward against PyTorch and the BLAS peak (1 thread each)", "",
          "| model | batch | parameters | refsgd ms | GFLOP/s | % of BLAS peak | PyTorch ms | refsgd / PyTorch "
          "(median of the pairs timed in turn; range) | "
          "update ms | PyTorch update ms |",
          "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for s in r["steps"]:
        gf = s["flops"] / s["refsgd_s"] / 1e9
        torch = "-" if s["torch_s"] is None else f"{1e3 * s['torch_s']:.2f}"
        ratio = "-" if s["torch_s"] is None else _ratio_text(s)
        L.append(f"| {s['model']} | {s['batch']} | {s['num_params']:,d} | {1e3 * s['refsgd_s']:.2f} | {gf:.1f} | "
                 f"{100 * s['flops'] / s['refsgd_s'] / s['blas_peak']:.0f} | {torch} | {ratio} | "
                 f"{_ms(s.get('update_s'), 3)} | {_ms(s.get('torch_update_s'), 3)} |")
    if r["steps"]:
        L += ["", f"BLAS peak: {r['steps'][0]['blas_peak'] / 1e9:.1f} GFLOP/s (1024x1024 float32 GEMM, 1 thread). "
              "Update: SGD with momentum 0.9 over every parameter, timed right after a forward/backward pass "
              "(refsgd.optim.SGD's one fused pass; PyTorch's torch.optim.SGD, its default foreach form): its "
              "vectors come from memory, so it is bound by memory bandwidth, not by arithmetic."]
    # -- iterations against the models
    L += ["", f"## Iterations against the timing models ({two['model']}, batch {two['batch']}, {two['world']} ranks, "
          "EMULATED link)", "",
          f"t_C = {_ms(two['t_c'], 3)} ms (one micro-batch), C = {_ms(two['cpu_real'], 3)} ms (real all-reduce "
          f"of the {two['nbytes'] / 1e6:.2f} MB gradient, no link, fastest of 20: its CPU work here), "
          f"T_msg = {_ms(two['p2p'], 3)} ms, gamma = {1e9 * two['gamma']:.3f} ns/byte; {two['iterations']} "
          f"iterations per method, the first {two['skip']} and the last left out; daso as "
          f"{two['world'] // two['G']} virtual nodes of {two['G']} (B = {two['B']}, W = {two['W']}, cycling from "
          f"the first batch); {two.get('cores_per_rank', 2.0):g} "
          "core(s) per rank" + (" (Pipe-SGD's communication thread shares its rank's core, so its model puts the "
                                "reduction R on the computation's side)" if two.get("cores_per_rank", 2.0) < 2 else "")
          + ".", ""]
    linked = [run for run in two["runs"] if run["link"]]
    for run in linked:
        L.append(f"- ratio {run['ratio']:g}: {run['link']}; T_comm measured {_ms(run['t_comm'], 3)} ms "
                 f"(model {_ms(run['t_ar_model'], 3)})")
    L += ["", "| method | ratio | compute | idle | other | iteration | model | measured / model | model at t_C | "
          "measured / model at t_C | model |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for run in linked:
        for row in run["rows"]:
            L.append(f"| {row['method']} | {run['ratio']:g} | {_ms(row['compute'])} | {_ms(row['idle'])} | "
                     f"{_ms(row['other'])} | {_ms(row['wall'])} | {_ms(row['model'])} | "
                     f"{row['wall'] / row['model']:.2f} | {_ms(row['model_at_t_c'])} | "
                     f"{row['wall'] / row['model_at_t_c']:.2f} | {row['model_text']} |")
    L += ["", "ms per iteration, mean over the workers. 'model': the formula with the compute and the update measured in "
          "that run (does the method hide what it communicates behind what it computed? a parameter server's "
          "update stays t_up); 'model at t_C': with the compute of the quiet SSGD run and t_up (the gap adds how "
          "much the method's own threads and waits slow its compute on this machine). t_up (the update alone, "
          "timed right after a forward/backward pass as a run meets it, ms): "
          + ", ".join(f"{a} {_ms(v, 3)}" for a, v in sorted(two["t_up"].items()))
          + ". R = C here (the CPU work of the real collective), X the link's Ring-AllReduce time; dcasgd's "
          "Send/Recv take T_msg = alpha + n beta each on the link."]
    # -- codecs
    if two.get("codecs"):
        c0 = two["codecs"][0]
        mb = c0["wire_bytes"] / 1e6
        L += ["", f"## Codecs ({two['world']} ranks, {mb:.2f} MB of float32, shared memory, no link)", "",
              "| codec | wire bytes | encode ms | decode ms | ring all-reduce ms | ring step ms | MPI operator "
              "all-reduce ms | encode GB/s | decode GB/s | (enc+ar+dec) / plain |",
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for c in two["codecs"]:
            if c["encode"] is None:
                L.append(f"| {c['codec']} | {c['wire_bytes']:,d} | - | - | {_ms(c['allreduce'], 3)} | - | - | - | - "
                         "| 1.00 |")
                continue
            L.append(f"| {c['codec']} | {c['wire_bytes']:,d} | {_ms(c['encode'], 3)} | {_ms(c['decode'], 3)} | "
                     f"{_ms(c['allreduce'], 3)} | {_ms(c['op'], 3)} | {_ms(c.get('allreduce_op'), 3)} | "
                     f"{mb / 1e3 / c['encode']:.2f} | "
                     f"{mb / 1e3 / c['decode']:.2f} | "
                     f"{(c['encode'] + c['allreduce'] + c['decode']) / c0['allreduce']:.2f} |")
    # -- framework overhead
    plain1 = _rows(one["runs"][0])
    plain2 = _rows(next(run for run in two["runs"] if not run["link"]))
    L += ["", f"## Framework overhead ({two['model']}, batch {two['batch']}, no link)", "",
          "'other' = wall - compute - idle per iteration: the method's update and everything the framework "
          "adds (the records, the loss check, the status line; MPI's work to start a non-blocking collective "
          "is idle). 'update': the time in the method's update, measured in the run (`with run.clock.update():` "
          "around the listing's update and scaling lines; its vectors come from memory, so it is bound by "
          "memory bandwidth); 'rest' = other - update, the framework's own share.",
          "", "| method | 1 rank: compute ms | other ms | update ms | rest ms | rest % of compute | "
          "2 ranks: compute ms | other ms | update ms | rest ms | rest % of compute |",
          "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for name in METHODS_2:
        cells = []
        for row in (plain1.get(name), plain2.get(name)):
            if row is None:
                cells += ["-"] * 5
            else:
                rest = row["other"] - row["update_run"]
                cells += [_ms(row["compute"]), _ms(row["other"]), _ms(row["update_run"]), _ms(rest),
                          f"{100 * rest / row['compute']:.1f}" if row["compute"] > 0 else "-"]
        L.append(f"| {name} | " + " | ".join(cells) + " |")
    L += ["", "The parameter-server methods' figures are the means over their workers (the server computes no "
          "gradient)."]
    return "\n".join(L) + "\n"


def csv_text(r):
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["section", "name", "ranks", "ratio", "metric", "value", "unit"])
    for k, v in r["machine"]:
        w.writerow(["machine", k, "", "", "text", v, ""])
    w.writerow(["machine", "run time", "", "", "seconds", f"{r['seconds']:.1f}", "s"])
    for s in r["steps"]:
        name = f"{s['model']} batch {s['batch']}"
        w.writerow(["step", name, 1, "", "refsgd", f"{1e3 * s['refsgd_s']:.4f}", "ms"])
        w.writerow(["step", name, 1, "", "gflops", f"{s['flops'] / s['refsgd_s'] / 1e9:.3f}", "GFLOP/s"])
        w.writerow(["step", name, 1, "", "blas_peak", f"{s['blas_peak'] / 1e9:.3f}", "GFLOP/s"])
        w.writerow(["step", name, 1, "", "of_blas_peak", f"{100 * s['flops'] / s['refsgd_s'] / s['blas_peak']:.2f}",
                    "%"])
        if s["torch_s"] is not None:
            w.writerow(["step", name, 1, "", "pytorch", f"{1e3 * s['torch_s']:.4f}", "ms"])
            w.writerow(["step", name, 1, "", "refsgd_over_pytorch", f"{s.get('ratio') or s['refsgd_s'] / s['torch_s']:.4f}",
                        ""])
            for key in ("p25", "p75", "min", "max"):
                if s.get("ratio_spread"):
                    w.writerow(["step", name, 1, "", f"refsgd_over_pytorch_{key}", f"{s['ratio_spread'][key]:.4f}", ""])
        for key in ("update_s", "torch_update_s"):
            if s.get(key) is not None:
                w.writerow(["step", name, 1, "", key[:-2], f"{1e3 * s[key]:.4f}", "ms"])
    two = r["two"]
    for run in two["runs"]:
        if not run["link"]:
            continue
        w.writerow(["link", run["link_spec"], two["world"], run["ratio"], "t_comm", f"{1e3 * run['t_comm']:.4f}", "ms"])
        for row in run["rows"]:
            for key in ("compute", "idle", "other", "wall", "model", "model_at_t_c", "update"):
                w.writerow(["iteration", row["method"], two["world"], run["ratio"], key, f"{1e3 * row[key]:.4f}", "ms"])
            w.writerow(["iteration", row["method"], two["world"], run["ratio"], "measured_over_model",
                        f"{row['wall'] / row['model']:.4f}", ""])
    for c in two.get("codecs") or []:
        for key in ("encode", "decode", "allreduce", "op", "allreduce_op"):
            if c.get(key) is not None:
                w.writerow(["codec", c["codec"], two["world"], "", key, f"{1e3 * c[key]:.4f}", "ms"])
        w.writerow(["codec", c["codec"], two["world"], "", "wire_bytes", c["wire_bytes"], "bytes"])
    for res in (r["one"], two):
        run = next(x for x in res["runs"] if not x["link"])
        for row in run["rows"]:
            for key in ("compute", "other", "update_run"):
                w.writerow(["overhead", row["method"], res["world"], "", key, f"{1e3 * row[key]:.4f}", "ms"])
            if row["compute"] > 0:
                w.writerow(["overhead", row["method"], res["world"], "", "other_of_compute",
                            f"{100 * row['other'] / row['compute']:.2f}", "%"])
                w.writerow(["overhead", row["method"], res["world"], "", "rest_of_compute",
                            f"{100 * (row['other'] - row['update_run']) / row['compute']:.2f}", "%"])
    return buf.getvalue()


def figure(r):
    from matplotlib.figure import Figure  # noqa: PLC0415 matplotlib: bench's measurements do without it
    two = r["two"]
    fig = Figure(figsize=(16, 10))
    gs = fig.add_gridspec(2, 3)
    ax = fig.add_subplot(gs[0, 0])
    names = [s["model"] for s in r["steps"]]
    x = np.arange(len(names))
    def quartiles(key):  # whiskers from the first to the third quartile of the repeats
        spreads = [s.get(f"{key}_spread") or {} for s in r["steps"]]
        mid = [1e3 * (s[f"{key}_s"] or 0) for s in r["steps"]]
        return np.array([[m - 1e3 * q.get("p25", m / 1e3), 1e3 * q.get("p75", m / 1e3) - m]
                         for m, q in zip(mid, spreads)]).T
    ax.bar(x - 0.2, [1e3 * s["refsgd_s"] for s in r["steps"]], 0.4, label="refsgd (median; quartiles)",
           yerr=quartiles("refsgd"), capsize=4)
    ax.bar(x + 0.2, [1e3 * (s["torch_s"] or 0) for s in r["steps"]], 0.4, label="PyTorch (median; quartiles)",
           yerr=quartiles("torch"), capsize=4)
    for i, s in enumerate(r["steps"]):
        top = (s.get("refsgd_spread") or {}).get("p75", s["refsgd_s"])  # above the whisker
        ax.annotate(f"{100 * s['flops'] / s['refsgd_s'] / s['blas_peak']:.0f}% of peak", (i - 0.2, 1e3 * top),
                    xytext=(0, 2), textcoords="offset points", ha="center", va="bottom", fontsize=7)
    ax.set_xticks(x)
    ax.set_xticklabels([f"{s['model']}\nbatch {s['batch']}" for s in r["steps"]], fontsize=8)
    ax.set(ylabel="ms per forward+backward (1 thread)", title="step")
    ax.legend(fontsize=8)

    ax = fig.add_subplot(gs[0, 1:])
    linked = [run for run in two["runs"] if run["link"]]
    methods = [row["method"] for row in linked[0]["rows"]] if linked else []
    width = 0.8 / max(1, len(linked))
    colors = {"compute": "#4C72B0", "idle": "#DD8452", "other": "#B8B8B8"}
    for j, run in enumerate(linked):
        rows = _rows(run)
        xs = np.arange(len(methods)) + (j - (len(linked) - 1) / 2) * width
        bottom = np.zeros(len(methods))
        for part in ("compute", "idle", "other"):
            vals = np.array([1e3 * max(0.0, rows[m][part]) for m in methods])
            ax.bar(xs, vals, width * 0.95, bottom=bottom, color=colors[part], label=part if j == 0 else None)
            bottom += vals
        ax.scatter(xs, [1e3 * rows[m]["model"] for m in methods], marker="_", s=120, color="k", zorder=3,
                   label="model (this run's compute)" if j == 0 else None)
        ax.scatter(xs, [1e3 * rows[m]["model_at_t_c"] for m in methods], marker="_", s=120, color="#C44E52",
                   zorder=3, label="model at t_C" if j == 0 else None)
        for xi in xs:
            ax.text(xi, 0, f"{run['ratio']:g}", ha="center", va="bottom", fontsize=5, color="w")
    ax.set_xticks(np.arange(len(methods)))
    ax.set_xticklabels(methods, rotation=30, ha="right", fontsize=8)
    ratios = ", ".join(f"{run['ratio']:g}" for run in linked)
    ax.set(ylabel="ms per iteration", title=f"iteration split at ratios {ratios} (bars left to right), "
           f"{two['world']} ranks, EMULATED link")
    ax.legend(fontsize=8)

    ax = fig.add_subplot(gs[1, 0])
    codecs = [c for c in (two.get("codecs") or []) if c["encode"] is not None]
    if codecs:
        x = np.arange(len(codecs))
        plain = two["codecs"][0]["allreduce"]
        for k, (key, label) in enumerate((("encode", "encode"), ("decode", "decode"), ("allreduce", "all-reduce"))):
            ax.bar(x + (k - 1) * 0.27, [1e3 * c[key] for c in codecs], 0.27, label=label)
        ax.axhline(1e3 * plain, color="k", lw=0.8, ls="--", label="plain f32 all-reduce")
        ax.set_xticks(x)
        ax.set_xticklabels([c["codec"] for c in codecs])
        ax.set(ylabel="ms", title=f"codecs, {two['codecs'][0]['wire_bytes'] / 1e6:.2f} MB, {two['world']} ranks")
        ax.legend(fontsize=8)

    ax = fig.add_subplot(gs[1, 1:])
    plain1 = _rows(r["one"]["runs"][0])
    plain2 = _rows(next(run for run in two["runs"] if not run["link"]))
    x = np.arange(len(METHODS_2))

    def pct(rows, m, key):
        row = rows.get(m)
        if row is None or row["compute"] <= 0:
            return np.nan
        return 100 * (row["update_run"] if key == "update" else row["other"] - row["update_run"]) / row["compute"]
    for dx, rows, label in ((-0.2, plain1, "1 rank"), (0.2, plain2, "2 ranks")):
        up = np.array([pct(rows, m, "update") for m in METHODS_2])
        rest = np.array([pct(rows, m, "rest") for m in METHODS_2])
        ax.bar(x + dx, up, 0.4, label=f"{label}: update", alpha=0.6)
        ax.bar(x + dx, rest, 0.4, bottom=np.nan_to_num(up), label=f"{label}: rest (framework)")
    ax.axhline(5, color="k", lw=0.8, ls=":")
    ax.set_xticks(x)
    ax.set_xticklabels(METHODS_2, rotation=30, ha="right", fontsize=8)
    ax.set(ylabel="% of compute", title="other = update + rest, no link (dotted: 5 %)")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.suptitle(f"refsgd bench all: {r['machine'][0][1]}", fontsize=10)
    fig.tight_layout()
    return fig


def write_outputs(out, r, md):
    os.makedirs(out, exist_ok=True)
    paths = output_paths(out)
    write_text(paths["md"], md, "the markdown table")
    write_text(paths["csv"], csv_text(r), "the CSV table")
    save_figure(figure(r), paths["png"])
