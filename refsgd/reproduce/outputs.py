"""What ``refsgd reproduce`` writes: a claim's markdown and figure (its JSON is the result
dictionary itself), and the index of every claim in a folder, one line per claim."""

import glob
import json
import math
import os
import textwrap

from refsgd.errors import RefsgdError
from refsgd.files import write_text
from refsgd.report import save_figure
from refsgd.reproduce import claims as _claims
from refsgd.reproduce.measure import fmt

INDEX_TITLE = "# The papers' claims, tested"
#: the titles an index that reproduce wrote had before (kept up to date as its own)
OLD_TITLES = ("# The papers' claims, reproduced",)


def write(path, text):
    write_text(path, text, "the result")


def _value(v):
    return fmt(v) if isinstance(v, float) else str(v)


def variants(hp, records):
    """(rows, common): rows [(variant, ranks, the options it has beyond the shared set)] of a
    claim's runs, once each (the runs of every seed differ only in --seed); common, the options
    not in ``hp`` that every run but a calibration has with the same value (a link, --eval-every,
    set at run time)."""
    measured = [run.get("options", {}) for run in records if not run.get("variant", "").startswith("calibration")]
    common = {k: v for k, v in (measured[0] if measured else {}).items()
              if k not in hp and all(str(o.get(k)) == str(v) for o in measured)}
    out, seen = [], set()
    for run in records:
        own = {k: v for k, v in run.get("options", {}).items()
               if (k not in hp or str(hp[k]) != str(v)) and not (k in common and str(common[k]) == str(v))}
        row = (run.get("variant", run["command"]), run["ranks"],
               " ".join(f"{k}={v}" for k, v in own.items()) or "(the shared set only)")
        if row not in seen:
            seen.add(row)
            out.append(row)
    return out, common


def _split_tables(series):
    """A panel whose values are dictionaries (a time split) as a markdown table."""
    lines = []
    for panel, by_label in series.items():
        first = next(iter(by_label.values()))
        if not isinstance(first, dict):
            continue
        cols = list(first)
        lines += ["", f"{panel} (seed 1):", "", "| variant | " + " | ".join(cols) + " |",
                  "|---|" + "---:|" * len(cols)]
        lines += [f"| {label} | " + " | ".join(_value(parts[c]) for c in cols) + " |"
                  for label, parts in by_label.items()]
    return lines


def _quote_lines(r):
    lines = ["**The paper, verbatim.**", ""]
    for where, about, text in r.get("quotes", []):
        lines += [f"{where} ({about}):", ""]
        lines += [f"> {line}" if line else ">" for line in text.splitlines()]
        lines.append("")
    return lines


def _check_lines(r):
    """Every check: both bounds, where they come from, each seed's number and status."""
    lines = ["| check | kind | band (partly) | from | the null | per seed | seeds inside | status |",
             "|---|---|---|---|---|---|---|---|"]
    for c in r["checks"]:
        band = f"[{c['lo']:.4g}, {c['hi']:.4g}]" + (f" ([{c['partial'][0]:.4g}, {c['partial'][1]:.4g}])"
                                                    if c.get("partial") else "")
        vals = ", ".join(fmt(v) for v in c.get("values", [])) or "-"
        tested = [i for i, st in enumerate(c.get("seeds", [])) if st != "not testable here"]
        inside = (f"{', '.join(str(i) for i in c.get('passing', [])) or 'none'} of {len(tested)}"
                  if tested else "-")
        kind = c.get("kind", "")
        if kind and kind != "baseline sanity" and not c.get("powered", True):
            kind += " (an equivalence: the null passes it)"
        elif kind == "baseline sanity":
            kind += " (shown, not in the verdict)"
        null = fmt(c["null"]) if c.get("null") is not None else "-"
        lines.append(f"| {c['what']} ({c['number']}{', timing' if c.get('timing') else ''}) | {kind} | {band} | "
                     f"{c['source']} | {null} | {vals} | {inside} | {c['status']} |")
    return lines


def markdown(r):
    lines = [f"# {r['name']}: {r['paper']}, {r['where']}", "", f"**Claim.** {r['claim']}", ""]
    lines += _quote_lines(r)
    lines += [f"**The paper's number.** {r['paper_number']}", ""]
    if r.get("regime"):
        lines += [f"**Regime.** {r['regime']}", ""]
    if r.get("derivation"):
        lines += [f"**The regime, derived from the paper's numbers.** {r['derivation']}", ""]
        measured = [(k[len("ratio_measured"):], v) for k, v in r["numbers"].items() if k.startswith("ratio_measured")]
        if measured:
            lines += ["The ratio measured beside the derived one (per seed): " + "; ".join(
                f"{tag.lstrip('_') or 'the run'}: derived {fmt(r['numbers'].get('ratio_derived' + tag, {}).get('mean'))}"
                f", measured {', '.join(fmt(x) for x in v['seeds'])}" for tag, v in measured), ""]
        elif r["numbers"]:
            lines += ["The runs on this page were made before the derived regime: its checks are not measured "
                      "here (`refsgd reproduce " + r["name"] + "` runs them).", ""]
    if r.get("ours"):
        lines += [f"**Ours (derived, not the paper's).** {r['ours']}", ""]
    smoke = " (--quick: a smoke test of the claim's path, not a result)" if r["quick"] else ""
    again = (f" (re-judged {r['rejudged']} from the numbers of the run of {r['date']} by the verdict code of "
             "issue 42: the checks' kinds, nulls and bands as the claim has them now)") if r.get("rejudged") else ""
    lines += [f"**Verdict{smoke}{again}: {r['verdict']}.** {r['why']}", ""]
    lines += _check_lines(r) + [""]
    lines += [f"> {w}" for w in r["warnings"]] + ([""] if r["warnings"] else [])
    lines += [f"Run: `refsgd reproduce {r['name']}` with {r['ranks']} ranks, {r['seeds']} seed(s), data "
              f"{r['data']}" + (f", --link {r['link']}" if r["link"] else "") + (", --quick" if r["quick"] else ""),
              "", "Hyperparameters shared by every variant:", ""]
    lines += [f"- {k}: {v}" for k, v in r["hyperparameters"].items()]
    if r["same_for_all"]:
        lines += ["- set at run time, the same for every variant: "
                  + " ".join(f"{k}={v}" for k, v in r["same_for_all"].items())]
    lines += ["", f"How the paper chose them: {r['tuning']}.", ""]
    if r["variants"]:
        lines += ["Each run's options beyond the shared set:", "", "| run | ranks | its own options |", "|---|---:|---|"]
        lines += [f"| {v} | {p} | {o} |" for v, p, o in r["variants"]]
    if r.get("diverged"):
        lines += ["", "Runs that diverged (a result: the other runs and seeds are kept):", ""]
        lines += [f"- {d['variant']}: {d['diverged']} (`{d['command']}`)" for d in r["diverged"]]
    if r["numbers"]:
        seeds = max(len(v["seeds"]) for v in r["numbers"].values())
        lines += ["", "| number | the paper | " + " | ".join(f"seed {i}" for i in range(seeds)) + " | mean |",
                  "|---|---|" + "---:|" * (seeds + 1)]
        for k, v in r["numbers"].items():
            lines.append(f"| {k} | {r['paper_values'].get(k, '')} | "
                         + " | ".join(fmt(x) for x in v["seeds"]) + f" | {fmt(v['mean'])} |")
    if r["series"]:
        lines += _split_tables(r["series"][0])
    if r.get("discussion"):
        lines += ["", f"**Why the numbers are what they are.** {r['discussion']}"]
    if r.get("untested"):
        lines += ["", "**The paper's further headlines**, each as the kind of check it can be here, and why not "
                      "more (a model prediction is refsgd's model at the paper's scale, not a measurement):", "",
                  "| the paper's headline | here | model prediction at the paper's scale |",
                  "|---|---|---|"]
        lines += [f"| {what} | {why} | {pred or '-'} |" for what, why, pred in r["untested"]]
    if r["at_scale"]:
        lines += ["", f"**At small scale.** {r['at_scale']}."]
    if r["scale_prediction"]:
        lines += ["", "`refsgd bench scale`'s prediction at the paper's scale (t_C of this model measured here) "
                      "beside the paper's number:", "", "| at the paper's scale | predicted | the paper |",
                  "|---|---:|---|"]
        lines += [f"| {what} | {_value(v)} | {paper} |" for what, v, paper in r["scale_prediction"]]
    lines += ["", f"Time: {r['seconds']:.0f} s for {r['seeds']} seed(s); the claim's budget is "
                  f"{r['budget_s']} s per seed on 2 idle cores at one rank per core.", ""]
    if r["runs"]:
        lines += ["Runs (load averages 1/5/15 min before -> after):", ""]
    for run in r["runs"]:
        lines.append(f"- `{run['command']}` ({run['seconds']:.1f} s, load {run['load_before']} -> "
                     f"{run['load_after']}{', shared with an earlier run' if run.get('shared') else ''}"
                     f"{'; DIVERGED: ' + run['diverged'] if run.get('diverged') else ''})")
    m = r["machine"]
    lines += ["", f"Machine: {m.get('machine')}; {m.get('OS')}; Python {m.get('Python')}; refsgd {m.get('refsgd')}; "
                  f"numpy/numba/mpi4py {m.get('numpy / numba / mpi4py')}; launcher {m.get('launcher')}. "
                  f"{r['date']}, {r['seconds']:.0f} s.", ""]
    return "\n".join(lines)


def figure(r, path):
    """Draw the claim's series as the paper draws them and write ``path``."""
    try:
        import matplotlib  # noqa: PLC0415 matplotlib: the runs and the tables do without it
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # noqa: PLC0415 matplotlib
        from matplotlib.ticker import FuncFormatter  # noqa: PLC0415 matplotlib
    except ImportError:
        raise RefsgdError("refsgd reproduce draws its figures with matplotlib: pip install matplotlib") from None

    claim = _claims.BY_NAME[r["name"]]
    title = f"{r['name']}: {r['paper']}, {r['where']} -- {r['verdict']}" + (" (QUICK smoke run)" if r["quick"] else "")
    if not r["series"]:  # not testable here: nothing was run, the figure says why
        fig, ax = plt.subplots(figsize=(7.5, 3.0))
        ax.axis("off")
        ax.text(0.5, 0.5, "\n".join(textwrap.wrap(f"not testable here: {r['why']}", 90)), ha="center", va="center",
                fontsize="small", transform=ax.transAxes)
        fig.suptitle("\n".join(textwrap.wrap(title, 90)), fontsize="small")
        save_figure(fig, path)
        plt.close(fig)
        return
    panels = list(r["series"][0])
    n = len(r["series"])

    def mean(get):  # model and measurement aggregated alike: the mean over the seeds
        return sum(get(s) for s in r["series"]) / n

    fig, axes = plt.subplots(1, len(panels), figsize=(max(7.5, 5.5 * len(panels)), 4.8), squeeze=False)
    for ax, panel in zip(axes[0], panels):
        labels = list(r["series"][0][panel])
        first = r["series"][0][panel][labels[0]]
        split = isinstance(first, dict)
        bars = split or claim.figure == "bars" or not isinstance(first[0], list)
        # a measurement and its model share a colour (their labels end alike: "..., ratio 6")
        keys = list(dict.fromkeys(label.split(", ")[-1] for label in labels))
        paired = len(keys) < len(labels) and not bars
        # bars of one method share a colour across settings ("laga, tau 2, ratio 6"): 12 bars
        # would otherwise run out of matplotlib's 10 colours and repeat one
        methods = list(dict.fromkeys(label.split(", ")[0] for label in labels))
        by_method = bars and not split and len(methods) < len(labels)
        groups = len(keys) if paired else len(methods) if by_method else len(labels)
        for i, label in enumerate(labels):
            if paired:
                k = keys.index(label.split(", ")[-1])
            else:
                k = methods.index(label.split(", ")[0]) if by_method else i
            color = f"C{k}" if groups <= 10 else plt.get_cmap("tab20")(k % 20)
            if split:  # Figure 4's third column: the measured split stacked, the model beside it
                bottom = 0.0
                for j, part in enumerate(("compute", "codec", "update", "communication")):
                    v = mean(lambda s: s[panel][label][part])  # noqa: B023 mean() calls it at once, in this iteration
                    ax.bar(i - 0.2, v, 0.4, bottom=bottom, color=f"C{j}", label=part if i == 0 else None)
                    bottom += v
                ax.bar(i + 0.2, mean(lambda s: s[panel][label]["model"]), 0.4, color="grey", alpha=0.5, hatch="//",  # noqa: B023 mean() calls it at once, in this iteration
                       label="model (eq. 2 / eq. 4), mean over seeds" if i == 0 else None)
                continue
            if bars:
                ax.bar(i - 0.2, mean(lambda s: s[panel][label][0]), 0.4, color=color,  # noqa: B023 mean() calls it at once, in this iteration
                       label="measured (mean over seeds)" if i == 0 else None)
                ax.bar(i + 0.2, mean(lambda s: s[panel][label][1]), 0.4, color=color, alpha=0.35, hatch="//",  # noqa: B023 mean() calls it at once, in this iteration
                       label="model (mean over seeds)" if i == 0 else None)
                continue
            for k, s in enumerate(r["series"]):
                x, y = s[panel][label]
                shown = label + (" (seed 0; fainter: the other seeds)" if n > 1 else "") + (" (diverged)" if not x else "")
                ax.plot(x, y, color=color, alpha=1.0 if k == 0 else 0.35, linestyle="--" if "model" in label else "-",
                        marker="o" if claim.figure == "lines" else None, label=shown if k == 0 else None)
        if bars:
            ax.set_xticks(range(len(labels)), labels, rotation=30 if len(labels) > 3 else 0, fontsize="small")
        if claim.figure == "logx" and not bars:
            ax.set_xscale("log")
            # plain numbers at 1, 2 and 5 of each decade: matplotlib labels every minor tick of a
            # span under a decade in scientific notation, and "3x10^2 4x10^2" ran into each other
            plain = FuncFormatter(lambda v, _: f"{v:g}" if round(v / 10 ** math.floor(math.log10(v))) in (1, 2, 5)
                                  else "")
            ax.xaxis.set_major_formatter(plain)
            ax.xaxis.set_minor_formatter(plain)
        xlabel, ylabel = claim.axes if isinstance(claim.axes, tuple) else claim.axes.get(panel, ("", ""))
        if bars:
            xlabel = ""  # the bars are named on the axis
        if split:
            ylabel = "ms per iteration"
        ax.set_xlabel(xlabel, fontsize="small")
        ax.set_ylabel(ylabel, fontsize="small")
        ax.set_title("\n".join(textwrap.wrap(panel, 60)), fontsize="small")
        ax.grid(alpha=0.3)
        ax.legend(fontsize="x-small")
    fig.suptitle("\n".join(textwrap.wrap(title, 30 * max(3, len(panels)))), fontsize="small")
    fig.tight_layout()
    save_figure(fig, path)
    plt.close(fig)


def index_path(out_dir):
    """The index of a folder of results: ``D/index.md``, inside the folder (nothing outside it is
    written unless :func:`beside_path` says so)."""
    return os.path.join(os.path.normpath(os.path.abspath(out_dir)), "index.md")


def beside_path(out_dir):
    """``D.md`` beside ``D`` where that already is an index reproduce wrote (docs/results.md beside
    docs/results/: ``--out-dir docs/results`` keeps it up to date), else None."""
    d = os.path.normpath(os.path.abspath(out_dir))
    if os.path.dirname(d) == d:
        return None
    path = d + ".md"
    return path if _is_index(path) else None


def index_paths(out_dir):
    return [p for p in (index_path(out_dir), beside_path(out_dir)) if p]


def _is_index(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.readline().rstrip("\n") in (INDEX_TITLE,) + OLD_TITLES
    except OSError:
        return False


def check_index(out_dir, force):
    """An index that exists and that reproduce did not write is replaced only with --force."""
    path = index_path(out_dir)
    if os.path.exists(path) and not force and not _is_index(path):
        raise RefsgdError(f"--out-dir: {path} exists and is not an index that refsgd reproduce wrote; "
                          "move it or give --force to replace it")


def _per_seed(r):
    """The tested paper-number checks' numbers on every seed, with their bands and statuses."""
    out = []
    for c in r["checks"]:
        if c.get("kind") != "the paper's number" or c["status"] == "not testable here":
            continue
        vals = ", ".join(fmt(v) for v in c.get("values", []))
        out.append(f"{c['number']}: {vals} in [{fmt(c['lo'])}, {fmt(c['hi'])}]? {c['status']}")
    return "; ".join(out) or "no paper number tested"


def _short(why):
    """A check's reason cut to its first clause (the page has the rest)."""
    return why.split(" (")[0].split("; ")[0]


def verdict_line(r):
    """The verdict in one short line: the outcome and the paper number it rests on, or, where none
    was tested, the first reason why."""
    powered = [c for c in r["checks"] if c.get("powered")]
    rests = [f"{fmt(c['paper_value'])} ({c['number']})" for c in powered
             if c.get("kind") == "the paper's number" and c["status"] != "not testable here"]
    word = r["verdict"]
    if rests:
        line = f"{word}: rests on the paper's " + ", ".join(rests)
    elif word == "model conformance only":
        line = f"{word}: no paper number tested"
    elif word != "not testable here":
        line = f"{word}: the paper's model (model conformance); no paper number tested"
    elif r.get("untestable"):
        line = f"{word}: {r['untestable'].split(', ')[0].split('; ')[0]}"
    else:
        first = sorted(powered, key=lambda c: c.get("kind") != "the paper's number")
        line = f"{word}: " + (_short(first[0].get("why", "")) if first else "no check with power against the null")
    return line + (" (--quick smoke test, not a result)" if r["quick"] else "")


def index_line(r, folder):
    """A claim's row; ``folder`` is where its page is, relative to the index."""
    runs = f"{r['seeds']}" + (" quick" if r["quick"] else "")
    regime = r.get("regime") or ""
    return (f"| [{r['name']}]({_link(folder, r['name'])}) | {r['paper_number']} | {regime} | {_per_seed(r)} | "
            f"{verdict_line(r)} | {runs} |")


def _link(folder, name):
    return f"{name}.md" if folder == "." else f"{folder}/{name}.md"


def index_text(out_dir, index=None):
    """The index of the claims whose JSON is in ``out_dir``, written at ``index`` (default
    :func:`index_path`): a row per claim of --list, in its order ("not run yet", without a link,
    where the folder has none)."""
    found = {}
    for path in glob.glob(os.path.join(out_dir, "*.json")):
        try:
            with open(path) as f:
                r = json.load(f)
        except (OSError, ValueError):
            continue
        if isinstance(r, dict) and r.get("name") in _claims.BY_NAME and "quotes" in r:
            found[r["name"]] = r
    folder = os.path.relpath(os.path.abspath(out_dir), os.path.dirname(index or index_path(out_dir)))
    shown = os.path.normpath(out_dir)
    results = list(found.values())
    head = [INDEX_TITLE, "",
            f"Written by `refsgd reproduce all --out-dir {shown}` (or NAME for one claim; each run rewrites this "
            f"index from {os.path.join(folder, '*.json')}). refsgd: each check's number on every seed, its band "
            "(both bounds) and its status; the claim's page quotes the paper, states the regime and gives every "
            "number, the shared hyperparameters, the runs and the machine. Each check is of one kind: the paper's "
            "number (tested in the paper's regime, or one derived from its own numbers through its own model), model "
            "conformance (the measurement against the paper's model), or baseline sanity (shown, never in the "
            "verdict). A claim is reproduced only when a paper number with power against the null (the method "
            "equal to its baseline) was tested and every tested check holds; model conformance only when every "
            "tested check holds but no paper number was tested; not reproduced when every powered check fails; "
            "partly reproduced in between; not testable here when no powered check could be tested.", ""]
    busy = [c.name for c in _claims.CLAIMS if c.name in found
            and any(w.startswith("the machine is busy") for w in found[c.name]["warnings"])]
    notes = sorted({w for r in results for w in r["warnings"] if not w.startswith("the machine is busy")})
    if busy:
        notes.append(f"the machine was busy (load average at least its cores) before {', '.join(busy)}: their "
                     "timing numbers measure that load as much as the methods")
    head += [f"> {w}" for w in notes] + ([""] if notes else [])
    if not results:
        head += [f"No claim has been run into {shown} yet: every row below is the paper's number alone.", ""]
    head += ["| claim | the paper | regime | the paper's number, refsgd's per seed | verdict | seeds |",
             "|---|---|---|---|---|---|"]
    rows = [index_line(found[c.name], folder) if c.name in found else
            f"| {c.name} | {c.paper_number} | {c.regime} | not run yet | - | 0 |"
            for c in _claims.CLAIMS]
    return "\n".join(head + rows) + "\n"
