"""``refsgd reproduce``: the papers' claims, run at small scale, with the paper's number beside
refsgd's and a verdict computed from the numbers.

``refsgd reproduce --list`` lists the claims (:mod:`refsgd.reproduce.claims`); ``refsgd reproduce
NAME`` (or ``all``) runs each claim's variants with one shared set of hyperparameters, once per
seed, as ``mpiexec -n P refsgd train ... --out F.h5`` (:mod:`refsgd.reproduce.runner`), and writes

* ``D/NAME.md``: the claim, the paper's number, the hyperparameters, every number (mean and
  min-max over the seeds, the paper's value beside it where it has one), the verdict and why
  (:mod:`refsgd.reproduce.verdict`), and, where a laptop cannot show the claim, why and
  ``refsgd bench scale``'s prediction at the paper's scale;
* ``D/NAME.json``: the same numbers (each seed's too), the commands, the versions, the machine,
  the load before and after each run;
* ``D/NAME.png``: the figure, drawn as the paper draws it (matplotlib).

and, for ``all``, ``D/index.md``: one line per claim (the paper's number, ours, the verdict).
"""

import datetime
import json
import math
import os
import tempfile
import time

from refsgd import RefsgdError
from refsgd.reproduce import claims as _claims
from refsgd.reproduce.runner import Runs, Setup, cores, load_average
from refsgd.reproduce.verdict import spread, verdict

CLAIMS = _claims.CLAIMS


def list_text():
    lines = []
    for c in CLAIMS:
        lines += [f"{c.name}", f"    {c.paper}, {c.where}", f"    claim: {c.sentence}", f"    paper: {c.paper_number}"]
        if c.at_scale:
            lines.append("    (needs the paper's scale to show fully: the output says what holds at small scale)")
    return "\n".join(lines)


def names(name):
    """The claims that ``name`` ("all" or a claim's name) runs; RefsgdError with the closest name."""
    if name == "all":
        return list(CLAIMS)
    if name in _claims.BY_NAME:
        return [_claims.BY_NAME[name]]
    import difflib
    close = difflib.get_close_matches(name, list(_claims.BY_NAME), 1)
    raise RefsgdError(f"no claim {name!r}" + (f" (did you mean {close[0]!r}?)" if close else "")
                      + "; `refsgd reproduce --list` lists them")


def fmt(v):
    """How a number is written in the markdown (the JSON holds it unrounded)."""
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "n/a"
    return f"{v:.4g}"


def warnings_for(setup):
    out = []
    if setup.ranks > cores():
        out.append(f"{setup.ranks} ranks on {cores()} cores: the ranks share cores, so the timing claims "
                   "(iteration times, idle, speed-ups) are meaningless in this run; the accuracy claims hold")
    load = load_average()
    if load and load[0] >= cores():
        out.append(f"the machine is busy (1-minute load average {load[0]:g} on {cores()} cores) before this "
                   "reproduce starts: the timing claims measure that load as much as the methods")
    if setup.quick:
        out.append("--quick: fewer epochs and iterations, one seed: a smoke test, not a result")
    return out


def run_claim(claim, setup, runs):
    """Run ``claim`` for every seed; the result dictionary the outputs are written from."""
    runs.start_claim()
    hp = claim.hyper(setup)
    per_seed, series = [], []
    t0 = time.perf_counter()
    for seed in range(setup.seeds):
        numbers, curves = claim.measure(runs, setup, hp, seed)
        per_seed.append(numbers)
        series.append(curves)
    numbers = spread(per_seed)
    means = {k: v["mean"] for k, v in numbers.items()}
    word, why, statuses = verdict(claim.checks, means)
    scale = None
    if claim.scale is not None:
        try:
            scale = claim.scale(setup, hp, means)
        except RefsgdError as e:
            scale = {"not available": str(e)}
    from refsgd.bench import suite
    return {"name": claim.name, "paper": claim.paper, "where": claim.where, "claim": claim.sentence,
            "paper_number": claim.paper_number, "verdict": word, "why": why,
            "checks": [{"number": c.key, "what": c.what, "op": c.op, "holds_at": c.full, "partly_at": c.partial,
                        "status": s} for c, s in zip(claim.checks, statuses)],
            "hyperparameters": hp, "ranks": setup.ranks, "seeds": setup.seeds, "quick": setup.quick,
            "data": setup.data or "embedded digits", "link": setup.link,
            "warnings": warnings_for(setup), "at_scale": claim.at_scale, "scale_prediction": scale,
            "numbers": numbers, "paper_values": claim.paper_values, "series": series,
            "runs": runs.records, "seconds": round(time.perf_counter() - t0, 2),
            "machine": dict(suite.machine()), "load_at_end": load_average(),
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}


def markdown(r):
    checks = {c["number"]: c for c in r["checks"]}
    lines = [f"# {r['name']}: {r['paper']}, {r['where']}", "",
             f"**Claim.** {r['claim']}", "", f"**The paper.** {r['paper_number']}", "",
             f"**Verdict: {r['verdict']}.** {r['why']}", ""]
    for w in r["warnings"]:
        lines.append(f"> {w}")
    if r["warnings"]:
        lines.append("")
    lines += [f"Run: `refsgd reproduce {r['name']}` with {r['ranks']} ranks, {r['seeds']} seed(s), data "
              f"{r['data']}" + (f", --link {r['link']}" if r["link"] else ""), "",
              "Hyperparameters shared by every variant:", ""]
    lines += [f"- {k}: {v}" for k, v in r["hyperparameters"].items()]
    lines += ["", "| number | the paper | refsgd (mean) | min | max | check |", "|---|---|---:|---:|---:|---|"]
    for k, v in r["numbers"].items():
        c = checks.get(k)
        check = f"{c['status']} ({c['op']} {c['holds_at']:g})" if c else ""
        lines.append(f"| {k} | {r['paper_values'].get(k, '')} | {fmt(v['mean'])} | {fmt(v['min'])} | "
                     f"{fmt(v['max'])} | {check} |")
    if r["at_scale"]:
        lines += ["", f"**At small scale.** A laptop cannot show this claim fully: {r['at_scale']}."]
    if r["scale_prediction"]:
        lines += ["", "`refsgd bench scale`'s prediction at the paper's scale (t_C of this model measured here):", ""]
        lines += [f"- {k}: {fmt(v) if isinstance(v, float) else v}" for k, v in r["scale_prediction"].items()]
    lines += ["", "Runs (load averages 1/5/15 min before -> after):", ""]
    for run in r["runs"]:
        lines.append(f"- `{run['command']}` ({run['seconds']:.1f} s, load {run['load_before']} -> "
                     f"{run['load_after']}{', shared with an earlier run' if run.get('shared') else ''})")
    m = r["machine"]
    lines += ["", f"Machine: {m.get('machine')}; {m.get('OS')}; Python {m.get('Python')}; refsgd {m.get('refsgd')}; "
                  f"numpy/numba/mpi4py {m.get('numpy / numba / mpi4py')}; launcher {m.get('launcher')}. "
                  f"{r['date']}, {r['seconds']:.0f} s.", ""]
    return "\n".join(lines)


def figure(r, path):
    """Draw the claim's series as the paper draws them and write ``path``."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise RefsgdError("refsgd reproduce draws its figures with matplotlib: pip install matplotlib") from None
    from refsgd.report import save_figure
    claim = _claims.BY_NAME[r["name"]]
    panels = list(r["series"][0])
    fig, axes = plt.subplots(1, len(panels), figsize=(max(7.5, 5.5 * len(panels)), 4.6), squeeze=False)
    for ax, panel in zip(axes[0], panels):
        labels = list(r["series"][0][panel])
        bars = claim.figure == "bars" or not isinstance(r["series"][0][panel][labels[0]][0], list)
        for i, label in enumerate(labels):
            color = f"C{i % 10}"
            if bars:
                vals = [s[panel][label] for s in r["series"]]
                meas = sum(v[0] for v in vals) / len(vals)
                ax.bar(i - 0.2, meas, 0.4, color=color, label="measured (mean over seeds)" if i == 0 else None)
                ax.bar(i + 0.2, vals[0][1], 0.4, color=color, alpha=0.35, hatch="//", label="model" if i == 0 else None)
                continue
            for k, s in enumerate(r["series"]):
                x, y = s[panel][label]
                ax.plot(x, y, color=color, alpha=1.0 if k == 0 else 0.35,
                        marker="o" if claim.figure == "lines" else None, label=label if k == 0 else None)
        if bars:
            ax.set_xticks(range(len(labels)), labels, rotation=30 if len(labels) > 3 else 0, fontsize="small")
        if claim.figure == "logx":
            ax.set_xscale("log")
        ax.set_title(panel, fontsize="small")
        ax.grid(alpha=0.3)
        ax.legend(fontsize="x-small")
    import textwrap
    title = f"{r['name']}: {r['paper']}, {r['where']} -- {r['verdict']}" + (" (QUICK smoke run)" if r["quick"] else "")
    fig.suptitle("\n".join(textwrap.wrap(title, 30 * max(3, len(panels)))), fontsize="small")
    fig.tight_layout()
    save_figure(fig, path)
    plt.close(fig)


def _write(path, text):
    from refsgd.files import atomic_path, write_bytes
    with atomic_path(path, what="the result") as tmp:
        write_bytes(tmp, text.encode())


def index_line(r):
    checks = {c["number"]: c for c in r["checks"]}
    ours = "; ".join(f"{k} {fmt(r['numbers'][k]['mean'])} [{fmt(r['numbers'][k]['min'])}, "
                     f"{fmt(r['numbers'][k]['max'])}]" for k in checks if k in r["numbers"])
    return f"| [{r['name']}]({r['name']}.md) | {r['paper_number']} | {ours} | {r['verdict']} |"


def reproduce(name, setup, out_dir, force=False, log=None):
    """Run the claims ``name`` names and write their outputs in ``out_dir``; returns the results."""
    from refsgd import failure
    from refsgd.files import check_folder, check_output
    if (failure.launcher_size() or 1) > 1:
        raise RefsgdError("reproduce launches its own mpiexec: run it without mpiexec")
    chosen = names(name)
    check_folder(out_dir, "--out-dir")
    if os.path.isdir(out_dir):  # a new folder holds nothing to replace
        for c in chosen:
            for ext in ("md", "json", "png"):
                check_output(os.path.join(out_dir, f"{c.name}.{ext}"), "--out-dir", force)
        if name == "all":
            check_output(os.path.join(out_dir, "index.md"), "--out-dir", force)
    _claims.check_matplotlib()
    os.makedirs(out_dir, exist_ok=True)
    say = log or (lambda line: None)
    for w in warnings_for(setup):
        say(f"warning: {w}")
    results = []
    with tempfile.TemporaryDirectory(prefix="refsgd-reproduce-") as work:
        setup.workdir, setup.log = work, say
        runs = Runs(setup)
        for c in chosen:
            say(f"{c.name}: {c.sentence}")
            r = run_claim(c, setup, runs)
            base = os.path.join(out_dir, c.name)
            _write(base + ".json", json.dumps(r, indent=1, default=float) + "\n")
            _write(base + ".md", markdown(r))
            figure(r, base + ".png")
            say(f"{c.name}: {r['verdict']} ({r['seconds']:.0f} s): {base}.md")
            results.append(r)
    if name == "all":
        _write(os.path.join(out_dir, "index.md"), index_text(results, setup))
    return results


def index_text(results, setup):
    head = ["# The papers' claims, reproduced", "",
            f"`refsgd reproduce all --ranks {setup.ranks} --seeds {setup.seeds}"
            + (" --quick" if setup.quick else "") + "`" + (f" (data {setup.data})" if setup.data else "")
            + "; ours: each checked number, mean [min, max] over the seeds.", ""]
    head += [f"> {w}" for w in warnings_for(setup)] + ([""] if warnings_for(setup) else [])
    head += ["| claim | the paper | refsgd | verdict |", "|---|---|---|---|"]
    return "\n".join(head + [index_line(r) for r in results]) + "\n"
